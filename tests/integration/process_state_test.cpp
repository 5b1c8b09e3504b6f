// hmc leaves the process it is embedded in as it found it: creating contexts with the default
// plugins (UCX, libfabric and verbs among them, whose libraries install error handlers when they
// load), moving data and destroying them changes no signal disposition of the application; and a
// process that exits with live contexts, a posted receive and a running progress thread exits
// with its own status.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fixture.h"

namespace hmc_test {
namespace {

// Every catchable signal's disposition: its handler (or SIG_DFL/SIG_IGN), flags and mask.
struct Disposition {
  int signo;
  struct sigaction act;
};

std::vector<Disposition> dispositions() {
  std::vector<Disposition> all;
  for (int s = 1; s < NSIG; ++s) {
    if (s == SIGKILL || s == SIGSTOP) continue;
    Disposition d{s, {}};
    if (sigaction(s, nullptr, &d.act) == 0) all.push_back(d);
  }
  return all;
}

void handler_of_the_application(int) {}

// The signals whose disposition differs from `before`, by name.
std::string changed_since(const std::vector<Disposition>& before) {
  std::string out;
  for (const Disposition& b : before) {
    struct sigaction now {};
    sigaction(b.signo, nullptr, &now);
    // What the application can set (the C library adds SA_RESTORER to what it reads back).
    const int flags = SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | SA_ONSTACK | SA_RESTART |
                      SA_NODEFER | SA_RESETHAND;
    bool same =
        now.sa_handler == b.act.sa_handler && (now.sa_flags & flags) == (b.act.sa_flags & flags);
    if (!same) out += std::string(out.empty() ? "" : ", ") + strsignal(b.signo);
  }
  return out;
}

TEST(ProcessState, ContextsLeaveEverySignalDispositionAsFound) {
  ScopedEnv env;
  env.apply(base_environment());  // the default plugins: every one built here
  // The application's own handlers, which hmc must keep: one installed, one ignored.
  struct sigaction mine {};
  mine.sa_handler = handler_of_the_application;
  sigemptyset(&mine.sa_mask);
  struct sigaction old_int {
  }, old_pipe{};
  ASSERT_EQ(sigaction(SIGINT, &mine, &old_int), 0);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGPIPE, &ign, &old_pipe), 0);
  const std::vector<Disposition> before = dispositions();
  {
    Context ctx, other;
    ASSERT_EQ(ctx.create(), HMC_SUCCESS) << hmc_last_error();
    EXPECT_EQ(changed_since(before), "") << "changed by hmc_context_create";
    hmc_peer_t ours = nullptr, theirs = nullptr;
    ASSERT_EQ(connect_in_process(ctx.get(), &other, kConnectTimeoutMs, &ours, &theirs), "");
    uint64_t in = 0, out = 0x0dd5eed;
    hmc_request_t r = nullptr;
    ASSERT_HMC_OK(hmc_recv(ours, &in, sizeof in, 4, &r));
    std::string err;
    ASSERT_EQ(send_wait(theirs, &out, sizeof out, 4, kOpTimeoutMs, &err), HMC_SUCCESS) << err;
    ASSERT_HMC_OK(hmc_request_wait(r, kOpTimeoutMs, nullptr));
    EXPECT_EQ(in, out);
    EXPECT_EQ(changed_since(before), "") << "changed by connecting and moving data";
  }
  EXPECT_EQ(changed_since(before), "") << "changed by hmc_context_destroy";
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGPIPE, &old_pipe, nullptr);
}

// HMC_LIBRARY_SIGNALS=keep leaves the libraries' handlers in place, for those who want UCX's
// backtraces. UCX installs its handlers once, when it is first loaded into a process, so the
// check runs in a fresh process: this test binary again, asked for this test alone.
TEST(ProcessState, LibrarySignalsKeepLeavesTheLibrariesHandlers) {
  const std::string ucx = std::string(HMC_TEST_PLUGIN_DIR) + "/libhmc-net-ucx.so";
  if (access(ucx.c_str(), R_OK) != 0) GTEST_SKIP() << "net-ucx not built: no library to watch";
  ScopedEnv env;
  env.apply(base_environment());
  env.apply({{"HMC_LIBRARY_SIGNALS", "keep"}});
  if (!getenv("HMC_TEST_FRESH_PROCESS")) {
    env.apply({{"HMC_TEST_FRESH_PROCESS", "1"}});
    std::string cmd =
        "/proc/" + std::to_string(getpid()) +
        "/exe --gtest_filter=ProcessState.LibrarySignalsKeepLeavesTheLibrariesHandlers"
        " >/dev/null 2>&1";
    EXPECT_EQ(system(cmd.c_str()), 0) << "the fresh process failed: run " << cmd;
    return;
  }
  const std::vector<Disposition> before = dispositions();
  Context ctx;
  ASSERT_EQ(ctx.create(), HMC_SUCCESS) << hmc_last_error();
  EXPECT_NE(changed_since(before).find(strsignal(SIGSEGV)), std::string::npos)
      << "UCX's handler for SIGSEGV was not kept";
}

