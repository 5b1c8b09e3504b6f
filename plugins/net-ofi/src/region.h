// Memory registration (reg_mr) and remote keys (rkey_unpack). A region is registered with the one
// device reg_mr names (the core registers per device), and its packed key names that device.
#pragma once

#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hmc/plugin/net.h"

namespace hmc::ofi {

class Context;
class Device;
class Endpoint;

struct MemRegion {
  struct Reg {
    Device* dev;
    fid_mr* mr;
  };
  uintptr_t base = 0;
  size_t len = 0;
  uint32_t access = 0;  // HMC_NET_ACCESS_*
  uint32_t iface = 0;   // hmc_mem_iface_t
  int ordinal = -1;     // vendor device index (device memory)
  std::vector<Reg> regs;

  MemRegion() = default;
  ~MemRegion();
  MemRegion(const MemRegion&) = delete;
  MemRegion& operator=(const MemRegion&) = delete;
  // The local descriptor of this region on d, or nullptr.
  void* desc_for(const Device* d) const;
};

// A peer's region as seen through one of our endpoints.
struct RemoteKey {
  Device* dev = nullptr;
  uint64_t key = 0;
  uint64_t base = 0;  // the owner's virtual base address
  uint64_t size = 0;
  uint32_t access = 0;     // HMC_NET_ACCESS_* the owner granted
  bool virt_addr = false;  // the provider addresses the region by virtual address (else offset)
  bool readable = false;   // registered with FI_REMOTE_READ at the provider
};

// reg_mr: validates the descriptor, registers with each device, packs the remote key.
hmc_plugin_status_t register_region(Context& ctx, int dev, const hmc_net_mem_desc_t* mem,
                                    MemRegion** out, void* rkey, size_t* rkey_len);

// rkey_unpack: the entry of the packed key for the endpoint's device.
hmc_plugin_status_t unpack_remote_key(Endpoint& ep, const void* rkey, size_t len, RemoteKey** out);

// True when [addr, addr + len) lies inside the remote region (len 0: addr within [base, end]).
bool remote_range_ok(const RemoteKey& k, uint64_t addr, size_t len);

}  // namespace hmc::ofi
