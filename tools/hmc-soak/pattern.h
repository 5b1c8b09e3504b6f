// The payloads of hmc-soak: a byte at position p of the stream `key` is a byte of
// splitmix64(key + p / 8), so that any range of any stream can be made anywhere (the receiver
// makes what it expects from the plan both sides derive from the seed) and compared by its
// XXH3-64 hash.
#pragma once

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace soak {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A key from a few numbers (seed, epoch, step, rank, ...).
inline uint64_t mix(uint64_t a, uint64_t b) {
  return splitmix64(a ^ splitmix64(b));
}
inline uint64_t mix(uint64_t a, uint64_t b, uint64_t c) {
  return mix(mix(a, b), c);
}
inline uint64_t mix(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  return mix(mix(a, b, c), d);
}

// Writes bytes [pos, pos + len) of stream key to dst.
inline void fill(uint64_t key, uint64_t pos, size_t len, void* dst) {
  auto* out = static_cast<unsigned char*>(dst);
  size_t i = 0;
  while (i < len) {
    uint64_t p = pos + i;
    uint64_t w = splitmix64(key + p / 8);
    size_t off = size_t(p % 8), n = 8 - off;
    if (n > len - i) n = len - i;
    std::memcpy(out + i, reinterpret_cast<unsigned char*>(&w) + off, n);
    i += n;
  }
}

inline uint64_t hash(const void* p, size_t len) {
  return XXH3_64bits(p, len);
}

// A small deterministic generator for the plan.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() { return s = splitmix64(s); }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  bool chance(unsigned percent) { return below(100) < percent; }
  // 1 .. max, log-uniform: as many small sizes as large ones.
  size_t size(size_t max) {
    if (max <= 1) return 1;
    int bits = 0;
    while ((size_t(1) << (bits + 1)) <= max) ++bits;
    int b = int(below(uint64_t(bits) + 1));
    size_t lo = size_t(1) << b, hi = b == bits ? max : (size_t(1) << (b + 1)) - 1;
    return lo + size_t(below(hi - lo + 1));
  }
};

}  // namespace soak
