#include "xfer/target_staging.h"

#include <algorithm>

#include "framed/framed_message.h"
#include "peer/dispatch.h"
#include "peer/messages.h"
#include "peer/peer.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/status.h"
#include "xfer/transfers.h"

namespace hmc {

// Locks: handle_message takes the regions' protocol mutex only; advance runs in
// a progress pass (progress_mutex() held) and takes net mutexes, then that mutex (a leaf)
// or a ctrl_mutex, never the other way.

namespace {
// A status from the wire: an hmc error, or HMC_ERR_REMOTE for values this build does not know.
hmc_status_t staged_wire_status(int32_t v) {
  return v < 0 && v >= HMC_ERR_INTERNAL ? static_cast<hmc_status_t>(v) : HMC_ERR_REMOTE;
}

void send_staged_done(Peer& peer, const msg::StagedDone& d) {
  std::lock_guard<std::mutex> lock(peer.ctrl_mutex);
  if (!peer.ctrl || peer.lost) return;
  control::Writer w;
  msg::encode_staged_done(d, &w);
  peer.ctrl->send(control::MsgType::StagedDone, w);  // a broken channel: service_control's
}
}  // namespace

void TargetStaging::add_handlers(ControlDispatch& dispatch) {
  for (auto type :
       {control::MsgType::StagedPut, control::MsgType::StagedGet, control::MsgType::StagedDone})
    dispatch.add(type,
                 [this](const std::shared_ptr<Peer>& peer, const control::Channel::Message& m) {
                   return handle_message(peer, m);
                 });
}

hmc_status_t TargetStaging::post(Remote* remote, void* buf, size_t size, uint64_t offset, Op op,
                                 bool notify, uint64_t notify_value, std::string_view notify_bytes,
                                 Request** out) {
  const RmaSpan one{0, remote->base + offset, size};
  return post_ranges(remote, buf, size, &one, 1, size, op, notify, notify_value, notify_bytes, out);
}

hmc_status_t TargetStaging::post_ranges(Remote* remote, void* local, size_t local_size,
                                        const RmaSpan* spans, size_t count, size_t total, Op op,
                                        bool notify, uint64_t notify_value,
                                        std::string_view notify_bytes, Request** out) {
  const std::shared_ptr<Peer> peer = remote->peer;
  const char* what = op_name(op);
  if (!peer->framing.on())
    return fail(HMC_ERR_NOT_SUPPORTED,
                "hmc_{}: the region of {} is device memory its path {} "
                "cannot reach, and this pair does not stage (no framing)",
                what, peer->name, peer->choice.key());
  bool staged = false;
  MemoryLocation loc;
  hmc_status_t st =
      transfers_.memory_access(*peer, local, local_size, what, &staged, &loc, nullptr);
  if (st != HMC_SUCCESS) return st;
  // posting before dead is read, as in post_tracked_rma: a withdrawal that marks the Remote
  // dead from here on waits for this request (it is tracked before posting drops).
  remote->posting.fetch_add(1);
  struct Unpost {
    std::atomic<uint32_t>& n;
    ~Unpost() { n.fetch_sub(1); }
  } unpost{remote->posting};
  if (remote->dead.load()) return refuse_withdrawn(*remote, what);
  // One internal framed transfer per range, each on a fresh internal tag; the ranges of a list
  // share a count of those still running, and the application's request ends with the last.
  std::vector<std::pair<uint64_t, std::shared_ptr<Initiated>>> recs;
  recs.reserve(count);
  auto left = count > 1 ? std::make_shared<size_t>(count) : nullptr;
  for (size_t i = 0; i < count && st == HMC_SUCCESS; ++i) {
    const uint64_t tag = kInternalTagBit | next_tag_.fetch_add(1);
    void* at = static_cast<uint8_t*>(local) + spans[i].local;
    const size_t len = static_cast<size_t>(spans[i].len);
    std::unique_ptr<FramedTransfer> f =
        op == Op::Put ? transfers_.make_framed_send(*peer, at, len, tag, staged, loc)
                      : transfers_.make_framed_recv(*peer, at, len, tag, staged, loc);
    Request* inner = nullptr;
    st = transfers_.post_framed(peer, std::move(f), op == Op::Put ? Op::Send : Op::Recv, len, tag,
                                &inner, false, 0);
    if (st != HMC_SUCCESS) break;
    auto rec = std::make_shared<Initiated>();
    rec->peer = peer;
    rec->op = op;
    rec->size = len;
    rec->inner = inner;
    rec->offset = spans[i].remote_addr - remote->base;
    rec->left = left;
    recs.emplace_back(tag, std::move(rec));
  }
  Request* user = nullptr;
  bool live = false;
  if (st == HMC_SUCCESS) {
    user =
        RequestTable::acquire(owner_, op, peer.get(), total, 0, notify, notify_value, notify_bytes);
    user->control_driven = true;
    std::lock_guard<std::mutex> lock(peer->net->mutex());
    live = !peer->lost && peer->ep;
    if (live) {
      // Not in `pending` (it has no transfer of its own: advance ends it), but counted
      // there, so that a silent peer is declared lost; complete_locked takes it back.
      peer->add_pending_locked(1);
      if (notify) peer->notify_queue.push_back(user);
      if (remote->region_id) track_remote_request_locked(remote, RequestTable::handle(user));
      for (auto& r : recs) r.second->user = RequestTable::handle(user);
    }
  }
  {
    // Without an application request advance just releases the internal ones once they end
    // (a range posted before a later one failed ends with the peer).
    std::lock_guard<std::mutex> lock(regions_.protocol_mutex());
    for (auto& r : recs) ops_[r.first] = r.second;
  }
  if (st != HMC_SUCCESS) return st;
  if (!live) {
    RequestTable::release(user);
    return fail(peer->closed ? HMC_ERR_INVALID_HANDLE : HMC_ERR_PEER_LOST, "hmc_{}: peer {} is {}",
                what, peer->name, peer->closed ? "closed" : "lost");
  }
  hmc_status_t sent = HMC_ERR_PEER_LOST;
  std::string why = "it is closed";
  {
    std::lock_guard<std::mutex> lock(peer->ctrl_mutex);
    if (peer->ctrl && !peer->lost) {
      sent = HMC_SUCCESS;
      for (size_t i = 0; i < recs.size() && sent == HMC_SUCCESS; ++i) {
        msg::StagedAsk ask;
        ask.tag = recs[i].first;
        ask.region_id = remote->region_id;
        ask.offset = recs[i].second->offset;
        ask.size = recs[i].second->size;
        control::Writer w;
        msg::encode_staged_ask(ask, &w);
        sent = peer->ctrl->send(
            op == Op::Put ? control::MsgType::StagedPut : control::MsgType::StagedGet, w);
      }
      if (sent != HMC_SUCCESS) why = last_error();
    }
  }
  // The request ends with the peer (advance).
  if (sent != HMC_SUCCESS)
    services_.fail_peer(*peer, HMC_ERR_PEER_LOST, "control connection: " + why);
  peer->framing.staged_transfers.fetch_add(staged ? 1 : 0, std::memory_order_relaxed);
  *out = user;
  return HMC_SUCCESS;
}

std::string TargetStaging::handle_message(const std::shared_ptr<Peer>& peer,
                                          const control::Channel::Message& m) {
  const uint8_t* p = m.payload.data();
  size_t n = m.payload.size();
  if (m.type == control::MsgType::StagedDone) {  // we initiated
    msg::StagedDone d;
    if (!msg::decode_staged_done(p, n, &d)) return "malformed StagedDone";
    std::lock_guard<std::mutex> lock(regions_.protocol_mutex());
    auto it = ops_.find(d.tag);
    // A get that ended with its bytes may be gone already: its answer is not needed.
    if (it == ops_.end() || it->second->peer != peer) return "";
    it->second->answered = true;
    it->second->status = d.status;
    it->second->text = std::move(d.text);
    return "";
  }
  msg::StagedAsk a;  // we own the region
  if (!msg::decode_staged_ask(p, n, &a)) return "malformed StagedPut/StagedGet";
  // An internal tag, and nothing of the framing bits (they are the transfer's own).
  if ((a.tag & ~(kInternalTagBit - 1)) != kInternalTagBit)
    return fmt::format("StagedPut/StagedGet with tag 0x{:x}, outside the internal range", a.tag);
  std::lock_guard<std::mutex> lock(regions_.protocol_mutex());
  AskIn in;
  in.peer = peer;
  in.get = m.type == control::MsgType::StagedGet;
  in.tag = a.tag;
  in.region_id = a.region_id;
  in.offset = a.offset;
  in.size = a.size;
  asks_.push_back(std::move(in));
  return "";
}

void TargetStaging::serve(const AskIn& a) {
  Peer& peer = *a.peer;
  if (peer.lost || !peer.net) return;  // nobody waits for an answer
  const char* what = a.get ? "get" : "put";
  hmc_status_t refusal = HMC_SUCCESS;
  std::string why;
  uint8_t* addr = nullptr;
  {
    std::lock_guard<std::mutex> lock(regions_.protocol_mutex());
    Region* r = regions_.find_locked(a.region_id);
    const uint32_t need = a.get ? HMC_ACCESS_REMOTE_READ : HMC_ACCESS_REMOTE_WRITE;
    if (!r || r->departing) {
      refusal = HMC_ERR_REMOTE;
      why = fmt::format("region {} is not registered (any more)", a.region_id);
    } else if (!r->staged) {
      refusal = HMC_ERR_REMOTE;
      why = fmt::format("region {} is not served by target-side staging", a.region_id);
    } else if (std::none_of(
                   r->importers.begin(), r->importers.end(),
                   [&](const Region::Importer& i) { return i.peer == a.peer && i.count; })) {
      refusal = HMC_ERR_REMOTE;
      why = fmt::format("region {} was not imported through this connection", a.region_id);
    } else if (!(r->access & need)) {
      refusal = HMC_ERR_REMOTE;
      why = fmt::format("region {} ({} bytes at {}) does not grant remote {} access", a.region_id,
                        r->size, r->addr, a.get ? "read" : "write");
    } else if (a.offset > r->size || a.size > r->size - a.offset) {
      refusal = HMC_ERR_OUT_OF_BOUNDS;
      why = fmt::format("{} bytes at offset {} fall outside region {} ({} bytes)", a.size, a.offset,
                        a.region_id, r->size);
    } else {
      ++r->staged_inflight;
      addr = static_cast<uint8_t*>(r->addr) + a.offset;
    }
  }
  auto uncount = [&] {
    std::lock_guard<std::mutex> lock(regions_.protocol_mutex());
    Region* r = regions_.find_locked(a.region_id);
    if (r && r->staged_inflight) --r->staged_inflight;
  };
  const FrameGeometry geo = peer.framing.geometry();
  std::unique_ptr<FramedTransfer> f;
  if (refusal == HMC_SUCCESS) {
    bool staged = false;
    MemoryLocation loc;
    if (transfers_.memory_access(peer, addr, a.size, what, &staged, &loc, nullptr) != HMC_SUCCESS) {
      refusal = HMC_ERR_REMOTE;
      why = last_error();
      uncount();
    } else if (a.get) {
      f = transfers_.make_framed_send(peer, addr, a.size, a.tag, staged, loc);
    } else {
      f = transfers_.make_framed_recv(peer, addr, a.size, a.tag, staged, loc);
    }
    if (f && staged) peer.framing.staged_transfers.fetch_add(1, std::memory_order_relaxed);
    if (f)
      HMC_LOG_D("peer {}: serving its hmc_{} of {} bytes at offset {} of region {} (tag 0x{:x})",
                peer.name, what, a.size, a.offset, a.region_id, a.tag);
  }
  if (refusal != HMC_SUCCESS) {
    HMC_LOG_I("peer {}: its hmc_{} on region {} is refused: {}", peer.name, what, a.region_id, why);
    msg::StagedDone d;
    d.tag = a.tag;
    d.status = refusal;
    d.text = why;
    send_staged_done(peer, d);
    // End the initiator's message on the tag: drain a put's, send an empty one for a get.
    if (a.get)
      f = std::make_unique<FramedSend>(nullptr, 0, a.tag, false, geo);
    else
      f = std::make_unique<FramedRecv>(nullptr, 0, a.tag, false, geo);
  }
  Request* inner = nullptr;
  if (transfers_.post_framed(a.peer, std::move(f), a.get ? Op::Send : Op::Recv,
                             refusal ? 0 : a.size, a.tag, &inner, false, 0) != HMC_SUCCESS) {
    if (refusal == HMC_SUCCESS) uncount();  // the peer is lost: nobody waits for the answer
    return;
  }
  Served s;
  s.peer = a.peer;
  s.tag = a.tag;
  s.region_id = refusal == HMC_SUCCESS ? a.region_id : 0;
  s.size = a.size;
  s.get = a.get;
  s.inner = inner;
  served_.push_back(std::move(s));
}

void TargetStaging::end_user_locked(Request* user, hmc_status_t status, std::string error) {
  user->bytes = status == HMC_SUCCESS ? user->size : 0;
  transfers_.end_request_locked(user, status, std::move(error));
}

bool TargetStaging::advance() {
  std::vector<AskIn> asks;
  std::vector<std::pair<uint64_t, std::shared_ptr<Initiated>>> ops;
  {
    std::lock_guard<std::mutex> lock(regions_.protocol_mutex());
    if (asks_.empty() && ops_.empty() && served_.empty()) return false;
    asks.swap(asks_);
    ops.assign(ops_.begin(), ops_.end());
  }
  bool busy = false;
  for (const auto& a : asks) {
    serve(a);
    busy = true;
  }
  // Owner: transfers that ended are answered, uncounted and released.
  for (size_t i = 0; i < served_.size();) {
    Served& s = served_[i];
    hmc_status_t st;
    std::string err;
    size_t bytes;
    {
      std::lock_guard<std::mutex> lock(s.peer->net->mutex());
      if (!s.inner->done.load(std::memory_order_acquire)) {
        ++i;
        continue;
      }
      st = s.inner->status;
      err = s.inner->error;
      bytes = s.inner->bytes;
    }
    RequestTable::release(s.inner);
    busy = true;
    if (s.region_id) {  // (refusals were answered when they were made)
      {
        std::lock_guard<std::mutex> lock(regions_.protocol_mutex());
        Region* r = regions_.find_locked(s.region_id);
        if (r && r->staged_inflight) --r->staged_inflight;
      }
      msg::StagedDone d;
      d.tag = s.tag;
      if (st != HMC_SUCCESS) {
        d.status = st;
        d.text = "the owner's side failed: " + err;
      } else if (!s.get && bytes != s.size) {
        d.status = HMC_ERR_REMOTE;
        d.text = fmt::format("the owner received {} of the {} bytes (the initiator's side failed)",
                             bytes, s.size);
      }
      send_staged_done(*s.peer, d);
    }
    served_[i] = std::move(served_.back());
    served_.pop_back();
  }
  // Initiator: end the application's requests, release the internal ones.
  for (auto& [tag, op] : ops) {
    Peer& peer = *op->peer;
    const char* what = op_name(op->op);
    bool over = false, flush = false;
    {
      std::lock_guard<std::mutex> lock(peer.net->mutex());
      Request* u = op->user ? RequestTable::lookup(op->user) : nullptr;
      if (u && u->done.load(std::memory_order_acquire)) u = nullptr;  // ended by fail_peer
      if (!u) op->user = nullptr;
      Request* in = op->inner;
      const bool in_done = in->done.load(std::memory_order_acquire);
      if (u) {
        bool answered;
        int32_t status;
        std::string text;
        {
          std::lock_guard<std::mutex> rlock(regions_.protocol_mutex());
          answered = op->answered;
          status = op->status;
          text = op->text;
        }
        bool end = true;
        hmc_status_t st = HMC_SUCCESS;
        std::string err;
        if (peer.lost) {
          st = peer.closed ? HMC_ERR_CANCELLED : HMC_ERR_PEER_LOST;
          err = fmt::format("hmc_{} with {}: {}", what, peer.name,
                            peer.closed ? std::string("the peer was closed")
                                        : "peer lost (" + peer.lost_reason + ")");
        } else if (answered && status != 0) {
          st = staged_wire_status(status);
          err = fmt::format("hmc_{} with {}: refused by the peer: {}", what, peer.name, text);
        } else if (op->op == Op::Put) {
          if (answered) {
            // done
          } else if (in_done && in->status != HMC_SUCCESS) {
            st = in->status;
            err = in->error;
            // Nothing of it left: an empty message ends the owner's receive.
            flush = in->framed && !in->framed->started();
          } else {
            end = false;
          }
        } else if (in_done && in->status == HMC_SUCCESS && in->bytes == op->size &&
                   (op->size > 0 || answered)) {
          // a get whose bytes are all here
        } else if (in_done && in->status != HMC_SUCCESS) {
          st = in->status;
          err = in->error;
        } else if (in_done && answered) {
          st = HMC_ERR_REMOTE;
          err = fmt::format("hmc_get with {}: {} of the {} bytes arrived", peer.name, in->bytes,
                            op->size);
        } else {
          end = false;
        }
        if (end) {
          // A range of a list: the request ends with its last range, or with the first failure
          // (the other ranges then end on their own and are released).
          if (st != HMC_SUCCESS || !op->left || --*op->left == 0)
            end_user_locked(u, st, std::move(err));
          op->user = nullptr;
          busy = true;
        }
      }
      over =
          !op->user && in_done && (!op->flush || op->flush->done.load(std::memory_order_acquire));
    }
    if (flush) {
      auto f = std::make_unique<FramedSend>(nullptr, 0, tag, false, peer.framing.geometry());
      if (transfers_.post_framed(op->peer, std::move(f), Op::Send, 0, tag, &op->flush, false, 0) !=
          HMC_SUCCESS)
        op->flush = nullptr;  // the peer is lost: nothing to end
    }
    if (over) {
      RequestTable::release(op->inner);
      if (op->flush) RequestTable::release(op->flush);
      std::lock_guard<std::mutex> lock(regions_.protocol_mutex());
      ops_.erase(tag);
      busy = true;
    }
  }
  return busy;
}

void TargetStaging::settle_region(Region* region) {
  const uint64_t t0 = now_ns();
  auto idle = [&] {
    std::lock_guard<std::mutex> lock(regions_.protocol_mutex());
    return region->staged_inflight == 0;
  };
  if (services_.progress_until(idle, t0 + uint64_t(timeout_ms_) * 1000000)) return;
  // A transfer that does not end (its peer stopped moving) must not write into the memory after
  // hmc_mem_deregister returned: its peer's connection is closed, which ends it (and waits for
  // its device copies, Context::park_failed_transfer).
  std::vector<std::shared_ptr<Peer>> stuck;
  {
    std::lock_guard<std::mutex> plock(services_.progress_mutex());  // advance runs under it
    for (const auto& s : served_)
      if (s.region_id == region->id) stuck.push_back(s.peer);
  }
  for (auto& p : stuck)
    services_.fail_peer(
        *p, HMC_ERR_PEER_LOST,
        fmt::format("hmc_mem_deregister: a transfer of target-side staging into or out of "
                    "region {} ({} bytes at {}) did not end within {} ms (HMC_TIMEOUT_MS); "
                    "the connection is closed to end it",
                    region->id, region->size, region->addr, timeout_ms_));
  services_.progress_until(idle, now_ns() + uint64_t(timeout_ms_) * 1000000);
}

}  // namespace hmc
