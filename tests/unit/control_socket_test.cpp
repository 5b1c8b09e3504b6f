// Sockets of the control plane (core/src/control/socket.h, fd.h): loopback TCP and abstract
// Unix listeners, non-blocking accept, connect errors and timeouts, clocks, host identity.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "accept_within.h"
#include "control/fd.h"
#include "control/socket.h"
#include "util/clock.h"
#include "util/status.h"

using namespace hmc::control;
using hmc::deadline_after_ms;
using hmc::now_ns;
using hmc::control::test::accept_within;

namespace {

std::string unique_name(const char* what) {
  static std::atomic<int> counter{0};
  return "hmc-test-" + std::string(what) + "-" + std::to_string(getpid()) + "-" +
         std::to_string(counter++);
}

bool is_nonblocking_cloexec(int fd) {
  int fl = fcntl(fd, F_GETFL);
  int fdfl = fcntl(fd, F_GETFD);
  return fl >= 0 && fdfl >= 0 && (fl & O_NONBLOCK) && (fdfl & FD_CLOEXEC);
}

// A raw abstract Unix listener with the given backlog (to fill it on purpose).
Fd raw_unix_listener(const std::string& name, int backlog) {
  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path + 1, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd.get(), backlog) != 0)
    return Fd();
  return fd;
}

}  // namespace

TEST(ControlFd, OwnsClosesAndMoves) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  close(p[1]);
  const int raw = p[0];
  {
    Fd a(raw);
    EXPECT_TRUE(a.valid());
    Fd b(std::move(a));
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(b.get(), raw);
    Fd c;
    c = std::move(b);
    EXPECT_EQ(c.get(), raw);
    EXPECT_EQ(fcntl(raw, F_GETFD), fcntl(c.get(), F_GETFD));
  }
  errno = 0;
  EXPECT_EQ(fcntl(raw, F_GETFD), -1) << "the destructor must close the descriptor";
  EXPECT_EQ(errno, EBADF);

  ASSERT_EQ(pipe(p), 0);
  Fd r(p[0]);
  EXPECT_EQ(r.release(), p[0]);
  EXPECT_FALSE(r.valid());
  EXPECT_NE(fcntl(p[0], F_GETFD), -1) << "release must not close";
  Fd w(p[1]);
  w.reset(p[0]);  // closes p[1], owns p[0]
  EXPECT_EQ(fcntl(p[1], F_GETFD), -1);
  w.reset();
  EXPECT_EQ(fcntl(p[0], F_GETFD), -1);
}

TEST(ControlSocket, TcpListenAcceptConnectOnLoopback) {
  Fd listener;
  uint16_t port = 0;
  ASSERT_EQ(listen_tcp("127.0.0.1", 0, &listener, &port), HMC_SUCCESS) << hmc::last_error();
  EXPECT_NE(port, 0);
  EXPECT_TRUE(is_nonblocking_cloexec(listener.get()));

  Fd none;
  EXPECT_EQ(accept_one(listener.get(), &none), HMC_IN_PROGRESS);
  EXPECT_FALSE(none.valid());

  Fd client;
  ASSERT_EQ(connect_tcp("127.0.0.1", port, 2000, &client), HMC_SUCCESS) << hmc::last_error();
  EXPECT_TRUE(is_nonblocking_cloexec(client.get()));
  Fd server = accept_within(listener.get(), 2000);
  ASSERT_TRUE(server.valid());
  EXPECT_TRUE(is_nonblocking_cloexec(server.get()));

  ASSERT_EQ(write(client.get(), "ping", 4), 4);
  ASSERT_EQ(wait_fd(server.get(), POLLIN, deadline_after_ms(2000), nullptr), 1);
  char buf[8] = {};
  EXPECT_EQ(read(server.get(), buf, sizeof buf), 4);
  EXPECT_STREQ(buf, "ping");
}

TEST(ControlSocket, TcpConnectByNameTriesEveryAddress) {
  // "localhost" may resolve to ::1 first; the listener is IPv4 only.
  Fd listener;
  uint16_t port = 0;
  ASSERT_EQ(listen_tcp("127.0.0.1", 0, &listener, &port), HMC_SUCCESS) << hmc::last_error();
  Fd client;
  ASSERT_EQ(connect_tcp("localhost", port, 2000, &client), HMC_SUCCESS) << hmc::last_error();
  EXPECT_TRUE(accept_within(listener.get(), 2000).valid());
}

