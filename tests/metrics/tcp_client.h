// The HTTP client side of the metrics endpoint's tests: a bounded TCP connection and the reply
// read to its end.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace hmc_metrics_test {

// A socket connected to `address` (a.b.c.d:port), each direction bounded by timeout_s; -1 when
// the connection failed.
inline int tcp_dial(const std::string& address, int timeout_s) {
  size_t colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// What fd receives until the other side closes (or the receive bound passes); closes fd.
inline std::string read_to_end(int fd) {
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) reply.append(buf, size_t(n));
  close(fd);
  return reply;
}

}  // namespace hmc_metrics_test
