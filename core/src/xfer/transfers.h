// Transfers: posting send/recv/put/get on a peer's data path, and completing them: test, wait
// (busy-polling the request's own plugin, with a full progress pass now and then), cancel, the
// end of a request (its plugin result, a put's notification in post order), put notifications
// at the target (Notify, NotifyAck: xfer/notifications.cpp) and hmc_notify_wait.
// What it needs of the rest of the context (a progress pass, failing a peer) comes through
// TransferServices; the context owns one Transfers by value, so the path of every message
// reaches it without a pointer of its own and makes no virtual call.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "device/registry.h"
#include "framed/framed_transfer.h"
#include "hmc/hmc.h"
#include "net/region.h"
#include "peer/peer.h"
#include "request/event_signal.h"
#include "request/request.h"
#include "xfer/route.h"

namespace hmc {

class Context;
class ControlDispatch;
class Regions;
class TargetStaging;
struct XferList;

// What transfers need of the context. Called off the path of a message that ends well: a
// progress pass every control interval, and peer failure when a path broke.
class TransferServices {
 public:
  // One pass over every plugin, pending request and control channel (no lock held). Returns
  // true when something happened.
  virtual bool progress(bool control) = 0;
  // Sleeps until a plugin or control socket has something, for at most timeout_ms (no lock
  // held); false, without sleeping, where some plugin cannot be slept on now.
  virtual bool sleep_for_events(int timeout_ms) = 0;
  // Marks the peer lost (net mutex held): closes its endpoint, fails every pending request.
  virtual void fail_peer_locked(Peer& peer, hmc_status_t status, const std::string& reason) = 0;
  // Whether the peer closed in order (its Bye read; net mutex held).
  virtual bool closed_in_order_locked(Peer& peer) = 0;

 protected:
  ~TransferServices() = default;
};

// What waiting threads share with the progress thread: while one waits (and drives progress
// itself), the progress thread stays parked.
struct Polling {
  bool progress_thread = true;  // fixed once the context is made
  std::atomic<int> active_pollers{0};
  std::atomic<uint64_t> last_control_ns{0};  // the last progress pass that serviced control
  std::mutex thread_mutex;
  std::condition_variable thread_cv;

  class Scope {
   public:
    // Only a progress thread looks at the count: without one, a wait pays for neither the count
    // nor the notification.
    explicit Scope(Polling& p) : p_(p), counted_(p.progress_thread) {
      if (counted_) ++p_.active_pollers;
    }
    ~Scope() {
      if (counted_ && --p_.active_pollers == 0) p_.thread_cv.notify_all();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Polling& p_;
    bool counted_;
  };
};

// Put notifications delivered at the target, waiting for hmc_notify_wait.
class NotificationQueue {
 public:
  // What take found: nothing, a notification (taken), or one whose bytes do not fit (left).
  enum class Take { None, Taken, Truncated };

  explicit NotificationQueue(EventSignal& events) : events_(events) {}
  // Applies fn to the peer's receiver (peer/notify_order.h) and queues what it releases; returns
  // the Notify messages delivered so far when fn released one of them, else 0.
  template <typename Fn>
  uint64_t deliver(Peer& peer, Fn fn) {
    std::vector<Note> out;
    uint64_t acked = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      uint64_t before = peer.notify_receiver.control_delivered();
      fn(peer.notify_receiver, &out);
      for (Note& n : out)
        queue_.push_back({reinterpret_cast<hmc_peer_t>(&peer), n.value, std::move(n.bytes)});
      if (peer.notify_receiver.control_delivered() != before)
        acked = peer.notify_receiver.control_delivered();
    }
    if (!out.empty()) {
      cv_.notify_all();
      events_.ring();
    }
    return acked;
  }
  // Takes the oldest notification, its bytes copied into buf (capacity bytes) and their number
  // in *size; leaves it queued, with *size the number needed, when they do not fit.
  Take take(hmc_notification_t* out, void* buf, size_t capacity, size_t* size) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) return Take::None;
    Queued& q = queue_.front();
    *size = q.bytes.size();
    if (q.bytes.size() > capacity) return Take::Truncated;
    if (!q.bytes.empty()) std::memcpy(buf, q.bytes.data(), q.bytes.size());
    *out = {q.peer, q.value};
    queue_.pop_front();
    return Take::Taken;
  }

 private:
  struct Queued {
    hmc_peer_t peer;
    uint64_t value;
    std::string bytes;  // empty for a value-only notification (no allocation)
  };
  EventSignal& events_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
};

