// Whether a send or put is worth testing right after it is posted.
//
// A transport that copies a message out at once (a shared-memory ring, an eager send) ends it
// inside the post; testing it there lets its wait return at once, which small-message streams
// over shared memory need (hoststage/shm, 4 KiB: 1.56x the bandwidth of never testing at post).
// A message still in flight gains nothing from the test, and the test costs: the plugin runs a
// progress pass between two posts (system calls on a socket transport), and on a rendezvous
// transport that pass breaks up the batching of its handshakes. Never testing at post gained
// 8-21% over net-ucx tcp (8 KiB to 4 MiB) and 49% over net-ofi tcp (64 KiB), hmc-perf bw.
//
// Which is which depends on the plugin, the size and the moment, so it is learned per peer and
// size class (powers of two) from what the tests find: after kMisses tests in a row that found
// the request still running, only every kProbe-th post of that class is tested, and a probe that
// finds the request ended makes every post of the class tested again. (A credit that weighed
// hits against misses, a miss costing eight hits, made hoststage/shm 0.59x at 4 KiB: fewer than
// 1% of its tests miss, but they evidently come in bursts.)
//
// What this cannot see: whether the request had ended before the test made the plugin progress.
// net-ofi's test reads its completion queue and finds small sends ended there, so they keep
// being tested, at a cost (never testing gained 27% at 4 KiB over tcp).
//
// Not thread-safe: a peer's learner is used under its net->mutex().
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
