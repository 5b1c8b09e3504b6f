// Device: progress and completions (reading the completion queue, ending each request by its
// kind and phase: rendezvous answers, received messages, the pieces of a write).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "device.h"
#include "device_parts.h"
#include "endpoint.h"
#include "listener.h"
#include "wire.h"

namespace hmc::ofi {
namespace {

// Completion-queue entries read per fi_cq_read, and reads per progress call: progress does
// bounded work and returns, the core calls it again.
constexpr size_t kCqBatch = 32;
constexpr int kCqRounds = 16;

// Errors with which a target refuses one-sided access.
bool access_error(int err) {
  switch (err) {
    case FI_EACCES:
    case FI_EPERM:
    case FI_EINVAL:
    case FI_EFAULT:
    case FI_ENOKEY:
    case FI_EOPBADSTATE:
    case EKEYREJECTED: return true;
    default: return false;
  }
}

}  // namespace

void Device::progress() {
  drain_cq();
  if (queued_ > 0) post_backlog();
  if (av_purge_pending_ && orphans_ == 0) purge_av();
}

bool Device::trywait() {
  if (queued_ > 0) return false;
  fid* f = &cq_->fid;
  return fi_trywait(fabric_.get(), &f, 1) == 0;
}

void Device::drain_cq() {
  // Handlers may post (a rendezvous read, a FIN); those posts queue on -FI_EAGAIN instead of
  // reading the CQ again from inside a handler.
  const bool outer = !in_completion_;
  in_completion_ = true;
  for (int round = 0; round < kCqRounds; ++round) {
    fi_cq_tagged_entry ents[kCqBatch];
    ssize_t n = fi_cq_read(cq_.get(), ents, kCqBatch);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) on_completion(ents[i].op_context, 0, ents[i].len, nullptr);
      continue;
    }
    if (n == -FI_EAGAIN) break;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry e{};
      if (fi_cq_readerr(cq_.get(), &e, 0) != 1) break;
      // Some providers report the error number negated (shm's truncation).
      int err = e.err < 0 ? -e.err : e.err;
      if (err == 0) err = FI_EOTHER;
      if (log().enabled(HMC_LOG_DEBUG)) {
        char detail[256] = "";
        const char* s = fi_cq_strerror(cq_.get(), e.prov_errno, e.err_data, detail, sizeof(detail));
        log().write(HMC_LOG_DEBUG, "%s: completion error %d (%s), provider: %s", name().c_str(),
                    err, fi_err(err), s ? s : "");
      }
      on_completion(e.op_context, err, e.len, &e);
      continue;
    }
    if (!cq_error_logged_) {
      cq_error_logged_ = true;
      log().write(HMC_LOG_ERROR, "%s: fi_cq_read failed: %s", name().c_str(), fi_err(n));
    }
    break;
  }
  if (outer) in_completion_ = false;
}

void Device::on_completion(void* op_context, int err, size_t len, const fi_cq_err_entry* e) {
  if (op_context == nullptr) {
    OFI_DEBUG(log(), "%s: completion without an operation context (error %d) ignored",
              name().c_str(), err);
    return;
  }
  auto* op = static_cast<OpCtx*>(op_context);
  Request* r = op->owner;
  if (r->in_provider > 0) --r->in_provider;
  if (in_provider_total_ > 0) --in_provider_total_;
  if (err != 0 && r->first_error == 0) r->first_error = err;
  // Which part received something: a receive's main op, or the aux op waiting for a CTS/FIN.
  const bool receive_part =
      (op == &r->op &&
       (r->kind == ReqKind::kRecv || r->kind == ReqKind::kHelloRecv ||
        r->kind == ReqKind::kAckRecv) &&
       r->phase == Phase::kMatch) ||
      (op == &r->aux && r->kind == ReqKind::kSend &&
       (r->phase == Phase::kSendRead || r->phase == Phase::kSendWaitCts)) ||
      (op == &r->aux && r->kind == ReqKind::kRecv && r->phase == Phase::kRecvWaitFin);
  if (receive_part) r->rx_len = err == 0 ? len : (e != nullptr ? e->len : 0);
  // A request waits for all its parts (posted, or still queued).
  if (r->in_provider > 0 || r->queued) return;
  finish(r, r->first_error);
}

