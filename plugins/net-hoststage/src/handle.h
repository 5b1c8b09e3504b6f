// The connection handle a listener writes and a connector reads (at most HMC_NET_HANDLE_MAX
// bytes, carried by the core's control plane):
//   u8 version | u8 device | u16 reserved | u64 nonce
//   tcp: u8 count | count x (u32 IPv4 address, network order | u16 port, network order)
//   shm: u32 pid | u8 name length | name (abstract Unix socket name, without the leading NUL)
// Multi-byte integers other than address and port are little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hmc::hoststage {

enum class DevKind : uint8_t { kTcp = 0, kShm = 1 };

struct TcpAddr {
  uint32_t ip_be;  // network order
  uint16_t port;   // host order
};

struct ConnHandle {
  DevKind dev = DevKind::kTcp;
  uint64_t nonce = 0;
  std::vector<TcpAddr> addrs;  // tcp, 1..kMaxHandleAddrs
  uint32_t pid = 0;            // shm
  std::string unix_name;       // shm, 1..kMaxUnixName bytes
};

constexpr size_t kMaxHandleAddrs = 16;
constexpr size_t kMaxUnixName = 100;

// Returns the encoded length, or 0 when it does not fit in cap.
size_t encode_handle(const ConnHandle& h, uint8_t* out, size_t cap);
// False (with *why set) on anything malformed.
bool decode_handle(const uint8_t* in, size_t len, ConnHandle* h, std::string* why);

std::string ip_to_string(uint32_t ip_be);

}  // namespace hmc::hoststage
