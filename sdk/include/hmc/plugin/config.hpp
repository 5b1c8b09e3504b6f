/*
 * Typed reading of a plugin's HMC_<PLUGIN>_<NAME> variables through the core's config_get, with
 * an error message naming the variable when a value is invalid. Header-only C++17, no ABI
 * (compiled into the plugin, like log.hpp).
 *
 *   hmc::plugin::ConfigReader cfg(host, log);
 *   if (!cfg.read_int("HMC_MYNET_STREAMS", 1, 64, &streams) ||
 *       !cfg.read_size("HMC_MYNET_CHUNK", 4 << 10, size_t{1} << 30, &chunk) ||
 *       !cfg.read_bool("HMC_MYNET_SHM", &shm))
 *     return HMC_PLUGIN_ERR_CONFIG;  // the reader logged which variable and why
 *
 * A value is trimmed of surrounding blanks; an unset or blank variable keeps the caller's default.
 * Declare every variable in the table's config_vars as well (ABI rule 7).
 */
#ifndef HMC_PLUGIN_CONFIG_HPP
#define HMC_PLUGIN_CONFIG_HPP

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "hmc/plugin/common.h"
#include "hmc/plugin/log.hpp"

namespace hmc::plugin {

// ---- text to value (no logging; false leaves *out alone) --------------------------------------

namespace config_detail {
inline char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}
inline bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}
inline std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\n' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\n' || s[e - 1] == '\r'))
    --e;
  return s.substr(b, e - b);
}
// Decimal digits only, at most max.
inline bool digits(std::string_view s, unsigned long long max, unsigned long long* out) {
  if (s.empty()) return false;
  unsigned long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    unsigned d = static_cast<unsigned>(c - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}
}  // namespace config_detail

// 1/0, y/n, yes/no, on/off, true/false, in any case (the spellings the core accepts for its own
// boolean variables).
inline bool parse_bool(std::string_view text, bool* out) {
  static constexpr const char* kTrue[] = {"1", "y", "yes", "on", "true"};
  static constexpr const char* kFalse[] = {"0", "n", "no", "off", "false"};
  for (const char* t : kTrue)
    if (config_detail::iequal(text, t)) return *out = true, true;
  for (const char* f : kFalse)
    if (config_detail::iequal(text, f)) return *out = false, true;
  return false;
}

// A decimal integer, optionally negative, within [lo, hi].
inline bool parse_int(std::string_view text, long long lo, long long hi, long long* out) {
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) text.remove_prefix(1);
  unsigned long long mag = 0;
  const unsigned long long limit = negative ? 1ull + static_cast<unsigned long long>(INT64_MAX)
                                            : static_cast<unsigned long long>(INT64_MAX);
  if (!config_detail::digits(text, limit, &mag)) return false;
  long long v = negative ? (mag == limit ? INT64_MIN : -static_cast<long long>(mag))
                         : static_cast<long long>(mag);
  if (v < lo || v > hi) return false;
  *out = v;
  return true;
}

// A byte count: decimal digits with an optional K, M or G suffix (powers of 1024, any case).
// False on anything else ("-1", "4Q", "1.5M") and on overflow.
inline bool parse_size(std::string_view text, size_t* out) {
  unsigned shift = 0;
  if (!text.empty()) {
    switch (config_detail::lower(text.back())) {
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      default: break;
    }
    if (shift != 0) text.remove_suffix(1);
  }
  unsigned long long v = 0;
  if (!config_detail::digits(text, static_cast<unsigned long long>(SIZE_MAX) >> shift, &v))
    return false;
  *out = static_cast<size_t>(v << shift);
  return true;
}

