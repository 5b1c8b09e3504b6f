// The context's event descriptor (hmc_context_event_fd / hmc_context_event_clear), the way an
// event loop uses it: readable once a request ends or a notification arrives after a clear,
// never before; no end lost between the clear and the test; refused without a progress thread.
// Two contexts in this process over the reference path (hoststage, base_environment).
#include <poll.h>

#include <cstring>

#include "fixture.h"

namespace hmc_test {
namespace {

// Whether fd turns readable within timeout_ms.
bool readable_within(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int n;
  while ((n = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  return n == 1 && (p.revents & POLLIN);
}

class EventFd : public ContextTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ContextTest::SetUp());
    ASSERT_NO_FATAL_FAILURE(connect_pair(&other_, &ours_, &theirs_));
    ASSERT_HMC_OK(hmc_context_event_fd(ctx(), &fd_));
    ASSERT_GE(fd_, 0);
  }

  Context other_;
  hmc_peer_t ours_ = nullptr, theirs_ = nullptr;
  int fd_ = -1;
};

TEST_F(EventFd, ReadableWhenARequestEndsAndNotBefore) {
  uint64_t in = 0, out = 0x0123456789abcdefULL;
  hmc_request_t r = nullptr;
  ASSERT_HMC_OK(hmc_recv(ours_, &in, sizeof in, 3, &r));
  ASSERT_HMC_OK(hmc_context_event_clear(ctx()));
  ASSERT_EQ(hmc_request_test(r, nullptr), HMC_IN_PROGRESS);
  EXPECT_FALSE(readable_within(fd_, 100)) << "readable with the receive still waiting";

  std::string err;
  ASSERT_EQ(send_wait(theirs_, &out, sizeof out, 3, kOpTimeoutMs, &err), HMC_SUCCESS) << err;
  ASSERT_TRUE(readable_within(fd_, kOpTimeoutMs)) << "the receive ended, the descriptor slept";
  size_t bytes = 0;
  ASSERT_HMC_OK(hmc_request_test(r, &bytes));
  EXPECT_EQ(bytes, sizeof in);
  EXPECT_EQ(in, out);

  // Cleared with nothing pending: quiet again.
  ASSERT_HMC_OK(hmc_context_event_clear(ctx()));
  EXPECT_FALSE(readable_within(fd_, 50));
}

// The loop of docs/api.md, many times over: a message that arrives between the clear and the
// test, or right after the test, is never missed (each wait is bounded; a missed wake-up would
// hit the bound).
TEST_F(EventFd, NoEndIsMissedBetweenClearAndTest) {
  constexpr int kRounds = 300;
  std::thread sender([&] {
    for (int i = 0; i < kRounds; ++i) {
      uint64_t v = i;
      std::string err;
      if (send_wait(theirs_, &v, sizeof v, 4, kOpTimeoutMs, &err) != HMC_SUCCESS) return;
      if (i % 3 == 0) std::this_thread::yield();
    }
  });
  int wakeups = 0;
  for (int i = 0; i < kRounds; ++i) {
    uint64_t v = ~0ULL;
    hmc_request_t r = nullptr;
    ASSERT_HMC_OK(hmc_recv(ours_, &v, sizeof v, 4, &r));
    hmc_status_t st;
    for (;;) {
      ASSERT_HMC_OK(hmc_context_event_clear(ctx()));
      st = hmc_request_test(r, nullptr);
      if (st != HMC_IN_PROGRESS) break;
      ASSERT_TRUE(readable_within(fd_, kOpTimeoutMs)) << "round " << i << ": wake-up lost";
      ++wakeups;
    }
    ASSERT_EQ(st, HMC_SUCCESS) << describe(st);
    ASSERT_EQ(v, uint64_t(i));
  }
  sender.join();
  RecordProperty("wakeups", wakeups);
}

TEST_F(EventFd, ANotificationMakesItReadable) {
  std::vector<uint8_t> target(4096, 0), src(4096, 0xA5);
  Region region;
  ASSERT_HMC_OK(region.register_mem(ctx(), target.data(), target.size(), HMC_ACCESS_REMOTE_WRITE));
  hmc_status_t st;
  std::vector<uint8_t> desc = region.pack(&st);
  ASSERT_HMC_OK(st);
  Remote rem;
  ASSERT_HMC_OK(rem.import(theirs_, desc));

  hmc_notification_t n{};
  ASSERT_HMC_OK(hmc_context_event_clear(ctx()));
  ASSERT_EQ(hmc_notify_wait(ctx(), 0, &n), HMC_ERR_TIMEOUT);
  hmc_request_t put = nullptr;
  ASSERT_HMC_OK(hmc_put(theirs_, src.data(), src.size(), rem.get(), 0, HMC_PUT_NOTIFY, 77, &put));
  ASSERT_HMC_OK(finish(put, kOpTimeoutMs));
  ASSERT_TRUE(readable_within(fd_, kOpTimeoutMs)) << "the notification arrived unannounced";
  ASSERT_HMC_OK(hmc_notify_wait(ctx(), 0, &n));
  EXPECT_EQ(n.value, 77u);
  EXPECT_EQ(n.peer, ours_);
  EXPECT_EQ(target, src);
}

TEST(EventFdErrors, NeedsTheProgressThreadAndAnFdBeforeAClear) {
  ScopedEnv env;
  env.apply(base_environment());
  Context ctx;
  ASSERT_HMC_OK(ctx.create(/*progress_thread=*/0));
  int fd = -1;
  EXPECT_EQ(hmc_context_event_fd(ctx.get(), &fd), HMC_ERR_NOT_SUPPORTED);
  EXPECT_NE(std::string(hmc_last_error()).find("progress thread"), std::string::npos)
      << hmc_last_error();
  EXPECT_EQ(hmc_context_event_clear(ctx.get()), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hmc_last_error()).find("hmc_context_event_fd first"), std::string::npos)
      << hmc_last_error();

  Context threaded;
  ASSERT_HMC_OK(threaded.create());
  EXPECT_EQ(hmc_context_event_fd(threaded.get(), nullptr), HMC_ERR_INVALID_ARGUMENT);
  int a = -1, b = -2;
  ASSERT_HMC_OK(hmc_context_event_fd(threaded.get(), &a));
  ASSERT_HMC_OK(hmc_context_event_fd(threaded.get(), &b));
  EXPECT_EQ(a, b) << "one descriptor per context";
}

}  // namespace
}  // namespace hmc_test
