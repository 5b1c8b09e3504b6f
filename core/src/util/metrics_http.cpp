#include "util/metrics_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/clock.h"
#include "util/config.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

bool parse_metrics_address(const std::string& text, std::string* host, uint16_t* port,
                           std::string* err) {
  std::string h = "127.0.0.1", p = text;
  size_t colon = text.rfind(':');
  if (colon != std::string::npos) {
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
    if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    if (h.empty()) h = "127.0.0.1";
  }
  int64_t v = -1;
  if (!parse_int(p, &v) || v < 0 || v > 65535) {
    *err = "'" + text + "' is not host:port or port (port 0 to 65535)";
    return false;
  }
  *host = h;
  *port = static_cast<uint16_t>(v);
  return true;
}

hmc_status_t MetricsServer::start(const std::string& setting, const std::string& address,
                                  std::function<std::string()> render) {
  std::string host, err;
  uint16_t port = 0;
  if (!parse_metrics_address(address, &host, &port, &err))
    return fail(HMC_ERR_CONFIG, "{}: {}", setting, err);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (host == "localhost") host = "127.0.0.1";
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1)
    return fail(HMC_ERR_CONFIG, "{}: '{}' is not an IPv4 address", setting, host);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return fail(HMC_ERR_SYSTEM, "{}: socket: {}", setting, strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(fd, 8) != 0) {
    int e = errno;
    close(fd);
    return fail(HMC_ERR_SYSTEM, "{}: cannot listen on {}:{}: {}", setting, host, port, strerror(e));
  }
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    int e = errno;
    close(fd);
    return fail(HMC_ERR_SYSTEM, "{}: pipe: {}", setting, strerror(e));
  }
  listen_fd_ = fd;
  bound_ = host + ":" + std::to_string(ntohs(sa.sin_port));
  render_ = std::move(render);
  thread_ = std::thread([this] { serve(); });
  HMC_LOG_I("metrics served at http://{}/metrics", bound_);
  return HMC_SUCCESS;
}

void MetricsServer::stop() {
  if (thread_.joinable()) {
    char c = 1;
    ssize_t n = write(wake_[1], &c, 1);
    (void)n;
    thread_.join();
  }
  for (int* fd : {&listen_fd_, &wake_[0], &wake_[1]})
    if (*fd >= 0) {
      close(*fd);
      *fd = -1;
    }
}

void MetricsServer::serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    int n = poll(fds, 2, -1);  // stop() wakes it
    if (n < 0) {
      if (errno == EINTR) continue;
      HMC_LOG_W("metrics endpoint {}: poll: {}; it stops serving", bound_, strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) continue;
    answer(c);
    close(c);
  }
}

namespace {
// Writes all of data before the deadline; false otherwise.
bool write_all(int fd, const std::string& data, uint64_t deadline) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += size_t(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    uint64_t now = now_ns();
    if (now >= deadline) return false;
    pollfd p = {fd, POLLOUT, 0};
    poll(&p, 1, int((deadline - now) / 1000000) + 1);
  }
  return true;
}
}  // namespace

void MetricsServer::answer(int fd) {
  const uint64_t deadline = deadline_after_ms(kRequestTimeoutMs);
  std::string head;
  char buf[1024];
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    if (head.size() >= kRequestMax) {
      write_all(fd, "HTTP/1.0 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n",
                deadline);
      return;
    }
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      head.append(buf, size_t(n));
      continue;
    }
    if (n == 0) return;  // closed before a whole request
    if (errno != EAGAIN && errno != EINTR) return;
    uint64_t now = now_ns();
    if (now >= deadline) return;  // too slow: the next scraper's turn
    pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, int((deadline - now) / 1000000) + 1);
  }
  std::string first = head.substr(0, head.find_first_of("\r\n"));
  std::string method = first.substr(0, first.find(' '));
  size_t sp = first.find(' ');
  std::string target = sp == std::string::npos ? "" : first.substr(sp + 1);
  target = target.substr(0, target.find(' '));
  std::string path = target.substr(0, target.find('?'));
  if (method != "GET" && method != "HEAD") {
    write_all(fd,
              "HTTP/1.0 405 Method Not Allowed\r\nAllow: GET, HEAD\r\nContent-Length: 0\r\n"
              "Connection: close\r\n\r\n",
              deadline);
    return;
  }
  if (path != "/metrics" && path != "/") {
    const std::string body = "not found: metrics are at /metrics\n";
    write_all(fd,
              "HTTP/1.0 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body,
              deadline);
    return;
  }
  const std::string body = render_();
  std::string reply =
      "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  if (method == "GET") reply += body;
  write_all(fd, reply, deadline);
}

}  // namespace hmc