class Transfers {
 public:
  struct Settings {
    Context* owner = nullptr;  // stamped on each request (the API finds its context there)
    Regions* regions = nullptr;
    TargetStaging* staging = nullptr;
    int timeout_ms = 0;  // HMC_TIMEOUT_MS
    bool progress_thread = true;
    int64_t wait_spin_us = 1000;  // HMC_WAIT_SPIN_US
  };
  Transfers(TransferServices& services, DeviceRegistry& devices, StageEnv& stage_env)
      : services_(services), devices_(devices), stage_env_(stage_env) {}
  Transfers(const Transfers&) = delete;
  Transfers& operator=(const Transfers&) = delete;
  // Completes the wiring once the context made the other subsystems (before any transfer).
  void configure(const Settings& settings);
  // Registers the handlers of Notify and NotifyAck (xfer/notifications.cpp).
  void add_handlers(ControlDispatch& dispatch);

  // Sends and receives share one posting function, puts and gets another, transfer lists a
  // third; each first chooses the operation's route (xfer/route.h), then follows it.
  hmc_status_t post_send(Peer* peer, const void* buf, size_t size, uint64_t tag, Request** out) {
    return post_message(Op::Send, peer, const_cast<void*>(buf), size, tag, out);
  }
  hmc_status_t post_recv(Peer* peer, void* buf, size_t size, uint64_t tag, Request** out) {
    return post_message(Op::Recv, peer, buf, size, tag, out);
  }
  // notify_bytes: what the notification carries with its value (hmc_put_notify).
  hmc_status_t post_put(Remote* remote, const void* buf, size_t size, uint64_t offset,
                        uint32_t flags, uint64_t notify_value, Request** out,
                        std::string_view notify_bytes = {}) {
    return post_rma(Op::Put, remote, const_cast<void*>(buf), size, offset, flags & HMC_PUT_NOTIFY,
                    notify_value, notify_bytes, out);
  }
  hmc_status_t post_get(Remote* remote, void* buf, size_t size, uint64_t offset, Request** out) {
    return post_rma(Op::Get, remote, buf, size, offset, false, 0, {}, out);
  }
  // A notification without data (hmc_notify_send): queued behind the peer's earlier notifying
  // requests as one that landed at once, it is sent by the same flush as theirs.
  hmc_status_t post_notify(Peer* peer, uint64_t value, std::string_view bytes, Request** out);
  // Makes list.vec when the list's path offers vectored puts/gets and reaches its local region
  // without staging (hmc_xfer_prepare, before the list is shared).
  void vectorize_list(XferList& list);
  // Posts a transfer list (xfer/xfer_list.h) as one request.
  hmc_status_t post_list(const XferList& list, uint32_t flags, uint64_t notify_value, Request** out,
                         std::string_view notify_bytes = {});
  // Final status releases the request (deletes it); HMC_IN_PROGRESS / HMC_ERR_TIMEOUT keep it.
  hmc_status_t test(Request* req, size_t* bytes);
  hmc_status_t wait(Request* req, int timeout_ms, size_t* bytes);
  hmc_status_t cancel(Request* req);
  // The oldest notification and its bytes (hmc_notify_wait_msg; what: the API call's name).
  hmc_status_t notify_wait(int timeout_ms, hmc_notification_t* out, void* buf, size_t capacity,
                           size_t* size, const char* what);

  // Framed transfers (framed/framed_transfer.h). Where buf lives for this pair; *staged: through
  // bounce buffers.
  hmc_status_t memory_access(const Peer& peer, const void* buf, size_t size, const char* what,
                             bool* staged, MemoryLocation* where = nullptr,
                             hmc_net_mr_t** mr = nullptr);
  std::unique_ptr<FramedTransfer> make_framed_send(const Peer& peer, const void* buf, size_t size,
                                                   uint64_t tag, bool staged,
                                                   const MemoryLocation& loc);
  std::unique_ptr<FramedTransfer> make_framed_recv(const Peer& peer, void* buf, size_t size,
                                                   uint64_t tag, bool staged,
                                                   const MemoryLocation& loc);
  hmc_status_t post_framed(const std::shared_ptr<Peer>& peer, std::unique_ptr<FramedTransfer> f,
                           Op op, size_t size, uint64_t tag, Request** out, bool notify = false,
                           uint64_t notify_value = 0, std::string_view notify_bytes = {});

