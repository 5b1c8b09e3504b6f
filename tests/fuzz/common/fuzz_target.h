// What every fuzz target of tests/fuzz/<name>/ defines, for the two drivers that run it: the
// libFuzzer one (libfuzzer_main.cpp, clang with HMC_BUILD_FUZZERS=ON) and the bounded smoke run
// of every build (smoke_main.cpp, a ctest). A target feeds the bytes to the real decoders of
// what it is named for and checks what they promise (a failed check aborts, as a sanitizer's
// report does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hmc::fuzz {

// One input. Must not keep state across calls that changes what a later input does.
void fuzz_one(const uint8_t* data, size_t len);

// Valid inputs made by the encoders, named; written to <name>/corpus by
// `<name>_fuzz_smoke --write-corpus DIR`.
struct Seed {
  std::string name;
  std::vector<uint8_t> bytes;
};
std::vector<Seed> seeds();

[[noreturn]] void check_failed(const char* what, const char* file, int line);

// Targets with several decoders pick one with the first byte: data[0] % N, the rest its input.
using Decoder = void (*)(const uint8_t* data, size_t len);
template <size_t N>
void pick(const Decoder (&decoders)[N], const uint8_t* data, size_t len) {
  if (len == 0) return;
  decoders[data[0] % N](data + 1, len - 1);
}
// The input that sends `bytes` to decoder `index` of pick().
inline std::vector<uint8_t> picked(size_t index, const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> out{static_cast<uint8_t>(index)};
  out.insert(out.end(), bytes.begin(), bytes.end());
  return out;
}
inline std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

}  // namespace hmc::fuzz

#define HMC_FUZZ_CHECK(cond)                                           \
  do {                                                                 \
    if (!(cond)) ::hmc::fuzz::check_failed(#cond, __FILE__, __LINE__); \
  } while (0)

namespace hmc::fuzz {

// Runs a decoder that says in `why` why it refused: true when it took the input, and a refusal
// must come with a reason.
template <typename T>
bool accepted(bool (*decode)(const uint8_t*, size_t, T*, std::string*), const uint8_t* p, size_t n,
              T* out) {
  std::string why;
  if (decode(p, n, out, &why)) return true;
  HMC_FUZZ_CHECK(!why.empty());
  return false;
}

}  // namespace hmc::fuzz
