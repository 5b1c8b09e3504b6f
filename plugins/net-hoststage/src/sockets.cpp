#include "sockets.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cctype>
#include <cerrno>
#include <cstring>

namespace hmc::hoststage {

std::string errno_text(int err) {
  char buf[128];
  // GNU strerror_r returns a pointer that may or may not be buf.
  const char* s = ::strerror_r(err, buf, sizeof(buf));
  return std::string(s) + " (errno " + std::to_string(err) + ")";
}

namespace {

// The first IPv4 address of interface name, or 0 when it has none.
uint32_t interface_ipv4(const ifaddrs* list, const std::string& name) {
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (name == i->ifa_name)
      return reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
  }
  return 0;
}

uint32_t first_non_loopback_ipv4(const ifaddrs* list) {
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    uint32_t ip = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
    if ((ntohl(ip) >> 24) == 127) continue;
    return ip;
  }
  return htonl(INADDR_LOOPBACK);
}

}  // namespace

hmc_plugin_status_t resolve_tcp_addresses(const Config& cfg, const Log& log, TcpAddresses* out) {
  TcpAddresses r;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) list = nullptr;
  struct Free {
    ifaddrs* l;
    ~Free() {
      if (l != nullptr) ::freeifaddrs(l);
    }
  } free_list{list};

  if (!cfg.ifnames.empty()) {
    for (const std::string& name : cfg.ifnames) {
      uint32_t ip = interface_ipv4(list, name);
      if (ip == 0) {
        log.write(HMC_LOG_ERROR,
                  "invalid HMC_HOSTSTAGE_IFNAMES: interface \"%s\" does not exist or has no IPv4 "
                  "address",
                  name.c_str());
        return HMC_PLUGIN_ERR_CONFIG;
      }
      r.listen.push_back(ip);
      r.advertise.push_back(ip);
      r.bind.push_back(ip);
    }
    *out = std::move(r);
    return HMC_PLUGIN_SUCCESS;
  }

  in_addr a{};
  const std::string& host = cfg.listen_host;
  if (::inet_pton(AF_INET, host.c_str(), &a) != 1) {
    // Only something shaped like a host name goes to the resolver.
    bool name_like = !host.empty() && host.size() < 254;
    for (char ch : host)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.')
        name_like = false;
    if (!name_like) {
      log.write(HMC_LOG_ERROR, "invalid HMC_LISTEN_HOST=\"%s\": not an IPv4 address or host name",
                host.c_str());
      return HMC_PLUGIN_ERR_CONFIG;
    }
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
      log.write(HMC_LOG_ERROR,
                "invalid HMC_LISTEN_HOST=\"%s\": not an IPv4 address or resolvable host name",
                host.c_str());
      return HMC_PLUGIN_ERR_CONFIG;
    }
    a = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    ::freeaddrinfo(res);
  }
  r.listen.push_back(a.s_addr);
  r.advertise.push_back(a.s_addr == htonl(INADDR_ANY) ? first_non_loopback_ipv4(list) : a.s_addr);
  *out = std::move(r);
  return HMC_PLUGIN_SUCCESS;
}

void tune_tcp_socket(int fd, const Config& cfg) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (cfg.sockbuf > 0) {
    int sz = static_cast<int>(cfg.sockbuf);
    // Best effort: the kernel clamps to net.core.[rw]mem_max.
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
  }
}

int make_tcp_socket(const Config& cfg) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  tune_tcp_socket(fd, cfg);
  return fd;
}

socklen_t make_unix_address(const std::string& name, sockaddr_un* out) {
  std::memset(out, 0, sizeof(*out));
  out->sun_family = AF_UNIX;
  size_t n = name.size() < sizeof(out->sun_path) - 1 ? name.size() : sizeof(out->sun_path) - 1;
  std::memcpy(out->sun_path + 1, name.data(), n);  // sun_path[0] == 0: abstract namespace
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

ssize_t send_with_fds(int sock, const void* buf, size_t len, const int* fds, int nfds) {
  iovec iov{const_cast<void*>(buf), len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  if (nfds > 0) {
    if (nfds > 4) {
      errno = EINVAL;
      return -1;
    }
    std::memset(control, 0, sizeof(control));
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * static_cast<size_t>(nfds));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * static_cast<size_t>(nfds));
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * static_cast<size_t>(nfds));
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  return n;
}

ssize_t recv_with_fds(int sock, void* buf, size_t len, std::vector<Fd>* fds) {
  iovec iov{buf, len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds->emplace_back(fd);
    }
  }
  return n;
}

}  // namespace hmc::hoststage
