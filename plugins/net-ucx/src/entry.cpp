// The plugin's C boundary: hmc_net_plugin_v2 and one thin function per slot. Each converts the
// opaque handles, checks arguments, calls into the C++ internals and catches everything, so no
// exception crosses the ABI (hmc/plugin/boundary.hpp).
#include <cstddef>
#include <memory>
#include <string>

#include "config.h"
#include "context.h"
#include "endpoint.h"
#include "hmc/plugin/boundary.hpp"
#include "hmc/plugin/net.h"
#include "listener.h"
#include "region.h"
#include "request.h"
#include "status.h"
#include "wire.h"

namespace hmc::ucx {
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
hmc_net_request_t* to_req(Request* r) {
  return reinterpret_cast<hmc_net_request_t*>(r);
}

hmc_plugin_status_t ux_init(const hmc_host_services_t* host, hmc_net_ctx_t** ctx) {
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

hmc_plugin_status_t ux_finalize(hmc_net_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete as_ctx(ctx);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ux_device_count(hmc_net_ctx_t* ctx, int* count) {
  if (ctx == nullptr || count == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  *count = 1;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t ux_device_props(hmc_net_ctx_t* ctx, int dev, hmc_net_device_props_t* props) {
  if (ctx == nullptr || props == nullptr || props->hdr.struct_size < sizeof(hmc_abi_header_t) ||
      !Context::valid_device(dev))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  as_ctx(ctx)->fill_props(props);
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t ux_listen(hmc_net_ctx_t* ctx, int dev, void* handle, size_t* handle_len,
                              hmc_net_listener_t** listener) {
  return guarded([&] {
    if (ctx == nullptr || handle == nullptr || handle_len == nullptr || listener == nullptr ||
        !Context::valid_device(dev))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ctx(ctx)->note_call();
    Listener* l = nullptr;
    hmc_plugin_status_t st = Listener::create(*as_ctx(ctx), handle, handle_len, &l);
    if (st == HMC_PLUGIN_SUCCESS) *listener = reinterpret_cast<hmc_net_listener_t*>(l);
    return st;
  });
}

hmc_plugin_status_t ux_accept(hmc_net_listener_t* listener, hmc_net_ep_t** ep) {
  return guarded([&] {
    if (listener == nullptr || ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Endpoint* e = nullptr;
    hmc_plugin_status_t st = as_listener(listener)->accept(&e);
    if (st == HMC_PLUGIN_SUCCESS) *ep = reinterpret_cast<hmc_net_ep_t*>(e);
    return st;
  });
}

hmc_plugin_status_t ux_close_listener(hmc_net_listener_t* listener) {
  return guarded([&] {
    if (listener == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete as_listener(listener);
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ux_connect(hmc_net_ctx_t* ctx, int dev, const void* handle, size_t handle_len,
                               hmc_net_ep_t** ep) {
  return guarded([&] {
    if (ctx == nullptr || handle == nullptr || ep == nullptr || !Context::valid_device(dev))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    c.note_call();
    wire::Handle h;
    std::string why;
    if (!wire::decode_handle(static_cast<const uint8_t*>(handle), handle_len, &h, &why)) {
      c.log().write(HMC_LOG_ERROR, "connect: invalid connection handle: %s", why.c_str());
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    Endpoint* e = nullptr;
    hmc_plugin_status_t st = Endpoint::connect(c, h, &e);
    if (st == HMC_PLUGIN_SUCCESS) *ep = reinterpret_cast<hmc_net_ep_t*>(e);
    return st;
  });
}

hmc_plugin_status_t ux_ep_ready(hmc_net_ep_t* ep) {
  return guarded([&] {
    if (ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ep(ep)->ctx().note_call();
    return as_ep(ep)->ready_status();
  });
}

hmc_plugin_status_t ux_close_ep(hmc_net_ep_t* ep) {
  return guarded([&] {
    if (ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ep(ep)->ctx().note_call();
    delete as_ep(ep);
    return HMC_PLUGIN_SUCCESS;
  });
}

UX_HOT hmc_plugin_status_t ux_test(hmc_net_request_t* req, int* done, size_t* bytes) {
  return guarded([&] {
    if (req == nullptr || done == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Request* r = as_req(req);
    if (r->ctx == nullptr || r->kind == ReqKind::kControl || r->orphan)
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;  // not a live request of this plugin
    Context& c = *r->ctx;
    if (!r->done) c.progress_for_test(r);
    if (!r->done) {
      *done = 0;
      return HMC_PLUGIN_SUCCESS;
    }
    hmc_plugin_status_t st = r->result;
    if (bytes != nullptr) *bytes = r->bytes;
    *done = 1;
    c.release(r);
    return st;
  });
}

// UCX maps memory for its whole context, so a registration per device is one ucp_mem_map each.
hmc_plugin_status_t ux_reg_mr(hmc_net_ctx_t* ctx, int dev, const hmc_net_mem_desc_t* mem,
                              hmc_net_mr_t** mr, void* rkey, size_t* rkey_len) {
  return guarded([&] {
    if (ctx == nullptr || mem == nullptr || mr == nullptr || rkey == nullptr ||
        rkey_len == nullptr || !HMC_ABI_HAS_FIELD(mem, hmc_net_mem_desc_t, dmabuf_offset) ||
        !Context::valid_device(dev))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    c.note_call();
    if (!c.rma()) {
      UX_DEBUG(c.log(), "reg_mr: one-sided operations are not offered (UCX started without RMA)");
      return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    }
    ucs_memory_type_t mt;
    const bool reachable =
        mem->iface < HMC_MEM_IFACE_MAX && (c.mem_ifaces() & HMC_MEM_IFACE_BIT(mem->iface));
    if (mem->dmabuf_fd < 0 && reachable && mem->iface == HMC_MEM_IFACE_HOST) {
      mt = UCS_MEMORY_TYPE_HOST;
    } else if (mem->dmabuf_fd < 0 && reachable && mem->iface == HMC_MEM_IFACE_CUDA) {
      mt = UCS_MEMORY_TYPE_CUDA;
    } else if (mem->dmabuf_fd < 0 && reachable && mem->iface == HMC_MEM_IFACE_ROCM) {
      mt = UCS_MEMORY_TYPE_ROCM;
    } else {
      UX_DEBUG(c.log(),
               "reg_mr: memory of interface %u (dma-buf fd %d) is not one this UCX "
               "can access directly",
               mem->iface, mem->dmabuf_fd);
      return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    }
    uintptr_t base = reinterpret_cast<uintptr_t>(mem->addr);
    if ((base == 0 && mem->len > 0) || mem->len > UINTPTR_MAX - base) {
      c.log().write(HMC_LOG_ERROR, "reg_mr: invalid range (%p, %zu bytes)", mem->addr, mem->len);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    auto m = std::make_unique<MemRegion>();
    m->base = base;
    m->len = mem->len;
    m->access = mem->access &
                (HMC_NET_ACCESS_LOCAL | HMC_NET_ACCESS_REMOTE_READ | HMC_NET_ACCESS_REMOTE_WRITE);
    void* ucx_key = nullptr;
    size_t ucx_len = 0;
    if (mem->len > 0) {
      ucp_mem_map_params_t mp{};
      mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
      mp.address = mem->addr;
      mp.length = mem->len;
      mp.memory_type = mt;
      ucs_status_t us = ucp_mem_map(c.ucp(), &mp, &m->memh);
      if (us != UCS_OK) {
        c.log().write(HMC_LOG_ERROR, "reg_mr: ucp_mem_map of %zu bytes at %p failed: %s", mem->len,
                      mem->addr, ucs_status_string(us));
        return from_ucs(us) == HMC_PLUGIN_ERR_INVALID_ARGUMENT ? HMC_PLUGIN_ERR_INVALID_ARGUMENT
                                                               : HMC_PLUGIN_ERR_NO_MEMORY;
      }
      us = ucp_rkey_pack(c.ucp(), m->memh, &ucx_key, &ucx_len);
      if (us != UCS_OK) {
        c.log().write(HMC_LOG_ERROR, "reg_mr: ucp_rkey_pack failed: %s", ucs_status_string(us));
        ucp_mem_unmap(c.ucp(), m->memh);
        return HMC_PLUGIN_ERR_INTERNAL;
      }
    }
    size_t n = pack_rkey(*m, ucx_key, ucx_len, rkey, HMC_NET_RKEY_MAX);
    if (ucx_key != nullptr) ucp_rkey_buffer_release(ucx_key);
    if (n == 0) {
      c.log().write(HMC_LOG_ERROR,
                    "reg_mr: UCX's remote key (%zu bytes) does not fit in %u "
                    "bytes; restrict HMC_UCX_TLS or HMC_UCX_NET_DEVICES",
                    ucx_len, HMC_NET_RKEY_MAX - static_cast<unsigned>(kRkeyHeader));
      if (m->memh != nullptr) ucp_mem_unmap(c.ucp(), m->memh);
      return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    }
    c.mrs().insert(m.get());
    *rkey_len = n;
    *mr = reinterpret_cast<hmc_net_mr_t*>(m.release());
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ux_dereg_mr(hmc_net_ctx_t* ctx, hmc_net_mr_t* mr) {
  return guarded([&] {
    if (ctx == nullptr || mr == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    c.note_call();
    auto* m = reinterpret_cast<MemRegion*>(mr);
    if (c.mrs().erase(m) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    if (m->memh != nullptr) ucp_mem_unmap(c.ucp(), m->memh);
    delete m;
    return HMC_PLUGIN_SUCCESS;
  });
}

UX_HOT hmc_plugin_status_t ux_isend(hmc_net_ep_t* ep, const void* buf, size_t len, hmc_net_mr_t*,
                                    uint64_t tag, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ep(ep)->ctx().note_call();
    Request* r = nullptr;
    hmc_plugin_status_t st = as_ep(ep)->post_send(buf, len, tag, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = to_req(r);
    return st;
  });
}

UX_HOT hmc_plugin_status_t ux_irecv(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t*,
                                    uint64_t tag, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ep(ep)->ctx().note_call();
    Request* r = nullptr;
    hmc_plugin_status_t st = as_ep(ep)->post_recv(buf, len, tag, &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = to_req(r);
    return st;
  });
}

hmc_plugin_status_t ux_rkey_unpack(hmc_net_ep_t* ep, const void* rkey, size_t rkey_len,
                                   hmc_net_rkey_t** out) {
  return guarded([&] {
    if (ep == nullptr || rkey == nullptr || out == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ep(ep)->ctx().note_call();
    RemoteKey* k = nullptr;
    hmc_plugin_status_t st = as_ep(ep)->unpack_rkey(rkey, rkey_len, &k);
    if (st == HMC_PLUGIN_SUCCESS) *out = reinterpret_cast<hmc_net_rkey_t*>(k);
    return st;
  });
}

// Keys outlive their endpoint (close_ep drops their UCX part): the context's registry says
// whether a handle is a live key.
hmc_plugin_status_t ux_rkey_release(hmc_net_rkey_t* rkey) {
  return guarded([&] {
    if (rkey == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    auto* k = reinterpret_cast<RemoteKey*>(rkey);
    Context* c = k->ctx;
    if (c == nullptr || c->rkeys().erase(k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    c->note_call();
    if (k->ep != nullptr) k->ep->forget_rkey(k);
    if (k->rkey != nullptr) ucp_rkey_destroy(k->rkey);
    delete k;
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ux_iput(hmc_net_ep_t* ep, const void* buf, size_t len, hmc_net_mr_t*,
                            uint64_t remote_addr, hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || rkey == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ep(ep)->ctx().note_call();
    Request* r = nullptr;
    hmc_plugin_status_t st =
        as_ep(ep)->post_put(buf, len, remote_addr, reinterpret_cast<RemoteKey*>(rkey), &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = to_req(r);
    return st;
  });
}

hmc_plugin_status_t ux_iget(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t*,
                            uint64_t remote_addr, hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || rkey == nullptr || req == nullptr || (buf == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ep(ep)->ctx().note_call();
    Request* r = nullptr;
    hmc_plugin_status_t st =
        as_ep(ep)->post_get(buf, len, remote_addr, reinterpret_cast<RemoteKey*>(rkey), &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = to_req(r);
    return st;
  });
}

hmc_plugin_status_t ux_post_vec(bool put, hmc_net_ep_t* ep, const hmc_net_iov_t* iov, size_t count,
                                hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return guarded([&] {
    if (ep == nullptr || rkey == nullptr || req == nullptr || (iov == nullptr && count > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < count; ++i)
      if (iov[i].buf == nullptr && iov[i].len > 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ep(ep)->ctx().note_call();
    Request* r = nullptr;
    hmc_plugin_status_t st =
        as_ep(ep)->post_vec(put, iov, count, reinterpret_cast<RemoteKey*>(rkey), &r);
    if (st == HMC_PLUGIN_SUCCESS) *req = to_req(r);
    return st;
  });
}

hmc_plugin_status_t ux_iput_v(hmc_net_ep_t* ep, const hmc_net_iov_t* iov, size_t count,
                              hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return ux_post_vec(true, ep, iov, count, rkey, req);
}

hmc_plugin_status_t ux_iget_v(hmc_net_ep_t* ep, const hmc_net_iov_t* iov, size_t count,
                              hmc_net_rkey_t* rkey, hmc_net_request_t** req) {
  return ux_post_vec(false, ep, iov, count, rkey, req);
}

hmc_plugin_status_t ux_cancel(hmc_net_request_t* req) {
  return guarded([&] {
    if (req == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Request* r = as_req(req);
    if (r->ctx == nullptr || r->kind == ReqKind::kControl || r->orphan)
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    r->ctx->note_call();
    if (r->ep == nullptr) return HMC_PLUGIN_ERR_NOT_SUPPORTED;  // already ended
    return r->ep->cancel(r);
  });
}

hmc_plugin_status_t ux_progress(hmc_net_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ctx(ctx)->progress();
    as_ctx(ctx)->note_progress_slot();
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t ux_wait_fd(hmc_net_ctx_t* ctx, int* fd) {
  if (ctx == nullptr || fd == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  int f = as_ctx(ctx)->wait_fd();
  if (f < 0) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  *fd = f;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t ux_arm(hmc_net_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    as_ctx(ctx)->note_call();
    return as_ctx(ctx)->arm();
  });
}

hmc_plugin_status_t ux_connect_hello(hmc_net_ep_t* ep, void* hello, size_t* len) {
  return guarded([&] {
    if (ep == nullptr || hello == nullptr || len == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return as_ep(ep)->take_hello(static_cast<uint8_t*>(hello), len);
  });
}

hmc_plugin_status_t ux_accept_hello(hmc_net_listener_t* listener, const void* hello, size_t len) {
  return guarded([&] {
    if (listener == nullptr || (hello == nullptr && len > 0))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return as_listener(listener)->take_hello(static_cast<const uint8_t*>(hello), len);
  });
}

const hmc_net_plugin_v2_t kPlugin = {
    HMC_NET_ABI_HEADER_INIT(hmc_net_plugin_v2_t),
    "ucx",
    "0.1.0",
    kConfigVars,
    ux_init,
    ux_finalize,
    ux_device_count,
    ux_device_props,
    ux_listen,
    ux_accept,
    ux_close_listener,
    ux_connect,
    ux_ep_ready,
    ux_close_ep,
    ux_test,
    ux_reg_mr,
    ux_dereg_mr,
    ux_isend,
    ux_irecv,
    ux_rkey_unpack,
    ux_rkey_release,
    ux_iput,
    ux_iget,
    ux_cancel,
    ux_progress,
    ux_wait_fd,
    ux_arm,
    ux_connect_hello,
    ux_accept_hello,
    nullptr,  // iflush: not offered
    ux_iput_v,
    ux_iget_v,
    nullptr,  // iput_notify: not offered
    nullptr,  // notify_poll
};

}  // namespace
}  // namespace hmc::ucx

extern "C" HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
  return &hmc::ucx::kPlugin;
}
