// What one peer pair keeps for its framed transfers: the geometry and ways it agreed on at
// connect, the per-tag order of its transfers, its device IPC and shared-slab mappings, counters.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "path/device_modes.h"
#include "peer/frame_geometry.h"

namespace hmc {

struct Device;
struct Request;

// A staging slab of a peer process on this host, mapped here (shared bounces) and pinned for the
// receiving device where its plugin can; unmapped when the last transfer using it lets go.
struct SharedSlab {
  void* base = nullptr;
  size_t bytes = 0;
  const Device* pinned_on = nullptr;  // registered with this device's plugin, or nullptr
  ~SharedSlab();
};

// An allocation of a peer's process mapped into this one through device IPC; unmapped when the
// last transfer using it lets go (copies from it have ended by then).
struct IpcMapping {
  const Device* device = nullptr;  // the local device it is mapped on
  void* base = nullptr;
  ~IpcMapping();
};

// Guarded by the peer's net mutex unless said otherwise.
struct PeerFramingState {
  // Agreed at connect, never changed.
  uint64_t chunk = 0;        // 0: framing off for this peer pair
  uint64_t first_piece = 0;  // piece 0's size (<= chunk)
  FrameGeometry geometry() const { return {first_piece, chunk}; }
  bool on() const { return chunk != 0; }
  // Whether a message of `size` bytes goes through a FramedTransfer even from host memory.
  bool multi_piece(uint64_t size) const { return hmc::multi_piece(size, geometry()); }
  // Device plugins whose memory may cross by device IPC to this peer (same host, both sides
  // IPC-capable, HMC_DEVICE_IPC on both).
  std::vector<std::string> ipc_plugins;
  // Shared bounces are possible with this peer (same host, other process, both offer them).
  bool shared_ok = false;
  // Both sides read a device IPC header that also offers shared bounces (version 4).
  bool ipc_or_shared = false;
  // How device memory of each local plugin may cross (path/device_modes.h): the ways open to
  // the pair with their expected figures, ranked per message by its size.
  std::vector<std::pair<std::string, std::vector<path::ModeCost>>> device_modes;
  const std::vector<path::ModeCost>* modes_for(const std::string& plugin) const {
    for (const auto& m : device_modes)
      if (m.first == plugin) return &m.second;
    return nullptr;
  }

  // The order of framed transfers per tag.
  // Sends with pieces not yet all posted, in post order.
  std::unordered_map<uint64_t, std::deque<Request*>> sends;
  // Receives whose piece 0 is not posted yet (no bounce buffer was free).
  std::unordered_map<uint64_t, std::deque<Request*>> first;
  // Receives that may still own the tag's continuation stream, in post order.
  std::unordered_map<uint64_t, std::deque<Request*>> streams;

  // Device IPC (framed/ipc.cpp). Mappings of the peer's allocations by handle bytes: one per
  // allocation however many messages read from it, kept for later messages up to
  // StageEnv::ipc_cache of them (least recently used first, never one a copy still reads). A new
  // allocation gets a new handle even at a reused address: an entry never maps the wrong memory.
  struct CachedMapping {
    std::shared_ptr<IpcMapping> mapping;
    uint64_t last_use = 0;
  };
  std::map<std::string, CachedMapping> ipc_maps;
  uint64_t ipc_uses = 0;
  // Unmaps the least recently used mappings no copy reads until at most `keep` remain.
  void trim_ipc(size_t keep);
  // Set once, never cleared, when the peer could not map this side's memory; read without the
  // net mutex when sends are posted.
  std::atomic<bool> ipc_refused{false};
  bool ipc_for(const std::string& plugin) const {
    if (ipc_refused.load(std::memory_order_relaxed)) return false;
    for (const auto& p : ipc_plugins)
      if (p == plugin) return true;
    return false;
  }

  // Shared bounces (framed/shared_bounces.cpp). Refused once, never cleared, when the peer could
  // not read this side's buffers.
  std::atomic<bool> shared_refused{false};
  bool shared_for_sends() const {
    return shared_ok && !shared_refused.load(std::memory_order_relaxed);
  }
  // The peer's staging slabs mapped here, by (fd, bytes); they live as long as its context.
  std::map<std::pair<int32_t, uint64_t>, std::shared_ptr<SharedSlab>> shared_slabs;

  // For hmc_peer_info: written under the net mutex, read without it.
  std::atomic<uint64_t> ipc_messages{0};      // crossed by device IPC
  std::atomic<uint64_t> staged_transfers{0};  // device memory through bounce buffers
  std::atomic<uint64_t> shared_messages{0};   // staged through shared bounces
  std::atomic<uint64_t> direct_transfers{0};  // puts and gets of device memory, no bounce
};

}  // namespace hmc
