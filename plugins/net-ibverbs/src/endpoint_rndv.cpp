// Endpoint: rendezvous (the receiver's RDMA READ of a large message, segment keys and
// acknowledgements).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "context.h"
#include "endpoint.h"
#include "endpoint_parts.h"
#include "region.h"

namespace hmc::ibverbs {

// ---- rendezvous -------------------------------------------------------------------------------

void Endpoint::start_read(Request* r, const MsgHeader& rts,
                          const std::vector<uint32_t>& rail_keys) {
  r->matched = true;
  r->sent_len = rts.len;
  r->cookie = rts.cookie;
  r->remote_addr = rts.addr;
  r->segmented = rts.key_len != 0;
  if (r->segmented) rndv_recvs_[rts.cookie] = r;
  add_keys(r, r->segmented ? rts.key_len : rts.len, rts.rkey, rail_keys);
}

void Endpoint::add_keys(Request* r, size_t len, uint32_t rkey,
                        const std::vector<uint32_t>& rail_keys) {
  const size_t n = std::min(r->sent_len, r->len);
  const size_t from = r->keyed, to = from + len, upto = std::min(to, n);
  r->keyed = to;
  const size_t chunk = dev_.chunk();
  const bool striped = rails_up_ && !rails_.empty() && rail_keys.size() >= rails_.size() &&
                       upto > from && upto - from >= 2 * chunk;
  if (striped && r->rail_bytes.empty()) r->rail_bytes.assign(rails_.size() + 1, 0);
  for (size_t off = from; off < upto; off += chunk) {
    const size_t piece = std::min(chunk, upto - off);
    uint8_t* local = static_cast<uint8_t*>(r->buf) + off;
    SendOp op;
    op.kind = WrKind::kRndvRead;
    const size_t best = striped ? least_given(r->rail_bytes) : 0;  // the port, or rail best - 1
    if (striped) r->rail_bytes[best] += piece;
    if (best > 0) {
      op.rail = static_cast<int>(best) - 1;
      op.local = reinterpret_cast<uintptr_t>(local);
      op.len = static_cast<uint32_t>(piece);
      op.reg_access = IBV_ACCESS_LOCAL_WRITE;
      op.rkey = rail_keys[best - 1];
    } else {
      local_key(local, piece, nullptr, IBV_ACCESS_LOCAL_WRITE, &op);
      op.rkey = rkey;
    }
    op.remote = r->remote_addr + off;
    op.req_id = r->id;
    queue(op);
  }
  if (r->segmented && to < n) r->unread.emplace_back(to, to - from);
  end_read_if_done(r);
  pump();
}

void Endpoint::end_read_if_done(Request* r) {
  const size_t n = std::min(r->sent_len, r->len);
  if (r->done || r->in_flight > 0 || (r->keyed < n && !r->key_refused)) return;
  SendOp fin;
  fin.hdr.type = static_cast<uint8_t>(MsgType::kFin);
  fin.hdr.cookie = r->cookie;
  queue(fin);
  if (r->keyed < n) {
    IB_ERROR(ctx().log(),
             "%s: the sender of a %zu-byte message could not register it beyond "
             "its first %zu bytes (see its log); the receive fails",
             dev_.name().c_str(), r->sent_len, r->keyed);
    finish(r, HMC_PLUGIN_ERR_REMOTE, 0);
    return;
  }
  finish(r, r->sent_len > r->len ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS, r->sent_len);
}

void Endpoint::on_rndv_key(const MsgHeader& h, const std::vector<uint32_t>& rail_keys) {
  auto rit = rndv_recvs_.find(h.cookie);
  if (rit != rndv_recvs_.end()) {
    Request* r = rit->second;
    if (r->key_refused || h.addr != r->keyed || h.len > r->sent_len - r->keyed) {
      lose("a rendezvous key out of step");
      return;
    }
    if (h.len == 0) {
      r->key_refused = true;
      end_read_if_done(r);
    } else {
      add_keys(r, h.len, h.rkey, rail_keys);
    }
    return;
  }
  auto uit = rndv_unexpected_.find(h.cookie);
  if (uit != rndv_unexpected_.end()) {
    Unexpected* u = uit->second;
    const bool refused = !u->keys.empty() && u->keys.back().first.len == 0;
    if (refused || h.addr != u->keyed || h.len > u->hdr.len - u->keyed) {
      lose("a rendezvous key out of step");
      return;
    }
    u->keys.emplace_back(h, rail_keys);
    u->keyed += h.len;
  }
  // Otherwise the receive has ended: it read all it wanted (a shorter buffer), or failed.
}

void Endpoint::note_read(Request* r, const SendOp& op) {
  const size_t off = op.remote - r->remote_addr;
  for (auto& seg : r->unread) {
    if (off < seg.first) {
      seg.second -= op.len;
      break;
    }
  }
  // Each segment read (in order: the sender releases from the front) lets the sender release it
  // and register one more.
  while (!r->unread.empty() && r->unread.front().second == 0) {
    SendOp ack;
    ack.hdr.type = static_cast<uint8_t>(MsgType::kRndvAck);
    ack.hdr.cookie = r->cookie;
    ack.hdr.addr = r->unread.front().first;
    queue(ack);
    r->unread.pop_front();
  }
}

size_t Endpoint::least_given(const std::vector<uint64_t>& given) const {
  // given[i] / weight[i], compared without division.
  const uint64_t own = port_weight(dev_);
  size_t best = 0;
  for (size_t i = 1; i <= rails_.size(); ++i) {
    const uint64_t wi = rails_[i - 1].weight;
    const uint64_t wb = best == 0 ? own : rails_[best - 1].weight;
    if (given[i] * wb < given[best] * wi) best = i;
  }
  return best;
}

size_t Endpoint::rndv_segment() const {
  return std::max(kRndvSegment, dev_.chunk());
}

void Endpoint::announce_segments() {
  auto stale = [&](uint64_t id) {
    auto it = reqs_.find(id);
    const Request* r = it != reqs_.end() ? it->second.get() : nullptr;
    return r == nullptr || r->done || !r->awaiting_fin || r->key_refused || r->keyed == r->len;
  };
  keying_.erase(std::remove_if(keying_.begin(), keying_.end(), stale), keying_.end());
  const size_t seg = rndv_segment();
  for (uint64_t id : keying_) {
    Request* r = reqs_[id].get();
    if (r->wait_ack || r->keyed - r->acked >= kRndvWindow * seg) continue;
    const size_t n = std::min(seg, r->len - r->keyed);
    std::string why;
    Registration* reg = ctx().mr_cache().acquire(dev_, static_cast<uint8_t*>(r->buf) + r->keyed, n,
                                                 IBV_ACCESS_REMOTE_READ, &why);
    SendOp k;
    k.hdr.type = static_cast<uint8_t>(MsgType::kRndvKey);
    k.hdr.cookie = r->id;
    k.hdr.addr = r->keyed;
    k.req_id = r->id;
    if (reg == nullptr) {
      if (!r->seg_regs.empty()) {
        // The reader still reads segments we hold: once it acknowledges some they are released
        // (unused cached ones are dropped on a refusal), then this one is tried again.
        IB_DEBUG(ctx().log(), "%s: %s; retried once the reader has read more", dev_.name().c_str(),
                 why.c_str());
        r->wait_ack = true;
        return;
      }
      IB_ERROR(ctx().log(),
               "%s: a message of %zu bytes: %s; the receiver gets its first %zu "
               "bytes only, and the send fails",
               dev_.name().c_str(), r->len, why.c_str(), r->keyed);
      r->key_refused = true;  // k.hdr.len 0: no more keys
    } else {
      k.hdr.len = n;
      k.hdr.rkey = reg->mr->rkey;
      r->seg_regs.emplace_back(r->keyed + n, reg);
      add_rail_keys(r, static_cast<uint8_t*>(r->buf) + r->keyed, n, r->keyed + n, &k);
      r->keyed += n;
    }
    queue(k);
    return;
  }
}

void Endpoint::on_rndv_ack(const MsgHeader& h) {
  auto it = reqs_.find(h.cookie);
  Request* r = it != reqs_.end() ? it->second.get() : nullptr;
  if (r == nullptr || r->done || !r->awaiting_fin) return;  // ended by other means
  if (r->kind != ReqKind::kSend || !r->segmented || h.addr < r->acked || h.addr > r->keyed) {
    lose("a rendezvous acknowledgement out of step");
    return;
  }
  r->acked = h.addr;
  while (!r->seg_regs.empty() && r->seg_regs.front().first <= r->acked) {
    ctx().mr_cache().release(r->seg_regs.front().second);
    r->seg_regs.pop_front();
  }
  r->wait_ack = false;
  announce_segments();
}

void Endpoint::add_rail_keys(Request* r, void* addr, size_t len, size_t end, SendOp* op) {
  if (!rails_up_ || rails_.empty() || len < 2 * dev_.chunk()) return;
  const size_t held = r->seg_regs.size();
  for (size_t i = 0; i < rails_.size(); ++i) {
    std::string why;
    Registration* reg =
        ctx().mr_cache().acquire(*rails_[i].dev, addr, len, IBV_ACCESS_REMOTE_READ, &why);
    if (reg == nullptr) {
      IB_DEBUG(ctx().log(), "%s: rail %s: %s; this part of the message is read on the port",
               dev_.name().c_str(), rails_[i].dev->name().c_str(), why.c_str());
      while (r->seg_regs.size() > held) {
        ctx().mr_cache().release(r->seg_regs.back().second);
        r->seg_regs.pop_back();
      }
      op->nrail_keys = 0;
      return;
    }
    r->seg_regs.emplace_back(end, reg);
    op->rail_keys[i] = reg->mr->rkey;
  }
  op->nrail_keys = static_cast<uint8_t>(rails_.size());
}

void Endpoint::end_send(Request* r) {
  if (r->key_refused)
    finish(r, HMC_PLUGIN_ERR_NO_MEMORY, 0);
  else
    finish(r, HMC_PLUGIN_SUCCESS, r->len);
}

}  // namespace hmc::ibverbs
