#include "xfer/bounced_rma.h"

#include <algorithm>

#include "device/stage_pool.h"
#include "net/net_plugin.h"
#include "peer/peer.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

BouncedRma::BouncedRma(bool put, void* buf, size_t size, uint64_t addr, hmc_net_rkey_t* rkey,
                       uint64_t chunk)
    : FramedTransfer(buf, size),
      put_(put),
      addr_(addr),
      rkey_(rkey),
      chunk_(chunk),
      pieces_(static_cast<size_t>((size + chunk - 1) / chunk)) {}

std::unique_ptr<BouncedRma> BouncedRma::put(const void* buf, size_t size, uint64_t addr,
                                            hmc_net_rkey_t* rkey, uint64_t chunk) {
  return std::unique_ptr<BouncedRma>(
      new BouncedRma(true, const_cast<void*>(buf), size, addr, rkey, chunk));
}

std::unique_ptr<BouncedRma> BouncedRma::get(void* buf, size_t size, uint64_t addr,
                                            hmc_net_rkey_t* rkey, uint64_t chunk) {
  return std::unique_ptr<BouncedRma>(new BouncedRma(false, buf, size, addr, rkey, chunk));
}

// New pieces, unless a piece failed: then the rest is not issued and the transfer ends once what
// is in flight has. False for a get when the path failed (the caller returns at once).
bool BouncedRma::issue_pieces(Peer& peer, const StageEnv& env) {
  const hmc_net_plugin_v2_t* t = peer.net->table();
  const char* what = put_ ? "hmc_put" : "hmc_get";
  while (status_ == HMC_SUCCESS && next_index_ < pieces_ && pipe_.has_room(env)) {
    Piece p;
    p.index = next_index_;
    p.offset = static_cast<size_t>(uint64_t(p.index) * chunk_);
    p.len = static_cast<size_t>(std::min<uint64_t>(chunk_, size_ - p.offset));
    p.fit = p.len;
    p.bounce = env.pool->take();
    if (!p.bounce) break;  // the pool is in use; later
    if (put_) {
      hmc_status_t st = env.copier->start(p.bounce, user_ + p.offset, p.len, &p.copy);
      if (st != HMC_SUCCESS) {
        env.pool->give(p.bounce);
        fail_local(st,
                   fmt::format("{}: staging a piece from device memory: {}", what, last_error()));
        break;
      }
      p.state = PieceState::Copying;
    } else {
      if (!rkey_) {
        env.pool->give(p.bounce);
        plugin_failed(HMC_PLUGIN_ERR_PEER_LOST);
        return false;
      }
      hmc_plugin_status_t ps =
          t->iget(peer.ep, p.bounce, p.len, nullptr, addr_ + p.offset, rkey_, &p.net);
      if (ps != HMC_PLUGIN_SUCCESS) {
        env.pool->give(p.bounce);
        plugin_failed(ps);
        return false;
      }
      p.state = PieceState::Posted;
    }
    pipe_.add(std::move(p));
    ++next_index_;
  }
  return true;
}

// A put's piece goes Copying (device to bounce), Ready, Posted (iput), Done; a get's Posted
// (iget), Unloading (bounce to device), Done.
bool BouncedRma::step(Request*, Peer& peer, const StageEnv& env) {
  const hmc_net_plugin_v2_t* t = peer.net->table();
  const char* what = put_ ? "hmc_put" : "hmc_get";
  const size_t issued = next_index_;
  if (!issue_pieces(peer, env)) return true;
  bool moved = next_index_ != issued;
  for (auto& p : pipe_) {
    if (p.state == PieceState::Copying || p.state == PieceState::Unloading) {
      hmc_status_t st = p.copy.poll();
      if (st == HMC_IN_PROGRESS) continue;
      moved = true;
      if (st != HMC_SUCCESS) {
        fail_local(
            st, fmt::format("{}: {} device memory: {}", what,
                            put_ ? "staging a piece from" : "copying a piece into", last_error()));
        p.state = PieceState::Done;
        continue;
      }
      p.state = p.state == PieceState::Copying ? PieceState::Ready : PieceState::Done;
    }
    if (p.state == PieceState::Ready) {  // put: the piece is in its bounce buffer
      if (status_ != HMC_SUCCESS) {
        p.state = PieceState::Done;
        continue;
      }
      if (!rkey_) {
        plugin_failed(HMC_PLUGIN_ERR_PEER_LOST);
        return true;
      }
      hmc_plugin_status_t ps =
          t->iput(peer.ep, p.bounce, p.len, nullptr, addr_ + p.offset, rkey_, &p.net);
      if (ps != HMC_PLUGIN_SUCCESS) {
        plugin_failed(ps);
        return true;
      }
      p.state = PieceState::Posted;
      moved = true;
    }
    if (p.state == PieceState::Posted) {
      hmc_plugin_status_t st;
      size_t got;
      if (!request_ended(t, &p.net, &st, &got)) continue;
      moved = true;
      if (st == HMC_PLUGIN_ERR_REMOTE) {
        fail_local(HMC_ERR_REMOTE, fmt::format("{} with {}: refused by the peer (outside the "
                                               "region, unknown or deregistered key, or access "
                                               "not granted)",
                                               what, peer.name));
        p.state = PieceState::Done;
        continue;
      }
      if (st != HMC_PLUGIN_SUCCESS) {
        plugin_failed(st);
        return true;
      }
      if (put_ || status_ != HMC_SUCCESS) {
        p.state = PieceState::Done;
        continue;
      }
      hmc_status_t cs = env.copier->start(user_ + p.offset, p.bounce, p.len, &p.copy);
      if (cs != HMC_SUCCESS) {
        fail_local(cs,
                   fmt::format("{}: copying a piece into device memory: {}", what, last_error()));
        p.state = PieceState::Done;
        continue;
      }
      p.state = PieceState::Unloading;
    }
  }
  moved |= pipe_.release(env);
  if (pipe_.idle() && (next_index_ == pieces_ || status_ != HMC_SUCCESS)) {
    bytes_ = status_ == HMC_SUCCESS ? size_ : 0;
    end_ = End::Finished;
    if (status_ == HMC_SUCCESS)
      peer.framing.staged_transfers.fetch_add(1, std::memory_order_relaxed);
  }
  return moved;
}

}  // namespace hmc
