// Endpoint lifetime, requests, tag matching, the control channel, and the protocol handlers
// (vectored put/get at the end).
// Establishment lives in connect.cpp, cross-memory copies in cma.cpp.
#include "endpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "context.h"
#include "status.h"

namespace hmc::hoststage {

Endpoint::Endpoint(Context& ctx, DevKind dev) : ctx_(ctx), dev_(dev) {
  name_ = dev == DevKind::kTcp ? "tcp peer" : "shm peer";
  ctx_.add_endpoint(this);
}

Endpoint::~Endpoint() {
  teardown();
  for (Request* r = reqs_; r != nullptr;) {
    Request* next = r->next;
    ctx_.free_request(r);
    r = next;
  }
  ctx_.remove_endpoint(this);
}

void Endpoint::teardown() {
  teardown_pending_ = false;
  if (torn_down_) return;
  torn_down_ = true;
  for (auto& s : streams_) s->shutdown();
  for (DialSock& d : dial_) ctx_.unwatch(d.fd.get(), d.token);
  dial_.clear();
  while (posted_head_ != nullptr) unlink_posted(posted_head_);
  // Eager messages that arrived whole stay deliverable (post_recv); rendezvous announcements
  // cannot be served any more. FIFO order per tag is kept: a tag's queue is cut at its first RTS.
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    std::deque<Unexpected>& q = it->second;
    auto rts = std::find_if(q.begin(), q.end(), [](const Unexpected& u) { return u.rts; });
    unexpected_count_ -= static_cast<size_t>(q.end() - rts);
    q.erase(rts, q.end());
    it = q.empty() ? unexpected_.erase(it) : std::next(it);
  }
  tracked_.clear();
  sinks_.clear();
  bulk_.clear();
  cma_.clear();
  ring_backlog_.clear();
  peer_event_.reset();
  pending_memfd_.reset();
  pending_segment_.reset();
  // The shared segment stays mapped until the endpoint is destroyed: a ring is never touched
  // after failure, and unmapping here would race nothing, but keeping it is simpler to reason
  // about while handlers unwind.
}

void Endpoint::fail(hmc_plugin_status_t st, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(st, fmt, ap);
  va_end(ap);
}

void Endpoint::vfail(hmc_plugin_status_t st, const char* fmt, va_list ap) {
  if (state_ == State::kFailed) return;
  char msg[512];
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  bool connecting = state_ == State::kConnecting;
  state_ = State::kFailed;
  fail_status_ = st;
  size_t pending = 0;
  for (Request* r = reqs_; r != nullptr; r = r->next) {
    if (r->done) continue;
    if (r->posted) unlink_posted(r);
    r->done = true;
    r->result = st;
    r->bytes = 0;
    ++pending;
  }
  // A peer closing an idle connection is ordinary; losing work or failing to connect is not.
  int level =
      (pending > 0 || connecting || st != HMC_PLUGIN_ERR_PEER_LOST) ? HMC_LOG_WARN : HMC_LOG_INFO;
  HMC_PLUGIN_LOG(ctx_.log(), level, "%s: %s%s; %zu pending request(s) end with %s", name_.c_str(),
                 connecting ? "connection failed: " : "", msg, pending, status_name(st));
  teardown_pending_ = true;
  if (busy_ == 0) teardown();
}

void Endpoint::protocol_error(const char* fmt, ...) {
  char msg[384];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  fail(HMC_PLUGIN_ERR_PEER_LOST, "protocol error: %s", msg);
}

void Endpoint::on_stream_eof(Stream& s) {
  // A peer that sends and then closes must not lose what it sent: EOF on one stream can be seen
  // before data still queued on another. A data stream closing between frames only retires that
  // stream; the control stream (0) closing ends the endpoint, after the other streams and the
  // ring have been drained. The peer closes every stream, so stream 0 always follows.
  if (s.index() != 0 && !s.mid_data() && s.out_idle() && ready()) {
    HS_DEBUG(ctx_.log(), "%s: peer closed stream %d", name_.c_str(), s.index());
    s.shutdown();
    return;
  }
  if (closing_) return;  // reached while draining below: the outer call fails the endpoint
  closing_ = true;
  for (auto& other : streams_) {
    if (failed()) break;
    if (other.get() != &s) other->drain();
  }
  if (dev_ == DevKind::kShm && ready()) poll_ring();
  closing_ = false;
  fail(HMC_PLUGIN_ERR_PEER_LOST, "peer closed the connection (stream %d)", s.index());
}

void Endpoint::on_stream_error(const Stream& s, int err) {
  if (dev_ == DevKind::kShm && ready()) poll_ring();
  fail(HMC_PLUGIN_ERR_PEER_LOST, "stream %d: %s", s.index(), errno_text(err).c_str());
}

// ---------------------------------------------------------------------------------------------
// Requests and tag matching

Request* Endpoint::new_request(ReqKind kind, const void* buf, size_t len, uint64_t tag) {
  Request* r = ctx_.alloc_request();
  r->ep = this;
  r->kind = kind;
  r->buf = const_cast<uint8_t*>(static_cast<const uint8_t*>(buf));
  r->len = len;
  r->tag = tag;
  r->next = reqs_;
  if (reqs_ != nullptr) reqs_->prev = r;
  reqs_ = r;
  return r;
}

void Endpoint::release(Request* r) {
  if (r->posted) unlink_posted(r);
  if (r->tracked) tracked_.erase(r->id);
  if (r->has_sink) sinks_.erase(r->id);
  if (r->prev != nullptr)
    r->prev->next = r->next;
  else
    reqs_ = r->next;
  if (r->next != nullptr) r->next->prev = r->prev;
  ctx_.free_request(r);
}

void Endpoint::track(Request* r) {
  tracked_[r->id] = r;
  r->tracked = true;
}

