// The plugin's C boundary: what the net table's slots do for this transport. The table, the
// handle casts, the argument checks every plugin makes and the catch-all that keeps exceptions
// from crossing the ABI are the SDK's (hmc/plugin/net_adaptor.hpp).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "context.h"
#include "endpoint.h"
#include "hmc/plugin/net.h"
#include "hmc/plugin/net_adaptor.hpp"
#include "listener.h"
#include "region.h"
#include "request.h"
#include "wire.h"

namespace hmc::ibverbs {
namespace {

// The caller's registration for a local buffer, checked: known, of the endpoint's device, and
// covering the buffer. nullptr when mr is NULL (the plugin copies or registers on the fly).
hmc_plugin_status_t local_mr(Endpoint& ep, MemRegion* m, const void* buf, size_t len,
                             const MemRegion** out) {
  *out = nullptr;
  if (m == nullptr) return HMC_PLUGIN_SUCCESS;
  Context& c = ep.ctx();
  if (c.regions().count(m) == 0) {
    IB_ERROR(c.log(), "unknown or deregistered mr %p", static_cast<void*>(m));
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

uint32_t rma_access(bool put) {
  return put ? HMC_NET_ACCESS_REMOTE_WRITE : HMC_NET_ACCESS_REMOTE_READ;
}

// A request that ends HMC_PLUGIN_ERR_REMOTE with nothing moved: an access the key does not
// allow, refused before anything moves and reported as the owner's refusal would be.
hmc_plugin_status_t refused(Endpoint& e, bool put, Request** out) {
  hmc_plugin_status_t st = e.post_rma(put, nullptr, 0, nullptr, 0, PackedKey{}, nullptr, out);
  if (st == HMC_PLUGIN_SUCCESS) (*out)->result = HMC_PLUGIN_ERR_REMOTE;
  return st;
}

// Not offered: connect_hello/accept_hello (the side channel carries the setup), iflush (no
// device memory by pointer).
struct Ibverbs
    : hmc::plugin::NetPlugin<Context, Endpoint, Listener, Request, MemRegion, RemoteKey> {
  using Handle = ConnHandle;  // the adaptor decodes it with decode_handle (wire.h)

  static void device_props(Context& c, int dev, hmc_net_device_props_t* props) {
    c.device(dev)->fill_props(props);
  }

  static hmc_plugin_status_t listen(Context& c, int dev, void* handle, size_t* handle_len,
                                    Listener** out) {
    auto l = std::make_unique<Listener>(*c.device(dev));
    hmc_plugin_status_t st = l->start(handle, handle_len);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    *out = l.release();
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t connect(Context& c, int dev, const Handle& h, Endpoint** out) {
    auto* e = new Endpoint(*c.device(dev));
    hmc_plugin_status_t st = e->dial(h);
    if (st != HMC_PLUGIN_SUCCESS) {
      delete e;
      return st;
    }
    *out = e;
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t close_ep(Endpoint& e) {
    if (e.ctx().endpoints().count(&e) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete &e;
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t test(Request& r, int* done, size_t* bytes) {
    if (r.ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    if (!r.done) r.ep->ctx().progress();
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
    destroy_region(c, &m);
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t isend(Endpoint& e, const void* buf, size_t len, MemRegion* mr,
                                   uint64_t tag, Request** out) {
    const MemRegion* m = nullptr;
    hmc_plugin_status_t st = local_mr(e, mr, buf, len, &m);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    return e.post_send(buf, len, m, tag, out);
  }
  static hmc_plugin_status_t irecv(Endpoint& e, void* buf, size_t len, MemRegion* mr, uint64_t tag,
                                   Request** out) {
    const MemRegion* m = nullptr;
    hmc_plugin_status_t st = local_mr(e, mr, buf, len, &m);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    return e.post_recv(buf, len, m, tag, out);
  }

  static hmc_plugin_status_t rkey_unpack(Endpoint& e, const void* rkey, size_t rkey_len,
                                         RemoteKey** out) {
    auto k = std::make_unique<RemoteKey>();
    std::string why;
    if (!decode_key(static_cast<const uint8_t*>(rkey), rkey_len, &k->key, &why)) {
      IB_ERROR(e.ctx().log(), "rkey_unpack: %s", why.c_str());
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    k->dev = &e.dev();
    e.ctx().rkeys().insert(k.get());
    *out = k.release();
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t rkey_release(RemoteKey& k) {
    if (k.dev->ctx().rkeys().erase(&k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete &k;
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t rma(bool put, Endpoint& e, void* buf, size_t len, MemRegion* mr,
                                 uint64_t remote_addr, RemoteKey& k, const uint64_t* notify,
                                 Request** out) {
    if (e.ctx().rkeys().count(&k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    const MemRegion* m = nullptr;
    hmc_plugin_status_t st = local_mr(e, mr, buf, len, &m);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    if (!access_allowed(k.key, remote_addr, len, rma_access(put))) return refused(e, put, out);
    return e.post_rma(put, buf, len, m, remote_addr, k.key, notify, out);
  }
  static hmc_plugin_status_t iput(Endpoint& e, const void* buf, size_t len, MemRegion* mr,
                                  uint64_t remote_addr, RemoteKey& k, Request** out) {
    return rma(true, e, const_cast<void*>(buf), len, mr, remote_addr, k, nullptr, out);
  }
  static hmc_plugin_status_t iget(Endpoint& e, void* buf, size_t len, MemRegion* mr,
                                  uint64_t remote_addr, RemoteKey& k, Request** out) {
    return rma(false, e, buf, len, mr, remote_addr, k, nullptr, out);
  }
  static hmc_plugin_status_t iput_notify(Endpoint& e, const void* buf, size_t len, MemRegion* mr,
                                         uint64_t remote_addr, RemoteKey& k, uint64_t value,
                                         Request** out) {
    return rma(true, e, const_cast<void*>(buf), len, mr, remote_addr, k, &value, out);
  }

  static hmc_plugin_status_t rma_v(bool put, Endpoint& e, const hmc_net_iov_t* iov, size_t count,
                                   RemoteKey& k, Request** out) {
    if (e.ctx().rkeys().count(&k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    std::vector<RmaPiece> pieces(count);
    bool allowed = true;
    for (size_t i = 0; i < count; ++i) {
      const hmc_net_iov_t& v = iov[i];
      hmc_plugin_status_t st =
          local_mr(e, reinterpret_cast<MemRegion*>(v.mr), v.buf, v.len, &pieces[i].mr);
      if (st != HMC_PLUGIN_SUCCESS) return st;
      pieces[i].buf = v.buf;
      pieces[i].len = v.len;
      pieces[i].remote = v.remote_addr;
      allowed = allowed && access_allowed(k.key, v.remote_addr, v.len, rma_access(put));
    }
    // Every piece is checked before any moves: a refused list writes and reads nothing.
    if (!allowed) return refused(e, put, out);
    return e.post_rma_v(put, pieces, k.key, out);
  }
  static hmc_plugin_status_t iput_v(Endpoint& e, const hmc_net_iov_t* iov, size_t count,
                                    RemoteKey& k, Request** out) {
    return rma_v(true, e, iov, count, k, out);
  }
  static hmc_plugin_status_t iget_v(Endpoint& e, const hmc_net_iov_t* iov, size_t count,
                                    RemoteKey& k, Request** out) {
    return rma_v(false, e, iov, count, k, out);
  }

  static hmc_plugin_status_t notify_poll(Endpoint& e, uint64_t* value) {
    return e.notify_poll(value);
  }
  static hmc_plugin_status_t cancel(Request& r) {
    if (r.ep == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return r.ep->cancel(&r);
  }
  static void progress(Context& c) { c.progress(); }
  static hmc_plugin_status_t wait_fd(Context& c, int* fd) { return c.wait_fd(fd); }
  static hmc_plugin_status_t arm(Context& c) { return c.arm(); }
};

constexpr hmc_net_plugin_v2_t kPlugin =
    hmc::plugin::net_table<Ibverbs>("ibverbs", "0.1.0", kConfigVars);

}  // namespace
}  // namespace hmc::ibverbs

extern "C" HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
  return &hmc::ibverbs::kPlugin;
}
