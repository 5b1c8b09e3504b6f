// The plugin's C boundary: hmc_net_plugin_v2 and one thin function per slot. Each converts the
// opaque handles, checks arguments, calls into the C++ internals and catches everything, so no
// exception crosses the ABI (hmc/plugin/boundary.hpp).
#include <cstddef>

#include "context.h"
#include "endpoint.h"
#include "hmc/plugin/boundary.hpp"
#include "hmc/plugin/net.h"
#include "listener.h"
#include "region.h"
#include "request.h"

namespace hmc::hoststage {
namespace {

using hmc::plugin::guarded;

Context* as_ctx(hmc_net_ctx_t* c) {
  return reinterpret_cast<Context*>(c);
}
Endpoint* as_ep(hmc_net_ep_t* e) {
  return reinterpret_cast<Endpoint*>(e);
}
Listener* as_listener(hmc_net_listener_t* l) {
  return reinterpret_cast<Listener*>(l);
}
Request* as_req(hmc_net_request_t* r) {
  return reinterpret_cast<Request*>(r);
}

constexpr char kDevNames[2][4] = {"tcp", "shm"};

hmc_plugin_status_t hs_init(const hmc_host_services_t* host, hmc_net_ctx_t** ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    hmc_plugin_status_t checked = hmc::plugin::check_host_services(host, HMC_NET_ABI_VERSION);
    if (checked != HMC_PLUGIN_SUCCESS) return checked;
    Context* c = nullptr;
    hmc_plugin_status_t st = Context::create(host, &c);
    if (st == HMC_PLUGIN_SUCCESS) *ctx = reinterpret_cast<hmc_net_ctx_t*>(c);
    return st;
  });
}

