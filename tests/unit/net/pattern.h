// Position-dependent data pattern for the net plugin tests: byte i of a buffer filled with seed s
// is a function of (s, i), so misplaced, shifted or stale bytes are found. Fills and checks 8
// bytes at a time where it can. No gtest dependency.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace net_test {

inline uint64_t pattern_word(uint64_t seed, uint64_t word) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + word * 0xbf58476d1ce4e5b9ull + 1;
  z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
  return z ^ (z >> 29);
}

// Fills buf with the bytes [offset, offset + len) of pattern seed.
inline void fill(void* buf, size_t len, uint64_t seed, size_t offset = 0) {
  auto* p = static_cast<uint8_t*>(buf);
  for (size_t i = 0; i < len;) {
    size_t pos = offset + i;
    uint64_t w = pattern_word(seed, pos / 8);
    if (pos % 8 == 0 && len - i >= 8) {
      std::memcpy(p + i, &w, 8);
      i += 8;
    } else {
      p[i] = static_cast<uint8_t>(w >> (8 * (pos % 8)));
      ++i;
    }
  }
}

// Index of the first byte of buf that differs from bytes [offset, offset + len) of pattern
// seed, or -1.
inline long long first_mismatch(const void* buf, size_t len, uint64_t seed, size_t offset = 0) {
  const auto* p = static_cast<const uint8_t*>(buf);
  for (size_t i = 0; i < len;) {
    size_t pos = offset + i;
    uint64_t w = pattern_word(seed, pos / 8);
    if (pos % 8 == 0 && len - i >= 8) {
      if (std::memcmp(p + i, &w, 8) != 0) {
        for (size_t k = 0; k < 8; ++k)
          if (p[i + k] != static_cast<uint8_t>(w >> (8 * k))) return static_cast<long long>(i + k);
      }
      i += 8;
    } else {
      if (p[i] != static_cast<uint8_t>(w >> (8 * (pos % 8)))) return static_cast<long long>(i);
      ++i;
    }
  }
  return -1;
}

}  // namespace net_test