TEST(ControlSocket, TcpIpv6Literal) {
  Fd listener;
  uint16_t port = 0;
  if (listen_tcp("::1", 0, &listener, &port) != HMC_SUCCESS)
    GTEST_SKIP() << "no IPv6 loopback here: " << hmc::last_error();
  Fd c1, c2;
  ASSERT_EQ(connect_tcp("::1", port, 2000, &c1), HMC_SUCCESS) << hmc::last_error();
  ASSERT_EQ(connect_tcp("[::1]", port, 2000, &c2), HMC_SUCCESS) << hmc::last_error();
  EXPECT_TRUE(accept_within(listener.get(), 2000).valid());
  EXPECT_TRUE(accept_within(listener.get(), 2000).valid());
  EXPECT_EQ(format_host_port("::1", 80), "[::1]:80");
  EXPECT_EQ(format_host_port("[::1]", 80), "[::1]:80");
  EXPECT_EQ(format_host_port("10.0.0.1", 80), "10.0.0.1:80");
}

TEST(ControlSocket, TcpRefusedNamesAddressAndErrno) {
  uint16_t port = 0;
  {
    Fd l;
    ASSERT_EQ(listen_tcp("127.0.0.1", 0, &l, &port), HMC_SUCCESS);
  }  // closed: nobody listens on port now
  Fd c;
  EXPECT_EQ(connect_tcp("127.0.0.1", port, 2000, &c), HMC_ERR_SYSTEM);
  EXPECT_FALSE(c.valid());
  const std::string msg = hmc::last_error();
  EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << msg;
  EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
}

