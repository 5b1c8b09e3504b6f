// Memory registration for the net plugin tests: the only code of the suite that builds an
// hmc_net_mem_desc_t, calls reg_mr or dereg_mr, or reads hmc_net_device_props_t.mem_kinds, so
// that a change of how the net ABI describes memory touches this file alone. No gtest
// dependency.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "hmc/plugin/net.h"

namespace net_test {

// Kinds of memory in the suite's own words. kOther stands for whatever the ABI reports that this
// file does not know.
enum class MemKind { kHost, kDmabuf, kCuda, kRocm, kOther };

// The kinds of memory device props can read and write directly.
inline std::set<MemKind> device_mem_kinds(const hmc_net_device_props_t& props) {
  std::set<MemKind> kinds;
  uint32_t bits = props.mem_kinds;
  const std::pair<uint32_t, MemKind> known[] = {{HMC_NET_MEM_HOST, MemKind::kHost},
                                                {HMC_NET_MEM_DMABUF, MemKind::kDmabuf},
                                                {HMC_NET_MEM_CUDA, MemKind::kCuda},
                                                {HMC_NET_MEM_ROCM, MemKind::kRocm}};
  for (const auto& k : known) {
    if (bits & k.first) kinds.insert(k.second);
    bits &= ~k.first;
  }
  if (bits != 0) kinds.insert(MemKind::kOther);
  return kinds;
}

// Whether the plugin offers memory registration (the slots register_memory and
// deregister_memory call).
inline bool offers_registration(const hmc_net_plugin_v1_t* t) {
  return t->reg_mr != nullptr && t->dereg_mr != nullptr;
}

// Registers [addr, addr + len), memory of `kind`, for use on device dev of ctx with `access`
// (HMC_NET_ACCESS_*). Device memory is described without a dma-buf fd or device ordinal (the
// tests only register it to see it refused). On SUCCESS *mr is the registration and *rkey holds
// the packed remote key; otherwise *rkey is empty. Returns reg_mr's status.
inline hmc_plugin_status_t register_memory(const hmc_net_plugin_v1_t* t, hmc_net_ctx_t* ctx,
                                           int dev, MemKind kind, void* addr, size_t len,
                                           uint32_t access, hmc_net_mr_t** mr,
                                           std::vector<uint8_t>* rkey) {
  (void)dev;  // ABI v1 registers per context, for every device of it
  hmc_net_mem_desc_t d{};
  d.hdr = HMC_ABI_HEADER_INIT(hmc_net_mem_desc_t);
  d.addr = addr;
  d.len = len;
  switch (kind) {
    case MemKind::kHost: d.mem_kind = HMC_NET_MEM_HOST; break;
    case MemKind::kDmabuf: d.mem_kind = HMC_NET_MEM_DMABUF; break;
    case MemKind::kCuda: d.mem_kind = HMC_NET_MEM_CUDA; break;
    case MemKind::kRocm: d.mem_kind = HMC_NET_MEM_ROCM; break;
    case MemKind::kOther: d.mem_kind = 1u << 31; break;
  }
  d.access = access;
  d.dmabuf_fd = -1;
  d.device_ordinal = -1;
  rkey->assign(HMC_NET_RKEY_MAX, 0);
  size_t n = 0;
  hmc_plugin_status_t st = t->reg_mr(ctx, &d, mr, rkey->data(), &n);
  rkey->resize(st == HMC_PLUGIN_SUCCESS ? n : 0);
  return st;
}

// Releases a registration made by register_memory on the same ctx and dev.
inline hmc_plugin_status_t deregister_memory(const hmc_net_plugin_v1_t* t, hmc_net_ctx_t* ctx,
                                             int dev, hmc_net_mr_t* mr) {
  (void)dev;
  return t->dereg_mr(ctx, mr);
}

}  // namespace net_test
