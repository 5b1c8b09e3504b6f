// Registering memory with one net device (xfer/regions.h registers a region with every one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "device/registry.h"
#include "net/net_plugin.h"
#include "net/region.h"

namespace hmc {

// Registers [addr, addr+size) (at loc) with net device nd into region: host memory and device
// memory nd reaches natively by pointer, other device memory through a dma-buf exported once per
// region (dmabuf) where dmabuf_allowed (HMC_NET_DMABUF). False with *why when nd does not
// register it.
bool register_with(NetDevice& nd, void* addr, size_t size, uint32_t access,
                   const MemoryLocation& loc, bool dmabuf_allowed, DmabufExport* dmabuf,
                   Region* region, std::string* why);

// Why nd cannot register dev's memory directly ("" when it can: natively by pointer, or by
// dma-buf as far as both sides declare), the capability check of register_with. Host memory: "".
std::string direct_refusal(const NetDevice& nd, const Device& dev, bool dmabuf_allowed);

}  // namespace hmc
