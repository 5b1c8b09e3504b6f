// Framed messages as pieces through the transport: each side's order per tag, piece 0, the
// header, the pieces and their bounce buffers, and the reply to a header that offers another way.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "device/stage_pool.h"
#include "framed/framed_message.h"
#include "net/net_plugin.h"
#include "peer/peer.h"
#include "request/request.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {
namespace {

using TagFifos = std::unordered_map<uint64_t, std::deque<Request*>>;

// Removes req from the FIFO of its tag, wherever it is.
void unlist(TagFifos& fifos, uint64_t tag, Request* req) {
  auto it = fifos.find(tag);
  if (it == fifos.end()) return;
  auto& q = it->second;
  for (auto i = q.begin(); i != q.end(); ++i)
    if (*i == req) {
      q.erase(i);
      break;
    }
  if (q.empty()) fifos.erase(it);
}

bool is_front(TagFifos& fifos, uint64_t tag, const Request* req) {
  auto it = fifos.find(tag);
  return it != fifos.end() && !it->second.empty() && it->second.front() == req;
}

}  // namespace

// ---- send ------------------------------------------------------------------------------------

FramedSend::FramedSend(const void* buf, size_t size, uint64_t tag, bool staged,
                       const FrameGeometry& g)
    : FramedTransfer(const_cast<void*>(buf), size),
      tag_(tag),
      geo_(g),
      staged_(staged),
      pieces_(piece_count(size, g)) {}

bool FramedSend::step(Request* req, Peer& peer, const StageEnv& env) {
  if (stage_ == Stage::New) {
    peer.framing.sends[tag_].push_back(req);
    stage_ = Stage::Posting;
  }
  bool moved = stage_pieces(env);
  moved |= poll_copies();
  if (loss_ == Loss::All) {  // nothing left the process: nothing will
    for (auto& p : pipe_)
      if (p.state == PieceState::Ready) p.state = PieceState::Done;
  }
  moved |= post_pieces(req, peer, env);
  if (broken()) return true;
  moved |= test_posted(peer);
  if (broken()) return true;
  moved |= advance_shared(peer);
  if (broken()) return true;
  moved |= pipe_.release(env);
  try_finish(req, peer);
  return moved;
}

// Starts the next pieces (their device-to-bounce copies where the memory is staged).
bool FramedSend::stage_pieces(const StageEnv& env) {
  bool moved = false;
  while (next_index_ < pieces_ && pipe_.has_room(env)) {
    if (loss_ == Loss::All) break;
    Piece p;
    p.index = next_index_;
    if (p.index == 1) {
      prepare_header(env, p);
    } else {
      if (p.index == 0)
        p.len = static_cast<size_t>(pieces_ == 1 ? size_ : geo_.first);
      else
        piece_span(p.index, size_, geo_, &p.offset, &p.len);
      if (loss_ != Loss::None) p.len = 0;
      if (staged_ && p.len > 0) {
        p.bounce = env.pool->take();
        if (!p.bounce) break;  // the pool is in use; try again on a later pass
        hmc_status_t st = env.copier->start(p.bounce, user_ + p.offset, p.len, &p.copy);
        if (st != HMC_SUCCESS) {
          env.pool->give(p.bounce);
          p.bounce = nullptr;
          fail_local(st,
                     fmt::format("hmc_send: staging a piece from device memory: {}", last_error()));
          lose(p.index == 0);
          p.len = 0;
          if (p.index == 0) break;  // nothing of the message can go out
        } else {
          p.state = PieceState::Copying;
        }
      }
    }
    pipe_.add(std::move(p));
    ++next_index_;
    moved = true;
  }
  return moved;
}

// The header says which way the rest goes; shared bounces only where the pool can share.
void FramedSend::prepare_header(const StageEnv& env, Piece& h) {
  if (way_ == Way::Shared && !env.pool->shareable()) way_ = Way::Transport;
  if (way_ == Way::Ipc) {
    ipc_export_.shared_too = ipc_export_.shared_too && env.pool->shareable();
    h.len = encode_ipc_header(header_, size_, ipc_export_);
  } else if (way_ == Way::Shared) {
    h.len = encode_shared_header(header_, size_, static_cast<uint32_t>(getpid()));
  } else {
    h.len = encode_pieces_header(header_, size_);
  }
}

