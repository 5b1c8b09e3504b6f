// The shared-memory ring of net-hoststage (plugins/net-hoststage/src/ring.h), in one process:
// record order and contents, wrapping at the end, going back to the start when the ring is empty,
// and a producer and a consumer thread streaming records of random sizes through it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "../../plugins/net-hoststage/src/ring.h"

namespace hmc::hoststage {
namespace {

struct Ring {
  explicit Ring(size_t cap) : data(cap, 0) {
    ctl.head.store(0);
    ctl.tail.store(0);
    ctl.consumer_sleeping.store(0);
    ctl.producer_waiting.store(0);
    tx.attach(&ctl, data.data(), cap);
    rx.attach(&ctl, data.data(), cap);
  }
  // Pushes a record whose tag is `tag` and whose payload is len bytes of `fill`.
  bool push(uint64_t tag, size_t len, uint8_t fill) {
    WireHdr h{};
    h.type = kMsgEager;
    h.flags = kFlagPayload;
    h.tag = tag;
    h.len = len;
    std::vector<uint8_t> payload(len, fill);
    return tx.push(h, payload.data(), len);
  }
  // Takes the next record: its tag and the offset of its payload in the ring (-1: none).
  long pop(uint64_t* tag, size_t* len = nullptr) {
    WireHdr h;
    const uint8_t* p = nullptr;
    int r = rx.next(&h, &p);
    if (r <= 0) return r == 0 ? -1 : -2;
    *tag = h.tag;
    if (len) *len = h.len;
    long off = p - data.data();
    rx.advance();
    rx.publish();
    return off;
  }
  RingCtl ctl;
  std::vector<uint8_t> data;
  RingTx tx;
  RingRx rx;
};

constexpr size_t kCap = 64 << 10;

// Pushes 8-byte records tagged first .. last - 1, each followed by one pop whose tag must be
// *next (then incremented). Returns the highest payload offset popped, or -1 (with a failure
// recorded) when a push, a pop or a tag went wrong.
long push_then_pop(Ring& r, uint64_t first, uint64_t last, uint64_t* next) {
  long highest = 0;
  for (uint64_t i = first; i < last; ++i) {
    uint64_t tag = ~0ull;
    long off = -1;
    EXPECT_TRUE(r.push(i, 8, 1)) << "record " << i;
    EXPECT_GE(off = r.pop(&tag), 0) << "record " << i;
    EXPECT_EQ(tag, (*next)++) << "record " << i;
    if (off < 0 || ::testing::Test::HasFailure()) return -1;
    highest = std::max(highest, off);
  }
  return highest;
}

TEST(HoststageRing, RecordsArriveInOrderWithTheirPayload) {
  Ring r(kCap);
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(r.push(i, 8 * i + 1, uint8_t(i)));
  for (uint64_t i = 0; i < 10; ++i) {
    uint64_t tag = ~0ull;
    size_t len = 0;
    long off = r.pop(&tag, &len);
    ASSERT_GE(off, 0);
    EXPECT_EQ(tag, i);
    ASSERT_EQ(len, 8 * i + 1);
    for (size_t b = 0; b < len; ++b) ASSERT_EQ(r.data[size_t(off) + b], uint8_t(i));
  }
  uint64_t tag;
  EXPECT_EQ(r.pop(&tag), -1);
}

TEST(HoststageRing, FullRingRefusesAndTakesAgainOnceDrained) {
  Ring r(kCap);
  size_t pushed = 0;
  while (r.push(pushed, 1000, 7)) ++pushed;
  // 1000 bytes of payload + 64 of header take 1088 bytes: 60 fit in 64 KiB.
  EXPECT_EQ(pushed, kCap / 1088);
  uint64_t tag;
  ASSERT_GE(r.pop(&tag), 0);
  EXPECT_EQ(tag, 0u);
  EXPECT_TRUE(r.push(pushed, 1000, 7));
}

// A ring that is emptied after each record (ping-pong) goes back to its start once the next
// record would enter a new page beyond the first 16 KiB, instead of walking the whole ring.
TEST(HoststageRing, EmptyRingGoesBackToItsWarmStart) {
  Ring r(kCap);
  uint64_t next = 0;
  long highest = push_then_pop(r, 0, 4000, &next);
  ASSERT_GE(highest, 0);
  // Records of 128 bytes: the last one before the rewind starts in the page after 16 KiB.
  EXPECT_LT(highest, long(RingTx::kRewindBytes + RingTx::kPageBytes));
  EXPECT_GE(highest, long(RingTx::kRewindBytes - 128));
}

// A ring with records waiting is used in full: the writer never jumps over unread records.
TEST(HoststageRing, BusyRingIsUsedInFull) {
  Ring r(kCap);
  ASSERT_TRUE(r.push(0, 8, 1));  // one record always waiting
  uint64_t next = 0;
  long highest = push_then_pop(r, 1, 2000, &next);
  ASSERT_GE(highest, 0);
  EXPECT_GE(highest, long(kCap - 128));
}

// The peer initialises the control block: a tail it set off the records' alignment makes the
// ring corrupt, never a read across the ring's end (found by tests/fuzz/hoststage).
TEST(HoststageRing, TailOffTheRecordAlignmentIsCorrupt) {
  for (uint64_t tail : {uint64_t{8}, uint64_t{kCap - 8}, uint64_t{kCap - 1}, ~uint64_t{0}}) {
    Ring r(kCap);
    // What a record would look like at that offset, where it fits.
    const size_t pos = size_t(tail % kCap);
    if (pos + kRecordHeader <= kCap) {
      RecordPrefix pre{64, kRecordMsg};
      std::memcpy(r.data.data() + pos, &pre, sizeof pre);
    }
    r.ctl.tail.store(tail);
    r.ctl.head.store(tail + 64);
    r.rx.attach(&r.ctl, r.data.data(), kCap);
    uint64_t tag = 0;
    EXPECT_EQ(r.pop(&tag), -2) << "tail " << tail;
  }
  // At an aligned tail the same record is read.
  Ring r(kCap);
  RecordPrefix pre{64, kRecordMsg};
  std::memcpy(r.data.data() + 128, &pre, sizeof pre);
  r.ctl.tail.store(128);
  r.ctl.head.store(192);
  r.rx.attach(&r.ctl, r.data.data(), kCap);
  uint64_t tag = 0;
  EXPECT_EQ(r.pop(&tag), 128 + long(kRecordHeader));
}

TEST(HoststageRing, ProducerAndConsumerThreadsStreamRandomSizes) {
  Ring r(kCap);
  constexpr uint64_t kRecords = 200000;
  std::thread producer([&] {
    std::mt19937_64 rng(42);
    for (uint64_t i = 0; i < kRecords;) {
      size_t len = rng() % 3 == 0 ? rng() % 4000 : rng() % 64;
      while (!r.push(i, len, uint8_t(i * 31))) std::this_thread::yield();
      ++i;
      if (rng() % 7 == 0) std::this_thread::yield();  // now and then let the ring drain
    }
  });
  std::mt19937_64 rng(42);
  uint64_t bad = 0;
  for (uint64_t i = 0; i < kRecords;) {
    WireHdr h;
    const uint8_t* p = nullptr;
    int got = r.rx.next(&h, &p);
    ASSERT_GE(got, 0) << "ring corrupt at record " << i;
    if (got == 0) {
      std::this_thread::yield();
      continue;
    }
    size_t len = rng() % 3 == 0 ? rng() % 4000 : rng() % 64;
    (void)(rng() % 7);
    if (h.tag != i || h.len != len) ++bad;
    for (size_t b = 0; b < h.len && b < len; ++b)
      if (p[b] != uint8_t(i * 31)) {
        ++bad;
        break;
      }
    r.rx.advance();
    r.rx.publish();
    ++i;
  }
  producer.join();
  EXPECT_EQ(bad, 0u);
}

}  // namespace
}  // namespace hmc::hoststage
