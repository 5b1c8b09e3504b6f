// Memory registration for the net plugin tests: the only code of the suite that builds an
// hmc_net_mem_desc_t, calls reg_mr or dereg_mr, or reads hmc_net_device_props_t.mem_ifaces, so
// that a change of how the net ABI describes memory touches this file alone. No gtest
// dependency.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "hmc/plugin/net.h"

namespace net_test {

// Kinds of memory in the suite's own words. kDmabuf: a device that registers memory from dma-buf
// fds (HMC_NET_FLAG_DMABUF). kOther stands for whatever the ABI reports that this file does not
// know.
enum class MemKind { kHost, kDmabuf, kCuda, kRocm, kOther };

// The kinds of memory device props can read and write directly.
inline std::set<MemKind> device_mem_kinds(const hmc_net_device_props_t& props) {
  std::set<MemKind> kinds;
  uint64_t bits = props.mem_ifaces;
  const std::pair<uint64_t, MemKind> known[] = {
      {HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST), MemKind::kHost},
      {HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA), MemKind::kCuda},
      {HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_ROCM), MemKind::kRocm}};
  for (const auto& k : known) {
    if (bits & k.first) kinds.insert(k.second);
    bits &= ~k.first;
  }
  if (bits != 0) kinds.insert(MemKind::kOther);
  if (props.flags & HMC_NET_FLAG_DMABUF) kinds.insert(MemKind::kDmabuf);
  return kinds;
}

// Whether the plugin offers memory registration (the slots register_memory and
// deregister_memory call).
inline bool offers_registration(const hmc_net_plugin_v2_t* t) {
  return t->reg_mr != nullptr && t->dereg_mr != nullptr;
}

// Registers [addr, addr + len), memory of `kind`, with device dev of ctx with `access`
// (HMC_NET_ACCESS_*). kCuda/kRocm are described by pointer (device ordinal 0); kDmabuf as CUDA
// memory through dmabuf_fd at dmabuf_offset (the caller owns the fd; -1 describes a dma-buf the
// plugin cannot open). On SUCCESS *mr is the registration and *rkey holds the packed remote key;
// otherwise *rkey is empty. Returns reg_mr's status.
inline hmc_plugin_status_t register_memory(const hmc_net_plugin_v2_t* t, hmc_net_ctx_t* ctx,
                                           int dev, MemKind kind, void* addr, size_t len,
                                           uint32_t access, hmc_net_mr_t** mr,
                                           std::vector<uint8_t>* rkey, int dmabuf_fd = -1,
                                           uint64_t dmabuf_offset = 0) {
  hmc_net_mem_desc_t d{};
  d.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_mem_desc_t);
  d.addr = addr;
  d.len = len;
  d.device_ordinal = kind == MemKind::kHost ? -1 : 0;
  d.dmabuf_fd = -1;
  switch (kind) {
    case MemKind::kHost: d.iface = HMC_MEM_IFACE_HOST; break;
    case MemKind::kDmabuf:
      d.iface = HMC_MEM_IFACE_CUDA;
      // A descriptor that names a dma-buf: a plugin without dma-buf support refuses it whatever
      // the fd; one with it needs a real one.
      d.dmabuf_fd = dmabuf_fd >= 0 ? dmabuf_fd : 1 << 30;
      d.dmabuf_offset = dmabuf_offset;
      break;
    case MemKind::kCuda: d.iface = HMC_MEM_IFACE_CUDA; break;
    case MemKind::kRocm: d.iface = HMC_MEM_IFACE_ROCM; break;
    case MemKind::kOther: d.iface = HMC_MEM_IFACE_MAX - 1; break;
  }
  d.access = access;
  rkey->assign(HMC_NET_RKEY_MAX, 0);
  size_t n = 0;
  hmc_plugin_status_t st = t->reg_mr(ctx, dev, &d, mr, rkey->data(), &n);
  rkey->resize(st == HMC_PLUGIN_SUCCESS ? n : 0);
  return st;
}

// Releases a registration made by register_memory on the same ctx and dev.
inline hmc_plugin_status_t deregister_memory(const hmc_net_plugin_v2_t* t, hmc_net_ctx_t* ctx,
                                             int dev, hmc_net_mr_t* mr) {
  (void)dev;
  return t->dereg_mr(ctx, mr);
}

}  // namespace net_test
