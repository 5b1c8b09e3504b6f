// Registering memory with one net device (regions/regions.h registers a region with every one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "device/registry.h"
#include "net/net_plugin.h"
#include "net/region.h"

namespace hmc {

// How a region's device memory is registered with a net device, for the logs and
// hmc_peer_info.
enum class DirectWay { kNone, kNative, kDmabuf, kPeermem };
// " (dma-buf)", " (peermem)": what follows "direct" where it is said.
const char* direct_way_text(DirectWay way);

// Interfaces nd registers by pointer for put/get only (net.h rma_mem_ifaces; 0 where the plugin
// predates the field).
uint64_t rma_mem_ifaces(const NetDevice& nd);

// Registers [addr, addr+size) (at loc) with net device nd into region: host memory and device
// memory nd reaches natively by pointer; other device memory through a dma-buf exported once per
// region (dmabuf) where dmabuf_allowed (HMC_NET_DMABUF), else (or where the dma-buf is refused)
// by pointer where nd registers its interface so for put/get (peermem). False with *why when nd
// does not register it; *way says how it did.
bool register_with(NetDevice& nd, void* addr, size_t size, uint32_t access,
                   const MemoryLocation& loc, bool dmabuf_allowed, DmabufExport* dmabuf,
                   Region* region, std::string* why, DirectWay* way);

// Why nd cannot register dev's memory natively or by dma-buf ("" when it can, as far as both
// sides declare), the capability check of register_with. Host memory: "".
std::string direct_refusal(const NetDevice& nd, const Device& dev, bool dmabuf_allowed);
// How nd registers dev's memory as far as both sides declare: natively, by dma-buf, by pointer
// for put/get (peermem), or kNone with *why (direct_refusal's). Host memory: kNative.
DirectWay direct_way(const NetDevice& nd, const Device& dev, bool dmabuf_allowed, std::string* why);

}  // namespace hmc
