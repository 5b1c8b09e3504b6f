// What this plugin's peers exchange outside user messages, byte for byte (little-endian):
//
// connection handle (listen -> the core's control plane -> connect), at most 256 bytes:
//   u32 magic "HUXL" | u8 version | u8 flags | u16 listener id | u64 nonce | u16 address length
//   | UCP worker address
// hello (tag Ctrl::kHello to the listener id):
//   u32 magic "HUXH" | u16 version | u16 connector rx id | u64 nonce | identity (28 bytes)
//   | u32 address length | UCP worker address
// welcome (tag Ctrl::kWelcome to the connector's rx id):
//   u32 magic "HUXW" | u16 version | u16 listener id | u64 nonce | identity
// bye (tag Ctrl::kBye to the peer's rx id):
//   u32 magic "HUXB" | u16 version | u16 zero | u64 nonce
// identity: u64 boot | u64 pidns | u64 start | u32 pid
//
// The nonce is random per listener: it ties hello, welcome and bye to one connection, so a
// message left over from an earlier connection that used the same ids is recognised and dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "identity.h"

namespace hmc::ucx::wire {

constexpr uint8_t kVersion = 1;
constexpr uint32_t kHandleMagic = 0x4c585548;   // "HUXL"
constexpr uint32_t kHelloMagic = 0x48585548;    // "HUXH"
constexpr uint32_t kWelcomeMagic = 0x57585548;  // "HUXW"
constexpr uint32_t kByeMagic = 0x42585548;      // "HUXB"
constexpr size_t kHandleHeader = 18;
constexpr size_t kIdentitySize = 28;
constexpr size_t kHelloHeader = 16 + kIdentitySize + 4;
constexpr size_t kWelcomeSize = 16 + kIdentitySize;
constexpr size_t kByeSize = 16;
// Flags in the handle.
constexpr uint8_t kHandleNetOnly = 1;  // the address lists network transports only

struct Handle {
  uint8_t flags = 0;
  uint16_t listener_id = 0;
  uint64_t nonce = 0;
  const uint8_t* address = nullptr;  // points into the decoded buffer
  size_t address_len = 0;
};

struct Hello {
  uint16_t rx_id = 0;
  uint64_t nonce = 0;
  ProcessIdentity who;
  const uint8_t* address = nullptr;
  size_t address_len = 0;
};

struct Welcome {
  uint16_t listener_id = 0;
  uint64_t nonce = 0;
  ProcessIdentity who;
};

// Writes the handle into out (capacity `cap`); returns its length, or 0 when it does not fit.
size_t encode_handle(const Handle& h, uint8_t* out, size_t cap);
bool decode_handle(const uint8_t* p, size_t n, Handle* out, std::string* why);

void encode_hello(const Hello& h, std::vector<uint8_t>* out);
bool decode_hello(const uint8_t* p, size_t n, Hello* out, std::string* why);

void encode_welcome(const Welcome& w, std::vector<uint8_t>* out);
bool decode_welcome(const uint8_t* p, size_t n, Welcome* out, std::string* why);

void encode_bye(uint64_t nonce, std::vector<uint8_t>* out);
// The nonce of a bye, or false when p is not one.
bool decode_bye(const uint8_t* p, size_t n, uint64_t* nonce);

// Little-endian field access, shared with the remote-key format.
inline void put_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint16_t get_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}
inline uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace hmc::ucx::wire
