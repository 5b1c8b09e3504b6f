#include "control/socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <limits>

#include "util/clock.h"
#include "util/status.h"

namespace hmc::control {
namespace {

constexpr int kListenBacklog = SOMAXCONN;

std::string errno_text(int err) {
  return fmt::format("{} (errno {})", strerror(err), err);
}

// "[::1]" -> "::1"; anything else unchanged.
std::string strip_brackets(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    return host.substr(1, host.size() - 2);
  return host;
}

std::string numeric_address(const sockaddr* sa, socklen_t len) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) !=
      0)
    return "?";
  return format_host_port(host, static_cast<uint16_t>(std::stoi(serv)));
}

// getaddrinfo wrapper owning the list.
struct AddrList {
  addrinfo* head = nullptr;
  ~AddrList() {
    if (head) freeaddrinfo(head);
  }
};

hmc_status_t resolve(const char* op, const std::string& host, uint16_t port, bool passive,
                     AddrList* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string node = strip_brackets(host);
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(node.empty() ? nullptr : node.c_str(), service.c_str(), &hints, &out->head);
  if (rc != 0) {
    std::string why = rc == EAI_SYSTEM ? errno_text(errno) : gai_strerror(rc);
    return fail(HMC_ERR_SYSTEM, "{} {}: cannot resolve host '{}': {}", op,
                format_host_port(host, port), host, why);
  }
  return HMC_SUCCESS;
}

void set_nodelay(int fd) {
  int one = 1;
  // Best effort: fails harmlessly (EOPNOTSUPP) on Unix sockets.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Fills an abstract-namespace address; false when the name does not fit.
bool make_abstract_address(const std::string& name, sockaddr_un* addr, socklen_t* len) {
  if (name.empty() || name.size() > sizeof(addr->sun_path) - 1) return false;
  memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  addr->sun_path[0] = '\0';
  memcpy(addr->sun_path + 1, name.data(), name.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return true;
}

hmc_status_t bad_unix_name(const char* op, const std::string& name) {
  return fail(HMC_ERR_INVALID_ARGUMENT,
              "{}: abstract Unix socket name '{}' must be 1 to {} bytes long (it is {})", op, name,
              sizeof(sockaddr_un::sun_path) - 1, name.size());
}

int remaining_ms(uint64_t deadline_ns) {
  uint64_t now = now_ns();
  if (now >= deadline_ns) return 0;
  uint64_t ms = (deadline_ns - now + 999999) / 1000000;  // round up: never wake early
  return ms > static_cast<uint64_t>(std::numeric_limits<int>::max())
             ? std::numeric_limits<int>::max()
             : static_cast<int>(ms);
}

}  // namespace

int wait_fd(int fd, short events, uint64_t deadline_ns, short* revents) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, remaining_ms(deadline_ns));
    if (rc > 0) {
      if (revents) *revents = p.revents;
      return 1;
    }
    if (rc == 0) {
      if (now_ns() >= deadline_ns) return 0;
      continue;  // poll's millisecond rounding woke us a little early
    }
    if (errno != EINTR) return -1;
  }
}

std::string format_host_port(const std::string& host, uint16_t port) {
  std::string h = strip_brackets(host);
  if (h.find(':') != std::string::npos) return fmt::format("[{}]:{}", h, port);
  return fmt::format("{}:{}", h, port);
}

