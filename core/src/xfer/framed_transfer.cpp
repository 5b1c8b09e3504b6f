#include "xfer/framed_transfer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "device/stage_pool.h"
#include "net/net_plugin.h"
#include "peer/peer.h"
#include "util/log.h"
#include "util/status.h"
#include "xfer/request.h"

namespace hmc {
namespace {

// Tests a posted plugin request: false while it runs; true once it ended, with *r cleared and
// st and got saying how (the plugin released the request).
bool ended(const hmc_net_plugin_v1_t* t, hmc_net_request_t** r, hmc_plugin_status_t* st,
           size_t* got) {
  int done = 0;
  *got = 0;
  *st = t->test(*r, &done, got);
  if (!done && *st == HMC_PLUGIN_SUCCESS) return false;
  *r = nullptr;
  return true;
}

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

std::unique_ptr<FramedTransfer> FramedTransfer::make_send(const void* buf, size_t size, uint64_t tag, bool staged,
                                          const FrameGeometry& g) {
  std::unique_ptr<FramedTransfer> f(new FramedTransfer());
  f->send_ = true;
  f->staged_ = staged;
  f->user_ = static_cast<uint8_t*>(const_cast<void*>(buf));
  f->size_ = size;
  f->tag_ = tag;
  f->geo_ = g;
  f->pieces_ = piece_count(size, g);
  return f;
}

std::unique_ptr<FramedTransfer> FramedTransfer::make_recv(void* buf, size_t capacity, uint64_t tag, bool staged,
                                          const FrameGeometry& g) {
  std::unique_ptr<FramedTransfer> f(new FramedTransfer());
  f->send_ = false;
  f->staged_ = staged;
  f->user_ = static_cast<uint8_t*>(buf);
  f->size_ = capacity;
  f->tag_ = tag;
  f->geo_ = g;
  return f;
}

std::unique_ptr<FramedTransfer> FramedTransfer::make_put(const void* buf, size_t size, uint64_t addr,
                                         hmc_net_rkey_t* rkey, uint64_t chunk) {
  std::unique_ptr<FramedTransfer> f = make_send(buf, size, 0, true, FrameGeometry{chunk, chunk});
  f->rma_ = true;
  f->rma_addr_ = addr;
  f->rkey_ = rkey;
  f->pieces_ = static_cast<size_t>((size + chunk - 1) / chunk);
  return f;
}

std::unique_ptr<FramedTransfer> FramedTransfer::make_get(void* buf, size_t size, uint64_t addr,
                                         hmc_net_rkey_t* rkey, uint64_t chunk) {
  std::unique_ptr<FramedTransfer> f = make_recv(buf, size, 0, true, FrameGeometry{chunk, chunk});
  f->rma_ = true;
  f->rma_addr_ = addr;
  f->rkey_ = rkey;
  f->pieces_ = static_cast<size_t>((size + chunk - 1) / chunk);
  return f;
}

FramedTransfer::~FramedTransfer() = default;

void FramedTransfer::use_ipc(IpcExport ex, bool shared_too) {
  ipc_ = true;
  ipc_export_ = std::move(ex);
  ipc_shared_too_ = shared_too;
  pieces_ = 2;  // piece 0 and the header; the pieces only if the receiver asks for them
}

SharedSlab::~SharedSlab() {
  if (pinned_on && pinned_on->plugin) {
    hmc_plugin_status_t st = pinned_on->plugin->host_unregister(pinned_on->plugin_ctx, base);
    if (st != HMC_PLUGIN_SUCCESS)
      HMC_LOG_W("shared bounces: unpinning a peer's staging slab on {} failed: {}",
                pinned_on->name, plugin_status_string(st));
  }
  if (base) munmap(base, bytes);
}

void PeerFramingState::trim_ipc(size_t keep) {
  while (ipc_maps.size() > keep) {
    auto victim = ipc_maps.end();
    for (auto it = ipc_maps.begin(); it != ipc_maps.end(); ++it)
      if (it->second.mapping.use_count() == 1 &&
          (victim == ipc_maps.end() || it->second.last_use < victim->second.last_use))
        victim = it;
    if (victim == ipc_maps.end()) return;  // every one is being read
    ipc_maps.erase(victim);
  }
}

void FramedTransfer::offer_shared() {
  shared_offer_ = true;
  pieces_ = framed_piece_count(size_, geo_);
}

IpcMapping::~IpcMapping() {
  if (device && device->plugin && base) {
    hmc_plugin_status_t st = device->plugin->ipc_close(device->plugin_ctx, base);
    if (st != HMC_PLUGIN_SUCCESS)
      HMC_LOG_W("device IPC: unmapping a peer's allocation at {} on {} failed: {}", base,
                device->name, plugin_status_string(st));
  }
}

size_t FramedTransfer::window() const { return slots_.size(); }

void FramedTransfer::fail_local(hmc_status_t st, std::string why) {
  if (status_ == HMC_SUCCESS) {
    status_ = st;
    error_ = std::move(why);
  }
}

void FramedTransfer::plugin_failed(hmc_plugin_status_t st) {
  broken_ = true;
  plugin_status_ = st;
}

bool FramedTransfer::advance(Request* req, Peer& peer, const StageEnv& env) {
  if (finished_ || broken_) return false;
  if (rma_) return advance_rma(peer, env);
  return send_ ? advance_send(req, peer, env) : advance_recv(req, peer, env);
}

// ---- put and get of staged local memory ------------------------------------------------------

bool FramedTransfer::advance_rma(Peer& peer, const StageEnv& env) {
  const hmc_net_plugin_v1_t* t = peer.net->table();
  const char* what = send_ ? "hmc_put" : "hmc_get";
  bool moved = false;
  // New pieces, unless a piece failed: then the rest is not issued and the transfer ends once
  // what is in flight has.
  while (status_ == HMC_SUCCESS && next_index_ < pieces_ && window() < env.depth) {
    Slot s;
    s.index = next_index_;
    s.offset = static_cast<size_t>(uint64_t(s.index) * geo_.chunk);
    s.len = static_cast<size_t>(std::min<uint64_t>(geo_.chunk, size_ - s.offset));
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
      hmc_plugin_status_t st;
      size_t got;
      if (!ended(t, &s.net, &st, &got)) continue;
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
    if (status_ == HMC_SUCCESS) peer.framing.staged_transfers.fetch_add(1, std::memory_order_relaxed);
  }
  return moved;
}

// ---- send -----------------------------------------------------------------------------------

bool FramedTransfer::prepare_send(const StageEnv& env) {
  bool moved = false;
  while (next_index_ < pieces_ && window() < env.depth) {
    if (dropped_) break;
    Slot s;
    s.index = next_index_;
    if (s.index == 1) {
      // Only where the bounces can be shared at all.
      if (shared_offer_ && (ipc_ || !env.pool->shareable())) shared_offer_ = false;
      if (ipc_) {
        ipc_export_.shared_too = ipc_shared_too_ && env.pool->shareable();
        s.len = encode_ipc_header(header_, size_, ipc_export_);
      } else if (shared_offer_) {
        s.len = encode_shared_header(header_, size_, static_cast<uint32_t>(getpid()));
      } else {
        s.len = encode_pieces_header(header_, size_);
      }
    } else {
      if (s.index == 0) s.len = static_cast<size_t>(pieces_ == 1 ? size_ : geo_.first);
      else
        piece_span(s.index, size_, geo_, &s.offset, &s.len);
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

bool FramedTransfer::poll_copies(const StageEnv& env) {
  bool moved = false;
  for (auto& s : slots_) {
    if (s.state != SlotState::Copying && s.state != SlotState::Unloading) continue;
    if (s.index == kIpcCopyIndex || s.shared) continue;  // finish_ipc_copy's, advance_shared_recv's
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

bool FramedTransfer::post_sends(Request* req, Peer& peer, const StageEnv& env) {
  if (in_sends_ && !is_front(peer.framing.sends, tag_, req)) return false;
  bool moved = false;
  const hmc_net_plugin_v1_t* t = peer.net->table();
  for (auto& s : slots_) {
    if (s.index != posted_) continue;
    if (s.state != SlotState::Ready) break;
    if (dropped_) break;
    // After a header that offers shared bounces the reply decides what the pieces are (their
    // device-to-host copies go on meanwhile).
    if (s.index >= 2 && awaiting_reply_) break;
    if (shared_ && s.index >= 2) {  // a descriptor of the bounce buffer instead of its bytes
      if (!post_shared_piece(s, peer, env)) return true;
      ++posted_;
      moved = true;
      continue;
    }
    if (s.index == 1 && (ipc_ || shared_offer_)) {  // the reply's receive goes first
      Slot r;
      r.index = kReplyIndex;
      r.len = sizeof reply_;
      hmc_plugin_status_t ps = t->irecv(peer.ep, reply_, sizeof reply_, nullptr, reply_tag(tag_),
                                        &r.net);
      if (ps != HMC_PLUGIN_SUCCESS) {
        plugin_failed(ps);
        return true;
      }
      r.state = SlotState::Posted;
      slots_.push_back(std::move(r));  // (std::list: the loop's iterator stays valid)
      awaiting_reply_ = true;
    }
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
  // A device IPC message keeps the tag's continuation stream until its reply: a "send pieces"
  // answer puts its pieces there.
  if (posted_ == pieces_ && in_sends_ && !awaiting_reply_) {
    unlist(peer.framing.sends, tag_, req);
    in_sends_ = false;
  }
  return moved;
}

bool FramedTransfer::test_posted(Peer& peer, const StageEnv& env) {
  bool moved = false;
  const hmc_net_plugin_v1_t* t = peer.net->table();
  for (auto& s : slots_) {
    if (s.state != SlotState::Posted || s.shared) continue;
    hmc_plugin_status_t st;
    size_t got;
    if (!ended(t, &s.net, &st, &got)) continue;
    moved = true;
    if (s.index == kReplyIndex) {  // device IPC: the sender's receive, or the receiver's send
      if (st == HMC_PLUGIN_SUCCESS && send_ && got != sizeof reply_) st = HMC_PLUGIN_ERR_TRUNCATED;
      if (st != HMC_PLUGIN_SUCCESS) {
        if (st == HMC_PLUGIN_ERR_TRUNCATED) {
          HMC_LOG_W("peer {}: device IPC message on tag {}: malformed reply", peer.name, tag_);
          st = HMC_PLUGIN_ERR_INTERNAL;
        }
        plugin_failed(st);
        return true;
      }
      s.state = SlotState::Done;
      if (send_) on_reply(peer);
      if (broken_) return true;
      continue;
    }
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
        size_t n = std::min(got, std::min(size_, static_cast<size_t>(geo_.chunk)));
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
      Header h;
      if (!decode_header(header_, got, geo_.first, &h)) {
        HMC_LOG_W("peer {}: framed message on tag {}: malformed header ({} bytes)", peer.name,
                  tag_, got);
        plugin_failed(HMC_PLUGIN_ERR_INTERNAL);
        return true;
      }
      total_ = h.total;
      switch (h.kind) {
        case HeaderKind::Pieces: on_header(peer); break;
        case HeaderKind::Ipc: on_ipc_header(peer, env, h.ipc); break;
        case HeaderKind::Shared: on_shared_header(peer); break;
      }
      if (broken_) return true;
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

bool FramedTransfer::advance_send(Request* req, Peer& peer, const StageEnv& env) {
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
  moved |= post_sends(req, peer, env);
  if (broken_) return true;
  moved |= test_posted(peer, env);
  if (broken_) return true;
  moved |= advance_shared_send(peer);
  if (broken_) return true;
  moved |= release(env);
  try_finish(req, peer);
  return moved;
}

// ---- receive --------------------------------------------------------------------------------

// Piece 0 arrived: a whole small message, or the start of a longer one.
void FramedTransfer::on_piece0(Peer& peer, size_t got, hmc_plugin_status_t st) {
  if (st == HMC_PLUGIN_ERR_TRUNCATED) {
    status_ = HMC_ERR_TRUNCATED;
    error_ = fmt::format("hmc_recv from {} (tag {}): the message was larger than the {}-byte "
                         "buffer", peer.name, tag_, size_);
    // Plugins report the sent length on truncation; a piece 0 of the first piece's size has a
    // stream behind it that must be read and dropped, or it would reach the next message's
    // receive.
    if (got == geo_.first) draining_ = true;
    else pieces_ = 1;
    return;
  }
  if (got != geo_.first) {
    pieces_ = 1;
    bytes_ = got;
    return;
  }
  bytes_ = got;  // the rest comes after the header
}

void FramedTransfer::on_header(Peer& peer) {
  pieces_ = framed_piece_count(total_, geo_);
  next_index_ = 2;
  if (!draining_ && total_ > size_) {
    status_ = HMC_ERR_TRUNCATED;
    error_ = fmt::format("hmc_recv from {} (tag {}): the {}-byte message was larger than the "
                         "{}-byte buffer", peer.name, tag_, total_, size_);
    draining_ = true;  // the buffer content of a truncated receive is unspecified
  }
}

void FramedTransfer::finish_piece_recv(Slot& s, const StageEnv& env) {
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

bool FramedTransfer::post_recvs(Request* req, Peer& peer, const StageEnv& env) {
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
    s.len = static_cast<size_t>(std::min<uint64_t>(size_, geo_.chunk));
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
    h.len = sizeof header_;  // either version
    hmc_plugin_status_t ps =
        t->irecv(peer.ep, header_, sizeof header_, nullptr, wire_tag(tag_, 1), &h.net);
    if (ps != HMC_PLUGIN_SUCCESS) {
      plugin_failed(ps);
      return true;
    }
    h.state = SlotState::Posted;
    slots_.push_back(std::move(h));
    moved = true;
  }
  if (pieces_ == 0) return moved;  // header not in yet
  while (shared_ && next_index_ < pieces_ && window() < env.depth) {
    Slot s;
    s.index = next_index_;
    s.shared = true;
    piece_span(s.index, total_, geo_, &s.offset, &s.len);
    s.fit = s.len;
    Slot& in = slots_.emplace_back(std::move(s));  // received into in place: list nodes stay put
    hmc_plugin_status_t ps =
        t->irecv(peer.ep, in.desc, kDescriptorSize, nullptr, wire_tag(tag_, in.index), &in.net);
    if (ps != HMC_PLUGIN_SUCCESS) {
      in.state = SlotState::Done;
      plugin_failed(ps);
      return true;
    }
    in.state = SlotState::Posted;
    ++next_index_;
    moved = true;
  }
  while (!shared_ && next_index_ < pieces_ && window() < env.depth) {
    Slot s;
    s.index = next_index_;
    piece_span(s.index, total_, geo_, &s.offset, &s.len);
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

bool FramedTransfer::advance_recv(Request* req, Peer& peer, const StageEnv& env) {
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
  moved |= finish_ipc_copy(peer, env);
  if (broken_) return true;
  moved |= advance_shared_recv(peer, env);
  if (broken_) return true;
  moved |= poll_copies(env);
  moved |= release(env);
  // What test_posted learnt may allow the next pieces right away.
  if (moved && !broken_) moved |= post_recvs(req, peer, env);
  if (broken_) return true;
  try_finish(req, peer);
  return moved;
}

void FramedTransfer::try_finish(Request* req, Peer& peer) {
  if (finished_ || !slots_.empty()) return;
  if (send_) {
    bool all_out = (posted_ == pieces_ && !awaiting_reply_) || dropped_;
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
  if (status_ != HMC_SUCCESS) return;
  if (ipc_) peer.framing.ipc_messages.fetch_add(1, std::memory_order_relaxed);
  else if (staged_ && bytes_ > 0) peer.framing.staged_transfers.fetch_add(1, std::memory_order_relaxed);
  if (shared_ && bytes_ > 0) peer.framing.shared_messages.fetch_add(1, std::memory_order_relaxed);
}

// ---- device IPC -----------------------------------------------------------------------------

// A version 2 header arrived: copy the rest of the message out of the sender's allocation, or
// ask for the pieces.
void FramedTransfer::on_ipc_header(Peer& peer, const StageEnv& env, const IpcExport& ex) {
  pieces_ = 2;
  next_index_ = 2;
  if (draining_ || total_ > size_) {  // truncated: nothing to copy, nothing to drain
    if (!draining_) {
      status_ = HMC_ERR_TRUNCATED;
      error_ = fmt::format("hmc_recv from {} (tag {}): the {}-byte message was larger than the "
                           "{}-byte buffer", peer.name, tag_, total_, size_);
      draining_ = true;
    }
    post_reply(peer, kReplyDone);
    return;
  }
  uint32_t code = kReplyPieces;  // host memory, or another vendor's device: the pieces
  const Device* dev = local_device_;
  bool ipc_fits = dev && dev->plugin_name == ex.plugin && (dev->caps & HMC_DEVICE_CAP_IPC);
  if (!ipc_fits && ex.shared_too && staged_) {
    // Another vendor's device memory: one copy out of the sender's bounces into it, rather than
    // the pieces through the transport.
    if (!post_reply(peer, kReplyShared)) return;
    shared_ = true;
    on_header(peer);
    return;
  }
  if (ipc_fits) {
    std::string key(ex.handle.begin(), ex.handle.end());
    auto& maps = peer.framing.ipc_maps;
    auto known = maps.find(key);
    if (known != maps.end()) {
      mapping_ = known->second.mapping;
      known->second.last_use = ++peer.framing.ipc_uses;
    } else {
      void* base = nullptr;
      hmc_plugin_status_t ps = dev->plugin->ipc_open(dev->plugin_ctx, dev->index, ex.handle.data(),
                                                     ex.handle.size(), &base);
      if (ps == HMC_PLUGIN_SUCCESS) {
        mapping_ = std::make_shared<IpcMapping>();
        mapping_->device = dev;
        mapping_->base = base;
        maps[key] = {mapping_, ++peer.framing.ipc_uses};
        peer.framing.trim_ipc(ipc_keep(env));
      } else {
        HMC_LOG_W("peer {}: {} cannot map the peer's device memory by IPC ({}); its messages are "
                  "staged through host memory from now on", peer.name, dev->name,
                  plugin_status_string(ps));
        code = kReplyNoIpc;
      }
    }
    if (mapping_) {
      Slot c;
      c.index = kIpcCopyIndex;
      c.offset = geo_.first;
      c.len = static_cast<size_t>(total_ - geo_.first);
      const uint8_t* src = static_cast<const uint8_t*>(mapping_->base) + ex.offset + c.offset;
      hmc_status_t st = env.copier->start(user_ + c.offset, src, c.len, &c.copy);
      if (st == HMC_SUCCESS) {
        c.state = SlotState::Unloading;
        slots_.push_back(std::move(c));
        ipc_ = true;
        return;  // the reply follows the copy (finish_ipc_copy)
      }
      // Devices without peer access to each other, or a descriptor that does not fit the
      // mapping: the pieces are always right.
      HMC_LOG_D("peer {}: device IPC copy on tag {} not possible ({}); asking for pieces",
                peer.name, tag_, last_error());
      mapping_.reset();
      peer.framing.trim_ipc(ipc_keep(env));
    }
  }
  if (post_reply(peer, code)) pieces_ = framed_piece_count(total_, geo_);  // as in version 1
}

// Mappings kept open per peer: none where the runtime may hand a recycled handle to another
// allocation (a cached mapping could then show the wrong memory).
size_t FramedTransfer::ipc_keep(const StageEnv& env) const {
  bool unique = local_device_ && (local_device_->caps & HMC_DEVICE_CAP_IPC_UNIQUE_HANDLES);
  return unique ? env.ipc_cache : 0;
}

bool FramedTransfer::finish_ipc_copy(Peer& peer, const StageEnv& env) {
  for (auto& s : slots_) {
    if (s.index != kIpcCopyIndex || s.state != SlotState::Unloading) continue;
    hmc_status_t st = s.copy.poll();
    if (st == HMC_IN_PROGRESS) return false;
    if (st != HMC_SUCCESS)
      fail_local(st, fmt::format("hmc_recv from {} (tag {}): copying from the sender's device "
                                 "memory by IPC: {}", peer.name, tag_, last_error()));
    s.state = SlotState::Done;
    mapping_.reset();
    peer.framing.trim_ipc(ipc_keep(env));
    post_reply(peer, kReplyDone);  // the sender's buffer is free either way
    return true;
  }
  return false;
}

bool FramedTransfer::post_reply(Peer& peer, uint32_t code) {
  encode_reply(reply_, code);
  Slot r;
  r.index = kReplyIndex;
  r.len = sizeof reply_;
  hmc_plugin_status_t ps =
      peer.net->table()->isend(peer.ep, reply_, sizeof reply_, nullptr, reply_tag(tag_), &r.net);
  if (ps != HMC_PLUGIN_SUCCESS) {
    plugin_failed(ps);
    return false;
  }
  r.state = SlotState::Posted;
  slots_.push_back(std::move(r));
  return true;
}

// The sender's end of the reply.
void FramedTransfer::on_reply(Peer& peer) {
  awaiting_reply_ = false;
  const uint32_t code = decode_reply(reply_);
  if (code == kReplyDone && ipc_) return;
  bool known = ipc_ ? code == kReplyPieces || code == kReplyNoIpc ||
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
  ipc_ = false;
  shared_ = code == kReplyShared;
  pieces_ = framed_piece_count(size_, geo_);  // prepare_send goes on from piece 2
}

// ---- shared bounces ---------------------------------------------------------------------------

// A version 3 header arrived: read the pieces out of the sender's bounces when this side stages
// (its buffer is device memory the path cannot reach), else ask for the pieces.
void FramedTransfer::on_shared_header(Peer& peer) {
  bool take = staged_ && !draining_ && total_ <= size_;
  if (!post_reply(peer, take ? kReplyShared : kReplyPieces)) return;
  shared_ = take;
  on_header(peer);  // pieces, and truncation as for version 1
}

// Sender: the piece sits in its bounce buffer; its descriptor goes out, and the receive of its
// acknowledgement is posted (in piece order, as the receiver sends them). False when the path
// failed.
bool FramedTransfer::post_shared_piece(Slot& s, Peer& peer, const StageEnv& env) {
  const hmc_net_plugin_v1_t* t = peer.net->table();
  PieceDescriptor d;
  StagePool::SharedRef ref;
  if (s.bounce && s.len > 0 && env.pool->shared_ref(s.bounce, &ref)) {
    d.fd = ref.fd;
    d.slab_bytes = ref.slab_bytes;
    d.offset = ref.offset;
    d.len = s.len;
  }  // else len 0: the device failed (aborted_), or a slab that cannot be shared: an abort
  encode_descriptor(s.desc, d);
  s.shared = true;
  hmc_plugin_status_t ps =
      t->irecv(peer.ep, s.ack_msg, sizeof s.ack_msg, nullptr, reply_tag(tag_), &s.ack);
  if (ps == HMC_PLUGIN_SUCCESS)
    ps = t->isend(peer.ep, s.desc, kDescriptorSize, nullptr, wire_tag(tag_, s.index), &s.net);
  if (ps != HMC_PLUGIN_SUCCESS) {
    plugin_failed(ps);
    return false;
  }
  s.state = SlotState::Posted;
  return true;
}

// Sender: a shared piece is done when its descriptor left and its acknowledgement came; then
// its bounce buffer goes back to the pool (release).
bool FramedTransfer::advance_shared_send(Peer& peer) {
  const hmc_net_plugin_v1_t* t = peer.net->table();
  bool moved = false;
  for (auto& s : slots_) {
    if (!s.shared || s.state != SlotState::Posted) continue;
    for (hmc_net_request_t** r : {&s.net, &s.ack}) {
      if (!*r) continue;
      bool is_ack = r == &s.ack;
      hmc_plugin_status_t st;
      size_t got;
      if (!ended(t, r, &st, &got)) continue;
      moved = true;
      if (st == HMC_PLUGIN_SUCCESS && is_ack && got != sizeof s.ack_msg)
        st = HMC_PLUGIN_ERR_TRUNCATED;
      if (st != HMC_PLUGIN_SUCCESS) {
        if (st == HMC_PLUGIN_ERR_TRUNCATED) {
          HMC_LOG_W("peer {}: framed message on tag {}: malformed acknowledgement", peer.name, tag_);
          st = HMC_PLUGIN_ERR_INTERNAL;
        }
        plugin_failed(st);
        return true;
      }
      uint32_t code = is_ack ? decode_reply(s.ack_msg) : kAckRead;
      if (code == kAckUnreadable && !peer.framing.shared_refused.exchange(true))
        HMC_LOG_W("peer {}: it could not read this process's staging buffers; messages to it "
                  "are sent in pieces from now on", peer.name);
    }
    if (!s.net && !s.ack) s.state = SlotState::Done;
  }
  return moved;
}

// Receiver: maps the sender's slab (once per peer) and starts the piece's host-to-device copy
// out of it. False when the piece cannot be read (status set; the acknowledgement says so).
bool FramedTransfer::start_shared_copy(Slot& s, Peer& peer, const StageEnv& env) {
  PieceDescriptor d;
  decode_descriptor(s.desc, kDescriptorSize, &d);
  auto key = std::make_pair(d.fd, d.slab_bytes);
  auto& slabs = peer.framing.shared_slabs;
  auto it = slabs.find(key);
  if (it == slabs.end()) {
    std::string path = fmt::format("/proc/{}/fd/{}", peer.remote.pid, d.fd);
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    struct stat st {};
    void* base = MAP_FAILED;
    if (fd >= 0 && fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= d.slab_bytes)
      base = mmap(nullptr, d.slab_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = errno;
    if (fd >= 0) close(fd);
    if (base == MAP_FAILED) {
      fail_local(HMC_ERR_SYSTEM, fmt::format("hmc_recv from {} (tag {}): cannot map the sender's "
                                             "staging buffers ({}: {})", peer.name, tag_, path,
                                             strerror(err)));
      return false;
    }
    auto slab = std::make_shared<SharedSlab>();
    slab->base = base;
    slab->bytes = d.slab_bytes;
    const Device* dev = local_device_;
    if (dev && HMC_DEVICE_SLOT(dev->plugin, host_register)) {
      hmc_plugin_status_t ps = dev->plugin->host_register(dev->plugin_ctx, base, d.slab_bytes);
      if (ps == HMC_PLUGIN_SUCCESS) slab->pinned_on = dev;
      else HMC_LOG_I("shared bounces: {} cannot pin a peer's staging slab ({}); copies from it "
                     "are pageable", dev->name, plugin_status_string(ps));
    }
    it = slabs.emplace(key, std::move(slab)).first;
  }
  s.slab = it->second;
  const uint8_t* src = static_cast<const uint8_t*>(s.slab->base) + d.offset;
  hmc_status_t st = env.copier->start(user_ + s.offset, src, s.len, &s.copy);
  if (st != HMC_SUCCESS) {
    s.slab.reset();
    fail_local(st, fmt::format("hmc_recv: copying a piece into device memory: {}", last_error()));
    return true;  // readable; our device failed
  }
  s.state = SlotState::Unloading;
  return true;
}

// Receiver: descriptor in -> copy out of the sender's bounce -> acknowledgement, in piece order.
bool FramedTransfer::advance_shared_recv(Peer& peer, const StageEnv& env) {
  const hmc_net_plugin_v1_t* t = peer.net->table();
  bool moved = false;
  for (auto& s : slots_) {
    if (!s.shared) continue;
    if (s.state == SlotState::Posted) {  // the descriptor
      hmc_plugin_status_t st;
      size_t got;
      if (!ended(t, &s.net, &st, &got)) continue;
      moved = true;
      PieceDescriptor d;
      if (st == HMC_PLUGIN_SUCCESS && !decode_descriptor(s.desc, got, &d))
        st = HMC_PLUGIN_ERR_TRUNCATED;
      if (st == HMC_PLUGIN_SUCCESS && d.len != 0 && d.len != s.len) st = HMC_PLUGIN_ERR_TRUNCATED;
      if (st != HMC_PLUGIN_SUCCESS) {
        if (st == HMC_PLUGIN_ERR_TRUNCATED) {
          HMC_LOG_W("peer {}: framed message on tag {}: malformed piece descriptor (piece {}, "
                    "{} bytes, length {} of {})", peer.name, tag_, s.index, got, d.len, s.len);
          st = HMC_PLUGIN_ERR_INTERNAL;
        }
        plugin_failed(st);
        return true;
      }
      uint32_t code = kAckRead;
      s.state = SlotState::Ready;  // acknowledgement due
      if (d.len == 0) {
        fail_local(HMC_ERR_REMOTE,
                   fmt::format("hmc_recv from {} (tag {}): the sender aborted the message after "
                               "{} bytes (its device failed)", peer.name, tag_, s.offset));
      } else if (status_ == HMC_SUCCESS && !start_shared_copy(s, peer, env)) {
        code = kAckUnreadable;
      }
      encode_reply(s.ack_msg, code);
    }
    if (s.state == SlotState::Unloading) {
      hmc_status_t st = s.copy.poll();
      if (st == HMC_IN_PROGRESS) continue;
      moved = true;
      if (st != HMC_SUCCESS)
        fail_local(st, fmt::format("hmc_recv: copying a piece into device memory: {}", last_error()));
      s.slab.reset();
      s.state = SlotState::Ready;
    }
  }
  // Acknowledgements in piece order: the sender matches them to its pieces by order.
  for (auto& s : slots_) {
    if (!s.shared) continue;
    if (s.state == SlotState::Ready && s.index == next_ack_) {
      hmc_plugin_status_t ps = t->isend(peer.ep, s.ack_msg, sizeof s.ack_msg, nullptr,
                                        reply_tag(tag_), &s.net);
      if (ps != HMC_PLUGIN_SUCCESS) {
        plugin_failed(ps);
        return true;
      }
      s.state = SlotState::Acking;
      ++next_ack_;
      moved = true;
    }
    if (s.state == SlotState::Acking) {
      hmc_plugin_status_t st;
      size_t got;
      if (!ended(t, &s.net, &st, &got)) continue;
      moved = true;
      if (st != HMC_PLUGIN_SUCCESS) {
        plugin_failed(st);
        return true;
      }
      s.state = SlotState::Done;
    }
  }
  return moved;
}

// ---- shared ---------------------------------------------------------------------------------

bool FramedTransfer::release(const StageEnv& env) {
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

hmc_plugin_status_t FramedTransfer::cancel(Request* req, Peer& peer) {
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

void FramedTransfer::end_unmatched(Request* req, Peer& peer) {
  broken_ = false;
  unmatched_ = false;
  fail_local(HMC_ERR_PEER_LOST, fmt::format("hmc_recv from {} (tag {}): the peer closed the "
                                            "connection", peer.name, tag_));
  pieces_ = 1;
  for (auto& s : slots_)
    if (s.state == SlotState::Posted) s.state = SlotState::Done;  // the plugin ended it
  try_finish(req, peer);
}

void FramedTransfer::settle(const StageEnv& env) {
  for (auto& s : slots_) {
    bool copying = s.state == SlotState::Copying || s.state == SlotState::Unloading;
    if (copying && s.copy.poll() != HMC_IN_PROGRESS) s.state = SlotState::Done;
  }
  release(env);
  if (idle()) mapping_.reset();  // no copy reads the peer's memory any more
}

void FramedTransfer::forget_plugin_requests() {
  for (auto& s : slots_) {
    if (s.state == SlotState::Posted || s.state == SlotState::Ready ||
        s.state == SlotState::Acking) {
      s.net = nullptr;
      s.ack = nullptr;
      s.state = SlotState::Done;
    }
  }
}

}  // namespace hmc
