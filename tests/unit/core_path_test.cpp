// Path choice: which paths two capability records allow, how they rank, HMC_PATH forcing.
#include <gtest/gtest.h>

#include "hmc/plugin/net.h"
#include "path/path.h"

using namespace hmc;

namespace {
path::NetRecord rec(const std::string& plugin, const std::string& dev, uint64_t bw, uint32_t lat_ns,
                    uint32_t flags = HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_RMA) {
  path::NetRecord r;
  r.plugin = plugin;
  r.device = dev;
  r.bandwidth_MBps = bw;
  r.latency_ns = lat_ns;
  r.mem_kinds = HMC_NET_MEM_HOST;
  r.flags = flags;
  return r;
}
path::Capabilities side(const std::string& host, std::vector<path::NetRecord> net) {
  path::Capabilities c;
  c.host_id = host;
  c.hostname = host;
  c.pid = 1;
  c.net = std::move(net);
  return c;
}
const uint32_t kShm = HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_RMA | HMC_NET_FLAG_SAME_HOST;
}  // namespace

TEST(PathChoice, SameHostPrefersFasterNodeLocalTransport) {
  auto a = side("h1", {rec("hoststage", "tcp", 3000, 20000), rec("hoststage", "shm", 9000, 2000, kShm)});
  auto b = side("h1", {rec("hoststage", "tcp", 3000, 20000), rec("hoststage", "shm", 9000, 2000, kShm)});
  path::Choice c;
  ASSERT_EQ(path::choose(a, b, "", &c), HMC_SUCCESS);
  EXPECT_EQ(c.key(), "hoststage/shm");
  EXPECT_DOUBLE_EQ(c.bandwidth_MBps, 9000);
  EXPECT_DOUBLE_EQ(c.latency_us, 2.0);
}

TEST(PathChoice, NodeLocalTransportNeverCrossesHosts) {
  auto a = side("h1", {rec("hoststage", "tcp", 3000, 20000), rec("hoststage", "shm", 9000, 2000, kShm)});
  auto b = side("h2", {rec("hoststage", "tcp", 3000, 20000), rec("hoststage", "shm", 9000, 2000, kShm)});
  auto ranked = path::rank(a, b);
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_EQ(ranked[0].key(), "hoststage/tcp");
  path::Choice c;
  EXPECT_EQ(path::choose(a, b, "hoststage/shm", &c), HMC_ERR_NO_PATH);
}

TEST(PathChoice, SymmetricAndBoundedByTheSlowerSide) {
  auto a = side("h1", {rec("x", "nic", 1000, 5000), rec("y", "nic", 5000, 9000)});
  auto b = side("h2", {rec("x", "nic", 8000, 1000), rec("y", "nic", 2000, 1000)});
  path::Choice ab, ba;
  ASSERT_EQ(path::choose(a, b, "", &ab), HMC_SUCCESS);
  ASSERT_EQ(path::choose(b, a, "", &ba), HMC_SUCCESS);
  EXPECT_EQ(ab.key(), ba.key());
  EXPECT_EQ(ab.key(), "y/nic");  // min bandwidth 2000 beats 1000
  EXPECT_DOUBLE_EQ(ab.bandwidth_MBps, 2000);
  EXPECT_DOUBLE_EQ(ab.latency_us, 9.0);
}

TEST(PathChoice, ForcedPathWinsWhenUsable) {
  auto a = side("h1", {rec("hoststage", "tcp", 3000, 20000), rec("hoststage", "shm", 9000, 2000, kShm)});
  path::Choice c;
  ASSERT_EQ(path::choose(a, a, "hoststage/tcp", &c), HMC_SUCCESS);
  EXPECT_EQ(c.key(), "hoststage/tcp");
  EXPECT_EQ(c.reason, "forced by HMC_PATH");
  EXPECT_EQ(path::choose(a, a, "hoststage/rdma", &c), HMC_ERR_NO_PATH);
}

TEST(PathChoice, ExplicitPluginOrderIsAPreference) {
  auto fast = rec("fast", "d", 9000, 1000);
  auto slow = rec("slow", "d", 100, 90000);
  slow.preference = 1;
  fast.preference = 2;
  auto a = side("h1", {fast, slow});
  path::Choice c;
  ASSERT_EQ(path::choose(a, a, "", &c), HMC_SUCCESS);
  EXPECT_EQ(c.key(), "slow/d");
}

TEST(PathChoice, NoCommonPluginIsNoPathWithBothOffers) {
  auto a = side("h1", {rec("ucx", "mlx5_0", 1000, 1000)});
  auto b = side("h2", {rec("ofi", "cxi0", 1000, 1000)});
  path::Choice c;
  EXPECT_EQ(path::choose(a, b, "", &c), HMC_ERR_NO_PATH);
  auto untagged = side("h2", {rec("ucx", "mlx5_0", 1000, 1000, HMC_NET_FLAG_RMA)});
  EXPECT_EQ(path::choose(a, untagged, "", &c), HMC_ERR_NO_PATH);
}

TEST(PathChoice, UnknownNumbersGetDefaults) {
  auto a = side("h1", {rec("p", "d", 0, 0)});
  path::Choice c;
  ASSERT_EQ(path::choose(a, a, "", &c), HMC_SUCCESS);
  EXPECT_DOUBLE_EQ(c.bandwidth_MBps, path::kDefaultBandwidthMBps);
  EXPECT_DOUBLE_EQ(c.latency_us, path::kDefaultLatencyUs);
  EXPECT_NEAR(path::cost_us(c, 1000000), path::kDefaultLatencyUs + 1000.0, 1e-9);
}
