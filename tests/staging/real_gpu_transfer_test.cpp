// The staging pipeline and device IPC on real GPUs: two processes over hoststage, each with the
// vendor's installed runtime (no emulation). Labelled `gpu`; each test skips, saying why, on a
// machine without such a device.
//
// GPU runtimes do not survive fork(): a process that initialised one cannot hand it to a forked
// child. So every test runs in a fresh forked process of its own (which forks the peer before
// it creates a context), and so does the check for a device.
#include "two_process.h"

namespace {

using namespace staging_test;

// Runs fn in a forked process; returns its exit status (0: fn returned without a test failure).
template <typename Fn>
int in_child(Fn fn) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    fn();
    fflush(stdout);
    _exit(testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Why memory `mem` cannot be allocated on this machine; "" when it can.
std::string unavailable(const std::string& mem) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  int rc = in_child([&] {
    close(fds[0]);
    set_side_env(mem, "hoststage/shm");
    hmc_context_t ctx;
    std::string why;
    void* p = nullptr;
    if (hmc_context_create(nullptr, &ctx) != HMC_SUCCESS) {
      why = hmc_last_error();
    } else {
      if (hmc_mem_alloc(ctx, mem.c_str(), 1, &p) != HMC_SUCCESS)
        why = hmc_last_error();
      else
        hmc_mem_free(ctx, p);
      hmc_context_destroy(ctx);
    }
    ssize_t n = write(fds[1], why.data(), why.size());
    (void)n;
    close(fds[1]);
  });
  close(fds[1]);
  char buf[1024];
  ssize_t n = read(fds[0], buf, sizeof buf);
  close(fds[0]);
  if (rc != 0) return "the probe process failed (status " + std::to_string(rc) + ")";
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

struct Case {
  Pair pair;
  bool ipc;  // HMC_DEVICE_IPC on both sides
};

void PrintTo(const Case& c, std::ostream* os) {
  PrintTo(c.pair, os);
  *os << (c.ipc ? ", device IPC on" : ", device IPC off");
}

class RealGpu : public testing::TestWithParam<Case> {};

TEST_P(RealGpu, SendRecvBothWaysByteExact) {
  g_real_runtimes = true;
  const Case& c = GetParam();
  for (const char* mem : {c.pair.mine, c.pair.theirs}) {
    std::string why = unavailable(mem);
    if (!why.empty()) GTEST_SKIP() << "no " << mem << " here: " << why;
  }
  setenv("HMC_DEVICE_IPC", c.ipc ? "1" : "0", 1);
  int rc = in_child([&] {
    echo_sizes(c.pair, {0, 1, 4096 + 3, kFirst - 1, kFirst, kFirst + 1, kChunk - 1, kChunk,
                        kChunk + 1, 3 * kChunk + 17, (64u << 20) + 3});
  });
  unsetenv("HMC_DEVICE_IPC");
  EXPECT_EQ(rc, 0) << "the test process reported failures (above) or died";
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  testing::TestParamInfo<Pair> p(info.param.pair, info.index);
  return pair_name(p) + (info.param.ipc ? "_ipc" : "_staged");
}

INSTANTIATE_TEST_SUITE_P(Devices, RealGpu,
                         testing::Values(Case{{"cuda:0", "cuda:0", "hoststage/shm"}, true},
                                         Case{{"cuda:0", "cuda:0", "hoststage/shm"}, false},
                                         Case{{"cuda:0", "cuda:0", "hoststage/tcp"}, true},
                                         Case{{"cuda:0", "host", "hoststage/shm"}, true},
                                         Case{{"hip:0", "hip:0", "hoststage/shm"}, true},
                                         Case{{"hip:0", "host", "hoststage/tcp"}, true}),
                         case_name);

}  // namespace
