#include "region.h"

#include <cstring>

#include "wire.h"

namespace hmc::ucx {

namespace {

constexpr uint32_t kRkeyMagic = 0x4b585548;  // "HUXK"
constexpr uint8_t kRkeyVersion = 1;

uint64_t checksum(const uint8_t* head, const uint8_t* ucx, size_t ucx_len) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      h ^= p[i];
      h *= 0x100000001b3ull;
    }
  };
  mix(head, 24);
  mix(ucx, ucx_len);
  return h;
}

}  // namespace

size_t pack_rkey(const MemRegion& r, const void* ucx_key, size_t ucx_len, void* out, size_t cap) {
  size_t n = kRkeyHeader + ucx_len;
  if (n > cap || ucx_len > 0xffff) return 0;
  auto* p = static_cast<uint8_t*>(out);
  wire::put_u32(p, kRkeyMagic);
  p[4] = kRkeyVersion;
  p[5] = static_cast<uint8_t>(r.access);
  wire::put_u16(p + 6, static_cast<uint16_t>(ucx_len));
  wire::put_u64(p + 8, r.base);
  wire::put_u64(p + 16, r.len);
  if (ucx_len > 0) std::memcpy(p + kRkeyHeader, ucx_key, ucx_len);
  wire::put_u64(p + 24, checksum(p, p + kRkeyHeader, ucx_len));
  return n;
}

RkeyParse parse_rkey(const void* blob, size_t n, ParsedRkey* out, std::string* why) {
  const auto* p = static_cast<const uint8_t*>(blob);
  if (n < kRkeyHeader || wire::get_u32(p) != kRkeyMagic) {
    *why = "not a ucx plugin remote key (" + std::to_string(n) + " bytes)";
    return RkeyParse::kInvalid;
  }
  if (p[4] != kRkeyVersion) {
    *why = "remote key format " + std::to_string(p[4]) + ", this plugin reads format " +
           std::to_string(kRkeyVersion);
    return RkeyParse::kInvalid;
  }
  size_t ucx_len = wire::get_u16(p + 6);
  if (kRkeyHeader + ucx_len != n) {
    *why = "remote key of " + std::to_string(n) + " bytes announces " + std::to_string(ucx_len) +
           " bytes of UCX key";
    return RkeyParse::kInvalid;
  }
  out->access = p[5];
  out->base = wire::get_u64(p + 8);
  out->len = wire::get_u64(p + 16);
  out->ucx = p + kRkeyHeader;
  out->ucx_len = ucx_len;
  if (wire::get_u64(p + 24) != checksum(p, p + kRkeyHeader, ucx_len)) return RkeyParse::kCorrupt;
  return RkeyParse::kOk;
}

}  // namespace hmc::ucx
