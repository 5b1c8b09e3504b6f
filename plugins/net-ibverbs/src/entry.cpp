// The plugin's C boundary: hmc_net_plugin_v2 and one thin function per slot. Each converts the
// opaque handles, checks arguments, calls into the C++ internals and catches everything, so no
// exception crosses the ABI (hmc/plugin/boundary.hpp).
#include <cstring>
#include <memory>
#include <vector>

#include "context.h"
#include "endpoint.h"
#include "hmc/plugin/boundary.hpp"
#include "hmc/plugin/net.h"
#include "listener.h"
#include "region.h"
#include "request.h"
#include "wire.h"

namespace hmc::ibverbs {
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

// The caller's registration for a local buffer, checked: known, of the endpoint's device, and
// covering the buffer. nullptr when mr is NULL (the plugin copies or registers on the fly).
hmc_plugin_status_t local_mr(Endpoint& ep, hmc_net_mr_t* mr, const void* buf, size_t len,
                             const MemRegion** out) {
  *out = nullptr;
  if (mr == nullptr) return HMC_PLUGIN_SUCCESS;
  Context& c = ep.ctx();
  MemRegion* m = as_mr(mr);
  if (c.regions().count(m) == 0) {
    IB_ERROR(c.log(), "unknown or deregistered mr %p", static_cast<void*>(mr));
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  if (len > 0 && !m->covers(buf, len)) {
    IB_ERROR(c.log(), "%zu bytes at %p are not inside the mr's %zu bytes", len, buf, m->len);
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  *out = m;
  return HMC_PLUGIN_SUCCESS;
}

// The initiator's check of a one-sided access against the owner's packed key (the owner's HCA
// checks again; what it refuses ends with REMOTE too).
bool access_allowed(const PackedKey& k, uint64_t addr, size_t len, uint32_t need) {
  if ((k.access & need) == 0) return false;
  if (addr < k.base || addr - k.base > k.len) return false;
  return len <= k.len - (addr - k.base);
}

hmc_plugin_status_t ib_init(const hmc_host_services_t* host, hmc_net_ctx_t** ctx) {
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

hmc_plugin_status_t ib_finalize(hmc_net_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete as_ctx(ctx);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ib_device_count(hmc_net_ctx_t* ctx, int* count) {
  if (ctx == nullptr || count == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  *count = as_ctx(ctx)->device_count();
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t ib_device_props(hmc_net_ctx_t* ctx, int dev, hmc_net_device_props_t* props) {
  if (ctx == nullptr || props == nullptr || props->hdr.struct_size < sizeof(hmc_abi_header_t) ||
      !as_ctx(ctx)->valid_device(dev))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  as_ctx(ctx)->device(dev)->fill_props(props);
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t ib_listen(hmc_net_ctx_t* ctx, int dev, void* handle, size_t* handle_len,
                              hmc_net_listener_t** listener) {
  return guarded([&] {
    if (ctx == nullptr || handle == nullptr || handle_len == nullptr || listener == nullptr ||
        !as_ctx(ctx)->valid_device(dev))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    auto l = std::make_unique<Listener>(*as_ctx(ctx)->device(dev));
    hmc_plugin_status_t st = l->start(handle, handle_len);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    *listener = reinterpret_cast<hmc_net_listener_t*>(l.release());
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ib_accept(hmc_net_listener_t* listener, hmc_net_ep_t** ep) {
  return guarded([&] {
    if (listener == nullptr || ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint* e = nullptr;
    hmc_plugin_status_t st = as_listener(listener)->accept(&e);
    if (st == HMC_PLUGIN_SUCCESS) *ep = reinterpret_cast<hmc_net_ep_t*>(e);
    return st;
  });
}

hmc_plugin_status_t ib_close_listener(hmc_net_listener_t* listener) {
  return guarded([&] {
    if (listener == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete as_listener(listener);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ib_connect(hmc_net_ctx_t* ctx, int dev, const void* handle, size_t handle_len,
                               hmc_net_ep_t** ep) {
  return guarded([&] {
    if (ctx == nullptr || handle == nullptr || ep == nullptr || !as_ctx(ctx)->valid_device(dev))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    ConnHandle h;
    std::string why;
    if (!decode_handle(static_cast<const uint8_t*>(handle), handle_len, &h, &why)) {
      IB_ERROR(c.log(), "connect: invalid connection handle: %s", why.c_str());
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    auto* e = new Endpoint(*c.device(dev));
    hmc_plugin_status_t st = e->dial(h);
    if (st != HMC_PLUGIN_SUCCESS) {
      delete e;
      return st;
    }
    *ep = reinterpret_cast<hmc_net_ep_t*>(e);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ib_ep_ready(hmc_net_ep_t* ep) {
  return guarded([&] {
    if (ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return as_ep(ep)->ready_status();
  });
}

hmc_plugin_status_t ib_close_ep(hmc_net_ep_t* ep) {
  return guarded([&] {
    if (ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint* e = as_ep(ep);
    if (e->ctx().endpoints().count(e) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete e;
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ib_test(hmc_net_request_t* req, int* done, size_t* bytes) {
  return guarded([&] {
    if (req == nullptr || done == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Request* r = as_req(req);
    if (r->ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    if (!r->done) r->ep->ctx().progress();
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

hmc_plugin_status_t ib_reg_mr(hmc_net_ctx_t* ctx, int dev, const hmc_net_mem_desc_t* mem,
                              hmc_net_mr_t** mr, void* rkey, size_t* rkey_len) {
  return guarded([&] {
    if (ctx == nullptr || mem == nullptr || mr == nullptr || rkey == nullptr ||
        rkey_len == nullptr || !HMC_ABI_HAS_FIELD(mem, hmc_net_mem_desc_t, dmabuf_offset) ||
        !as_ctx(ctx)->valid_device(dev))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    MemRegion* region = nullptr;
    hmc_plugin_status_t st = register_region(c, dev, mem, &region, rkey, rkey_len);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    c.regions().insert(region);
    *mr = reinterpret_cast<hmc_net_mr_t*>(region);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ib_dereg_mr(hmc_net_ctx_t* ctx, hmc_net_mr_t* mr) {
  return guarded([&] {
    if (ctx == nullptr || mr == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    MemRegion* m = as_mr(mr);
    if (c.regions().erase(m) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    destroy_region(c, m);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ib_isend(hmc_net_ep_t* ep, const void* buf, size_t len, hmc_net_mr_t* mr,
                             uint64_t tag, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint& e = *as_ep(ep);
    const MemRegion* m = nullptr;
    hmc_plugin_status_t st = local_mr(e, mr, buf, len, &m);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    Request* r = nullptr;
    st = e.post_send(buf, len, m, tag, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
    return st;
  });
}

hmc_plugin_status_t ib_irecv(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t* mr,
                             uint64_t tag, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint& e = *as_ep(ep);
    const MemRegion* m = nullptr;
    hmc_plugin_status_t st = local_mr(e, mr, buf, len, &m);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    Request* r = nullptr;
    st = e.post_recv(buf, len, m, tag, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
    return st;
  });
}

hmc_plugin_status_t ib_rkey_unpack(hmc_net_ep_t* ep, const void* rkey, size_t rkey_len,
                                   hmc_net_rkey_t** out) {
  return guarded([&] {
    if (ep == nullptr || rkey == nullptr || out == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint& e = *as_ep(ep);
    auto k = std::make_unique<RemoteKey>();
    std::string why;
    if (!decode_key(static_cast<const uint8_t*>(rkey), rkey_len, &k->key, &why)) {
      IB_ERROR(e.ctx().log(), "rkey_unpack: %s", why.c_str());
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    k->dev = &e.dev();
    e.ctx().rkeys().insert(k.get());
    *out = reinterpret_cast<hmc_net_rkey_t*>(k.release());
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ib_rkey_release(hmc_net_rkey_t* rkey) {
  return guarded([&] {
    if (rkey == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    RemoteKey* k = as_rkey(rkey);
    if (k->dev->ctx().rkeys().erase(k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete k;
    return HMC_PLUGIN_SUCCESS;
  });
}

// A request that ends HMC_PLUGIN_ERR_REMOTE with nothing moved: an access the key does not
// allow, refused before anything moves and reported as the owner's refusal would be.
hmc_plugin_status_t refused(Endpoint& e, bool put, hmc_net_request_t** req) {
  Request* r = nullptr;
  hmc_plugin_status_t st = e.post_rma(put, nullptr, 0, nullptr, 0, PackedKey{}, nullptr, &r);
  if (st == HMC_PLUGIN_SUCCESS) {
    r->result = HMC_PLUGIN_ERR_REMOTE;
    *req = reinterpret_cast<hmc_net_request_t*>(r);
  }
  return st;
}

hmc_plugin_status_t rma(bool put, hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t* mr,
                        uint64_t remote_addr, hmc_net_rkey_t* rkey, const uint64_t* notify,
                        hmc_net_request_t** req) {
  if (ep == nullptr || rkey == nullptr || req == nullptr || (buf == nullptr && len > 0))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  Endpoint& e = *as_ep(ep);
  RemoteKey* k = as_rkey(rkey);
  if (e.ctx().rkeys().count(k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  const MemRegion* m = nullptr;
  hmc_plugin_status_t st = local_mr(e, mr, buf, len, &m);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  if (!access_allowed(k->key, remote_addr, len,
                      put ? HMC_NET_ACCESS_REMOTE_WRITE : HMC_NET_ACCESS_REMOTE_READ))
    return refused(e, put, req);
  Request* r = nullptr;
  st = e.post_rma(put, buf, len, m, remote_addr, k->key, notify, &r);
  if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
  return st;
}

hmc_plugin_status_t ib_iput(hmc_net_ep_t* ep, const void* buf, size_t len, hmc_net_mr_t* mr,
                            uint64_t remote_addr, hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return guarded([&] {
    return rma(true, ep, const_cast<void*>(buf), len, mr, remote_addr, rkey, nullptr, req);
  });
}

hmc_plugin_status_t ib_iget(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t* mr,
                            uint64_t remote_addr, hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return guarded([&] { return rma(false, ep, buf, len, mr, remote_addr, rkey, nullptr, req); });
}

hmc_plugin_status_t ib_iput_notify(hmc_net_ep_t* ep, const void* buf, size_t len,
                                   hmc_net_mr_t* mr, uint64_t remote_addr, hmc_net_rkey_t* rkey,
                                   uint64_t value, hmc_net_request_t** req) {
  return guarded([&] {
    return rma(true, ep, const_cast<void*>(buf), len, mr, remote_addr, rkey, &value, req);
  });
}

hmc_plugin_status_t rma_v(bool put, hmc_net_ep_t* ep, const hmc_net_iov_t* iov, size_t count,
                          hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  if (ep == nullptr || rkey == nullptr || req == nullptr || (iov == nullptr && count > 0))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  Endpoint& e = *as_ep(ep);
  RemoteKey* k = as_rkey(rkey);
  if (e.ctx().rkeys().count(k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  std::vector<RmaPiece> pieces(count);
  bool allowed = true;
  for (size_t i = 0; i < count; ++i) {
    const hmc_net_iov_t& v = iov[i];
    if (v.buf == nullptr && v.len > 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    hmc_plugin_status_t st = local_mr(e, v.mr, v.buf, v.len, &pieces[i].mr);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    pieces[i].buf = v.buf;
    pieces[i].len = v.len;
    pieces[i].remote = v.remote_addr;
    allowed =
        allowed && access_allowed(k->key, v.remote_addr, v.len,
                                  put ? HMC_NET_ACCESS_REMOTE_WRITE : HMC_NET_ACCESS_REMOTE_READ);
  }
  // Every piece is checked before any moves: a refused list writes and reads nothing.
  if (!allowed) return refused(e, put, req);
  Request* r = nullptr;
  hmc_plugin_status_t st = e.post_rma_v(put, pieces, k->key, &r);
  if (st == HMC_PLUGIN_SUCCESS) *req = reinterpret_cast<hmc_net_request_t*>(r);
  return st;
}

hmc_plugin_status_t ib_iput_v(hmc_net_ep_t* ep, const hmc_net_iov_t* iov, size_t count,
                              hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return guarded([&] { return rma_v(true, ep, iov, count, rkey, req); });
}

hmc_plugin_status_t ib_iget_v(hmc_net_ep_t* ep, const hmc_net_iov_t* iov, size_t count,
                              hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return guarded([&] { return rma_v(false, ep, iov, count, rkey, req); });
}

hmc_plugin_status_t ib_notify_poll(hmc_net_ep_t* ep, uint64_t* value) {
  return guarded([&] {
    if (ep == nullptr || value == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return as_ep(ep)->notify_poll(value);
  });
}

hmc_plugin_status_t ib_cancel(hmc_net_request_t* req) {
  return guarded([&] {
    if (req == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Request* r = as_req(req);
    if (r->ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return r->ep->cancel(r);
  });
}

hmc_plugin_status_t ib_progress(hmc_net_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ctx(ctx)->progress();
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ib_wait_fd(hmc_net_ctx_t* ctx, int* fd) {
  if (ctx == nullptr || fd == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  return as_ctx(ctx)->wait_fd(fd);
}

hmc_plugin_status_t ib_arm(hmc_net_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return as_ctx(ctx)->arm();
  });
}

const hmc_net_plugin_v2_t kPlugin = {
    HMC_NET_ABI_HEADER_INIT(hmc_net_plugin_v2_t),
    "ibverbs",
    "0.1.0",
    kConfigVars,
    ib_init,
    ib_finalize,
    ib_device_count,
    ib_device_props,
    ib_listen,
    ib_accept,
    ib_close_listener,
    ib_connect,
    ib_ep_ready,
    ib_close_ep,
    ib_test,
    ib_reg_mr,
    ib_dereg_mr,
    ib_isend,
    ib_irecv,
    ib_rkey_unpack,
    ib_rkey_release,
    ib_iput,
    ib_iget,
    ib_cancel,
    ib_progress,
    ib_wait_fd,
    ib_arm,
    nullptr,  // connect_hello: not offered (the side channel carries the setup)
    nullptr,  // accept_hello
    nullptr,  // iflush: not offered (no device memory by pointer)
    ib_iput_v,
    ib_iget_v,
    ib_iput_notify,
    ib_notify_poll,
};

}  // namespace
}  // namespace hmc::ibverbs

extern "C" HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
  return &hmc::ibverbs::kPlugin;
}
