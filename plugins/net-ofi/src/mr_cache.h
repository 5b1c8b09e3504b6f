// Registrations of local buffers the core passes without an mr, for providers that need a
// local descriptor on every operation (FI_MR_LOCAL, or HMC_OFI_MR_LOCAL=1). Page-aligned
// ranges, reference counted while operations use them, least recently used evicted beyond the
// capacity (HMC_OFI_MR_CACHE). Capacity 0 registers per operation.
//
// Caveat, as with every user-space registration cache: memory freed and mapped again at the
// same address while its registration is cached keeps the old registration. Providers that
// pin pages (verbs) would then move the old pages; applications that recycle buffers should
// register them (reg_mr) or set HMC_OFI_MR_CACHE=0.
#pragma once

#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hmc/plugin/common.h"

namespace hmc::ofi {

class Device;

struct CachedMr {
  uintptr_t start = 0;
  uintptr_t end = 0;
  fid_mr* mr = nullptr;
  void* desc = nullptr;
  int refs = 0;
  uint64_t last_use = 0;
  bool cached = true;  // false: closed when the last operation using it ends
};

class MrCache {
 public:
  MrCache(Device& dev, size_t capacity) : dev_(dev), capacity_(capacity) {}
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // A descriptor covering [buf, buf + len), len > 0. *held must be passed to release() once
  // the operation ended.
  hmc_plugin_status_t acquire(const void* buf, size_t len, void** desc, CachedMr** held);
  void release(CachedMr* e);
  size_t size() const { return entries_.size(); }

 private:
  void evict();

  Device& dev_;
  size_t capacity_;
  uint64_t clock_ = 0;
  std::vector<CachedMr*> entries_;
};

}  // namespace hmc::ofi
