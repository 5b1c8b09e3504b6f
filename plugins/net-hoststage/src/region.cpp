#include "region.h"

#include <cstring>

#include "util.h"

namespace hmc::hoststage {

size_t pack_rkey(const Region& r, void* out) {
  auto* p = static_cast<uint8_t*>(out);
  uint32_t magic = kRkeyMagic, version = 1;
  std::memcpy(p, &magic, 4);
  std::memcpy(p + 4, &version, 4);
  std::memcpy(p + 8, &r.key, 8);
  std::memcpy(p + 16, &r.base, 8);
  std::memcpy(p + 24, &r.len, 8);
  return kPackedRkeyBytes;
}

bool unpack_rkey(const void* in, size_t len, RemoteKey* out) {
  if (in == nullptr || len != kPackedRkeyBytes) return false;
  const auto* p = static_cast<const uint8_t*>(in);
  uint32_t magic = 0, version = 0;
  std::memcpy(&magic, p, 4);
  std::memcpy(&version, p + 4, 4);
  if (magic != kRkeyMagic || version != 1) return false;
  std::memcpy(&out->key, p + 8, 8);
  std::memcpy(&out->base, p + 16, 8);
  std::memcpy(&out->len, p + 24, 8);
  return true;
}

const Region& RegionTable::add(uint64_t base, uint64_t len, uint32_t access) {
  uint64_t key = random_u64();
  while (regions_.count(key) != 0) key = random_u64();
  Region& r = regions_[key];
  r = Region{key, base, len, access};
  return r;
}

uint8_t* RegionTable::check(uint64_t key, uint64_t addr, uint64_t len, uint32_t need) const {
  auto it = regions_.find(key);
  if (it == regions_.end()) return nullptr;
  const Region& r = it->second;
  if ((r.access & need) != need) return nullptr;
  // Overflow-safe containment: base <= addr and addr + len <= base + r.len.
  if (addr < r.base || len > r.len || addr - r.base > r.len - len) return nullptr;
  return reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(addr));
}

}  // namespace hmc::hoststage
