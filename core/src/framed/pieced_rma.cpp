#include "framed/pieced_rma.h"

#include <algorithm>

#include "device/stage_pool.h"
#include "net/net_plugin.h"
#include "peer/peer.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

namespace {
// Direct pieces in flight at once: enough that a list of small ranges keeps the path busy (the
// plugin queues what its hardware cannot take), few enough that a long list does not hold a
// request per range.
constexpr size_t kDirectWindow = 128;
// Vectored chunks in flight at once: a 16 MiB list of small blocks is four chunks of
// VecPieces::kVecChunkBytes, all posted at once.
constexpr size_t kVecWindow = 8;
}  // namespace

std::shared_ptr<const VecPieces> make_vec_pieces(void* base, const std::vector<RmaSpan>& spans,
                                                 hmc_net_mr_t* mr) {
  auto v = std::make_shared<VecPieces>();
  v->mr = mr;
  v->iov.reserve(spans.size());
  auto* b = static_cast<uint8_t*>(base);
  VecPieces::Chunk c;
  for (const RmaSpan& s : spans) {
    if (c.count > 0 &&
        (c.count == VecPieces::kVecChunkPieces || c.bytes + s.len > VecPieces::kVecChunkBytes)) {
      v->chunks.push_back(c);
      c = VecPieces::Chunk{v->iov.size(), 0, 0};
    }
    v->iov.push_back({b + s.local, static_cast<size_t>(s.len), mr, s.remote_addr});
    ++c.count;
    c.bytes += s.len;
  }
  if (c.count > 0) v->chunks.push_back(c);
  return v;
}

PiecedRma::PiecedRma(bool put, void* base, uint64_t total, hmc_net_rkey_t* rkey, uint64_t chunk,
                     bool staged, hmc_net_mr_t* mr)
    : FramedTransfer(base, static_cast<size_t>(total)),
      put_(put),
      rkey_(rkey),
      chunk_(chunk),
      staged_(staged),
      mr_(mr) {}

std::unique_ptr<PiecedRma> PiecedRma::put(const void* buf, size_t size, uint64_t addr,
                                          hmc_net_rkey_t* rkey, uint64_t chunk) {
  std::unique_ptr<PiecedRma> r(
      new PiecedRma(true, const_cast<void*>(buf), size, rkey, chunk, true, nullptr));
  r->single_ = {0, addr, size};
  return r;
}

std::unique_ptr<PiecedRma> PiecedRma::get(void* buf, size_t size, uint64_t addr,
                                          hmc_net_rkey_t* rkey, uint64_t chunk) {
  std::unique_ptr<PiecedRma> r(new PiecedRma(false, buf, size, rkey, chunk, true, nullptr));
  r->single_ = {0, addr, size};
  return r;
}

std::unique_ptr<PiecedRma> PiecedRma::list(bool put, void* base,
                                           std::shared_ptr<const std::vector<RmaSpan>> spans,
                                           uint64_t total, hmc_net_rkey_t* rkey, uint64_t chunk,
                                           bool staged, hmc_net_mr_t* mr) {
  std::unique_ptr<PiecedRma> r(new PiecedRma(put, base, total, rkey, chunk, staged, mr));
  r->spans_ = std::move(spans);
  return r;
}

std::unique_ptr<PiecedRma> PiecedRma::vectored(bool put, std::shared_ptr<const VecPieces> vec,
                                               uint64_t total, hmc_net_rkey_t* rkey) {
  void* base = vec->iov.empty() ? nullptr : vec->iov.front().buf;
  std::unique_ptr<PiecedRma> r(new PiecedRma(put, base, total, rkey, 0, false, vec->mr));
  r->vec_ = std::move(vec);
  return r;
}

bool PiecedRma::all_issued() const {
  if (vec_) return next_span_ >= vec_->chunks.size();
  uint64_t ignored_remote;
  size_t ignored_local, ignored_len;
  return !next_piece(&ignored_local, &ignored_remote, &ignored_len);
}

bool PiecedRma::next_piece(size_t* local, uint64_t* remote, size_t* len) const {
  const RmaSpan* s;
  if (spans_) {
    if (next_span_ >= spans_->size()) return false;
    s = &(*spans_)[next_span_];
  } else {
    if (next_span_ > 0) return false;
    s = &single_;
  }
  // A direct span goes whole (the plugin splits what it must); a staged one in bounce-sized
  // pieces.
  uint64_t rest = s->len - next_offset_;
  *len = static_cast<size_t>(staged_ ? std::min(chunk_, rest) : rest);
  *local = static_cast<size_t>(s->local + next_offset_);
  *remote = s->remote_addr + next_offset_;
  return true;
}

void PiecedRma::advance_cursor(size_t len) {
  const RmaSpan& s = spans_ ? (*spans_)[next_span_] : single_;
  next_offset_ += len;
  if (next_offset_ == s.len) {
    ++next_span_;
    next_offset_ = 0;
  }
}

