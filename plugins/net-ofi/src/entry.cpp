// The plugin's C boundary: what the net table's slots do for this transport. The table, the
// handle casts, the argument checks every plugin makes and the catch-all that keeps exceptions
// from crossing the ABI are the SDK's (hmc/plugin/net_adaptor.hpp).
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include "context.h"
#include "endpoint.h"
#include "hmc/plugin/net.h"
#include "hmc/plugin/net_adaptor.hpp"
#include "listener.h"
#include "region.h"
#include "request.h"
#include "wire.h"

namespace hmc::ofi {
namespace {

// What the caller's registration says about a buffer on the endpoint's device, after checking
// that it covers the buffer. mr == NULL: host memory, no descriptor (the device registers on
// the fly where it must).
hmc_plugin_status_t local_buf(Endpoint& ep, MemRegion* m, const void* buf, size_t len,
                              LocalBuf* lb) {
  *lb = LocalBuf{};
  if (m == nullptr) return HMC_PLUGIN_SUCCESS;
  Context& c = ep.dev().ctx();
  if (c.regions().count(m) == 0) {
    c.log().write(HMC_LOG_ERROR, "unknown or deregistered mr %p", static_cast<void*>(m));
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

// Not offered: connect_hello/accept_hello (nothing the listener must learn before traffic),
// iflush, the vectored put/get and put with notification.
struct Ofi : hmc::plugin::NetPlugin<Context, Endpoint, Listener, Request, MemRegion, RemoteKey> {
  using Handle = ConnHandle;  // the adaptor decodes it with decode_handle (wire.h)

  static void device_props(Context& c, int dev, hmc_net_device_props_t* props) {
    c.device(dev)->fill_props(props);
  }

  static hmc_plugin_status_t listen(Context& c, int dev, void* handle, size_t* handle_len,
                                    Listener** out) {
    auto l = std::make_unique<Listener>(*c.device(dev));
    hmc_plugin_status_t st = l->start(handle, handle_len);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    c.listeners().insert(l.get());
    *out = l.release();
    return HMC_PLUGIN_SUCCESS;
  }
  // (the default close_listener's delete leaves its context's registry itself)

  static hmc_plugin_status_t connect(Context& c, int dev, const Handle& h, Endpoint** out) {
    Device& d = *c.device(dev);
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
    *out = e;
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t close_ep(Endpoint& e) {
    Context& c = e.dev().ctx();
    if (!c.has_endpoint(&e)) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    c.destroy_endpoint(&e, true);
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t test(Request& r, int* done, size_t* bytes) {
    if (r.ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;  // its endpoint was closed
    if (!r.done) {
      r.ep->dev().progress();
      r.ep->dev().ctx().tick();
    }
    return hmc::plugin::report_test(r, done, bytes, [&] { r.ep->retire(&r); });
  }

  static hmc_plugin_status_t reg_mr(Context& c, int dev, const hmc_net_mem_desc_t& mem,
                                    MemRegion** out, void* rkey, size_t* rkey_len) {
    MemRegion* region = nullptr;
    hmc_plugin_status_t st = register_region(c, dev, &mem, &region, rkey, rkey_len);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    c.regions().insert(region);
    *out = region;
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t dereg_mr(Context& c, MemRegion& m) {
    if (c.regions().erase(&m) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete &m;
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t isend(Endpoint& e, const void* buf, size_t len, MemRegion* mr,
                                   uint64_t tag, Request** out) {
    LocalBuf lb;
    hmc_plugin_status_t st = local_buf(e, mr, buf, len, &lb);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    return e.post_send(buf, len, lb, tag, out);
  }
  static hmc_plugin_status_t irecv(Endpoint& e, void* buf, size_t len, MemRegion* mr, uint64_t tag,
                                   Request** out) {
    LocalBuf lb;
    hmc_plugin_status_t st = local_buf(e, mr, buf, len, &lb);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    return e.post_recv(buf, len, lb, tag, out);
  }

  static hmc_plugin_status_t rkey_unpack(Endpoint& e, const void* rkey, size_t rkey_len,
                                         RemoteKey** out) {
    RemoteKey* k = nullptr;
    hmc_plugin_status_t st = unpack_remote_key(e, rkey, rkey_len, &k);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    e.dev().ctx().rkeys().insert(k);
    *out = k;
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t rkey_release(RemoteKey& k) {
    if (k.dev->ctx().rkeys().erase(&k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete &k;
    return HMC_PLUGIN_SUCCESS;
  }

  // The checks of a put or get before it is posted: a live key, a registration covering buf.
  static hmc_plugin_status_t rma_args(Endpoint& e, const void* buf, size_t len, MemRegion* mr,
                                      RemoteKey& k, LocalBuf* lb) {
    if (e.dev().ctx().rkeys().count(&k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return local_buf(e, mr, buf, len, lb);
  }
  static hmc_plugin_status_t iput(Endpoint& e, const void* buf, size_t len, MemRegion* mr,
                                  uint64_t remote_addr, RemoteKey& k, Request** out) {
    LocalBuf lb;
    hmc_plugin_status_t st = rma_args(e, buf, len, mr, k, &lb);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    return e.post_put(buf, len, lb, remote_addr, k, out);
  }
  static hmc_plugin_status_t iget(Endpoint& e, void* buf, size_t len, MemRegion* mr,
                                  uint64_t remote_addr, RemoteKey& k, Request** out) {
    LocalBuf lb;
    hmc_plugin_status_t st = rma_args(e, buf, len, mr, k, &lb);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    return e.post_get(buf, len, lb, remote_addr, k, out);
  }

  static hmc_plugin_status_t cancel(Request& r) {
    if (r.ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return r.ep->cancel(&r);
  }
  static void progress(Context& c) { c.progress(); }
  static hmc_plugin_status_t wait_fd(Context& c, int* fd) { return c.wait_fd(fd); }
  static hmc_plugin_status_t arm(Context& c) { return c.arm(); }
};

constexpr hmc_net_plugin_v2_t kPlugin = hmc::plugin::net_table<Ofi>("ofi", "0.1.0", kConfigVars);

}  // namespace
}  // namespace hmc::ofi

extern "C" HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
  return &hmc::ofi::kPlugin;
}