// Device-to-bounce copies that ended: their pieces are ready to post (empty after a failure).
bool FramedSend::poll_copies() {
  bool moved = false;
  for (auto& p : pipe_) {
    if (p.state != PieceState::Copying) continue;
    hmc_status_t st = p.copy.poll();
    if (st == HMC_IN_PROGRESS) continue;
    moved = true;
    if (st != HMC_SUCCESS) {
      fail_local(st, fmt::format("hmc_send: staging a piece from device memory: {}", last_error()));
      lose(p.index == 0);
      p.len = 0;
    }
    p.state = PieceState::Ready;
  }
  return moved;
}

// Posts the ready pieces in order, once this send is first in its tag's line.
bool FramedSend::post_pieces(Request* req, Peer& peer, const StageEnv& env) {
  if (in_line() && !is_front(peer.framing.sends, tag_, req)) return false;
  bool moved = false;
  const hmc_net_plugin_v2_t* t = peer.net->table();
  for (auto& p : pipe_) {
    if (p.index != posted_) continue;
    if (p.state != PieceState::Ready) break;
    if (loss_ == Loss::All) break;
    // After a header that offers another way the reply decides what the pieces are (their
    // device-to-host copies go on meanwhile).
    if (p.index >= 2 && stage_ == Stage::AwaitingReply) break;
    if (way_ == Way::Shared && p.index >= 2) {  // a descriptor of the bounce instead of its bytes
      if (!post_shared_piece(p, peer, env)) return true;
      ++posted_;
      moved = true;
      continue;
    }
    // The reply's receive goes before the offer (std::list: the loop's iterator stays valid).
    if (p.index == 1 && way_ != Way::Transport && !post_reply_recv(peer)) return true;
    const void* buf = p.index == 1 ? header_ : p.bounce ? p.bounce : user_ + p.offset;
    hmc_plugin_status_t ps =
        t->isend(peer.ep, buf, p.len, nullptr, wire_tag(tag_, p.index), &p.net);
    if (ps != HMC_PLUGIN_SUCCESS) {
      plugin_failed(ps);
      return true;
    }
    p.state = PieceState::Posted;
    ++posted_;
    moved = true;
  }
  // A message that offered another way keeps the tag's continuation stream until its reply: a
  // "send pieces" answer puts its pieces there.
  if (posted_ == pieces_ && stage_ == Stage::Posting) {
    unlist(peer.framing.sends, tag_, req);
    stage_ = Stage::Posted;
  }
  return moved;
}

bool FramedSend::test_posted(Peer& peer) {
  bool moved = false;
  const hmc_net_plugin_v2_t* t = peer.net->table();
  for (auto& p : pipe_) {
    if (p.state != PieceState::Posted || p.shared) continue;
    hmc_plugin_status_t st;
    size_t got;
    if (!request_ended(t, &p.net, &st, &got)) continue;
    moved = true;
    if (p.index == Piece::kReplyIndex) {
      if (st == HMC_PLUGIN_SUCCESS && got != sizeof reply_) st = HMC_PLUGIN_ERR_TRUNCATED;
      if (st != HMC_PLUGIN_SUCCESS) {
        if (st == HMC_PLUGIN_ERR_TRUNCATED) {
          HMC_LOG_W("peer {}: device IPC message on tag {}: malformed reply", peer.name, tag_);
          st = HMC_PLUGIN_ERR_INTERNAL;
        }
        plugin_failed(st);
        return true;
      }
      p.state = PieceState::Done;
      on_reply(peer);
      if (broken()) return true;
      continue;
    }
    if (st != HMC_PLUGIN_SUCCESS) {
      plugin_failed(st);
      return true;
    }
    p.state = PieceState::Done;
  }
  return moved;
}

void FramedSend::try_finish(Request* req, Peer& peer) {
  if (!pipe_.idle()) return;
  bool all_out = (posted_ == pieces_ && stage_ != Stage::AwaitingReply) || loss_ == Loss::All;
  if (!all_out) return;
  if (in_line()) unlist(peer.framing.sends, tag_, req);
  stage_ = Stage::Posted;
  bytes_ = size_;
  end_ = End::Finished;
  if (status_ != HMC_SUCCESS) return;
  if (way_ == Way::Ipc)
    peer.framing.ipc_messages.fetch_add(1, std::memory_order_relaxed);
  else if (staged_ && bytes_ > 0)
    peer.framing.staged_transfers.fetch_add(1, std::memory_order_relaxed);
  if (way_ == Way::Shared && bytes_ > 0)
    peer.framing.shared_messages.fetch_add(1, std::memory_order_relaxed);
}

