// The plugin's C boundary: what the net table's slots do for this transport. The table, the
// handle casts, the argument checks every plugin makes and the catch-all that keeps exceptions
// from crossing the ABI are the SDK's (hmc/plugin/net_adaptor.hpp).
#include <cstddef>
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

namespace hmc::hoststage {
namespace {

constexpr char kDevNames[2][4] = {"tcp", "shm"};

// A local buffer of a put or get registered as mr: where its bytes are (the mapping of device
// memory registered by dma-buf). False for an mr that is not live.
bool local_buffer(Endpoint& ep, MemRegion* m, const void* buf, size_t len, const void** out) {
  if (ep.ctx().mrs().count(m) == 0) {
    ep.ctx().log().write(HMC_LOG_ERROR, "unknown or deregistered mr %p", static_cast<void*>(m));
    return false;
  }
  *out = m->local_of(buf, len);
  return true;
}

// Not offered: connect_hello/accept_hello (nothing the listener must learn before traffic),
// iflush (its writes are CPU stores, visible without one).
struct Hoststage
    : hmc::plugin::NetPlugin<Context, Endpoint, Listener, Request, MemRegion, RemoteKey> {
  using Handle = ConnHandle;  // the adaptor decodes it with decode_handle (handle.h)

  static void device_props(Context&, int dev, hmc_net_device_props_t* props) {
    const bool shm = dev == static_cast<int>(DevKind::kShm);
    using P = hmc_net_device_props_t;
    if (HMC_ABI_HAS_FIELD(props, P, name)) props->name = kDevNames[dev];
    if (HMC_ABI_HAS_FIELD(props, P, pci_path)) props->pci_path = nullptr;
    // 0 = unknown: loopback, a 1 GbE NIC and shared memory differ by orders of magnitude, so
    // the core calibrates instead of trusting a made-up number.
    if (HMC_ABI_HAS_FIELD(props, P, bandwidth_MBps)) props->bandwidth_MBps = 0;
    if (HMC_ABI_HAS_FIELD(props, P, latency_ns)) props->latency_ns = 0;
    // dma-buf: device memory whose exporter lets the CPU map it is registered through the
    // mapping.
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
  }

  static hmc_plugin_status_t listen(Context& c, int dev, void* handle, size_t* handle_len,
                                    Listener** out) {
    return Listener::create(c, static_cast<DevKind>(dev), handle, handle_len, out);
  }

  static hmc_plugin_status_t connect(Context& c, int dev, const Handle& h, Endpoint** out) {
    if (static_cast<int>(h.dev) != dev) {
      c.log().write(HMC_LOG_ERROR, "connect: handle is for device %d (%s), not %d",
                    static_cast<int>(h.dev), kDevNames[static_cast<int>(h.dev)], dev);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    auto e = std::make_unique<Endpoint>(c, static_cast<DevKind>(dev));
    hmc_plugin_status_t st = e->dial(h);
    if (st == HMC_PLUGIN_SUCCESS) *out = e.release();
    return st;
  }

  static hmc_plugin_status_t test(Request& r, int* done, size_t* bytes) {
    if (!r.done) r.ep->ctx().test_tick();
    return hmc::plugin::report_test(r, done, bytes, [&] { r.ep->release(&r); });
  }

  static hmc_plugin_status_t reg_mr(Context& c, int, const hmc_net_mem_desc_t& mem, MemRegion** out,
                                    void* rkey, size_t* rkey_len) {
    uintptr_t base = reinterpret_cast<uintptr_t>(mem.addr);
    if ((base == 0 && mem.len > 0) || mem.len > UINTPTR_MAX - base) {
      c.log().write(HMC_LOG_ERROR, "reg_mr: invalid range (%p, %zu bytes)", mem.addr, mem.len);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    // Host memory by pointer; device memory only through a dma-buf the CPU can map, whose
    // mapping then holds the bytes that peers read and write.
    auto m = std::make_unique<MemRegion>(0);
    if (mem.dmabuf_fd >= 0) {
      std::string why;
      if (mem.len == 0 || !map_dmabuf(mem.dmabuf_fd, mem.dmabuf_offset, mem.len, m.get(), &why)) {
        HS_DEBUG(c.log(), "reg_mr: %zu bytes of device memory (interface %u) at %p: %s", mem.len,
                 mem.iface, mem.addr, mem.len == 0 ? "empty" : why.c_str());
        return HMC_PLUGIN_ERR_NOT_SUPPORTED;
      }
      m->base = base;
      m->len = mem.len;
    } else if (mem.iface != HMC_MEM_IFACE_HOST) {
      HS_DEBUG(c.log(), "reg_mr: memory of interface %u without a dma-buf is not host memory",
               mem.iface);
      return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    }
    const Region& r = c.regions().add(base, mem.len, mem.access, m->local);
    m->key = r.key;
    c.mrs().insert(m.get());
    *rkey_len = pack_rkey(r, rkey);
    *out = m.release();
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t dereg_mr(Context& c, MemRegion& m) {
    if (c.mrs().erase(&m) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    c.regions().remove(m.key);
    delete &m;
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t isend(Endpoint& e, const void* buf, size_t len, MemRegion*,
                                   uint64_t tag, Request** out) {
    if (e.ctx().inject_error("isend")) return HMC_PLUGIN_ERR_INTERNAL;
    return e.post_send(buf, len, tag, out);
  }
  static hmc_plugin_status_t irecv(Endpoint& e, void* buf, size_t len, MemRegion*, uint64_t tag,
                                   Request** out) {
    if (e.ctx().inject_error("irecv")) return HMC_PLUGIN_ERR_INTERNAL;
    return e.post_recv(buf, len, tag, out);
  }

  static hmc_plugin_status_t rkey_unpack(Endpoint& e, const void* rkey, size_t rkey_len,
                                         RemoteKey** out) {
    RemoteKey k{};
    if (!unpack_rkey(rkey, rkey_len, &k)) {
      e.ctx().log().write(HMC_LOG_ERROR, "rkey_unpack: not a hoststage remote key (%zu bytes)",
                          rkey_len);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    k.ctx = &e.ctx();
    auto p = std::make_unique<RemoteKey>(k);
    e.ctx().rkeys().insert(p.get());
    *out = p.release();
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t rkey_release(RemoteKey& k) {
    if (k.ctx->rkeys().erase(&k) == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    delete &k;
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t put(Endpoint& e, const void* buf, size_t len, MemRegion* mr,
                                 uint64_t remote_addr, RemoteKey& k, bool notify, uint64_t value,
                                 Request** out) {
    const void* local = buf;
    if (mr != nullptr && !local_buffer(e, mr, buf, len, &local))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    if (e.ctx().inject_error("put")) return HMC_PLUGIN_ERR_INTERNAL;
    return e.post_put(local, len, remote_addr, k.key, notify, value, out);
  }
  static hmc_plugin_status_t iput(Endpoint& e, const void* buf, size_t len, MemRegion* mr,
                                  uint64_t remote_addr, RemoteKey& k, Request** out) {
    return put(e, buf, len, mr, remote_addr, k, false, 0, out);
  }
  static hmc_plugin_status_t iput_notify(Endpoint& e, const void* buf, size_t len, MemRegion* mr,
                                         uint64_t remote_addr, RemoteKey& k, uint64_t value,
                                         Request** out) {
    return put(e, buf, len, mr, remote_addr, k, true, value, out);
  }
  static hmc_plugin_status_t notify_poll(Endpoint& e, uint64_t* value) {
    return e.poll_notification(value) ? HMC_PLUGIN_SUCCESS : HMC_PLUGIN_IN_PROGRESS;
  }

  static hmc_plugin_status_t iget(Endpoint& e, void* buf, size_t len, MemRegion* mr,
                                  uint64_t remote_addr, RemoteKey& k, Request** out) {
    const void* local = buf;
    if (mr != nullptr && !local_buffer(e, mr, buf, len, &local))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    if (e.ctx().inject_error("iget")) return HMC_PLUGIN_ERR_INTERNAL;
    return e.post_get(const_cast<void*>(local), len, remote_addr, k.key, out);
  }

  // Vectored put/get: the pieces go into the endpoint's scratch list (each piece's local bytes
  // where its mr maps them), which the request then keeps.
  static hmc_plugin_status_t vec(bool put, Endpoint& e, const hmc_net_iov_t* iov, size_t count,
                                 RemoteKey& k, Request** out) {
    std::vector<VecPieceWire>& pieces = e.vec_scratch();
    pieces.clear();
    pieces.reserve(count);
    MemRegion* checked = nullptr;  // the last mr found live (lists use one)
    for (size_t i = 0; i < count; ++i) {
      const hmc_net_iov_t& p = iov[i];
      const void* local = p.buf;
      if (p.mr != nullptr) {
        auto* m = reinterpret_cast<MemRegion*>(p.mr);
        if (m != checked && !local_buffer(e, m, p.buf, p.len, &local))
          return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
        checked = m;
        local = m->local_of(p.buf, p.len);
      }
      pieces.push_back(VecPieceWire{p.remote_addr, p.len, reinterpret_cast<uintptr_t>(local)});
    }
    if (e.ctx().inject_error(put ? "iput_v" : "iget_v")) return HMC_PLUGIN_ERR_INTERNAL;
    return e.post_vec(put, &pieces, k.key, out);
  }
  static hmc_plugin_status_t iput_v(Endpoint& e, const hmc_net_iov_t* iov, size_t count,
                                    RemoteKey& k, Request** out) {
    return vec(true, e, iov, count, k, out);
  }
  static hmc_plugin_status_t iget_v(Endpoint& e, const hmc_net_iov_t* iov, size_t count,
                                    RemoteKey& k, Request** out) {
    return vec(false, e, iov, count, k, out);
  }

  static hmc_plugin_status_t cancel(Request& r) { return r.ep->cancel(&r); }
  static void progress(Context& c) { c.progress_from_core(); }
  static void wait_fd(Context& c, int* fd) { *fd = c.wait_fd(); }
  static hmc_plugin_status_t arm(Context& c) { return c.arm(); }
};

constexpr hmc_net_plugin_v2_t kPlugin =
    hmc::plugin::net_table<Hoststage>("hoststage", "0.1.0", kConfigVars);

}  // namespace
}  // namespace hmc::hoststage

extern "C" HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
  return &hmc::hoststage::kPlugin;
}
