#include "util.h"

#include <fcntl.h>
#include <sys/random.h>
#include <time.h>

#include <atomic>
#include <cerrno>

namespace hmc::hoststage {

namespace {

// Fallback when the kernel has no getrandom and /dev/urandom cannot be read: a splitmix64 of the
// clock, the pid and a counter. Unique, though guessable; logged nowhere because it never
// happens on the kernels this plugin targets (getrandom exists since Linux 3.17).
uint64_t weak_random() {
  static std::atomic<uint64_t> counter{0};
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t z = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
  z ^= static_cast<uint64_t>(::getpid()) << 32;
  z += counter.fetch_add(1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool read_all(int fd, void* buf, size_t len) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    ssize_t n = ::read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

uint64_t random_u64() {
  uint64_t v = 0;
  for (int attempt = 0; attempt < 4 && v == 0; ++attempt) {
    ssize_t n = ::getrandom(&v, sizeof(v), GRND_NONBLOCK);
    if (n == static_cast<ssize_t>(sizeof(v))) continue;
    v = 0;
    Fd fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
    if (!fd.valid() || !read_all(fd.get(), &v, sizeof(v))) v = weak_random();
  }
  return v != 0 ? v : 1;
}

}  // namespace hmc::hoststage
