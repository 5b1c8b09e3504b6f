// Memory registration with one net device: host memory and device memory the device reaches by
// pointer, other device memory through a dma-buf. The regions subsystem (regions/regions.cpp)
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

const char* direct_way_text(DirectWay way) {
  switch (way) {
    case DirectWay::kNative: return " (native)";
    case DirectWay::kDmabuf: return " (dma-buf)";
    case DirectWay::kPeermem: return " (peermem)";
    default: return "";
  }
}

uint64_t rma_mem_ifaces(const NetDevice& nd) {
  return HMC_ABI_HAS_FIELD(&nd.props, hmc_net_device_props_t, rma_mem_ifaces)
             ? nd.props.rma_mem_ifaces
             : 0;
}

DirectWay direct_way(const NetDevice& nd, const Device& dev, bool dmabuf_allowed,
                     std::string* why) {
  *why = direct_refusal(nd, dev, dmabuf_allowed);
  const bool native = dev.is_host() || (dev.mem_iface >= 0 &&
                                        (nd.props.mem_ifaces & HMC_MEM_IFACE_BIT(dev.mem_iface)));
  if (native) return DirectWay::kNative;
  if (why->empty()) return DirectWay::kDmabuf;
  if (dev.mem_iface >= 0 && (rma_mem_ifaces(nd) & HMC_MEM_IFACE_BIT(dev.mem_iface))) {
    why->clear();
    return DirectWay::kPeermem;
  }
  return DirectWay::kNone;
}

bool register_with(NetDevice& nd, void* addr, size_t size, uint32_t access,
                   const MemoryLocation& loc, bool dmabuf_allowed, DmabufExport* dmabuf,
                   Region* region, std::string* why, DirectWay* way) {
  *way = DirectWay::kNone;
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
  const bool native =
      dev.mem_iface >= 0 && (nd.props.mem_ifaces & HMC_MEM_IFACE_BIT(dev.mem_iface));
  // Registered by pointer for put/get only: the plugin never copies it (net.h), and the core
  // passes it to put/get with this registration only (xfer/transfers.cpp, memory_access).
  const bool by_pointer = !dev.is_host() && !native && dev.mem_iface >= 0 &&
                          (rma_mem_ifaces(nd) & HMC_MEM_IFACE_BIT(dev.mem_iface));
  // Why the dma-buf way was not taken, said with the pointer way's refusal.
  std::string no_dmabuf;
  if (!dev.is_host() && !native) {
    // Device memory the net device cannot reach by pointer: by dma-buf where both sides can (the
    // modern way, first), else by pointer where the device registers it so for put/get.
    *why = direct_refusal(nd, dev, dmabuf_allowed);
    if (!why->empty() && !by_pointer) return false;
    if (why->empty() && !dmabuf->tried) {
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
    if (why->empty() && dmabuf->fd < 0) *why = dmabuf->error;
    if (why->empty()) {
      desc.dmabuf_fd = dmabuf->fd;
      desc.dmabuf_offset = dmabuf->offset;
    } else if (!by_pointer) {
      return false;
    } else {
      no_dmabuf = *why;
    }
  }
  std::vector<uint8_t> rkey(HMC_NET_RKEY_MAX);
  size_t len = rkey.size();
  hmc_net_mr_t* mr = nullptr;
  auto reg = [&] {
    len = rkey.size();
    hmc_plugin_status_t ps;
    {
      std::lock_guard<std::mutex> lock(net.mutex());
      ps = net.table()->reg_mr(net.ctx(), nd.index, &desc, &mr, rkey.data(), &len);
    }
    if (ps == HMC_PLUGIN_SUCCESS && len > HMC_NET_RKEY_MAX) {
      std::lock_guard<std::mutex> lock(net.mutex());
      net.table()->dereg_mr(net.ctx(), mr);
      return std::string("reg_mr: key too long");
    }
    return ps == HMC_PLUGIN_SUCCESS ? std::string()
                                    : fmt::format("reg_mr: {}", plugin_status_string(ps));
  };
  *why = reg();
  if (!why->empty() && desc.dmabuf_fd >= 0 && by_pointer) {
    // The device refused the dma-buf: by pointer, as it also offers.
    no_dmabuf = "dma-buf " + *why;
    desc.dmabuf_fd = -1;
    desc.dmabuf_offset = 0;
    *why = reg();
  }
  if (!why->empty()) {
    if (!no_dmabuf.empty()) *why = no_dmabuf + "; by pointer (peermem): " + *why;
    // Host memory has no fallback: one-sided access through this device is refused.
    if (dev.is_host())
      HMC_LOG_W(
          "net plugin {} could not register {} bytes at {} with {}: {}; one-sided access "
          "to this region through it is refused",
          net.name(), size, addr, nd.name, *why);
    return false;
  }
  rkey.resize(len);
  region->registrations.push_back({&nd, mr, std::move(rkey)});
  *way = dev.is_host() || native ? DirectWay::kNative
         : desc.dmabuf_fd >= 0   ? DirectWay::kDmabuf
                                 : DirectWay::kPeermem;
  return true;
}

}  // namespace hmc