hmc_plugin_status_t FramedSend::cancel_step(Request*, Peer& peer) {
  if (posted_ > 0) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  fail_local(HMC_ERR_CANCELLED, fmt::format("hmc_send to {}: cancelled", peer.name));
  loss_ = Loss::All;  // copies in flight end, nothing is sent
  return HMC_PLUGIN_SUCCESS;
}

// The reply to an offer of device IPC or shared bounces.
bool FramedSend::post_reply_recv(Peer& peer) {
  Piece r;
  r.index = Piece::kReplyIndex;
  r.len = sizeof reply_;
  hmc_plugin_status_t ps =
      peer.net->table()->irecv(peer.ep, reply_, sizeof reply_, nullptr, reply_tag(tag_), &r.net);
  if (ps != HMC_PLUGIN_SUCCESS) {
    plugin_failed(ps);
    return false;
  }
  r.state = PieceState::Posted;
  pipe_.add(std::move(r));
  stage_ = Stage::AwaitingReply;
  return true;
}

void FramedSend::on_reply(Peer& peer) {
  stage_ = Stage::Posting;
  const uint32_t code = decode_reply(reply_);
  if (code == kReplyDone && way_ == Way::Ipc) return;
  bool known = way_ == Way::Ipc ? code == kReplyPieces || code == kReplyNoIpc ||
                                      (code == kReplyShared && ipc_export_.shared_too)
                                : code == kReplyPieces || code == kReplyShared;
  if (!known) {
    HMC_LOG_W("peer {}: framed message on tag {}: unexpected reply {}", peer.name, tag_, code);
    plugin_failed(HMC_PLUGIN_ERR_INTERNAL);
    return;
  }
  if (code == kReplyNoIpc && !peer.framing.ipc_refused.exchange(true))
    HMC_LOG_I("peer {}: it cannot map this process's device memory; device IPC to it is off",
              peer.name);
  way_ = code == kReplyShared ? Way::Shared : Way::Transport;
  pieces_ = framed_piece_count(size_, geo_);  // stage_pieces goes on from piece 2
}

// ---- receive ---------------------------------------------------------------------------------

FramedRecv::FramedRecv(void* buf, size_t capacity, uint64_t tag, bool staged,
                       const FrameGeometry& g)
    : FramedTransfer(buf, capacity), tag_(tag), geo_(g), staged_(staged) {}

FramedRecv::~FramedRecv() = default;

bool FramedRecv::step(Request* req, Peer& peer, const StageEnv& env) {
  if (stage_ == Stage::New) {
    peer.framing.streams[tag_].push_back(req);
    stage_ = Stage::WaitingTurn;
  }
  bool moved = post_pieces(req, peer, env);
  if (broken()) return true;
  moved |= test_posted(req, peer, env);
  if (broken()) return true;
  moved |= finish_ipc_copy(peer, env);
  if (broken()) return true;
  moved |= advance_shared(peer, env);
  if (broken()) return true;
  moved |= poll_copies();
  moved |= pipe_.release(env);
  // What test_posted learnt may allow the next pieces right away.
  if (moved && !broken()) moved |= post_pieces(req, peer, env);
  if (broken()) return true;
  try_finish(req, peer);
  return moved;
}

// Piece 0 was the whole message, or the receive ended before it needed the stream: the next
// receive of the tag may take the stream.
void FramedRecv::become_single(Request* req, Peer& peer) {
  if (in_streams()) unlist(peer.framing.streams, tag_, req);
  stage_ = Stage::Single;
  pieces_ = 1;
}

