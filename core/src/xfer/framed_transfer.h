// Framed two-sided transfers: how a message crosses a peer pair where either side has device
// memory, so that neither side needs to know the other's memory kind.
//
// Wire format (only on such "framing" peer pairs; both sides agree on the geometry at connect:
// the first piece's size F, at most the chunk C):
//  - a message smaller than C, and not of exactly F bytes, is one plugin message on the user tag,
//    as elsewhere, unless it is more than F bytes of device memory that may go by device IPC or
//    shared bounces (below): the sender decides, the receiver follows piece 0's size;
//  - any other message is
//      piece 0:  its first F bytes, on the user tag T;
//      header:   16 bytes {magic, version, total size} on the continuation tag T | 2^59;
//      pieces:   the rest, on the continuation tag, cut at multiples of C (so the first of
//                them is C - F bytes, the others C, the last one shorter).
//    A piece 0 of exactly F bytes is what tells the receiver that a header follows (no single
//    message has that size); the header tells it how many pieces to post, so it never posts a
//    receive past the message's end. F is small (kFirstPiece), so that a message sent by
//    device IPC (below) stages little.
//  - A sender whose device fails mid-message sends the remaining pieces empty: a piece shorter
//    than the header announced tells the receiver that the message was aborted.
//  - Device IPC (peers on one host that both have IPC-capable devices of one vendor, a message
//    of more than F bytes of staged device memory of that vendor): after piece 0 the header is
//    the longer version 2, which carries an IPC handle of the sender's allocation and the
//    message's offset in it, instead of the pieces. The receiver maps the allocation, copies the
//    rest of the message device to device, and answers with an 8-byte reply on the reply tag
//    T | 2^60; the sender's request ends with that reply (its buffer is read until then). A
//    receiver that cannot or will not map (its buffer is host memory or another vendor's, the
//    runtime refuses the handle) replies "send pieces", and the sender sends the pieces as in
//    version 1. Version 4 is version 2 with 8 more fixed bytes (u32 flags, u32 0) before the
//    handle; flag 1 offers shared bounces too (pairs whose capability records both say they
//    read version 4): a receiver whose buffer is another vendor's device memory replies
//    "shared" and the pieces go as in version 3.
//  - Shared bounces (peers in two processes on one host, a message of staged device memory on
//    both sides that does not go by IPC): the header is version 3, and after a "shared" reply
//    each piece is a 32-byte descriptor of the sender's bounce buffer (its staging pool's slabs
//    are memfds the receiver maps through /proc/<pid>/fd) instead of its bytes. The receiver
//    copies host-to-device straight out of that buffer and acknowledges each piece, in order,
//    on the reply tag; the sender reuses the buffer after the acknowledgement. One copy out and
//    one copy in, where the transport would add a third. Any other reply: version 1 pieces.
// Pieces move through pinned bounce buffers of the context's stage pool where the memory is a
// device the transport cannot reach: device-to-host copies overlap the wire on the sender,
// host-to-device copies overlap it on the receiver, `depth` pieces in flight per transfer.
//
// Puts and gets of local device memory the path cannot reach use the same pieces and bounces
// against ordinary remote memory (make_put/make_get): nothing changes on the wire.
//
// Ordering: messages with the same tag match in order, as the plugin ABI promises for single
// messages. Piece 0s of one tag are posted in post order; the continuation stream of a tag is
// used by one message at a time, in the order of their piece 0s, on both sides.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "device/copy.h"
#include "hmc/hmc.h"
#include "hmc/plugin/net.h"
#include "path/device_modes.h"
#include "xfer/frame_header.h"