// Comma-separated items, each trimmed of blanks. False when an item is empty ("a,,b", "a,").
inline bool parse_list(std::string_view text, std::vector<std::string>* out) {
  std::vector<std::string> items;
  for (;;) {
    size_t comma = text.find(',');
    std::string_view item = config_detail::trim(text.substr(0, comma));
    if (item.empty()) return false;
    items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  *out = std::move(items);
  return true;
}

// A size as parse_size reads it, for messages: "64K", "1G", "1000".
inline std::string format_size(size_t v) {
  if (v != 0 && v % (size_t{1} << 30) == 0) return std::to_string(v >> 30) + "G";
  if (v != 0 && v % (size_t{1} << 20) == 0) return std::to_string(v >> 20) + "M";
  if (v != 0 && v % (size_t{1} << 10) == 0) return std::to_string(v >> 10) + "K";
  return std::to_string(v);
}

// ---- reading variables through the host services -----------------------------------------------

// Reads variables through host->config_get. Each read_* returns true when the variable is unset
// or blank (*out keeps its default) or valid (*out set), and false, with an error logged as
// `invalid NAME="value": expected WHAT`, when not. Holds the pointers it is given: host and log
// must outlive it. Not thread-safe (a plugin reads its configuration in init).
class ConfigReader {
 public:
  ConfigReader(const hmc_host_services_t* host, const Log& log) : host_(host), log_(log) {}

  // The value trimmed of surrounding blanks; "" when unset.
  std::string text(const char* name) const {
    const char* v = host_->config_get(host_->host_ctx, name);
    return v == nullptr ? std::string() : std::string(config_detail::trim(v));
  }

  bool read_bool(const char* name, bool* out) const {
    std::string v = text(name);
    if (v.empty() || parse_bool(v, out)) return true;
    return invalid(name, v, "a boolean (1/0, yes/no, on/off, true/false)");
  }

  // An integer within [lo, hi] (expected: "an integer from LO to HI").
  template <typename Int>
  bool read_int(const char* name, Int lo, Int hi, Int* out) const {
    std::string v = text(name);
    long long n = 0;
    if (v.empty()) return true;
    if (parse_int(v, static_cast<long long>(lo), static_cast<long long>(hi), &n)) {
      *out = static_cast<Int>(n);
      return true;
    }
    return invalid(name, v, "an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  }

  // A size within [lo, hi]; want says what is expected (default: "a size from LO to HI").
  bool read_size(const char* name, size_t lo, size_t hi, size_t* out,
                 const char* want = nullptr) const {
    std::string v = text(name);
    size_t n = 0;
    if (v.empty()) return true;
    if (parse_size(v, &n) && n >= lo && n <= hi) {
      *out = n;
      return true;
    }
    return invalid(name, v,
                   want != nullptr ? std::string(want)
                                   : "a size from " + format_size(lo) + " to " + format_size(hi));
  }

  // A comma-separated list of at most max_items non-empty items; want says what is expected
  // (default: "a comma-separated list of up to N items").
  bool read_list(const char* name, size_t max_items, std::vector<std::string>* out,
                 const char* want = nullptr) const {
    std::string v = text(name);
    std::vector<std::string> items;
    if (v.empty()) return true;
    if (parse_list(v, &items) && items.size() <= max_items) {
      *out = std::move(items);
      return true;
    }
    return invalid(name, v,
                   want != nullptr
                       ? std::string(want)
                       : "a comma-separated list of up to " + std::to_string(max_items) + " items");
  }

  // One of choices, in any case; *out is the index of the one given (expected: "a, b or c").
  bool read_choice(const char* name, std::initializer_list<const char*> choices, int* out) const {
    std::string v = text(name);
    if (v.empty()) return true;
    int i = 0;
    for (const char* c : choices) {
      if (config_detail::iequal(v, c)) {
        *out = i;
        return true;
      }
      ++i;
    }
    std::string want;
    i = 0;
    for (const char* c : choices) {
      if (i > 0) want += (i + 1 == static_cast<int>(choices.size())) ? " or " : ", ";
      want += c;
      ++i;
    }
    return invalid(name, v, want);
  }

  // Logs `invalid NAME="value": expected WANT` as an error; returns false. For checks of the
  // plugin's own (a power of two, a limit that depends on another variable).
  bool invalid(const char* name, const std::string& value, const std::string& want) const {
    log_.write(HMC_LOG_ERROR, "invalid %s=\"%s\": expected %s", name, value.c_str(), want.c_str());
    return false;
  }

 private:
  const hmc_host_services_t* host_;
  const Log& log_;
};

}  // namespace hmc::plugin

#endif /* HMC_PLUGIN_CONFIG_HPP */
