// What the Redis rendezvous (coll/redis_rendezvous.cpp) does with what the server answers,
// without the connection: hiredis parses the bytes into a redisReply, convert() takes it from
// there, and the values the rendezvous keeps under its keys are read by the functions below
// (the member records by decode_member, coll/bootstrap.h). Built with hiredis only.
#pragma once

#ifdef HMC_HAVE_HIREDIS

#include <cstdint>
#include <string>
#include <vector>

struct redisReply;
struct redisReader;

namespace hmc::coll::redis {

struct Reply {
  bool nil = true;
  long long integer = 0;
  std::string str;
  std::vector<Reply> items;
};

void convert(const redisReply* r, Reply* out);

// The most elements an array reply may announce: the rendezvous' longest command (DEL of three
// keys a rank) has far fewer. hiredis allocates an array's table when it reads its count, so a
// server announcing 2^31 elements would have it allocate 16 GiB at once; a reader bounded by
// bound_replies() fails such a reply ("Out of memory") instead, which fails the command.
constexpr int kMaxReplyElements = 1 << 20;
void bound_replies(redisReader* reader);

// <prefix>/open's value, "<generation>\n<size>\n<rank 0>": its generation, false when it has
// none (malformed, or not positive).
bool open_generation(const std::string& open_value, uint64_t* generation);
// The same value for the message naming who holds it: its generation's text and its rank 0.
void open_holder(const std::string& held, std::string* generation, std::string* holder);
// <prefix>/gen/<g>/failed's value, "<status>\n<text>": rank 0's verdict on a failed join. A
// value of another shape is all text, with HMC_ERR_TIMEOUT; one whose status is no hmc error
// (success among them) is HMC_ERR_PROTOCOL.
void failed_verdict(const std::string& value, int64_t* code, std::string* text);

}  // namespace hmc::coll::redis

#endif
