// Device: requests and their posting (tagged messages, RMA reads and writes, in parts and
// pieces), the backlog of posts the provider refused for now, cancel and orphans.
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <vector>

#include "context.h"
#include "device.h"
#include "device_parts.h"
#include "endpoint.h"
#include "wire.h"

namespace hmc::ofi {

Request* Device::new_request(ReqKind kind) {
  auto* r = new Request;
  r->kind = kind;
  r->op.owner = r;
  r->aux.owner = r;
  live_.insert(r);
  return r;
}

void Device::release(Request* r) {
  if (r->cached != nullptr) cache_->release(r->cached);
  if (r->own_mr != nullptr) fi_close(&r->own_mr->fid);
  if (r->bounce.data != nullptr) bounce_put(r->bounce);
  live_.erase(r);
  delete r;
}

uint64_t Device::next_cookie() {
  return ++cookie_ & kCtrlIdMask;
}

int Device::parts(const Request* r) const {
  if (r->kind == ReqKind::kPut) return r->trailing_read && last_piece(r) ? 2 : 1;
  if (r->kind == ReqKind::kSend && !r->native && r->phase == Phase::kSendWrite)
    return last_piece(r) ? 2 : 1;  // a piece of the data; the FIN behind the last one
  if (r->kind == ReqKind::kSend && !r->native && r->phase != Phase::kEager) return 2;
  return 1;
}

size_t Device::write_piece(const Request* r) const {
  if (r->kind == ReqKind::kPut)
    return std::min(put_pieces_ ? write_chunk_ : SIZE_MAX, r->len - r->read_off);
  return std::min(write_chunk_, r->xfer - r->read_off);
}

bool Device::last_piece(const Request* r) const {
  return r->read_off + write_piece(r) >= (r->kind == ReqKind::kPut ? r->len : r->xfer);
}

bool Device::last_piece_done(const Request* r) const {
  const bool pieces = r->kind == ReqKind::kPut ||
                      (r->kind == ReqKind::kSend && !r->native && r->phase == Phase::kSendWrite);
  return !pieces || last_piece(r);
}

ssize_t Device::post_part(Request* r, int part) {
  fid_ep* ep = ep_.get();
  switch (r->kind) {
    case ReqKind::kSend:
      if (r->native) return fi_tsend(ep, r->buf, r->len, r->desc, r->addr, r->tag, &r->op);
      switch (r->phase) {
        case Phase::kEager:
          return fi_tsend(ep, r->bounce.data, r->bounce_len, r->bounce.desc, r->addr, r->tag,
                          &r->op);
        case Phase::kSendRead:
        case Phase::kSendWaitCts:
          // The answer's receive goes first, so it is never unexpected.
          if (part == 0)
            return fi_trecv(
                ep, r->bounce.data + kAnswerOffset,
                r->phase == Phase::kSendRead ? kFinSize : kCtsSize, r->bounce.desc,
                directed() ? r->addr : FI_ADDR_UNSPEC,
                ctrl_tag(r->phase == Phase::kSendRead ? CtrlType::kFin : CtrlType::kCts, r->cookie),
                0, &r->aux);
          return fi_tsend(ep, r->bounce.data, r->bounce_len, r->bounce.desc, r->addr, r->tag,
                          &r->op);
        default:  // Phase::kSendWrite: a piece of the data; after the last, the FIN (ordered
                  // after the writes, FI_ORDER_SAW)
          if (part == 0)
            return fi_write(ep, static_cast<uint8_t*>(r->buf) + r->read_off, write_piece(r),
                            r->desc, r->addr, r->remote_addr + r->read_off, r->key, &r->op);
          return fi_tsend(ep, r->bounce.data + kFinOutOffset, kFinSize, r->bounce.desc, r->addr,
                          ctrl_tag(CtrlType::kFin, r->cookie), &r->aux);
      }
    case ReqKind::kCtrlSend:
      return fi_tsend(ep, r->bounce.data, r->bounce_len, r->bounce.desc, r->addr, r->tag, &r->op);
    case ReqKind::kRecv:
      if (r->native) return fi_trecv(ep, r->buf, r->len, r->desc, r->addr, r->tag, 0, &r->op);
      if (r->phase == Phase::kMatch)
        return fi_trecv(ep, r->bounce.data, r->bounce_len, r->bounce.desc, r->addr, r->tag, 0,
                        &r->op);
      if (r->phase == Phase::kRecvRead)
        return fi_read(ep, static_cast<uint8_t*>(r->buf) + r->read_off,
                       std::min(kReadChunk, r->xfer - r->read_off), r->desc, r->addr,
                       r->remote_addr + r->read_off, r->key, &r->aux);
      return fi_trecv(ep, r->bounce.data + kAnswerOffset, kFinSize, r->bounce.desc,
                      directed() ? r->addr : FI_ADDR_UNSPEC, ctrl_tag(CtrlType::kFin, r->cookie), 0,
                      &r->aux);
    case ReqKind::kHelloRecv:
    case ReqKind::kAckRecv:
      return fi_trecv(ep, r->bounce.data, r->bounce_len, r->bounce.desc, r->addr, r->tag, 0,
                      &r->op);
    case ReqKind::kPut: {
      if (part == 0) {
        const size_t piece = write_piece(r);
        iovec iov{static_cast<uint8_t*>(r->buf) + r->read_off, piece};
        fi_rma_iov rma{r->remote_addr + r->read_off, piece, r->key};
        fi_msg_rma msg{};
        msg.msg_iov = &iov;
        msg.desc = &r->desc;
        msg.iov_count = 1;
        msg.addr = r->addr;
        msg.rma_iov = &rma;
        msg.rma_iov_count = 1;
        msg.context = &r->op;
        // Completion must mean "in place at the target" (net.h). Without delivery completion,
        // an ordered read of the last byte follows: reads after writes are processed in order
        // (FI_ORDER_RAW), so its completion implies the write's. A put in pieces asks it of the
        // last piece only (put_pieces_: writes applied in order).
        const bool deliver = !r->trailing_read && last_piece(r);
        return fi_writemsg(ep, &msg, FI_COMPLETION | (deliver ? FI_DELIVERY_COMPLETE : 0));
      }
      void* desc = scratch_desc();
      iovec iov{scratch_, 1};
      fi_rma_iov rma{r->remote_addr + r->len - 1, 1, r->key};
      fi_msg_rma msg{};
      msg.msg_iov = &iov;
      msg.desc = &desc;
      msg.iov_count = 1;
      msg.addr = r->addr;
      msg.rma_iov = &rma;
      msg.rma_iov_count = 1;
      msg.context = &r->aux;
      return fi_readmsg(ep, &msg, FI_COMPLETION);
    }
    case ReqKind::kGet:
      return fi_read(ep, r->buf, r->len, r->desc, r->addr, r->remote_addr, r->key, &r->op);
    case ReqKind::kProbe:
      return fi_read(ep, scratch_, 8, scratch_desc(), r->addr, r->remote_addr, r->key, &r->op);
  }
  return -FI_EINVAL;
}

ssize_t Device::post(Request* r) {
  while (r->posted_parts < parts(r)) {
    ssize_t rc = post_part(r, r->posted_parts);
    if (rc != 0) return rc;
    ++r->posted_parts;
    ++r->in_provider;
    ++in_provider_total_;
  }
  return 0;
}

bool Device::retry_later(ssize_t rc) {
  if (rc == -FI_EAGAIN) return true;
  if (rc != -FI_ENOMEM || in_provider_total_ == 0) return false;
  if (!full_logged_) {
    full_logged_ = true;
    log().write(HMC_LOG_INFO,
                "%s: the provider's queue is full (%zu operations in it): further posts wait in "
                "the plugin until completions make room",
                name().c_str(), in_provider_total_);
  }
  return true;
}

bool Device::receiving_part(const Request* r, int part) {
  switch (r->kind) {
    case ReqKind::kSend:
      return !r->native && part == 0 &&
             (r->phase == Phase::kSendRead || r->phase == Phase::kSendWaitCts);
    case ReqKind::kRecv: return r->native || r->phase != Phase::kRecvRead;
    case ReqKind::kHelloRecv:
    case ReqKind::kAckRecv: return true;
    default: return false;
  }
}

bool Device::queues_as_receive(const Request* r) {
  switch (r->kind) {
    case ReqKind::kRecv: return r->native || r->phase != Phase::kRecvRead;
    case ReqKind::kHelloRecv:
    case ReqKind::kAckRecv: return true;
    default: return false;
  }
}

hmc_plugin_status_t Device::submit(Request* r) {
  r->posted_parts = 0;
  r->in_provider = 0;
  r->first_error = 0;
  ssize_t rc = -FI_EAGAIN;
  std::deque<Request*>& q = queue_of(r);
  // Queued posts go first: same-tag messages must leave (and receives match) in post order.
  if (q.empty()) {
    rc = post(r);
    if (retry_later(rc) && !in_completion_) {
      drain_cq();
      rc = post(r);
    }
  }
  if (rc == 0) return HMC_PLUGIN_SUCCESS;
  if (retry_later(rc)) {
    if (r->ep != nullptr) {
      if (!r->ep->has_queued()) queued_eps_.push_back(r->ep);
      // A send refused (not its answer's receive) towards the peer: the peer may be gone.
      if (&q == &r->ep->tx_queue() && q.empty() && rc == -FI_EAGAIN &&
          !receiving_part(r, r->posted_parts) && r->ep->stall_since_ns == 0)
        r->ep->stall_since_ns = ctx_.now_ns();
    }
    r->queued = true;
    q.push_back(r);
    ++queued_;
    return HMC_PLUGIN_SUCCESS;
  }
  if (r->in_provider > 0) {
    // A part went out but the next cannot be posted: the request ends with the error once
    // the posted part completes.
    r->first_error = static_cast<int>(-rc);
    r->posted_parts = parts(r);
    return HMC_PLUGIN_SUCCESS;
  }
  if (peer_error(static_cast<int>(-rc))) return HMC_PLUGIN_ERR_PEER_LOST;
  log().write(HMC_LOG_ERROR, "%s: posting an operation failed: %s", name().c_str(), fi_err(rc));
  return rc == -FI_ENOMEM ? HMC_PLUGIN_ERR_NO_MEMORY : HMC_PLUGIN_ERR_INTERNAL;
}

void Device::defer(Request* r) {
  r->posted_parts = 0;
  r->in_provider = 0;
  r->first_error = 0;
  std::deque<Request*>& q = queue_of(r);
  if (r->ep != nullptr && !r->ep->has_queued()) queued_eps_.push_back(r->ep);
  r->queued = true;
  q.push_back(r);
  ++queued_;
}

std::deque<Request*>& Device::queue_of(Request* r) {
  if (r->ep == nullptr) return dev_queue_;
  return queues_as_receive(r) ? r->ep->rx_queue() : r->ep->tx_queue();
}

void Device::post_backlog() {
  const bool outer = !in_completion_;
  in_completion_ = true;
  // Posts from one queue until the provider refuses; the last refusal, 0 when the queue
  // emptied. A refused request stays at the head, its posted parts counted.
  auto drain = [&](std::deque<Request*>& q, bool* moved) -> ssize_t {
    while (!q.empty()) {
      Request* r = q.front();
      const int before = r->posted_parts;
      ssize_t rc = post(r);
      if (r->posted_parts != before) *moved = true;
      if (retry_later(rc)) return rc;
      q.pop_front();
      --queued_;
      r->queued = false;
      if (rc != 0)
        fail_queued(r, rc);
      else if (r->in_provider == 0)
        finish(r, r->first_error);  // its posted parts already ended
    }
    return 0;
  };
  bool moved = false;
  drain(dev_queue_, &moved);
  for (Endpoint* ep : std::vector<Endpoint*>(queued_eps_.begin(), queued_eps_.end())) {
    if (std::find(queued_eps_.begin(), queued_eps_.end(), ep) == queued_eps_.end()) continue;
    drain(ep->rx_queue(), &moved);
    moved = false;
    ssize_t rc = drain(ep->tx_queue(), &moved);
    const std::deque<Request*>& tx = ep->tx_queue();
    // The peer is suspect only while the send queue's head is refused with -FI_EAGAIN and
    // nothing of it went out; a head waiting for room for its answer's receive is not.
    if (rc == -FI_EAGAIN && !moved && !receiving_part(tx.front(), tx.front()->posted_parts)) {
      if (ep->stall_since_ns == 0) ep->stall_since_ns = ctx_.now_ns();
    } else {
      ep->stall_since_ns = 0;
    }
    if (!ep->has_queued()) forget_queue(ep);
  }
  if (outer) in_completion_ = false;
}

void Device::forget_queue(Endpoint* ep) {
  auto it = std::find(queued_eps_.begin(), queued_eps_.end(), ep);
  if (it != queued_eps_.end()) queued_eps_.erase(it);
  ep->stall_since_ns = 0;
}

void Device::fail_queued(Request* r, ssize_t rc) {
  const int err = static_cast<int>(-rc);
  if (r->first_error == 0) r->first_error = err;
  r->posted_parts = parts(r);
  if (r->in_provider > 0) return;  // the posted part ends it
  OFI_DEBUG(log(), "%s: a queued operation could not be posted: %s", name().c_str(), fi_err(rc));
  finish(r, r->first_error);
}

void Device::unqueue(Request* r) {
  if (!r->queued) return;
  std::deque<Request*>& q = queue_of(r);
  auto it = std::find(q.begin(), q.end(), r);
  if (it != q.end()) {
    q.erase(it);
    --queued_;
  }
  r->queued = false;
  if (r->ep != nullptr && !r->ep->has_queued()) forget_queue(r->ep);
}

bool Device::cancel_posted(Request* r) {
  if (r->in_provider == 0) return false;
  OpCtx* target = nullptr;
  switch (r->kind) {
    case ReqKind::kRecv:
      if (r->phase == Phase::kMatch)
        target = &r->op;
      else if (r->phase == Phase::kRecvWaitFin)
        target = &r->aux;
      break;
    case ReqKind::kSend:
      if (r->phase == Phase::kSendRead || r->phase == Phase::kSendWaitCts) target = &r->aux;
      break;
    case ReqKind::kHelloRecv:
    case ReqKind::kAckRecv: target = &r->op; break;
    default: break;
  }
  return target != nullptr && fi_cancel(&ep_->fid, target) == 0;
}

void Device::adopt_orphan(Request* r) {
  if (r->queued) unqueue(r);  // while r->ep still names its queue
  r->ep = nullptr;
  r->listener = nullptr;
  if (r->orphan) return;
  if (r->in_provider == 0) {
    release(r);
    return;
  }
  r->orphan = true;
  ++orphans_;
}
}  // namespace hmc::ofi
