#include "region.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include "context.h"
#include "device.h"

namespace hmc::ibverbs {

hmc_plugin_status_t register_region(Context& c, int dev, const hmc_net_mem_desc_t* mem,
                                    MemRegion** out, void* rkey, size_t* rkey_len) {
  Device& d = *c.device(dev);
  if (mem->addr == nullptr && mem->len > 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  auto m = std::make_unique<MemRegion>();
  m->dev = &d;
  m->base = reinterpret_cast<uintptr_t>(mem->addr);
  m->len = mem->len;
  m->access = mem->access;
  int access = IBV_ACCESS_LOCAL_WRITE;
  if (mem->access & HMC_NET_ACCESS_REMOTE_READ) access |= IBV_ACCESS_REMOTE_READ;
  if (mem->access & HMC_NET_ACCESS_REMOTE_WRITE) access |= IBV_ACCESS_REMOTE_WRITE;
  if (mem->len > 0) {
    std::string why;
    const bool by_pointer = mem->iface != HMC_MEM_IFACE_HOST && mem->dmabuf_fd < 0 &&
                            mem->iface < 64 &&
                            (c.peermem().ifaces & HMC_MEM_IFACE_BIT(mem->iface)) != 0;
    if (by_pointer) {
      // Legacy GPUDirect: the peer-memory module pins the device pages for the HCA. Only puts
      // and gets use this registration (net.h, rma_mem_ifaces): nothing here copies it.
      m->device = true;
      errno = 0;
      m->mr = c.api().reg_mr(d.pd(), mem->addr, mem->len, access);
      if (m->mr == nullptr) {
        const int err = errno;
        if (d.first_peermem_refusal())
          IB_WARN(c.log(),
                  "%s: ibv_reg_mr of %zu bytes of device memory (interface %u) by pointer "
                  "(peermem): %s (errno %d); such regions are staged (said once per device; "
                  "HMC_IB_PEERMEM=off stops trying)",
                  d.name().c_str(), mem->len, mem->iface, std::strerror(err), err);
        else
          IB_DEBUG(c.log(),
                   "%s: ibv_reg_mr of %zu bytes of device memory (interface %u) by "
                   "pointer (peermem): %s",
                   d.name().c_str(), mem->len, mem->iface, std::strerror(err));
        return err == ENOMEM ? HMC_PLUGIN_ERR_NO_MEMORY : HMC_PLUGIN_ERR_NOT_SUPPORTED;
      }
    } else if (mem->iface != HMC_MEM_IFACE_HOST) {
      if (mem->dmabuf_fd < 0 || !d.info().dmabuf || c.api().reg_dmabuf_mr == nullptr) {
        IB_DEBUG(c.log(), "%s: device memory (interface %u) %s", d.name().c_str(), mem->iface,
                 mem->dmabuf_fd < 0 ? "without a dma-buf: not reachable"
                                    : "as a dma-buf: this device does not take dma-bufs");
        return HMC_PLUGIN_ERR_NOT_SUPPORTED;
      }
      m->device = true;
      m->mr = c.api().reg_dmabuf_mr(d.pd(), mem->dmabuf_offset, mem->len,
                                    reinterpret_cast<uintptr_t>(mem->addr), mem->dmabuf_fd, access);
      if (m->mr == nullptr) {
        const int err = errno;
        if (d.first_dmabuf_refusal())
          IB_WARN(c.log(),
                  "%s: ibv_reg_dmabuf_mr of %zu bytes (interface %u): %s; such regions "
                  "are staged (said once per device)",
                  d.name().c_str(), mem->len, mem->iface, std::strerror(err));
        else
          IB_DEBUG(c.log(), "%s: ibv_reg_dmabuf_mr of %zu bytes (interface %u): %s",
                   d.name().c_str(), mem->len, mem->iface, std::strerror(err));
        return err == ENOMEM ? HMC_PLUGIN_ERR_NO_MEMORY : HMC_PLUGIN_ERR_NOT_SUPPORTED;
      }
    } else {
      m->mr = d.reg(mem->addr, mem->len, access, &why);
      if (m->mr == nullptr && c.mr_cache().drop_unused())
        m->mr = d.reg(mem->addr, mem->len, access, &why);
      if (m->mr == nullptr) {
        IB_ERROR(c.log(), "%s: reg_mr: %s", d.name().c_str(), why.c_str());
        return HMC_PLUGIN_ERR_NO_MEMORY;
      }
    }
  }
  PackedKey k;
  k.base = m->base;
  k.len = m->len;
  k.rkey = m->mr != nullptr ? m->mr->rkey : 0;
  k.access = mem->access;
  // Host memory is registered on the rails too, so that peers stripe over them; a rail that
  // refuses leaves the rails out (puts and gets then use the one port).
  if (mem->len > 0 && mem->iface == HMC_MEM_IFACE_HOST) {
    for (Device* rd : c.rails_of(d)) {
      std::string why;
      ibv_mr* rm = rd->reg(mem->addr, mem->len, access, &why);
      if (rm == nullptr) {
        IB_INFO(c.log(), "%s: reg_mr on rail %s: %s (no striping for it)", d.name().c_str(),
                rd->name().c_str(), why.c_str());
        for (ibv_mr* x : m->rail_mrs) c.api().dereg_mr(x);
        m->rail_mrs.clear();
        break;
      }
      m->rail_mrs.push_back(rm);
    }
    for (ibv_mr* x : m->rail_mrs) k.rail_rkeys.push_back(x->rkey);
  }
  *rkey_len = encode_key(k, static_cast<uint8_t*>(rkey));
  *out = m.release();
  return HMC_PLUGIN_SUCCESS;
}

void destroy_region(Context& c, MemRegion* m) {
  if (m->mr != nullptr) c.api().dereg_mr(m->mr);
  for (ibv_mr* x : m->rail_mrs) c.api().dereg_mr(x);
  delete m;
}

}  // namespace hmc::ibverbs
