#include "region.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

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

const Region& RegionTable::add(uint64_t base, uint64_t len, uint32_t access, uint8_t* local) {
  uint64_t key = random_u64();
  while (regions_.count(key) != 0) key = random_u64();
  Region& r = regions_[key];
  r = Region{key, base, len, access,
             local ? local : reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(base))};
  return r;
}

bool RegionTable::check_local(uint64_t key, const uint8_t* local, uint64_t len,
                              uint32_t need) const {
  auto it = regions_.find(key);
  if (it == regions_.end() || local < it->second.local) return false;
  const Region& r = it->second;
  return check(key, r.base + static_cast<uint64_t>(local - r.local), len, need) != nullptr;
}

MemRegion::~MemRegion() {
  if (map) munmap(map, map_len);
}

const void* MemRegion::local_of(const void* buf, size_t n) const {
  const uintptr_t a = reinterpret_cast<uintptr_t>(buf);
  if (!local || a < base || a - base > len || n > len - (a - base)) return buf;
  return local + (a - base);
}

bool map_dmabuf(int fd, uint64_t offset, size_t len, MemRegion* m, std::string* why) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const size_t map_len = static_cast<size_t>(offset - start) + len;
  void* p =
      mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(start));
  if (p == MAP_FAILED) {
    *why = std::string("mmap of the dma-buf failed: ") + strerror(errno);
    return false;
  }
  m->map = p;
  m->map_len = map_len;
  m->local = static_cast<uint8_t*>(p) + (offset - start);
  return true;
}

uint8_t* RegionTable::check(uint64_t key, uint64_t addr, uint64_t len, uint32_t need) const {
  const Region* r = find(key);
  return r == nullptr ? nullptr : r->place(addr, len, need);
}

}  // namespace hmc::hoststage
