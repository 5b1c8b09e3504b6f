#pragma once
// Keeps the application's signal dispositions while plugins load. The libraries some plugins
// bring in install handlers of their own as they load or initialise (UCX's error handler on
// SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGINT, SIGTERM...; PSM's through libfabric): a
// program's crash would then end in a library's backtrace and exit(1), Ctrl-C would reach a
// library. A guard records every disposition when it is made and puts back, when it ends, those
// that changed meanwhile, naming them in the log.

#include <signal.h>

#include <mutex>
#include <string>
#include <vector>

namespace hmc {

class SignalGuard {
 public:
  // `what`: who may change them (for the log), e.g. "net plugin 'ucx'". keep: record only, log
  // the changes and leave them (HMC_LIBRARY_SIGNALS=keep).
  SignalGuard(std::string what, bool keep);
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  std::vector<int> changed_signals() const;

  // Loads in several threads would otherwise restore each other's snapshots half-way.
  static std::mutex& serial();

  std::lock_guard<std::mutex> lock_;
  std::string what_;
  bool keep_;
  std::vector<struct sigaction> before_;  // index: signal number
};

}  // namespace hmc
