#include "sock.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hmc::ibverbs {

constexpr size_t kMaxFrame = 4096;

SideChannel::~SideChannel() {
  if (fd_ >= 0) ::close(fd_);
}

bool SideChannel::send(SideFrame type, const void* payload, size_t len) {
  uint32_t hdr[2] = {static_cast<uint32_t>(type), static_cast<uint32_t>(len)};
  const auto* h = reinterpret_cast<const uint8_t*>(hdr);
  out_.insert(out_.end(), h, h + sizeof hdr);
  const auto* p = static_cast<const uint8_t*>(payload);
  if (len > 0) out_.insert(out_.end(), p, p + len);
  return flush();
}

bool SideChannel::flush() {
  while (!out_.empty()) {
    ssize_t n = ::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;
    out_.erase(out_.begin(), out_.begin() + n);
  }
  return true;
}

SideChannel::Read SideChannel::read(std::vector<Frame>* frames, std::string* why) {
  Read result = Read::kOk;
  for (;;) {
    uint8_t buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0) {
      *why = std::string("side channel: ") + std::strerror(errno);
      result = Read::kError;
      break;
    }
    if (n == 0) {
      result = Read::kClosed;
      break;
    }
    in_.insert(in_.end(), buf, buf + n);
  }
  while (in_.size() >= 8) {
    uint32_t hdr[2];
    std::memcpy(hdr, in_.data(), 8);
    if (hdr[1] > kMaxFrame || hdr[0] < 1 ||
        hdr[0] > static_cast<uint32_t>(SideFrame::kRailsReady)) {
      *why = "side channel: malformed frame";
      return Read::kError;
    }
    if (in_.size() < 8 + hdr[1]) break;
    Frame f{static_cast<SideFrame>(hdr[0]),
            std::vector<uint8_t>(in_.begin() + 8, in_.begin() + 8 + hdr[1])};
    frames->push_back(std::move(f));
    in_.erase(in_.begin(), in_.begin() + 8 + hdr[1]);
  }
  return result;
}

namespace {
bool parse_addr(const std::string& host, sockaddr_storage* ss, socklen_t* len) {
  *ss = sockaddr_storage{};
  auto* a4 = reinterpret_cast<sockaddr_in*>(ss);
  if (inet_pton(AF_INET, host.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    *len = sizeof(sockaddr_in);
    return true;
  }
  auto* a6 = reinterpret_cast<sockaddr_in6*>(ss);
  if (inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    *len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}
}  // namespace
void tune_socket(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int listen_on(const std::string& host, sockaddr_storage* bound, socklen_t* bound_len,
              std::string* why) {
  sockaddr_storage ss;
  socklen_t len = 0;
  if (!parse_addr(host, &ss, &len)) {
    *why = "'" + host + "' is not an IPv4 or IPv6 address";
    return -1;
  }
  int fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd, 8) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(bound), &len) != 0) {
    *why = "listening on " + host + ": " + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return -1;
  }
  *bound_len = len;
  return fd;
}

int connect_to(const sockaddr_storage& addr, socklen_t len, std::string* why) {
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  tune_socket(fd);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0 && errno != EINPROGRESS) {
    *why = std::string("connect: ") + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

int connect_done(int fd, std::string* why) {
  pollfd p{fd, POLLOUT, 0};
  if (::poll(&p, 1, 0) <= 0) return 0;
  int err = 0;
  socklen_t l = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
  if (err != 0) {
    *why = std::string("connect: ") + std::strerror(err);
    return -1;
  }
  return 1;
}

}  // namespace hmc::ibverbs
