// Shared bounces: between two processes on one host, each piece after the header travels as a
// descriptor of the sender's bounce buffer (its stage pool's slabs are memfds the receiver maps
// through /proc/<pid>/fd); the receiver copies it host to device straight out of that buffer
// and acknowledges it, in order, on the reply tag. One copy out and one in, no transport copy.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "device/stage_pool.h"
#include "framed/framed_message.h"
#include "net/net_plugin.h"
#include "peer/peer.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

// ---- send ------------------------------------------------------------------------------------

void FramedSend::offer_shared() {
  way_ = Way::Shared;
  pieces_ = framed_piece_count(size_, geo_);
}

// The piece sits in its bounce buffer: its descriptor goes out, and the receive of its
// acknowledgement is posted (in piece order, as the receiver sends them). False when the path
// failed.
bool FramedSend::post_shared_piece(Piece& p, Peer& peer, const StageEnv& env) {
  const hmc_net_plugin_v2_t* t = peer.net->table();
  PieceDescriptor d;
  StagePool::SharedRef ref;
  if (p.bounce && p.len > 0 && env.pool->shared_ref(p.bounce, &ref)) {
    d.fd = ref.fd;
    d.slab_bytes = ref.slab_bytes;
    d.offset = ref.offset;
    d.len = p.len;
  }  // else len 0: the device failed (Loss::Rest), or a slab that cannot be shared: an abort
  encode_descriptor(p.desc, d);
  p.shared = true;
  hmc_plugin_status_t ps =
      t->irecv(peer.ep, p.ack_msg, sizeof p.ack_msg, nullptr, reply_tag(tag_), &p.ack);
  if (ps == HMC_PLUGIN_SUCCESS)
    ps = t->isend(peer.ep, p.desc, kDescriptorSize, nullptr, wire_tag(tag_, p.index), &p.net);
  if (ps != HMC_PLUGIN_SUCCESS) {
    plugin_failed(ps);
    return false;
  }
  p.state = PieceState::Posted;
  return true;
}

// A shared piece is done when its descriptor left and its acknowledgement came; then its bounce
// buffer goes back to the pool (release).
bool FramedSend::advance_shared(Peer& peer) {
  const hmc_net_plugin_v2_t* t = peer.net->table();
  bool moved = false;
  for (auto& p : pipe_) {
    if (!p.shared || p.state != PieceState::Posted) continue;
    for (hmc_net_request_t** r : {&p.net, &p.ack}) {
      if (!*r) continue;
      bool is_ack = r == &p.ack;
      hmc_plugin_status_t st;
      size_t got;
      if (!request_ended(t, r, &st, &got)) continue;
      moved = true;
      if (st == HMC_PLUGIN_SUCCESS && is_ack && got != sizeof p.ack_msg)
        st = HMC_PLUGIN_ERR_TRUNCATED;
      if (st != HMC_PLUGIN_SUCCESS) {
        if (st == HMC_PLUGIN_ERR_TRUNCATED) {
          HMC_LOG_W("peer {}: framed message on tag {}: malformed acknowledgement", peer.name,
                    tag_);
          st = HMC_PLUGIN_ERR_INTERNAL;
        }
        plugin_failed(st);
        return true;
      }
      uint32_t code = is_ack ? decode_reply(p.ack_msg) : kAckRead;
      if (code == kAckUnreadable && !peer.framing.shared_refused.exchange(true))
        HMC_LOG_W(
            "peer {}: it could not read this process's staging buffers; messages to it "
            "are sent in pieces from now on",
            peer.name);
    }
    if (!p.net && !p.ack) p.state = PieceState::Done;
  }
  return moved;
}

// ---- receive ---------------------------------------------------------------------------------

// A version 3 header arrived: read the pieces out of the sender's bounces when this side stages
// (its buffer is device memory the path cannot reach), else ask for the pieces.
void FramedRecv::on_shared_header(Peer& peer) {
  bool take = staged_ && !draining_ && total_ <= size_;
  if (!post_reply(peer, take ? kReplyShared : kReplyPieces)) return;
  if (take) way_ = Way::Shared;
  on_header(peer);  // pieces, and truncation as for version 1
}

// Posts the receives of the next pieces' descriptors.
bool FramedRecv::post_shared_pieces(Peer& peer, const StageEnv& env) {
  const hmc_net_plugin_v2_t* t = peer.net->table();
  bool moved = false;
  while (next_index_ < pieces_ && pipe_.has_room(env)) {
    Piece p;
    p.index = next_index_;
    p.shared = true;
    piece_span(p.index, total_, geo_, &p.offset, &p.len);
    p.fit = p.len;
    Piece& in = pipe_.add(std::move(p));  // received into in place
    hmc_plugin_status_t ps =
        t->irecv(peer.ep, in.desc, kDescriptorSize, nullptr, wire_tag(tag_, in.index), &in.net);
    if (ps != HMC_PLUGIN_SUCCESS) {
      in.state = PieceState::Done;
      plugin_failed(ps);
      return true;
    }
    in.state = PieceState::Posted;
    ++next_index_;
    moved = true;
  }
  return moved;
}

