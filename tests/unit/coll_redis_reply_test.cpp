// What the Redis rendezvous does with a server's replies (core/src/coll/redis_reply.h): a
// reader bounded as on its connection, and the readings of its keys' values. The same code is
// fuzzed by tests/fuzz/redis, whose findings these pin down.
#include <gtest/gtest.h>

#include "coll/redis_reply.h"
#include "hmc/hmc.h"

#ifdef HMC_HAVE_HIREDIS

#include <hiredis/hiredis.h>

#include <string>

namespace hmc::coll::redis {
namespace {

// Feeds text to a bounded reader: REDIS_OK with the reply (or none yet), or REDIS_ERR.
int read_one(const std::string& text, Reply* out, bool* got) {
  redisReader* r = redisReaderCreate();
  bound_replies(r);
  redisReaderFeed(r, text.data(), text.size());
  void* reply = nullptr;
  int rc = redisReaderGetReply(r, &reply);
  *got = reply != nullptr;
  if (reply) {
    convert(static_cast<redisReply*>(reply), out);
    freeReplyObject(reply);
  }
  redisReaderFree(r);
  return rc;
}

// An array's count is refused before hiredis allocates its table (a count of 2^30 made it
// calloc 8 GiB at once; found by tests/fuzz/redis).
TEST(RedisReply, HugeArrayCountIsRefused) {
  Reply r;
  bool got = false;
  EXPECT_EQ(read_one("*1088776654\r\n", &r, &got), REDIS_ERR);
  EXPECT_FALSE(got);
  EXPECT_EQ(read_one("*" + std::to_string(kMaxReplyElements + 1) + "\r\n", &r, &got), REDIS_ERR);
  // Up to the bound, arrays are read as usual.
  ASSERT_EQ(read_one("*3\r\n$1\r\na\r\n$-1\r\n:5\r\n", &r, &got), REDIS_OK);
  ASSERT_TRUE(got);
  ASSERT_EQ(r.items.size(), 3u);
  EXPECT_EQ(r.items[0].str, "a");
  EXPECT_TRUE(r.items[1].nil);
  EXPECT_EQ(r.items[2].integer, 5);
  EXPECT_EQ(read_one("*" + std::to_string(kMaxReplyElements) + "\r\n", &r, &got), REDIS_OK);
  EXPECT_FALSE(got) << "the elements have not arrived";
}

// A verdict is rank 0's error: success, or a number that is no hmc error, is a malformed
// record (a follower returned success from hmc_comm_create with no members; found by
// tests/fuzz/redis).
TEST(RedisReply, VerdictIsAlwaysAnHmcError) {
  int64_t code = 0;
  std::string text;
  failed_verdict("-7\nrank 1 did not join within 100 ms", &code, &text);
  EXPECT_EQ(code, HMC_ERR_TIMEOUT);
  EXPECT_EQ(text, "rank 1 did not join within 100 ms");
  failed_verdict("-15\nno path", &code, &text);
  EXPECT_EQ(code, HMC_ERR_NO_PATH);
  failed_verdict("no code at all", &code, &text);
  EXPECT_EQ(code, HMC_ERR_TIMEOUT);
  EXPECT_EQ(text, "no code at all");
  for (const char* v : {"0\nall is well", "99999\nbroken", "-20\nbeyond the last error"}) {
    failed_verdict(v, &code, &text);
    EXPECT_EQ(code, HMC_ERR_PROTOCOL) << v;
    EXPECT_NE(text.find("malformed"), std::string::npos) << text;
  }
}

TEST(RedisReply, OpenValue) {
  uint64_t gen = 0;
  EXPECT_TRUE(open_generation("7\n2\ncontext 11 (pid 4 on a)", &gen));
  EXPECT_EQ(gen, 7u);
  EXPECT_FALSE(open_generation("0\n2\nx", &gen));
  EXPECT_FALSE(open_generation("-3\n2\nx", &gen));
  EXPECT_FALSE(open_generation("", &gen));
  std::string generation, holder;
  open_holder("7\n2\ncontext 11 (pid 4 on a)", &generation, &holder);
  EXPECT_EQ(generation, "7");
  EXPECT_EQ(holder, "context 11 (pid 4 on a)");
  open_holder("no newline", &generation, &holder);
  EXPECT_EQ(generation, "no newline");
  EXPECT_EQ(holder, "no newline");
}

}  // namespace
}  // namespace hmc::coll::redis

#else

TEST(RedisReply, BuiltWithoutHiredis) {
  GTEST_SKIP() << "hmc was built without hiredis";
}

#endif
