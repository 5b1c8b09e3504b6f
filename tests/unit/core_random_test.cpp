// random_bytes of util/random.h (getrandom(2)): handshake nonces and context ids.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "util/random.h"

using hmc::random_bytes;

TEST(CoreRandom, FillsDistinctBytes) {
  std::vector<uint8_t> x(32, 0), y(32, 0);
  ASSERT_EQ(random_bytes(x.data(), x.size()), HMC_SUCCESS);
  ASSERT_EQ(random_bytes(y.data(), y.size()), HMC_SUCCESS);
  // Two 256-bit draws collide, or come out all zero, with probability 2^-256.
  EXPECT_NE(x, y);
  EXPECT_NE(x, std::vector<uint8_t>(32, 0));
  EXPECT_EQ(random_bytes(nullptr, 0), HMC_SUCCESS);
}