bool FramedRecv::post_piece0(Request* req, Peer& peer, const StageEnv& env) {
  auto& first = peer.framing.first;
  auto waiting = first.find(tag_);
  if (waiting != first.end() && !is_front(first, tag_, req)) {
    auto& q = waiting->second;
    if (std::find(q.begin(), q.end(), req) == q.end()) q.push_back(req);
    return false;
  }
  Piece p;
  p.index = 0;
  p.len = static_cast<size_t>(std::min<uint64_t>(size_, geo_.chunk));
  if (staged_ && p.len > 0) {
    p.bounce = env.pool->take();
    if (!p.bounce) {
      if (!is_front(first, tag_, req)) {
        first[tag_].push_back(req);
        // A receive of staged memory holds a bounce buffer from its post until its message
        // comes: more of them than the pool holds wait, and if their messages are sent only
        // after messages they keep out, the application waits until the timeout.
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true))
          HMC_LOG_W(
              "staging pool full: receives of device memory wait for a bounce buffer "
              "(HMC_STAGE_POOL_BYTES={} bytes); posting more of them than it holds can "
              "stall a pattern that needs them all posted",
              env.pool->capacity_bytes());
      }
      return false;
    }
  }
  void* buf = p.bounce ? p.bounce : user_;
  hmc_plugin_status_t ps = peer.net->table()->irecv(peer.ep, buf, p.len, nullptr, tag_, &p.net);
  unlist(first, tag_, req);
  stage_ = Stage::Piece0;
  next_index_ = 1;
  if (ps != HMC_PLUGIN_SUCCESS) {  // never posted: it ends here, one way or the other
    if (p.bounce) env.pool->give(p.bounce);
    plugin_failed(ps);
    if (ps == HMC_PLUGIN_ERR_PEER_LOST) end_ = End::Unmatched;
    return true;
  }
  p.state = PieceState::Posted;
  pipe_.add(std::move(p));
  return true;
}

bool FramedRecv::post_pieces(Request* req, Peer& peer, const StageEnv& env) {
  bool moved = false;
  if (stage_ == Stage::WaitingTurn) {
    moved = post_piece0(req, peer, env);
    if (broken()) return true;
  }
  if (stage_ == Stage::WaitingTurn || stage_ == Stage::Piece0 || stage_ == Stage::Single)
    return moved;
  const hmc_net_plugin_v2_t* t = peer.net->table();
  // The continuation stream: only the oldest receive of the tag that still may need it.
  if (stage_ == Stage::AwaitingStream) {
    if (!is_front(peer.framing.streams, tag_, req)) return moved;
    stage_ = Stage::Header;
    Piece h;
    h.index = 1;
    h.len = sizeof header_;  // any version
    hmc_plugin_status_t ps =
        t->irecv(peer.ep, header_, sizeof header_, nullptr, wire_tag(tag_, 1), &h.net);
    if (ps != HMC_PLUGIN_SUCCESS) {
      plugin_failed(ps);
      return true;
    }
    h.state = PieceState::Posted;
    pipe_.add(std::move(h));
    moved = true;
  }
  if (stage_ == Stage::Header) return moved;  // header not in yet
  if (way_ == Way::Shared) {
    bool posted = post_shared_pieces(peer, env);
    return moved || posted;
  }
  while (next_index_ < pieces_ && pipe_.has_room(env)) {
    Piece p;
    p.index = next_index_;
    piece_span(p.index, total_, geo_, &p.offset, &p.len);
    p.fit = p.offset >= size_ ? 0 : std::min(p.len, size_ - p.offset);
    if (draining_ || staged_ || p.fit < p.len) {
      p.bounce = env.pool->take();
      if (!p.bounce) break;
    }
    void* buf = p.bounce ? p.bounce : user_ + p.offset;
    hmc_plugin_status_t ps =
        t->irecv(peer.ep, buf, p.len, nullptr, wire_tag(tag_, p.index), &p.net);
    if (ps != HMC_PLUGIN_SUCCESS) {
      if (p.bounce) env.pool->give(p.bounce);
      plugin_failed(ps);
      return true;
    }
    p.state = PieceState::Posted;
    pipe_.add(std::move(p));
    ++next_index_;
    moved = true;
  }
  return moved;
}

