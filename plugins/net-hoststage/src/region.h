// Registered memory regions of one context, and the packed remote key peers use to name them.
// The owner of a region checks every one-sided access against this table before touching a
// byte: the key must name a live region, [addr, addr+len) must lie inside it and its access
// flags must allow the operation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "hmc/plugin/net.h"

namespace hmc::hoststage {

class Context;

struct Region {
  uint64_t key;
  uint64_t base;
  uint64_t len;
  uint32_t access;  // HMC_NET_ACCESS_*
};

// The local handle reg_mr returns (hmc_net_mr_t).
struct MemRegion {
  uint64_t key;
};

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
  const Region& add(uint64_t base, uint64_t len, uint32_t access);
  void remove(uint64_t key) { regions_.erase(key); }
  bool empty() const { return regions_.empty(); }

  // The local address for [addr, addr+len) when key names a live region that contains it and
  // allows `need` (HMC_NET_ACCESS_REMOTE_READ or _WRITE); nullptr otherwise.
  uint8_t* check(uint64_t key, uint64_t addr, uint64_t len, uint32_t need) const;

 private:
  std::unordered_map<uint64_t, Region> regions_;
};

}  // namespace hmc::hoststage
