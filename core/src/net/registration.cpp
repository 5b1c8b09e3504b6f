// Memory registration with one net device: host memory and device memory the device reaches by
// pointer, other device memory through a dma-buf. The regions subsystem (xfer/regions.cpp)
// registers each region with every net device through it.
#include "net/registration.h"

#include <unistd.h>

#include <algorithm>

#include "util/log.h"
#include "util/status.h"

namespace hmc {

DmabufExport::~DmabufExport() {
  if (fd >= 0) close(fd);
}

std::string direct_refusal(const NetDevice& nd, const Device& dev, bool dmabuf_allowed) {
  if (dev.is_host()) return "";
  if (dev.mem_iface >= 0 && (nd.props.mem_ifaces & HMC_MEM_IFACE_BIT(dev.mem_iface))) return "";
  if (!(nd.props.flags & HMC_NET_FLAG_DMABUF)) return "no native access, no dma-buf";
  if (!dmabuf_allowed) return "HMC_NET_DMABUF=0";
  if (!(dev.caps & HMC_DEVICE_CAP_DMABUF) || !dev.plugin->dmabuf_export)
    return dev.name + " exports no dma-buf";
  return "";
}

bool register_with(NetDevice& nd, void* addr, size_t size, uint32_t access,
                   const MemoryLocation& loc, bool dmabuf_allowed, DmabufExport* dmabuf,
                   Region* region, std::string* why) {
  const Device& dev = *loc.device;
  NetPlugin& net = *nd.plugin;
  hmc_net_mem_desc_t desc{};
  desc.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_mem_desc_t);
  desc.addr = addr;
  desc.len = size;
  desc.iface = dev.is_host() ? uint32_t{HMC_MEM_IFACE_HOST}
                             : static_cast<uint32_t>(std::max(dev.mem_iface, 0));
  desc.device_ordinal = dev.is_host() ? -1 : dev.index;
  desc.dmabuf_fd = -1;
  desc.access = HMC_NET_ACCESS_LOCAL | access;
  const bool native = dev.mem_iface >= 0 && (nd.props.mem_ifaces & HMC_MEM_IFACE_BIT(dev.mem_iface));
  if (!dev.is_host() && !native) {
    // Device memory the net device cannot reach by pointer: by dma-buf, where both sides can.
    *why = direct_refusal(nd, dev, dmabuf_allowed);
    if (!why->empty()) return false;
    if (!dmabuf->tried) {
      dmabuf->tried = true;
      int fd = -1;
      uint64_t offset = 0;
      hmc_plugin_status_t ps = dev.plugin->dmabuf_export(dev.plugin_ctx, addr, size, &fd, &offset);
      if (ps == HMC_PLUGIN_SUCCESS && fd >= 0) {
        dmabuf->fd = fd;
        dmabuf->offset = offset;
      } else {
        dmabuf->error = fmt::format("dma-buf export failed: {}", plugin_status_string(ps));
      }
    }
    if (dmabuf->fd < 0) {
      *why = dmabuf->error;
      return false;
    }
    desc.dmabuf_fd = dmabuf->fd;
    desc.dmabuf_offset = dmabuf->offset;
  }
  std::vector<uint8_t> rkey(HMC_NET_RKEY_MAX);
  size_t len = rkey.size();
  hmc_net_mr_t* mr = nullptr;
  hmc_plugin_status_t ps;
  {
    std::lock_guard<std::mutex> lock(net.mutex());
    ps = net.table()->reg_mr(net.ctx(), nd.index, &desc, &mr, rkey.data(), &len);
  }
  if (ps != HMC_PLUGIN_SUCCESS || len > HMC_NET_RKEY_MAX) {
    *why = fmt::format("reg_mr: {}", ps == HMC_PLUGIN_SUCCESS ? "key too long" : plugin_status_string(ps));
    if (ps == HMC_PLUGIN_SUCCESS) {
      std::lock_guard<std::mutex> lock(net.mutex());
      net.table()->dereg_mr(net.ctx(), mr);
    }
    // Host memory has no fallback: one-sided access through this device is refused.
    if (dev.is_host())
      HMC_LOG_W("net plugin {} could not register {} bytes at {} with {}: {}; one-sided access "
                "to this region through it is refused", net.name(), size, addr, nd.name, *why);
    return false;
  }
  rkey.resize(len);
  region->registrations.push_back({&nd, mr, std::move(rkey)});
  return true;
}

}  // namespace hmc
