// Redis replies as the Redis rendezvous reads them (coll/redis_reply.h): the bytes a server sent
// go through hiredis' reader, as on the rendezvous' connection, in pieces of data-dependent
// sizes; every reply it parses is converted the way the rendezvous converts it, and its values
// are read as the rendezvous reads the values of its keys: <prefix>/open (generation and
// holder), a generation's verdict, the member records of MGET (with the address in each).
#include <hiredis/hiredis.h>

#include <algorithm>
#include <string>

#include "coll/bootstrap.h"
#include "coll/redis_reply.h"
#include "fuzz_target.h"
#include "peer/address.h"

namespace hmc::fuzz {
namespace {

using coll::redis::Reply;

void value(const std::string& s) {
  uint64_t gen = 0;
  if (coll::redis::open_generation(s, &gen)) HMC_FUZZ_CHECK(gen > 0);
  std::string generation, holder;
  coll::redis::open_holder(s, &generation, &holder);
  HMC_FUZZ_CHECK(generation.size() <= s.size() && holder.size() <= s.size());
  int64_t code = 0;
  std::string text;
  coll::redis::failed_verdict(s, &code, &text);
  // What hmc_comm_create returns: an error of hmc's, never success or a number it has no name for.
  HMC_FUZZ_CHECK(code >= HMC_ERR_INTERNAL && code <= HMC_ERR_INVALID_ARGUMENT);
  coll::Member m;
  int size = 0;
  uint64_t cid = 0;
  if (coll::decode_member(s, &m, &size, &cid)) {
    Address a;
    (void)decode_address(m.address.data(), m.address.size(), &a);
  }
}

void use(const Reply& r, int depth) {
  HMC_FUZZ_CHECK(depth < 16);
  if (!r.nil) value(r.str);
  for (const Reply& item : r.items) use(item, depth + 1);
}

}  // namespace

void fuzz_one(const uint8_t* data, size_t len) {
  redisReader* reader = redisReaderCreate();
  HMC_FUZZ_CHECK(reader != nullptr);
  coll::redis::bound_replies(reader);  // as on the rendezvous' connection
  size_t pos = 0;
  uint32_t h = 2166136261u;  // FNV-1a of the input picks the piece sizes
  for (size_t i = 0; i < len && i < 32; ++i) h = (h ^ data[i]) * 16777619u;
  bool failed = false;
  while (pos < len && !failed) {
    h = h * 1103515245u + 12345u;
    size_t piece = std::min<size_t>(len - pos, 1 + (h >> 16) % 128);
    if (redisReaderFeed(reader, reinterpret_cast<const char*>(data + pos), piece) != REDIS_OK)
      break;
    pos += piece;
    for (;;) {
      void* out = nullptr;
      if (redisReaderGetReply(reader, &out) != REDIS_OK) {
        failed = true;  // the connection is dropped
        break;
      }
      if (!out) break;
      auto* reply = static_cast<redisReply*>(out);
      if (reply->type != REDIS_REPLY_ERROR) {  // an error reply fails the command
        Reply r;
        coll::redis::convert(reply, &r);
        use(r, 0);
      }
      freeReplyObject(reply);
    }
  }
  redisReaderFree(reader);
}

std::vector<Seed> seeds() {
  auto bulk = [](const std::string& s) {
    return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
  };
  // host_id, hostname, pid, context_id, unix_name, tcp_host, tcp_port
  const Address addr{"node-a/0b1c2d3e", "node-a", 4242, 0x1122334455667788ull, "hmc-4242", "", 0};
  coll::Member m{encode_address(addr), addr.context_id, addr.pid, addr.host_id, "cuda"};
  const std::string rec0 = coll::encode_member(m, 2, 0xfeedfacecafebeefull);
  const std::string open = "7\n2\ncontext 1122334455667788 (pid 4242 on node-a/0b1c2d3e)";
  // A follower's join: GET open, SET NX, SET, MGET open failed done info/0 ..., SET got.
  const std::string join = bulk(open) + "+OK\r\n" + "+OK\r\n" + "*4\r\n" + bulk(open) + "$-1\r\n" +
                           "$-1\r\n" + bulk(rec0) + "*4\r\n" + "$-1\r\n" + "$-1\r\n" + bulk("1") +
                           bulk(rec0) + "+OK\r\n";
  // A leader's: INCR, PEXPIRE, SET, SET, EVAL, MGET, EVAL, MGET got, DEL.
  const std::string lead = std::string(":7\r\n") + ":1\r\n" + "+OK\r\n" + "+OK\r\n" + ":1\r\n" +
                           "*1\r\n" + bulk(rec0) + ":1\r\n" + "*1\r\n" + bulk("1") + ":7\r\n";
  // A failed generation, and errors.
  const std::string failed = "*3\r\n$-1\r\n" + bulk("-7\nrank 1 did not join within 100 ms") +
                             "$-1\r\n" + "-NOAUTH Authentication required.\r\n" +
                             "-ERR unknown command\r\n";
  auto of = [](const std::string& s) { return bytes_of(s.data(), s.size()); };
  return {{"follow", of(join)}, {"lead", of(lead)}, {"failed", of(failed)}};
}

}  // namespace hmc::fuzz
