#include "endpoint.h"

#include <algorithm>
#include <cstring>

#include "context.h"
#include "region.h"
#include "util.h"

namespace hmc::ofi {
namespace {
// close(drain=true) waits at most this long for cancelled operations to come back.
constexpr uint64_t kDrainNs = 200ull * 1000 * 1000;
// A peer with operations waiting on it and no completion for this long gets a liveness read.
constexpr uint64_t kProbeIdleNs = 1000ull * 1000 * 1000;
}  // namespace

hmc_plugin_status_t Endpoint::dial(const ConnHandle& h) {
  const Log& log = dev_.log();
  std::string why;
  av_ = dev_.av_acquire(h.addr, &why);
  if (av_ == nullptr) {
    log.write(HMC_LOG_ERROR, "connect: the listener's address is not usable on %s: %s",
              dev_.name().c_str(), why.c_str());
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  my_slot_ = dev_.slot_acquire(av_);
  if (my_slot_ < 0) {
    log.write(HMC_LOG_ERROR,
              "connect: all %d receive slots towards this peer are in use on %s "
              "(close a connection first)",
              kDataSlots, dev_.name().c_str());
    return HMC_PLUGIN_ERR_NO_MEMORY;
  }
  nonce_ = random_u64() & kCtrlIdMask;
  listener_id_ = h.listener_id;
  deadline_ns_ = dev_.ctx().now_ns() + dev_.ctx().timeout_ns();
  state_ = State::kConnecting;

  // The ack's receive goes first, so the answer can never arrive unexpected.
  Request* ack = dev_.new_request(ReqKind::kAckRecv);
  ack->ep = this;
  ack->bounce = dev_.bounce_get();
  ack->bounce_len = kAckSize + 8;
  ack->addr = dev_.directed() ? av_->fi_addr : FI_ADDR_UNSPEC;
  ack->tag = ctrl_tag(CtrlType::kAck, nonce_);
  hmc_plugin_status_t st = submit(ack);
  if (st != HMC_PLUGIN_SUCCESS) return st;

  Hello hello;
  hello.listener_id = h.listener_id;
  hello.nonce = nonce_;
  hello.slot = static_cast<uint8_t>(my_slot_);
  hello.probe_addr = dev_.probe_addr();
  hello.probe_key = dev_.probe_key();
  hello.addr = dev_.address();
  st = send_ctrl(encode_hello(hello), ctrl_tag(CtrlType::kHello, h.listener_id));
  if (st != HMC_PLUGIN_SUCCESS) return st;
  OFI_DEBUG(log, "%s: connecting (listener %014llx, nonce %014llx, receive slot %d)",
            dev_.name().c_str(), static_cast<unsigned long long>(h.listener_id),
            static_cast<unsigned long long>(nonce_), my_slot_);
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::send_ctrl(const std::vector<uint8_t>& payload, uint64_t tag) {
  Request* r = dev_.new_request(ReqKind::kCtrlSend);
  r->ep = this;
  r->bounce = dev_.bounce_get();
  std::memcpy(r->bounce.data, payload.data(), payload.size());
  r->bounce_len = payload.size();
  r->addr = av_->fi_addr;
  r->tag = tag;
  return submit(r);
}

void Endpoint::send_cts(const Cts& cts) {
  if (lost_ || av_ == nullptr) return;
  std::vector<uint8_t> msg(kCtsSize);
  encode_cts(msg.data(), cts);
  if (send_ctrl(msg, ctrl_tag(CtrlType::kCts, cts.cookie)) != HMC_PLUGIN_SUCCESS)
    OFI_DEBUG(dev_.log(), "%s: the rendezvous answer could not be sent", dev_.name().c_str());
}

void Endpoint::send_fin(uint64_t cookie, uint8_t status) {
  if (lost_ || av_ == nullptr) return;
  std::vector<uint8_t> fin(kFinSize);
  encode_fin(fin.data(), cookie, status);
  if (send_ctrl(fin, ctrl_tag(CtrlType::kFin, cookie)) != HMC_PLUGIN_SUCCESS)
    OFI_DEBUG(dev_.log(), "%s: the rendezvous answer could not be sent", dev_.name().c_str());
}

hmc_plugin_status_t Endpoint::ready_status() {
  if (state_ == State::kConnecting) {
    dev_.progress();
    if (state_ == State::kConnecting && dev_.ctx().now_ns() > deadline_ns_)
      fail(HMC_PLUGIN_ERR_PEER_LOST, "the listener did not answer within " +
                                         std::to_string(dev_.ctx().timeout_ns() / 1000000) + " ms");
  }
  switch (state_) {
    case State::kReady: return HMC_PLUGIN_SUCCESS;
    case State::kConnecting: return HMC_PLUGIN_IN_PROGRESS;
    case State::kFailed: return fail_status_;
    case State::kIdle: break;
  }
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}

void Endpoint::fail(hmc_plugin_status_t st, const std::string& why) {
  if (state_ == State::kFailed) return;
  state_ = State::kFailed;
  fail_status_ = st;
  fail_reason_ = why;
  dev_.log().write(HMC_LOG_WARN, "%s: connection failed: %s", dev_.name().c_str(), why.c_str());
  for (Request* r : std::vector<Request*>(reqs_.begin(), reqs_.end()))
    if (r->kind == ReqKind::kAckRecv && !r->queued) dev_.cancel_posted(r);
}

hmc_plugin_status_t Endpoint::usable(const char* what) const {
  if (state_ == State::kFailed) return fail_status_;
  if (state_ != State::kReady) {
    dev_.log().write(HMC_LOG_ERROR, "%s: the endpoint is not established yet (wait for ep_ready)",
                     what);
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  if (lost_) return HMC_PLUGIN_ERR_PEER_LOST;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::usable_tagged(const char* what, uint64_t tag) const {
  hmc_plugin_status_t st = usable(what);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  if (tag >= kUserTagLimit) {
    dev_.log().write(HMC_LOG_ERROR,
                     "%s: tag 0x%llx is not below 2^63 (bit 63 marks the "
                     "plugin's own messages)",
                     what, static_cast<unsigned long long>(tag));
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::submit(Request* r) {
  reqs_.insert(r);
  hmc_plugin_status_t st = dev_.submit(r);
  if (st != HMC_PLUGIN_SUCCESS) {
    reqs_.erase(r);
    dev_.release(r);
    if (st == HMC_PLUGIN_ERR_PEER_LOST) lose("posting towards the peer failed");
    return st;
  }
  // Progress inside submit may have found the peer gone: a receive posted after that would
  // wait forever.
  if (lost_ && r->kind == ReqKind::kRecv && !r->done && !r->queued) dev_.cancel_posted(r);
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::post_prepared(Request* r, hmc_plugin_status_t st, Request** out) {
  if (st != HMC_PLUGIN_SUCCESS) {
    dev_.release(r);
    return st;
  }
  st = submit(r);
  if (st == HMC_PLUGIN_SUCCESS) *out = r;
  return st;
}

hmc_plugin_status_t Endpoint::post_send(const void* buf, size_t len, const LocalBuf& lb,
                                        uint64_t tag, Request** out) {
  hmc_plugin_status_t st = usable_tagged("isend", tag);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  Request* r = dev_.new_request(ReqKind::kSend);
  r->ep = this;
  r->buf = const_cast<void*>(buf);
  r->len = len;
  r->iface = lb.iface;
  r->ordinal = lb.ordinal;
  r->addr = av_->fi_addr;
  r->tag = data_tag(peer_slot_, tag);
  const bool host = lb.iface == HMC_MEM_IFACE_HOST;
  if (!dev_.protocol()) {
    r->native = true;
    st = dev_.local_desc(buf, len, lb.desc, r);
  } else if (len <= dev_.eager_limit() && (host || len == 0)) {
    // Eager: header and payload in one message from a bounce buffer.
    r->bounce = dev_.bounce_get();
    encode_eager_header(r->bounce.data, len, static_cast<uint8_t>(peer_slot_));
    if (len > 0) std::memcpy(r->bounce.data + kMsgHeader, buf, len);
    r->bounce_len = kMsgHeader + len;
  } else {
    // Rendezvous (wire.h): by write, the receiver answers with its buffer; by read, it reads
    // this one, registered for it now.
    r->cookie = dev_.next_cookie();
    MsgHeader h;
    h.slot = static_cast<uint8_t>(peer_slot_);
    h.len = len;
    h.cookie = r->cookie;
    if (dev_.write_rndv()) {
      r->phase = Phase::kSendWaitCts;
      h.type = MsgType::kRtsWrite;
      r->desc = lb.desc;
    } else {
      r->phase = Phase::kSendRead;
      h.type = MsgType::kRtsRead;
      st = dev_.register_rndv(r, len, FI_SEND | FI_REMOTE_READ);
      h.raddr = r->remote_addr;
      h.key = r->key;
    }
    if (st == HMC_PLUGIN_SUCCESS) {
      r->bounce = dev_.bounce_get();
      encode_rts(r->bounce.data, h);
      r->bounce_len = kRtsSize;
    }
  }
  return post_prepared(r, st, out);
}

hmc_plugin_status_t Endpoint::post_recv(void* buf, size_t len, const LocalBuf& lb, uint64_t tag,
                                        Request** out) {
  hmc_plugin_status_t st = usable_tagged("irecv", tag);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  Request* r = dev_.new_request(ReqKind::kRecv);
  r->ep = this;
  r->buf = buf;
  r->len = len;
  r->addr = dev_.directed() ? av_->fi_addr : FI_ADDR_UNSPEC;
  r->tag = data_tag(my_slot_, tag);
  r->iface = lb.iface;
  r->ordinal = lb.ordinal;
  if (!dev_.protocol()) {
    r->native = true;
    st = dev_.local_desc(buf, len, lb.desc, r);
  } else {
    // Matched into a bounce buffer big enough for any message on a data tag; a rendezvous
    // then reads into buf (registered on demand, unless the caller's mr covers it).
    r->desc = lb.desc;
    r->bounce = dev_.bounce_get();
    r->bounce_len = dev_.bounce_size();
  }
  return post_prepared(r, st, out);
}

hmc_plugin_status_t Endpoint::post_put(const void* buf, size_t len, const LocalBuf& lb,
                                       uint64_t remote_addr, const RemoteKey& k, Request** out) {
  return post_rma(ReqKind::kPut, const_cast<void*>(buf), len, lb, remote_addr, k, out);
}

hmc_plugin_status_t Endpoint::post_get(void* buf, size_t len, const LocalBuf& lb,
                                       uint64_t remote_addr, const RemoteKey& k, Request** out) {
  return post_rma(ReqKind::kGet, buf, len, lb, remote_addr, k, out);
}

hmc_plugin_status_t Endpoint::post_rma(ReqKind kind, void* buf, size_t len, const LocalBuf& lb,
                                       uint64_t remote_addr, const RemoteKey& k, Request** out) {
  const bool put = kind == ReqKind::kPut;
  const char* what = put ? "iput" : "iget";
  hmc_plugin_status_t st = usable(what);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  const Log& log = dev_.log();
  if (!dev_.rma()) {
    log.write(HMC_LOG_ERROR, "%s: device '%s' offers no one-sided operations", what,
              dev_.name().c_str());
    return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  }
  if (k.dev != &dev_) {
    log.write(HMC_LOG_ERROR, "%s: the remote key was unpacked for another device", what);
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  // The initiator checks what the owner granted before anything is posted: tcp and shm do not
  // check bounds at the target (shm writes past the region, tcp drops the connection), so this
  // is where an out-of-range or disallowed access is refused.
  const uint32_t need = put ? HMC_NET_ACCESS_REMOTE_WRITE : HMC_NET_ACCESS_REMOTE_READ;
  if ((k.access & need) == 0) {
    OFI_DEBUG(log, "%s refused: the region does not allow remote %s", what,
              put ? "writes" : "reads");
    return HMC_PLUGIN_ERR_REMOTE;
  }
  if (!remote_range_ok(k, remote_addr, len)) {
    OFI_DEBUG(log, "%s refused: %zu bytes at 0x%llx fall outside the %llu-byte region at 0x%llx",
              what, len, static_cast<unsigned long long>(remote_addr),
              static_cast<unsigned long long>(k.size), static_cast<unsigned long long>(k.base));
    return HMC_PLUGIN_ERR_REMOTE;
  }
  const bool trailing_read = put && dev_.read_completion() && len > 0;
  if (trailing_read && !k.readable) {
    log.write(HMC_LOG_ERROR,
              "iput: completing a put by a trailing read needs the owner to "
              "register with remote reads (it runs another HMC_OFI_PUT_COMPLETION)");
    return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  }
  Request* r = dev_.new_request(kind);
  r->ep = this;
  r->buf = buf;
  r->len = len;
  r->addr = av_->fi_addr;
  r->remote_addr = k.virt_addr ? remote_addr : remote_addr - k.base;
  r->key = k.key;
  r->trailing_read = trailing_read;
  if (len == 0) {
    // Nothing to move once the range is known to be valid.
    r->done = true;
    r->result = HMC_PLUGIN_SUCCESS;
    reqs_.insert(r);
    *out = r;
    return HMC_PLUGIN_SUCCESS;
  }
  st = dev_.local_desc(buf, len, lb.desc, r);
  return post_prepared(r, st, out);
}

hmc_plugin_status_t Endpoint::cancel(Request* r) {
  // A receive that matched a rendezvous is moving data already: it ends normally.
  if (r->done || r->kind != ReqKind::kRecv || r->phase != Phase::kMatch)
    return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  if (r->queued) {
    dev_.unqueue(r);
    r->done = true;
    r->result = HMC_PLUGIN_ERR_CANCELLED;
    r->bytes = 0;
    return HMC_PLUGIN_SUCCESS;
  }
  r->cancel_requested = true;
  if (!dev_.cancel_posted(r)) {
    r->cancel_requested = false;
    return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  }
  // Providers usually report the cancellation at once; a receive that matched a message first
  // ends normally instead.
  dev_.progress();
  if (r->done && r->result != HMC_PLUGIN_ERR_CANCELLED) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  return HMC_PLUGIN_SUCCESS;
}

void Endpoint::retire(Request* r) {
  reqs_.erase(r);
  dev_.release(r);
}

void Endpoint::close(bool drain) {
  if (closed_) return;
  closed_ = true;
  size_t ended = 0, cancelled = 0, left = 0;
  const size_t before = dev_.orphans();
  for (Request* r : std::vector<Request*>(reqs_.begin(), reqs_.end())) {
    if (r->done && r->in_provider == 0 && !r->queued) {
      dev_.release(r);  // ended, never tested: the core will not test it now
      ++ended;
      continue;
    }
    if (!r->queued && dev_.cancel_posted(r))
      ++cancelled;
    else if (r->in_provider > 0)
      ++left;
    else
      ++ended;
    dev_.adopt_orphan(r);
  }
  reqs_.clear();
  dev_.forget_queue(this);
  if (drain && dev_.orphans() > before) {
    const uint64_t deadline =
        dev_.ctx().now_ns() + std::min<uint64_t>(kDrainNs, dev_.ctx().timeout_ns());
    while (dev_.orphans() > before && dev_.ctx().now_ns() < deadline) dev_.progress();
  }
  OFI_DEBUG(dev_.log(),
            "%s: endpoint closed: %zu requests released, %zu receives cancelled, "
            "%zu operations left to the provider; %zu still pending in the device",
            dev_.name().c_str(), ended, cancelled, left, dev_.orphans());
  if (av_ != nullptr) {
    dev_.slot_release(av_, my_slot_);
    dev_.av_release(av_);
    av_ = nullptr;
  }
}

void Endpoint::on_ctrl_sent(Request* r, int err) {
  reqs_.erase(r);
  dev_.release(r);
  if (err == 0) return;
  if (state_ == State::kConnecting)
    fail(HMC_PLUGIN_ERR_PEER_LOST, std::string("the hello could not be delivered: ") + fi_err(err));
  else
    lose(std::string("a control message could not be delivered: ") + fi_err(err));
}

void Endpoint::on_ack(Request* r, int err) {
  reqs_.erase(r);
  Ack a;
  const bool ok = err == 0 && decode_ack(r->bounce.data, r->rx_len, &a);
  dev_.release(r);
  if (state_ != State::kConnecting) return;
  if (err != 0) {
    fail(HMC_PLUGIN_ERR_PEER_LOST,
         std::string("waiting for the listener's answer: ") + fi_err(err));
    return;
  }
  if (!ok || a.nonce != nonce_ || a.listener_id != listener_id_) {
    fail(HMC_PLUGIN_ERR_PEER_LOST, "the listener's answer is malformed");
    return;
  }
  if (a.status != AckStatus::kOk) {
    fail(HMC_PLUGIN_ERR_REMOTE, a.status == AckStatus::kNoSlot
                                    ? "the listener has no receive slot left for this peer"
                                    : "the listener already has a peer");
    return;
  }
  peer_slot_ = a.slot;
  probe_addr_ = a.probe_addr;
  probe_key_ = a.probe_key;
  last_activity_ns_ = dev_.ctx().now_ns();
  state_ = State::kReady;
  OFI_DEBUG(dev_.log(), "%s: connected (receive slot %d, peer's slot %d)", dev_.name().c_str(),
            my_slot_, peer_slot_);
}

void Endpoint::check_liveness(uint64_t now_ns) {
  if (state_ != State::kReady || lost_) return;
  // A peer that stopped taking operations: tcp (rxm) answers -FI_EAGAIN to every post towards
  // a peer whose connection broke, forever. As for a silent peer in the core, the host's
  // timeout decides.
  const uint64_t limit = dev_.ctx().timeout_ns();
  if (stall_since_ns != 0 && now_ns - stall_since_ns > limit) {
    lose("the provider has refused every operation towards the peer for " +
         std::to_string(limit / 1000000) + " ms (-FI_EAGAIN): it is unreachable");
    return;
  }
  if (probing_ && now_ns - probe_started_ns_ > limit) {
    lose("the peer has not answered a liveness read for " + std::to_string(limit / 1000000) +
         " ms");
    return;
  }
  // Peers on an RMA device always register their liveness word (same provider on both sides).
  if (probing_ || !dev_.rma()) return;
  if (now_ns - last_activity_ns_ < kProbeIdleNs) return;
  bool waiting = false;
  for (Request* r : reqs_) waiting |= !r->done && r->kind != ReqKind::kCtrlSend;
  if (!waiting) {
    last_activity_ns_ = now_ns;
    return;
  }
  Request* p = dev_.new_request(ReqKind::kProbe);
  p->ep = this;
  p->addr = av_->fi_addr;
  p->remote_addr = probe_addr_;
  p->key = probe_key_;
  probing_ = true;
  probe_started_ns_ = now_ns;
  last_activity_ns_ = now_ns;
  OFI_TRACE(dev_.log(), "%s: liveness read towards the peer", dev_.name().c_str());
  if (submit(p) != HMC_PLUGIN_SUCCESS) probing_ = false;
}

void Endpoint::on_probe(Request* r, int err) {
  reqs_.erase(r);
  dev_.release(r);
  probing_ = false;
  last_activity_ns_ = dev_.ctx().now_ns();
  if (err == FI_ECANCELED || err == FI_ENOTCONN || err == FI_ECONNREFUSED || err == FI_ECONNRESET ||
      err == FI_ECONNABORTED || err == FI_EIO || err == FI_EHOSTUNREACH || err == FI_ENETUNREACH ||
      err == FI_ETIMEDOUT || err == FI_ESHUTDOWN || err == EPIPE)
    lose(std::string("the peer does not answer a liveness read: ") + fi_err(err));
  else if (err != 0)
    OFI_DEBUG(dev_.log(), "%s: liveness read failed: %s", dev_.name().c_str(), fi_err(err));
  else
    OFI_TRACE(dev_.log(), "%s: the peer answered the liveness read", dev_.name().c_str());
}

void Endpoint::on_data_done(Request* r, int err) {
  last_activity_ns_ = dev_.ctx().now_ns();
  if (r->result == HMC_PLUGIN_ERR_PEER_LOST && !lost_)
    lose(err == FI_ECANCELED ? "an operation was cancelled by the provider" : fi_err(err));
}

void Endpoint::lose(const std::string& why) {
  if (lost_) return;
  lost_ = true;
  OFI_INFO(dev_.log(), "%s: peer lost (%s); pending receives end with PEER_LOST",
           dev_.name().c_str(), why.c_str());
  for (Request* r : std::vector<Request*>(reqs_.begin(), reqs_.end())) {
    if (r->done) continue;
    if (r->queued) {
      dev_.unqueue(r);
      if (r->in_provider == 0) {
        if (r->kind == ReqKind::kCtrlSend || r->kind == ReqKind::kAckRecv ||
            r->kind == ReqKind::kProbe) {
          if (r->kind == ReqKind::kProbe) probing_ = false;
          reqs_.erase(r);
          dev_.release(r);
          continue;
        }
        r->done = true;
        r->result = HMC_PLUGIN_ERR_PEER_LOST;
        r->bytes = 0;
        continue;
      }
      // Its first part is in the provider: the rest is never posted, the request ends when
      // that part does.
      dev_.abandon_unposted(r, FI_ECANCELED);
    }
    // Receives (and rendezvous sends waiting for the FIN) would wait forever for a dead peer;
    // other operations end by themselves.
    dev_.cancel_posted(r);
  }
}

}  // namespace hmc::ofi
