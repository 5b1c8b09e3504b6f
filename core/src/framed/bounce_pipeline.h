// The pieces of one framed transfer that hold resources, and their pinned bounce buffers from the
// context's stage pool: device copies of some pieces overlap the wire transfers of others,
// StageEnv::depth pieces at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>

#include "device/copy.h"
#include "framed/frame_header.h"
#include "hmc/plugin/net.h"

namespace hmc {

class StagePool;
class CopyEngine;
struct SharedSlab;

// What framed transfers use of their context.
struct StageEnv {
  StagePool* pool = nullptr;
  CopyEngine* copier = nullptr;
  uint32_t depth = 4;
  size_t ipc_cache = 64;  // HMC_DEVICE_IPC_CACHE: peer allocations kept mapped, per peer
};

// Where a piece stands. A sent piece of staged memory goes Copying (device to bounce), Ready,
// Posted, Done; a received one Posted, Unloading (bounce to device), Done. A shared-bounce
// receive goes Posted (its descriptor), Unloading, Ready (acknowledgement due), Acking, Done.
enum class PieceState { Copying, Ready, Posted, Unloading, Acking, Done };

// One piece: piece 0, the header (index 1), a later piece, or one of device IPC's two steps.
struct Piece {
  // Indexes of device IPC's steps: the receiver's device-to-device copy, and the reply.
  static constexpr size_t kIpcCopyIndex = ~size_t(0) - 1;
  static constexpr size_t kReplyIndex = ~size_t(0);

  size_t index = 0;
  size_t offset = 0;       // in the user buffer
  size_t len = 0;          // bytes to send / expected (receive capacity)
  size_t fit = 0;          // receive: bytes of it that fit into the user buffer
  uint64_t remote = 0;     // one-sided pieces: the remote address of the first byte
  void* bounce = nullptr;  // pool buffer, nullptr when direct
  CopyJob copy;
  hmc_net_request_t* net = nullptr;
  PieceState state = PieceState::Ready;
  size_t got = 0;
  // Shared bounces: the piece's descriptor travels instead of its bytes.
  bool shared = false;
  hmc_net_request_t* ack = nullptr;  // sender: the acknowledgement's receive
  uint8_t desc[kDescriptorSize] = {};
  uint8_t ack_msg[kReplySize] = {};
  std::shared_ptr<SharedSlab> slab;  // receiver: held while the copy reads it
};

class BouncePipeline {
 public:
  using iterator = std::list<Piece>::iterator;
  iterator begin() { return pieces_.begin(); }
  iterator end() { return pieces_.end(); }
  Piece& front() { return pieces_.front(); }
  size_t size() const { return pieces_.size(); }
  // Nothing held: no piece in flight, no bounce buffer, no device copy running.
  bool idle() const { return pieces_.empty(); }
  // Whether another piece may start (StageEnv::depth pieces at once).
  bool has_room(const StageEnv& env) const { return pieces_.size() < env.depth; }
  // The piece stays put (plugins and copies write into it) until release() drops it.
  Piece& add(Piece&& p) { return pieces_.emplace_back(std::move(p)); }

  // Gives the bounce buffers of Done pieces back to the pool and drops them; true when any.
  bool release(const StageEnv& env);
  // For a transfer that ended early: pieces whose device copies ended are Done, and released.
  void settle(const StageEnv& env);
  // The peer's endpoint is gone: forget every plugin request (the plugin released them).
  void forget_plugin_requests();

 private:
  std::list<Piece> pieces_;
};

}  // namespace hmc