hmc_plugin_status_t hs_finalize(hmc_net_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete as_ctx(ctx);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t hs_device_count(hmc_net_ctx_t* ctx, int* count) {
  if (ctx == nullptr || count == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  *count = as_ctx(ctx)->device_count();
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t hs_device_props(hmc_net_ctx_t* ctx, int dev, hmc_net_device_props_t* props) {
  if (ctx == nullptr || props == nullptr || props->hdr.struct_size < sizeof(hmc_abi_header_t) ||
      !as_ctx(ctx)->valid_device(dev))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  const bool shm = dev == static_cast<int>(DevKind::kShm);
  using P = hmc_net_device_props_t;
  if (HMC_ABI_HAS_FIELD(props, P, name)) props->name = kDevNames[dev];
  if (HMC_ABI_HAS_FIELD(props, P, pci_path)) props->pci_path = nullptr;
  // 0 = unknown: loopback, a 1 GbE NIC and shared memory differ by orders of magnitude, so the
  // core calibrates instead of trusting a made-up number.
  if (HMC_ABI_HAS_FIELD(props, P, bandwidth_MBps)) props->bandwidth_MBps = 0;
  if (HMC_ABI_HAS_FIELD(props, P, latency_ns)) props->latency_ns = 0;
  // dma-buf: device memory whose exporter lets the CPU map it is registered through the mapping.
  if (HMC_ABI_HAS_FIELD(props, P, flags))
    props->flags = HMC_NET_FLAG_RMA | HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_DMABUF |
                   (shm ? HMC_NET_FLAG_SAME_HOST : 0u);
  if (HMC_ABI_HAS_FIELD(props, P, max_inflight)) props->max_inflight = 0;
  if (HMC_ABI_HAS_FIELD(props, P, max_msg_size)) props->max_msg_size = 0;
  if (HMC_ABI_HAS_FIELD(props, P, mem_ifaces))
    props->mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
  if (HMC_ABI_HAS_FIELD(props, P, nic_guid)) props->nic_guid = 0;
  if (HMC_ABI_HAS_FIELD(props, P, nic_port)) props->nic_port = 0;
  if (HMC_ABI_HAS_FIELD(props, P, details)) {
    props->link_layer = shm ? "shared memory" : "TCP";
    props->details = shm ? "reaches: processes on this host" : "reaches: any host over IP";
  }
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t hs_listen(hmc_net_ctx_t* ctx, int dev, void* handle, size_t* handle_len,
                              hmc_net_listener_t** listener) {
  return guarded([&] {
    if (ctx == nullptr || handle == nullptr || handle_len == nullptr || listener == nullptr ||
        !as_ctx(ctx)->valid_device(dev))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Listener* l = nullptr;
    hmc_plugin_status_t st =
        Listener::create(*as_ctx(ctx), static_cast<DevKind>(dev), handle, handle_len, &l);
    if (st == HMC_PLUGIN_SUCCESS) *listener = reinterpret_cast<hmc_net_listener_t*>(l);
    return st;
  });
}

hmc_plugin_status_t hs_accept(hmc_net_listener_t* listener, hmc_net_ep_t** ep) {
  return guarded([&] {
    if (listener == nullptr || ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint* e = nullptr;
    hmc_plugin_status_t st = as_listener(listener)->accept(&e);
    if (st == HMC_PLUGIN_SUCCESS) *ep = reinterpret_cast<hmc_net_ep_t*>(e);
    return st;
  });
}

hmc_plugin_status_t hs_close_listener(hmc_net_listener_t* listener) {
  return guarded([&] {
    if (listener == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete as_listener(listener);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t hs_connect(hmc_net_ctx_t* ctx, int dev, const void* handle, size_t handle_len,
                               hmc_net_ep_t** ep) {
  return guarded([&] {
    if (ctx == nullptr || handle == nullptr || ep == nullptr || !as_ctx(ctx)->valid_device(dev))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    ConnHandle h;
    std::string why;
    if (!decode_handle(static_cast<const uint8_t*>(handle), handle_len, &h, &why)) {
      c.log().write(HMC_LOG_ERROR, "connect: invalid connection handle: %s", why.c_str());
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    if (static_cast<int>(h.dev) != dev) {
      c.log().write(HMC_LOG_ERROR, "connect: handle is for device %d (%s), not %d",
                    static_cast<int>(h.dev), kDevNames[static_cast<int>(h.dev)], dev);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    auto e = std::make_unique<Endpoint>(c, static_cast<DevKind>(dev));
    hmc_plugin_status_t st = e->dial(h);
    if (st == HMC_PLUGIN_SUCCESS) *ep = reinterpret_cast<hmc_net_ep_t*>(e.release());
    return st;
  });
}

hmc_plugin_status_t hs_ep_ready(hmc_net_ep_t* ep) {
  return guarded([&] {
    if (ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return as_ep(ep)->ready_status();
  });
}

hmc_plugin_status_t hs_close_ep(hmc_net_ep_t* ep) {
  return guarded([&] {
    if (ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete as_ep(ep);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t hs_test(hmc_net_request_t* req, int* done, size_t* bytes) {
  return guarded([&] {
    if (req == nullptr || done == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Request* r = as_req(req);
    if (!r->done) r->ep->ctx().test_tick();
    if (!r->done) {
      *done = 0;
      return HMC_PLUGIN_SUCCESS;
    }
    hmc_plugin_status_t st = r->result;
    if (bytes != nullptr) *bytes = r->bytes;
    *done = 1;
    r->ep->release(r);
    return st;
  });
}

hmc_plugin_status_t hs_reg_mr(hmc_net_ctx_t* ctx, int dev, const hmc_net_mem_desc_t* mem,
                              hmc_net_mr_t** mr, void* rkey, size_t* rkey_len) {
  return guarded([&] {
    if (ctx == nullptr || mem == nullptr || mr == nullptr || rkey == nullptr ||
        rkey_len == nullptr || !HMC_ABI_HAS_FIELD(mem, hmc_net_mem_desc_t, dmabuf_offset) ||
        !as_ctx(ctx)->valid_device(dev))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    uintptr_t base = reinterpret_cast<uintptr_t>(mem->addr);
    if ((base == 0 && mem->len > 0) || mem->len > UINTPTR_MAX - base) {
      c.log().write(HMC_LOG_ERROR, "reg_mr: invalid range (%p, %zu bytes)", mem->addr, mem->len);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    // Host memory by pointer; device memory only through a dma-buf the CPU can map, whose
    // mapping then holds the bytes that peers read and write.
    auto m = std::make_unique<MemRegion>(0);
    if (mem->dmabuf_fd >= 0) {
      std::string why;
      if (mem->len == 0 ||
          !map_dmabuf(mem->dmabuf_fd, mem->dmabuf_offset, mem->len, m.get(), &why)) {
        HS_DEBUG(c.log(), "reg_mr: %zu bytes of device memory (interface %u) at %p: %s", mem->len,
                 mem->iface, mem->addr, mem->len == 0 ? "empty" : why.c_str());
        return HMC_PLUGIN_ERR_NOT_SUPPORTED;
      }
      m->base = base;
      m->len = mem->len;
    } else if (mem->iface != HMC_MEM_IFACE_HOST) {
      HS_DEBUG(c.log(), "reg_mr: memory of interface %u without a dma-buf is not host memory",
               mem->iface);
      return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    }
    const Region& r = c.regions().add(base, mem->len, mem->access, m->local);
    m->key = r.key;
    c.mrs().insert(m.get());
    *rkey_len = pack_rkey(r, rkey);
    *mr = reinterpret_cast<hmc_net_mr_t*>(m.release());
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t hs_dereg_mr(hmc_net_ctx_t* ctx, hmc_net_mr_t* mr) {
  return guarded([&] {
    if (ctx == nullptr || mr == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    auto* m = reinterpret_cast<MemRegion*>(mr);
    if (c.mrs().erase(m) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    c.regions().remove(m->key);
    delete m;
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t hs_isend(hmc_net_ep_t* ep, const void* buf, size_t len, hmc_net_mr_t* mr,
                             uint64_t tag, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Request* r = nullptr;
    hmc_plugin_status_t st = as_ep(ep)->post_send(buf, len, tag, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
    return st;
  });
}

hmc_plugin_status_t hs_irecv(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t* mr,
                             uint64_t tag, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Request* r = nullptr;
    hmc_plugin_status_t st = as_ep(ep)->post_recv(buf, len, tag, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
    return st;
  });
}

hmc_plugin_status_t hs_rkey_unpack(hmc_net_ep_t* ep, const void* rkey, size_t rkey_len,
                                   hmc_net_rkey_t** out) {
  return guarded([&] {
    if (ep == nullptr || rkey == nullptr || out == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    RemoteKey k{};
    if (!unpack_rkey(rkey, rkey_len, &k)) {
      as_ep(ep)->ctx().log().write(HMC_LOG_ERROR,
                                   "rkey_unpack: not a hoststage remote key "
                                   "(%zu bytes)",
                                   rkey_len);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    k.ctx = &as_ep(ep)->ctx();
    auto p = std::make_unique<RemoteKey>(k);
    as_ep(ep)->ctx().rkeys().insert(p.get());
    *out = reinterpret_cast<hmc_net_rkey_t*>(p.release());
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t hs_rkey_release(hmc_net_rkey_t* rkey) {
  return guarded([&] {
    if (rkey == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    auto* k = reinterpret_cast<RemoteKey*>(rkey);
    if (k->ctx->rkeys().erase(k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete k;
    return HMC_PLUGIN_SUCCESS;
  });
}

// A local buffer of a put or get registered as mr: where its bytes are (the mapping of device
// memory registered by dma-buf). False for an mr that is not live.
bool local_buffer(Endpoint& ep, hmc_net_mr_t* mr, const void* buf, size_t len, const void** out) {
  auto* m = reinterpret_cast<MemRegion*>(mr);
  if (ep.ctx().mrs().count(m) == 0) {
    ep.ctx().log().write(HMC_LOG_ERROR, "unknown or deregistered mr %p", static_cast<void*>(mr));
    return false;
  }
  *out = m->local_of(buf, len);
  return true;
}

hmc_plugin_status_t post_put(hmc_net_ep_t* ep, const void* buf, size_t len, hmc_net_mr_t* mr,
                             uint64_t remote_addr, hmc_net_rkey_t* rkey, bool notify,
                             uint64_t value, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || rkey == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    const void* local = buf;
    if (mr != nullptr && !local_buffer(*as_ep(ep), mr, buf, len, &local))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Request* r = nullptr;
    hmc_plugin_status_t st = as_ep(ep)->post_put(
        local, len, remote_addr, reinterpret_cast<RemoteKey*>(rkey)->key, notify, value, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
    return st;
  });
}

hmc_plugin_status_t hs_iput(hmc_net_ep_t* ep, const void* buf, size_t len, hmc_net_mr_t* mr,
                            uint64_t remote_addr, hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return post_put(ep, buf, len, mr, remote_addr, rkey, false, 0, req);
}

hmc_plugin_status_t hs_iput_notify(hmc_net_ep_t* ep, const void* buf, size_t len,
                                   hmc_net_mr_t* mr, uint64_t remote_addr, hmc_net_rkey_t* rkey,
                                   uint64_t value, hmc_net_request_t** req) {
  return post_put(ep, buf, len, mr, remote_addr, rkey, true, value, req);
}

hmc_plugin_status_t hs_notify_poll(hmc_net_ep_t* ep, uint64_t* value) {
  return guarded([&] {
    if (ep == nullptr || value == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return as_ep(ep)->poll_notification(value) ? HMC_PLUGIN_SUCCESS : HMC_PLUGIN_IN_PROGRESS;
  });
}

hmc_plugin_status_t hs_iget(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t* mr,
                            uint64_t remote_addr, hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || rkey == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    const void* local = buf;
    if (mr != nullptr && !local_buffer(*as_ep(ep), mr, buf, len, &local))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Request* r = nullptr;
    hmc_plugin_status_t st = as_ep(ep)->post_get(const_cast<void*>(local), len, remote_addr,
                                                 reinterpret_cast<RemoteKey*>(rkey)->key, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
    return st;
  });
}

// Vectored put/get: the pieces go into the endpoint's scratch list (each piece's local bytes
// where its mr maps them), which the request then keeps.
hmc_plugin_status_t post_vec(bool put, hmc_net_ep_t* ep, const hmc_net_iov_t* iov, size_t count,
                             hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || rkey == nullptr || req == nullptr || (iov == nullptr && count > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint& e = *as_ep(ep);
    std::vector<VecPieceWire>& vec = e.vec_scratch();
    vec.clear();
    vec.reserve(count);
    hmc_net_mr_t* checked = nullptr;  // the last mr found live (lists use one)
    for (size_t i = 0; i < count; ++i) {
      const hmc_net_iov_t& p = iov[i];
      if (p.buf == nullptr && p.len > 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
      const void* local = p.buf;
      if (p.mr != nullptr) {
        if (p.mr != checked && !local_buffer(e, p.mr, p.buf, p.len, &local))
          return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
        checked = p.mr;
        local = reinterpret_cast<MemRegion*>(p.mr)->local_of(p.buf, p.len);
      }
      vec.push_back(VecPieceWire{p.remote_addr, p.len, reinterpret_cast<uintptr_t>(local)});
    }
    Request* r = nullptr;
    hmc_plugin_status_t st = e.post_vec(put, &vec, reinterpret_cast<RemoteKey*>(rkey)->key, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
    return st;
  });
}

hmc_plugin_status_t hs_iput_v(hmc_net_ep_t* ep, const hmc_net_iov_t* iov, size_t count,
                              hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return post_vec(true, ep, iov, count, rkey, req);
}

hmc_plugin_status_t hs_iget_v(hmc_net_ep_t* ep, const hmc_net_iov_t* iov, size_t count,
                              hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return post_vec(false, ep, iov, count, rkey, req);
}

hmc_plugin_status_t hs_cancel(hmc_net_request_t* req) {
  return guarded([&] {
    if (req == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return as_req(req)->ep->cancel(as_req(req));
  });
}

hmc_plugin_status_t hs_progress(hmc_net_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ctx(ctx)->progress_from_core();
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t hs_wait_fd(hmc_net_ctx_t* ctx, int* fd) {
  if (ctx == nullptr || fd == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  *fd = as_ctx(ctx)->wait_fd();
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t hs_arm(hmc_net_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return as_ctx(ctx)->arm();
  });
}

const hmc_net_plugin_v2_t kPlugin = {
    HMC_NET_ABI_HEADER_INIT(hmc_net_plugin_v2_t),
    "hoststage",
    "0.1.0",
    kConfigVars,
    hs_init,
    hs_finalize,
    hs_device_count,
    hs_device_props,
    hs_listen,
    hs_accept,
    hs_close_listener,
    hs_connect,
    hs_ep_ready,
    hs_close_ep,
    hs_test,
    hs_reg_mr,
    hs_dereg_mr,
    hs_isend,
    hs_irecv,
    hs_rkey_unpack,
    hs_rkey_release,
    hs_iput,
    hs_iget,
    hs_cancel,
    hs_progress,
    hs_wait_fd,
    hs_arm,
    nullptr,  // connect_hello: not offered (nothing the listener must learn before traffic)
    nullptr,  // accept_hello
    nullptr,  // iflush: its writes are CPU stores, visible without one
    hs_iput_v,
    hs_iget_v,
    hs_iput_notify,
    hs_notify_poll,
};

}  // namespace
}  // namespace hmc::hoststage

extern "C" HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
  return &hmc::hoststage::kPlugin;
}