  // --- request completion (net mutex held unless said otherwise) ----------------------------
  // Tests just this request's net operation (the fast path of a wait; no lock held): up to
  // `turns` times in a row under one lock, or until it ends. A framed request advances once, a
  // control-driven one services the control plane once, whatever `turns` says.
  void progress_request(Request* req, int turns = 1);
  // Tests req's plugin request once and ends req if it ended (req pending).
  void test_net_locked(Peer& peer, Request* req);
  // Ends req: records the plugin's result, sends a put's notification.
  void finish_request_locked(Request* req, hmc_plugin_status_t result, size_t bytes);
  // Marks req ended with status.
  void complete_locked(Request* req, hmc_status_t status, std::string error);
  // Ends req with status. A notifying put that succeeded only lands: its notification and its
  // end follow those of earlier puts (flush_notifications_locked); one that failed leaves the
  // queue, which may let later ones go.
  void end_request_locked(Request* req, hmc_status_t status, std::string error);
  // Moves a framed request along; ends it when it finished. Returns true when something
  // happened. A broken path fails the peer (and with it every pending request).
  bool advance_framed_locked(Peer& peer, Request* req);
  // Ends a framed request that finished (the caller took it off `pending`).
  void end_framed_locked(Request* req);
  // A framed request whose path broke: fails the peer, unless it was a receive that matched
  // nothing from a peer that closed in order. Returns true when the peer failed.
  bool framed_broken_locked(Peer& peer, Request* req);
  // Whether a request ending with st means the path to the peer is gone. A receive that matched
  // nothing from a peer that closed in order is not: what the peer sent before its close stays
  // receivable (net.h), so the endpoint stays open.
  bool breaks_path(Peer& peer, const Request& req, hmc_plugin_status_t st) {
    if (st != HMC_PLUGIN_ERR_PEER_LOST) return false;
    return !(req.op == Op::Recv && services_.closed_in_order_locked(peer));
  }

  // --- put notifications at the target (xfer/notifications.cpp) ------------------------------
  // Delivers what the peer's plugin carried (net mutex held; takes ctrl_mutex to acknowledge).
  void poll_carried_notifications_locked(Peer& peer);
  // Delivers those held for carried ones that will never come (the peer is gone).
  void drain_held_notifications(Peer& peer);

  Polling& polling() { return polling_; }
  NotificationQueue& notifications() { return notifications_; }
  // hmc_context_event_fd: rung when a request ends (here or in a collective) or a notification
  // arrives.
  EventSignal& events() { return events_; }

 private:
  // Sends the notifications of landed puts at the head of the peer's queue.
  void flush_notifications_locked(Peer& peer);
  // Notify (ctrl_mutex held) and NotifyAck; return why the peer is gone, or "".
  std::string on_notify_ctrl_locked(Peer& peer, const uint8_t* p, size_t n);
  static std::string on_notify_ack(Peer& peer, const uint8_t* p, size_t n);
  void send_notify_ack_ctrl_locked(Peer& peer, uint64_t delivered);
  bool ipc_export(const Peer& peer, const void* buf, const MemoryLocation& loc, IpcExport* ex);
  bool framed_sends_waiting(Peer& peer, uint64_t tag);
  // The routes (xfer/route.h): chosen once per post, in the steps docs/protocols.md lists.
  hmc_status_t route_message(Peer& peer, Op op, const void* buf, size_t size, uint64_t tag,
                             RoutePlan* plan);
  hmc_status_t route_rma(const Remote& remote, Op op, const void* buf, size_t size,
                         RoutePlan* plan);
  hmc_status_t route_list(const XferList& list, RoutePlan* plan);
  // buf is read (Send, Put) or written (Recv, Get).
  hmc_status_t post_message(Op op, Peer* peer, void* buf, size_t size, uint64_t tag, Request** out);
  hmc_status_t post_rma(Op op, Remote* remote, void* buf, size_t size, uint64_t offset, bool notify,
                        uint64_t notify_value, std::string_view notify_bytes, Request** out);
  // How a transfer list's path reaches its local region: the region's own registration on the
  // path, by pointer (mr null), or through bounces (*staged).
  hmc_status_t list_access(const Peer& peer, Region* local, bool* staged, hmc_net_mr_t** mr);
  // post_framed for a put/get on remote, recorded in its inflight list when it is tracked (a
  // framed transfer records its request after posting: remote->posting covers the gap).
  hmc_status_t post_tracked_rma(Remote* remote, std::unique_ptr<FramedTransfer> f, Op op,
                                size_t size, Request** out, bool notify = false,
                                uint64_t notify_value = 0, std::string_view notify_bytes = {});
  template <typename PostFn>
  hmc_status_t post_common(Request* req, PostFn post);
  // Spins on progress until pred() holds or timeout_ms (resolve_timeout) passes.
  template <typename Pred>
  bool poll_until(Pred pred, int timeout_ms, Request* fast = nullptr);
  int resolve_timeout(int timeout_ms) const { return timeout_ms < 0 ? timeout_ms_ : timeout_ms; }

  TransferServices& services_;
  DeviceRegistry& devices_;
  StageEnv& stage_env_;
  Context* owner_ = nullptr;
  Regions* regions_ = nullptr;
  TargetStaging* staging_ = nullptr;
  int timeout_ms_ = 30000;
  uint64_t wait_spin_ns_ = 1000000;
  Polling polling_;
  EventSignal events_;  // before notifications_, which rings it
  NotificationQueue notifications_{events_};
};

}  // namespace hmc
