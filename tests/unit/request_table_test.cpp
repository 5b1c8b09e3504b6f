// The process-wide request table: handles name a slot and its generation, so a handle kept after
// its request ended, a foreign pointer or a made-up value is refused; slots are reused.
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "request/request.h"

namespace hmc {
namespace {

// Contexts are only compared by address here.
Context* fake_context(int n) {
  static int storage[4];
  return reinterpret_cast<Context*>(&storage[n]);
}

TEST(RequestTable, HandleResolvesUntilReleased) {
  Request* r = RequestTable::acquire(fake_context(0));
  hmc_request_t h = RequestTable::handle(r);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(RequestTable::lookup(h), r);
  EXPECT_EQ(r->owner, fake_context(0));
  RequestTable::release(r);
  EXPECT_EQ(RequestTable::lookup(h), nullptr);
  RequestTable::release(r);  // a second release is harmless
  EXPECT_EQ(RequestTable::lookup(h), nullptr);
}

TEST(RequestTable, ReusedSlotGetsANewHandleAndAFreshRequest) {
  Request* a = RequestTable::acquire(fake_context(0));
  hmc_request_t ha = RequestTable::handle(a);
  a->size = 123;
  a->error = "old";
  a->done.store(true);
  a->status = HMC_ERR_PEER_LOST;
  RequestTable::release(a);
  Request* b = RequestTable::acquire(fake_context(1));
  ASSERT_EQ(b, a) << "the most recently freed slot is reused first";
  hmc_request_t hb = RequestTable::handle(b);
  EXPECT_NE(ha, hb);
  EXPECT_EQ(RequestTable::lookup(ha), nullptr);
  EXPECT_EQ(RequestTable::lookup(hb), b);
  EXPECT_EQ(b->size, 0u);
  EXPECT_TRUE(b->error.empty());
  EXPECT_FALSE(b->done.load());
  EXPECT_EQ(b->status, HMC_IN_PROGRESS);
  EXPECT_EQ(b->owner, fake_context(1));
  RequestTable::release(b);
}

TEST(RequestTable, ForeignAndMadeUpHandlesAreRefused) {
  int x = 0;
  EXPECT_EQ(RequestTable::lookup(nullptr), nullptr);
  EXPECT_EQ(RequestTable::lookup(reinterpret_cast<hmc_request_t>(&x)), nullptr);
  EXPECT_EQ(RequestTable::lookup(reinterpret_cast<hmc_request_t>(uintptr_t(1))), nullptr);
  EXPECT_EQ(RequestTable::lookup(reinterpret_cast<hmc_request_t>(~uintptr_t(0))), nullptr);
  // A live slot named with the wrong generation.
  Request* r = RequestTable::acquire(fake_context(0));
  auto h = reinterpret_cast<uintptr_t>(RequestTable::handle(r));
  EXPECT_EQ(RequestTable::lookup(reinterpret_cast<hmc_request_t>(h + (uintptr_t(1) << 32))),
            nullptr);
  RequestTable::release(r);
}

TEST(RequestTable, ReleaseAllEndsOnlyThatContextsRequests) {
  std::vector<Request*> mine, theirs;
  for (int i = 0; i < 3000; ++i) {  // more than one segment
    mine.push_back(RequestTable::acquire(fake_context(2)));
    theirs.push_back(RequestTable::acquire(fake_context(3)));
  }
  std::vector<hmc_request_t> mine_h, theirs_h;
  for (auto* r : mine) mine_h.push_back(RequestTable::handle(r));
  for (auto* r : theirs) theirs_h.push_back(RequestTable::handle(r));
  std::set<hmc_request_t> distinct(mine_h.begin(), mine_h.end());
  distinct.insert(theirs_h.begin(), theirs_h.end());
  EXPECT_EQ(distinct.size(), 6000u);
  RequestTable::release_all(fake_context(2));
  for (auto h : mine_h) ASSERT_EQ(RequestTable::lookup(h), nullptr);
  for (size_t i = 0; i < theirs.size(); ++i)
    ASSERT_EQ(RequestTable::lookup(theirs_h[i]), theirs[i]);
  for (auto* r : theirs) RequestTable::release(r);
}

TEST(RequestTable, ConcurrentThreadsNeverShareASlot) {
  constexpr int kThreads = 4, kRounds = 20000;
  std::vector<std::thread> threads;
  std::atomic<int> clashes{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        Request* r = RequestTable::acquire(fake_context(t % 2));
        r->tag = uint64_t(t) << 32 | uint64_t(i);
        hmc_request_t h = RequestTable::handle(r);
        if (RequestTable::lookup(h) != r || r->tag != (uint64_t(t) << 32 | uint64_t(i))) ++clashes;
        RequestTable::release(r);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(clashes.load(), 0);
}

// Threads holding several slots at once, released out of order: the free list (a lock-free
// stack) must never hand one slot to two threads, nor lose one.
TEST(RequestTable, BatchesReleasedOutOfOrderStayExclusive) {
  constexpr int kThreads = 4, kRounds = 5000;
  std::vector<std::thread> threads;
  std::atomic<int> clashes{0};
  std::mutex used_mutex;
  std::set<uint32_t> used;  // every slot the threads had
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::set<uint32_t> mine;
      uint64_t rng = 0x9e3779b97f4a7c15ull * uint64_t(t + 1);
      std::vector<Request*> held;
      for (int i = 0; i < kRounds; ++i) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        size_t n = 1 + rng % 16;
        for (size_t k = 0; k < n; ++k) {
          Request* r = RequestTable::acquire(fake_context(0));
          r->tag = uint64_t(t) << 48 | uint64_t(i) << 8 | k;
          held.push_back(r);
          mine.insert(r->index);
        }
        std::this_thread::yield();
        for (size_t k = 0; k < held.size(); ++k)
          if (held[k]->tag != (uint64_t(t) << 48 | uint64_t(i) << 8 | k)) ++clashes;
        for (size_t k = held.size(); k-- > 0;) {  // out of order: odd ones first, then the rest
          if (k % 2) RequestTable::release(held[k]);
        }
        for (size_t k = 0; k < held.size(); k += 2) RequestTable::release(held[k]);
        held.clear();
      }
      std::lock_guard<std::mutex> lock(used_mutex);
      used.insert(mine.begin(), mine.end());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(clashes.load(), 0);
  // Nothing was lost: the slots released last are on top of the stack, so as many requests as
  // the threads used slots come back from exactly those slots.
  std::vector<Request*> burst;
  std::set<uint32_t> again;
  for (size_t k = 0; k < used.size(); ++k) {
    burst.push_back(RequestTable::acquire(fake_context(0)));
    again.insert(burst.back()->index);
  }
  EXPECT_EQ(again, used) << "a slot was lost from the free list or handed out twice";
  for (Request* r : burst) RequestTable::release(r);
}

}  // namespace
}  // namespace hmc
