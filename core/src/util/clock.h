// The monotonic clock (CLOCK_MONOTONIC, nanoseconds): the base of every deadline in the core.
#pragma once

#include <time.h>

#include <cstdint>

namespace hmc {

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Nanoseconds from `since` to `now`; 0 when `since` is later (another thread may have stamped it
// after `now` was read), so that elapsed-time checks never see an unsigned wrap-around.
inline uint64_t elapsed_ns(uint64_t now, uint64_t since) {
  return now > since ? now - since : 0;
}

// A deadline timeout_ms from now (timeout_ms < 0 is treated as 0).
inline uint64_t deadline_after_ms(int64_t timeout_ms) {
  if (timeout_ms < 0) timeout_ms = 0;
  return now_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
}

}  // namespace hmc
