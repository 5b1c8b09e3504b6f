// Registrations (hmc_net_mr_t) and unpacked remote keys (hmc_net_rkey_t).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hmc/plugin/net.h"
#include "wire.h"

namespace hmc::ibverbs {

class Context;
class Device;
class Endpoint;

struct MemRegion {
  Device* dev = nullptr;
  ibv_mr* mr = nullptr;  // nullptr for a zero-length region
  uintptr_t base = 0;
  size_t len = 0;
  uint32_t access = 0;            // HMC_NET_ACCESS_*
  std::vector<ibv_mr*> rail_mrs;  // the same memory on dev's rails (Context::rails_of), host only
  bool device = false;  // device memory (by dma-buf): reached through mr only, never by pointer

  bool covers(const void* buf, size_t n) const {
    uintptr_t b = reinterpret_cast<uintptr_t>(buf);
    return b >= base && b - base <= len && n <= len - (b - base);
  }
};

struct RemoteKey {
  Device* dev = nullptr;
  PackedKey key;
};

// reg_mr: by pointer (host memory), or by dma-buf where the device takes them.
hmc_plugin_status_t register_region(Context& c, int dev, const hmc_net_mem_desc_t* mem,
                                    MemRegion** out, void* rkey, size_t* rkey_len);
void destroy_region(Context& c, MemRegion* m);

}  // namespace hmc::ibverbs