hmc_status_t listen_tcp(const std::string& host, uint16_t port, Fd* out, uint16_t* bound_port) {
  if (!out) return fail(HMC_ERR_INVALID_ARGUMENT, "listen_tcp: out is NULL");
  const std::string where = format_host_port(host.empty() ? "0.0.0.0" : host, port);
  AddrList addrs;
  hmc_status_t st = resolve("listen on", host, port, true, &addrs);
  if (st != HMC_SUCCESS) return st;

  int last_err = 0;
  const char* last_step = "socket";
  for (addrinfo* ai = addrs.head; ai; ai = ai->ai_next) {
    Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_err = errno;
      last_step = "socket";
      continue;
    }
    int one = 1;
    if (setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
      last_err = errno;
      last_step = "setsockopt(SO_REUSEADDR)";
      continue;
    }
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_err = errno;
      last_step = "bind";
      continue;
    }
    if (listen(fd.get(), kListenBacklog) != 0) {
      last_err = errno;
      last_step = "listen";
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
      last_err = errno;
      last_step = "getsockname";
      continue;
    }
    uint16_t actual = ss.ss_family == AF_INET6
                          ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                          : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    if (bound_port) *bound_port = actual;
    *out = std::move(fd);
    return HMC_SUCCESS;
  }
  return fail(HMC_ERR_SYSTEM, "listen on {}: {} failed: {}", where, last_step,
              errno_text(last_err));
}

hmc_status_t listen_unix(const std::string& name, Fd* out) {
  if (!out) return fail(HMC_ERR_INVALID_ARGUMENT, "listen_unix: out is NULL");
  sockaddr_un addr;
  socklen_t len;
  if (!make_abstract_address(name, &addr, &len)) return bad_unix_name("listen on unix", name);
  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid())
    return fail(HMC_ERR_SYSTEM, "listen on unix @{}: socket failed: {}", name, errno_text(errno));
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0)
    return fail(HMC_ERR_SYSTEM, "listen on unix @{}: bind failed: {}", name, errno_text(errno));
  if (listen(fd.get(), kListenBacklog) != 0)
    return fail(HMC_ERR_SYSTEM, "listen on unix @{}: listen failed: {}", name, errno_text(errno));
  *out = std::move(fd);
  return HMC_SUCCESS;
}

hmc_status_t accept_one(int listen_fd, Fd* out, std::string* remote) {
  if (!out) return fail(HMC_ERR_INVALID_ARGUMENT, "accept: out is NULL");
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd =
        accept4(listen_fd, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Fd owned(fd);
      const bool inet = ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
      if (inet) set_nodelay(fd);
      if (remote && inet) {
        *remote = "tcp " + numeric_address(reinterpret_cast<sockaddr*>(&ss), len);
      } else if (remote) {
        ucred cred{};
        socklen_t clen = sizeof cred;
        *remote = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0
                      ? fmt::format("unix pid {}", cred.pid)
                      : "unix (process unknown)";
      }
      *out = std::move(owned);
      return HMC_SUCCESS;
    }
    // ECONNABORTED: a pending connection went away before we took it; look at the next one.
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return HMC_IN_PROGRESS;
    return fail(HMC_ERR_SYSTEM, "accept on listening socket fd {}: {}", listen_fd,
                errno_text(errno));
  }
}

hmc_status_t connect_tcp(const std::string& host, uint16_t port, int timeout_ms, Fd* out) {
  const std::string where = format_host_port(host, port);
  if (!out) return fail(HMC_ERR_INVALID_ARGUMENT, "connect to {}: out is NULL", where);
  if (timeout_ms < 0)
    return fail(HMC_ERR_INVALID_ARGUMENT, "connect to {}: negative timeout {} ms", where,
                timeout_ms);
  if (host.empty()) return fail(HMC_ERR_INVALID_ARGUMENT, "connect: empty host (port {})", port);
  const uint64_t deadline = deadline_after_ms(timeout_ms);
  AddrList addrs;
  hmc_status_t st = resolve("connect to", host, port, false, &addrs);
  if (st != HMC_SUCCESS) return st;

  int last_err = 0;
  std::string last_addr = where;
  for (addrinfo* ai = addrs.head; ai; ai = ai->ai_next) {
    last_addr = numeric_address(ai->ai_addr, ai->ai_addrlen);
    Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_err = errno;
      continue;
    }
    int rc = connect(fd.get(), ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno != EINPROGRESS && errno != EINTR) {
      last_err = errno;
      continue;
    }
    if (rc != 0) {
      short rev = 0;
      int w = wait_fd(fd.get(), POLLOUT, deadline, &rev);
      if (w == 0)
        return fail(HMC_ERR_TIMEOUT, "connect to {} ({}): not connected within {} ms", where,
                    last_addr, timeout_ms);
      if (w < 0) {
        last_err = errno;
        continue;
      }
      int so_err = 0;
      socklen_t len = sizeof so_err;
      if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_err, &len) != 0) so_err = errno;
      if (so_err != 0) {
        last_err = so_err;
        continue;
      }
    }
    set_nodelay(fd.get());
    *out = std::move(fd);
    return HMC_SUCCESS;
  }
  return fail(HMC_ERR_SYSTEM, "connect to {} ({}): {}", where, last_addr, errno_text(last_err));
}

