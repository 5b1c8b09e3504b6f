// A TCP port on 127.0.0.1 that was free a moment ago, for a rendezvous a tool starts for its own
// local processes (hmc-coll-perf --np, hmc-soak's store and Redis server). Another process may
// take it in between: the rendezvous then fails to listen, saying so.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace hmc_tools {

// The port the kernel chose for a socket bound to port 0 of 127.0.0.1, or 0 when it chose none.
inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

}  // namespace hmc_tools