namespace hmc {

class StagePool;
class CopyEngine;
class DeviceRegistry;
struct Device;
struct Peer;
struct Request;

// What framed transfers use of their context.
struct StageEnv {
  StagePool* pool = nullptr;
  CopyEngine* copier = nullptr;
  uint32_t depth = 4;
  size_t ipc_cache = 64;  // HMC_DEVICE_IPC_CACHE: peer allocations kept mapped, per peer
};

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

// Per peer framing state; guarded by the peer's net mutex.
struct PeerFramingState {
  uint64_t chunk = 0;  // 0: framing off for this peer pair
  uint64_t first_piece = 0;  // piece 0's size (<= chunk)
  FrameGeometry geometry() const { return {first_piece, chunk}; }
  // Whether a message of `size` bytes goes through a FramedTransfer even from host memory.
  bool multi_piece(uint64_t size) const { return size >= chunk || size == first_piece; }
  // Sends with pieces not yet all posted, per tag, in post order.
  std::unordered_map<uint64_t, std::deque<Request*>> sends;
  // Receives whose piece 0 is not posted yet (no bounce buffer was free), per tag.
  std::unordered_map<uint64_t, std::deque<Request*>> first;
  // Receives that may still own the continuation stream of their tag, per tag, in post order.
  std::unordered_map<uint64_t, std::deque<Request*>> streams;
  // Device plugins whose memory may cross by device IPC to this peer (same host, both sides
  // IPC-capable, HMC_DEVICE_IPC on both); set at connect, never changed.
  std::vector<std::string> ipc_plugins;
  // Mappings of the peer's allocations (device IPC), by handle bytes: one per allocation however
  // many messages read from it at once, kept open for later messages up to StageEnv::ipc_cache
  // of them (the least recently used goes first, never one a copy still reads). The runtimes
  // give a new allocation a new handle even at a reused address, so an entry never maps the
  // wrong memory; a cached mapping does keep a freed allocation's memory until it goes.
  struct CachedMapping {
    std::shared_ptr<IpcMapping> mapping;
    uint64_t last_use = 0;
  };
  std::map<std::string, CachedMapping> ipc_maps;
  uint64_t ipc_uses = 0;
  // Shared bounces: possible with this peer (same host, other process, both sides offer it);
  // set at connect. Refused (once, never cleared) when it could not read this side's buffers.
  bool shared_ok = false;
  std::atomic<bool> shared_refused{false};
  bool shared_for_sends() const { return shared_ok && !shared_refused.load(std::memory_order_relaxed); }
  // Both sides understand a device IPC header that also offers shared bounces (version 4), so
  // that a receiver whose buffer cannot take IPC (host memory aside) reads shared bounces.
  bool ipc_or_shared = false;
  // The peer's staging slabs mapped here, by (fd, bytes); they live as long as its context.
  std::map<std::pair<int32_t, uint64_t>, std::shared_ptr<SharedSlab>> shared_slabs;
  // Unmaps the least recently used mappings no copy reads until at most `keep` remain.
  void trim_ipc(size_t keep);
  // Set (once, never cleared) when the peer could not map this side's memory: no more IPC.
  // Read without the net mutex when sends are posted.
  std::atomic<bool> ipc_refused{false};
  // Messages that crossed by device IPC, and transfers whose device memory went through bounce
  // buffers (hmc_peer_info). Written under the net mutex, read without it.
  std::atomic<uint64_t> ipc_messages{0};
  std::atomic<uint64_t> staged_transfers{0};
  std::atomic<uint64_t> shared_messages{0};  // staged through shared bounces
  // How device memory of each local plugin may cross (path/device_modes.h): the ways open to
  // the pair with their expected figures, ranked per message by its size; set at connect.
  std::vector<std::pair<std::string, std::vector<path::ModeCost>>> device_modes;
  const std::vector<path::ModeCost>* modes_for(const std::string& plugin) const {
    for (const auto& m : device_modes)
      if (m.first == plugin) return &m.second;
    return nullptr;
  }
  bool on() const { return chunk != 0; }
  bool ipc_for(const std::string& plugin) const {
    if (ipc_refused.load(std::memory_order_relaxed)) return false;
    for (const auto& p : ipc_plugins)
      if (p == plugin) return true;
    return false;
  }
};

// One framed send or receive; owned by its Request.
class FramedTransfer {
 public:
  // `staged`: the user memory is a device the path cannot reach (pieces go through bounces).
  static std::unique_ptr<FramedTransfer> make_send(const void* buf, size_t size, uint64_t tag, bool staged,
                                           const FrameGeometry& g);
  static std::unique_ptr<FramedTransfer> make_recv(void* buf, size_t capacity, uint64_t tag, bool staged,
                                           const FrameGeometry& g);
  // Sends the message (more than the first piece) by device IPC from the allocation `ex`
  // describes.
  // shared_too: the header (version 4) also offers shared bounces, which a receiver whose
  // buffer cannot take the IPC copy (another vendor's device memory) reads instead.
  void use_ipc(IpcExport ex, bool shared_too = false);
  // Receives: the plugin and device of the user buffer when it is device memory (nullptr for
  // host memory), so that a device IPC message can be copied straight into it.
  void set_local_device(const Device* d) { local_device_ = d; }
  // Sends of staged memory larger than the first piece: sent as pieces, offering the receiver
  // shared bounces (its buffer decides).
  void offer_shared();
  // One-sided transfers of local device memory the path cannot reach, to or from remote memory
  // the path can (its registration at addr, rkey): pieces of `chunk` bytes through bounce
  // buffers, `depth` in flight (put: device-to-host copy, then iput; get: iget, then
  // host-to-device copy). No framing on the wire: the target sees ordinary puts and gets.
  static std::unique_ptr<FramedTransfer> make_put(const void* buf, size_t size, uint64_t addr,
                                          hmc_net_rkey_t* rkey, uint64_t chunk);
  static std::unique_ptr<FramedTransfer> make_get(void* buf, size_t size, uint64_t addr,
                                          hmc_net_rkey_t* rkey, uint64_t chunk);
  ~FramedTransfer();

