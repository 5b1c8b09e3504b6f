// Endpoint: rails (a queue pair on each further port that stripes this connection's puts,
// gets and rendezvous reads).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "context.h"
#include "endpoint.h"
#include "endpoint_parts.h"
#include "region.h"

namespace hmc::ibverbs {

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
      const bool up = bring_up(*r.dev, r.qp, r.remote.qpn, r.remote.psn, r.remote.gid, r.remote.lid,
                               r.remote.mtu, r.local.psn);
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

}  // namespace hmc::ibverbs
