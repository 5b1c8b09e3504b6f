// Registered memory regions of one context, and the packed remote key peers use to name them.
// The owner of a region checks every one-sided access against this table before touching a
// byte: the key must name a live region, [addr, addr+len) must lie inside it and its access
// flags must allow the operation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "hmc/plugin/net.h"

namespace hmc::hoststage {

class Context;

struct Region {
  uint64_t key;
  uint64_t base;
  uint64_t len;
  uint32_t access;  // HMC_NET_ACCESS_*
  uint8_t* local;   // where the bytes of base are in this process: base itself, or a mapping

  // The local address for [addr, addr+n) when it lies inside and `need` is granted; else
  // nullptr.
  uint8_t* place(uint64_t addr, uint64_t n, uint32_t need) const {
    if ((access & need) != need) return nullptr;
    // Overflow-safe containment: base <= addr and addr + n <= base + len.
    if (addr < base || n > len || addr - base > len - n) return nullptr;
    return local + (addr - base);
  }
};

// The local handle reg_mr returns (hmc_net_mr_t). Device memory registered by dma-buf is mapped
// into this process (map): its bytes are read and written there, not at base.
struct MemRegion {
  uint64_t key;
  uint64_t base = 0;
  uint64_t len = 0;
  void* map = nullptr;  // the mmap of the dma-buf, or nullptr
  size_t map_len = 0;
  uint8_t* local = nullptr;  // the mapped address of base
  ~MemRegion();
  MemRegion(uint64_t k) : key(k) {}
  MemRegion(const MemRegion&) = delete;
  MemRegion& operator=(const MemRegion&) = delete;
  // Where [buf, buf+len) is in this process: its mapping when this is a mapped region that
  // contains it, else buf.
  const void* local_of(const void* buf, size_t len) const;
};

// Maps len bytes of a dma-buf at offset (any alignment). False with *why when the exporter does
// not let the CPU map it (GPU dma-bufs usually do not).
bool map_dmabuf(int fd, uint64_t offset, size_t len, MemRegion* m, std::string* why);

// The handle rkey_unpack returns (hmc_net_rkey_t).
struct RemoteKey {
  uint64_t key;
  uint64_t base;
  uint64_t len;
  Context* ctx;  // whose bookkeeping set holds it (finalize frees keys never released)
};

// Packed remote key: u32 magic | u32 version | u64 key | u64 base | u64 len (little-endian host
// order, as the rest of the protocol).
constexpr size_t kPackedRkeyBytes = 32;
constexpr uint32_t kRkeyMagic = 0x4b525348u;  // "HSRK"

size_t pack_rkey(const Region& r, void* out);
bool unpack_rkey(const void* in, size_t len, RemoteKey* out);

class RegionTable {
 public:
  // Adds a region under a fresh random key (never 0, never reused while live).
  const Region& add(uint64_t base, uint64_t len, uint32_t access, uint8_t* local = nullptr);
  void remove(uint64_t key) { regions_.erase(key); }
  bool empty() const { return regions_.empty(); }

  // The local address for [addr, addr+len) when key names a live region that contains it and
  // allows `need` (HMC_NET_ACCESS_REMOTE_READ or _WRITE); nullptr otherwise.
  uint8_t* check(uint64_t key, uint64_t addr, uint64_t len, uint32_t need) const;
  // The live region of key, or nullptr (many accesses through one key look it up once).
  const Region* find(uint64_t key) const {
    auto it = regions_.find(key);
    return it == regions_.end() ? nullptr : &it->second;
  }
  // The same for a local address check returned earlier (a transfer re-checking its region).
  bool check_local(uint64_t key, const uint8_t* local, uint64_t len, uint32_t need) const;

 private:
  std::unordered_map<uint64_t, Region> regions_;
};

}  // namespace hmc::hoststage
