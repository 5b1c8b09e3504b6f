// Whether a send or put is worth testing right after it is posted. A transport that copies a
// message out at once ends it inside the post, and the test lets its wait return at once; for a
// message still in flight the test only costs a progress pass. Learned per peer and size class
// (powers of two): after kMisses tests in a row that found the request running, only every
// kProbe-th post of the class is tested, and a probe that finds it ended restores testing.
// Measurements: docs/performance.md, "History". Not thread-safe: used under net->mutex().
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace hmc {

class PostTestLearner {
 public:
  static constexpr uint8_t kMisses = 4;
  static constexpr uint32_t kProbe = 64;

  // Whether to test the request just posted for `size` bytes.
  bool should_test(size_t size) {
    Class& c = classes_[class_of(size)];
    if (c.misses < kMisses) return true;
    return ++c.skipped % kProbe == 0;
  }

  // What that test found.
  void note(size_t size, bool ended) {
    Class& c = classes_[class_of(size)];
    if (ended) {
      c = Class{};
    } else if (c.misses < kMisses) {
      ++c.misses;
    }
  }

  // 0 for 0 bytes, else 1 + floor(log2(size)): 1 byte is class 1, 4 MiB class 23.
  static unsigned class_of(size_t size) {
    return size == 0 ? 0 : 64 - static_cast<unsigned>(__builtin_clzll(size));
  }

 private:
  struct Class {
    uint8_t misses = 0;
    uint32_t skipped = 0;
  };
  std::array<Class, 65> classes_{};
};

}  // namespace hmc
