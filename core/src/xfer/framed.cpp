#include "xfer/framed.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "device/stage_pool.h"
#include "net/net_plugin.h"
#include "peer/peer.h"
#include "util/log.h"
#include "util/status.h"
#include "xfer/request.h"

namespace hmc {
namespace {

constexpr uint32_t kHeaderMagic = 0x464d4348;  // "HCMF"
constexpr uint16_t kHeaderVersion = 1;
constexpr size_t kHeaderSize = 16;

void encode_header(uint8_t* out, uint64_t total) {
  std::memcpy(out, &kHeaderMagic, 4);
  std::memcpy(out + 4, &kHeaderVersion, 2);
  std::memset(out + 6, 0, 2);
  std::memcpy(out + 8, &total, 8);
}

bool decode_header(const uint8_t* in, uint64_t chunk, uint64_t* total) {
  uint32_t magic;
  uint16_t version;
  std::memcpy(&magic, in, 4);
  std::memcpy(&version, in + 4, 2);
  std::memcpy(total, in + 8, 8);
  return magic == kHeaderMagic && version == kHeaderVersion && *total >= chunk;
}

// Pieces of a message of `size` bytes, header included (1 for a message below the chunk).
size_t piece_count(uint64_t size, uint64_t chunk) {
  if (size < chunk) return 1;
  return 2 + static_cast<size_t>((size - chunk + chunk - 1) / chunk);
}

// Where piece `index` (>= 2) starts in the message, and how long it is.
void piece_geometry(size_t index, uint64_t total, uint64_t chunk, size_t* offset, size_t* len) {
  uint64_t off = chunk + uint64_t(index - 2) * chunk;
  *offset = static_cast<size_t>(off);
  *len = static_cast<size_t>(std::min<uint64_t>(chunk, total - off));
}

uint64_t wire_tag(uint64_t tag, size_t index) { return index == 0 ? tag : tag | kContinuationTagBit; }

// Removes req from the FIFO of its tag in `fifos`, wherever it is.
void unlist(std::unordered_map<uint64_t, std::deque<Request*>>& fifos, uint64_t tag, Request* req) {
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

bool is_front(std::unordered_map<uint64_t, std::deque<Request*>>& fifos, uint64_t tag,
              const Request* req) {
  auto it = fifos.find(tag);
  return it != fifos.end() && !it->second.empty() && it->second.front() == req;
}

}  // namespace

std::unique_ptr<Framed> Framed::make_send(const void* buf, size_t size, uint64_t tag, bool staged,
                                          uint64_t chunk) {
  std::unique_ptr<Framed> f(new Framed());
  f->send_ = true;
  f->staged_ = staged;
  f->user_ = static_cast<uint8_t*>(const_cast<void*>(buf));
  f->size_ = size;
  f->tag_ = tag;
  f->chunk_ = chunk;
  f->pieces_ = piece_count(size, chunk);
  return f;
}

std::unique_ptr<Framed> Framed::make_recv(void* buf, size_t capacity, uint64_t tag, bool staged,
                                          uint64_t chunk) {
  std::unique_ptr<Framed> f(new Framed());
  f->send_ = false;
  f->staged_ = staged;
  f->user_ = static_cast<uint8_t*>(buf);
  f->size_ = capacity;
  f->tag_ = tag;
  f->chunk_ = chunk;
  return f;
}

std::unique_ptr<Framed> Framed::make_put(const void* buf, size_t size, uint64_t addr,
                                         hmc_net_rkey_t* rkey, uint64_t chunk) {
  std::unique_ptr<Framed> f = make_send(buf, size, 0, true, chunk);
  f->rma_ = true;
  f->rma_addr_ = addr;
  f->rkey_ = rkey;
  f->pieces_ = static_cast<size_t>((size + chunk - 1) / chunk);
  return f;
}

std::unique_ptr<Framed> Framed::make_get(void* buf, size_t size, uint64_t addr,
                                         hmc_net_rkey_t* rkey, uint64_t chunk) {
  std::unique_ptr<Framed> f = make_recv(buf, size, 0, true, chunk);
  f->rma_ = true;
  f->rma_addr_ = addr;
  f->rkey_ = rkey;
  f->pieces_ = static_cast<size_t>((size + chunk - 1) / chunk);
  return f;
}

Framed::~Framed() = default;

size_t Framed::window() const { return slots_.size(); }

void Framed::fail_local(hmc_status_t st, std::string why) {
  if (status_ == HMC_SUCCESS) {
    status_ = st;
    error_ = std::move(why);
  }
}

void Framed::plugin_failed(hmc_plugin_status_t st) {
  broken_ = true;
  plugin_status_ = st;
}

bool Framed::advance(Request* req, Peer& peer, const StageEnv& env) {
  if (finished_ || broken_) return false;
  if (rma_) return advance_rma(peer, env);
  return send_ ? advance_send(req, peer, env) : advance_recv(req, peer, env);
}

// ---- put and get of staged local memory ------------------------------------------------------

bool Framed::advance_rma(Peer& peer, const StageEnv& env) {
  const hmc_net_plugin_v1_t* t = peer.net->table();
  const char* what = send_ ? "hmc_put" : "hmc_get";
  bool moved = false;
  // New pieces, unless a piece failed: then the rest is not issued and the transfer ends once
  // what is in flight has.
  while (status_ == HMC_SUCCESS && next_index_ < pieces_ && window() < env.depth) {
    Slot s;
    s.index = next_index_;
    s.offset = static_cast<size_t>(uint64_t(s.index) * chunk_);
    s.len = static_cast<size_t>(std::min<uint64_t>(chunk_, size_ - s.offset));
    s.fit = s.len;
    s.bounce = env.pool->take();
    if (!s.bounce) break;  // the pool is in use; later
    if (send_) {
      hmc_status_t st = env.copier->start(s.bounce, user_ + s.offset, s.len, &s.copy);
      if (st != HMC_SUCCESS) {
        env.pool->give(s.bounce);
        fail_local(st, fmt::format("{}: staging a piece from device memory: {}", what, last_error()));
        break;
      }
      s.state = SlotState::Copying;
    } else {
      if (!rkey_) {
        env.pool->give(s.bounce);
        plugin_failed(HMC_PLUGIN_ERR_PEER_LOST);
        return true;
      }
      hmc_plugin_status_t ps = t->iget(peer.ep, s.bounce, s.len, nullptr, rma_addr_ + s.offset,
                                       rkey_, &s.net);
      if (ps != HMC_PLUGIN_SUCCESS) {
        env.pool->give(s.bounce);
        plugin_failed(ps);
        return true;
      }
      s.state = SlotState::Posted;
    }
    slots_.push_back(std::move(s));
    ++next_index_;
    moved = true;
  }
  for (auto& s : slots_) {
    if (s.state == SlotState::Copying || s.state == SlotState::Unloading) {
      hmc_status_t st = s.copy.poll();
      if (st == HMC_IN_PROGRESS) continue;
      moved = true;
      if (st != HMC_SUCCESS) {
        fail_local(st, fmt::format("{}: {} device memory: {}", what,
                                   send_ ? "staging a piece from" : "copying a piece into",
                                   last_error()));
        s.state = SlotState::Done;
        continue;
      }
      s.state = s.state == SlotState::Copying ? SlotState::Ready : SlotState::Done;
    }
    if (s.state == SlotState::Ready) {  // put: the piece is in its bounce buffer
      if (status_ != HMC_SUCCESS) {
        s.state = SlotState::Done;
        continue;
      }
      if (!rkey_) {
        plugin_failed(HMC_PLUGIN_ERR_PEER_LOST);
        return true;
      }
      hmc_plugin_status_t ps = t->iput(peer.ep, s.bounce, s.len, nullptr, rma_addr_ + s.offset,
                                       rkey_, &s.net);
      if (ps != HMC_PLUGIN_SUCCESS) {
        plugin_failed(ps);
        return true;
      }
      s.state = SlotState::Posted;
      moved = true;
    }
    if (s.state == SlotState::Posted) {
      int done = 0;
      size_t got = 0;
      hmc_plugin_status_t st = t->test(s.net, &done, &got);
      if (!done && st == HMC_PLUGIN_SUCCESS) continue;
      s.net = nullptr;
      moved = true;
      if (st == HMC_PLUGIN_ERR_REMOTE) {
        fail_local(HMC_ERR_REMOTE, fmt::format("{} with {}: refused by the peer (outside the "
                                               "region, unknown or deregistered key, or access "
                                               "not granted)", what, peer.name));
        s.state = SlotState::Done;
        continue;
      }
      if (st != HMC_PLUGIN_SUCCESS) {
        plugin_failed(st);
        return true;
      }
      if (send_ || status_ != HMC_SUCCESS) {
        s.state = SlotState::Done;
        continue;
      }
      hmc_status_t cs = env.copier->start(user_ + s.offset, s.bounce, s.len, &s.copy);
      if (cs != HMC_SUCCESS) {
        fail_local(cs, fmt::format("{}: copying a piece into device memory: {}", what, last_error()));
        s.state = SlotState::Done;
        continue;
      }
      s.state = SlotState::Unloading;
    }
  }
  moved |= release(env);
  if (slots_.empty() && (next_index_ == pieces_ || status_ != HMC_SUCCESS)) {
    bytes_ = status_ == HMC_SUCCESS ? size_ : 0;
    finished_ = true;
  }
  return moved;
}

// ---- send -----------------------------------------------------------------------------------

bool Framed::prepare_send(const StageEnv& env) {
  bool moved = false;
  while (next_index_ < pieces_ && window() < env.depth) {
    if (dropped_) break;
    Slot s;
    s.index = next_index_;
    if (s.index == 1) {
      encode_header(header_, size_);
      s.len = kHeaderSize;
    } else {
      if (s.index == 0) s.len = static_cast<size_t>(std::min<uint64_t>(size_, chunk_));
      else piece_geometry(s.index, size_, chunk_, &s.offset, &s.len);
      if (aborted_) s.len = 0;
      if (staged_ && s.len > 0) {
        s.bounce = env.pool->take();
        if (!s.bounce) break;  // the pool is in use; try again on a later pass
        hmc_status_t st = env.copier->start(s.bounce, user_ + s.offset, s.len, &s.copy);
        if (st != HMC_SUCCESS) {
          env.pool->give(s.bounce);
          s.bounce = nullptr;
          fail_local(st, fmt::format("hmc_send: staging a piece from device memory: {}", last_error()));
          aborted_ = true;
          s.len = 0;
          if (s.index == 0) {  // nothing of the message can go out
            dropped_ = true;
            break;
          }
        } else {
          s.state = SlotState::Copying;
        }
      }
    }
    slots_.push_back(std::move(s));
    ++next_index_;
    moved = true;
  }
  return moved;
}

bool Framed::poll_copies(const StageEnv& env) {
  bool moved = false;
  for (auto& s : slots_) {
    if (s.state != SlotState::Copying && s.state != SlotState::Unloading) continue;
    hmc_status_t st = s.copy.poll();
    if (st == HMC_IN_PROGRESS) continue;
    moved = true;
    if (s.state == SlotState::Copying) {  // device -> bounce, before sending
      if (st != HMC_SUCCESS) {
        fail_local(st, fmt::format("hmc_send: staging a piece from device memory: {}", last_error()));
        aborted_ = true;
        s.len = 0;
        if (s.index == 0) dropped_ = true;
      }
      s.state = SlotState::Ready;
    } else {  // bounce -> device, after receiving
      if (st != HMC_SUCCESS)
        fail_local(st, fmt::format("hmc_recv: copying a piece into device memory: {}", last_error()));
      s.state = SlotState::Done;
    }
  }
  (void)env;
  return moved;
}

bool Framed::post_sends(Request* req, Peer& peer) {
  if (in_sends_ && !is_front(peer.framing.sends, tag_, req)) return false;
  bool moved = false;
  const hmc_net_plugin_v1_t* t = peer.net->table();
  for (auto& s : slots_) {
    if (s.index != posted_) continue;
    if (s.state != SlotState::Ready) break;
    if (dropped_) break;
    const void* buf = s.index == 1 ? header_ : s.bounce ? s.bounce : user_ + s.offset;
    hmc_plugin_status_t ps = t->isend(peer.ep, buf, s.len, nullptr, wire_tag(tag_, s.index), &s.net);
    if (ps != HMC_PLUGIN_SUCCESS) {
      plugin_failed(ps);
      return true;
    }
    s.state = SlotState::Posted;
    if (s.index == 0) piece0_posted_ = true;
    ++posted_;
    moved = true;
  }
  if (posted_ == pieces_ && in_sends_) {
    unlist(peer.framing.sends, tag_, req);
    in_sends_ = false;
  }
  return moved;
}

bool Framed::test_posted(Peer& peer, const StageEnv& env) {
  bool moved = false;
  const hmc_net_plugin_v1_t* t = peer.net->table();
  for (auto& s : slots_) {
    if (s.state != SlotState::Posted) continue;
    int done = 0;
    size_t got = 0;
    hmc_plugin_status_t st = t->test(s.net, &done, &got);
    if (!done && st == HMC_PLUGIN_SUCCESS) continue;
    s.net = nullptr;
    moved = true;
    if (send_) {
      if (st != HMC_PLUGIN_SUCCESS) {
        plugin_failed(st);
        return true;
      }
      s.state = SlotState::Done;
      continue;
    }
    // Receives.
    if (s.index == 0) {
      s.got = got;
      s.state = SlotState::Done;
      if (st == HMC_PLUGIN_ERR_CANCELLED) {
        fail_local(HMC_ERR_CANCELLED, fmt::format("hmc_recv from {}: cancelled", peer.name));
        pieces_ = 1;
        continue;
      }
      if (st != HMC_PLUGIN_SUCCESS && st != HMC_PLUGIN_ERR_TRUNCATED) {
        // PEER_LOST here: nothing the peer sent matches; the context decides whether the path
        // is gone or the peer closed in order (end_unmatched).
        unmatched_ = st == HMC_PLUGIN_ERR_PEER_LOST;
        plugin_failed(st);
        return true;
      }
      on_piece0(peer, got, st);
      if (s.bounce && status_ == HMC_SUCCESS) {
        size_t n = std::min(got, std::min(size_, static_cast<size_t>(chunk_)));
        s.fit = n;
        finish_piece_recv(s, env);
      }
      continue;
    }
    if (st != HMC_PLUGIN_SUCCESS) {
      if (st == HMC_PLUGIN_ERR_TRUNCATED) {
        // Pieces are posted with exactly the announced length: longer means a broken stream.
        st = HMC_PLUGIN_ERR_INTERNAL;
        HMC_LOG_W("peer {}: framed message on tag {}: a piece was longer than announced",
                  peer.name, tag_);
      }
      plugin_failed(st);
      return true;
    }
    s.got = got;
    if (s.index == 1) {
      s.state = SlotState::Done;
      if (got != kHeaderSize || !decode_header(header_, chunk_, &total_)) {
        HMC_LOG_W("peer {}: framed message on tag {}: malformed header ({} bytes)", peer.name,
                  tag_, got);
        plugin_failed(HMC_PLUGIN_ERR_INTERNAL);
        return true;
      }
      on_header(peer);
      continue;
    }
    if (got < s.len)
      fail_local(HMC_ERR_REMOTE,
                 fmt::format("hmc_recv from {} (tag {}): the sender aborted the message after "
                             "{} bytes (its device failed)", peer.name, tag_, s.offset + got));
    s.state = SlotState::Done;
    if (status_ == HMC_SUCCESS) finish_piece_recv(s, env);
  }
  return moved;
}

bool Framed::advance_send(Request* req, Peer& peer, const StageEnv& env) {
  if (!in_sends_ && posted_ == 0 && next_index_ == 0) {  // first call, at post time
    peer.framing.sends[tag_].push_back(req);
    in_sends_ = true;
  }
  bool moved = prepare_send(env);
  moved |= poll_copies(env);
  if (dropped_) {  // nothing left the process: nothing will
    for (auto& s : slots_)
      if (s.state == SlotState::Ready) s.state = SlotState::Done;
  }
  moved |= post_sends(req, peer);
  if (broken_) return true;
  moved |= test_posted(peer, env);
  if (broken_) return true;
  moved |= release(env);
  try_finish(req, peer);
  return moved;
}

// ---- receive --------------------------------------------------------------------------------

// Piece 0 arrived: a whole small message, or the start of a longer one.
void Framed::on_piece0(Peer& peer, size_t got, hmc_plugin_status_t st) {
  const bool big_buffer = size_ >= chunk_;
  if (st == HMC_PLUGIN_ERR_TRUNCATED) {
    status_ = HMC_ERR_TRUNCATED;
    error_ = fmt::format("hmc_recv from {} (tag {}): the message was larger than the {}-byte "
                         "buffer", peer.name, tag_, size_);
    // Plugins report the sent length on truncation; a piece 0 of a whole chunk has a stream
    // behind it that must be read and dropped, or it would reach the next message's receive.
    if (got >= chunk_) draining_ = true;
    else pieces_ = 1;
    return;
  }
  if (!big_buffer || got < chunk_) {
    pieces_ = 1;
    bytes_ = got;
    return;
  }
  bytes_ = got;  // the rest comes after the header
}

void Framed::on_header(Peer& peer) {
  pieces_ = piece_count(total_, chunk_);
  next_index_ = 2;
  if (!draining_ && total_ > size_) {
    status_ = HMC_ERR_TRUNCATED;
    error_ = fmt::format("hmc_recv from {} (tag {}): the {}-byte message was larger than the "
                         "{}-byte buffer", peer.name, tag_, total_, size_);
    draining_ = true;  // the buffer content of a truncated receive is unspecified
  }
}

void Framed::finish_piece_recv(Slot& s, const StageEnv& env) {
  // Called when a received piece sits in its bounce buffer; direct pieces are already in place.
  if (!s.bounce || s.fit == 0 || draining_) {
    s.state = SlotState::Done;
    return;
  }
  if (!staged_) {
    std::memcpy(user_ + s.offset, s.bounce, s.fit);
    s.state = SlotState::Done;
    return;
  }
  hmc_status_t st = env.copier->start(user_ + s.offset, s.bounce, s.fit, &s.copy);
  if (st != HMC_SUCCESS) {
    fail_local(st, fmt::format("hmc_recv: copying a piece into device memory: {}", last_error()));
    s.state = SlotState::Done;
    return;
  }
  s.state = SlotState::Unloading;
}

bool Framed::post_recvs(Request* req, Peer& peer, const StageEnv& env) {
  bool moved = false;
  const hmc_net_plugin_v1_t* t = peer.net->table();
  if (!piece0_posted_) {
    auto& first = peer.framing.first;
    auto waiting = first.find(tag_);
    if (waiting != first.end() && !is_front(first, tag_, req)) {
      auto& q = waiting->second;
      if (std::find(q.begin(), q.end(), req) == q.end()) q.push_back(req);
      return false;
    }
    Slot s;
    s.index = 0;
    s.len = static_cast<size_t>(std::min<uint64_t>(size_, chunk_));
    if (staged_ && s.len > 0) {
      s.bounce = env.pool->take();
      if (!s.bounce) {
        if (!is_front(first, tag_, req)) {
          first[tag_].push_back(req);
          // A receive of staged memory holds a bounce buffer from its post until its message
          // comes: more of them than the pool holds wait, and if their messages are sent only
          // after messages they keep out, the application waits until the timeout.
          static std::atomic<bool> warned{false};
          if (!warned.exchange(true))
            HMC_LOG_W("staging pool full: receives of device memory wait for a bounce buffer "
                      "(HMC_STAGE_POOL_BYTES={} bytes); posting more of them than it holds can "
                      "stall a pattern that needs them all posted", env.pool->capacity_bytes());
        }
        return false;
      }
    }
    void* buf = s.bounce ? s.bounce : user_;
    hmc_plugin_status_t ps = t->irecv(peer.ep, buf, s.len, nullptr, tag_, &s.net);
    if (ps != HMC_PLUGIN_SUCCESS) {
      if (s.bounce) env.pool->give(s.bounce);
      unlist(first, tag_, req);
      piece0_posted_ = true;  // (never posted: it ends here, one way or the other)
      next_index_ = 1;
      unmatched_ = ps == HMC_PLUGIN_ERR_PEER_LOST;
      plugin_failed(ps);
      return true;
    }
    unlist(first, tag_, req);
    s.state = SlotState::Posted;
    slots_.push_back(std::move(s));
    piece0_posted_ = true;
    next_index_ = 1;
    moved = true;
  }
  // The continuation stream: only the oldest receive of the tag that still may need it, and
  // only once piece 0 said there is one.
  if (pieces_ == 1) return moved;
  for (const auto& x : slots_)
    if (x.index == 0 && x.state == SlotState::Posted) return moved;  // piece 0 not in yet
  if (!stream_owner_) {
    if (!is_front(peer.framing.streams, tag_, req)) return moved;
    stream_owner_ = true;
    Slot h;
    h.index = 1;
    h.len = kHeaderSize;
    hmc_plugin_status_t ps =
        t->irecv(peer.ep, header_, kHeaderSize, nullptr, wire_tag(tag_, 1), &h.net);
    if (ps != HMC_PLUGIN_SUCCESS) {
      plugin_failed(ps);
      return true;
    }
    h.state = SlotState::Posted;
    slots_.push_back(std::move(h));
    moved = true;
  }
  if (pieces_ == 0) return moved;  // header not in yet
  while (next_index_ < pieces_ && window() < env.depth) {
    Slot s;
    s.index = next_index_;
    piece_geometry(s.index, total_, chunk_, &s.offset, &s.len);
    s.fit = s.offset >= size_ ? 0 : std::min(s.len, size_ - s.offset);
    if (draining_ || staged_ || s.fit < s.len) {
      s.bounce = env.pool->take();
      if (!s.bounce) break;
    }
    void* buf = s.bounce ? s.bounce : user_ + s.offset;
    hmc_plugin_status_t ps = t->irecv(peer.ep, buf, s.len, nullptr, wire_tag(tag_, s.index), &s.net);
    if (ps != HMC_PLUGIN_SUCCESS) {
      if (s.bounce) env.pool->give(s.bounce);
      plugin_failed(ps);
      return true;
    }
    s.state = SlotState::Posted;
    slots_.push_back(std::move(s));
    ++next_index_;
    moved = true;
  }
  return moved;
}

bool Framed::advance_recv(Request* req, Peer& peer, const StageEnv& env) {
  if (!in_streams_ && !piece0_posted_) {
    peer.framing.streams[tag_].push_back(req);
    in_streams_ = true;
  }
  bool moved = post_recvs(req, peer, env);
  if (broken_) return true;
  moved |= test_posted(peer, env);
  if (broken_) return true;
  if (pieces_ == 1 && in_streams_) {  // a single message: the stream is not its business
    unlist(peer.framing.streams, tag_, req);
    in_streams_ = false;
  }
  moved |= poll_copies(env);
  moved |= release(env);
  // What test_posted learnt may allow the next pieces right away.
  if (moved && !broken_) moved |= post_recvs(req, peer, env);
  if (broken_) return true;
  try_finish(req, peer);
  return moved;
}

void Framed::try_finish(Request* req, Peer& peer) {
  if (finished_ || !slots_.empty()) return;
  if (send_) {
    bool all_out = posted_ == pieces_ || dropped_;
    if (!all_out) return;
    if (in_sends_) unlist(peer.framing.sends, tag_, req);
    in_sends_ = false;
    bytes_ = size_;
  } else {
    if (!piece0_posted_) return;
    if (pieces_ == 0 || next_index_ < pieces_) return;  // more of the stream to read
    if (pieces_ > 1 && !draining_) bytes_ = static_cast<size_t>(total_);
    if (in_streams_) unlist(peer.framing.streams, tag_, req);
    in_streams_ = false;
  }
  finished_ = true;
}

// ---- shared ---------------------------------------------------------------------------------

bool Framed::release(const StageEnv& env) {
  bool moved = false;
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (it->state != SlotState::Done) {
      ++it;
      continue;
    }
    if (it->bounce) env.pool->give(it->bounce);
    it = slots_.erase(it);
    moved = true;
  }
  return moved;
}

hmc_plugin_status_t Framed::cancel(Request* req, Peer& peer) {
  if (finished_ || broken_ || rma_) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  if (send_) {
    if (piece0_posted_) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    fail_local(HMC_ERR_CANCELLED, fmt::format("hmc_send to {}: cancelled", peer.name));
    aborted_ = dropped_ = true;  // copies in flight end, nothing is sent
    return HMC_PLUGIN_SUCCESS;
  }
  if (!piece0_posted_) {
    unlist(peer.framing.first, tag_, req);
    fail_local(HMC_ERR_CANCELLED, fmt::format("hmc_recv from {}: cancelled", peer.name));
    piece0_posted_ = true;
    pieces_ = 1;
    next_index_ = 1;
    return HMC_PLUGIN_SUCCESS;
  }
  if (slots_.size() != 1 || slots_.front().index != 0 || slots_.front().state != SlotState::Posted)
    return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  if (!HMC_NET_SLOT(peer.net->table(), cancel)) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  return peer.net->table()->cancel(slots_.front().net);  // test reports CANCELLED later
}

void Framed::end_unmatched(Request* req, Peer& peer) {
  broken_ = false;
  unmatched_ = false;
  fail_local(HMC_ERR_PEER_LOST, fmt::format("hmc_recv from {} (tag {}): the peer closed the "
                                            "connection", peer.name, tag_));
  pieces_ = 1;
  for (auto& s : slots_)
    if (s.state == SlotState::Posted) s.state = SlotState::Done;  // the plugin ended it
  try_finish(req, peer);
}

void Framed::settle(const StageEnv& env) {
  for (auto& s : slots_) {
    bool copying = s.state == SlotState::Copying || s.state == SlotState::Unloading;
    if (copying && s.copy.poll() != HMC_IN_PROGRESS) s.state = SlotState::Done;
  }
  release(env);
}

void Framed::forget_plugin_requests() {
  for (auto& s : slots_) {
    if (s.state == SlotState::Posted || s.state == SlotState::Ready) {
      s.net = nullptr;
      s.state = SlotState::Done;
    }
  }
}

}  // namespace hmc
