#include "endpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "context.h"
#include "region.h"

namespace hmc::ibverbs {
namespace {

constexpr uint32_t kSqDepth = 128;
constexpr int kMaxRdmaInFlight = 16;  // pieces of RDMA READ/WRITE per queue pair at once
// A rendezvous buffer the plugin registers goes in segments of this size (at least HMC_IB_CHUNK),
// at most kRndvWindow of them registered ahead of what the reader has read: registering 512 MiB
// takes seconds under emulation, a segment a fraction of it.
constexpr size_t kRndvSegment = size_t{16} << 20;
constexpr size_t kRndvWindow = 4;
// Vectored pieces are posted in chains (Endpoint::pump_chained) of up to kMaxChain work
// requests, within the same kMaxRdmaInFlight as single pieces: two chains in flight keep the
// queue pair busy while the older one's completion comes back.
constexpr size_t kMaxChain = kMaxRdmaInFlight / 2;

// A port's share of striped bytes: its link rate (at least 1).
uint64_t port_weight(const Device& d) {
  return std::max<uint64_t>(1, port_bandwidth_MBps(d.info().attr.active_speed,
                                                   d.info().attr.active_width));
}

const char* stage_name(Endpoint::Stage s) {
  switch (s) {
    case Endpoint::Stage::kDialing: return "connecting";
    case Endpoint::Stage::kHelloSent: return "waiting for the listener";
    case Endpoint::Stage::kAwaitReady: return "waiting for the connector";
    case Endpoint::Stage::kReady: return "ready";
    case Endpoint::Stage::kLost: return "lost";
  }
  return "?";
}

bool refused_access(ibv_wc_status s) {
  return s == IBV_WC_REM_ACCESS_ERR || s == IBV_WC_REM_INV_REQ_ERR || s == IBV_WC_REM_OP_ERR ||
         s == IBV_WC_LOC_PROT_ERR || s == IBV_WC_LOC_ACCESS_ERR;
}

}  // namespace

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

// ---- queue pairs ---------------------------------------------------------------------------

namespace {
ibv_qp* make_qp(Device& d) {
  ibv_qp_init_attr a{};
  a.send_cq = d.cq();
  a.recv_cq = d.cq();
  a.srq = d.srq();
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = kSqDepth;
  a.cap.max_send_sge = 1;
  // Small messages go inline (copied into the work request when posted: the HCA reads no send
  // buffer, one DMA less on the latency path); a device that cannot do it gets a plain queue pair.
  a.cap.max_inline_data = kInlineWanted;
  ibv_qp* qp = d.api().create_qp(d.pd(), &a);
  if (qp == nullptr) {
    a.cap.max_inline_data = 0;
    qp = d.api().create_qp(d.pd(), &a);
  }
  if (qp == nullptr) return nullptr;
  d.note_inline(a.cap.max_inline_data);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.pkey_index = 0;
  at.port_num = static_cast<uint8_t>(d.info().port);
  at.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  if (d.api().modify_qp(qp, &at,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) {
    d.api().destroy_qp(qp);
    return nullptr;
  }
  return qp;
}

uint8_t rd_atomic(const Device& d) {
  return static_cast<uint8_t>(std::min(16, std::max(1, d.info().dev_attr.max_qp_rd_atom)));
}
}  // namespace

bool Endpoint::create_qps() {
  msg_qp_ = make_qp(dev_);
  rma_qp_ = msg_qp_ != nullptr ? make_qp(dev_) : nullptr;
  if (rma_qp_ == nullptr) {
    why_ = std::string("cannot create queue pairs: ") + std::strerror(errno);
    return false;
  }
  if (!dev_.grow_receive_pool()) {
    why_ = "cannot grow the shared receive queue";
    return false;
  }
  dev_.register_qp(msg_qp_->qp_num, this);
  dev_.register_qp(rma_qp_->qp_num, this);
  const PortInfo& pi = dev_.info();
  local_.msg_qpn = msg_qp_->qp_num;
  local_.rma_qpn = rma_qp_->qp_num;
  local_.msg_psn = static_cast<uint32_t>(ctx().random64() & 0xffffff);
  local_.rma_psn = static_cast<uint32_t>(ctx().random64() & 0xffffff);
  local_.lid = pi.attr.lid;
  std::memcpy(local_.gid, pi.gid.raw, 16);
  local_.mtu = static_cast<uint8_t>(pi.attr.active_mtu);
  local_.link_layer = pi.attr.link_layer;
  local_.credits = dev_.credits();
  local_.eager = static_cast<uint32_t>(dev_.eager_limit());
  return true;
}

bool Endpoint::connect_qp(ibv_qp* qp, uint32_t remote_qpn, uint32_t remote_psn,
                          uint32_t local_psn) {
  return bring_up(dev_, qp, remote_qpn, remote_psn, remote_.gid, remote_.lid, remote_.mtu,
                  local_psn);
}

bool Endpoint::bring_up(Device& d, ibv_qp* qp, uint32_t rqpn, uint32_t rpsn, const uint8_t* rgid,
                        uint16_t rlid, uint8_t rmtu, uint32_t lpsn) {
  const VerbsApi& v = ctx().api();
  const PortInfo& pi = d.info();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(std::min<int>(pi.attr.active_mtu, rmtu));
  a.dest_qp_num = rqpn;
  a.rq_psn = rpsn;
  a.max_dest_rd_atomic = rd_atomic(d);
  a.min_rnr_timer = 12;  // 0.64 ms
  a.ah_attr.port_num = static_cast<uint8_t>(pi.port);
  if (d.ethernet() || rlid == 0) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, rgid, 16);
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(pi.gid_index);
    a.ah_attr.grh.hop_limit = 64;
  } else {
    a.ah_attr.dlid = rlid;
  }
  if (v.modify_qp(qp, &a,
                  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0) {
    why_ = std::string("cannot bring the queue pair to RTR: ") + std::strerror(errno);
    return false;
  }
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = static_cast<uint8_t>(ctx().rc_timeout());
  r.retry_cnt = static_cast<uint8_t>(ctx().config().retry_cnt);
  r.rnr_retry = 6;  // credits keep receivers ready; a bug becomes an error, not a hang
  r.sq_psn = lpsn;
  r.max_rd_atomic = rd_atomic(d);
  if (v.modify_qp(qp, &r,
                  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0) {
    why_ = std::string("cannot bring the queue pair to RTS: ") + std::strerror(errno);
    return false;
  }
  return true;
}

// ---- rails -----------------------------------------------------------------------------------

namespace {
RailInfo rail_info(Device& d, ibv_qp* qp, uint32_t psn) {
  RailInfo r;
  r.qpn = qp->qp_num;
  r.psn = psn;
  r.lid = d.info().attr.lid;
  std::memcpy(r.gid, d.info().gid.raw, 16);
  r.mtu = static_cast<uint8_t>(d.info().attr.active_mtu);
  return r;
}
}  // namespace

void Endpoint::start_rails() {
  for (Device* d : ctx().rails_of(dev_)) {
    Rail r;
    r.dev = d;
    r.qp = make_qp(*d);
    if (r.qp == nullptr) {
      IB_INFO(ctx().log(), "%s: no queue pair on rail %s: %s", dev_.name().c_str(),
              d->name().c_str(), std::strerror(errno));
      break;
    }
    r.local = rail_info(*d, r.qp, static_cast<uint32_t>(ctx().random64() & 0xffffff));
    r.weight = port_weight(*d);
    rails_.push_back(std::move(r));
  }
  if (rails_.empty()) return;
  std::vector<RailInfo> mine;
  for (const Rail& r : rails_) mine.push_back(r.local);
  std::vector<uint8_t> b = encode_rails(mine);
  if (!side_->send(SideFrame::kRails, b.data(), b.size())) lose("the side channel failed");
}

void Endpoint::drop_rails() {
  for (Rail& r : rails_) {
    r.dev->forget(this);
    if (r.qp != nullptr) ctx().api().destroy_qp(r.qp);
  }
  rails_.clear();
  rails_up_ = false;
}

void Endpoint::on_rails(const Frame& f) {
  std::vector<RailInfo> theirs;
  std::string why;
  if (f.type == SideFrame::kRailsReady) {
    if (!f.payload.empty() || rails_.empty() || rails_up_) {
      lose("a rails confirmation out of step");
      return;
    }
    rails_up_ = true;
    IB_DEBUG(ctx().log(), "%s: %zu more rails up", dev_.name().c_str(), rails_.size());
    return;
  }
  if (!decode_rails(f.payload.data(), f.payload.size(), &theirs, &why)) {
    lose("a malformed rail list: " + why);
    return;
  }
  const bool answer = !rails_.empty();  // the connector offered first
  if (!answer) {
    // Listener: each offered rail in order with one of ours on its network (a port that would
    // never reach it would fail the first striped transfer), ours at RTS before we answer; the
    // first offer none of ours reaches ends the list.
    std::vector<Device*> devs = ctx().rails_of(dev_);
    for (size_t i = 0; i < theirs.size(); ++i) {
      auto reaches = [&](Device* d) {
        return d != nullptr && same_network(d->info().gid.raw, theirs[i].gid, d->info().net_bits);
      };
      auto pick = std::find_if(devs.begin(), devs.end(), reaches);
      if (pick == devs.end()) {
        IB_INFO(ctx().log(), "%s: the peer's rail %s reaches none of our rail ports: %zu rails",
                dev_.name().c_str(), gid_text(theirs[i].gid).c_str(), i);
        break;
      }
      Device* dev = std::exchange(*pick, nullptr);
      Rail r;
      r.dev = dev;
      r.qp = make_qp(*dev);
      if (r.qp == nullptr) break;
      r.local = rail_info(*dev, r.qp, static_cast<uint32_t>(ctx().random64() & 0xffffff));
      r.remote = theirs[i];
      r.weight = port_weight(*dev);
      const bool up = bring_up(*r.dev, r.qp, r.remote.qpn, r.remote.psn, r.remote.gid,
                               r.remote.lid, r.remote.mtu, r.local.psn);
      rails_.push_back(std::move(r));
      if (!up) {
        IB_INFO(ctx().log(), "%s: rail %s: %s", dev_.name().c_str(), dev->name().c_str(),
                why_.c_str());
        drop_rails();
        break;
      }
    }
    std::vector<RailInfo> mine;
    for (const Rail& r : rails_) mine.push_back(r.local);
    std::vector<uint8_t> b = encode_rails(mine);
    if (!side_->send(SideFrame::kRails, b.data(), b.size())) lose("the side channel failed");
    return;
  }
  // Connector: the listener's answer names as many rails as it took, at most ours.
  if (theirs.size() > rails_.size()) {
    lose("the listener answered more rails than offered");
    return;
  }
  while (rails_.size() > theirs.size()) {
    rails_.back().dev->forget(this);
    ctx().api().destroy_qp(rails_.back().qp);
    rails_.pop_back();
  }
  for (size_t i = 0; i < rails_.size(); ++i) {
    Rail& r = rails_[i];
    r.remote = theirs[i];
    if (!bring_up(*r.dev, r.qp, r.remote.qpn, r.remote.psn, r.remote.gid, r.remote.lid,
                  r.remote.mtu, r.local.psn)) {
      IB_INFO(ctx().log(), "%s: rail %s: %s", dev_.name().c_str(), r.dev->name().c_str(),
              why_.c_str());
      drop_rails();  // the listener's stay unused: it waits for a confirmation that never comes
      return;
    }
  }
  if (rails_.empty()) return;
  if (!side_->send(SideFrame::kRailsReady, nullptr, 0)) {
    lose("the side channel failed");
    return;
  }
  rails_up_ = true;
  IB_DEBUG(ctx().log(), "%s: %zu more rails up", dev_.name().c_str(), rails_.size());
}

void Endpoint::pump_rails() {
  for (size_t i = 0; i < rails_.size(); ++i) {
    Rail& rl = rails_[i];
    while (!rl.backlog.empty() && rl.in_flight < kMaxRdmaInFlight && rl.dev->can_post()) {
      SendOp& op = rl.backlog.front();
      std::string why;
      PostResult pr = rl.dev->post(this, rl.qp, op, &why);
      if (pr == PostResult::kQueueError) {
        lose(why);
        return;
      }
      if (pr == PostResult::kBusy) break;
      if (pr == PostResult::kRegError && !op.bounce) {
        stage_through_bounce(rl.backlog, why);
        continue;
      }
      SendOp done = op;
      rl.backlog.pop_front();
      if (pr == PostResult::kRegError) {
        IB_ERROR(ctx().log(), "%s: %s", rl.dev->name().c_str(), why.c_str());
        auto it = reqs_.find(done.req_id);
        if (it != reqs_.end() && !it->second->done) {
          --it->second->in_flight;
          finish(it->second.get(), HMC_PLUGIN_ERR_NO_MEMORY, 0);
        }
        continue;
      }
      if (rl.in_flight++ == 0) rl.last_completion_ns = ctx().now_ns();
    }
  }
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
      lose(stage_ == Stage::kAwaitReady
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

void Endpoint::local_key(const void* buf, size_t len, const MemRegion* mr, int access,
                         SendOp* op) {
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
    while (!backlog_[q].empty() && in_flight_[q] < static_cast<int>(kSqDepth) &&
           dev_.can_post()) {
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
        r->own_reg = ctx().mr_cache().acquire(dev_, b, std::min(len, seg),
                                              IBV_ACCESS_REMOTE_READ, &why);
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
    IB_WARN(ctx().log(), "%s: %s; such messages are sent staged through the registered eager "
                         "buffers", dev_.name().c_str(), why.c_str());
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

hmc_plugin_status_t Endpoint::cancel(Request* r) {
  if (r->done) return HMC_PLUGIN_SUCCESS;
  if (r->kind != ReqKind::kRecv || r->matched) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  auto it = std::find(posted_.begin(), posted_.end(), r);
  if (it == posted_.end()) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  posted_.erase(it);
  finish(r, HMC_PLUGIN_ERR_CANCELLED, 0);
  return HMC_PLUGIN_SUCCESS;
}

// ---- arrivals and completions ------------------------------------------------------------------

void Endpoint::deliver(Request* r, const MsgHeader& h, const uint8_t* payload) {
  size_t n = std::min<size_t>(h.len, r->len);
  if (n > 0) std::memcpy(r->buf, payload, n);
  finish(r, h.len > r->len ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS, h.len);
}

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
    IB_ERROR(ctx().log(), "%s: the sender of a %zu-byte message could not register it beyond "
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
    Registration* reg = ctx().mr_cache().acquire(dev_, static_cast<uint8_t*>(r->buf) + r->keyed,
                                                 n, IBV_ACCESS_REMOTE_READ, &why);
    SendOp k;
    k.hdr.type = static_cast<uint8_t>(MsgType::kRndvKey);
    k.hdr.cookie = r->id;
    k.hdr.addr = r->keyed;
    k.req_id = r->id;
    if (reg == nullptr) {
      if (!r->seg_regs.empty()) {
        // The reader still reads segments we hold: once it acknowledges some they are released
        // (unused cached ones are dropped on a refusal), then this one is tried again.
        IB_DEBUG(ctx().log(), "%s: %s; retried once the reader has read more",
                 dev_.name().c_str(), why.c_str());
        r->wait_ack = true;
        return;
      }
      IB_ERROR(ctx().log(), "%s: a message of %zu bytes: %s; the receiver gets its first %zu "
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
      if (staged_recvs_.count(h.cookie) != 0 ||
          staged_unexpected_.count(h.cookie) != 0) {
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
      finish(r, r->sent_len > r->len ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS,
             r->sent_len);
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
    case ReqKind::kRecv:
      end_read_if_done(r);
      break;
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
