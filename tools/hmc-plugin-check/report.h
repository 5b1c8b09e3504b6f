// What the checker prints: one line per check (ok, FAIL, warn, skip), each failure followed by the
// rule it breaks, and the counts that decide the exit status. Also the log level, and the
// watchdog that ends the run when a slot never returns.
#pragma once

#include <string>

namespace hmc::check {

// Names the step now running for the watchdog (below), and re-arms it.
void watch_step(const char* what);

class Report {
 public:
  // The step now running, named in the watchdog's message ("loopback: accept").
  void step(const char* what) { watch_step(what); }

  void ok(const std::string& id, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  // A check that failed: what happened (fmt), and the rule of the contract it breaks.
  void fail(const std::string& id, const char* rule, const char* fmt, ...)
      __attribute__((format(printf, 4, 5)));
  // Allowed, but worth changing (does not fail the run).
  void warn(const std::string& id, const char* rule, const char* fmt, ...)
      __attribute__((format(printf, 4, 5)));
  // Not exercised, and why.
  void skip(const std::string& id, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

  int passed() const { return passed_; }
  int failed() const { return failed_; }
  int warned() const { return warned_; }
  int skipped() const { return skipped_; }

 private:
  int passed_ = 0, failed_ = 0, warned_ = 0, skipped_ = 0;
};

// The core's log level for the run (HMC_LOG_LEVEL; the plugins log through the core).
void set_log_level(int level);

// While alive, mutes the log (unless the level is debug or more), for calls that are meant to
// be refused: the plugin's own error messages about them would read as problems.
class ExpectedErrors {
 public:
  ExpectedErrors();
  ~ExpectedErrors();
  ExpectedErrors(const ExpectedErrors&) = delete;
  ExpectedErrors& operator=(const ExpectedErrors&) = delete;
};

// Ends the process with exit status 1 and a message naming the step when a step has not
// finished within seconds (a slot that blocks forever). Re-armed by each watch_step.
void arm_watchdog(unsigned seconds);
void disarm_watchdog();

}  // namespace hmc::check
