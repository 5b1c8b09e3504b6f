#include "util.h"

#include <sys/random.h>
#include <time.h>

#include <cerrno>

namespace hmc::ofi {

uint64_t random_u64() {
  uint64_t v = 0;
  for (int i = 0; i < 8 && v == 0; ++i) {
    ssize_t n = ::getrandom(&v, sizeof(v), 0);
    if (n == static_cast<ssize_t>(sizeof(v)) && v != 0) return v;
    if (n < 0 && errno == EINTR) continue;
    // getrandom unavailable: mix the clock and the pid (uniqueness, not secrecy, is what the
    // fallback keeps).
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    v = (static_cast<uint64_t>(ts.tv_nsec) << 20) ^ static_cast<uint64_t>(ts.tv_sec) ^
        (static_cast<uint64_t>(::getpid()) << 44) ^ 0x9e3779b97f4a7c15ull;
  }
  return v != 0 ? v : 1;
}

}  // namespace hmc::ofi
