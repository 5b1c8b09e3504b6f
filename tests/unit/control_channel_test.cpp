// Channel (core/src/control/channel.h) over a socketpair, a loopback TCP connection and an
// abstract Unix connection: partial writes of large frames, many frames per read, peer loss
// without SIGPIPE, malformed input, deadlines.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "accept_within.h"
#include "control/channel.h"
#include "control/socket.h"
#include "util/clock.h"
#include "util/status.h"

using namespace hmc::control;
using hmc::deadline_after_ms;
using hmc::now_ns;
using hmc::control::test::accept_within;

namespace {

std::string unique_name() {
  static std::atomic<int> counter{0};
  return "hmc-test-channel-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

// A connected pair of stream sockets of the transport under test.
std::pair<Fd, Fd> connected_pair(const std::string& transport) {
  if (transport == "socketpair") {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return {};
    return {Fd(sv[0]), Fd(sv[1])};
  }
  Fd listener, client;
  if (transport == "tcp") {
    uint16_t port = 0;
    if (listen_tcp("127.0.0.1", 0, &listener, &port) != HMC_SUCCESS) return {};
    if (connect_tcp("127.0.0.1", port, 2000, &client) != HMC_SUCCESS) return {};
  } else {
    const std::string name = unique_name();
    if (listen_unix(name, &listener) != HMC_SUCCESS) return {};
    if (connect_unix(name, 2000, &client) != HMC_SUCCESS) return {};
  }
  Fd server = accept_within(listener.get(), 2000);
  return {std::move(client), std::move(server)};
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 8));
  return v;
}

Writer writer_of(const std::vector<uint8_t>& bytes) {
  Writer w;
  w.bytes(bytes.data(), bytes.size());
  return w;
}

void write_all(int fd, const std::vector<uint8_t>& bytes) {
  size_t off = 0;
  uint64_t deadline = deadline_after_ms(5000);
  while (off < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + off, bytes.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else {
      ASSERT_TRUE(errno == EAGAIN || errno == EINTR) << strerror(errno);
      ASSERT_EQ(wait_fd(fd, POLLOUT, deadline, nullptr), 1);
    }
  }
}

class ControlChannelOverTransport : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto fds = connected_pair(GetParam());
    ASSERT_TRUE(fds.first.valid() && fds.second.valid()) << hmc::last_error();
    a_fd_ = std::move(fds.first);
    b_fd_ = std::move(fds.second);
  }
  Fd a_fd_, b_fd_;
};

}  // namespace

