// Recognisable byte patterns, so that a check can say which byte of a transfer went wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hmc::check {

// Fills p with the pattern of seed.
inline void fill_pattern(unsigned char* p, size_t n, unsigned seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    p[i] = static_cast<unsigned char>(x >> 16);
  }
}

// Index of the first byte of p that differs from the pattern of seed, or n when none does.
inline size_t pattern_mismatch(const unsigned char* p, size_t n, unsigned seed) {
  std::vector<unsigned char> want(n);
  fill_pattern(want.data(), n, seed);
  for (size_t i = 0; i < n; ++i)
    if (p[i] != want[i]) return i;
  return n;
}

}  // namespace hmc::check
