// The layout of every tag this plugin puts on its UCP worker.
//
// UCP matches tagged messages per worker, not per endpoint, and one worker serves every endpoint
// of a context. So that a receive posted on one endpoint only ever matches that peer's messages,
// the receiving endpoint's id (chosen by the receiver, carried to the sender during connection
// setup) travels in the top 16 bits of every tag:
//
//   bits 63..48  rx id of the receiving endpoint, 1..65535 (0: control messages, below)
//   bit  47      0: bits 46..0 are the user's tag as is (user tags below 2^47)
//                1: the user's tag did not fit; bits 46..0 hold a 47-bit hash of it
//   bits 46..0   user tag, or its hash
//
// Every receive is posted with a full 64-bit mask. Tags below 2^47 therefore match exactly. A tag
// of 2^47 or more matches exactly as long as no other such tag with the same 47-bit hash is in
// flight on the same endpoint at the same time (a chance of about 2^-47 per pair of distinct
// tags; the hash is a 64-bit mixer, so structured tags do not collide systematically).
// Endpoints never see each other's messages, whatever the tags.
//
// Control messages (rx id field 0) carry connection setup and teardown:
//   bits 23..16  type (Ctrl)
//   bits 15..0   id of the destination (a listener's or an endpoint's rx id)
#pragma once

#include <cstdint>

namespace hmc::ucx::tags {

constexpr int kIdShift = 48;
constexpr uint64_t kIdMask = 0xffffull << kIdShift;
constexpr uint64_t kWideBit = 1ull << 47;
constexpr uint64_t kFullMask = ~0ull;
constexpr uint32_t kMaxId = 0xffff;

// splitmix64's finalizer, cut to 47 bits.
inline uint64_t hash47(uint64_t v) {
  v ^= v >> 30;
  v *= 0xbf58476d1ce4e5b9ull;
  v ^= v >> 27;
  v *= 0x94d049bb133111ebull;
  v ^= v >> 31;
  return v & (kWideBit - 1);
}

// The UCP tag of a user message to (or expected by) the endpoint whose rx id is `rx_id`.
inline uint64_t data(uint16_t rx_id, uint64_t user_tag) {
  uint64_t low = user_tag < kWideBit ? user_tag : (kWideBit | hash47(user_tag));
  return (static_cast<uint64_t>(rx_id) << kIdShift) | low;
}

enum class Ctrl : uint8_t {
  kHello = 1,    // connector -> listener: who I am, where to reach me
  kWelcome = 2,  // listener -> connector: accepted
  kBye = 3       // either way: this endpoint is being closed
};

inline uint64_t control(Ctrl type, uint16_t dest_id) {
  return (static_cast<uint64_t>(type) << 16) | dest_id;
}

// Probe masks that select every message addressed to one id.
inline uint64_t data_of_id(uint16_t id) {
  return static_cast<uint64_t>(id) << kIdShift;
}
constexpr uint64_t kDataOfIdMask = kIdMask;
constexpr uint64_t kControlOfIdMask = kIdMask | 0xffffull;

}  // namespace hmc::ucx::tags
