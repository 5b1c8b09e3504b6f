// A thread waiting in hmc with nothing arriving leaves the CPU to others once HMC_WAIT_SPIN_US
// has passed (it sleeps on the plugins' wake-up fds), and still sees the message the moment it
// comes; with a spin longer than the wait it polls throughout. Two contexts in this process over
// the reference path (hoststage, base_environment); the waiting thread's own CPU time tells
// which it did.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "fixture.h"

namespace hmc_test {
namespace {

constexpr int kDelayMs = 400;  // how long the message keeps the receive waiting

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
}

struct WaitCost {
  uint64_t cpu_ns = 0;
  uint64_t wall_ns = 0;
};

// Connects two contexts made with HMC_WAIT_SPIN_US=spin_us, waits for a message sent kDelayMs
// later by another thread, and says what the wait cost this thread.
void measure_wait(const std::string& spin_us, WaitCost* cost) {
  ScopedEnv env;
  env.apply(base_environment());
  env.apply({{"HMC_WAIT_SPIN_US", spin_us}});
  Context ctx, other;
  ASSERT_EQ(ctx.create(), HMC_SUCCESS) << "hmc_context_create: " << hmc_last_error();
  hmc_peer_t ours = nullptr, theirs = nullptr;
  std::string err = connect_in_process(ctx.get(), &other, kConnectTimeoutMs, &ours, &theirs);
  ASSERT_EQ(err, "");

  uint64_t in = 0, out = 0x5eed0fa11ed;
  hmc_request_t r = nullptr;
  ASSERT_HMC_OK(hmc_recv(ours, &in, sizeof in, 9, &r));
  hmc_status_t sent = HMC_ERR_INTERNAL;
  std::string send_err;
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(kDelayMs));
    sent = send_wait(theirs, &out, sizeof out, 9, kOpTimeoutMs, &send_err);
  });
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t c0 = thread_cpu_ns();
  size_t bytes = 0;
  hmc_status_t st = hmc_request_wait(r, kOpTimeoutMs, &bytes);
  cost->cpu_ns = thread_cpu_ns() - c0;
  cost->wall_ns = uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  sender.join();
  ASSERT_EQ(sent, HMC_SUCCESS) << send_err;
  ASSERT_EQ(st, HMC_SUCCESS) << hmc_last_error();
  EXPECT_EQ(bytes, sizeof in);
  EXPECT_EQ(in, out);
}

TEST(IdleWait, SleepsAfterTheSpinAndStillSeesTheMessage) {
  WaitCost sleeper, spinner;
  ASSERT_NO_FATAL_FAILURE(measure_wait("1000", &sleeper));
  // A spinning wait yields its core between passes: on a machine loaded far past its cores the
  // scheduler may hand it almost none of the wait, and then it tells nothing about spinning.
  // Measured again (up to three times) until it ran a tenth of the wait.
  for (int tries = 0; tries < 3; ++tries) {
    ASSERT_NO_FATAL_FAILURE(measure_wait("60000000", &spinner));
    if (spinner.cpu_ns * 10 >= spinner.wall_ns) break;
  }
  std::printf("wait of %d ms: sleeping %.1f ms of CPU in %.1f ms, spinning %.1f ms in %.1f ms\n",
              kDelayMs, sleeper.cpu_ns / 1e6, sleeper.wall_ns / 1e6, spinner.cpu_ns / 1e6,
              spinner.wall_ns / 1e6);
  // Both waited for the message (not less: it was sent kDelayMs after the receive was posted).
  EXPECT_GE(sleeper.wall_ns, uint64_t{kDelayMs} * 900000);
  EXPECT_GE(spinner.wall_ns, uint64_t{kDelayMs} * 900000);
  // Sleeping, it woke a thousand times a second for a pass: a few percent of the wait, under
  // any load (load only takes CPU away).
  EXPECT_LT(sleeper.cpu_ns, sleeper.wall_ns / 4)
      << "sleeping wait used " << sleeper.cpu_ns / 1000 << " us of CPU in "
      << sleeper.wall_ns / 1000 << " us";
  if (spinner.cpu_ns * 10 < spinner.wall_ns)
    GTEST_SKIP() << "the spinning wait got " << spinner.cpu_ns / 1000 << " us of CPU in "
                 << spinner.wall_ns / 1000
                 << " us three times: the machine is too loaded to compare it with the sleeping "
                    "one (the sleeping wait's own bound above held)";
  // Spinning, the thread ran whenever the scheduler let it; a quarter of its CPU tells the two
  // apart.
  EXPECT_LT(sleeper.cpu_ns * 4, spinner.cpu_ns)
      << "sleeping wait used " << sleeper.cpu_ns / 1000 << " us of CPU in "
      << sleeper.wall_ns / 1000 << " us; spinning wait " << spinner.cpu_ns / 1000 << " us in "
      << spinner.wall_ns / 1000 << " us";
}

TEST(IdleWait, OutOfRangeSpinIsRefusedNamingTheVariable) {
  std::string msg;
  EXPECT_EQ(create_context_with("HMC_WAIT_SPIN_US", "60000001", &msg), HMC_ERR_CONFIG);
  EXPECT_NE(msg.find("HMC_WAIT_SPIN_US"), std::string::npos) << msg;
}

}  // namespace
}  // namespace hmc_test
