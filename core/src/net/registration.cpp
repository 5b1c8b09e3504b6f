// Memory registration with every net plugin that registers memory, remote descriptors, and the
// import of a peer's descriptor as an rkey on that peer's data endpoint.
#include "context/context.h"
#include "util/handles.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

hmc_status_t Context::register_memory(void* addr, size_t size, uint32_t access, Region** out) {
  MemoryLocation loc = devices_.locate(addr);
  if (!loc.device->is_host())
    return fail(HMC_ERR_NOT_SUPPORTED, "hmc_mem_register: memory on {} cannot be registered yet",
                loc.device->name);
  if (loc.size && reinterpret_cast<uintptr_t>(addr) - loc.base + size > loc.size)
    return fail(HMC_ERR_OUT_OF_BOUNDS, "hmc_mem_register: {} bytes at {} overrun its {}-byte "
                "allocation", size, addr, loc.size);
  auto region = std::make_unique<Region>();
  region->ctx = this;
  region->addr = addr;
  region->size = size;
  region->access = access;
  for (auto& net : nets_) {
    if (!HMC_NET_SLOT(net->table(), reg_mr)) continue;
    hmc_net_mem_desc_t desc{};
    desc.hdr = HMC_ABI_HEADER_INIT(hmc_net_mem_desc_t);
    desc.addr = addr;
    desc.len = size;
    desc.mem_kind = HMC_NET_MEM_HOST;
    desc.access = HMC_NET_ACCESS_LOCAL | access;
    desc.dmabuf_fd = -1;
    desc.device_ordinal = -1;
    std::vector<uint8_t> rkey(HMC_NET_RKEY_MAX);
    size_t len = rkey.size();
    hmc_net_mr_t* mr = nullptr;
    hmc_plugin_status_t ps;
    {
      std::lock_guard<std::mutex> lock(net->mutex());
      ps = net->table()->reg_mr(net->ctx(), &desc, &mr, rkey.data(), &len);
    }
    if (ps != HMC_PLUGIN_SUCCESS || len > HMC_NET_RKEY_MAX) {
      // A plugin that cannot register this memory just cannot serve one-sided access to it.
      HMC_LOG_W("net plugin {} could not register {} bytes at {}: {}; one-sided access to this "
                "region through it is refused", net->name(), size, addr, plugin_status_string(ps));
      continue;
    }
    rkey.resize(len);
    region->registrations.push_back({net.get(), mr, std::move(rkey)});
  }
  Region* r = region.release();
  {
    std::lock_guard<std::mutex> lock(regions_mutex_);
    regions_.insert(r);
  }
  Handles::add(r, HandleKind::Region);
  *out = r;
  return HMC_SUCCESS;
}

hmc_status_t Context::deregister_memory(Region* region) {
  {
    std::lock_guard<std::mutex> lock(regions_mutex_);
    regions_.erase(region);
  }
  Handles::remove(region);
  for (auto& reg : region->registrations) {
    std::lock_guard<std::mutex> lock(reg.net->mutex());
    hmc_plugin_status_t ps = reg.net->table()->dereg_mr(reg.net->ctx(), reg.mr);
    if (ps != HMC_PLUGIN_SUCCESS)
      HMC_LOG_W("net plugin {}: dereg_mr failed: {}", reg.net->name(), plugin_status_string(ps));
  }
  delete region;
  return HMC_SUCCESS;
}

hmc_status_t Context::import_remote(const std::shared_ptr<Peer>& peer, const void* desc,
                                    size_t len, Remote** out) {
  PackedRegion packed;
  hmc_status_t st = unpack_region(desc, len, &packed);
  if (st != HMC_SUCCESS) return st;
  auto remote = std::make_unique<Remote>();
  remote->peer = peer;
  remote->base = packed.base;
  remote->size = packed.size;
  remote->access = packed.access;
  NetPlugin& net = *peer->net;
  const std::vector<uint8_t>* key = nullptr;
  for (const auto& [name, k] : packed.rkeys)
    if (name == net.name()) key = &k;
  {
    std::lock_guard<std::mutex> lock(net.mutex());
    if (peer->lost || !peer->ep)
      return fail(HMC_ERR_PEER_LOST, "hmc_remote_import: peer {} is lost", peer->name);
    if (key && HMC_NET_SLOT(net.table(), rkey_unpack)) {
      hmc_plugin_status_t ps = net.table()->rkey_unpack(peer->ep, key->data(), key->size(), &remote->rkey);
      if (ps != HMC_PLUGIN_SUCCESS)
        return fail(from_plugin_status(ps), "hmc_remote_import: {} rejected the descriptor's key: {}",
                    net.name(), plugin_status_string(ps));
    }
    // Without a key for our path the handle is still made: hmc_put/hmc_get then say why not.
    std::lock_guard<std::mutex> rlock(regions_mutex_);
    remotes_.insert(remote.get());
  }
  if (!key)
    HMC_LOG_I("hmc_remote_import: the descriptor has no key for {} (the path to {}); one-sided "
              "operations on it will be refused", net.name(), peer->name);
  Handles::add(remote.get(), HandleKind::Remote);
  *out = remote.release();
  return HMC_SUCCESS;
}

hmc_status_t Context::release_remote(Remote* remote) {
  Handles::remove(remote);
  NetPlugin& net = *remote->peer->net;
  {
    std::lock_guard<std::mutex> lock(net.mutex());
    std::lock_guard<std::mutex> rlock(regions_mutex_);
    remotes_.erase(remote);
    if (remote->rkey && HMC_NET_SLOT(net.table(), rkey_release)) net.table()->rkey_release(remote->rkey);
    remote->rkey = nullptr;
  }
  delete remote;
  return HMC_SUCCESS;
}

}  // namespace hmc
