// The plugin's C boundary: what the net table's slots do for this transport. The table, the
// handle casts, the argument checks every plugin makes and the catch-all that keeps exceptions
// from crossing the ABI are the SDK's (hmc/plugin/net_adaptor.hpp). Every slot but test,
// progress and the hellos calls note_call (see Context::progress_for_test).
#include <cstddef>
#include <memory>
#include <string>

#include "config.h"
#include "context.h"
#include "endpoint.h"
#include "hmc/plugin/net.h"
#include "hmc/plugin/net_adaptor.hpp"
#include "listener.h"
#include "region.h"
#include "request.h"
#include "status.h"
#include "wire.h"

namespace hmc::ucx {
namespace {

// Not offered: iflush, put with notification.
struct Ucx : hmc::plugin::NetPlugin<Context, Endpoint, Listener, Request, MemRegion, RemoteKey> {
  static int device_count(Context&) { return 1; }
  static bool valid_device(Context&, int dev) { return Context::valid_device(dev); }
  static void device_props(Context& c, int, hmc_net_device_props_t* props) { c.fill_props(props); }

  static hmc_plugin_status_t listen(Context& c, int, void* handle, size_t* handle_len,
                                    Listener** out) {
    c.note_call();
    return Listener::create(c, handle, handle_len, out);
  }

