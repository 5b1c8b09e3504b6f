// Endpoint: requests and tagged messages (posting sends and receives, credits, the send
// queue, cancel).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "context.h"
#include "endpoint.h"
#include "endpoint_parts.h"
#include "region.h"

namespace hmc::ibverbs {

// ---- requests --------------------------------------------------------------------------------

Request* Endpoint::new_request(ReqKind kind) {
  auto r = std::make_unique<Request>();
  r->id = ctx().next_id();
  r->ep = this;
  r->kind = kind;
  Request* p = r.get();
  reqs_.emplace(p->id, std::move(r));
  return p;
}

void Endpoint::finish(Request* r, hmc_plugin_status_t st, size_t bytes) {
  r->done = true;
  r->result = st;
  r->bytes = bytes;
  ctx().mr_cache().release(r->own_reg);
  r->own_reg = nullptr;
  for (auto& seg : r->seg_regs) ctx().mr_cache().release(seg.second);
  r->seg_regs.clear();
  if (r->kind == ReqKind::kRecv && r->segmented) rndv_recvs_.erase(r->cookie);
}

void Endpoint::retire(Request* r) {
  reqs_.erase(r->id);
}

bool Endpoint::has_work() const {
  if (stage_ == Stage::kLost) return false;
  return stage_ != Stage::kReady || (side_ && side_->want_write());
}

void Endpoint::local_key(const void* buf, size_t len, const MemRegion* mr, int access, SendOp* op) {
  op->local = reinterpret_cast<uintptr_t>(buf);
  op->len = static_cast<uint32_t>(len);
  if (mr != nullptr && mr->mr != nullptr && mr->dev == &dev_ && mr->covers(buf, len)) {
    op->lkey = mr->mr->lkey;
    op->reg_access = -1;
  } else {
    op->reg_access = access;
  }
}

void Endpoint::queue(SendOp op) {
  if (op.req_id != 0) {
    auto it = reqs_.find(op.req_id);
    if (it != reqs_.end()) ++it->second->in_flight;
  }
  if (op.rail >= 0)
    rails_[static_cast<size_t>(op.rail)].backlog.push_back(op);
  else
    backlog_[op.rma_qp ? 1 : 0].push_back(op);
}

int32_t Endpoint::send_credits() const {
  return static_cast<int32_t>(remote_.credits - (sent_credited_ - peer_freed_));
}

void Endpoint::pump() {
  if (stage_ != Stage::kReady) return;
  pump_rails();
  if (stage_ != Stage::kReady) return;
  for (int q = 0; q < 2; ++q) {
    if (q == 1 && rma_resetting_) continue;
    if (q == 1 && !pump_chained()) return;
    ibv_qp* qp = q == 0 ? msg_qp_ : rma_qp_;
    int rdma = 0;
    while (!backlog_[q].empty() && in_flight_[q] < static_cast<int>(kSqDepth) && dev_.can_post()) {
      SendOp& op = backlog_[q].front();
      if (op.kind == WrKind::kMsg) {
        if (takes_credit(static_cast<MsgType>(op.hdr.type)) && !op.credit_taken) {
          if (send_credits() <= 0) break;
          ++sent_credited_;
          op.credit_taken = true;
        }
        op.hdr.freed = freed_;
      } else if (in_flight_[q] + rdma >= kMaxRdmaInFlight) {
        break;
      }
      std::string why;
      PostResult pr = dev_.post(this, qp, op, &why);
      if (pr == PostResult::kQueueError) {
        lose(why);
        return;
      }
      if (pr == PostResult::kBusy) break;
      if (pr == PostResult::kRegError && !op.bounce) {
        stage_through_bounce(backlog_[q], why);
        continue;
      }
      if (op.kind == WrKind::kMsg) reported_ = freed_;
      SendOp done = op;
      backlog_[q].pop_front();
      if (pr == PostResult::kRegError) {
        IB_ERROR(ctx().log(), "%s: %s", dev_.name().c_str(), why.c_str());
        auto it = reqs_.find(done.req_id);
        if (it != reqs_.end() && !it->second->done) {
          --it->second->in_flight;
          finish(it->second.get(), HMC_PLUGIN_ERR_NO_MEMORY, 0);
          if (done.kind == WrKind::kRndvRead) {  // the sender waits for an answer
            SendOp fin;
            fin.hdr.type = static_cast<uint8_t>(MsgType::kFin);
            fin.hdr.cookie = it->second->cookie;
            queue(fin);
          }
        }
        continue;
      }
      posted(q);
    }
  }
}

void Endpoint::stage_through_bounce(std::deque<SendOp>& backlog, const std::string& why) {
  if (!staged_logged_[1]) {
    IB_WARN(ctx().log(), "%s: %s; such transfers are staged through registered bounce buffers",
            dev_.name().c_str(), why.c_str());
    staged_logged_[1] = true;
  }
  // The piece becomes bounce-sized pieces in its place, counted for its request.
  SendOp op = backlog.front();
  backlog.pop_front();
  std::vector<SendOp> parts;
  for (uint32_t off = 0; off < op.len; off += static_cast<uint32_t>(kBounceSize)) {
    SendOp p = op;
    p.bounce = true;
    p.reg_access = -1;
    p.local = op.local + off;
    p.remote = op.remote + off;
    p.len = static_cast<uint32_t>(std::min<size_t>(kBounceSize, op.len - off));
    parts.push_back(p);
  }
  auto it = reqs_.find(op.req_id);
  if (it != reqs_.end()) it->second->in_flight += static_cast<int>(parts.size()) - 1;
  backlog.insert(backlog.begin(), parts.begin(), parts.end());
}

void Endpoint::maybe_return_credits() {
  if (stage_ != Stage::kReady || freed_ - reported_ < std::max(1u, local_.credits / 2)) return;
  if (in_flight_[0] >= static_cast<int>(kSqDepth) || !dev_.can_post()) return;
  SendOp op;
  op.hdr.type = static_cast<uint8_t>(MsgType::kCredit);
  op.hdr.freed = freed_;
  std::string why;
  const PostResult pr = dev_.post(this, msg_qp_, op, &why);
  if (pr == PostResult::kBusy) return;  // again after a completion
  if (pr != PostResult::kOk) {
    lose(why);
    return;
  }
  reported_ = freed_;
  posted(0);
}

hmc_plugin_status_t Endpoint::post_send(const void* buf, size_t len, const MemRegion* mr,
                                        uint64_t tag, Request** out) {
  if (stage_ == Stage::kLost) return HMC_PLUGIN_ERR_PEER_LOST;
  if (stage_ != Stage::kReady) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  Request* r = new_request(ReqKind::kSend);
  r->tag = tag;
  r->buf = const_cast<void*>(buf);
  r->len = len;
  SendOp op;
  op.hdr.tag = tag;
  op.hdr.len = len;
  op.req_id = r->id;
  if (len <= remote_.eager) {
    op.hdr.type = static_cast<uint8_t>(MsgType::kEager);
    op.payload = buf;
  } else {
    // The receiver reads from here: expose the buffer for remote reads until it answers.
    uint32_t rkey = 0;
    if (mr != nullptr && mr->mr != nullptr && mr->dev == &dev_ && mr->covers(buf, len) &&
        (mr->access & HMC_NET_ACCESS_REMOTE_READ)) {
      rkey = mr->mr->rkey;
      // Its registration on the rails too (host memory), as a put's.
      if (rails_up_ && !rails_.empty() && !mr->device && mr->rail_mrs.size() >= rails_.size() &&
          len >= 2 * dev_.chunk()) {
        for (size_t i = 0; i < rails_.size(); ++i) op.rail_keys[i] = mr->rail_mrs[i]->rkey;
        op.nrail_keys = static_cast<uint8_t>(rails_.size());
      }
    } else {
      // A segment at a time (announce_segments), unless the cache holds the whole buffer (then
      // read on the port only).
      const size_t seg = rndv_segment();
      void* b = const_cast<void*>(buf);
      if (len > seg) r->own_reg = ctx().mr_cache().find(dev_, b, len, IBV_ACCESS_REMOTE_READ);
      if (r->own_reg == nullptr) {
        std::string why;
        r->own_reg =
            ctx().mr_cache().acquire(dev_, b, std::min(len, seg), IBV_ACCESS_REMOTE_READ, &why);
        if (r->own_reg == nullptr) {
          queue_staged_send(r, buf, len, why);
          pump();
          *out = r;
          return HMC_PLUGIN_SUCCESS;
        }
        if (len > seg) {
          r->segmented = true;
          r->keyed = seg;
          r->seg_regs.emplace_back(seg, r->own_reg);
          op.hdr.key_len = static_cast<uint32_t>(seg);
          keying_.push_back(r->id);
        }
        add_rail_keys(r, b, std::min(len, seg), std::min(len, seg), &op);
      }
      rkey = r->own_reg->mr->rkey;
      if (r->segmented) r->own_reg = nullptr;  // in seg_regs, released when read
    }
    op.hdr.type = static_cast<uint8_t>(MsgType::kRts);
    op.hdr.addr = reinterpret_cast<uintptr_t>(buf);
    op.hdr.rkey = rkey;
    op.hdr.cookie = r->id;
    r->awaiting_fin = true;
  }
  queue(op);
  pump();
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

void Endpoint::queue_staged_send(Request* r, const void* buf, size_t len, const std::string& why) {
  if (!staged_logged_[0]) {
    IB_WARN(ctx().log(),
            "%s: %s; such messages are sent staged through the registered eager "
            "buffers",
            dev_.name().c_str(), why.c_str());
    staged_logged_[0] = true;
  }
  SendOp rts;
  rts.hdr.type = static_cast<uint8_t>(MsgType::kStagedRts);
  rts.hdr.tag = r->tag;
  rts.hdr.len = len;
  rts.hdr.cookie = r->id;
  rts.req_id = r->id;
  queue(rts);
  const size_t piece = remote_.eager;
  for (size_t off = 0; off < len; off += piece) {
    SendOp f;
    f.hdr.type = static_cast<uint8_t>(MsgType::kFrag);
    f.hdr.tag = r->tag;
    f.hdr.len = std::min(piece, len - off);
    f.hdr.addr = off;
    f.hdr.cookie = r->id;
    f.payload = static_cast<const uint8_t*>(buf) + off;
    f.req_id = r->id;
    queue(f);
  }
}

hmc_plugin_status_t Endpoint::post_recv(void* buf, size_t len, const MemRegion* mr, uint64_t tag,
                                        Request** out) {
  (void)mr;
  auto it = std::find_if(unexpected_.begin(), unexpected_.end(),
                         [&](const Unexpected& u) { return u.hdr.tag == tag; });
  if (it == unexpected_.end() && stage_ == Stage::kLost) return HMC_PLUGIN_ERR_PEER_LOST;
  Request* r = new_request(ReqKind::kRecv);
  r->tag = tag;
  r->buf = buf;
  r->len = len;
  if (it != unexpected_.end()) {
    if (it->hdr.type == static_cast<uint8_t>(MsgType::kStagedRts))
      staged_unexpected_.erase(it->hdr.cookie);
    if (it->hdr.type == static_cast<uint8_t>(MsgType::kRts) && it->hdr.key_len != 0)
      rndv_unexpected_.erase(it->hdr.cookie);
    Unexpected u = std::move(*it);
    unexpected_.erase(it);
    r->matched = true;
    if (u.whole()) {
      deliver(r, u.hdr, u.data.data());
    } else if (u.hdr.type == static_cast<uint8_t>(MsgType::kStagedRts)) {
      // Part of it is here: the rest goes straight into the buffer as it arrives.
      r->sent_len = u.hdr.len;
      r->cookie = u.hdr.cookie;
      r->got = u.data.size();
      std::memcpy(r->buf, u.data.data(), std::min(r->got, r->len));
      staged_recvs_[r->cookie] = r;
    } else {
      start_read(r, u.hdr, u.rail_keys);
      for (const auto& k : u.keys) on_rndv_key(k.first, k.second);  // in rndv_recvs_ now
    }
  } else {
    posted_.push_back(r);
  }
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::cancel(Request* r) {
  if (r->done) return HMC_PLUGIN_SUCCESS;
  if (r->kind != ReqKind::kRecv || r->matched) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  auto it = std::find(posted_.begin(), posted_.end(), r);
  if (it == posted_.end()) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  posted_.erase(it);
  finish(r, HMC_PLUGIN_ERR_CANCELLED, 0);
  return HMC_PLUGIN_SUCCESS;
}

}  // namespace hmc::ibverbs
