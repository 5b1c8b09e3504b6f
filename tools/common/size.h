// The tools' one size parser: "4096", "64K", "4M", "1G" (powers of 1024), the same with KiB, MiB,
// GiB or a trailing B, and a decimal fraction that comes out a whole number of bytes ("1.5K" is
// 1536). No sign, no spaces, nothing above 2^64 - 1. Pure code (the CLI11 transform is in cli.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hmc_tools {

namespace size_detail {

// The power of 1024 a unit names (0 for none or B), or -1 for anything else.
inline int unit_power(std::string_view unit) {
  if (unit.empty() || unit == "B" || unit == "b") return 0;
  static constexpr std::string_view kUpper = "KMG", kLower = "kmg";
  const size_t upper = kUpper.find(unit[0]);
  const size_t lower = kLower.find(unit[0]);
  if (unit.size() == 1) {
    if (upper != std::string_view::npos) return static_cast<int>(upper) + 1;
    if (lower != std::string_view::npos) return static_cast<int>(lower) + 1;
    return -1;
  }
  if (upper != std::string_view::npos && unit.substr(1) == "iB") return static_cast<int>(upper) + 1;
  return -1;
}

// Reads the digits at the front of *text into *value, dropping them from *text. Returns how many
// were read, or -1 when the value would pass max.
inline int take_digits(std::string_view* text, uint64_t max, uint64_t* value) {
  int count = 0;
  *value = 0;
  while (!text->empty() && (*text)[0] >= '0' && (*text)[0] <= '9') {
    const uint64_t digit = static_cast<uint64_t>((*text)[0] - '0');
    if (*value > (max - digit) / 10) return -1;
    *value = *value * 10 + digit;
    text->remove_prefix(1);
    ++count;
  }
  return count;
}

}  // namespace size_detail

// Parses text into *out (bytes). False, with *out untouched, on anything else, on a fraction of a
// byte and on overflow. Zero is a size here; callers that need more say so.
inline bool parse_size(std::string_view text, uint64_t* out) {
  using namespace size_detail;
  uint64_t whole = 0;
  if (take_digits(&text, UINT64_MAX, &whole) <= 0) return false;
  // A fraction: at most 9 digits that count (10^9 * 2^30 fits in 64 bits).
  uint64_t tenths = 0, scale = 1;
  if (!text.empty() && text[0] == '.') {
    text.remove_prefix(1);
    const int digits = take_digits(&text, 999999999, &tenths);
    if (digits <= 0) return false;
    for (int i = 0; i < digits; ++i) scale *= 10;
  }
  const int power = unit_power(text);
  if (power < 0) return false;
  const uint64_t unit = uint64_t{1} << (10 * power);
  if (whole > UINT64_MAX / unit) return false;
  const uint64_t part = tenths * unit;
  if (part % scale != 0) return false;  // not a whole number of bytes
  if (whole * unit > UINT64_MAX - part / scale) return false;
  *out = whole * unit + part / scale;
  return true;
}

// The size as the tools print it: "4M" for a whole number of a unit, else the bytes.
inline std::string size_text(uint64_t bytes) {
  static constexpr const char kUnits[] = {'G', 'M', 'K'};
  for (int i = 0; i < 3; ++i) {
    const int shift = 10 * (3 - i);
    const uint64_t unit = uint64_t{1} << shift;
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes >> shift) + kUnits[i];
  }
  return std::to_string(bytes);
}

}  // namespace hmc_tools