TEST_P(ControlChannelOverTransport, LargeFramesSplitAcrossPartialWrites) {
  // Small kernel buffers force many partial writes and reads. (Not the TCP receive buffer: a
  // window far below the loopback MSS makes the kernel crawl through zero-window probes.)
  int small = 4096;
  setsockopt(a_fd_.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  if (GetParam() != "tcp") setsockopt(b_fd_.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  Channel a(std::move(a_fd_)), b(std::move(b_fd_));

  const std::vector<std::vector<uint8_t>> sent = {pattern(kMaxFramePayload, 1), pattern(300000, 2),
                                                  pattern(1, 3), pattern(0, 4), pattern(70000, 5)};
  for (const auto& p : sent) ASSERT_EQ(a.send(MsgType::User, writer_of(p)), HMC_SUCCESS);
  EXPECT_TRUE(a.want_write()) << "1 MiB cannot fit in the socket buffers at once";

  std::vector<Message> got;
  int flushes = 0;
  const uint64_t deadline = deadline_after_ms(20000);
  while (got.size() < sent.size()) {
    pollfd p[2] = {{a.fd(), static_cast<short>(a.want_write() ? POLLOUT : 0), 0},
                   {b.fd(), POLLIN, 0}};
    ASSERT_LT(now_ns(), deadline) << "only " << got.size() << " messages arrived";
    ASSERT_GE(poll(p, 2, 1000), 0);
    if (p[0].revents & POLLOUT) {
      ASSERT_EQ(a.flush(), HMC_SUCCESS) << hmc::last_error();
      ++flushes;
    }
    if (p[1].revents & POLLIN) {
      ASSERT_EQ(b.receive(&got), HMC_SUCCESS) << hmc::last_error();
    }
  }
  EXPECT_GT(flushes, 1);
  EXPECT_FALSE(a.want_write());
  EXPECT_EQ(a.queued_bytes(), 0u);
  ASSERT_EQ(got.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(got[i].type, MsgType::User);
    EXPECT_TRUE(got[i].payload == sent[i]) << "message " << i << " differs";
  }
}

TEST_P(ControlChannelOverTransport, ManyFramesInOneRead) {
  std::vector<uint8_t> stream;
  const int kCount = 500;
  for (int i = 0; i < kCount; ++i) {
    Writer w;
    w.u32(static_cast<uint32_t>(i));
    encode_frame(MsgType::Notify, w.data().data(), w.size(), &stream);
  }
  write_all(a_fd_.get(), stream);
  Channel b(std::move(b_fd_));
  std::vector<Message> got;
  int reads_with_data = 0;
  const uint64_t deadline = deadline_after_ms(5000);
  while (got.size() < static_cast<size_t>(kCount)) {
    ASSERT_EQ(wait_fd(b.fd(), POLLIN, deadline, nullptr), 1) << got.size();
    size_t before = got.size();
    ASSERT_EQ(b.receive(&got), HMC_SUCCESS) << hmc::last_error();
    if (got.size() > before) ++reads_with_data;
  }
  ASSERT_EQ(got.size(), static_cast<size_t>(kCount));
  EXPECT_LT(reads_with_data, kCount / 10) << "frames should arrive many per read";
  for (int i = 0; i < kCount; ++i) {
    Reader r(got[i].payload);
    uint32_t v = 0;
    ASSERT_TRUE(r.u32(&v));
    EXPECT_EQ(v, static_cast<uint32_t>(i));
  }
}

TEST_P(ControlChannelOverTransport, EofIsPeerLostAndNamesThePeer) {
  Channel b(std::move(b_fd_));
  b.set_peer_name("node-7 (pid 123)");
  a_fd_.reset();
  ASSERT_EQ(wait_fd(b.fd(), POLLIN, deadline_after_ms(2000), nullptr), 1);
  std::vector<Message> got;
  EXPECT_EQ(b.receive(&got), HMC_ERR_PEER_LOST);
  EXPECT_NE(hmc::last_error().find("node-7 (pid 123)"), std::string::npos) << hmc::last_error();
  EXPECT_TRUE(got.empty());
  hmc::clear_error();
  EXPECT_EQ(b.receive(&got), HMC_ERR_PEER_LOST) << "the channel stays dead";
  EXPECT_NE(hmc::last_error().find("node-7"), std::string::npos);
  Message m;
  EXPECT_EQ(b.receive_one(&m, deadline_after_ms(100)), HMC_ERR_PEER_LOST);
  EXPECT_EQ(b.send(MsgType::Heartbeat, Writer()), HMC_ERR_PEER_LOST);
}

TEST_P(ControlChannelOverTransport, LastWordsBeforeEofAreDelivered) {
  {
    Channel a(std::move(a_fd_));
    Writer w;
    w.str("going away");
    ASSERT_EQ(a.send_wait(MsgType::Bye, w, deadline_after_ms(2000)), HMC_SUCCESS);
  }  // closed
  Channel b(std::move(b_fd_));
  Message m;
  ASSERT_EQ(b.receive_one(&m, deadline_after_ms(2000)), HMC_SUCCESS) << hmc::last_error();
  EXPECT_EQ(m.type, MsgType::Bye);
  EXPECT_EQ(b.receive_one(&m, deadline_after_ms(2000)), HMC_ERR_PEER_LOST);
}

TEST_P(ControlChannelOverTransport, EofInsideAFrame) {
  std::vector<uint8_t> f;
  const std::vector<uint8_t> payload(100, 9);
  encode_frame(MsgType::User, payload.data(), payload.size(), &f);
  f.resize(30);
  write_all(a_fd_.get(), f);
  a_fd_.reset();
  Channel b(std::move(b_fd_));
  Message m;
  EXPECT_EQ(b.receive_one(&m, deadline_after_ms(2000)), HMC_ERR_PEER_LOST);
  EXPECT_NE(hmc::last_error().find("middle of a frame"), std::string::npos) << hmc::last_error();
}

TEST_P(ControlChannelOverTransport, SendToClosedPeerIsPeerLostWithoutSigpipe) {
  // SIGPIPE's default action would kill the test: the Channel must never raise it.
  struct sigaction old {
  }, dfl{};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, &old);

  Channel a(std::move(a_fd_));
  a.set_peer_name("gone-peer");
  b_fd_.reset();
  // TCP may accept a first write into the buffer before the peer's reset comes back.
  hmc_status_t st = HMC_SUCCESS;
  const uint64_t deadline = deadline_after_ms(5000);
  Writer w;
  w.bytes(pattern(1000, 1).data(), 1000);
  for (int i = 0; i < 10000 && st == HMC_SUCCESS && now_ns() < deadline; ++i)
    st = a.send(MsgType::Heartbeat, w);
  EXPECT_EQ(st, HMC_ERR_PEER_LOST);
  EXPECT_NE(hmc::last_error().find("gone-peer"), std::string::npos) << hmc::last_error();
  EXPECT_EQ(a.send(MsgType::Heartbeat, w), HMC_ERR_PEER_LOST);
  EXPECT_EQ(a.flush(), HMC_ERR_PEER_LOST);
  EXPECT_FALSE(a.want_write());
  sigaction(SIGPIPE, &old, nullptr);
}

TEST_P(ControlChannelOverTransport, GarbageIsProtocolErrorAndKillsTheChannel) {
  const std::string garbage = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  write_all(a_fd_.get(), std::vector<uint8_t>(garbage.begin(), garbage.end()));
  Channel b(std::move(b_fd_));
  b.set_peer_name("http-client");
  Message m;
  EXPECT_EQ(b.receive_one(&m, deadline_after_ms(2000)), HMC_ERR_PROTOCOL);
  const std::string msg = hmc::last_error();
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
  EXPECT_NE(msg.find("http-client"), std::string::npos) << msg;
  std::vector<Message> got;
  EXPECT_EQ(b.receive(&got), HMC_ERR_PROTOCOL);
  EXPECT_EQ(hmc::last_error(), msg);
  EXPECT_EQ(b.send(MsgType::Heartbeat, Writer()), HMC_ERR_PROTOCOL);
}

TEST_P(ControlChannelOverTransport, FramesBeforeAMalformedOneAreDelivered) {
  std::vector<uint8_t> stream;
  encode_frame(MsgType::Heartbeat, nullptr, 0, &stream);
  std::vector<uint8_t> bad;
  encode_frame(MsgType::Heartbeat, nullptr, 0, &bad);
  bad[4] = 9;  // frame version 9
  stream.insert(stream.end(), bad.begin(), bad.end());
  write_all(a_fd_.get(), stream);
  Channel b(std::move(b_fd_));
  Message m;
  ASSERT_EQ(b.receive_one(&m, deadline_after_ms(2000)), HMC_SUCCESS) << hmc::last_error();
  EXPECT_EQ(m.type, MsgType::Heartbeat);
  EXPECT_EQ(b.receive_one(&m, deadline_after_ms(2000)), HMC_ERR_PROTOCOL);
  EXPECT_NE(hmc::last_error().find("frame version 9"), std::string::npos) << hmc::last_error();
}

TEST_P(ControlChannelOverTransport, OversizedPayloadRefusedChannelStaysUsable) {
  Channel a(std::move(a_fd_)), b(std::move(b_fd_));
  std::vector<uint8_t> big(kMaxFramePayload + 1, 0);
  EXPECT_EQ(a.send(MsgType::User, writer_of(big)), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(hmc::last_error().find("limit"), std::string::npos);
  EXPECT_FALSE(a.want_write());
  Writer w;
  w.u64(42);
  ASSERT_EQ(a.send_wait(MsgType::Notify, w, deadline_after_ms(2000)), HMC_SUCCESS);
  Message m;
  ASSERT_EQ(b.receive_one(&m, deadline_after_ms(2000)), HMC_SUCCESS) << hmc::last_error();
  EXPECT_EQ(m.type, MsgType::Notify);
  EXPECT_EQ(m.payload, w.data());
}

TEST_P(ControlChannelOverTransport, ReceiveOneTimesOutAtTheDeadline) {
  Channel b(std::move(b_fd_));
  Message m;
  const uint64_t t0 = now_ns();
  EXPECT_EQ(b.receive_one(&m, t0 + 100ull * 1000000), HMC_ERR_TIMEOUT);
  const uint64_t ms = (now_ns() - t0) / 1000000;
  EXPECT_GE(ms, 100u);
  EXPECT_LT(ms, 2000u);
  // A timeout does not kill the channel.
  Channel a(std::move(a_fd_));
  ASSERT_EQ(a.send(MsgType::Heartbeat, Writer()), HMC_SUCCESS);
  EXPECT_EQ(b.receive_one(&m, deadline_after_ms(2000)), HMC_SUCCESS) << hmc::last_error();
}

TEST_P(ControlChannelOverTransport, SendWaitTimesOutWhenThePeerDoesNotRead) {
  Channel a(std::move(a_fd_));
  const std::vector<uint8_t> big = pattern(kMaxFramePayload, 7);
  hmc_status_t st = HMC_SUCCESS;
  const uint64_t t0 = now_ns();
  // Socket buffers can absorb a few MiB (TCP autotuning): keep sending until the queue stalls.
  for (int i = 0; i < 64 && st == HMC_SUCCESS; ++i)
    st = a.send_wait(MsgType::User, writer_of(big), now_ns() + 100ull * 1000000);
  EXPECT_EQ(st, HMC_ERR_TIMEOUT);
  EXPECT_NE(hmc::last_error().find("unsent"), std::string::npos) << hmc::last_error();
  EXPECT_LT((now_ns() - t0) / 1000000, 15000u);
  EXPECT_TRUE(a.want_write());
}

TEST_P(ControlChannelOverTransport, PingPong) {
  Channel a(std::move(a_fd_)), b(std::move(b_fd_));
  for (uint32_t i = 0; i < 200; ++i) {
    Writer w;
    w.u32(i);
    ASSERT_EQ(a.send_wait(MsgType::User, w, deadline_after_ms(2000)), HMC_SUCCESS);
    Message m;
    ASSERT_EQ(b.receive_one(&m, deadline_after_ms(2000)), HMC_SUCCESS) << hmc::last_error();
    ASSERT_EQ(m.payload, w.data());
    ASSERT_EQ(b.send_wait(MsgType::User, w, deadline_after_ms(2000)), HMC_SUCCESS);
    ASSERT_EQ(a.receive_one(&m, deadline_after_ms(2000)), HMC_SUCCESS) << hmc::last_error();
    ASSERT_EQ(m.payload, w.data());
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, ControlChannelOverTransport,
                         ::testing::Values("socketpair", "tcp", "unix"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(ControlChannel, ReceiveWithoutDataReturnsNothing) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  Fd keep(sv[0]);
  Channel b{Fd(sv[1])};
  std::vector<Message> got;
  EXPECT_EQ(b.receive(&got), HMC_SUCCESS);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(b.receive(nullptr), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.peer_name(), "");
  b.set_peer_name("x");
  EXPECT_EQ(b.peer_name(), "x");
}
