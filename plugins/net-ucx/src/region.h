// Registered memory (hmc_net_mr_t) and unpacked remote keys (hmc_net_rkey_t).
//
// Remote key format (little-endian), at most HMC_NET_RKEY_MAX bytes:
//   u32 magic "HUXK" | u8 version | u8 access | u16 UCX key length | u64 base | u64 length
//   | u64 check | UCX packed rkey (ucp_rkey_pack)
// `check` is a 64-bit FNV-1a over everything else. It detects corruption, not forgery.
//
// Where one-sided access is checked (see README.md, "One-sided access"): UCX does not confine
// puts and gets to the registered range on its tcp and shared-memory transports (tcp and cma
// write wherever the address points in the target process). So the initiator checks every
// iput/iget against the base, length and access flags packed in the key before posting, and
// ends refused operations with HMC_PLUGIN_ERR_REMOTE without touching either side's memory. On
// RDMA transports the NIC additionally enforces the registered range through the memory key.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace hmc::ucx {

class Context;
class Endpoint;

constexpr size_t kRkeyHeader = 32;

struct MemRegion {
  ucp_mem_h memh = nullptr;  // null for zero-length regions
  uint64_t base = 0;
  uint64_t len = 0;
  uint32_t access = 0;
};

struct RemoteKey {
  Context* ctx = nullptr;     // whose registry (Context::rkeys) holds it
  Endpoint* ep = nullptr;     // the endpoint it was unpacked on; null once that one closed
  ucp_rkey_h rkey = nullptr;  // null for zero-length regions, corrupt keys, or after close
  uint64_t base = 0;
  uint64_t len = 0;
  uint32_t access = 0;
  bool corrupt = false;  // failed its check: every operation is refused
};

// Builds the packed key into out (capacity cap); returns its length, or 0 when it does not fit.
size_t pack_rkey(const MemRegion& r, const void* ucx_key, size_t ucx_len, void* out, size_t cap);

enum class RkeyParse { kOk, kCorrupt, kInvalid };
struct ParsedRkey {
  uint64_t base = 0;
  uint64_t len = 0;
  uint32_t access = 0;
  const uint8_t* ucx = nullptr;
  size_t ucx_len = 0;
};
// kInvalid: not a ucx plugin key at all (*why says why); kCorrupt: the right shape, but its
// check fails (out is still filled); kOk.
RkeyParse parse_rkey(const void* blob, size_t n, ParsedRkey* out, std::string* why);

// Whether [addr, addr + len) lies inside the key's region and the access is granted.
inline bool rkey_allows(const RemoteKey& k, uint64_t addr, size_t len, uint32_t access) {
  if (k.corrupt || (k.access & access) != access) return false;
  if (addr < k.base) return false;
  uint64_t off = addr - k.base;
  return off <= k.len && len <= k.len - off;
}

}  // namespace hmc::ucx
