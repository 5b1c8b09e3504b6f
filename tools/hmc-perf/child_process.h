// A child process started with posix_spawn and owned by one object: the destructor kills and
// reaps it if it still runs, so no error path leaves an orphan or a zombie. Children started for
// hmc-perf --loopback and hmc-idle-peers also arm PR_SET_PDEATHSIG themselves (see
// die_with_parent) so that they do not outlive a parent killed by a signal.
#pragma once

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace hmc::tools {

// This program's own file, to start itself as the child (argv[0] may have come through PATH).
inline std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "/proc/self/exe";
  return std::string(buf, static_cast<size_t>(n));
}

inline double monotonic_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(ChildProcess&& o) noexcept
      : pid_(std::exchange(o.pid_, -1)),
        pidfd_(std::exchange(o.pidfd_, -1)),
        status_(o.status_),
        reaped_(o.reaped_) {}
  ChildProcess& operator=(ChildProcess&& o) noexcept {
    if (this != &o) {
      kill_and_reap();
      pid_ = std::exchange(o.pid_, -1);
      pidfd_ = std::exchange(o.pidfd_, -1);
      status_ = o.status_;
      reaped_ = o.reaped_;
    }
    return *this;
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { kill_and_reap(); }

  // Starts args[0] with args, the current environment, and stdin from stdin_fd when >= 0.
  // Throws std::runtime_error naming the program when posix_spawn fails.
  static ChildProcess spawn(const std::vector<std::string>& args, int stdin_fd = -1) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (stdin_fd >= 0) posix_spawn_file_actions_adddup2(&fa, stdin_fd, 0);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("posix_spawn " + args[0] + ": " + std::strerror(rc));
    ChildProcess c;
    c.pid_ = pid;
#ifdef SYS_pidfd_open
    c.pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));  // -1 on old kernels: fine
#endif
    return c;
  }

  pid_t pid() const {
    return pid_;
  }
  bool started() const {
    return pid_ > 0;
  }

  // True (and the status kept) once the child has exited; never blocks.
  bool exited() {
    if (pid_ <= 0 || reaped_) return reaped_;
    pid_t r = waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) mark_reaped();
    return reaped_;
  }

  // Waits up to timeout_ms for the child to exit; true when it did.
  bool wait_for(int timeout_ms) {
    double deadline = monotonic_seconds() + timeout_ms / 1000.0;
    while (!exited()) {
      double left = deadline - monotonic_seconds();
      if (left <= 0) return false;
      int slice = static_cast<int>(left * 1000) + 1;
      if (pidfd_ >= 0) {
        pollfd p{pidfd_, POLLIN, 0};
        (void)poll(&p, 1, slice);  // readable once the child exited
      } else {
        timespec ts{0, 2 * 1000 * 1000};  // old kernels: check every 2 ms
        nanosleep(&ts, nullptr);
      }
    }
    return true;
  }

  // Exit code, or 128+signal when killed; -1 while running.
  int exit_code() const {
    if (!reaped_) return -1;
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
    return -1;
  }
  std::string describe_exit() const {
    if (!reaped_) return "still running";
    if (WIFEXITED(status_)) return "exited with status " + std::to_string(WEXITSTATUS(status_));
    if (WIFSIGNALED(status_))
      return std::string("killed by signal ") + strsignal(WTERMSIG(status_));
    return "ended";
  }

  // SIGTERM, up to grace_ms to exit, then SIGKILL; always reaps.
  void kill_and_reap(int grace_ms = 1000) noexcept {
    if (pid_ > 0 && !exited()) {
      ::kill(pid_, SIGTERM);
      if (!wait_for(grace_ms)) {
        ::kill(pid_, SIGKILL);
        if (waitpid(pid_, &status_, 0) == pid_) mark_reaped();
      }
    }
    if (pidfd_ >= 0) ::close(std::exchange(pidfd_, -1));
  }

 private:
  void mark_reaped() {
    reaped_ = true;
    if (pidfd_ >= 0) ::close(std::exchange(pidfd_, -1));
  }
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int status_ = 0;
  bool reaped_ = false;
};

// Called first thing in a spawned child: the kernel sends SIGKILL when the parent dies, and if
// the parent is already gone (getppid() changed) the child exits at once. False when orphaned.
inline bool die_with_parent(long parent_pid) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  return parent_pid == 0 || getppid() == parent_pid;
}

}  // namespace hmc::tools
