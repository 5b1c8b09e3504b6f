// Endpoint: one-sided operations (put and get, single and vectored, striped on rails) and
// the notifications of puts.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "context.h"
#include "endpoint.h"
#include "endpoint_parts.h"
#include "region.h"

namespace hmc::ibverbs {

// ---- one-sided ------------------------------------------------------------------------------

bool Endpoint::queue_rma(Request* r, bool put, uint8_t* buf, size_t len, const MemRegion* mr,
                         uint64_t remote, const PackedKey& key, bool chain) {
  const size_t chunk = dev_.chunk();
  // Striped where rails are up, the owner registered the region on as many, and there are
  // pieces enough: each piece goes to the port with the least assigned relative to its speed.
  // Device memory is registered on the port only (a rail could reach it only by pointer).
  const bool striped = rails_up_ && key.rail_rkeys.size() >= rails_.size() && len >= 2 * chunk &&
                       (mr == nullptr || !mr->device);
  std::vector<uint64_t> assigned(striped ? rails_.size() + 1 : 0, 0);
  for (size_t off = 0; off < len; off += chunk) {
    SendOp op;
    op.kind = put ? WrKind::kPut : WrKind::kGet;
    op.rma_qp = true;
    const size_t n = std::min(chunk, len - off);
    int rail = -1;
    if (striped) {
      const size_t best = least_given(assigned);
      assigned[best] += n;
      rail = static_cast<int>(best) - 1;
    }
    op.rail = rail;
    if (rail >= 0) {
      const size_t i = static_cast<size_t>(rail);
      op.local = reinterpret_cast<uintptr_t>(buf + off);
      op.len = static_cast<uint32_t>(n);
      if (mr != nullptr && mr->dev == &dev_ && i < mr->rail_mrs.size() &&
          mr->covers(buf + off, n)) {
        op.lkey = mr->rail_mrs[i]->lkey;
        op.reg_access = -1;
      } else {
        op.reg_access = put ? 0 : IBV_ACCESS_LOCAL_WRITE;
      }
      op.rkey = key.rail_rkeys[i];
    } else {
      local_key(buf + off, n, mr, put ? 0 : IBV_ACCESS_LOCAL_WRITE, &op);
      op.rkey = key.rkey;
      op.chain = chain;
    }
    op.remote = remote + off;
    op.req_id = r->id;
    queue(op);
  }
  return striped;
}

hmc_plugin_status_t Endpoint::post_rma(bool put, void* buf, size_t len, const MemRegion* mr,
                                       uint64_t remote, const PackedKey& key,
                                       const uint64_t* notify, Request** out) {
  if (stage_ == Stage::kLost) return HMC_PLUGIN_ERR_PEER_LOST;
  if (stage_ != Stage::kReady) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  Request* r = new_request(put ? ReqKind::kPut : ReqKind::kGet);
  r->buf = buf;
  r->len = len;
  const bool striped = queue_rma(r, put, static_cast<uint8_t*>(buf), len, mr, remote, key, false);
  if (notify != nullptr) {
    if (striped) {
      // The pieces travel on several queue pairs: the notification waits for all of them.
      r->notify_after = true;
      r->notify_value = *notify;
    } else {
      SendOp op;
      op.rma_qp = true;
      op.hdr.type = static_cast<uint8_t>(MsgType::kNotify);
      op.hdr.len = *notify;
      op.req_id = r->id;
      queue(op);
    }
  }
  if (r->in_flight == 0) finish(r, HMC_PLUGIN_SUCCESS, 0);
  pump();
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::post_rma_v(bool put, const std::vector<RmaPiece>& pieces,
                                         const PackedKey& key, Request** out) {
  if (stage_ == Stage::kLost) return HMC_PLUGIN_ERR_PEER_LOST;
  if (stage_ != Stage::kReady) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  Request* r = new_request(put ? ReqKind::kPut : ReqKind::kGet);
  for (const RmaPiece& p : pieces) {
    r->len += p.len;
    queue_rma(r, put, static_cast<uint8_t*>(p.buf), p.len, p.mr, p.remote, key, true);
  }
  if (r->in_flight == 0) finish(r, HMC_PLUGIN_SUCCESS, 0);
  pump();
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

bool Endpoint::pump_chained() {
  std::deque<SendOp>& q = backlog_[1];
  SendOp batch[kMaxChain];
  while (!q.empty() && q.front().chain && !q.front().bounce && dev_.can_post()) {
    // A chain holds at most one piece's worth of bytes, so its one completion comes as soon as
    // an unchained piece's would: the stall rule's clock keeps its meaning.
    size_t n = 0, bytes = 0;
    while (n < kMaxChain && n < q.size() &&
           in_flight_[1] + static_cast<int>(n) < kMaxRdmaInFlight &&
           dev_.sends_in_flight() + n < dev_.send_budget()) {
      const SendOp& op = q[n];
      if (!op.chain || op.bounce || (n > 0 && bytes + op.len > dev_.chunk())) break;
      bytes += op.len;
      batch[n++] = op;
    }
    if (n == 0) break;
    size_t went = 0;
    std::string why;
    const PostResult pr = dev_.post_chain(this, rma_qp_, batch, n, &went, &why);
    for (size_t i = 0; i < went; ++i) {
      q.pop_front();
      posted(1);
    }
    if (pr == PostResult::kQueueError) {
      lose(why);
      return false;
    }
    if (pr == PostResult::kRegError) {
      stage_through_bounce(q, why);  // the front piece; its bounce pieces go unchained
      continue;
    }
    if (went < n) break;  // a piece further on could not be registered: it goes next time
  }
  return true;
}

hmc_plugin_status_t Endpoint::notify_poll(uint64_t* value) {
  if (notifications_.empty()) {
    ctx().progress();
    if (notifications_.empty())
      return stage_ == Stage::kLost ? HMC_PLUGIN_ERR_PEER_LOST : HMC_PLUGIN_IN_PROGRESS;
  }
  *value = notifications_.front();
  notifications_.pop_front();
  return HMC_PLUGIN_SUCCESS;
}

}  // namespace hmc::ibverbs
