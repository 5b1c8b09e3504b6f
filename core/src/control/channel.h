// Channel: framed control messages over one connected, non-blocking stream socket.
//
// Thread-compatibility: a Channel is used by one thread at a time (the engine serialises access);
// distinct Channels are independent.
//
// Failure model. A failure of the stream makes that direction dead and every later call in it
// returns the same status and message:
//  - HMC_ERR_PEER_LOST: EOF, ECONNRESET, EPIPE (the message names the peer when set_peer_name()
//    was called, else the fd). EOF also kills the send side. A failed send does not stop
//    receive() from delivering what the peer sent before it went away (a final Error or Bye).
//  - HMC_ERR_PROTOCOL: a malformed frame arrived; both directions are dead.
//  - HMC_ERR_SYSTEM: any other socket error; both directions are dead.
// The Channel never raises SIGPIPE (MSG_NOSIGNAL).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "control/fd.h"
#include "control/frame.h"
#include "control/wire.h"
#include "hmc/hmc.h"

namespace hmc::control {

class Channel {
 public:
  using Message = control::Message;

  // Takes ownership of a connected stream socket. The socket should be non-blocking (every
  // socket from socket.h is); the Channel also passes MSG_DONTWAIT on every call.
  explicit Channel(Fd fd);
  Channel(Channel&&) = default;
  Channel& operator=(Channel&&) = default;

  int fd() const { return fd_.get(); }

  // Queues one frame and writes as much of the queue as the socket takes now. HMC_SUCCESS means
  // queued (maybe not yet written: see want_write). HMC_ERR_INVALID_ARGUMENT when the payload
  // exceeds kMaxFramePayload (the channel stays usable); otherwise the send side's failure.
  hmc_status_t send(MsgType type, const Writer& payload);
  hmc_status_t send(MsgType type, const uint8_t* payload, size_t len);
  // Writes queued bytes until the socket would block.
  hmc_status_t flush();
  // True while queued bytes remain: poll this fd for POLLOUT and call flush().
  bool want_write() const;
  size_t queued_bytes() const { return out_.size() - out_head_; }
  // Bytes read from the socket so far (a connector that sent none was only probing the port).
  uint64_t received_bytes() const { return received_bytes_; }

  // Reads everything available now (until EAGAIN, or at most kReadBudget bytes per call so that
  // one chatty peer cannot starve the others; poll is level-triggered, so the rest comes with the
  // next call) and appends each complete message to *out in arrival order.
  // When the stream fails after some messages arrived in this call, those are returned with
  // HMC_SUCCESS and the failure is returned by the next call, so a peer's last words (Error,
  // Bye) are never lost to its EOF.
  hmc_status_t receive(std::vector<Message>* out);

  // Blocking helpers for the handshake, bounded by a now_ns()-based deadline (poll(2)).
  // send_wait: send() then flush until the queue is empty; HMC_ERR_TIMEOUT at the deadline.
  hmc_status_t send_wait(MsgType type, const Writer& payload, uint64_t deadline_ns);
  hmc_status_t flush_wait(uint64_t deadline_ns);
  // The next message (queued or arriving before the deadline); flushes queued output meanwhile.
  // HMC_ERR_TIMEOUT when none arrived by the deadline.
  hmc_status_t receive_one(Message* out, uint64_t deadline_ns);

  // Frames with a longer payload fail the stream from now on (at most kMaxFramePayload).
  void set_max_payload(size_t n) { in_.set_max_payload(n); }
  void set_peer_name(std::string name) { peer_name_ = std::move(name); }
  const std::string& peer_name() const { return peer_name_; }

  static constexpr size_t kReadBudget = 8u << 20;

 private:
  std::string describe() const;
  hmc_status_t fail_send(hmc_status_t st, std::string msg);
  hmc_status_t fail_recv(hmc_status_t st, std::string msg);
  hmc_status_t fail_both(hmc_status_t st, std::string msg);
  hmc_status_t read_available(std::vector<Message>* out);

  Fd fd_;
  std::string peer_name_;
  std::vector<uint8_t> out_;  // queued frames; out_[out_head_..] not yet written
  size_t out_head_ = 0;
  uint64_t received_bytes_ = 0;
  FrameParser in_;
  std::deque<Message> ready_;  // received by receive_one's reads, not yet handed out
  hmc_status_t send_status_ = HMC_SUCCESS;
  std::string send_error_;
  hmc_status_t recv_status_ = HMC_SUCCESS;
  std::string recv_error_;
};

}  // namespace hmc::control
