// The rendezvous store's protocol (coll/store.h), without the sockets: a request is op (u8), key
// and value lengths (u32 each, little-endian as the hosts are), key, value; a reply is found
// (u8), value length (u32), value. What the server does with a request is here too, so that the
// bytes a client sends can be fuzzed through all of it (tests/fuzz/store).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace hmc::coll::store_wire {

enum : uint8_t { kSet = 1, kGet = 2, kClaim = 3 };
constexpr size_t kRequestHead = 9, kReplyHead = 5;
constexpr uint32_t kMaxField = 1u << 20;

struct Request {
  uint8_t op = 0;
  std::string key, value;
};

std::string encode_request(uint8_t op, const std::string& key, const std::string& value);

enum class Take {
  kOk,         // *out is the first request; its bytes are gone from the front of *in
  kNeedMore,   // no whole request yet
  kMalformed,  // a length over kMaxField
  kUnknownOp,  // a whole request of an unknown op (removed from *in)
};
Take take_request(std::string* in, Request* out);

// Applies a request to the store's data; the reply's bytes.
std::string serve(const Request& req, std::map<std::string, std::string>* data);

std::string encode_reply(bool found, const std::string& value);
// The head of a reply (kReplyHead bytes): whether the key was found, and the length of the value
// that follows. False when that length is over kMaxField.
bool decode_reply_head(const char* head, bool* found, uint32_t* len);

}  // namespace hmc::coll::store_wire