hmc_status_t connect_unix(const std::string& name, int timeout_ms, Fd* out) {
  if (!out) return fail(HMC_ERR_INVALID_ARGUMENT, "connect to unix @{}: out is NULL", name);
  if (timeout_ms < 0)
    return fail(HMC_ERR_INVALID_ARGUMENT, "connect to unix @{}: negative timeout {} ms", name,
                timeout_ms);
  sockaddr_un addr;
  socklen_t len;
  if (!make_abstract_address(name, &addr, &len)) return bad_unix_name("connect to unix", name);
  const uint64_t deadline = deadline_after_ms(timeout_ms);

  // A non-blocking connect on a Unix stream socket fails with EAGAIN while the listener's
  // backlog is full instead of waiting, and poll cannot wait for room. A blocking connect
  // bounded by SO_SNDTIMEO (which Linux applies to Unix connect) waits correctly; the socket is
  // switched to non-blocking afterwards. timeout 0 keeps it non-blocking from the start
  // (SO_SNDTIMEO 0 would mean "forever").
  const bool blocking = timeout_ms > 0;
  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (blocking ? 0 : SOCK_NONBLOCK), 0));
  if (!fd.valid())
    return fail(HMC_ERR_SYSTEM, "connect to unix @{}: socket failed: {}", name, errno_text(errno));
  for (;;) {
    if (blocking) {
      int ms = remaining_ms(deadline);
      if (ms <= 0)
        return fail(HMC_ERR_TIMEOUT, "connect to unix @{}: not connected within {} ms", name,
                    timeout_ms);
      timeval tv{ms / 1000, (ms % 1000) * 1000};
      if (setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
        return fail(HMC_ERR_SYSTEM, "connect to unix @{}: setsockopt(SO_SNDTIMEO) failed: {}", name,
                    errno_text(errno));
    }
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0 || errno == EISCONN) break;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EINPROGRESS)
      return fail(HMC_ERR_TIMEOUT,
                  "connect to unix @{}: not connected within {} ms (listener backlog full)", name,
                  timeout_ms);
    return fail(HMC_ERR_SYSTEM, "connect to unix @{}: {}", name, errno_text(errno));
  }
  if (blocking) {
    timeval zero{0, 0};
    (void)setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &zero, sizeof zero);
    int flags = fcntl(fd.get(), F_GETFL);
    if (flags < 0 || fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0)
      return fail(HMC_ERR_SYSTEM, "connect to unix @{}: fcntl(O_NONBLOCK) failed: {}", name,
                  errno_text(errno));
  }
  *out = std::move(fd);
  return HMC_SUCCESS;
}

std::string local_hostname() {
  char buf[256];
  if (gethostname(buf, sizeof buf) != 0) return "";
  buf[sizeof buf - 1] = '\0';
  return buf;
}

std::string host_identity() {
  std::string boot_id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  if (in) std::getline(in, boot_id);
  while (!boot_id.empty() && isspace(static_cast<unsigned char>(boot_id.back())))
    boot_id.pop_back();
  std::string host = local_hostname();
  if (boot_id.empty()) return host;
  return host + "/" + boot_id;
}

}  // namespace hmc::control
