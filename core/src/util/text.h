// Text into the C API's fixed-size fields (hmc_plugin_info_t's reason, ...).
#pragma once

#include <cstddef>
#include <string_view>

namespace hmc {

// The mark that ends a text cut to fit its field.
constexpr std::string_view kCutMark = "...";

// Copies src into dst[cap] (cap >= 4), always NUL-terminated. A text longer than cap - 1 bytes
// is cut at a UTF-8 character boundary and ends with kCutMark, so that a reader can tell it was
// cut. Returns whether it was cut.
bool copy_cut(char* dst, size_t cap, std::string_view src);

}  // namespace hmc
