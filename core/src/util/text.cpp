#include "util/text.h"

#include <cstring>

namespace hmc {

bool copy_cut(char* dst, size_t cap, std::string_view src) {
  if (src.size() < cap) {
    memcpy(dst, src.data(), src.size());
    dst[src.size()] = '\0';
    return false;
  }
  size_t n = cap - 1 - kCutMark.size();
  // Not inside a multi-byte character: back up over continuation bytes (10xxxxxx).
  while (n > 0 && (static_cast<unsigned char>(src[n]) & 0xC0) == 0x80) --n;
  memcpy(dst, src.data(), n);
  memcpy(dst + n, kCutMark.data(), kCutMark.size());
  dst[n + kCutMark.size()] = '\0';
  return true;
}

}  // namespace hmc