// Maps the sender's slab (once per peer) and starts the piece's host-to-device copy out of it.
// False when the piece cannot be read (status set; the acknowledgement says so).
bool FramedRecv::start_shared_copy(Piece& p, Peer& peer, const StageEnv& env) {
  PieceDescriptor d;
  decode_descriptor(p.desc, kDescriptorSize, &d);
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
                                             "staging buffers ({}: {})",
                                             peer.name, tag_, path, strerror(err)));
      return false;
    }
    auto slab = std::make_shared<SharedSlab>();
    slab->base = base;
    slab->bytes = d.slab_bytes;
    const Device* dev = local_device_;
    if (dev && HMC_DEVICE_SLOT(dev->plugin, host_register)) {
      hmc_plugin_status_t ps = dev->plugin->host_register(dev->plugin_ctx, base, d.slab_bytes);
      if (ps == HMC_PLUGIN_SUCCESS)
        slab->pinned_on = dev;
      else
        HMC_LOG_I(
            "shared bounces: {} cannot pin a peer's staging slab ({}); copies from it "
            "are pageable",
            dev->name, plugin_status_string(ps));
    }
    it = slabs.emplace(key, std::move(slab)).first;
  }
  p.slab = it->second;
  const uint8_t* src = static_cast<const uint8_t*>(p.slab->base) + d.offset;
  hmc_status_t st = env.copier->start(user_ + p.offset, src, p.len, &p.copy);
  if (st != HMC_SUCCESS) {
    p.slab.reset();
    fail_local(st, fmt::format("hmc_recv: copying a piece into device memory: {}", last_error()));
    return true;  // readable; our device failed
  }
  p.state = PieceState::Unloading;
  return true;
}

// Descriptor in, copy out of the sender's bounce, acknowledgement: in piece order.
bool FramedRecv::advance_shared(Peer& peer, const StageEnv& env) {
  const hmc_net_plugin_v2_t* t = peer.net->table();
  bool moved = false;
  for (auto& p : pipe_) {
    if (!p.shared) continue;
    if (p.state == PieceState::Posted) {  // the descriptor
      hmc_plugin_status_t st;
      size_t got;
      if (!request_ended(t, &p.net, &st, &got)) continue;
      moved = true;
      PieceDescriptor d;
      if (st == HMC_PLUGIN_SUCCESS && !decode_descriptor(p.desc, got, &d))
        st = HMC_PLUGIN_ERR_TRUNCATED;
      if (st == HMC_PLUGIN_SUCCESS && d.len != 0 && d.len != p.len) st = HMC_PLUGIN_ERR_TRUNCATED;
      if (st != HMC_PLUGIN_SUCCESS) {
        if (st == HMC_PLUGIN_ERR_TRUNCATED) {
          HMC_LOG_W(
              "peer {}: framed message on tag {}: malformed piece descriptor (piece {}, "
              "{} bytes, length {} of {})",
              peer.name, tag_, p.index, got, d.len, p.len);
          st = HMC_PLUGIN_ERR_INTERNAL;
        }
        plugin_failed(st);
        return true;
      }
      uint32_t code = kAckRead;
      p.state = PieceState::Ready;  // acknowledgement due
      if (d.len == 0) {
        fail_local(HMC_ERR_REMOTE,
                   fmt::format("hmc_recv from {} (tag {}): the sender aborted the message after "
                               "{} bytes (its device failed)",
                               peer.name, tag_, p.offset));
      } else if (status_ == HMC_SUCCESS && !start_shared_copy(p, peer, env)) {
        code = kAckUnreadable;
      }
      encode_reply(p.ack_msg, code);
    }
    if (p.state == PieceState::Unloading) {
      hmc_status_t st = p.copy.poll();
      if (st == HMC_IN_PROGRESS) continue;
      moved = true;
      if (st != HMC_SUCCESS)
        fail_local(st,
                   fmt::format("hmc_recv: copying a piece into device memory: {}", last_error()));
      p.slab.reset();
      p.state = PieceState::Ready;
    }
  }
  // Acknowledgements in piece order: the sender matches them to its pieces by order.
  for (auto& p : pipe_) {
    if (!p.shared) continue;
    if (p.state == PieceState::Ready && p.index == next_ack_) {
      hmc_plugin_status_t ps =
          t->isend(peer.ep, p.ack_msg, sizeof p.ack_msg, nullptr, reply_tag(tag_), &p.net);
      if (ps != HMC_PLUGIN_SUCCESS) {
        plugin_failed(ps);
        return true;
      }
      p.state = PieceState::Acking;
      ++next_ack_;
      moved = true;
    }
    if (p.state == PieceState::Acking) {
      hmc_plugin_status_t st;
      size_t got;
      if (!request_ended(t, &p.net, &st, &got)) continue;
      moved = true;
      if (st != HMC_PLUGIN_SUCCESS) {
        plugin_failed(st);
        return true;
      }
      p.state = PieceState::Done;
    }
  }
  return moved;
}

}  // namespace hmc
