// The registry of live handles: a removed handle is refused even right after it was found live
// (the per-thread memory of the last live handle must not outlive a removal).
#include <gtest/gtest.h>

#include <thread>

#include "util/handles.h"

namespace hmc {
namespace {

TEST(Handles, RemovedHandleIsRefusedRightAfterBeingFoundLive) {
  int a = 0, b = 0;
  Handles::add(&a, HandleKind::Peer);
  Handles::add(&b, HandleKind::Peer);
  EXPECT_TRUE(Handles::valid(&a, HandleKind::Peer));
  EXPECT_TRUE(Handles::valid(&a, HandleKind::Peer));  // the remembered answer
  EXPECT_FALSE(Handles::valid(&a, HandleKind::Region)) << "the kind must match";
  Handles::remove(&b);  // another handle's removal also forgets what was remembered
  EXPECT_TRUE(Handles::valid(&a, HandleKind::Peer));
  Handles::remove(&a);
  EXPECT_FALSE(Handles::valid(&a, HandleKind::Peer));
  EXPECT_FALSE(Handles::valid(nullptr, HandleKind::Peer));
}

TEST(Handles, RemovalOnAnotherThreadIsSeen) {
  int a = 0;
  Handles::add(&a, HandleKind::Remote);
  ASSERT_TRUE(Handles::valid(&a, HandleKind::Remote));
  std::thread([&] { Handles::remove(&a); }).join();
  EXPECT_FALSE(Handles::valid(&a, HandleKind::Remote));
}

}  // namespace
}  // namespace hmc