Request* Endpoint::find_tracked(uint64_t id, ReqKind kind) {
  auto it = tracked_.find(id);
  if (it == tracked_.end() || it->second->kind != kind) return nullptr;
  return it->second;
}

void Endpoint::complete(Request* r, hmc_plugin_status_t st, size_t bytes) {
  if (r->done) return;
  r->done = true;
  r->result = st;
  // A truncated receive reports the length that was sent (net.h), which the core's framing needs.
  r->bytes = st == HMC_PLUGIN_ERR_TRUNCATED && r->msg_len > bytes ? static_cast<size_t>(r->msg_len)
                                                                  : bytes;
  if (r->posted) unlink_posted(r);
  if (r->tracked) {
    tracked_.erase(r->id);
    r->tracked = false;
  }
  if (r->has_sink) {
    sinks_.erase(r->id);
    r->has_sink = false;
  }
}

void Endpoint::link_posted(Request* r) {
  r->posted = true;
  r->pnext = nullptr;
  r->pprev = posted_tail_;
  if (posted_tail_ != nullptr)
    posted_tail_->pnext = r;
  else
    posted_head_ = r;
  posted_tail_ = r;
}

void Endpoint::unlink_posted(Request* r) {
  if (r->pprev != nullptr)
    r->pprev->pnext = r->pnext;
  else
    posted_head_ = r->pnext;
  if (r->pnext != nullptr)
    r->pnext->pprev = r->pprev;
  else
    posted_tail_ = r->pprev;
  r->pprev = r->pnext = nullptr;
  r->posted = false;
}

Request* Endpoint::match_posted(uint64_t tag) {
  for (Request* r = posted_head_; r != nullptr; r = r->pnext) {
    if (r->tag == tag) {
      unlink_posted(r);
      return r;
    }
  }
  return nullptr;
}

hmc_plugin_status_t Endpoint::check_postable() const {
  if (state_ == State::kReady) return HMC_PLUGIN_SUCCESS;
  if (state_ == State::kFailed) return fail_status_;
  HS_ERROR(ctx_.log(), "%s: operation posted before ep_ready reported success", name_.c_str());
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}

