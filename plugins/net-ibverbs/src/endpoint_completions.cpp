// Endpoint: arrivals and completions (messages and fragments received, sends and RDMA
// operations completed).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "context.h"
#include "endpoint.h"
#include "endpoint_parts.h"
#include "region.h"

namespace hmc::ibverbs {

// ---- arrivals and completions ------------------------------------------------------------------

void Endpoint::deliver(Request* r, const MsgHeader& h, const uint8_t* payload) {
  size_t n = std::min<size_t>(h.len, r->len);
  if (n > 0) std::memcpy(r->buf, payload, n);
  finish(r, h.len > r->len ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS, h.len);
}

void Endpoint::on_message(const ibv_wc& wc, bool rma_qp, const uint8_t* buf, size_t len) {
  (void)wc;
  (void)rma_qp;
  MsgHeader h;
  std::vector<uint32_t> rail_keys;
  std::string why;
  if (!decode_message(buf, len, local_.eager, &h, &rail_keys, &why)) {
    lose(why);
    return;
  }
  if (static_cast<int32_t>(h.freed - peer_freed_) > 0) peer_freed_ = h.freed;
  const auto type = static_cast<MsgType>(h.type);
  if (takes_credit(type)) ++freed_;  // the device posts the buffer again after this
  switch (type) {
    case MsgType::kEager:
    case MsgType::kRts: {
      if (type == MsgType::kRts && h.key_len != 0 && rndv_unexpected_.count(h.cookie) != 0) {
        lose("a rendezvous announced twice");
        return;
      }
      auto it = std::find_if(posted_.begin(), posted_.end(),
                             [&](const Request* r) { return r->tag == h.tag; });
      if (it == posted_.end()) {
        Unexpected u{h, {}, rail_keys, {}, 0};
        if (type == MsgType::kEager) u.data.assign(buf + sizeof h, buf + sizeof h + h.len);
        u.keyed = h.key_len;
        unexpected_.push_back(std::move(u));
        if (type == MsgType::kRts && h.key_len != 0)
          rndv_unexpected_[h.cookie] = &unexpected_.back();
        break;
      }
      Request* r = *it;
      posted_.erase(it);
      r->matched = true;
      if (type == MsgType::kEager)
        deliver(r, h, buf + sizeof h);
      else
        start_read(r, h, rail_keys);
      break;
    }
    case MsgType::kStagedRts: {
      if (staged_recvs_.count(h.cookie) != 0 || staged_unexpected_.count(h.cookie) != 0) {
        lose("a malformed staged message announcement");
        return;
      }
      auto it = std::find_if(posted_.begin(), posted_.end(),
                             [&](const Request* r) { return r->tag == h.tag; });
      if (it == posted_.end()) {
        unexpected_.push_back(Unexpected{h, {}, {}, {}, 0});
        staged_unexpected_[h.cookie] = &unexpected_.back();
        break;
      }
      Request* r = *it;
      posted_.erase(it);
      r->matched = true;
      r->sent_len = h.len;
      r->cookie = h.cookie;
      staged_recvs_[h.cookie] = r;
      break;
    }
    case MsgType::kFrag:
      on_fragment(h, buf + sizeof h);
      if (stage_ == Stage::kLost) return;
      break;
    case MsgType::kFin: {
      auto it = reqs_.find(h.cookie);
      if (it == reqs_.end()) break;  // ended by other means (cannot happen while connected)
      Request* r = it->second.get();
      if (r->kind != ReqKind::kSend || !r->awaiting_fin) {
        lose("an answer to no rendezvous");
        return;
      }
      r->awaiting_fin = false;
      if (r->in_flight == 0 && !r->done) end_send(r);
      break;
    }
    case MsgType::kRndvKey:
      on_rndv_key(h, rail_keys);
      if (stage_ == Stage::kLost) return;
      break;
    case MsgType::kRndvAck:
      on_rndv_ack(h);
      if (stage_ == Stage::kLost) return;
      break;
    case MsgType::kCredit: break;
    case MsgType::kNotify: notifications_.push_back(h.len); break;
  }
  pump();
}

void Endpoint::on_fragment(const MsgHeader& h, const uint8_t* payload) {
  auto rit = staged_recvs_.find(h.cookie);
  if (rit != staged_recvs_.end()) {
    Request* r = rit->second;
    if (h.addr != r->got || h.len > r->sent_len - r->got) {
      lose("a fragment out of order");
      return;
    }
    if (h.addr < r->len)
      std::memcpy(static_cast<uint8_t*>(r->buf) + h.addr, payload,
                  std::min<size_t>(h.len, r->len - h.addr));
    r->got += h.len;
    if (r->got == r->sent_len) {
      staged_recvs_.erase(rit);
      finish(r, r->sent_len > r->len ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS, r->sent_len);
    }
    return;
  }
  auto uit = staged_unexpected_.find(h.cookie);
  if (uit == staged_unexpected_.end()) {
    lose("a fragment of no announced message");
    return;
  }
  Unexpected* u = uit->second;
  if (h.addr != u->data.size() || h.len > u->hdr.len - u->data.size()) {
    lose("a fragment out of order");
    return;
  }
  u->data.insert(u->data.end(), payload, payload + h.len);
  if (u->whole()) staged_unexpected_.erase(uit);
}

void Endpoint::on_send_complete(const ibv_wc& wc, const WrCtx& w) {
  const int q = w.op.rma_qp ? 1 : 0;
  if (stage_ == Stage::kLost) return;
  auto it = reqs_.find(w.op.req_id);
  Request* r = it != reqs_.end() ? it->second.get() : nullptr;
  if (w.op.rail >= 0) {
    // A rail's queue pair is not replaced: any failure there loses the peer.
    Rail& rl = rails_[static_cast<size_t>(w.op.rail)];
    if (wc.status != IBV_WC_SUCCESS) {
      lose("a work request on rail " + rl.dev->name() +
           " failed: " + ctx().api().wc_status_str(wc.status));
      return;
    }
    --rl.in_flight;
    rl.last_completion_ns = ctx().now_ns();
    if (r != nullptr && !r->done && w.op.kind == WrKind::kRndvRead) {
      --r->in_flight;
      note_read(r, w.op);
      end_read_if_done(r);  // FIN once every piece on every port completed
    } else if (r != nullptr && !r->done && --r->in_flight == 0) {
      if (r->notify_after) {
        r->notify_after = false;
        SendOp op;
        op.rma_qp = true;
        op.hdr.type = static_cast<uint8_t>(MsgType::kNotify);
        op.hdr.len = r->notify_value;
        op.req_id = r->id;
        queue(op);
      } else {
        finish(r, HMC_PLUGIN_SUCCESS, r->len);
      }
    }
    pump();
    return;
  }
  if (wc.status != IBV_WC_SUCCESS) {
    if (q == 1 && (refused_access(wc.status) || wc.status == IBV_WC_WR_FLUSH_ERR)) {
      if (wc.status == IBV_WC_WR_FLUSH_ERR) {
        // Broken without an error of ours: the peer's side failed an access; post it again.
        start_rma_reset();
        backlog_[1].push_front(w.op);
        return;
      }
      IB_INFO(ctx().log(), "%s: the peer's HCA refused a %s: %s", dev_.name().c_str(),
              w.op.kind == WrKind::kPut ? "put" : "get", ctx().api().wc_status_str(wc.status));
      const uint64_t failed = w.op.req_id;
      if (r != nullptr && !r->done) finish(r, HMC_PLUGIN_ERR_REMOTE, 0);
      start_rma_reset();
      // The refused request's other pieces (and its notification) are not posted again.
      backlog_[1].erase(std::remove_if(backlog_[1].begin(), backlog_[1].end(),
                                       [&](const SendOp& op) { return op.req_id == failed; }),
                        backlog_[1].end());
      return;
    }
    lose(std::string("a work request failed: ") + ctx().api().wc_status_str(wc.status));
    return;
  }
  --in_flight_[q];
  last_completion_ns_[q] = ctx().now_ns();
  if (r == nullptr) {
    pump();
    return;
  }
  --r->in_flight;
  if (!r->done && w.op.kind == WrKind::kRndvRead) note_read(r, w.op);
  if (r->done || r->in_flight > 0) {
    pump();
    return;
  }
  switch (r->kind) {
    case ReqKind::kSend:
      if (!r->awaiting_fin) end_send(r);
      break;
    case ReqKind::kRecv: end_read_if_done(r); break;
    case ReqKind::kPut:
    case ReqKind::kGet:
      if (r->notify_after) {  // striped: the last piece was on this port
        r->notify_after = false;
        SendOp op;
        op.rma_qp = true;
        op.hdr.type = static_cast<uint8_t>(MsgType::kNotify);
        op.hdr.len = r->notify_value;
        op.req_id = r->id;
        queue(op);
        break;
      }
      finish(r, HMC_PLUGIN_SUCCESS, r->len);
      break;
  }
  pump();
}

}  // namespace hmc::ibverbs
