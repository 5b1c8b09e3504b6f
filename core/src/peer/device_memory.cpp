#include "peer/device_memory.h"

#include <algorithm>

#include "net/registration.h"

namespace hmc {

std::string describe_device_memory(const NetDevice* nd, const path::NetRecord* peer_nd,
                                   uint32_t peer_device_count, const std::vector<Device>& devices,
                                   bool dmabuf_allowed) {
  std::string out;
  std::vector<std::string> seen;
  for (const Device& dev : devices) {
    if (dev.is_host() || std::find(seen.begin(), seen.end(), dev.plugin_name) != seen.end())
      continue;
    seen.push_back(dev.plugin_name);
    out += out.empty() ? "" : ", ";
    if (nd == nullptr) {
      out += dev.plugin_name + " staged (no net device on the path)";
      continue;
    }
    std::string why;
    const DirectWay way = direct_way(*nd, dev, dmabuf_allowed, &why);
    out +=
        dev.plugin_name + (way != DirectWay::kNone ? std::string(" direct") + direct_way_text(way)
                                                   : " staged (" + why + ")");
  }
  if (peer_nd != nullptr && peer_device_count > 0) {
    out += out.empty() ? "" : "; ";
    out += "peer's " + peer_nd->device +
           (peer_nd->flags & HMC_NET_FLAG_DMABUF ? " registers dma-bufs"
            : peer_nd->mem_ifaces != HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST)
                ? " reaches some device memory natively"
            : peer_nd->rma_mem_ifaces != 0 ? " registers some device memory by pointer (peermem)"
                                           : " takes no dma-buf (its device memory is staged)");
  }
  return out;
}

}  // namespace hmc
