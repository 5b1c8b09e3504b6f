// Bounded waits: every wait of the checker ends within its limit, whatever the plugin does (a
// slot that never returns is the watchdog's business, report.h).
#pragma once

#include <chrono>
#include <thread>

#include "hmc/plugin/common.h"

namespace hmc::check {

using Clock = std::chrono::steady_clock;

class Waiter {
 public:
  explicit Waiter(std::chrono::milliseconds limit) : limit_(limit) {}

  // Calls poll() until it answers something other than HMC_PLUGIN_IN_PROGRESS, calling between()
  // after each IN_PROGRESS (progress of the plugin's contexts). True with the answer in *st when
  // it came within the limit; false (*st = IN_PROGRESS) when not.
  template <typename Poll, typename Between>
  bool until(Poll poll, Between between, int* st) const {
    const auto deadline = Clock::now() + limit_;
    for (unsigned tries = 0;; ++tries) {
      *st = poll();
      if (*st != HMC_PLUGIN_IN_PROGRESS) return true;
      if (Clock::now() > deadline) return false;
      between();
      // Busy for the first tries (most answers come at once), then kinder to a shared machine.
      if (tries > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  std::chrono::milliseconds limit() const { return limit_; }
  double seconds() const { return static_cast<double>(limit_.count()) / 1000.0; }

 private:
  std::chrono::milliseconds limit_;
};

}  // namespace hmc::check