bool FramedRecv::test_posted(Request* req, Peer& peer, const StageEnv& env) {
  bool moved = false;
  const hmc_net_plugin_v2_t* t = peer.net->table();
  for (auto& p : pipe_) {
    if (p.state != PieceState::Posted || p.shared) continue;
    hmc_plugin_status_t st;
    size_t got;
    if (!request_ended(t, &p.net, &st, &got)) continue;
    moved = true;
    if (p.index == Piece::kReplyIndex) {  // this side's reply left
      if (st != HMC_PLUGIN_SUCCESS) {
        if (st == HMC_PLUGIN_ERR_TRUNCATED) {
          HMC_LOG_W("peer {}: device IPC message on tag {}: malformed reply", peer.name, tag_);
          st = HMC_PLUGIN_ERR_INTERNAL;
        }
        plugin_failed(st);
        return true;
      }
      p.state = PieceState::Done;
      continue;
    }
    if (p.index == 0) {
      p.got = got;
      p.state = PieceState::Done;
      if (st == HMC_PLUGIN_ERR_CANCELLED) {
        fail_local(HMC_ERR_CANCELLED, fmt::format("hmc_recv from {}: cancelled", peer.name));
        become_single(req, peer);
        continue;
      }
      if (st != HMC_PLUGIN_SUCCESS && st != HMC_PLUGIN_ERR_TRUNCATED) {
        // PEER_LOST here: nothing the peer sent matches; the context decides whether the path
        // is gone or the peer closed in order (end_unmatched).
        plugin_failed(st);
        if (st == HMC_PLUGIN_ERR_PEER_LOST) end_ = End::Unmatched;
        return true;
      }
      on_piece0(req, peer, got, st);
      if (p.bounce && status_ == HMC_SUCCESS) {
        p.fit = std::min(got, std::min(size_, static_cast<size_t>(geo_.chunk)));
        unload_piece(p, env);
      }
      continue;
    }
    if (st != HMC_PLUGIN_SUCCESS) {
      if (st == HMC_PLUGIN_ERR_TRUNCATED) {
        // Pieces are posted with exactly the announced length: longer means a broken stream.
        st = HMC_PLUGIN_ERR_INTERNAL;
        HMC_LOG_W("peer {}: framed message on tag {}: a piece was longer than announced", peer.name,
                  tag_);
      }
      plugin_failed(st);
      return true;
    }
    p.got = got;
    if (p.index == 1) {
      p.state = PieceState::Done;
      Header h;
      if (!decode_header(header_, got, geo_.first, &h)) {
        HMC_LOG_W("peer {}: framed message on tag {}: malformed header ({} bytes)", peer.name, tag_,
                  got);
        plugin_failed(HMC_PLUGIN_ERR_INTERNAL);
        return true;
      }
      total_ = h.total;
      switch (h.kind) {
        case HeaderKind::Pieces: on_header(peer); break;
        case HeaderKind::Ipc: on_ipc_header(peer, env, h.ipc); break;
        case HeaderKind::Shared: on_shared_header(peer); break;
      }
      if (broken()) return true;
      continue;
    }
    if (got < p.len)
      fail_local(HMC_ERR_REMOTE,
                 fmt::format("hmc_recv from {} (tag {}): the sender aborted the message after "
                             "{} bytes (its device failed)",
                             peer.name, tag_, p.offset + got));
    p.state = PieceState::Done;
    if (status_ == HMC_SUCCESS) unload_piece(p, env);
  }
  return moved;
}

// Piece 0 arrived: a whole small message, or the start of a longer one.
void FramedRecv::on_piece0(Request* req, Peer& peer, size_t got, hmc_plugin_status_t st) {
  if (st == HMC_PLUGIN_ERR_TRUNCATED) {
    status_ = HMC_ERR_TRUNCATED;
    error_ = fmt::format(
        "hmc_recv from {} (tag {}): the message was larger than the {}-byte "
        "buffer",
        peer.name, tag_, size_);
    // Plugins report the sent length on truncation; a piece 0 of the first piece's size has a
    // stream behind it that must be read and dropped, or it would reach the next receive.
    if (got == geo_.first) {
      draining_ = true;
      stage_ = Stage::AwaitingStream;
    } else {
      become_single(req, peer);
    }
    return;
  }
  bytes_ = got;  // the rest, if any, comes after the header
  if (got != geo_.first)
    become_single(req, peer);
  else
    stage_ = Stage::AwaitingStream;
}

// A version 1 header arrived (or another version whose receiver asked for the pieces).
void FramedRecv::on_header(Peer& peer) {
  stage_ = Stage::Body;
  pieces_ = framed_piece_count(total_, geo_);
  next_index_ = 2;
  if (!draining_ && total_ > size_) {
    status_ = HMC_ERR_TRUNCATED;
    error_ = fmt::format(
        "hmc_recv from {} (tag {}): the {}-byte message was larger than the "
        "{}-byte buffer",
        peer.name, tag_, total_, size_);
    draining_ = true;  // the buffer content of a truncated receive is unspecified
  }
}

