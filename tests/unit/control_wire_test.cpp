// Writer/Reader of core/src/control/wire.h: layout, round trips, and that no truncated or
// lying input is ever read past its end or allocated from.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "control/wire.h"

using namespace hmc::control;

namespace {

Writer sample() {
  Writer w;
  w.u8(0xAB);
  w.u16(0xBEEF);
  w.u32(0xDEADBEEF);
  w.u64(0x0123456789ABCDEFull);
  w.i32(-42);
  w.i64(std::numeric_limits<int64_t>::min());
  w.boolean(true);
  const uint8_t raw[3] = {7, 8, 9};
  w.bytes(raw, sizeof raw);
  w.str("hello");
  w.blob(std::vector<uint8_t>{1, 2, 3, 4});
  w.str("");
  return w;
}

// Reads everything sample() wrote; true when every field matched.
bool read_sample(Reader& r) {
  uint8_t a = 0;
  uint16_t b = 0;
  uint32_t c = 0;
  uint64_t d = 0;
  int32_t e = 0;
  int64_t f = 0;
  bool g = false;
  uint8_t raw[3] = {};
  std::string s, empty = "x";
  std::vector<uint8_t> blob;
  r.u8(&a);
  r.u16(&b);
  r.u32(&c);
  r.u64(&d);
  r.i32(&e);
  r.i64(&f);
  r.boolean(&g);
  r.bytes(raw, 3);
  r.str(&s, 64);
  r.blob(&blob, 64);
  r.str(&empty, 64);
  return r.ok() && a == 0xAB && b == 0xBEEF && c == 0xDEADBEEF && d == 0x0123456789ABCDEFull &&
         e == -42 && f == std::numeric_limits<int64_t>::min() && g && raw[0] == 7 && raw[2] == 9 &&
         s == "hello" && blob == std::vector<uint8_t>{1, 2, 3, 4} && empty.empty();
}

}  // namespace

TEST(ControlWire, LittleEndianLayout) {
  Writer w;
  w.u16(0x1122);
  w.u32(0x33445566);
  w.u64(0x778899AABBCCDDEEull);
  w.str("ab");
  const std::vector<uint8_t> expected = {0x22, 0x11, 0x66, 0x55, 0x44, 0x33, 0xEE, 0xDD, 0xCC, 0xBB,
                                         0xAA, 0x99, 0x88, 0x77, 2,    0,    0,    0,    'a',  'b'};
  EXPECT_EQ(w.data(), expected);
  EXPECT_EQ(w.size(), expected.size());
}

TEST(ControlWire, RoundTrip) {
  Writer w = sample();
  Reader r(w.data());
  EXPECT_TRUE(read_sample(r));
  EXPECT_TRUE(r.done());
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(r.position(), w.size());
}

TEST(ControlWire, EveryTruncationFailsAndSticks) {
  Writer w = sample();
  for (size_t n = 0; n < w.size(); ++n) {
    std::vector<uint8_t> cut(w.data().begin(), w.data().begin() + n);
    Reader r(cut.data(), cut.size());
    EXPECT_FALSE(read_sample(r)) << "prefix of " << n << " bytes";
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.remaining(), 0u);
    uint8_t x;
    EXPECT_FALSE(r.u8(&x)) << "a failed reader must stay failed";
  }
}

TEST(ControlWire, FailedReadLeavesOutputAndStaysFailed) {
  const uint8_t data[6] = {1, 2, 3, 4, 5, 6};
  Reader r(data, sizeof data);
  uint64_t v = 77;
  EXPECT_FALSE(r.u64(&v));
  EXPECT_EQ(v, 77u);
  // Two bytes would be there, but the reader already failed.
  uint16_t s = 5;
  EXPECT_FALSE(r.u16(&s));
  EXPECT_EQ(s, 5u);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.done());
}

TEST(ControlWire, LengthPrefixesCannotLie) {
  // A length of 4 GiB - 1 with 3 bytes behind it: must fail without allocating 4 GiB.
  Writer w;
  w.u32(0xFFFFFFFFu);
  w.bytes("abc", 3);
  {
    Reader r(w.data());
    std::string s;
    EXPECT_FALSE(r.str(&s, std::numeric_limits<size_t>::max()));
    EXPECT_TRUE(s.empty());
  }
  {
    Reader r(w.data());
    std::vector<uint8_t> b;
    EXPECT_FALSE(r.blob(&b, std::numeric_limits<size_t>::max()));
    EXPECT_TRUE(b.empty());
  }
  // A truthful length above the caller's limit fails too.
  Writer w2;
  w2.str("0123456789");
  Reader r2(w2.data());
  std::string s;
  EXPECT_FALSE(r2.str(&s, 9));
  Reader r3(w2.data());
  EXPECT_TRUE(r3.str(&s, 10));
  EXPECT_EQ(s, "0123456789");
}

TEST(ControlWire, BooleanAcceptsOnlyZeroOrOne) {
  const uint8_t data[3] = {0, 1, 2};
  Reader r(data, sizeof data);
  bool b = true;
  EXPECT_TRUE(r.boolean(&b));
  EXPECT_FALSE(b);
  EXPECT_TRUE(r.boolean(&b));
  EXPECT_TRUE(b);
  EXPECT_FALSE(r.boolean(&b));
  EXPECT_FALSE(r.ok());
}

TEST(ControlWire, SkipAndSetFailed) {
  const uint8_t data[4] = {1, 2, 3, 4};
  Reader r(data, sizeof data);
  EXPECT_TRUE(r.skip(3));
  EXPECT_EQ(r.remaining(), 1u);
  EXPECT_FALSE(r.skip(2));
  EXPECT_FALSE(r.ok());
  Reader r2(data, sizeof data);
  r2.set_failed();
  uint8_t x;
  EXPECT_FALSE(r2.u8(&x));
}

TEST(ControlWire, NullBufferIsEmpty) {
  Reader r(nullptr, 100);
  EXPECT_EQ(r.remaining(), 0u);
  uint8_t x;
  EXPECT_FALSE(r.u8(&x));
  Reader r0(nullptr, 0);
  EXPECT_TRUE(r0.done());
}
