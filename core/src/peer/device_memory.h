// What hmc_peer_info says of device memory over a peer's path (device_memory): per device
// plugin of this side, direct or staged and why, then what the peer's end takes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "device/registry.h"
#include "net/net_plugin.h"
#include "path/path.h"

namespace hmc {

// For hmc_peer_info: how device memory in registered regions moves over a path whose net device
// is nd (nullptr: none) and whose peer's end is peer_nd (nullptr: unknown), per device plugin
// of this side ("cuda direct (dma-buf), hip direct (peermem), mlu staged (<why>)") and then the
// peer's end ("peer's rxe1:1 registers dma-bufs"). "" when this side has no device memory and the
// peer none.
std::string describe_device_memory(const NetDevice* nd, const path::NetRecord* peer_nd,
                                   uint32_t peer_device_count, const std::vector<Device>& devices,
                                   bool dmabuf_allowed);

}  // namespace hmc
