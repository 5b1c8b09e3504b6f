// Device IPC: the receiver maps the sender's allocation (its handle comes in a version 2 or 4
// header), copies the rest of the message device to device, then replies "done"; the sender's
// buffer is read until then. The offer's reply is handled with the others in framed/pieces.cpp.
#include <memory>
#include <string>

#include "framed/framed_message.h"
#include "net/net_plugin.h"
#include "peer/peer.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

void FramedSend::use_ipc(IpcExport ex, bool shared_too) {
  way_ = Way::Ipc;
  ipc_export_ = std::move(ex);
  ipc_export_.shared_too = shared_too;
  pieces_ = 2;  // piece 0 and the header; the pieces only if the receiver asks for them
}

// A version 2 or 4 header arrived: copy the rest of the message out of the sender's allocation,
// or ask for shared bounces (version 4) or the pieces.
void FramedRecv::on_ipc_header(Peer& peer, const StageEnv& env, const IpcExport& ex) {
  stage_ = Stage::Body;
  pieces_ = 2;
  next_index_ = 2;
  if (draining_ || total_ > size_) {  // truncated: nothing to copy, nothing to drain
    if (!draining_) {
      status_ = HMC_ERR_TRUNCATED;
      error_ = fmt::format(
          "hmc_recv from {} (tag {}): the {}-byte message was larger than the "
          "{}-byte buffer",
          peer.name, tag_, total_, size_);
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
    way_ = Way::Shared;
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
        HMC_LOG_W(
            "peer {}: {} cannot map the peer's device memory by IPC ({}); its messages "
            "are staged through host memory from now on",
            peer.name, dev->name, plugin_status_string(ps));
        code = kReplyNoIpc;
      }
    }
    if (mapping_) {
      Piece c;
      c.index = Piece::kIpcCopyIndex;
      c.offset = geo_.first;
      c.len = static_cast<size_t>(total_ - geo_.first);
      const uint8_t* src = static_cast<const uint8_t*>(mapping_->base) + ex.offset + c.offset;
      hmc_status_t st = env.copier->start(user_ + c.offset, src, c.len, &c.copy);
      if (st == HMC_SUCCESS) {
        c.state = PieceState::Unloading;
        pipe_.add(std::move(c));
        way_ = Way::Ipc;
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
size_t FramedRecv::ipc_keep(const StageEnv& env) const {
  bool unique = local_device_ && (local_device_->caps & HMC_DEVICE_CAP_IPC_UNIQUE_HANDLES);
  return unique ? env.ipc_cache : 0;
}

// The copy ended: the sender's buffer is free either way.
bool FramedRecv::finish_ipc_copy(Peer& peer, const StageEnv& env) {
  for (auto& p : pipe_) {
    if (p.index != Piece::kIpcCopyIndex || p.state != PieceState::Unloading) continue;
    hmc_status_t st = p.copy.poll();
    if (st == HMC_IN_PROGRESS) return false;
    if (st != HMC_SUCCESS)
      fail_local(st, fmt::format("hmc_recv from {} (tag {}): copying from the sender's device "
                                 "memory by IPC: {}",
                                 peer.name, tag_, last_error()));
    p.state = PieceState::Done;
    mapping_.reset();
    peer.framing.trim_ipc(ipc_keep(env));
    post_reply(peer, kReplyDone);
    return true;
  }
  return false;
}

}  // namespace hmc