TEST(ControlSocket, TcpConnectTimesOutOnFullBacklog) {
  // A listener with backlog 0 that never accepts: once its queue holds one connection the
  // kernel drops further SYNs, so a connect can only end by our timeout.
  Fd l(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(l.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(l.get(), 0), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(getsockname(l.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  const uint16_t port = ntohs(a.sin_port);

  std::vector<Fd> held;
  bool timed_out = false;
  for (int i = 0; i < 8 && !timed_out; ++i) {
    Fd c;
    const uint64_t t0 = now_ns();
    hmc_status_t st = connect_tcp("127.0.0.1", port, 100, &c);
    const uint64_t ms = (now_ns() - t0) / 1000000;
    EXPECT_LT(ms, 2000u);
    if (st == HMC_ERR_TIMEOUT) {
      timed_out = true;
      EXPECT_GE(ms, 90u);
      EXPECT_NE(hmc::last_error().find("100 ms"), std::string::npos) << hmc::last_error();
    } else {
      ASSERT_EQ(st, HMC_SUCCESS) << hmc::last_error();
      held.push_back(std::move(c));
    }
  }
  EXPECT_TRUE(timed_out);
}

TEST(ControlSocket, TcpBadArguments) {
  Fd c;
  EXPECT_EQ(connect_tcp("127.0.0.1", 1, -1, &c), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(connect_tcp("", 1, 10, &c), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(connect_tcp("127.0.0.1", 1, 10, nullptr), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(connect_tcp("no-such-host.invalid", 1, 10, &c), HMC_ERR_SYSTEM);
  EXPECT_NE(hmc::last_error().find("no-such-host.invalid"), std::string::npos);
  Fd l;
  EXPECT_EQ(listen_tcp("127.0.0.1", 0, nullptr, nullptr), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(listen_tcp("not an address", 0, &l, nullptr), HMC_ERR_SYSTEM);
}

TEST(ControlSocket, TcpAddressInUse) {
  Fd a, b;
  uint16_t port = 0;
  ASSERT_EQ(listen_tcp("127.0.0.1", 0, &a, &port), HMC_SUCCESS);
  EXPECT_EQ(listen_tcp("127.0.0.1", port, &b, nullptr), HMC_ERR_SYSTEM);
  EXPECT_NE(hmc::last_error().find(std::to_string(port)), std::string::npos);
  EXPECT_NE(hmc::last_error().find("bind"), std::string::npos) << hmc::last_error();
}

TEST(ControlSocket, UnixAbstractListenAcceptConnect) {
  const std::string name = unique_name("unix");
  Fd listener;
  ASSERT_EQ(listen_unix(name, &listener), HMC_SUCCESS) << hmc::last_error();
  EXPECT_TRUE(is_nonblocking_cloexec(listener.get()));
  Fd none;
  EXPECT_EQ(accept_one(listener.get(), &none), HMC_IN_PROGRESS);

  Fd client;
  ASSERT_EQ(connect_unix(name, 2000, &client), HMC_SUCCESS) << hmc::last_error();
  EXPECT_TRUE(is_nonblocking_cloexec(client.get()));
  Fd server = accept_within(listener.get(), 2000);
  ASSERT_TRUE(server.valid());
  EXPECT_TRUE(is_nonblocking_cloexec(server.get()));

  Fd twice;
  EXPECT_EQ(listen_unix(name, &twice), HMC_ERR_SYSTEM);
  EXPECT_NE(hmc::last_error().find("@" + name), std::string::npos) << hmc::last_error();

  // timeout 0: connects only when it can at once (the listener has room).
  Fd quick;
  EXPECT_EQ(connect_unix(name, 0, &quick), HMC_SUCCESS) << hmc::last_error();
}

TEST(ControlSocket, UnixRefusedAndBadNames) {
  const std::string name = unique_name("nobody");
  Fd c;
  EXPECT_EQ(connect_unix(name, 200, &c), HMC_ERR_SYSTEM);
  EXPECT_NE(hmc::last_error().find("@" + name), std::string::npos) << hmc::last_error();
  EXPECT_NE(hmc::last_error().find("refused"), std::string::npos) << hmc::last_error();
  Fd l;
  EXPECT_EQ(listen_unix("", &l), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(listen_unix(std::string(200, 'x'), &l), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(connect_unix(std::string(200, 'x'), 10, &c), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(connect_unix(name, -5, &c), HMC_ERR_INVALID_ARGUMENT);
}

TEST(ControlSocket, UnixConnectTimesOutOnFullBacklog) {
  const std::string name = unique_name("full");
  Fd l = raw_unix_listener(name, 0);
  ASSERT_TRUE(l.valid());
  std::vector<Fd> held;
  bool timed_out = false;
  for (int i = 0; i < 4 && !timed_out; ++i) {
    Fd c;
    const uint64_t t0 = now_ns();
    hmc_status_t st = connect_unix(name, 100, &c);
    const uint64_t ms = (now_ns() - t0) / 1000000;
    EXPECT_LT(ms, 2000u);
    if (st == HMC_ERR_TIMEOUT) {
      timed_out = true;
      EXPECT_GE(ms, 90u);
    } else {
      ASSERT_EQ(st, HMC_SUCCESS) << hmc::last_error();
      EXPECT_TRUE(is_nonblocking_cloexec(c.get()));
      held.push_back(std::move(c));
    }
  }
  EXPECT_TRUE(timed_out);
  // And with timeout 0 the full backlog is reported at once.
  Fd c;
  EXPECT_EQ(connect_unix(name, 0, &c), HMC_ERR_TIMEOUT);
}

TEST(ControlSocket, ClockAndDeadlines) {
  const uint64_t a = now_ns();
  const uint64_t d = deadline_after_ms(50);
  const uint64_t b = now_ns();
  EXPECT_LE(a, b);
  EXPECT_GE(d, a + 50ull * 1000000);
  EXPECT_LE(d, b + 50ull * 1000000);
  const uint64_t past = deadline_after_ms(-3);
  EXPECT_LE(past, now_ns());

  // wait_fd returns 0 at the deadline, not before.
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  Fd r(p[0]), w(p[1]);
  const uint64_t t0 = now_ns();
  EXPECT_EQ(wait_fd(r.get(), POLLIN, t0 + 30ull * 1000000, nullptr), 0);
  EXPECT_GE(now_ns(), t0 + 30ull * 1000000);
  ASSERT_EQ(write(w.get(), "x", 1), 1);
  short rev = 0;
  EXPECT_EQ(wait_fd(r.get(), POLLIN, deadline_after_ms(1000), &rev), 1);
  EXPECT_TRUE(rev & POLLIN);
}

TEST(ControlSocket, HostIdentityIsStableAndNamesTheHost) {
  const std::string id = host_identity();
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(id, host_identity());
  const std::string host = local_hostname();
  EXPECT_FALSE(host.empty());
  EXPECT_EQ(id.rfind(host, 0), 0u) << id;
  if (access("/proc/sys/kernel/random/boot_id", R_OK) == 0) {
    EXPECT_EQ(id.size(), host.size() + 1 + 36) << id;  // "<host>/<uuid>"
  }
}
