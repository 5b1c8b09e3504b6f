// Posting transfers on a peer's data path, and completing them: test, wait (busy-polling the
// request's own plugin, with a full progress pass now and then), cancel, notifications.
#include "xfer/transfers.h"

#include <sched.h>

#include <algorithm>

#include "framed/framed_message.h"
#include "framed/pieced_rma.h"
#include "net/registration.h"
#include "peer/messages.h"
#include "regions/regions.h"
#include "util/clock.h"
#include "util/hot.h"
#include "util/log.h"
#include "util/status.h"
#include "xfer/target_staging.h"
#include "xfer/xfer_list.h"

namespace hmc {

const char* op_name(Op op) {
  switch (op) {
    case Op::Send: return "send";
    case Op::Recv: return "recv";
    case Op::Put: return "put";
    case Op::Get: return "get";
    case Op::Coll: return "collective";
  }
  return "?";
}

void Transfers::configure(const Settings& settings) {
  owner_ = settings.owner;
  regions_ = settings.regions;
  staging_ = settings.staging;
  timeout_ms_ = settings.timeout_ms;
  wait_spin_ns_ = uint64_t(settings.wait_spin_us) * 1000;
  polling_.progress_thread = settings.progress_thread;
}

namespace {
// How often a waiting thread services the control plane (heartbeats, notifications, liveness).
constexpr uint64_t kControlIntervalNs = 200 * 1000;
// How long a wait spins without anything happening before it starts yielding the CPU.
constexpr uint64_t kQuietNs = 50 * 1000;
// How many times a wait tests its own request's plugin in a row, under one lock, per turn of its
// loop: the lock is then taken once per eight tests, and the rest of the loop (the clock, the
// control plane, yielding) comes once per 128: it cut net-ucx's latency tail over tcp
// (docs/performance.md, "History").
constexpr int kFastTurns = 8;

}  // namespace

// Where buf lives, for a peer pair that frames its messages: host memory and device memory the
// path reaches natively go direct, other device memory is staged through bounce buffers. With
// mr (one-sided operations), device memory inside a region registered with the path's net device
// (by dma-buf, or by pointer for put/get: peermem) goes direct too, and *mr is that
// registration; messages of such memory stay staged (the plugin may copy them with the CPU).
hmc_status_t Transfers::memory_access(const Peer& peer, const void* buf, size_t size,
                                      const char* what, bool* staged, MemoryLocation* where,
                                      hmc_net_mr_t** mr) {
  *staged = false;
  if (size == 0) return HMC_SUCCESS;
  MemoryLocation loc = devices_.locate(buf);
  if (where) *where = loc;
  if (loc.device->is_host()) return HMC_SUCCESS;
  if (loc.size && reinterpret_cast<uintptr_t>(buf) - loc.base + size > loc.size)
    return fail(HMC_ERR_OUT_OF_BOUNDS,
                "hmc_{}: {} bytes at {} overrun its {}-byte allocation on "
                "{}",
                what, size, buf, loc.size, loc.device->name);
  const NetDevice* nd = peer.net_device;
  const int iface = loc.device->mem_iface;
  if (nd && iface >= 0 && (nd->props.mem_ifaces & HMC_MEM_IFACE_BIT(iface))) return HMC_SUCCESS;
  *staged = true;
  // Only a net device that takes dma-bufs, or registers this interface by pointer for put/get,
  // holds registrations of memory it cannot reach natively.
  if (mr && nd &&
      ((nd->props.flags & HMC_NET_FLAG_DMABUF) ||
       (iface >= 0 && (rma_mem_ifaces(*nd) & HMC_MEM_IFACE_BIT(iface))))) {
    if ((*mr = regions_->registration_covering(nd, buf, size))) *staged = false;
  }
  return HMC_SUCCESS;
}

// Whether a send of device memory at buf (located at loc) can go by device IPC to the peer: the
// pair agreed on IPC for its vendor and the plugin exports the allocation. Fills ex.
bool Transfers::ipc_export(const Peer& peer, const void* buf, const MemoryLocation& loc,
                           IpcExport* ex) {
  const Device* d = loc.device;
  if (!d || d->is_host() || !(d->caps & HMC_DEVICE_CAP_IPC) || !loc.size ||
      !peer.framing.ipc_for(d->plugin_name))
    return false;
  uint8_t handle[HMC_DEVICE_IPC_HANDLE_MAX];
  size_t len = sizeof handle;
  hmc_plugin_status_t ps = d->plugin->ipc_export(d->plugin_ctx, buf, handle, &len);
  if (ps != HMC_PLUGIN_SUCCESS || len == 0 || len > sizeof handle) {
    HMC_LOG_D("hmc_send to {}: {} cannot export {} for IPC ({}); staging it", peer.name, d->name,
              buf, plugin_status_string(ps));
    return false;
  }
  ex->plugin = d->plugin_name;
  ex->handle.assign(handle, handle + len);
  ex->offset = reinterpret_cast<uintptr_t>(buf) - loc.base;
  return true;
}

// A framed send of buf, and how its pieces of staged device memory travel when it is more than
// a first piece: the ways open to the pair (device IPC, one device-to-device copy; shared
// bounces, one copy out and one in; the transport) are tried in the order the cost model ranks
// them for this size (path/device_modes.h). A way that cannot serve this message (the
// allocation does not export, the peer refused shared buffers) passes to the next.
std::unique_ptr<FramedTransfer> Transfers::make_framed_send(const Peer& peer, const void* buf,
                                                            size_t size, uint64_t tag, bool staged,
                                                            const MemoryLocation& loc) {
  auto f = std::make_unique<FramedSend>(buf, size, tag, staged, peer.framing.geometry());
  if (!staged || size <= peer.framing.first_piece || !loc.device) return f;
  const auto* costs = peer.framing.modes_for(loc.device->plugin_name);
  path::DeviceMode order[3] = {path::DeviceMode::Ipc, path::DeviceMode::Shared,
                               path::DeviceMode::Transport};
  int n = costs ? path::rank_device_modes(*costs, size, order) : 3;
  for (int i = 0; i < n; ++i) {
    switch (order[i]) {
      case path::DeviceMode::Ipc: {
        IpcExport ex;
        if (!ipc_export(peer, buf, loc, &ex)) break;
        // The receiver's buffer decides whether IPC applies (memory of this vendor); where it
        // does not, shared bounces ranked above the transport are offered with it.
        bool shared_too = false;
        for (int j = i + 1; j < n && order[j] != path::DeviceMode::Transport; ++j)
          shared_too |= order[j] == path::DeviceMode::Shared;
        f->use_ipc(std::move(ex),
                   shared_too && peer.framing.ipc_or_shared && peer.framing.shared_for_sends());
        return f;
      }
      case path::DeviceMode::Shared:
        if (!peer.framing.shared_for_sends()) break;
        f->offer_shared();
        return f;
      case path::DeviceMode::Transport: return f;
    }
  }
  return f;
}

// A framed receive into buf, which copies staged pieces into loc's device.
std::unique_ptr<FramedTransfer> Transfers::make_framed_recv(const Peer& peer, void* buf,
                                                            size_t size, uint64_t tag, bool staged,
                                                            const MemoryLocation& loc) {
  auto f = std::make_unique<FramedRecv>(buf, size, tag, staged, peer.framing.geometry());
  if (loc.device && !loc.device->is_host()) f->set_local_device(loc.device);
  return f;
}

bool Transfers::framed_sends_waiting(Peer& peer, uint64_t tag) {
  std::lock_guard<std::mutex> lock(peer.net->mutex());
  return peer.framing.sends.count(tag) != 0;
}

// Posts a framed send or receive: its first step runs now, under the net mutex, so that its
// place in the per-tag order is the order of the posts.
hmc_status_t Transfers::post_framed(const std::shared_ptr<Peer>& peer,
                                    std::unique_ptr<FramedTransfer> f, Op op, size_t size,
                                    uint64_t tag, Request** out, bool notify, uint64_t notify_value,
                                    std::string_view notify_bytes) {
  Request* req =
      RequestTable::acquire(owner_, op, peer.get(), size, tag, notify, notify_value, notify_bytes);
  req->framed = std::move(f);
  {
    std::lock_guard<std::mutex> lock(peer->net->mutex());
    if (peer->lost || !peer->ep) {
      std::string reason = peer->lost_reason;
      RequestTable::release(req);
      return fail(peer->closed ? HMC_ERR_INVALID_HANDLE : HMC_ERR_PEER_LOST,
                  "hmc_{}: peer {} is {}", op_name(op), peer->name,
                  peer->closed ? "closed" : "lost (" + reason + ")");
    }
    peer->pending.push_back(req);
    if (req->notify) peer->notify_queue.push_back(req);
    peer->add_pending_locked(1);
    advance_framed_locked(*peer, req);
  }
  *out = req;
  return HMC_SUCCESS;
}

namespace {
// Validates what every post needs; net mutex not held.
hmc_status_t check_peer(const Peer& peer, const char* what, bool receiving = false) {
  if (peer.closed) return fail(HMC_ERR_INVALID_HANDLE, "hmc_{}: the peer was closed", what);
  if (peer.lost) return fail(HMC_ERR_PEER_LOST, "hmc_{}: peer {} is lost", what, peer.name);
  // A peer that closed can still be received from (what it sent before), not sent to.
  if (peer.remote_closed && !receiving)
    return fail(HMC_ERR_PEER_LOST, "hmc_{}: peer {} closed the connection", what, peer.name);
  return HMC_SUCCESS;
}
}  // namespace

// Posts req through `post` (called with the net mutex held and the endpoint live).
template <typename PostFn>
HMC_HOT hmc_status_t Transfers::post_common(Request* req, PostFn post) {
  Peer& peer = *req->peer;
  NetPlugin& net = *peer.net;
  const Op op = req->op;
  hmc_plugin_status_t ps;
  {
    std::lock_guard<std::mutex> lock(net.mutex());
    if (peer.lost || !peer.ep) {
      std::string reason = peer.lost_reason;
      RequestTable::release(req);  // the context keeps the peer
      return fail(peer.closed ? HMC_ERR_INVALID_HANDLE : HMC_ERR_PEER_LOST, "hmc_{}: peer {} is {}",
                  op_name(op), peer.name, peer.closed ? "closed" : "lost (" + reason + ")");
    }
    ps = post(net, peer.ep, &req->net);
    if (ps == HMC_PLUGIN_SUCCESS) {
      peer.pending.push_back(req);
      if (req->notify) peer.notify_queue.push_back(req);
      peer.add_pending_locked(1);
      // A send or put that ended as it was posted (copied into the transport) ends here, so
      // that its wait returns at once; where posts of its size do not end so, the test is left
      // out (peer/post_test_learner.h). Receives rarely end at post, and are never tested here.
      if ((op == Op::Send || op == Op::Put) && peer.post_test_learner.should_test(req->size)) {
        test_net_locked(peer, req);
        peer.post_test_learner.note(req->size, req->done.load(std::memory_order_acquire));
      }
    }
  }
  if (ps != HMC_PLUGIN_SUCCESS) {
    RequestTable::release(req);  // the context keeps the peer
    if (ps == HMC_PLUGIN_ERR_PEER_LOST) services_.progress(true);
    return fail(from_plugin_status(ps), "hmc_{} with {} via {}: {}", op_name(op), peer.name,
                peer.choice.key(), plugin_status_string(ps));
  }
  return HMC_SUCCESS;
}

const char* route_name(Route route) {
  switch (route) {
    case Route::Direct: return "direct";
    case Route::Framed: return "framed";
    case Route::Pieced: return "pieced";
    case Route::Vectored: return "vectored";
    case Route::TargetStaged: return "target-staged";
  }
  return "?";
}

// The route of a send or a receive (docs/protocols.md, "The route of an operation").
HMC_HOT hmc_status_t Transfers::route_message(Peer& peer, Op op, const void* buf, size_t size,
                                              uint64_t tag, RoutePlan* plan) {
  // 1. A pair that does not frame its messages (no device memory on either side): direct.
  if (!peer.framing.on()) return HMC_SUCCESS;
  // 2. Where the buffer lives; memory the pair cannot move is refused here.
  hmc_status_t st = memory_access(peer, buf, size, op_name(op), &plan->staged, &plan->loc);
  if (st != HMC_SUCCESS) return st;
  // 3. A receive is framed: it follows whatever the sender sends.
  // 4. A send is framed when its memory is staged, when it is more than one piece, or when a
  //    framed send of its tag is still going (the tag's order); else direct.
  if (op == Op::Recv || plan->staged || peer.framing.multi_piece(size) ||
      framed_sends_waiting(peer, tag))
    plan->route = Route::Framed;
  return HMC_SUCCESS;
}

// The route of a put or a get (docs/protocols.md, "The route of an operation").
hmc_status_t Transfers::route_rma(const Remote& remote, Op op, const void* buf, size_t size,
                                  RoutePlan* plan) {
  const Peer& peer = *remote.peer;
  // 1. The peer's region is memory its path cannot reach: the owner stages the access.
  if (remote.staged) {
    plan->route = Route::TargetStaged;
    return HMC_SUCCESS;
  }
  plan->device = remote.device;
  // 2. Where a pair frames its messages, where the local buffer lives: memory the path cannot
  //    reach (and no registration of it covers) goes in pieces through bounces.
  if (peer.framing.on()) {
    hmc_status_t st =
        memory_access(peer, buf, size, op_name(op), &plan->staged, &plan->loc, &plan->mr);
    if (st != HMC_SUCCESS) return st;
    plan->device |= size > 0 && !plan->loc.device->is_host();
    if (plan->staged) plan->route = Route::Pieced;
  }
  // 3. Either way the path must offer the one-sided operation and the region a key.
  const hmc_net_plugin_v2_t* t = peer.net->table();
  if (!(op == Op::Put ? HMC_NET_SLOT(t, iput) : HMC_NET_SLOT(t, iget)) || !remote.rkey)
    return fail(HMC_ERR_NOT_SUPPORTED, "hmc_{}: path {} to {} offers no one-sided operations",
                op_name(op), peer.choice.key(), peer.name);
  // 4. Else direct.
  return HMC_SUCCESS;
}

HMC_HOT hmc_status_t Transfers::post_message(Op op, Peer* peer, void* buf, size_t size,
                                             uint64_t tag, Request** out) {
  const bool send = op == Op::Send;
  hmc_status_t st = check_peer(*peer, op_name(op), !send);
  if (st != HMC_SUCCESS) return st;
  RoutePlan plan;
  if ((st = route_message(*peer, op, buf, size, tag, &plan)) != HMC_SUCCESS) return st;
  if (plan.route == Route::Framed)
    return post_framed(peer->shared_from_this(),
                       send ? make_framed_send(*peer, buf, size, tag, plan.staged, plan.loc)
                            : make_framed_recv(*peer, buf, size, tag, plan.staged, plan.loc),
                       op, size, tag, out);
  Request* req = RequestTable::acquire(owner_, op, peer, size, tag);
  st = post_common(req, [&](NetPlugin& net, hmc_net_ep_t* ep, hmc_net_request_t** nr) {
    return send ? net.table()->isend(ep, buf, size, nullptr, tag, nr)
                : net.table()->irecv(ep, buf, size, nullptr, tag, nr);
  });
  if (st != HMC_SUCCESS) return st;
  *out = req;
  return HMC_SUCCESS;
}

namespace {
hmc_status_t check_remote_range(const Remote& remote, uint64_t offset, size_t size,
                                const char* what) {
  if (offset > remote.size || size > remote.size - offset)
    return fail(HMC_ERR_OUT_OF_BOUNDS,
                "hmc_{}: {} bytes at offset {} fall outside the peer's {}-byte region", what, size,
                offset, remote.size);
  return HMC_SUCCESS;
}
}  // namespace

hmc_status_t Transfers::post_rma(Op op, Remote* remote, void* buf, size_t size, uint64_t offset,
                                 bool notify, uint64_t notify_value, std::string_view notify_bytes,
                                 Request** out) {
  const auto& peer = remote->peer;
  const char* what = op_name(op);
  const bool put = op == Op::Put;
  hmc_status_t st = check_peer(*peer, what);
  if (st != HMC_SUCCESS) return st;
  if ((st = check_remote_range(*remote, offset, size, what)) != HMC_SUCCESS) return st;
  if (remote->dead.load(std::memory_order_acquire)) return refuse_withdrawn(*remote, what);
  RoutePlan plan;
  if ((st = route_rma(*remote, op, buf, size, &plan)) != HMC_SUCCESS) return st;
  uint64_t addr = remote->base + offset;
  switch (plan.route) {
    case Route::TargetStaged:
      return staging_->post(remote, buf, size, offset, op, notify, notify_value, notify_bytes, out);
    case Route::Pieced: {
      const auto chunk = peer->framing.chunk;
      return post_tracked_rma(remote,
                              put ? PiecedRma::put(buf, size, addr, remote->rkey, chunk)
                                  : PiecedRma::get(buf, size, addr, remote->rkey, chunk),
                              op, size, out, notify, notify_value, notify_bytes);
    }
    default: break;
  }
  Request* req =
      RequestTable::acquire(owner_, op, peer.get(), size, 0, notify, notify_value, notify_bytes);
  hmc_net_mr_t* mr = plan.mr;
  st = post_common(req, [&](NetPlugin& net, hmc_net_ep_t* ep, hmc_net_request_t** nr) {
    if (!remote->rkey) return HMC_PLUGIN_ERR_PEER_LOST;
    // Checked and recorded under the net mutex, where a withdrawal marks and looks.
    if (remote->dead.load(std::memory_order_relaxed)) return HMC_PLUGIN_ERR_REMOTE;
    // A put's notification travels with the data where the plugin carries it (a value alone)
    // and that keeps the order of notifications (peer/notify_order.h).
    req->carried = req->notify && req->notify_bytes.empty() &&
                   peer->notify_sender.may_carry(
                       std::none_of(peer->notify_queue.begin(), peer->notify_queue.end(),
                                    [](const Request* q) { return !q->carried; }));
    hmc_plugin_status_t ps =
        !put ? net.table()->iget(ep, buf, size, mr, addr, remote->rkey, nr)
        : req->carried
            ? net.table()->iput_notify(ep, buf, size, mr, addr, remote->rkey, req->notify_value, nr)
            : net.table()->iput(ep, buf, size, mr, addr, remote->rkey, nr);
    if (ps == HMC_PLUGIN_SUCCESS && remote->region_id)
      track_remote_request_locked(remote, RequestTable::handle(req));
    return ps;
  });
  if (st != HMC_SUCCESS) return remote->dead.load() ? refuse_withdrawn(*remote, what) : st;
  if (plan.device) peer->framing.direct_transfers.fetch_add(1, std::memory_order_relaxed);
  *out = req;
  return HMC_SUCCESS;
}

hmc_status_t Transfers::list_access(const Peer& peer, Region* local, bool* staged,
                                    hmc_net_mr_t** mr) {
  *staged = false;
  *mr = nullptr;
  if (const Region::Registration* r = local->registration_on(peer.net_device)) {
    *mr = r->mr;
    return HMC_SUCCESS;
  }
  if (!peer.framing.on()) return HMC_SUCCESS;
  return memory_access(peer, local->addr, local->size, "xfer_post", staged, nullptr, mr);
}

void Transfers::vectorize_list(XferList& list) {
  const auto& peer = list.remote->peer;
  if (peer->closed || peer->lost || !peer->net || list.remote->staged) return;
  const hmc_net_plugin_v2_t* t = peer->net->table();
  if (list.put ? !HMC_NET_SLOT(t, iput_v) : !HMC_NET_SLOT(t, iget_v)) return;
  bool staged = false;
  hmc_net_mr_t* mr = nullptr;
  // A region the path cannot reach as it stands is posted range by range (post_list says why).
  if (list_access(*peer, list.local, &staged, &mr) != HMC_SUCCESS || staged) return;
  list.vec = make_vec_pieces(list.local->addr, *list.spans, mr);
}

// The route of a transfer list (docs/protocols.md, "The route of an operation").
hmc_status_t Transfers::route_list(const XferList& list, RoutePlan* plan) {
  const Remote& remote = *list.remote;
  const Peer& peer = *remote.peer;
  // 1. As for a put or get: the peer's region is memory its path cannot reach.
  if (remote.staged) {
    plan->route = Route::TargetStaged;
    return HMC_SUCCESS;
  }
  // 2. The path must offer the one-sided operation and the region a key.
  const hmc_net_plugin_v2_t* t = peer.net->table();
  if (!(list.put ? HMC_NET_SLOT(t, iput) : HMC_NET_SLOT(t, iget)) || !remote.rkey)
    return fail(HMC_ERR_NOT_SUPPORTED,
                "hmc_xfer_post: path {} to {} offers no one-sided operations", peer.choice.key(),
                peer.name);
  // 3. How the path reaches the local region: its registration, by pointer, or bounces.
  hmc_status_t st = list_access(peer, list.local, &plan->staged, &plan->mr);
  if (st != HMC_SUCCESS) return st;
  // 4. Vectored where hmc_xfer_prepare made the vectored pieces and the path's registration of
  //    the region is still the one they hold; else range by range, in pieces.
  plan->route =
      list.vec && !plan->staged && plan->mr == list.vec->mr ? Route::Vectored : Route::Pieced;
  return HMC_SUCCESS;
}

hmc_status_t Transfers::post_list(const XferList& list, uint32_t flags, uint64_t notify_value,
                                  Request** out, std::string_view notify_bytes) {
  Remote* remote = list.remote;
  const auto& peer = remote->peer;
  const char* what = list.put ? "put" : "get";
  const Op op = list.put ? Op::Put : Op::Get;
  const bool notify = flags & HMC_XFER_NOTIFY;
  const size_t total = static_cast<size_t>(list.total);
  hmc_status_t st = check_peer(*peer, what);
  if (st != HMC_SUCCESS) return st;
  if (remote->dead.load(std::memory_order_acquire)) return refuse_withdrawn(*remote, what);
  RoutePlan plan;
  if ((st = route_list(list, &plan)) != HMC_SUCCESS) return st;
  switch (plan.route) {
    case Route::TargetStaged:
      return staging_->post_ranges(remote, list.local->addr, list.local->size, list.spans->data(),
                                   list.spans->size(), total, op, notify, notify_value,
                                   notify_bytes, out);
    case Route::Vectored:
      return post_tracked_rma(remote,
                              PiecedRma::vectored(list.put, list.vec, list.total, remote->rkey), op,
                              total, out, notify, notify_value, notify_bytes);
    default: break;
  }
  auto f =
      PiecedRma::list(list.put, list.local->addr, list.spans, list.total, remote->rkey,
                      peer->framing.on() ? peer->framing.chunk : list.total, plan.staged, plan.mr);
  return post_tracked_rma(remote, std::move(f), op, total, out, notify, notify_value, notify_bytes);
}

hmc_status_t Transfers::post_tracked_rma(Remote* remote, std::unique_ptr<FramedTransfer> f, Op op,
                                         size_t size, Request** out, bool notify,
                                         uint64_t notify_value, std::string_view notify_bytes) {
  const auto& peer = remote->peer;
  if (!remote->region_id)
    return post_framed(peer, std::move(f), op, size, 0, out, notify, notify_value, notify_bytes);
  // posting before dead is read, dead set before posting is read (settle_withdrawals): one of
  // the two sees the other (sequentially consistent atomics).
  remote->posting.fetch_add(1);
  hmc_status_t st;
  if (remote->dead.load()) {
    st = refuse_withdrawn(*remote, op_name(op));
  } else {
    st = post_framed(peer, std::move(f), op, size, 0, out, notify, notify_value, notify_bytes);
    if (st == HMC_SUCCESS) {
      std::lock_guard<std::mutex> lock(peer->net->mutex());
      track_remote_request_locked(remote, RequestTable::handle(*out));
    }
  }
  remote->posting.fetch_sub(1);
  return st;
}

hmc_status_t Transfers::post_notify(Peer* peer, uint64_t value, std::string_view bytes,
                                    Request** out) {
  hmc_status_t st = check_peer(*peer, "notify_send");
  if (st != HMC_SUCCESS) return st;
  Request* req = RequestTable::acquire(owner_, Op::Put, peer, 0, 0, true, value, bytes);
  std::lock_guard<std::mutex> lock(peer->net->mutex());
  if (peer->lost || !peer->ep) {
    std::string reason = peer->lost_reason;
    RequestTable::release(req);
    return fail(peer->closed ? HMC_ERR_INVALID_HANDLE : HMC_ERR_PEER_LOST,
                "hmc_notify_send: peer {} is {}", peer->name,
                peer->closed ? "closed" : "lost (" + reason + ")");
  }
  // Not in `pending` (it has no transfer of its own), but counted there until it is sent;
  // landed at once, it goes when the notifying requests before it went.
  req->landed = true;
  peer->notify_queue.push_back(req);
  peer->add_pending_locked(1);
  *out = req;
  flush_notifications_locked(*peer);
  return HMC_SUCCESS;
}

namespace {
HMC_HOT hmc_status_t finish(Request* req, size_t* bytes) {
  hmc_status_t st = req->status;
  if (st == HMC_SUCCESS) {
    if (bytes) *bytes = req->bytes;
  } else {
    set_error(st, req->error);
  }
  return st;
}
}  // namespace

HMC_HOT hmc_status_t Transfers::test(Request* req, size_t* bytes) {
  if (!req->done.load(std::memory_order_acquire)) {
    progress_request(req);
    if (!polling_.progress_thread ||
        elapsed_ns(now_ns(), polling_.last_control_ns) > kControlIntervalNs)
      services_.progress(true);
  }
  if (!req->done.load(std::memory_order_acquire)) return HMC_IN_PROGRESS;
  hmc_status_t st = finish(req, bytes);
  RequestTable::release(req);
  return st;
}

template <typename Pred>
HMC_HOT bool Transfers::poll_until(Pred pred, int timeout_ms, Request* fast) {
  if (pred()) return true;
  Polling::Scope scope(polling_);
  // The clock is read for the first time on the 16th turn (tens of ns on a VM, on the path of
  // every short wait otherwise): the deadline and the quiet spell count from there.
  uint64_t deadline_ns = 0, last_event = 0;
  for (uint32_t i = 1;; ++i) {
    if (fast) {
      progress_request(fast, kFastTurns);
      if (pred()) return true;
      // Only every 16th turn (of kFastTurns tests each) reads the clock and does the rest:
      // between them the loop does nothing but test the request's own plugin, which is what
      // sees its end soonest.
      if ((i & 15) != 0) continue;
    }
    uint64_t now = now_ns();
    if (deadline_ns == 0) {
      deadline_ns = now + uint64_t(resolve_timeout(timeout_ms)) * 1000000;
      last_event = now;
    }
    // The request's own plugin is tested every turn; everything else (other plugins, the control
    // plane, heartbeats, liveness) every kControlIntervalNs.
    bool control_due = elapsed_ns(now, polling_.last_control_ns) > kControlIntervalNs;
    if (!fast || control_due) {
      if (services_.progress(control_due)) last_event = now;
    }
    if (pred()) return true;
    if (now >= deadline_ns) return false;
    // Spin while things move; after a quiet spell give the core to others now and then: the
    // threads this wait depends on (a device runtime's copy workers, the peer process, the
    // kernel's TCP work) may need it, on small machines most of all. A staged transfer always
    // depends on copy workers: its wait yields on every 16th turn. After HMC_WAIT_SPIN_US of
    // quiet, sleep on the plugins' wake-up fds, a millisecond at a time (what this wait
    // depends on may signal no fd: a device's copy workers, a collective's next step), unless
    // one of them has work that would not wake it; a staged transfer's copy workers never do.
    if ((i & 15) != 0) continue;
    bool staged_wait = fast && fast->framed;
    uint64_t quiet = elapsed_ns(now, last_event);
    if (!staged_wait && quiet > wait_spin_ns_ && services_.sleep_for_events(1)) continue;
    if (staged_wait || quiet > kQuietNs) sched_yield();
  }
}

HMC_HOT hmc_status_t Transfers::wait(Request* req, int timeout_ms, size_t* bytes) {
  bool done =
      poll_until([&] { return req->done.load(std::memory_order_acquire); }, timeout_ms, req);
  if (!done && !req->peer)
    return fail(HMC_ERR_TIMEOUT, "hmc_request_wait: the {} still running after {} ms",
                op_name(req->op), resolve_timeout(timeout_ms));
  if (!done)
    return fail(HMC_ERR_TIMEOUT,
                "hmc_request_wait: {} of {} bytes with {} still running after "
                "{} ms",
                op_name(req->op), req->size, req->peer->name, resolve_timeout(timeout_ms));
  hmc_status_t st = finish(req, bytes);
  RequestTable::release(req);
  return st;
}

hmc_status_t Transfers::cancel(Request* req) {
  if (!req->peer)
    return fail(HMC_ERR_NOT_SUPPORTED,
                "hmc_request_cancel: a {} cannot be cancelled; it will end "
                "normally",
                op_name(req->op));
  Peer& peer = *req->peer;
  std::lock_guard<std::mutex> lock(peer.net->mutex());
  if (req->framed && !req->done.load(std::memory_order_acquire)) {
    hmc_plugin_status_t ps = req->framed->cancel(req, peer);
    if (ps == HMC_PLUGIN_SUCCESS) {
      advance_framed_locked(peer, req);
      return HMC_SUCCESS;
    }
    if (ps == HMC_PLUGIN_ERR_NOT_SUPPORTED)
      return fail(HMC_ERR_NOT_SUPPORTED,
                  "hmc_request_cancel: the {} is too far along to cancel; "
                  "it will end normally",
                  op_name(req->op));
    return fail(from_plugin_status(ps), "hmc_request_cancel: {}", plugin_status_string(ps));
  }
  if (req->done.load(std::memory_order_acquire) || !req->net)
    return fail(HMC_ERR_NOT_SUPPORTED, "hmc_request_cancel: the {} has already ended",
                op_name(req->op));
  if (!HMC_NET_SLOT(peer.net->table(), cancel))
    return fail(HMC_ERR_NOT_SUPPORTED, "hmc_request_cancel: net plugin {} cannot cancel",
                peer.net->name());
  hmc_plugin_status_t ps = peer.net->table()->cancel(req->net);
  if (ps == HMC_PLUGIN_SUCCESS) return HMC_SUCCESS;
  if (ps == HMC_PLUGIN_ERR_NOT_SUPPORTED)
    return fail(HMC_ERR_NOT_SUPPORTED,
                "hmc_request_cancel: the {} is too far along to cancel; "
                "it will end normally",
                op_name(req->op));
  return fail(from_plugin_status(ps), "hmc_request_cancel: {}", plugin_status_string(ps));
}

hmc_status_t Transfers::notify_wait(int timeout_ms, hmc_notification_t* out, void* buf,
                                    size_t capacity, size_t* size, const char* what) {
  using Take = NotificationQueue::Take;
  Take got = notifications_.take(out, buf, capacity, size);
  if (got == Take::None) {
    // Notifications arrive on the control plane: service it on every turn.
    polling_.last_control_ns = 0;
    poll_until(
        [&] {
          got = notifications_.take(out, buf, capacity, size);
          if (got != Take::None) return true;
          polling_.last_control_ns = 0;
          return false;
        },
        timeout_ms);
  }
  switch (got) {
    case Take::Taken: return HMC_SUCCESS;
    case Take::Truncated:
      if (capacity == 0)
        return fail(HMC_ERR_TRUNCATED,
                    "{}: the oldest notification carries {} bytes; take it with "
                    "hmc_notify_wait_msg (it stays queued)",
                    what, *size);
      return fail(HMC_ERR_TRUNCATED,
                  "{}: the oldest notification carries {} bytes, more than the {}-byte buffer "
                  "(it stays queued)",
                  what, *size, capacity);
    case Take::None: break;
  }
  return fail(HMC_ERR_TIMEOUT, "{}: no notification within {} ms", what,
              resolve_timeout(timeout_ms));
}

// --- request completion -------------------------------------------------------------------

HMC_HOT void Transfers::complete_locked(Request* req, hmc_status_t status, std::string error) {
  req->status = status;
  req->error = std::move(error);
  req->peer->add_pending_locked(-1);
  req->peer->transfers_ended.ended_locked(static_cast<int>(req->op), status == HMC_SUCCESS,
                                          req->op == Op::Recv ? req->bytes : req->size);
  req->done.store(true, std::memory_order_release);
  events_.ring();
}

void Transfers::flush_notifications_locked(Peer& peer) {
  while (!peer.notify_queue.empty() && peer.notify_queue.front()->landed) {
    Request* req = peer.notify_queue.front();
    peer.notify_queue.pop_front();
    if (req->carried) {  // the plugin delivered it with the data
      peer.notify_sender.carried_landed();
      complete_locked(req, HMC_SUCCESS, "");
      continue;
    }
    hmc_status_t st;
    {
      std::lock_guard<std::mutex> lock(peer.ctrl_mutex);
      control::Writer w;
      msg::encode_notify(
          {req->notify_value, peer.notify_sender.control_sending(), req->notify_bytes}, &w);
      st = peer.ctrl ? peer.ctrl->send(control::MsgType::Notify, w) : HMC_ERR_PEER_LOST;
    }
    if (st == HMC_SUCCESS)
      complete_locked(req, HMC_SUCCESS, "");
    else
      complete_locked(
          req, HMC_ERR_PEER_LOST,
          fmt::format("hmc_{} to {}: the notification could not be sent{}: {}", op_name(req->op),
                      peer.name, req->size ? " (the data landed)" : "", last_error()));
  }
}

HMC_HOT void Transfers::finish_request_locked(Request* req, hmc_plugin_status_t result,
                                              size_t bytes) {
  Peer& peer = *req->peer;
  req->net = nullptr;
  if (req->temp_mr) {
    peer.net->table()->dereg_mr(peer.net->ctx(), req->temp_mr);
    req->temp_mr = nullptr;
  }
  req->bytes = bytes;
  std::string error;
  const char* what = op_name(req->op);
  if (result == HMC_PLUGIN_SUCCESS)
    ;
  else if (result == HMC_PLUGIN_ERR_PEER_LOST)
    error = fmt::format("hmc_{} with {}: peer lost ({})", what, peer.name,
                        peer.lost_reason.empty() ? "connection broken" : peer.lost_reason);
  else if (result == HMC_PLUGIN_ERR_REMOTE)
    error = fmt::format(
        "hmc_{} with {}: refused by the peer (outside the region, unknown or "
        "deregistered key, or access not granted)",
        what, peer.name);
  else if (result == HMC_PLUGIN_ERR_TRUNCATED)
    error = fmt::format(
        "hmc_recv from {} (tag {}): the message was larger than the {}-byte "
        "buffer",
        peer.name, req->tag, req->size);
  else if (result == HMC_PLUGIN_ERR_CANCELLED)
    error = fmt::format("hmc_{} with {}: cancelled", what, peer.name);
  else
    error = fmt::format("hmc_{} with {} via {}: {}", what, peer.name, peer.choice.key(),
                        plugin_status_string(result));
  end_request_locked(req, from_plugin_status(result), std::move(error));
}

HMC_HOT void Transfers::end_request_locked(Request* req, hmc_status_t status, std::string error) {
  Peer& peer = *req->peer;
  peer.completions.store(peer.completions.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
  if (req->notify) {  // a put's notification, and its end, go in post order
    if (status == HMC_SUCCESS) {
      req->landed = true;
      flush_notifications_locked(peer);
      return;
    }
    auto& q = peer.notify_queue;
    for (auto it = q.begin(); it != q.end(); ++it)
      if (*it == req) {
        q.erase(it);
        break;
      }
  }
  complete_locked(req, status, std::move(error));
  if (req->notify) flush_notifications_locked(peer);  // a failed head may unblock later ones
}

// A framed request whose path broke: fails the peer, unless it was a receive that matched
// nothing from a peer that closed in order. Net mutex held. Returns true when the peer failed.
bool Transfers::framed_broken_locked(Peer& peer, Request* req) {
  FramedTransfer& f = *req->framed;
  if (f.unmatched() && services_.closed_in_order_locked(peer)) {
    f.end_unmatched(req, peer);
    f.release(stage_env_);
    return false;
  }
  services_.fail_peer_locked(
      peer, HMC_ERR_PEER_LOST,
      fmt::format("connection broken ({})", plugin_status_string(f.plugin_status())));
  return true;
}

bool Transfers::advance_framed_locked(Peer& peer, Request* req) {
  FramedTransfer& f = *req->framed;
  bool moved = f.advance(req, peer, stage_env_);
  if (f.broken() && framed_broken_locked(peer, req)) return true;
  if (!f.finished()) return moved;
  auto& pend = peer.pending;
  for (size_t i = 0; i < pend.size(); ++i) {
    if (pend[i] == req) {
      pend[i] = pend.back();
      pend.pop_back();
      break;
    }
  }
  end_framed_locked(req);
  return true;
}

void Transfers::end_framed_locked(Request* req) {
  FramedTransfer& f = *req->framed;
  req->bytes = f.bytes();
  end_request_locked(req, f.status(), f.error());
}

HMC_HOT void Transfers::progress_request(Request* req, int turns) {
  if (req->control_driven) {  // its end comes with a control message: service them now
    services_.progress(true);
    return;
  }
  if (req->op == Op::Coll) {
    // Its steps end by the plugins' own progress, which the pass drives; the control plane is
    // serviced on the wait's interval (a system call per peer per pass otherwise).
    services_.progress(false);
    return;
  }
  Peer& peer = *req->peer;
  std::lock_guard<std::mutex> lock(peer.net->mutex());
  if (req->done.load(std::memory_order_acquire)) return;
  if (req->framed) {
    advance_framed_locked(peer, req);
    return;
  }
  for (int t = 0; t < turns && !req->done.load(std::memory_order_acquire); ++t)
    test_net_locked(peer, req);
}

HMC_HOT void Transfers::test_net_locked(Peer& peer, Request* req) {
  if (!req->net) return;
  int done = 0;
  size_t bytes = 0;
  hmc_plugin_status_t st = peer.net->table()->test(req->net, &done, &bytes);
  if (!done && st == HMC_PLUGIN_SUCCESS) return;
  if (!done) {
    // test failed without ending the request: the plugin lost track of it; end it ourselves.
    HMC_LOG_W("net plugin {}: test failed ({}) without ending the request", peer.net->name(),
              plugin_status_string(st));
  }
  auto& pend = peer.pending;
  for (size_t i = 0; i < pend.size(); ++i) {
    if (pend[i] == req) {
      pend[i] = pend.back();
      pend.pop_back();
      break;
    }
  }
  finish_request_locked(req, st, bytes);
  if (breaks_path(peer, *req, st))
    services_.fail_peer_locked(peer, HMC_ERR_PEER_LOST, "connection broken");
}

}  // namespace hmc
