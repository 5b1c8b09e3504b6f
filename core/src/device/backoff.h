// Waiting on a device: device events have no file descriptor, so a waiter polls them. It yields
// first (the work is usually short, and on a small machine the thread that completes it may need
// this core), then sleeps in short steps so a long copy or reduction does not burn a core.
#pragma once

#include <sched.h>
#include <time.h>

namespace hmc {

class Backoff {
 public:
  void pause() {
    if (++rounds_ < 64) {
      sched_yield();
      return;
    }
    struct timespec ts = {0, 20000};  // 20 us
    nanosleep(&ts, nullptr);
  }
  void reset() { rounds_ = 0; }

 private:
  int rounds_ = 0;
};

}  // namespace hmc