  // Moves the transfer along; net mutex held; `req` is the request owning this transfer.
  // Returns true when something happened. Errors of the path (the plugin's status) are
  // reported through broken(); everything else ends the request through finished().
  bool advance(Request* req, Peer& peer, const StageEnv& env);
  bool finished() const { return finished_; }
  bool broken() const { return broken_; }  // the plugin failed: the peer's path is gone
  hmc_plugin_status_t plugin_status() const { return plugin_status_; }
  // broken() because a receive's piece 0 matched nothing before the path broke (PEER_LOST).
  bool unmatched() const { return unmatched_; }
  // The peer closed in order, so that is not the path's end: the receive ends with PEER_LOST
  // and the path stays for what did arrive. The bounces are returned by release().
  void end_unmatched(Request* req, Peer& peer);
  hmc_status_t status() const { return status_; }
  const std::string& error() const { return error_; }
  size_t bytes() const { return bytes_; }
  bool started() const { return piece0_posted_; }
  uint64_t tag() const { return tag_; }
  bool is_send() const { return send_; }

  // Cancels the transfer if nothing of it matched yet: a send none of which left, or a receive
  // whose piece 0 has not matched (the plugin is asked to cancel it). NOT_SUPPORTED otherwise.
  hmc_plugin_status_t cancel(Request* req, Peer& peer);
  // The peer's endpoint is gone: forget every plugin request (the plugin released them).
  void forget_plugin_requests();
  // Returns the bounce buffers of pieces that are done; true when it returned any.
  bool release(const StageEnv& env);
  // For a transfer that ended early (its peer failed): marks pieces whose device copies ended
  // as done and returns their buffers.
  void settle(const StageEnv& env);
  // Nothing held any more: no piece in flight, no bounce buffer, no device copy running.
  bool idle() const { return slots_.empty(); }

 private:
  // Acking: a shared-bounce receive's acknowledgement is being sent.
  enum class SlotState { Copying, Ready, Posted, Unloading, Acking, Done };
  // Slot indexes of device IPC: the receiver's device-to-device copy and the reply.
  static constexpr size_t kIpcCopyIndex = ~size_t(0) - 1;
  static constexpr size_t kReplyIndex = ~size_t(0);
  struct Slot {
    size_t index = 0;        // 0: piece 0; 1: header; 2..: continuation pieces
    size_t offset = 0;       // in the user buffer
    size_t len = 0;          // bytes to send / expected (receive capacity)
    size_t fit = 0;          // receive: bytes of it that fit into the user buffer
    void* bounce = nullptr;  // pool buffer, nullptr when direct
    CopyJob copy;
    hmc_net_request_t* net = nullptr;
    SlotState state = SlotState::Ready;
    size_t got = 0;
    // Shared bounces: the piece's descriptor travels instead of its bytes.
    bool shared = false;
    hmc_net_request_t* ack = nullptr;  // sender: the acknowledgement's receive
    uint8_t desc[32] = {};
    uint8_t ack_msg[8] = {};
    std::shared_ptr<SharedSlab> slab;  // receiver: held while the copy reads it
  };

