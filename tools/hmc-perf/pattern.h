// --check data: a byte pattern that depends on a seed (the iteration and direction, or the slot
// for get) and on the offset, so a stale, shifted, truncated or misrouted message is caught.
// Pure code, included by the unit test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hmc::perf {

// Seeds. Client-to-server data of iteration i, server-to-client data of iteration i, and the
// slots that get reads (constant while a size runs).
inline uint64_t seed_forward(uint64_t iteration) {
  return iteration << 1;
}
inline uint64_t seed_back(uint64_t iteration) {
  return iteration << 1 | 1;
}
inline uint64_t seed_slot(uint64_t slot) {
  return (1ull << 62) | slot;
}
// What receive buffers are filled with before a transfer, so stale data cannot pass the check.
constexpr uint8_t kPoison = 0xA5;

// The 8 pattern bytes at word index w (offset 8w) for seed s.
inline uint64_t pattern_word(uint64_t seed, uint64_t w) {
  uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (w + 1) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return x;
}

inline void pattern_fill(void* buf, size_t n, uint64_t seed) {
  auto* p = static_cast<uint8_t*>(buf);
  size_t words = n / 8;
  for (size_t w = 0; w < words; ++w) {
    uint64_t v = pattern_word(seed, w);
    std::memcpy(p + 8 * w, &v, 8);
  }
  if (n % 8 != 0) {
    uint64_t v = pattern_word(seed, words);
    std::memcpy(p + 8 * words, &v, n % 8);
  }
}

// The offset of the first byte that differs from the pattern, or n when all n bytes match.
inline size_t pattern_check(const void* buf, size_t n, uint64_t seed) {
  auto* p = static_cast<const uint8_t*>(buf);
  size_t words = n / 8;
  for (size_t w = 0; w <= words; ++w) {
    size_t len = w < words ? 8 : n % 8;
    if (len == 0) break;
    uint64_t want = pattern_word(seed, w);
    if (std::memcmp(p + 8 * w, &want, len) != 0) {
      auto* wb = reinterpret_cast<const uint8_t*>(&want);
      for (size_t b = 0; b < len; ++b)
        if (p[8 * w + b] != wb[b]) return 8 * w + b;
    }
  }
  return n;
}

}  // namespace hmc::perf
