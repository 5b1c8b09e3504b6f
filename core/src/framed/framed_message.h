// The two sides of a framed message (docs/protocols-wire.md): piece 0 on the user's tag, then a
// header on the continuation tag, then the rest by one of three ways: pieces through the
// transport (framed/pieces.cpp), device IPC (framed/ipc.cpp) or shared bounces
// (framed/shared_bounces.cpp). Sends and receives of a tag keep their post order on the wire.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "framed/frame_header.h"
#include "framed/framed_transfer.h"

namespace hmc {

struct Device;
struct IpcMapping;

// How the bytes after the header travel.
enum class Way {
  Transport,  // pieces through the transport
  Ipc,        // the receiver copies them out of the sender's allocation (device IPC)
  Shared,     // the receiver copies them out of the sender's bounce buffers
};

class FramedSend final : public FramedTransfer {
 public:
  // `staged`: the memory is a device the path cannot reach (pieces go through bounces).
  FramedSend(const void* buf, size_t size, uint64_t tag, bool staged, const FrameGeometry& g);
  // Offers the message (more than the first piece) by device IPC from the allocation `ex`
  // describes; shared_too: the header (version 4) also offers shared bounces, which a receiver
  // whose buffer cannot take the IPC copy (another vendor's device memory) reads instead.
  void use_ipc(IpcExport ex, bool shared_too = false);
  // Offers shared bounces for a message of staged memory larger than the first piece (the
  // receiver's buffer decides).
  void offer_shared();
  bool started() const override { return posted_ > 0; }

 private:
  // Where the send stands in its tag's order of sends.
  enum class Stage {
    New,            // before its first step
    Posting,        // in the tag's line of sends: its pieces go out in order once it is first
    AwaitingReply,  // the header offering Way::Ipc or Way::Shared is out: the reply decides
    Posted,         // every piece posted, out of the line: waiting for them to end
  };
  // What a failure of the sender's device (or a cancel) left of the message.
  enum class Loss {
    None,
    Rest,  // the pieces after the failure go out empty: the receiver sees the abort
    All,   // piece 0 never left: nothing goes out
  };

  bool step(Request* req, Peer& peer, const StageEnv& env) override;
  hmc_plugin_status_t cancel_step(Request* req, Peer& peer) override;
  bool in_line() const { return stage_ == Stage::Posting || stage_ == Stage::AwaitingReply; }
  void lose(bool at_piece0) {
    if (at_piece0)
      loss_ = Loss::All;
    else if (loss_ == Loss::None)
      loss_ = Loss::Rest;
  }
  // framed/pieces.cpp (use_ipc: framed/ipc.cpp; offer_shared: framed/shared_bounces.cpp)
  bool stage_pieces(const StageEnv& env);
  void prepare_header(const StageEnv& env, Piece& h);
  bool poll_copies();
  bool post_pieces(Request* req, Peer& peer, const StageEnv& env);
  bool test_posted(Peer& peer);
  void try_finish(Request* req, Peer& peer);
  // The receiver's answer to a header that offers Way::Ipc or Way::Shared.
  bool post_reply_recv(Peer& peer);
  void on_reply(Peer& peer);
  // framed/shared_bounces.cpp
  bool post_shared_piece(Piece& p, Peer& peer, const StageEnv& env);
  bool advance_shared(Peer& peer);

  uint64_t tag_ = 0;
  FrameGeometry geo_;
  bool staged_ = false;
  Stage stage_ = Stage::New;
  Way way_ = Way::Transport;  // before the reply: the way the header offers
  Loss loss_ = Loss::None;
  size_t pieces_ = 0;      // in the message, header included
  size_t next_index_ = 0;  // next piece to prepare
  size_t posted_ = 0;      // pieces posted, in order
  IpcExport ipc_export_;   // Way::Ipc
  uint8_t header_[kHeaderMax] = {};
  uint8_t reply_[kReplySize] = {};
};

class FramedRecv final : public FramedTransfer {
 public:
  FramedRecv(void* buf, size_t capacity, uint64_t tag, bool staged, const FrameGeometry& g);
  ~FramedRecv() override;
  // The device of the user buffer when it is device memory, so that a device IPC message can
  // be copied straight into it.
  void set_local_device(const Device* d) { local_device_ = d; }
  bool started() const override { return stage_ != Stage::New && stage_ != Stage::WaitingTurn; }
  void end_unmatched(Request* req, Peer& peer) override;
  void settle(const StageEnv& env) override;

 private:
  // Where the receive stands in its tag's order of receives.
  enum class Stage {
    New,             // before its first step
    WaitingTurn,     // piece 0 waits for earlier receives of the tag, or for a bounce buffer
    Piece0,          // piece 0 is posted
    AwaitingStream,  // piece 0 announced a header: waits to own the tag's continuation stream
    Header,          // owns the stream; the header's receive is posted
    Body,            // the header is in: the rest comes the way it says
    Single,          // piece 0 was the whole message (or the receive ended before its stream)
  };

  bool step(Request* req, Peer& peer, const StageEnv& env) override;
  hmc_plugin_status_t cancel_step(Request* req, Peer& peer) override;
  // In the tag's order of receives that may need its continuation stream.
  bool in_streams() const { return stage_ != Stage::New && stage_ != Stage::Single; }
  void become_single(Request* req, Peer& peer);
  // framed/pieces.cpp
  bool post_pieces(Request* req, Peer& peer, const StageEnv& env);
  bool post_piece0(Request* req, Peer& peer, const StageEnv& env);
  bool test_posted(Request* req, Peer& peer, const StageEnv& env);
  void on_piece0(Request* req, Peer& peer, size_t got, hmc_plugin_status_t st);
  void on_header(Peer& peer);
  void unload_piece(Piece& p, const StageEnv& env);
  bool poll_copies();
  void try_finish(Request* req, Peer& peer);
  // Answers a header that offers Way::Ipc or Way::Shared.
  bool post_reply(Peer& peer, uint32_t code);
  // framed/ipc.cpp
  void on_ipc_header(Peer& peer, const StageEnv& env, const IpcExport& ex);
  bool finish_ipc_copy(Peer& peer, const StageEnv& env);
  size_t ipc_keep(const StageEnv& env) const;
  // framed/shared_bounces.cpp
  void on_shared_header(Peer& peer);
  bool post_shared_pieces(Peer& peer, const StageEnv& env);
  bool start_shared_copy(Piece& p, Peer& peer, const StageEnv& env);
  bool advance_shared(Peer& peer, const StageEnv& env);

  uint64_t tag_ = 0;
  FrameGeometry geo_;
  bool staged_ = false;
  Stage stage_ = Stage::New;
  Way way_ = Way::Transport;
  bool draining_ = false;  // the message is larger than the buffer: the rest is read and dropped
  size_t pieces_ = 0;      // in the message, header included; known from Stage::Body or Single
  size_t next_index_ = 0;  // next piece to post
  uint64_t total_ = 0;     // the message's size, from the header
  size_t next_ack_ = 2;    // Way::Shared: the piece whose acknowledgement goes next
  const Device* local_device_ = nullptr;
  std::shared_ptr<IpcMapping> mapping_;  // Way::Ipc: held while the copy runs
  uint8_t header_[kHeaderMax] = {};
  uint8_t reply_[kReplySize] = {};
};

}  // namespace hmc
