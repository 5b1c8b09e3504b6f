#include "plugin/signal_guard.h"

#include <cstring>

#include "util/log.h"

namespace hmc {
namespace {

bool catchable(int s) {
  return s != SIGKILL && s != SIGSTOP;
}

// The flags an application sets (the C library adds SA_RESTORER to what it reads back).
constexpr int kFlags =
    SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER | SA_RESETHAND;

bool same(const struct sigaction& a, const struct sigaction& b) {
  // A handler and its flags say what the signal does; SA_SIGINFO selects which member holds it.
  if ((a.sa_flags & kFlags) != (b.sa_flags & kFlags)) return false;
  if (a.sa_flags & SA_SIGINFO) return a.sa_sigaction == b.sa_sigaction;
  return a.sa_handler == b.sa_handler;
}

std::string signal_name(int s) {
  const char* abbrev = sigabbrev_np(s);
  if (abbrev) return std::string("SIG") + abbrev;
  if (s >= SIGRTMIN && s <= SIGRTMAX) return "SIGRTMIN+" + std::to_string(s - SIGRTMIN);
  return "signal " + std::to_string(s);
}

}  // namespace

std::mutex& SignalGuard::serial() {
  static std::mutex m;
  return m;
}

SignalGuard::SignalGuard(std::string what, bool keep)
    : lock_(serial()), what_(std::move(what)), keep_(keep), before_(NSIG) {
  for (int s = 1; s < NSIG; ++s)
    if (catchable(s)) sigaction(s, nullptr, &before_[size_t(s)]);
}

std::vector<int> SignalGuard::changed_signals() const {
  std::vector<int> out;
  for (int s = 1; s < NSIG; ++s) {
    if (!catchable(s)) continue;
    struct sigaction now {};
    if (sigaction(s, nullptr, &now) == 0 && !same(now, before_[size_t(s)])) out.push_back(s);
  }
  return out;
}

SignalGuard::~SignalGuard() {
  std::vector<int> changed = changed_signals();
  if (changed.empty()) return;
  std::string names;
  for (int s : changed) names += (names.empty() ? "" : ", ") + signal_name(s);
  if (keep_) {
    HMC_LOG_I("{} installed handlers for {}; kept (HMC_LIBRARY_SIGNALS=keep)", what_, names);
    return;
  }
  for (int s : changed) sigaction(s, &before_[size_t(s)], nullptr);
  HMC_LOG_D(
      "{} installed handlers for {}; the application's dispositions were put back "
      "(HMC_LIBRARY_SIGNALS=keep leaves the libraries' handlers)",
      what_, names);
}

}  // namespace hmc
