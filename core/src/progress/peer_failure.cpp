#include "progress/peer_failure.h"

#include <sched.h>

#include "peer/dispatch.h"
#include "peer/peer.h"
#include "regions/regions.h"
#include "request/request.h"
#include "util/clock.h"
#include "util/log.h"
#include "xfer/transfers.h"

namespace hmc {

void PeerFailure::fail_peer_locked(Peer& peer, hmc_status_t status, const std::string& reason) {
  if (!peer.lost.exchange(true)) {
    peer.lost_reason = reason;
    bool orderly = status != HMC_ERR_PEER_LOST || reason.rfind(kPeerClosed, 0) == 0;
    if (orderly)
      HMC_LOG_I("peer {} closed: {}", peer.name, reason);
    else
      HMC_LOG_W("peer {} lost: {}", peer.name, reason);
  }
  regions_->release_keys_locked(peer);  // keys unpacked on the endpoint go before it
  if (peer.ep) {
    peer.net->table()->close_ep(peer.ep);  // releases the plugin's side of every pending request
    peer.ep = nullptr;
  }
  auto fail_one = [&](Request* req) {
    req->net = nullptr;
    if (req->framed) {
      req->framed->forget_plugin_requests();
      park_failed_transfer(std::move(req->framed));
    }
    if (req->temp_mr) {
      peer.net->table()->dereg_mr(peer.net->ctx(), req->temp_mr);
      req->temp_mr = nullptr;
    }
    transfers_.complete_locked(
        req, status,
        fmt::format("hmc_{} with {}: {}", op_name(req->op), peer.name,
                    status == HMC_ERR_PEER_LOST ? "peer lost (" + peer.lost_reason + ")" : reason));
  };
  for (Request* req : peer.pending) fail_one(req);
  peer.pending.clear();
  peer.framing.sends.clear();
  peer.framing.first.clear();
  peer.framing.streams.clear();
  peer.framing.ipc_maps.clear();  // (copies still reading one hold it until they end)
  peer.framing.shared_slabs.clear();
  for (Request* req : peer.notify_queue)
    if (req->landed) fail_one(req);  // the others were just failed as pending
  peer.notify_queue.clear();
  transfers_.drain_held_notifications(peer);
}

void PeerFailure::fail_peer(Peer& peer, hmc_status_t status, const std::string& reason) {
  if (!peer.net) {
    peer.lost = true;
    return;
  }
  std::lock_guard<std::mutex> lock(peer.net->mutex());
  fail_peer_locked(peer, status, reason);
}

bool PeerFailure::closed_in_order_locked(Peer& peer) {
  if (peer.remote_closed) return true;
  std::lock_guard<std::mutex> lock(peer.ctrl_mutex);
  if (!peer.ctrl || peer.lost) return false;
  std::vector<control::Channel::Message> msgs;
  peer.ctrl->receive(&msgs);  // its failure is the progress pass's business
  auto self = peer.shared_from_this();
  for (auto& m : msgs) dispatch_.dispatch(self, m);
  return peer.remote_closed;
}

void PeerFailure::park_failed_transfer(std::unique_ptr<FramedTransfer> f) {
  f->settle(stage_env_);
  if (f->idle()) return;
  std::lock_guard<std::mutex> lock(parked_mutex_);
  parked_.push_back(std::move(f));
}

void PeerFailure::reap_parked_transfers(uint64_t deadline_ns) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(parked_mutex_);
      for (size_t i = 0; i < parked_.size();) {
        parked_[i]->settle(stage_env_);
        if (parked_[i]->idle()) {
          parked_[i] = std::move(parked_.back());
          parked_.pop_back();
        } else {
          ++i;
        }
      }
      if (parked_.empty() || deadline_ns == 0) return;
      if (now_ns() >= deadline_ns) {
        HMC_LOG_W(
            "{} failed transfers still have device copies running; their staging buffers "
            "are leaked",
            parked_.size());
        // Never freed: a copy may still write into them.
        for (auto& f : parked_) f.release();
        parked_.clear();
        return;
      }
    }
    sched_yield();
  }
}

}  // namespace hmc