hmc_plugin_status_t Endpoint::post_send(const void* buf, size_t len, uint64_t tag, Request** out) {
  hmc_plugin_status_t st = check_postable();
  if (st != HMC_PLUGIN_SUCCESS) return st;
  Busy busy(*this);
  Request* r = new_request(ReqKind::kSend, buf, len, tag);
  *out = r;
  WireHdr h{};
  h.tag = tag;
  h.len = len;
  if (len <= inline_limit_) {
    h.type = kMsgEager;
    h.flags = kFlagPayload;
    send_ctrl(h, buf, len, r);
  } else {
    r->id = next_id_++;
    track(r);
    h.type = kMsgRts;
    h.id = r->id;
    h.aux = reinterpret_cast<uintptr_t>(buf);
    send_ctrl(h, nullptr, 0, nullptr);
  }
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::post_recv(void* buf, size_t len, uint64_t tag, Request** out) {
  hmc_plugin_status_t st = check_postable();
  if (st != HMC_PLUGIN_SUCCESS) {
    // A message that fully arrived before the connection ended is still delivered (its sender
    // saw success); only receives that would have to wait for the dead peer fail.
    if (!failed() || unexpected_count_ == 0) return st;
    auto it = unexpected_.find(tag);
    if (it == unexpected_.end() || it->second.front().rts) return st;
  }
  Busy busy(*this);
  Request* r = new_request(ReqKind::kRecv, buf, len, tag);
  *out = r;
  if (unexpected_count_ > 0) {
    auto it = unexpected_.find(tag);
    if (it != unexpected_.end()) {
      Unexpected u = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) unexpected_.erase(it);
      --unexpected_count_;
      if (u.rts) {
        start_rndv_recv(r, u.size, u.sender_id, u.src);
      } else {
        size_t n = std::min<size_t>(len, u.data.size());
        if (n > 0) std::memcpy(buf, u.data.data(), n);
        r->msg_len = u.size;
        complete(r, u.size > len ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS, n);
      }
      return HMC_PLUGIN_SUCCESS;
    }
  }
  link_posted(r);
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::post_put(const void* buf, size_t len, uint64_t raddr, uint64_t key,
                                       bool notify, uint64_t value, Request** out) {
  hmc_plugin_status_t st = check_postable();
  if (st != HMC_PLUGIN_SUCCESS) return st;
  Busy busy(*this);
  Request* r = new_request(ReqKind::kPut, buf, len, 0);
  *out = r;
  r->id = next_id_++;
  track(r);
  WireHdr h{};
  h.type = kMsgPut;
  h.tag = key;
  h.id = r->id;
  h.addr = raddr;
  h.len = len;
  if (notify) {
    h.flags = kFlagNotify;
    h.sink = value;
  }
  if (len <= inline_limit_) {
    h.flags |= kFlagPayload;
    send_ctrl(h, buf, len, nullptr);
  } else {
    h.aux = reinterpret_cast<uintptr_t>(buf);
    send_ctrl(h, nullptr, 0, nullptr);
  }
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::post_get(void* buf, size_t len, uint64_t raddr, uint64_t key,
                                       Request** out) {
  hmc_plugin_status_t st = check_postable();
  if (st != HMC_PLUGIN_SUCCESS) return st;
  Busy busy(*this);
  Request* r = new_request(ReqKind::kGet, buf, len, 0);
  *out = r;
  r->id = next_id_++;
  track(r);
  if (len > inline_limit_) {
    // The owner may stream the data back as DATA chunks for a sink named by the request id.
    sinks_[r->id] = Sink{SinkKind::kGet, r->buf, len, 0, r, 0, 0, true};
    r->has_sink = true;
  }
  WireHdr h{};
  h.type = kMsgGet;
  h.tag = key;
  h.id = r->id;
  h.addr = raddr;
  h.len = len;
  h.aux = reinterpret_cast<uintptr_t>(buf);
  send_ctrl(h, nullptr, 0, nullptr);
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::post_vec(bool put, std::vector<VecPieceWire>* vec, uint64_t key,
                                       Request** out) {
  hmc_plugin_status_t st = check_postable();
  if (st != HMC_PLUGIN_SUCCESS) return st;
  Busy busy(*this);
  uint64_t total = 0;
  for (const VecPieceWire& p : *vec) total += p.len;
  Request* r =
      new_request(put ? ReqKind::kPutV : ReqKind::kGetV, nullptr, static_cast<size_t>(total), 0);
  *out = r;
  r->vec.swap(*vec);
  vec->clear();
  const size_t count = r->vec.size();
  if (count == 0) {
    complete(r, HMC_PLUGIN_SUCCESS, 0);
    return HMC_PLUGIN_SUCCESS;
  }
  r->id = next_id_++;
  track(r);
  if (!put) {
    // The owner streams the pieces as DATA (tcp, or shm without CMA) to a sink named by the id.
    sinks_[r->id] = Sink{SinkKind::kGetV, nullptr, total, 0, r, key, 0, true};
    r->has_sink = true;
  }
  r->parts_left = static_cast<uint32_t>((count + kVecMaxPieces - 1) / kVecMaxPieces);
  // The list stays in r->vec until r ends, which is after every message was answered (and so
  // written): a queued frame may point into it.
  for (size_t first = 0; first < count; first += kVecMaxPieces) {
    size_t n = std::min(kVecMaxPieces, count - first);
    const VecPieceWire* list = r->vec.data() + first;
    WireHdr h{};
    h.type = put ? kMsgPutV : kMsgGetV;
    h.flags = kFlagPayload;
    h.tag = key;
    h.id = r->id;
    h.addr = first;
    h.aux = n * sizeof(VecPieceWire);
    h.len = h.aux;
    uint64_t bytes = 0;
    for (size_t i = 0; put && i < n; ++i) bytes += list[i].len;
    if (!put || bytes > inline_limit_) {
      send_ctrl(h, list, static_cast<size_t>(h.len), nullptr);
      continue;
    }
    auto payload = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(h.aux + bytes));
    std::memcpy(payload->data(), list, static_cast<size_t>(h.aux));
    uint8_t* at = payload->data() + h.aux;
    for (size_t i = 0; i < n; ++i) {
      if (list[i].len > 0)
        std::memcpy(at, reinterpret_cast<const void*>(static_cast<uintptr_t>(list[i].aux)),
                    static_cast<size_t>(list[i].len));
      at += list[i].len;
    }
    h.flags |= kFlagVecInline;
    h.len = payload->size();
    send_ctrl_owned(h, std::move(payload));
  }
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::cancel(Request* r) {
  if (r->done || r->kind != ReqKind::kRecv || !r->posted) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  complete(r, HMC_PLUGIN_ERR_CANCELLED, 0);
  return HMC_PLUGIN_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Control channel: tcp stream 0, or the shm ring (with a backlog while the ring is full)

void Endpoint::send_ctrl(const WireHdr& h, const void* payload, size_t len, Request* done_req) {
  if (failed()) return;
  if (dev_ == DevKind::kTcp) {
    OutFrame f;
    f.hdr = h;
    f.data = static_cast<const uint8_t*>(payload);
    f.len = len;
    f.req = done_req;
    f.on_written = done_req != nullptr ? OutFrame::kCompleteReq : OutFrame::kNothing;
    streams_[0]->queue(f);
    return;
  }
  if (ring_backlog_.empty() && tx_.push(h, payload, len)) {
    if (tx_.consumer_wants_wake()) signal_peer();
    if (done_req != nullptr) complete(done_req, HMC_PLUGIN_SUCCESS, done_req->len);
    return;
  }
  OutFrame f;
  f.hdr = h;
  f.data = static_cast<const uint8_t*>(payload);
  f.len = len;
  f.req = done_req;
  f.on_written = done_req != nullptr ? OutFrame::kCompleteReq : OutFrame::kNothing;
  ring_backlog_.push_back(f);
}

void Endpoint::send_ctrl_owned(const WireHdr& h,
                               std::shared_ptr<const std::vector<uint8_t>> payload) {
  if (failed()) return;
  OutFrame f;
  f.hdr = h;
  f.data = payload->data();
  f.len = payload->size();
  f.owned = std::move(payload);
  if (dev_ == DevKind::kTcp) {
    streams_[0]->queue(f);
    return;
  }
  if (ring_backlog_.empty() && tx_.push(f.hdr, f.data, f.len)) {
    if (tx_.consumer_wants_wake()) signal_peer();
    return;
  }
  ring_backlog_.push_back(std::move(f));
}

void Endpoint::flush_ring_backlog() {
  bool pushed = false;
  while (!ring_backlog_.empty()) {
    const OutFrame& f = ring_backlog_.front();
    if (!tx_.push(f.hdr, f.data, f.len)) break;
    Request* r = f.on_written == OutFrame::kCompleteReq ? f.req : nullptr;
    ring_backlog_.pop_front();
    pushed = true;
    if (r != nullptr) complete(r, HMC_PLUGIN_SUCCESS, r->len);
  }
  if (pushed && tx_.consumer_wants_wake()) signal_peer();
}

void Endpoint::signal_peer() {
  uint64_t one = 1;
  // A full eventfd counter (EAGAIN) still wakes the peer; any other failure means the peer is
  // gone, which its socket reports.
  ssize_t n = ::write(peer_event_.get(), &one, sizeof(one));
  (void)n;
}

void Endpoint::poll_ring() {
  WireHdr h;
  const uint8_t* payload = nullptr;
  int handled = 0;
  while (!failed()) {
    int r = rx_.next(&h, &payload);
    if (r == 0) break;
    if (r < 0) {
      protocol_error("shared ring corrupt");
      return;
    }
    on_msg(h, payload);
    rx_.advance();
    if (++handled >= 256) {
      ctx_.note_more_work();
      break;
    }
  }
  if (handled > 0 && !failed()) {
    rx_.publish();
    if (rx_.producer_wants_wake()) signal_peer();
  }
}

void Endpoint::progress_shm() {
  Busy busy(*this);
  if (!ready()) return;
  poll_ring();
  if (!cma_.empty() && ready()) run_cma();
  if (!ring_backlog_.empty() && ready()) flush_ring_backlog();
}

bool Endpoint::socket_busy() const {
  if (!sinks_.empty() || !bulk_.empty()) return true;
  for (const auto& s : streams_) {
    if (!s->out_idle() || s->mid_data()) return true;
  }
  return false;
}

void Endpoint::arm_flags() {
  rx_.set_sleeping(true);
  if (!ring_backlog_.empty()) tx_.set_waiting(true);
}

void Endpoint::disarm_flags() {
  rx_.set_sleeping(false);
  tx_.set_waiting(false);
}

bool Endpoint::has_unsignalled_work() {
  if (!ready()) return false;
  if (!cma_.empty()) return true;
  if (dev_ == DevKind::kShm) {
    if (rx_.has_data()) return true;
    if (!ring_backlog_.empty() && tx_.fits(ring_backlog_.front().len)) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Bulk data: chunks this side streams, and sinks that receive them

void Endpoint::kick_bulk() {
  for (auto& s : streams_) {
    if (failed()) return;
    if (!s->blocked()) s->pump_out();
  }
}

void Endpoint::add_bulk(const BulkJob& j) {
  bulk_.push_back(j);
  kick_bulk();
}

// The next DATA frame of a vectored job: up to a chunk's bytes of consecutive pieces (a frame
// gathers them, the receiver scatters them), at most kMaxFramePieces of them; false when the job
// has none left, or its region went away (then the get is answered).
bool Endpoint::next_vec_chunk(BulkJob& j, size_t chunk, OutFrame* f) {
  constexpr size_t kMaxFramePieces = 32;  // a write's iovec array takes a frame or more
  const std::vector<VecSpan>& v = *j.vec;
  while (j.piece < v.size() && j.next == v[j.piece].len) {  // empty pieces move nothing
    ++j.piece;
    j.next = 0;
  }
  if (j.piece == v.size()) return false;
  // The region of a key never changes bounds while it lives: its being there covers every piece
  // checked when the get arrived.
  if (j.key != 0 &&
      !ctx_.regions().check_local(j.key, v[j.piece].local + j.next, v[j.piece].len - j.next,
                                  HMC_NET_ACCESS_REMOTE_READ)) {
    j.piece = v.size();
    j.refused = true;
    return false;
  }
  *f = OutFrame{};
  f->hdr.type = kMsgData;
  f->hdr.sink = j.sink;
  f->hdr.tag = j.tag_base + j.piece;
  f->hdr.addr = j.next;
  f->spans = j.vec;
  f->span_first = j.piece;
  f->span_off = j.next;
  uint64_t n = 0;
  size_t pieces = 0;
  while (j.piece < v.size() && n < chunk && pieces < kMaxFramePieces) {
    uint64_t take = std::min<uint64_t>(chunk - n, v[j.piece].len - j.next);
    n += take;
    j.next += take;
    if (take > 0) ++pieces;
    if (j.next == v[j.piece].len) {
      ++j.piece;
      j.next = 0;
    }
  }
  while (j.piece < v.size() && v[j.piece].len == 0) ++j.piece;
  f->hdr.len = n;
  f->len = static_cast<size_t>(n);
  f->req = j.req;
  f->on_written = j.req != nullptr ? OutFrame::kBulkBytes : OutFrame::kNothing;
  j.streamed += n;
  return true;
}

bool Endpoint::next_chunk(OutFrame* f) {
  while (!bulk_.empty() && !failed()) {
    BulkJob& j = bulk_.front();
    const size_t chunk = dev_ == DevKind::kTcp ? ctx_.cfg().chunk : ctx_.cfg().shm_chunk;
    if (j.vec) {
      bool got = next_vec_chunk(j, chunk, f);
      if (got && j.piece < j.vec->size()) return true;
      // The job's last frame (or none): a get's owner answers its message now; its DATA may
      // still be queued on another stream, which the VecAck's byte count covers.
      BulkJob done = std::move(j);
      bulk_.pop_front();
      if (done.req == nullptr)
        vec_ack(done.get_id, done.refused ? HMC_PLUGIN_ERR_REMOTE : HMC_PLUGIN_SUCCESS,
                done.refused ? 0 : done.streamed);
      if (got) return true;
      continue;
    }
    uint64_t n = std::min<uint64_t>(chunk, j.total - j.next);
    if (j.key != 0 &&
        !ctx_.regions().check_local(j.key, j.base + j.next, n, HMC_NET_ACCESS_REMOTE_READ)) {
      // The region went away while answering a get: stop reading it, and end the get.
      uint64_t id = j.get_id;
      bulk_.pop_front();
      reply(kMsgGetResp, id, HMC_PLUGIN_ERR_REMOTE);
      continue;
    }
    *f = OutFrame{};
    f->hdr.type = kMsgData;
    f->hdr.sink = j.sink;
    f->hdr.addr = j.next;
    f->hdr.len = n;
    f->data = j.base + j.next;
    f->len = static_cast<size_t>(n);
    f->req = j.req;
    f->on_written = j.req != nullptr ? OutFrame::kBulkBytes : OutFrame::kNothing;
    j.next += n;
    if (j.next >= j.total) bulk_.pop_front();
    return true;
  }
  return false;
}

void Endpoint::on_frame_written(const OutFrame& f) {
  Request* r = f.req;
  switch (f.on_written) {
    case OutFrame::kCompleteReq: complete(r, HMC_PLUGIN_SUCCESS, r->len); break;
    case OutFrame::kBulkBytes:
      r->bulk_written += f.len;
      if (r->bulk_completes && r->bulk_written >= r->bulk_total)
        complete(r, HMC_PLUGIN_SUCCESS, r->len);
      break;
    case OutFrame::kNothing: break;
  }
}

bool Endpoint::data_begin(const WireHdr& h) {
  auto it = sinks_.find(h.sink);
  if (it == sinks_.end()) return true;  // aborted transfer: the bytes are discarded
  const Sink& s = it->second;
  if (s.kind == SinkKind::kGetV || s.kind == SinkKind::kPutVTarget) {
    // The payload runs from offset addr of piece tag on across the pieces: they must hold it.
    const size_t n = sink_pieces(s);
    bool fits = h.tag < n;
    if (fits) {
      uint64_t len = 0;
      sink_piece(s, static_cast<size_t>(h.tag), &len);
      fits = h.addr <= len;
      uint64_t room = fits ? len - h.addr : 0;
      for (size_t i = static_cast<size_t>(h.tag) + 1; fits && i < n && room < h.len; ++i) {
        sink_piece(s, i, &len);
        room += len;
      }
      fits = fits && h.len <= room;
    }
    if (!fits) {
      protocol_error("data chunk [%llu, +%llu) of piece %llu outside its vectored transfer",
                     static_cast<unsigned long long>(h.addr),
                     static_cast<unsigned long long>(h.len),
                     static_cast<unsigned long long>(h.tag));
      return false;
    }
    return true;
  }
  if (h.addr > s.len || h.len > s.len - h.addr) {
    protocol_error("data chunk [%llu, +%llu) outside its %llu-byte transfer",
                   static_cast<unsigned long long>(h.addr), static_cast<unsigned long long>(h.len),
                   static_cast<unsigned long long>(s.len));
    return false;
  }
  return true;
}

size_t Endpoint::sink_pieces(const Sink& s) {
  return s.kind == SinkKind::kGetV ? s.req->vec.size() : s.vec.size();
}

uint8_t* Endpoint::sink_piece(const Sink& s, size_t i, uint64_t* len) {
  if (s.kind == SinkKind::kGetV) {
    *len = s.req->vec[i].len;
    return reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(s.req->vec[i].aux));
  }
  *len = s.vec[i].len;
  return s.vec[i].local;
}

int Endpoint::data_iov(uint64_t sink, uint64_t piece, uint64_t off, uint64_t len, iovec* iov,
                       int max) {
  auto it = sinks_.find(sink);
  if (it == sinks_.end()) return 0;
  Sink& s = it->second;
  if (s.kind != SinkKind::kGetV && s.kind != SinkKind::kPutVTarget) {
    uint8_t* dst = data_dst(sink, off, len);
    if (dst == nullptr) return 0;
    iov[0] = iovec{dst, static_cast<size_t>(len)};
    return 1;
  }
  if (!s.valid) return 0;
  const size_t n = sink_pieces(s);
  int cnt = 0;
  for (size_t i = static_cast<size_t>(piece); i < n && len > 0 && cnt < max; ++i, off = 0) {
    uint64_t plen = 0;
    uint8_t* base = sink_piece(s, i, &plen);
    if (off >= plen) continue;
    uint64_t take = std::min(plen - off, len);
    // The owner re-checks its region before every write: a deregistration mid-transfer stops it.
    if (s.kind == SinkKind::kPutVTarget &&
        !ctx_.regions().check_local(s.key, base + off, take, HMC_NET_ACCESS_REMOTE_WRITE)) {
      s.valid = false;
      return 0;
    }
    iov[cnt++] = iovec{base + off, static_cast<size_t>(take)};
    len -= take;
  }
  return cnt;
}

void Endpoint::data_advance(uint64_t sink, uint64_t* piece, uint64_t* off, uint64_t n) {
  auto it = sinks_.find(sink);
  if (it == sinks_.end() ||
      (it->second.kind != SinkKind::kGetV && it->second.kind != SinkKind::kPutVTarget)) {
    *off += n;
    return;
  }
  const Sink& s = it->second;
  const size_t count = sink_pieces(s);
  while (n > 0 && *piece < count) {
    uint64_t plen = 0;
    sink_piece(s, static_cast<size_t>(*piece), &plen);
    uint64_t rest = plen > *off ? plen - *off : 0;
    if (n < rest) {
      *off += n;
      return;
    }
    n -= rest;
    ++*piece;
    *off = 0;
  }
}

uint8_t* Endpoint::data_dst(uint64_t sink, uint64_t off, uint64_t len) {
  auto it = sinks_.find(sink);
  if (it == sinks_.end()) return nullptr;
  Sink& s = it->second;
  if (s.kind == SinkKind::kPutTarget) {
    // The owner re-checks its region before every write: a deregistration mid-transfer stops it.
    if (!s.valid) return nullptr;
    if (!ctx_.regions().check_local(s.key, s.dst + off, len, HMC_NET_ACCESS_REMOTE_WRITE)) {
      s.valid = false;
      return nullptr;
    }
  }
  return s.dst + off;
}

void Endpoint::data_end(uint64_t sink, uint64_t len) {
  auto it = sinks_.find(sink);
  if (it == sinks_.end()) return;
  if (it->second.kind == SinkKind::kGetV) {
    Request* r = it->second.req;
    r->vec_got += len;
    vec_try_finish(r);
    return;
  }
  it->second.got += len;
  if (it->second.got >= it->second.len) finish_sink(sink);
}

void Endpoint::finish_sink(uint64_t id) {
  auto it = sinks_.find(id);
  if (it == sinks_.end()) return;
  Sink s = it->second;
  sinks_.erase(it);
  switch (s.kind) {
    case SinkKind::kRecv:
      complete(s.req, s.req->msg_len > s.req->len ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS,
               static_cast<size_t>(s.len));
      break;
    case SinkKind::kGet:
      s.req->has_sink = false;
      complete(s.req, HMC_PLUGIN_SUCCESS, static_cast<size_t>(s.len));
      break;
    case SinkKind::kPutTarget:
      notes_.landed(s.note, s.valid);
      reply(kMsgPutAck, s.put_id, s.valid ? HMC_PLUGIN_SUCCESS : HMC_PLUGIN_ERR_REMOTE);
      break;
    case SinkKind::kPutVTarget:
      vec_ack(s.put_id, s.valid ? HMC_PLUGIN_SUCCESS : HMC_PLUGIN_ERR_REMOTE, 0);
      break;
    case SinkKind::kGetV: break;  // ends by vec_try_finish
  }
}

// ---------------------------------------------------------------------------------------------
// Protocol handlers

void Endpoint::reply(uint8_t type, uint64_t id, hmc_plugin_status_t st) {
  WireHdr h{};
  h.type = type;
  h.id = id;
  h.status = static_cast<int16_t>(st);
  send_ctrl(h, nullptr, 0, nullptr);
}

void Endpoint::on_msg(const WireHdr& h, const uint8_t* payload) {
  switch (h.type) {
    case kMsgEager: on_eager(h, payload); break;
    case kMsgRts: on_rts(h); break;
    case kMsgCts: on_cts(h); break;
    case kMsgFin: on_fin(h); break;
    case kMsgPut: on_put(h, payload); break;
    case kMsgPutCts: on_put_cts(h); break;
    case kMsgPutAck: on_put_ack(h); break;
    case kMsgGet: on_get(h); break;
    case kMsgGetResp: on_get_resp(h, payload); break;
    case kMsgPutV:
    case kMsgGetV: on_vec(h, payload); break;
    case kMsgVecCts: on_vec_cts(h); break;
    case kMsgVecAck: on_vec_ack(h, payload); break;
    default: protocol_error("unknown message type %u", h.type); break;
  }
}

void Endpoint::on_eager(const WireHdr& h, const uint8_t* payload) {
  if ((h.flags & kFlagPayload) == 0) {
    protocol_error("eager message without payload");
    return;
  }
  Request* r = match_posted(h.tag);
  if (r != nullptr) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(h.len, r->len));
    if (n > 0) std::memcpy(r->buf, payload, n);
    r->msg_len = h.len;
    complete(r, h.len > r->len ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS, n);
    return;
  }
  Unexpected u;
  u.size = h.len;
  u.data.assign(payload, payload + h.len);
  unexpected_[h.tag].push_back(std::move(u));
  ++unexpected_count_;
}

void Endpoint::on_rts(const WireHdr& h) {
  Request* r = match_posted(h.tag);
  if (r != nullptr) {
    start_rndv_recv(r, h.len, h.id, h.aux);
    return;
  }
  Unexpected u;
  u.rts = true;
  u.size = h.len;
  u.sender_id = h.id;
  u.src = h.aux;
  unexpected_[h.tag].push_back(std::move(u));
  ++unexpected_count_;
}

void Endpoint::start_rndv_recv(Request* r, uint64_t size, uint64_t sender_id, uint64_t src) {
  r->msg_len = size;
  uint64_t accept = std::min<uint64_t>(size, r->len);
  WireHdr h{};
  h.type = kMsgCts;
  h.id = sender_id;
  if (accept == 0) {
    send_ctrl(h, nullptr, 0, nullptr);  // the sender ends at once
    complete(r, size > 0 ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS, 0);
    return;
  }
  if (dev_ == DevKind::kShm && cma_ok_) {
    cma_.push_back(CmaJob{CmaJob::kRecvPull, r, r->buf, src, accept, 0, sender_id, 0});
    return;
  }
  uint64_t sid = next_id_++;
  sinks_[sid] = Sink{SinkKind::kRecv, r->buf, accept, 0, r, 0, 0, true};
  h.sink = sid;
  h.len = accept;
  send_ctrl(h, nullptr, 0, nullptr);
}

void Endpoint::on_cts(const WireHdr& h) {
  Request* s = find_tracked(h.id, ReqKind::kSend);
  if (s == nullptr || h.len > s->len) {
    protocol_error("clear-to-send for unknown send %llu or too many bytes",
                   static_cast<unsigned long long>(h.id));
    return;
  }
  if (h.len == 0) {
    complete(s, HMC_PLUGIN_SUCCESS, s->len);
    return;
  }
  s->bulk_total = h.len;
  s->bulk_written = 0;
  s->bulk_completes = true;
  add_bulk(BulkJob{s, h.sink, s->buf, h.len, 0, 0, 0});
}

void Endpoint::on_fin(const WireHdr& h) {
  Request* s = find_tracked(h.id, ReqKind::kSend);
  if (s == nullptr) {
    protocol_error("finish for unknown send %llu", static_cast<unsigned long long>(h.id));
    return;
  }
  hmc_plugin_status_t st = status_from_wire(h.status);
  complete(s, st, st == HMC_PLUGIN_SUCCESS ? s->len : 0);
}

void Endpoint::on_put(const WireHdr& h, const uint8_t* payload) {
  // Checked before any byte is written: key, bounds and access of a live region.
  uint8_t* dst = ctx_.regions().check(h.tag, h.addr, h.len, HMC_NET_ACCESS_REMOTE_WRITE);
  // A notification takes its place in order now, and is released once the data is in place.
  const uint64_t note = (h.flags & kFlagNotify) != 0 ? notes_.arrive(h.sink) : PutNotes::kNone;
  if ((h.flags & kFlagPayload) != 0) {
    if (dst != nullptr && h.len > 0) std::memcpy(dst, payload, static_cast<size_t>(h.len));
    notes_.landed(note, dst != nullptr);
    reply(kMsgPutAck, h.id, dst != nullptr ? HMC_PLUGIN_SUCCESS : HMC_PLUGIN_ERR_REMOTE);
    return;
  }
  if (dst == nullptr) {
    notes_.landed(note, false);
    reply(kMsgPutAck, h.id, HMC_PLUGIN_ERR_REMOTE);
    return;
  }
  if (dev_ == DevKind::kShm && cma_ok_) {
    cma_.push_back(CmaJob{CmaJob::kPutPull, nullptr, dst, h.aux, h.len, 0, h.id, h.tag, note});
    return;
  }
  uint64_t sid = next_id_++;
  sinks_[sid] = Sink{SinkKind::kPutTarget, dst, h.len, 0, nullptr, h.tag, h.id, true, note};
  WireHdr c{};
  c.type = kMsgPutCts;
  c.id = h.id;
  c.sink = sid;
  send_ctrl(c, nullptr, 0, nullptr);
}

void Endpoint::on_put_cts(const WireHdr& h) {
  Request* r = find_tracked(h.id, ReqKind::kPut);
  if (r == nullptr) {
    protocol_error("put clear-to-send for unknown put %llu", static_cast<unsigned long long>(h.id));
    return;
  }
  r->bulk_total = r->len;
  r->bulk_written = 0;
  r->bulk_completes = false;  // ends with the owner's ack
  add_bulk(BulkJob{r, h.sink, r->buf, r->len, 0, 0, 0});
}

void Endpoint::on_put_ack(const WireHdr& h) {
  Request* r = find_tracked(h.id, ReqKind::kPut);
  if (r == nullptr) {
    protocol_error("put ack for unknown put %llu", static_cast<unsigned long long>(h.id));
    return;
  }
  hmc_plugin_status_t st = status_from_wire(h.status);
  complete(r, st, st == HMC_PLUGIN_SUCCESS ? r->len : 0);
}

void Endpoint::on_get(const WireHdr& h) {
  uint8_t* src = ctx_.regions().check(h.tag, h.addr, h.len, HMC_NET_ACCESS_REMOTE_READ);
  if (src == nullptr) {
    reply(kMsgGetResp, h.id, HMC_PLUGIN_ERR_REMOTE);
    return;
  }
  if (h.len <= inline_limit_) {
    WireHdr r{};
    r.type = kMsgGetResp;
    r.flags = kFlagPayload;
    r.id = h.id;
    r.len = h.len;
    send_ctrl(r, src, static_cast<size_t>(h.len), nullptr);
    return;
  }
  if (dev_ == DevKind::kShm && cma_ok_) {
    cma_.push_back(CmaJob{CmaJob::kGetPush, nullptr, src, h.aux, h.len, 0, h.id, h.tag});
    return;
  }
  add_bulk(BulkJob{nullptr, h.id, src, h.len, 0, h.tag, h.id});
}

void Endpoint::on_get_resp(const WireHdr& h, const uint8_t* payload) {
  Request* r = find_tracked(h.id, ReqKind::kGet);
  if (r == nullptr) return;  // already ended (an aborted get may answer twice)
  hmc_plugin_status_t st = status_from_wire(h.status);
  if (st != HMC_PLUGIN_SUCCESS) {
    complete(r, st, 0);
    return;
  }
  if ((h.flags & kFlagPayload) != 0) {
    if (h.len != r->len) {
      protocol_error("get response of %llu bytes for a %zu-byte get",
                     static_cast<unsigned long long>(h.len), r->len);
      return;
    }
    if (h.len > 0) std::memcpy(r->buf, payload, static_cast<size_t>(h.len));
  }
  complete(r, HMC_PLUGIN_SUCCESS, r->len);
}

// ---------------------------------------------------------------------------------------------
// Vectored put/get

void Endpoint::vec_ack(uint64_t id, hmc_plugin_status_t st, uint64_t streamed) {
  WireHdr h{};
  h.type = kMsgVecAck;
  h.id = id;
  h.status = static_cast<int16_t>(st);
  h.len = streamed;
  send_ctrl(h, nullptr, 0, nullptr);
}

// The owner of the memory: every piece is checked before any byte moves; one refused piece
// refuses the message.
void Endpoint::on_vec(const WireHdr& h, const uint8_t* payload) {
  const bool put = h.type == kMsgPutV;
  const bool inline_data = put && (h.flags & kFlagVecInline) != 0;
  if (!vec_list_ok(h)) {
    protocol_error("vectored %s with a malformed list of %llu bytes in %llu", put ? "put" : "get",
                   static_cast<unsigned long long>(h.aux), static_cast<unsigned long long>(h.len));
    return;
  }
  const size_t n = static_cast<size_t>(h.aux / sizeof(VecPieceWire));
  const uint32_t need = put ? HMC_NET_ACCESS_REMOTE_WRITE : HMC_NET_ACCESS_REMOTE_READ;
  const Region* region = ctx_.regions().find(h.tag);
  if (region == nullptr) {
    vec_ack(h.id, HMC_PLUGIN_ERR_REMOTE, 0);
    return;
  }
  std::vector<VecSpan> vec(n);
  uint64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    VecPieceWire p;
    std::memcpy(&p, payload + i * sizeof(p), sizeof(p));
    uint8_t* local = region->place(p.addr, p.len, need);
    if (local == nullptr) {
      vec_ack(h.id, HMC_PLUGIN_ERR_REMOTE, 0);
      return;
    }
    vec[i] = VecSpan{local, p.aux, p.len};
    total += p.len;
  }
  if (inline_data) {
    if (total != h.len - h.aux) {
      protocol_error("inline vectored put of %llu bytes for pieces of %llu",
                     static_cast<unsigned long long>(h.len - h.aux),
                     static_cast<unsigned long long>(total));
      return;
    }
    const uint8_t* at = payload + h.aux;
    for (const VecSpan& p : vec) {
      if (p.len > 0) std::memcpy(p.local, at, static_cast<size_t>(p.len));
      at += p.len;
    }
    vec_ack(h.id, HMC_PLUGIN_SUCCESS, 0);
    return;
  }
  if (total == 0) {
    vec_ack(h.id, HMC_PLUGIN_SUCCESS, 0);
    return;
  }
  if (!put && total <= inline_limit_) {
    auto data = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(total));
    uint8_t* at = data->data();
    for (const VecSpan& p : vec) {
      if (p.len > 0) std::memcpy(at, p.local, static_cast<size_t>(p.len));
      at += p.len;
    }
    WireHdr a{};
    a.type = kMsgVecAck;
    a.flags = kFlagPayload;
    a.id = h.id;
    a.addr = h.addr;
    a.aux = n;
    a.len = total;
    send_ctrl_owned(a, std::move(data));
    return;
  }
  if (dev_ == DevKind::kShm && cma_ok_) {
    CmaJob j{put ? CmaJob::kPutVPull : CmaJob::kGetVPush, nullptr, nullptr, 0, 0, 0, h.id, h.tag};
    j.vec = std::move(vec);
    j.first = h.addr;
    cma_.push_back(std::move(j));
    return;
  }
  if (put) {
    uint64_t sid = next_id_++;
    Sink& sk = sinks_[sid];
    sk = Sink{SinkKind::kPutVTarget, nullptr, total, 0, nullptr, h.tag, h.id, true};
    sk.vec = std::move(vec);
    WireHdr c{};
    c.type = kMsgVecCts;
    c.id = h.id;
    c.sink = sid;
    c.addr = h.addr;
    c.len = n;
    send_ctrl(c, nullptr, 0, nullptr);
    return;
  }
  BulkJob j{nullptr, h.id, nullptr, total, 0, h.tag, h.id};
  j.vec = std::make_shared<const std::vector<VecSpan>>(std::move(vec));
  j.tag_base = h.addr;
  add_bulk(std::move(j));
}

// The owner took a vectored put's message by stream: its pieces [addr, addr + len) go as DATA.
void Endpoint::on_vec_cts(const WireHdr& h) {
  Request* r = find_tracked(h.id, ReqKind::kPutV);
  if (r == nullptr || h.addr > r->vec.size() || h.len > r->vec.size() - h.addr || h.len == 0) {
    protocol_error("vectored clear-to-send for unknown put %llu or pieces outside it",
                   static_cast<unsigned long long>(h.id));
    return;
  }
  BulkJob j{r, h.sink, nullptr, 0, 0, 0, 0};
  std::vector<VecSpan> vec;
  vec.reserve(static_cast<size_t>(h.len));
  for (size_t i = static_cast<size_t>(h.addr); i < h.addr + h.len; ++i) {
    const VecPieceWire& p = r->vec[i];
    vec.push_back(
        VecSpan{reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(p.aux)), p.addr, p.len});
    j.total += p.len;
  }
  j.vec = std::make_shared<const std::vector<VecSpan>>(std::move(vec));
  j.tag_base = 0;             // the owner's sink holds just these pieces
  r->bulk_completes = false;  // ends with the owner's acks
  add_bulk(std::move(j));
}