hmc_plugin_status_t Device::status_of(const Request* r, int err) const {
  if (err == 0) return HMC_PLUGIN_SUCCESS;
  const bool rma = r->kind == ReqKind::kPut || r->kind == ReqKind::kGet;
  if (err == FI_ETRUNC)
    return r->kind == ReqKind::kRecv ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_ERR_INTERNAL;
  if (err == FI_ECANCELED) {
    if (r->cancel_requested) return HMC_PLUGIN_ERR_CANCELLED;
    // tcp answers a refused RMA so (then drops the link); otherwise the provider gave up on
    // the peer, or our lose() cancelled it.
    if (rma && r->ep != nullptr && !r->ep->lost()) return HMC_PLUGIN_ERR_REMOTE;
    return HMC_PLUGIN_ERR_PEER_LOST;
  }
  if (peer_error(err)) return HMC_PLUGIN_ERR_PEER_LOST;
  if (rma && access_error(err)) return HMC_PLUGIN_ERR_REMOTE;
  log().write(HMC_LOG_ERROR, "%s: operation failed: %s (error %d)", name().c_str(), fi_err(err),
              err);
  return HMC_PLUGIN_ERR_INTERNAL;
}

void Device::finish(Request* r, int err) {
  if (r->orphan) {
    --orphans_;
    release(r);
    return;
  }
  switch (r->kind) {
    case ReqKind::kCtrlSend:
      if (r->ep != nullptr)
        r->ep->on_ctrl_sent(r, err);  // releases r
      else
        release(r);
      return;
    case ReqKind::kHelloRecv:
      if (r->listener != nullptr)
        r->listener->on_hello(r, err);  // releases or reposts r
      else
        release(r);
      return;
    case ReqKind::kAckRecv:
      if (r->ep != nullptr)
        r->ep->on_ack(r, err);  // releases r
      else
        release(r);
      return;
    case ReqKind::kProbe:
      if (r->ep != nullptr)
        r->ep->on_probe(r, err);  // releases r
      else
        release(r);
      return;
    case ReqKind::kRecv:
      if (!r->native) {
        finish_recv(r, err);
        return;
      }
      break;
    case ReqKind::kSend:
      if (!r->native && err == 0 && r->phase == Phase::kSendWaitCts) {
        // The receiver answered the RTS: write what it accepts, FIN behind it.
        Cts cts;
        if (!decode_cts(r->bounce.data + kAnswerOffset, r->rx_len, &cts) ||
            cts.cookie != r->cookie) {
          log().write(HMC_LOG_ERROR, "%s: malformed rendezvous answer (CTS) from the peer",
                      name().c_str());
          err = FI_EOTHER;
          break;
        }
        if (cts.status != 0 || cts.len == 0) break;  // refused (REMOTE) or nothing to move
        r->xfer = static_cast<size_t>(std::min<uint64_t>(cts.len, r->len));
        r->remote_addr = cts.raddr;
        r->key = cts.key;
        r->read_off = 0;
        encode_fin(r->bounce.data + kFinOutOffset, r->cookie, 0);
        r->phase = Phase::kSendWrite;
        hmc_plugin_status_t st = local_desc(r->buf, r->xfer, r->desc, r);
        if (st == HMC_PLUGIN_SUCCESS) st = submit(r);
        if (st == HMC_PLUGIN_SUCCESS) return;
        err = FI_EOTHER;
      }
      break;
    default: break;
  }
  if (err == 0 && !last_piece_done(r)) {
    // A piece of the data is out: the next one follows (the last with the rendezvous' FIN,
    // or the put's delivery completion or trailing read).
    r->read_off += write_piece(r);
    defer(r);
    return;
  }
  r->result = status_of(r, err);
  if (r->result == HMC_PLUGIN_SUCCESS && r->kind == ReqKind::kSend && !r->native) {
    if (r->phase == Phase::kSendRead) {
      // The reader's FIN: it read the data (or could not).
      uint64_t cookie = 0;
      uint8_t status = 1;
      if (!decode_fin(r->bounce.data + kAnswerOffset, r->rx_len, &cookie, &status) ||
          cookie != r->cookie) {
        log().write(HMC_LOG_ERROR, "%s: malformed rendezvous answer (FIN) from the peer",
                    name().c_str());
        r->result = HMC_PLUGIN_ERR_INTERNAL;
      } else if (status != 0) {
        r->result = HMC_PLUGIN_ERR_REMOTE;
      }
    } else if (r->phase == Phase::kSendWaitCts) {
      Cts cts;
      decode_cts(r->bounce.data + kAnswerOffset, r->rx_len, &cts);
      if (cts.status != 0) r->result = HMC_PLUGIN_ERR_REMOTE;
    }
  }
  if (r->result == HMC_PLUGIN_SUCCESS)
    r->bytes = r->kind == ReqKind::kRecv ? std::min(r->rx_len, r->len) : r->len;
  else if (r->result == HMC_PLUGIN_ERR_TRUNCATED)
    r->bytes = r->len;
  else
    r->bytes = 0;
  // The buffer registered for the peer's access is closed as soon as the peer is done.
  if (r->own_mr != nullptr) {
    fi_close(&r->own_mr->fid);
    r->own_mr = nullptr;
  }
  r->done = true;
  if (r->ep != nullptr) r->ep->on_data_done(r, err);
}

