// The process-wide request table: handles name a slot and its generation, so a handle kept after
// its request ended, a foreign pointer or a made-up value is refused; slots are reused.
#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "xfer/request.h"

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
  EXPECT_EQ(RequestTable::lookup(reinterpret_cast<hmc_request_t>(h + (uintptr_t(1) << 32))), nullptr);
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
  for (size_t i = 0; i < theirs.size(); ++i) ASSERT_EQ(RequestTable::lookup(theirs_h[i]), theirs[i]);
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

}  // namespace
}  // namespace hmc
