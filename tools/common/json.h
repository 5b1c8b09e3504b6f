// The tools' JSON, written by nlohmann-json (Debian: nlohmann-json3-dev) in the order fields are
// set. A value the tool does not know is null, never 0 or "".
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace hmc_tools {

using Json = nlohmann::ordered_json;

// v, or null when it is the "unknown" value of its field (0, -1, "").
template <typename T>
Json or_null(const T& v, const T& unknown) {
  return v == unknown ? Json(nullptr) : Json(v);
}
inline Json or_null(const std::string& s) {
  return s.empty() ? Json(nullptr) : Json(s);
}

// v rounded to `decimals` places; null when not measured (negative) or not finite.
inline Json json_number(double v, int decimals) {
  if (v < 0 || !std::isfinite(v)) return nullptr;
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

}  // namespace hmc_tools