TEST(ProcessState, AMisspelledLibrarySignalsIsRefused) {
  std::string msg;
  EXPECT_EQ(create_context_with("HMC_LIBRARY_SIGNALS", "kep", &msg), HMC_ERR_CONFIG);
  EXPECT_NE(msg.find("HMC_LIBRARY_SIGNALS"), std::string::npos) << msg;
}

// The child's way of leaving: exit() from main, with work in flight.
enum class Leave { ExitFromMain, ExitFromAnotherThread, ReturnWithSignal };

// Runs in a forked child: one thread connects to a context of this process and closes the peer,
// over and over (each connect hashing the hello and proving HMC_AUTH_TOKEN), another accepts
// and closes; main exits `after_us` in, so that the exit handlers of the libraries hmc links run
// while a handshake computes its digests. Exit code 42 says exit() ran to its end.
[[noreturn]] void child_exiting_while_connecting(int after_us) {
  Context a, b;
  if (a.create() != HMC_SUCCESS || b.create() != HMC_SUCCESS) _exit(10);
  uint8_t addr[HMC_ADDRESS_MAX];
  size_t len = sizeof addr;
  if (hmc_address(a.get(), addr, &len) != HMC_SUCCESS) _exit(11);
  std::thread([&] {
    for (;;) {
      hmc_peer_t p = nullptr;
      if (hmc_connect(b.get(), addr, len, kConnectTimeoutMs, &p) == HMC_SUCCESS) hmc_peer_close(p);
    }
  }).detach();
  std::thread([&] {
    for (;;) {
      hmc_peer_t p = nullptr;
      if (hmc_accept(a.get(), kConnectTimeoutMs, &p) == HMC_SUCCESS) hmc_peer_close(p);
    }
  }).detach();
  usleep(after_us);
  exit(42);
}

// Runs in a forked child: two contexts connected, a receive posted that nothing will match, a
// send in flight, the progress threads running; then leaves. Exit code 42 says it got that far.
[[noreturn]] void child_with_live_contexts(Leave how) {
  hmc_context_options_t o{};
  o.struct_size = sizeof o;
  o.progress_thread = 1;
  hmc_context_t a = nullptr;
  if (hmc_context_create(&o, &a) != HMC_SUCCESS) _exit(10);
  Context b;
  hmc_peer_t ours = nullptr, theirs = nullptr;
  if (!connect_in_process(a, &b, kConnectTimeoutMs, &ours, &theirs).empty()) _exit(11);
  static uint8_t in[1 << 16], out[1 << 20];
  hmc_request_t r = nullptr, s = nullptr;
  if (hmc_recv(ours, in, sizeof in, 77, &r) != HMC_SUCCESS) _exit(12);
  if (hmc_send(theirs, out, sizeof out, 78, &s) != HMC_SUCCESS) _exit(13);  // never received
  (void)b.get();
  switch (how) {
    case Leave::ExitFromMain: exit(42);
    case Leave::ExitFromAnotherThread: {
      std::thread t([] { exit(42); });
      t.join();
      break;
    }
    case Leave::ReturnWithSignal: raise(SIGSEGV); break;
  }
  _exit(14);
}

// Forks a child running `child` and expects it to exit with want_code or die of want_signal.
template <typename Child>
void expect_child_ends(Child child, int want_code, int want_signal) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) child();
  // Bounded: a child that hangs in its exit handlers is killed and reported as hung.
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  pid_t got = 0;
  while ((got = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
    usleep(10000);
  if (got == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the process hung in exit for 20 s with live contexts";
  }
  if (want_signal) {
    ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
    EXPECT_EQ(WTERMSIG(status), want_signal) << strsignal(WTERMSIG(status));
  } else {
    ASSERT_TRUE(WIFEXITED(status)) << (WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "?");
    EXPECT_EQ(WEXITSTATUS(status), want_code);
  }
}

void expect_clean_exit(Leave how, int want_code, int want_signal) {
  expect_child_ends([how] { child_with_live_contexts(how); }, want_code, want_signal);
}

TEST(ProcessState, ExitWithLiveContextsAndPostedReceivesIsClean) {
  ScopedEnv env;
  env.apply(base_environment());
  for (int i = 0; i < 3; ++i) expect_clean_exit(Leave::ExitFromMain, 42, 0);
  expect_clean_exit(Leave::ExitFromAnotherThread, 42, 0);
}

// A signal the application does not handle kills it with that signal (no library's handler
// turns it into exit(1) after a backtrace).
TEST(ProcessState, AnUnhandledSignalKillsWithThatSignal) {
  ScopedEnv env;
  env.apply(base_environment());
  expect_clean_exit(Leave::ReturnWithSignal, 0, SIGSEGV);
}

// exit() while threads are inside hmc_connect and hmc_accept, handshakes with a token running:
// nothing of hmc's digests depends on state a library's exit handler tears down, so every exit
// ends with its own status. Twenty exits at staggered points of the connect loop.
TEST(ProcessState, ExitWhileHandshakesRunIsClean) {
  ScopedEnv env;
  EnvOverrides vars = base_environment();
  vars.push_back({"HMC_AUTH_TOKEN", "exit-while-connecting"});
  env.apply(vars);
  for (int i = 0; i < 20; ++i)
    expect_child_ends([i] { child_exiting_while_connecting(20000 + 7000 * i); }, 42, 0);
}

}  // namespace
}  // namespace hmc_test
