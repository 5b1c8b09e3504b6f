// The TCP side channel of a connection: it carries the queue pair setup (HELLO, ACCEPT, READY),
// later the replacement of a broken put/get queue pair, and it stays open for the life of the
// endpoint so that a peer process that ends (closed endpoint, exit, crash) is seen at once as
// the end of the stream. Non-blocking, framed: {type u32, length u32, payload}.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "wire.h"

namespace hmc::ibverbs {

struct Frame {
  SideFrame type;
  std::vector<uint8_t> payload;
};

class SideChannel {
 public:
  explicit SideChannel(int fd) : fd_(fd) {}
  ~SideChannel();
  SideChannel(const SideChannel&) = delete;
  SideChannel& operator=(const SideChannel&) = delete;

  int fd() const { return fd_; }
  // Queues a frame and writes what the socket takes. False when the connection failed.
  bool send(SideFrame type, const void* payload, size_t len);
  bool flush();
  bool want_write() const { return !out_.empty(); }
  // Reads what arrived and appends whole frames to *frames. kClosed: the peer closed (frames
  // that arrived before are still appended); kError: reset, or a malformed frame (*why).
  enum class Read { kOk, kClosed, kError };
  Read read(std::vector<Frame>* frames, std::string* why);

 private:
  int fd_;
  std::vector<uint8_t> in_, out_;
};

// A non-blocking listening socket on host (an IPv4 or IPv6 address), any port; *bound is its
// address. -1 with *why on failure.
int listen_on(const std::string& host, sockaddr_storage* bound, socklen_t* bound_len,
              std::string* why);
// A non-blocking connect to addr (in progress is fine). -1 with *why on failure.
int connect_to(const sockaddr_storage& addr, socklen_t len, std::string* why);
// Whether a non-blocking connect finished: 1 yes, 0 not yet, -1 failed (*why).
int connect_done(int fd, std::string* why);

}  // namespace hmc::ibverbs

namespace hmc::ibverbs {
// TCP_NODELAY and O_NONBLOCK on an accepted or connected socket.
void tune_socket(int fd);
}  // namespace hmc::ibverbs
