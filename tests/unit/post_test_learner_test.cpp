// PostTestLearner (core/src/peer/post_test_learner.h): which posts get tested at once.
#include "peer/post_test_learner.h"

#include <gtest/gtest.h>

namespace hmc {
namespace {

// Posts `n` messages of `size` the way post_common does; `ends` says whether a tested post
// ended. Returns how many were tested.
int run(PostTestLearner& e, size_t size, int n, bool ends) {
  int tested = 0;
  for (int i = 0; i < n; ++i) {
    if (!e.should_test(size)) continue;
    ++tested;
    e.note(size, ends);
  }
  return tested;
}

TEST(PostTestLearner, SizeClassesArePowersOfTwo) {
  EXPECT_EQ(PostTestLearner::class_of(0), 0u);
  EXPECT_EQ(PostTestLearner::class_of(1), 1u);
  EXPECT_EQ(PostTestLearner::class_of(2), 2u);
  EXPECT_EQ(PostTestLearner::class_of(3), 2u);
  EXPECT_EQ(PostTestLearner::class_of(4096), 13u);
  EXPECT_EQ(PostTestLearner::class_of(8191), 13u);
  EXPECT_EQ(PostTestLearner::class_of(4u << 20), 23u);
  EXPECT_EQ(PostTestLearner::class_of(SIZE_MAX), 64u);
}

TEST(PostTestLearner, PostsThatEndAreAlwaysTested) {
  PostTestLearner e;
  EXPECT_EQ(run(e, 8, 1000, true), 1000);
}

TEST(PostTestLearner, PostsThatRunOnAreTestedOnlyAsProbes) {
  PostTestLearner e;
  // PostTestLearner::kMisses tests find it running; after them one post in kProbe is tested.
  int n = PostTestLearner::kMisses + 64 * PostTestLearner::kProbe;
  EXPECT_EQ(run(e, 4u << 20, n, false), PostTestLearner::kMisses + 64);
}

TEST(PostTestLearner, MissesMustComeInARow) {
  PostTestLearner e;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i + 1 < PostTestLearner::kMisses; ++i) {
      ASSERT_TRUE(e.should_test(4096));
      e.note(4096, false);
    }
    ASSERT_TRUE(e.should_test(4096));
    e.note(4096, true);  // one that ended starts the count again
  }
  EXPECT_TRUE(e.should_test(4096));
}

TEST(PostTestLearner, AProbeThatEndsRestoresTesting) {
  PostTestLearner e;
  run(e, 65536, PostTestLearner::kMisses, false);
  int skipped = 0;
  while (!e.should_test(65536)) ++skipped;
  EXPECT_EQ(skipped, static_cast<int>(PostTestLearner::kProbe) - 1);
  e.note(65536, true);
  EXPECT_EQ(run(e, 65536, 100, true), 100);
}

TEST(PostTestLearner, AProbeThatFindsItRunningKeepsProbing) {
  PostTestLearner e;
  run(e, 65536, PostTestLearner::kMisses, false);
  while (!e.should_test(65536)) {
  }
  e.note(65536, false);
  EXPECT_EQ(run(e, 65536, 10 * PostTestLearner::kProbe, false), 10);
}

TEST(PostTestLearner, ClassesLearnApart) {
  PostTestLearner e;
  run(e, 4u << 20, 1000, false);            // large messages run on
  EXPECT_EQ(run(e, 64, 1000, true), 1000);  // small ones still end at post: all tested
  EXPECT_FALSE(e.should_test(5u << 20));    // 4 MiB's class: 4 MiB up to 8 MiB - 1
  EXPECT_TRUE(e.should_test(3u << 20));     // another class, not learned yet
}

}  // namespace
}  // namespace hmc