void Endpoint::on_vec_ack(const WireHdr& h, const uint8_t* payload) {
  auto it = tracked_.find(h.id);
  Request* r = it == tracked_.end() ? nullptr : it->second;
  if (r == nullptr || (r->kind != ReqKind::kPutV && r->kind != ReqKind::kGetV) ||
      r->parts_left == 0) {
    protocol_error("vectored answer for unknown request %llu",
                   static_cast<unsigned long long>(h.id));
    return;
  }
  hmc_plugin_status_t st = status_from_wire(h.status);
  if (st != HMC_PLUGIN_SUCCESS && r->vec_status == HMC_PLUGIN_SUCCESS) r->vec_status = st;
  if ((h.flags & kFlagPayload) != 0) {
    // A get's pieces [addr, addr + aux), inline.
    uint64_t total = 0;
    bool fits =
        r->kind == ReqKind::kGetV && h.addr <= r->vec.size() && h.aux <= r->vec.size() - h.addr;
    for (uint64_t i = h.addr; fits && i < h.addr + h.aux; ++i) total += r->vec[i].len;
    if (!fits || total != h.len) {
      protocol_error("inline vectored answer of %llu bytes that fits no pieces of request %llu",
                     static_cast<unsigned long long>(h.len), static_cast<unsigned long long>(h.id));
      return;
    }
    const uint8_t* at = payload;
    for (uint64_t i = h.addr; i < h.addr + h.aux; ++i) {
      const VecPieceWire& p = r->vec[i];
      if (p.len > 0)
        std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(p.aux)), at,
                    static_cast<size_t>(p.len));
      at += p.len;
    }
  } else if (r->kind == ReqKind::kGetV) {
    r->vec_expect += h.len;
  }
  --r->parts_left;
  vec_try_finish(r);
}

void Endpoint::vec_try_finish(Request* r) {
  if (r->done || r->parts_left > 0 || r->vec_got < r->vec_expect) return;
  complete(r, r->vec_status, r->vec_status == HMC_PLUGIN_SUCCESS ? r->len : 0);
}

}  // namespace hmc::hoststage