  FramedTransfer() = default;
  bool advance_send(Request* req, Peer& peer, const StageEnv& env);
  bool advance_rma(Peer& peer, const StageEnv& env);
  bool advance_recv(Request* req, Peer& peer, const StageEnv& env);
  bool prepare_send(const StageEnv& env);
  bool post_sends(Request* req, Peer& peer, const StageEnv& env);
  bool post_recvs(Request* req, Peer& peer, const StageEnv& env);
  bool test_posted(Peer& peer, const StageEnv& env);
  bool poll_copies(const StageEnv& env);
  void finish_piece_recv(Slot& s, const StageEnv& env);
  void on_piece0(Peer& peer, size_t got, hmc_plugin_status_t st);
  void on_header(Peer& peer);
  // Device IPC: the receiver's handling of a version 2 header, and of its copy's end.
  void on_ipc_header(Peer& peer, const StageEnv& env, const IpcExport& ex);
  bool finish_ipc_copy(Peer& peer, const StageEnv& env);
  bool post_reply(Peer& peer, uint32_t code);
  size_t ipc_keep(const StageEnv& env) const;
  void on_reply(Peer& peer);
  // Shared bounces.
  void on_shared_header(Peer& peer);
  bool post_shared_piece(Slot& s, Peer& peer, const StageEnv& env);
  bool advance_shared_send(Peer& peer);
  bool advance_shared_recv(Peer& peer, const StageEnv& env);
  bool start_shared_copy(Slot& s, Peer& peer, const StageEnv& env);
  void fail_local(hmc_status_t st, std::string why);
  void plugin_failed(hmc_plugin_status_t st);
  void try_finish(Request* req, Peer& peer);
  size_t window() const;  // slots holding resources

  bool send_ = true;
  bool rma_ = false;       // a put (send_) or get (!send_) of staged local memory
  uint64_t rma_addr_ = 0;  // remote address of the first byte
  hmc_net_rkey_t* rkey_ = nullptr;
  bool staged_ = false;
  uint8_t* user_ = nullptr;
  size_t size_ = 0;  // send: message size; receive: capacity
  uint64_t tag_ = 0;
  FrameGeometry geo_;

  std::list<Slot> slots_;
  size_t next_index_ = 0;    // next piece to prepare (send) or post (receive)
  size_t pieces_ = 0;        // pieces in the message incl. header; 0 while unknown (receive)
  size_t posted_ = 0;        // send: pieces posted, in order
  bool piece0_posted_ = false;
  bool stream_owner_ = false;  // receive: this message's continuation stream is being read
  bool in_streams_ = false;    // receive: listed in PeerFramingState::streams
  bool in_sends_ = false;      // send: listed in PeerFramingState::sends
  bool draining_ = false;      // receive: the pieces are read and dropped (truncated)
  bool aborted_ = false;       // send: device failed mid-message, rest goes out empty
  bool dropped_ = false;       // send: failed (or cancelled) before piece 0 left: nothing goes out
  uint8_t header_[kHeaderMax] = {};  // any version
  uint64_t total_ = 0;         // receive: message size from the header

  // Device IPC.
  bool ipc_ = false;            // send: the message goes by IPC unless the receiver says no
  bool awaiting_reply_ = false; // send: the header is out, the reply is not in yet
  IpcExport ipc_export_;        // send
  const Device* local_device_ = nullptr;  // receive: device of the user buffer, if any
  bool shared_offer_ = false;   // send: propose shared bounces in the header
  bool ipc_shared_too_ = false; // send: the IPC header offers shared bounces as well
  bool shared_ = false;         // both: this message's pieces go through shared bounces
  size_t next_ack_ = 2;         // receive: the piece whose acknowledgement goes next
  std::shared_ptr<IpcMapping> mapping_;   // receive: held while the copy runs
  uint8_t reply_[8] = {};

  bool finished_ = false;
  bool broken_ = false;
  bool unmatched_ = false;
  hmc_plugin_status_t plugin_status_ = HMC_PLUGIN_SUCCESS;
  hmc_status_t status_ = HMC_SUCCESS;
  std::string error_;
  size_t bytes_ = 0;

};

}  // namespace hmc
