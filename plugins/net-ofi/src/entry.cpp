// The plugin's C boundary: hmc_net_plugin_v2 and one thin function per slot. Each converts the
// opaque handles, checks arguments, calls into the C++ internals and catches everything, so no
// exception crosses the ABI (hmc/plugin/boundary.hpp).
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>

#include "context.h"
#include "endpoint.h"
#include "hmc/plugin/boundary.hpp"
#include "hmc/plugin/net.h"
#include "listener.h"
#include "region.h"
#include "request.h"
#include "wire.h"

namespace hmc::ofi {
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
MemRegion* as_mr(hmc_net_mr_t* m) {
  return reinterpret_cast<MemRegion*>(m);
}
RemoteKey* as_rkey(hmc_net_rkey_t* k) {
  return reinterpret_cast<RemoteKey*>(k);
}

// What the caller's registration says about a buffer on the endpoint's device, after checking
// that it covers the buffer. mr == NULL: host memory, no descriptor (the device registers on
// the fly where it must).
hmc_plugin_status_t local_buf(Endpoint& ep, hmc_net_mr_t* mr, const void* buf, size_t len,
                              LocalBuf* lb) {
  *lb = LocalBuf{};
  if (mr == nullptr) return HMC_PLUGIN_SUCCESS;
  Context& c = ep.dev().ctx();
  MemRegion* m = as_mr(mr);
  if (c.regions().count(m) == 0) {
    c.log().write(HMC_LOG_ERROR, "unknown or deregistered mr %p", static_cast<void*>(mr));
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  const uintptr_t b = reinterpret_cast<uintptr_t>(buf);
  if (len > 0 && (b < m->base || b - m->base > m->len || len > m->len - (b - m->base))) {
    c.log().write(HMC_LOG_ERROR, "%zu bytes at %p are not inside the mr's %zu bytes at 0x%llx", len,
                  buf, m->len, static_cast<unsigned long long>(m->base));
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  lb->desc = m->desc_for(&ep.dev());
  lb->iface = m->iface;
  lb->ordinal = m->ordinal;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t ofi_init(const hmc_host_services_t* host, hmc_net_ctx_t** ctx) {
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

hmc_plugin_status_t ofi_finalize(hmc_net_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete as_ctx(ctx);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ofi_device_count(hmc_net_ctx_t* ctx, int* count) {
  if (ctx == nullptr || count == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  *count = as_ctx(ctx)->device_count();
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t ofi_device_props(hmc_net_ctx_t* ctx, int dev, hmc_net_device_props_t* props) {
  if (ctx == nullptr || props == nullptr || props->hdr.struct_size < sizeof(hmc_abi_header_t) ||
      !as_ctx(ctx)->valid_device(dev))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  as_ctx(ctx)->device(dev)->fill_props(props);
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t ofi_listen(hmc_net_ctx_t* ctx, int dev, void* handle, size_t* handle_len,
                               hmc_net_listener_t** listener) {
  return guarded([&] {
    if (ctx == nullptr || handle == nullptr || handle_len == nullptr || listener == nullptr ||
        !as_ctx(ctx)->valid_device(dev))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    auto l = std::make_unique<Listener>(*c.device(dev));
    hmc_plugin_status_t st = l->start(handle, handle_len);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    c.listeners().insert(l.get());
    *listener = reinterpret_cast<hmc_net_listener_t*>(l.release());
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ofi_accept(hmc_net_listener_t* listener, hmc_net_ep_t** ep) {
  return guarded([&] {
    if (listener == nullptr || ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint* e = nullptr;
    hmc_plugin_status_t st = as_listener(listener)->accept(&e);
    if (st == HMC_PLUGIN_SUCCESS) *ep = reinterpret_cast<hmc_net_ep_t*>(e);
    return st;
  });
}

hmc_plugin_status_t ofi_close_listener(hmc_net_listener_t* listener) {
  return guarded([&] {
    if (listener == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete as_listener(listener);  // leaves its context's registry itself
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ofi_connect(hmc_net_ctx_t* ctx, int dev, const void* handle, size_t handle_len,
                                hmc_net_ep_t** ep) {
  return guarded([&] {
    if (ctx == nullptr || handle == nullptr || ep == nullptr || !as_ctx(ctx)->valid_device(dev))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    Device& d = *c.device(dev);
    ConnHandle h;
    std::string why;
    if (!decode_handle(static_cast<const uint8_t*>(handle), handle_len, &h, &why)) {
      c.log().write(HMC_LOG_ERROR, "connect: invalid connection handle: %s", why.c_str());
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    if (h.device != d.name()) {
      c.log().write(HMC_LOG_ERROR, "connect: the handle is for device '%s', not '%s' (device %d)",
                    h.device.c_str(), d.name().c_str(), dev);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    Endpoint* e = c.make_endpoint(d);
    hmc_plugin_status_t st = e->dial(h);
    if (st != HMC_PLUGIN_SUCCESS) {
      c.destroy_endpoint(e, false);
      return st;
    }
    *ep = reinterpret_cast<hmc_net_ep_t*>(e);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ofi_ep_ready(hmc_net_ep_t* ep) {
  return guarded([&] {
    if (ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return as_ep(ep)->ready_status();
  });
}

hmc_plugin_status_t ofi_close_ep(hmc_net_ep_t* ep) {
  return guarded([&] {
    if (ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint* e = as_ep(ep);
    Context& c = e->dev().ctx();
    if (!c.has_endpoint(e)) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    c.destroy_endpoint(e, true);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ofi_test(hmc_net_request_t* req, int* done, size_t* bytes) {
  return guarded([&] {
    if (req == nullptr || done == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Request* r = as_req(req);
    if (r->ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;  // its endpoint was closed
    if (!r->done) {
      r->ep->dev().progress();
      r->ep->dev().ctx().tick();
    }
    if (!r->done) {
      *done = 0;
      return HMC_PLUGIN_SUCCESS;
    }
    hmc_plugin_status_t st = r->result;
    if (bytes != nullptr) *bytes = r->bytes;
    *done = 1;
    r->ep->retire(r);
    return st;
  });
}

hmc_plugin_status_t ofi_reg_mr(hmc_net_ctx_t* ctx, int dev, const hmc_net_mem_desc_t* mem,
                               hmc_net_mr_t** mr, void* rkey, size_t* rkey_len) {
  return guarded([&] {
    if (ctx == nullptr || mem == nullptr || mr == nullptr || rkey == nullptr ||
        rkey_len == nullptr || !HMC_ABI_HAS_FIELD(mem, hmc_net_mem_desc_t, dmabuf_offset))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    if (dev < 0 || dev >= c.device_count()) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    MemRegion* region = nullptr;
    hmc_plugin_status_t st = register_region(c, dev, mem, &region, rkey, rkey_len);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    c.regions().insert(region);
    *mr = reinterpret_cast<hmc_net_mr_t*>(region);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ofi_dereg_mr(hmc_net_ctx_t* ctx, hmc_net_mr_t* mr) {
  return guarded([&] {
    if (ctx == nullptr || mr == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    MemRegion* m = as_mr(mr);
    if (c.regions().erase(m) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete m;
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ofi_isend(hmc_net_ep_t* ep, const void* buf, size_t len, hmc_net_mr_t* mr,
                              uint64_t tag, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint& e = *as_ep(ep);
    LocalBuf lb;
    hmc_plugin_status_t st = local_buf(e, mr, buf, len, &lb);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    Request* r = nullptr;
    st = e.post_send(buf, len, lb, tag, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
    return st;
  });
}

hmc_plugin_status_t ofi_irecv(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t* mr,
                              uint64_t tag, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint& e = *as_ep(ep);
    LocalBuf lb;
    hmc_plugin_status_t st = local_buf(e, mr, buf, len, &lb);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    Request* r = nullptr;
    st = e.post_recv(buf, len, lb, tag, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
    return st;
  });
}

hmc_plugin_status_t ofi_rkey_unpack(hmc_net_ep_t* ep, const void* rkey, size_t rkey_len,
                                    hmc_net_rkey_t** out) {
  return guarded([&] {
    if (ep == nullptr || rkey == nullptr || out == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint& e = *as_ep(ep);
    RemoteKey* k = nullptr;
    hmc_plugin_status_t st = unpack_remote_key(e, rkey, rkey_len, &k);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    e.dev().ctx().rkeys().insert(k);
    *out = reinterpret_cast<hmc_net_rkey_t*>(k);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ofi_rkey_release(hmc_net_rkey_t* rkey) {
  return guarded([&] {
    if (rkey == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    RemoteKey* k = as_rkey(rkey);
    if (k->dev->ctx().rkeys().erase(k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete k;
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ofi_iput(hmc_net_ep_t* ep, const void* buf, size_t len, hmc_net_mr_t* mr,
                             uint64_t remote_addr, hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || rkey == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint& e = *as_ep(ep);
    RemoteKey* k = as_rkey(rkey);
    if (e.dev().ctx().rkeys().count(k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    LocalBuf lb;
    hmc_plugin_status_t st = local_buf(e, mr, buf, len, &lb);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    Request* r = nullptr;
    st = e.post_put(buf, len, lb, remote_addr, *k, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
    return st;
  });
}

hmc_plugin_status_t ofi_iget(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t* mr,
                             uint64_t remote_addr, hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || rkey == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint& e = *as_ep(ep);
    RemoteKey* k = as_rkey(rkey);
    if (e.dev().ctx().rkeys().count(k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    LocalBuf lb;
    hmc_plugin_status_t st = local_buf(e, mr, buf, len, &lb);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    Request* r = nullptr;
    st = e.post_get(buf, len, lb, remote_addr, *k, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
    return st;
  });
}

hmc_plugin_status_t ofi_cancel(hmc_net_request_t* req) {
  return guarded([&] {
    if (req == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Request* r = as_req(req);
    if (r->ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return r->ep->cancel(r);
  });
}

hmc_plugin_status_t ofi_progress(hmc_net_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ctx(ctx)->progress();
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ofi_wait_fd(hmc_net_ctx_t* ctx, int* fd) {
  if (ctx == nullptr || fd == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  return as_ctx(ctx)->wait_fd(fd);
}

hmc_plugin_status_t ofi_arm(hmc_net_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return as_ctx(ctx)->arm();
  });
}

const hmc_net_plugin_v2_t kPlugin = {
    HMC_NET_ABI_HEADER_INIT(hmc_net_plugin_v2_t),
    "ofi",
    "0.1.0",
    kConfigVars,
    ofi_init,
    ofi_finalize,
    ofi_device_count,
    ofi_device_props,
    ofi_listen,
    ofi_accept,
    ofi_close_listener,
    ofi_connect,
    ofi_ep_ready,
    ofi_close_ep,
    ofi_test,
    ofi_reg_mr,
    ofi_dereg_mr,
    ofi_isend,
    ofi_irecv,
    ofi_rkey_unpack,
    ofi_rkey_release,
    ofi_iput,
    ofi_iget,
    ofi_cancel,
    ofi_progress,
    ofi_wait_fd,
    ofi_arm,
    nullptr,  // connect_hello: not offered (nothing the listener must learn before traffic)
    nullptr,  // accept_hello
    nullptr,  // iflush: not offered
    nullptr,  // iput_v: not offered
    nullptr,  // iget_v
    nullptr,  // iput_notify: not offered
    nullptr,  // notify_poll
};

}  // namespace
}  // namespace hmc::ofi

extern "C" HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
  return &hmc::ofi::kPlugin;
}
