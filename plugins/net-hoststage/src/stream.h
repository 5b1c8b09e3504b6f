// One byte stream of an endpoint (a TCP connection, or the Unix socket of an shm endpoint):
// frames out of a queue with gathered writes, frames in through a receive buffer, and bulk DATA
// payloads read straight into their destination.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "util.h"
#include "wire.h"

namespace hmc::hoststage {

class Context;
class Endpoint;
struct Request;

// One piece of a vectored transfer on this side: its bytes here, and the peer's address of them.
struct VecSpan {
  uint8_t* local;
  uint64_t remote;
  uint64_t len;
};

// A header plus an optional payload that stays owned by someone else (the caller's buffer, a
// registered region) until the frame is written. A DATA frame of a vectored transfer gathers its
// payload from consecutive pieces instead (spans, from span_off bytes into piece span_first).
struct OutFrame {
  enum OnWritten : uint8_t { kNothing, kCompleteReq, kBulkBytes };
  WireHdr hdr{};
  const uint8_t* data = nullptr;
  size_t len = 0;   // payload bytes
  size_t done = 0;  // bytes of header + payload written so far
  Request* req = nullptr;
  OnWritten on_written = kNothing;
  // A payload the frame owns (data is its bytes), freed with the frame once written.
  std::shared_ptr<const std::vector<uint8_t>> owned;
  std::shared_ptr<const std::vector<VecSpan>> spans;
  size_t span_first = 0;
  uint64_t span_off = 0;
  size_t total() const { return sizeof(WireHdr) + len; }
};

class Stream {
 public:
  // rx_inline_max: the largest inline payload this side accepts (sizes the receive buffer).
  Stream(Endpoint& ep, Fd fd, int index, size_t rx_inline_max);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Registers the socket with the context's epoll set (readable; writable while blocked).
  void start();
  // Unregisters and closes the socket. Queued frames are dropped.
  void shutdown();

  // Appends a frame and writes what the socket takes now.
  void queue(const OutFrame& f);
  // Writes queued frames, pulling bulk chunks from the endpoint when the queue runs dry.
  void pump_out();
  void on_event(uint32_t events);
  // Reads whatever the socket holds now (used when another stream of the endpoint hit EOF).
  void drain() { on_readable(); }

  bool out_idle() const { return outq_.empty(); }
  bool blocked() const { return want_out_; }
  bool mid_data() const { return in_data_; }
  int index() const { return index_; }
  int fd() const { return fd_.get(); }

 private:
  void on_readable();
  void parse();
  size_t partial_frame_left() const;
  size_t payload_limit(uint8_t type) const {
    return hoststage::payload_limit(type, rx_inline_max_);
  }
  void consume_data(const uint8_t* src, size_t n);
  // Appends iovecs for the unwritten payload of f (from pdone bytes in) to iov[*cnt..max);
  // false when not all of it fit.
  static bool add_payload(const OutFrame& f, size_t pdone, iovec* iov, int* cnt, int max,
                          size_t* want);
  void finish_data();
  void set_want_out(bool on);

  Endpoint& ep_;
  Context& ctx_;
  Fd fd_;
  int index_;
  uint64_t token_ = 0;

  std::deque<OutFrame> outq_;
  bool want_out_ = false;
  bool in_pump_ = false;
  bool in_read_ = false;

  size_t rx_inline_max_;
  size_t max_frame_;
  size_t rxcap_;
  std::unique_ptr<uint8_t[]> rx_;
  size_t rd_ = 0;
  size_t wr_ = 0;

  // DATA payload being received.
  bool in_data_ = false;
  uint64_t data_sink_ = 0;
  // Where the next payload byte goes: the piece (vectored transfers; else 0) and the offset in it.
  uint64_t data_piece_ = 0;
  uint64_t data_off_ = 0;
  uint64_t data_left_ = 0;
  uint64_t data_len_ = 0;
};

}  // namespace hmc::hoststage