// New pieces, unless a piece failed: then the rest is not issued and the transfer ends once what
// is in flight has. False when the path failed (the caller returns at once).
bool PiecedRma::issue_pieces(Peer& peer, const StageEnv& env) {
  const hmc_net_plugin_v2_t* t = peer.net->table();
  const char* what = put_ ? "hmc_put" : "hmc_get";
  const size_t window = staged_ ? env.depth : kDirectWindow;
  Piece p;
  while (status_ == HMC_SUCCESS && pipe_.size() < window &&
         next_piece(&p.offset, &p.remote, &p.len)) {
    p.index = issued_;
    p.fit = p.len;
    p.bounce = nullptr;
    if (staged_ && !(p.bounce = env.pool->take())) break;  // the pool is in use; later
    if (put_ && staged_) {
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
        if (p.bounce) env.pool->give(p.bounce);
        plugin_failed(HMC_PLUGIN_ERR_PEER_LOST);
        return false;
      }
      void* local = p.bounce ? p.bounce : user_ + p.offset;
      hmc_net_mr_t* mr = p.bounce ? nullptr : mr_;
      hmc_plugin_status_t ps = put_ ? t->iput(peer.ep, local, p.len, mr, p.remote, rkey_, &p.net)
                                    : t->iget(peer.ep, local, p.len, mr, p.remote, rkey_, &p.net);
      if (ps != HMC_PLUGIN_SUCCESS) {
        if (p.bounce) env.pool->give(p.bounce);
        plugin_failed(ps);
        return false;
      }
      p.state = PieceState::Posted;
    }
    advance_cursor(p.len);
    ++issued_;
    pipe_.add(std::move(p));
    p = Piece();
  }
  return true;
}

// New chunks of a vectored list, one plugin request each, until kVecWindow are in flight. False
// when the path failed.
bool PiecedRma::issue_chunks(Peer& peer) {
  const hmc_net_plugin_v2_t* t = peer.net->table();
  while (status_ == HMC_SUCCESS && pipe_.size() < kVecWindow && next_span_ < vec_->chunks.size()) {
    if (!rkey_) {
      plugin_failed(HMC_PLUGIN_ERR_PEER_LOST);
      return false;
    }
    const VecPieces::Chunk& c = vec_->chunks[next_span_];
    Piece p;
    p.index = next_span_;
    p.len = p.fit = static_cast<size_t>(c.bytes);
    const hmc_net_iov_t* iov = vec_->iov.data() + c.first;
    hmc_plugin_status_t ps = put_ ? t->iput_v(peer.ep, iov, c.count, rkey_, &p.net)
                                  : t->iget_v(peer.ep, iov, c.count, rkey_, &p.net);
    if (ps != HMC_PLUGIN_SUCCESS) {
      plugin_failed(ps);
      return false;
    }
    p.state = PieceState::Posted;
    ++next_span_;
    pipe_.add(std::move(p));
  }
  return true;
}

// A staged put's piece goes Copying (device to bounce), Ready, Posted (iput), Done; a staged
// get's Posted (iget), Unloading (bounce to device), Done; a direct piece, or a vectored chunk,
// Posted, Done.
bool PiecedRma::step(Request*, Peer& peer, const StageEnv& env) {
  const hmc_net_plugin_v2_t* t = peer.net->table();
  const char* what = put_ ? "hmc_put" : "hmc_get";
  const size_t issued = vec_ ? next_span_ : issued_;
  if (!(vec_ ? issue_chunks(peer) : issue_pieces(peer, env))) return true;
  bool moved = (vec_ ? next_span_ : issued_) != issued;
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
    if (p.state == PieceState::Ready) {  // staged put: the piece is in its bounce buffer
      if (status_ != HMC_SUCCESS) {
        p.state = PieceState::Done;
        continue;
      }
      if (!rkey_) {
        plugin_failed(HMC_PLUGIN_ERR_PEER_LOST);
        return true;
      }
      hmc_plugin_status_t ps = t->iput(peer.ep, p.bounce, p.len, nullptr, p.remote, rkey_, &p.net);
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
      if (!request_ended(t, &p.net, &st, &got)) {
        // Direct pieces end about in the order they went out: while the oldest runs, testing
        // the hundred behind it would only cost a call each, on every step.
        if (!staged_) break;
        continue;
      }
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
      if (put_ || !p.bounce || status_ != HMC_SUCCESS) {
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
  if (pipe_.idle() && (all_issued() || status_ != HMC_SUCCESS)) {
    bytes_ = status_ == HMC_SUCCESS ? size_ : 0;
    end_ = End::Finished;
    if (status_ == HMC_SUCCESS && staged_)
      peer.framing.staged_transfers.fetch_add(1, std::memory_order_relaxed);
  }
  return moved;
}

}  // namespace hmc