  static hmc_plugin_status_t connect(Context& c, int, const void* handle, size_t handle_len,
                                     Endpoint** out) {
    c.note_call();
    wire::Handle h;
    std::string why;
    if (!wire::decode_handle(static_cast<const uint8_t*>(handle), handle_len, &h, &why)) {
      c.log().write(HMC_LOG_ERROR, "connect: invalid connection handle: %s", why.c_str());
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    return Endpoint::connect(c, h, out);
  }

  static hmc_plugin_status_t ep_ready(Endpoint& e) {
    e.ctx().note_call();
    return e.ready_status();
  }
  static void close_ep(Endpoint& e) {
    e.ctx().note_call();
    delete &e;
  }

  UX_HOT static hmc_plugin_status_t test(Request& r, int* done, size_t* bytes) {
    if (r.ctx == nullptr || r.kind == ReqKind::kControl || r.orphan)
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;  // not a live request of this plugin
    Context& c = *r.ctx;
    if (!r.done) c.progress_for_test(&r);
    return hmc::plugin::report_test(r, done, bytes, [&] { c.release(&r); });
  }

  // UCX maps memory for its whole context, so a registration per device is one ucp_mem_map
  // each.
  static hmc_plugin_status_t reg_mr(Context& c, int, const hmc_net_mem_desc_t& mem, MemRegion** out,
                                    void* rkey, size_t* rkey_len) {
    c.note_call();
    if (!c.rma()) {
      UX_DEBUG(c.log(), "reg_mr: one-sided operations are not offered (UCX started without RMA)");
      return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    }
    ucs_memory_type_t mt;
    const bool reachable =
        mem.iface < HMC_MEM_IFACE_MAX && (c.mem_ifaces() & HMC_MEM_IFACE_BIT(mem.iface));
    if (mem.dmabuf_fd < 0 && reachable && mem.iface == HMC_MEM_IFACE_HOST) {
      mt = UCS_MEMORY_TYPE_HOST;
    } else if (mem.dmabuf_fd < 0 && reachable && mem.iface == HMC_MEM_IFACE_CUDA) {
      mt = UCS_MEMORY_TYPE_CUDA;
    } else if (mem.dmabuf_fd < 0 && reachable && mem.iface == HMC_MEM_IFACE_ROCM) {
      mt = UCS_MEMORY_TYPE_ROCM;
    } else {
      UX_DEBUG(c.log(),
               "reg_mr: memory of interface %u (dma-buf fd %d) is not one this UCX "
               "can access directly",
               mem.iface, mem.dmabuf_fd);
      return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    }
    uintptr_t base = reinterpret_cast<uintptr_t>(mem.addr);
    if ((base == 0 && mem.len > 0) || mem.len > UINTPTR_MAX - base) {
      c.log().write(HMC_LOG_ERROR, "reg_mr: invalid range (%p, %zu bytes)", mem.addr, mem.len);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    auto m = std::make_unique<MemRegion>();
    m->base = base;
    m->len = mem.len;
    m->access = mem.access &
                (HMC_NET_ACCESS_LOCAL | HMC_NET_ACCESS_REMOTE_READ | HMC_NET_ACCESS_REMOTE_WRITE);
    void* ucx_key = nullptr;
    size_t ucx_len = 0;
    if (mem.len > 0) {
      ucp_mem_map_params_t mp{};
      mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
      mp.address = mem.addr;
      mp.length = mem.len;
      mp.memory_type = mt;
      ucs_status_t us = ucp_mem_map(c.ucp(), &mp, &m->memh);
      if (us != UCS_OK) {
        c.log().write(HMC_LOG_ERROR, "reg_mr: ucp_mem_map of %zu bytes at %p failed: %s", mem.len,
                      mem.addr, ucs_status_string(us));
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
    *out = m.release();
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t dereg_mr(Context& c, MemRegion& m) {
    c.note_call();
    if (c.mrs().erase(&m) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    if (m.memh != nullptr) ucp_mem_unmap(c.ucp(), m.memh);
    delete &m;
    return HMC_PLUGIN_SUCCESS;
  }

  UX_HOT static hmc_plugin_status_t isend(Endpoint& e, const void* buf, size_t len, MemRegion*,
                                          uint64_t tag, Request** out) {
    e.ctx().note_call();
    return e.post_send(buf, len, tag, out);
  }
  UX_HOT static hmc_plugin_status_t irecv(Endpoint& e, void* buf, size_t len, MemRegion*,
                                          uint64_t tag, Request** out) {
    e.ctx().note_call();
    return e.post_recv(buf, len, tag, out);
  }

  static hmc_plugin_status_t rkey_unpack(Endpoint& e, const void* rkey, size_t rkey_len,
                                         RemoteKey** out) {
    e.ctx().note_call();
    return e.unpack_rkey(rkey, rkey_len, out);
  }

  // Keys outlive their endpoint (close_ep drops their UCX part): the context's registry says
  // whether a handle is a live key.
  static hmc_plugin_status_t rkey_release(RemoteKey& k) {
    Context* c = k.ctx;
    if (c == nullptr || c->rkeys().erase(&k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    c->note_call();
    if (k.ep != nullptr) k.ep->forget_rkey(&k);
    if (k.rkey != nullptr) ucp_rkey_destroy(k.rkey);
    delete &k;
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t iput(Endpoint& e, const void* buf, size_t len, MemRegion*,
                                  uint64_t remote_addr, RemoteKey& k, Request** out) {
    e.ctx().note_call();
    return e.post_put(buf, len, remote_addr, &k, out);
  }
  static hmc_plugin_status_t iget(Endpoint& e, void* buf, size_t len, MemRegion*,
                                  uint64_t remote_addr, RemoteKey& k, Request** out) {
    e.ctx().note_call();
    return e.post_get(buf, len, remote_addr, &k, out);
  }
  static hmc_plugin_status_t iput_v(Endpoint& e, const hmc_net_iov_t* iov, size_t count,
                                    RemoteKey& k, Request** out) {
    e.ctx().note_call();
    return e.post_vec(true, iov, count, &k, out);
  }
  static hmc_plugin_status_t iget_v(Endpoint& e, const hmc_net_iov_t* iov, size_t count,
                                    RemoteKey& k, Request** out) {
    e.ctx().note_call();
    return e.post_vec(false, iov, count, &k, out);
  }

  static hmc_plugin_status_t cancel(Request& r) {
    if (r.ctx == nullptr || r.kind == ReqKind::kControl || r.orphan)
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    r.ctx->note_call();
    if (r.ep == nullptr) return HMC_PLUGIN_ERR_NOT_SUPPORTED;  // already ended
    return r.ep->cancel(&r);
  }

  static void progress(Context& c) {
    c.progress();
    c.note_progress_slot();
  }
  static hmc_plugin_status_t wait_fd(Context& c, int* fd) {
    int f = c.wait_fd();
    if (f < 0) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    *fd = f;
    return HMC_PLUGIN_SUCCESS;
  }
  static hmc_plugin_status_t arm(Context& c) {
    c.note_call();
    return c.arm();
  }

  static hmc_plugin_status_t connect_hello(Endpoint& e, void* hello, size_t* len) {
    return e.take_hello(static_cast<uint8_t*>(hello), len);
  }
  static hmc_plugin_status_t accept_hello(Listener& l, const void* hello, size_t len) {
    return l.take_hello(static_cast<const uint8_t*>(hello), len);
  }
};

constexpr hmc_net_plugin_v2_t kPlugin = hmc::plugin::net_table<Ucx>("ucx", "0.1.0", kConfigVars);

}  // namespace
}  // namespace hmc::ucx

extern "C" HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
  return &hmc::ucx::kPlugin;
}