void Device::finish_recv(Request* r, int err) {
  Endpoint* ep = r->ep;
  auto end = [&](hmc_plugin_status_t st, size_t bytes) {
    if (r->own_mr != nullptr) {
      fi_close(&r->own_mr->fid);
      r->own_mr = nullptr;
    }
    r->result = st;
    r->bytes = bytes;
    r->done = true;
    if (ep != nullptr) ep->on_data_done(r, err);
  };
  // A truncated receive reports the length that was sent (net.h); the buffer holds its start.
  auto moved = [&] {
    if (r->msg_len > r->xfer)
      end(HMC_PLUGIN_ERR_TRUNCATED, static_cast<size_t>(r->msg_len));
    else
      end(HMC_PLUGIN_SUCCESS, r->xfer);
  };
  if (r->phase == Phase::kRecvRead) {
    // A chunk was read: the next one waits for the next progress call (see kReadChunk).
    const size_t next = r->read_off + std::min(kReadChunk, r->xfer - r->read_off);
    if (err == 0 && next < r->xfer && ep != nullptr && !ep->lost()) {
      r->read_off = next;
      defer(r);
      return;
    }
    // The read ended: tell the sender, whose send completes on it.
    if (ep != nullptr) ep->send_fin(r->cookie, err == 0 ? 0 : 1);
    if (err != 0) {
      hmc_plugin_status_t st = status_of(r, err);
      end(st == HMC_PLUGIN_ERR_REMOTE ? HMC_PLUGIN_ERR_PEER_LOST : st, 0);
      return;
    }
    moved();
    return;
  }
  if (r->phase == Phase::kRecvWaitFin) {
    // The writer's FIN follows its data (FI_ORDER_SAW): the data is in place.
    uint64_t cookie = 0;
    uint8_t status = 1;
    if (err != 0) {
      end(status_of(r, err), 0);
    } else if (!decode_fin(r->bounce.data + kAnswerOffset, r->rx_len, &cookie, &status) ||
               cookie != r->cookie || status != 0) {
      log().write(HMC_LOG_ERROR, "%s: malformed rendezvous FIN from the peer", name().c_str());
      end(HMC_PLUGIN_ERR_INTERNAL, 0);
    } else {
      moved();
    }
    return;
  }
  if (err != 0) {
    end(status_of(r, err), 0);
    return;
  }
  MsgHeader h;
  if (!decode_msg(r->bounce.data, r->rx_len, &h)) {
    log().write(HMC_LOG_ERROR, "%s: a malformed message (%zu bytes) arrived on a data tag",
                name().c_str(), r->rx_len);
    end(HMC_PLUGIN_ERR_INTERNAL, 0);
    return;
  }
  if (ep != nullptr && h.slot != ep->my_slot()) {
    // Two connections' tags met in the provider's tag space (wire.h): the message is another
    // connection's, and is not delivered here.
    log().write(HMC_LOG_ERROR,
                "%s: a message for the connection of slot %u matched a receive of slot %d "
                "(their tags collide in the provider's tag space); the receive fails",
                name().c_str(), h.slot, ep->my_slot());
    end(HMC_PLUGIN_ERR_INTERNAL, 0);
    return;
  }
  if (h.type == MsgType::kEager) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(h.len, r->len));
    if (n > 0 && r->iface != HMC_MEM_IFACE_HOST) {
      // The plugin cannot copy into device memory; peers sending into device memory must
      // send everything by rendezvous (HMC_OFI_EAGER_LIMIT=0 on their side).
      log().write(HMC_LOG_ERROR,
                  "%s: a %llu-byte eager message arrived for a receive into device "
                  "memory (kind 0x%x); the sender must set HMC_OFI_EAGER_LIMIT=0",
                  name().c_str(), static_cast<unsigned long long>(h.len), r->iface);
      end(HMC_PLUGIN_ERR_NOT_SUPPORTED, 0);
      return;
    }
    if (n > 0) std::memcpy(r->buf, r->bounce.data + kMsgHeader, n);
    end(h.len > r->len ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS, static_cast<size_t>(h.len));
    return;
  }
  // RTS: the data moves straight into the user buffer, as much as fits.
  r->msg_len = h.len;
  r->cookie = h.cookie;
  r->xfer = static_cast<size_t>(std::min<uint64_t>(h.len, r->len));
  const bool write = h.type == MsgType::kRtsWrite;
  if (r->xfer == 0) {
    if (ep != nullptr) {
      if (write) {
        Cts none;
        none.cookie = h.cookie;
        ep->send_cts(none);
      } else {
        ep->send_fin(h.cookie, 0);
      }
    }
    moved();
    return;
  }
  hmc_plugin_status_t st = HMC_PLUGIN_SUCCESS;
  if (write) {
    // Expose exactly the accepted bytes for the writer, wait for its FIN, then answer.
    st = register_rndv(r, r->xfer, FI_RECV | FI_REMOTE_WRITE);
    if (st == HMC_PLUGIN_SUCCESS) {
      r->phase = Phase::kRecvWaitFin;
      st = submit(r);
    }
    Cts cts;
    cts.cookie = h.cookie;
    if (st == HMC_PLUGIN_SUCCESS) {
      cts.len = r->xfer;
      cts.raddr = r->remote_addr;
      cts.key = r->key;
    } else {
      cts.status = 1;
    }
    if (ep != nullptr) ep->send_cts(cts);
    if (st != HMC_PLUGIN_SUCCESS) end(st, 0);
    return;
  }
  if (r->desc == nullptr) st = local_desc(r->buf, r->xfer, nullptr, r);
  if (st == HMC_PLUGIN_SUCCESS) {
    r->phase = Phase::kRecvRead;
    r->read_off = 0;
    r->remote_addr = h.raddr;
    r->key = h.key;
    st = submit(r);
  }
  if (st != HMC_PLUGIN_SUCCESS) {
    if (ep != nullptr) ep->send_fin(h.cookie, 1);
    end(st, 0);
  }
}
}  // namespace hmc::ofi