// A received piece sits in its bounce buffer (direct pieces are in place already): copy it out.
void FramedRecv::unload_piece(Piece& p, const StageEnv& env) {
  if (!p.bounce || p.fit == 0 || draining_) {
    p.state = PieceState::Done;
    return;
  }
  if (!staged_) {
    std::memcpy(user_ + p.offset, p.bounce, p.fit);
    p.state = PieceState::Done;
    return;
  }
  hmc_status_t st = env.copier->start(user_ + p.offset, p.bounce, p.fit, &p.copy);
  if (st != HMC_SUCCESS) {
    fail_local(st, fmt::format("hmc_recv: copying a piece into device memory: {}", last_error()));
    p.state = PieceState::Done;
    return;
  }
  p.state = PieceState::Unloading;
}

// Bounce-to-device copies of pieces that ended (device IPC's copy and shared bounces have
// their own: finish_ipc_copy, advance_shared).
bool FramedRecv::poll_copies() {
  bool moved = false;
  for (auto& p : pipe_) {
    if (p.state != PieceState::Unloading || p.index == Piece::kIpcCopyIndex || p.shared) continue;
    hmc_status_t st = p.copy.poll();
    if (st == HMC_IN_PROGRESS) continue;
    moved = true;
    if (st != HMC_SUCCESS)
      fail_local(st, fmt::format("hmc_recv: copying a piece into device memory: {}", last_error()));
    p.state = PieceState::Done;
  }
  return moved;
}

void FramedRecv::try_finish(Request* req, Peer& peer) {
  if (!pipe_.idle()) return;
  if (stage_ != Stage::Body && stage_ != Stage::Single) return;
  if (next_index_ < pieces_) return;  // more of the stream to read
  if (stage_ == Stage::Body) {
    if (!draining_) bytes_ = static_cast<size_t>(total_);
    unlist(peer.framing.streams, tag_, req);
  }
  end_ = End::Finished;
  if (status_ != HMC_SUCCESS) return;
  if (way_ == Way::Ipc)
    peer.framing.ipc_messages.fetch_add(1, std::memory_order_relaxed);
  else if (staged_ && bytes_ > 0)
    peer.framing.staged_transfers.fetch_add(1, std::memory_order_relaxed);
  if (way_ == Way::Shared && bytes_ > 0)
    peer.framing.shared_messages.fetch_add(1, std::memory_order_relaxed);
}

hmc_plugin_status_t FramedRecv::cancel_step(Request* req, Peer& peer) {
  if (stage_ == Stage::WaitingTurn) {
    unlist(peer.framing.first, tag_, req);
    fail_local(HMC_ERR_CANCELLED, fmt::format("hmc_recv from {}: cancelled", peer.name));
    next_index_ = 1;
    become_single(req, peer);
    return HMC_PLUGIN_SUCCESS;
  }
  if (pipe_.size() != 1 || pipe_.front().index != 0 || pipe_.front().state != PieceState::Posted)
    return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  if (!HMC_NET_SLOT(peer.net->table(), cancel)) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  return peer.net->table()->cancel(pipe_.front().net);  // test reports CANCELLED later
}

void FramedRecv::end_unmatched(Request* req, Peer& peer) {
  end_ = End::Running;
  fail_local(HMC_ERR_PEER_LOST, fmt::format("hmc_recv from {} (tag {}): the peer closed the "
                                            "connection",
                                            peer.name, tag_));
  become_single(req, peer);
  for (auto& p : pipe_)
    if (p.state == PieceState::Posted) p.state = PieceState::Done;  // the plugin ended it
  try_finish(req, peer);
}

void FramedRecv::settle(const StageEnv& env) {
  pipe_.settle(env);
  if (pipe_.idle()) mapping_.reset();  // no copy reads the peer's memory any more
}

// A header offering another way is answered on the reply tag.
bool FramedRecv::post_reply(Peer& peer, uint32_t code) {
  encode_reply(reply_, code);
  Piece r;
  r.index = Piece::kReplyIndex;
  r.len = sizeof reply_;
  hmc_plugin_status_t ps =
      peer.net->table()->isend(peer.ep, reply_, sizeof reply_, nullptr, reply_tag(tag_), &r.net);
  if (ps != HMC_PLUGIN_SUCCESS) {
    plugin_failed(ps);
    return false;
  }
  r.state = PieceState::Posted;
  pipe_.add(std::move(r));
  return true;
}

}  // namespace hmc
