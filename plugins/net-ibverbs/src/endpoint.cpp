// Endpoint: its lifetime and its setup (dial, answer, the side channel, loss). The other
// concerns are beside it: endpoint_qp.cpp (queue pairs), endpoint_rails.cpp (rails),
// endpoint_messages.cpp (requests and messages), endpoint_rma.cpp (put and get),
// endpoint_rndv.cpp (rendezvous), endpoint_completions.cpp (arrivals and completions).
#include "endpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "context.h"
#include "endpoint_parts.h"
#include "region.h"

namespace hmc::ibverbs {

Endpoint::Endpoint(Device& dev) : dev_(dev) {
  ctx().endpoints().insert(this);
}

Context& Endpoint::ctx() {
  return dev_.ctx();
}

Endpoint::~Endpoint() {
  Context& c = ctx();
  const VerbsApi& v = c.api();
  IB_DEBUG(c.log(), "endpoint closed: %s (%s)", dev_.name().c_str(), stage_name(stage_));
  for (ibv_qp* qp : {msg_qp_, rma_qp_}) {
    if (qp == nullptr) continue;
    dev_.unregister_qp(qp->qp_num);
    v.destroy_qp(qp);
  }
  dev_.forget(this);
  drop_rails();
  for (auto& kv : reqs_) {
    c.mr_cache().release(kv.second->own_reg);
    for (auto& seg : kv.second->seg_regs) c.mr_cache().release(seg.second);
    kv.second->ep = nullptr;
  }
  if (side_) c.unwatch(side_->fd());
  c.endpoints().erase(this);
}

bool Endpoint::owns_qp(uint32_t qpn, bool* rma) const {
  *rma = rma_qp_ != nullptr && rma_qp_->qp_num == qpn;
  return *rma || (msg_qp_ != nullptr && msg_qp_->qp_num == qpn);
}

// ---- setup -----------------------------------------------------------------------------------

hmc_plugin_status_t Endpoint::dial(const ConnHandle& h) {
  std::string why;
  int fd = connect_to(h.addr, h.addr_len, &why);
  if (fd < 0) {
    IB_ERROR(ctx().log(), "connect: %s", why.c_str());
    return HMC_PLUGIN_ERR_SYSTEM;
  }
  side_ = std::make_unique<SideChannel>(fd);
  ctx().watch(fd);
  listener_id_ = h.listener_id;
  deadline_ns_ = ctx().now_ns() + uint64_t{ctx().timeout_ms()} * 1000000;
  stage_ = Stage::kDialing;
  if (!create_qps()) {
    IB_ERROR(ctx().log(), "connect on %s: %s", dev_.name().c_str(), why_.c_str());
    return HMC_PLUGIN_ERR_NO_MEMORY;
  }
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::answer(std::unique_ptr<SideChannel> side, const QpInfo& remote) {
  side_ = std::move(side);
  ctx().watch(side_->fd());
  remote_ = remote;
  deadline_ns_ = ctx().now_ns() + uint64_t{ctx().timeout_ms()} * 1000000;
  if (remote.link_layer != dev_.info().attr.link_layer) {
    lose("the connector's port has another link layer");
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  if (!create_qps() || !connect_qp(msg_qp_, remote_.msg_qpn, remote_.msg_psn, local_.msg_psn) ||
      !connect_qp(rma_qp_, remote_.rma_qpn, remote_.rma_psn, local_.rma_psn)) {
    lose(why_);
    return HMC_PLUGIN_ERR_INTERNAL;
  }
  uint8_t buf[kQpInfoSize];
  encode_qp_info(local_, buf);
  if (!side_->send(SideFrame::kAccept, buf, sizeof buf)) {
    lose("the connector went away");
    return HMC_PLUGIN_ERR_PEER_LOST;
  }
  stage_ = Stage::kAwaitReady;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::ready_status() {
  if (stage_ != Stage::kReady && stage_ != Stage::kLost) ctx().progress();
  if (stage_ == Stage::kReady) return HMC_PLUGIN_SUCCESS;
  if (stage_ == Stage::kLost) return HMC_PLUGIN_ERR_PEER_LOST;
  return HMC_PLUGIN_IN_PROGRESS;
}

void Endpoint::progress() {
  if (stage_ == Stage::kLost) return;
  if (side_ && side_->want_write() && !side_->flush()) {
    lose("the side channel failed");
    return;
  }
  if (stage_ == Stage::kDialing) {
    std::string why;
    int r = connect_done(side_->fd(), &why);
    if (r < 0) {
      lose("the listener cannot be reached: " + why);
      return;
    }
    if (r == 1) {
      QpInfo hello = local_;
      hello.listener_id = listener_id_;
      uint8_t buf[kQpInfoSize];
      encode_qp_info(hello, buf);
      if (!side_->send(SideFrame::kHello, buf, sizeof buf)) {
        lose("the listener cannot be reached");
        return;
      }
      stage_ = Stage::kHelloSent;
    }
  }
  if (stage_ != Stage::kReady) {
    if (ctx().now_ns() > deadline_ns_)
      lose(
          stage_ == Stage::kAwaitReady
              ? "the connector did not confirm within " + std::to_string(ctx().timeout_ms()) + " ms"
              : "the listener did not answer within " + std::to_string(ctx().timeout_ms()) + " ms");
    return;
  }
  if (stalled()) return;
  announce_segments();
  pump();
  maybe_return_credits();
  maybe_probe();
}

void Endpoint::posted(int q) {
  if (in_flight_[q]++ == 0) last_completion_ns_[q] = ctx().now_ns();
}

bool Endpoint::stalled() {
  // An HCA fails a work request its peer does not acknowledge once its retries are spent, in
  // half of the host's timeout (HMC_IB_TIMEOUT's default). Soft-RoCE whose netdev lost its
  // carrier retries sending forever instead: a queue pair with work requests in flight and no
  // completion for that long is as good as failed.
  if (ctx().timeout_ms() == 0) return false;
  const uint64_t budget = uint64_t{ctx().timeout_ms()} * 1000000 / 2;
  const uint64_t now = ctx().now_ns();
  auto check = [&](int in_flight, uint64_t last, const std::string& port) {
    if (in_flight == 0 || now - last <= budget) return false;
    lose("no completion for " + std::to_string(ctx().timeout_ms() / 2) + " ms with " +
         std::to_string(in_flight) + " work requests in flight on " + port +
         " (the peer's HCA does not answer: link down?)");
    return true;
  };
  for (int q = 0; q < 2; ++q)
    if (check(in_flight_[q], last_completion_ns_[q], dev_.name())) return true;
  for (const Rail& r : rails_)
    if (check(r.in_flight, r.last_completion_ns, r.dev->name())) return true;
  return false;
}

void Endpoint::maybe_probe() {
  if (ctx().timeout_ms() == 0 || in_flight_[0] > 0 || !backlog_[0].empty() || !dev_.can_post())
    return;
  // Every retry of a probe fits in half of the host's timeout (HMC_IB_TIMEOUT's default), and a
  // probe goes at most a quarter of it after the last one: a silent peer is lost in time.
  const uint64_t interval = uint64_t{ctx().timeout_ms()} * 1000000 / 4;
  const uint64_t now = ctx().now_ns();
  if (now - last_probe_ns_ < interval) return;
  bool pending = false;
  for (const auto& kv : reqs_) pending |= !kv.second->done;
  if (!pending) return;
  last_probe_ns_ = now;
  SendOp op;
  op.kind = WrKind::kProbe;
  std::string why;
  const PostResult pr = dev_.post(this, msg_qp_, op, &why);
  if (pr == PostResult::kQueueError) {
    lose(why);
    return;
  }
  if (pr == PostResult::kOk) posted(0);
}

void Endpoint::on_side_readable() {
  if (!side_ || stage_ == Stage::kDialing || stage_ == Stage::kLost) return;
  std::vector<Frame> frames;
  std::string why;
  SideChannel::Read rd = side_->read(&frames, &why);
  for (const Frame& f : frames) {
    on_frame(f);
    if (stage_ == Stage::kLost) return;
  }
  if (rd == SideChannel::Read::kOk) return;
  // Whatever the peer sent before it went is in the completion queue already (a message is
  // acknowledged after its completion is written): take it first.
  dev_.poll();
  lose(rd == SideChannel::Read::kClosed ? "the peer closed the connection" : why);
}

void Endpoint::on_frame(const Frame& f) {
  std::string why;
  if (f.type == SideFrame::kAccept && stage_ == Stage::kHelloSent) {
    QpInfo r;
    if (!decode_qp_info(f.payload.data(), f.payload.size(), &r, &why)) {
      lose("the listener's answer is malformed: " + why);
      return;
    }
    if (r.link_layer != dev_.info().attr.link_layer) {
      lose("the listener's port has another link layer");
      return;
    }
    remote_ = r;
    if (!connect_qp(msg_qp_, remote_.msg_qpn, remote_.msg_psn, local_.msg_psn) ||
        !connect_qp(rma_qp_, remote_.rma_qpn, remote_.rma_psn, local_.rma_psn)) {
      lose(why_);
      return;
    }
    if (!side_->send(SideFrame::kReady, nullptr, 0)) {
      lose("the listener went away");
      return;
    }
    stage_ = Stage::kReady;
    start_rails();
    if (stage_ == Stage::kLost) return;
    IB_DEBUG(ctx().log(), "%s: connected (queue pairs %u/%u to %u/%u)", dev_.name().c_str(),
             local_.msg_qpn, local_.rma_qpn, remote_.msg_qpn, remote_.rma_qpn);
    return;
  }
  if (f.type == SideFrame::kReady && stage_ == Stage::kAwaitReady && f.payload.empty()) {
    stage_ = Stage::kReady;
    return;
  }
  if (f.type == SideFrame::kRmaReset && stage_ == Stage::kReady) {
    RmaReset r;
    if (!decode_rma_reset(f.payload.data(), f.payload.size(), &r)) {
      lose("malformed put/get queue pair reset");
      return;
    }
    if (r.epoch == rma_epoch_ + 1 && !rma_resetting_) start_rma_reset();  // the peer's error
    if (r.epoch != rma_epoch_ || !rma_resetting_) {
      lose("put/get queue pair reset out of step");
      return;
    }
    if (!connect_qp(rma_qp_, r.qpn, r.psn, local_.rma_psn)) {
      lose(why_);
      return;
    }
    rma_resetting_ = false;
    IB_INFO(ctx().log(), "%s: put/get queue pair replaced (epoch %u)", dev_.name().c_str(),
            rma_epoch_);
    pump();
    return;
  }
  if ((f.type == SideFrame::kRails || f.type == SideFrame::kRailsReady) &&
      stage_ == Stage::kReady) {
    on_rails(f);
    return;
  }
  lose("unexpected side-channel frame " + std::to_string(static_cast<uint32_t>(f.type)) +
       " while " + stage_name(stage_));
}

// A refused one-sided access moved the put/get queue pair to the error state (the peer's too):
// both sides replace it, and what was in flight on it is posted again on the new one (a put or
// get moves the same bytes twice harmlessly; a notification behind a refused piece was never
// delivered, the responder stops at the first error).
void Endpoint::start_rma_reset() {
  std::vector<SendOp> ops = dev_.take(this, true);
  for (size_t i = ops.size(); i-- > 0;) backlog_[1].push_front(ops[i]);
  in_flight_[1] = 0;
  ++rma_epoch_;
  rma_resetting_ = true;
  const VerbsApi& v = ctx().api();
  dev_.unregister_qp(rma_qp_->qp_num);
  v.destroy_qp(rma_qp_);
  rma_qp_ = make_qp(dev_);
  if (rma_qp_ == nullptr) {
    lose(std::string("cannot create a put/get queue pair: ") + std::strerror(errno));
    return;
  }
  dev_.register_qp(rma_qp_->qp_num, this);
  local_.rma_qpn = rma_qp_->qp_num;
  local_.rma_psn = static_cast<uint32_t>(ctx().random64() & 0xffffff);
  RmaReset r{rma_epoch_, local_.rma_qpn, local_.rma_psn};
  uint8_t buf[kRmaResetSize];
  encode_rma_reset(r, buf);
  if (!side_->send(SideFrame::kRmaReset, buf, sizeof buf)) lose("the side channel failed");
}

void Endpoint::lose(const std::string& why) {
  if (stage_ == Stage::kLost) return;
  const bool was_ready = stage_ == Stage::kReady;
  stage_ = Stage::kLost;
  why_ = why;
  if (was_ready)
    IB_WARN(ctx().log(), "%s: peer lost: %s", dev_.name().c_str(), why.c_str());
  else
    IB_WARN(ctx().log(), "%s: connection setup failed: %s", dev_.name().c_str(), why.c_str());
  // Stop the HCA from touching our buffers: the queue pairs flush what is in flight.
  for (ibv_qp* qp : {msg_qp_, rma_qp_}) {
    if (qp == nullptr) continue;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ctx().api().modify_qp(qp, &a, IBV_QP_STATE);
  }
  for (Rail& r : rails_) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ctx().api().modify_qp(r.qp, &a, IBV_QP_STATE);
    r.backlog.clear();
  }
  rails_up_ = false;
  backlog_[0].clear();
  backlog_[1].clear();
  posted_.clear();
  // Messages that arrived whole stay receivable; rendezvous announcements cannot be read now,
  // nor can staged messages whose fragments stopped.
  staged_recvs_.clear();
  staged_unexpected_.clear();
  rndv_recvs_.clear();
  rndv_unexpected_.clear();
  keying_.clear();
  unexpected_.remove_if([](const Unexpected& u) { return !u.whole(); });
  for (auto& kv : reqs_)
    if (!kv.second->done) finish(kv.second.get(), HMC_PLUGIN_ERR_PEER_LOST, 0);
}

}  // namespace hmc::ibverbs
