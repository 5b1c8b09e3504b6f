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
  r.mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
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
  auto a =
      side("h1", {rec("hoststage", "tcp", 3000, 20000), rec("hoststage", "shm", 9000, 2000, kShm)});
  auto b =
      side("h1", {rec("hoststage", "tcp", 3000, 20000), rec("hoststage", "shm", 9000, 2000, kShm)});
  path::Choice c;
  ASSERT_EQ(path::choose(a, b, "", &c), HMC_SUCCESS);
  EXPECT_EQ(c.key(), "hoststage/shm");
  EXPECT_DOUBLE_EQ(c.bandwidth_MBps, 9000);
  EXPECT_DOUBLE_EQ(c.latency_us, 2.0);
}

TEST(PathChoice, NodeLocalTransportNeverCrossesHosts) {
  auto a =
      side("h1", {rec("hoststage", "tcp", 3000, 20000), rec("hoststage", "shm", 9000, 2000, kShm)});
  auto b =
      side("h2", {rec("hoststage", "tcp", 3000, 20000), rec("hoststage", "shm", 9000, 2000, kShm)});
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
  auto a =
      side("h1", {rec("hoststage", "tcp", 3000, 20000), rec("hoststage", "shm", 9000, 2000, kShm)});
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

// --- the blended cost model --------------------------------------------------------------------

namespace {
path::NetRecord measured(const std::string& plugin, const std::string& dev, uint64_t bw,
                         uint32_t lat_ns, uint32_t flags = HMC_NET_FLAG_TAGGED) {
  path::NetRecord r = rec(plugin, dev, 0, 0, flags);
  r.measured_bandwidth_MBps = bw;
  r.measured_latency_ns = lat_ns;
  return r;
}
}  // namespace

TEST(PathChoice, RanksTheSmallestWorstCaseSlowdownAcrossSizes) {
  // lowlat wins at 8 B by 2.5x but loses at 4 MiB by 1.25x; bulk is the reverse. At 1 MiB alone
  // bulk would rank first; over 8 B, 64 KiB and 4 MiB the worst case of lowlat (1.25x) is
  // smaller than bulk's (2.5x).
  auto a = side("h1", {rec("lowlat", "d", 8000, 2000), rec("bulk", "d", 10000, 5000)});
  auto ranked = path::rank(a, a);
  ASSERT_EQ(ranked.size(), 2u);
  EXPECT_EQ(ranked[0].key(), "lowlat/d");
  double at4m_low = 2.0 + (4u << 20) / 8000.0, at4m_bulk = 5.0 + (4u << 20) / 10000.0;
  EXPECT_NEAR(ranked[0].score, at4m_low / at4m_bulk, 1e-9);
  EXPECT_NEAR(ranked[1].score, (5.0 + 8 / 10000.0) / (2.0 + 8 / 8000.0), 1e-9);
  // The first says why it is first, and which path is faster where it is not.
  EXPECT_NE(ranked[0].reason.find("ranked 1 of 2: the smallest worst-case slowdown; at 4 MiB "
                                  "1.24x the time of bulk/d"),
            std::string::npos)
      << ranked[0].reason;
  EXPECT_NE(ranked[1].reason.find("ranked 2 of 2; at 8 B 2.50x the time of lowlat/d"),
            std::string::npos)
      << ranked[1].reason;

  // Within the tie band a same-host transport goes first although another is faster: it says so.
  auto t =
      side("h1", {measured("shm", "d", 9000, 1100, HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_SAME_HOST),
                  measured("tcp", "d", 10000, 1000)});
  auto r3 = path::rank(t, t);
  ASSERT_EQ(r3.size(), 2u);
  EXPECT_EQ(r3[0].key(), "shm/d");
  EXPECT_NE(r3[0].reason.find("ranked 1 of 2: a same-host transport within 1.15x of the smallest "
                              "worst-case slowdown; at 8 B "),
            std::string::npos)
      << r3[0].reason;
  EXPECT_NE(r3[0].reason.find("x the time of tcp/d"), std::string::npos) << r3[0].reason;

  // A path best at every size scores 1 and says so.
  auto b = side("h1", {rec("fast", "d", 9000, 1000), rec("slow", "d", 100, 9000)});
  auto r2 = path::rank(b, b);
  EXPECT_EQ(r2[0].key(), "fast/d");
  EXPECT_DOUBLE_EQ(r2[0].score, 1.0);
  EXPECT_NE(r2[0].reason.find("fastest at every size"), std::string::npos) << r2[0].reason;
}

TEST(PathChoice, DeterministicWhateverTheRecordOrderAndSide) {
  std::vector<path::NetRecord> recs = {
      measured("hoststage", "tcp", 1200, 20000), measured("hoststage", "shm", 9000, 900, kShm),
      measured("ucx", "ucx", 9500, 1500), measured("ofi", "shm", 3000, 4000, kShm),
      rec("ofi", "tcp", 0, 0)};
  auto a = side("h1", recs);
  std::vector<path::NetRecord> rev(recs.rbegin(), recs.rend());
  // The other side measured somewhat different numbers.
  for (auto& r : rev) r.measured_bandwidth_MBps = r.measured_bandwidth_MBps * 9 / 10;
  auto b = side("h1", rev);
  std::vector<std::string> ab, ba;
  for (const auto& c : path::rank(a, b)) ab.push_back(c.key());
  for (const auto& c : path::rank(b, a)) ba.push_back(c.key());
  EXPECT_EQ(ab, ba);
  ASSERT_EQ(ab.size(), 5u);
  EXPECT_EQ(ab[0], "hoststage/shm");
  EXPECT_EQ(ab.back(), "ofi/tcp");  // defaults: 50 us, 1000 MB/s
  path::Choice c1, c2;
  ASSERT_EQ(path::choose(a, b, "", &c1), HMC_SUCCESS);
  ASSERT_EQ(path::choose(b, a, "", &c2), HMC_SUCCESS);
  EXPECT_EQ(c1.key(), c2.key());
  EXPECT_DOUBLE_EQ(c1.bandwidth_MBps, c2.bandwidth_MBps);
  EXPECT_DOUBLE_EQ(c1.bandwidth_MBps, 8100);  // the slower side's
  EXPECT_EQ(c1.basis, "measured");
}

TEST(PathChoice, MeasuredFiguresAreTheEstimateOnOneHostAndABoundAcrossHosts) {
  auto r = measured("ucx", "ucx", 9000, 800);
  path::Figures same = path::figures_of(r, true);
  EXPECT_DOUBLE_EQ(same.bandwidth_MBps, 9000);
  EXPECT_DOUBLE_EQ(same.latency_us, 0.8);
  EXPECT_STREQ(same.basis, "measured");
  // Loopback has no wire: across hosts it only bounds the defaults.
  path::Figures far = path::figures_of(r, false);
  EXPECT_DOUBLE_EQ(far.bandwidth_MBps, path::kDefaultBandwidthMBps);
  EXPECT_DOUBLE_EQ(far.latency_us, path::kDefaultLatencyUs);
  EXPECT_STREQ(far.basis, "default, bounded by loopback");
  auto slow = measured("ofi", "tcp", 600, 350000);
  path::Figures slow_far = path::figures_of(slow, false);
  EXPECT_DOUBLE_EQ(slow_far.bandwidth_MBps, 600);
  EXPECT_DOUBLE_EQ(slow_far.latency_us, 350);
  // Declared figures win over measured ones, one by one.
  auto part = measured("ofi", "nic", 9000, 800);
  part.bandwidth_MBps = 12500;
  path::Figures pf = path::figures_of(part, false);
  EXPECT_DOUBLE_EQ(pf.bandwidth_MBps, 12500);
  EXPECT_DOUBLE_EQ(pf.latency_us, path::kDefaultLatencyUs);
  EXPECT_DOUBLE_EQ(path::figures_of(part, true).latency_us, 0.8);
  EXPECT_STREQ(path::figures_of(part, true).basis, "declared+measured");
}

TEST(PathChoice, AcrossHostsLoopbackFiguresCannotPromoteAPath) {
  // On one host the measured ucx wins; across hosts both fall back to the same default figures,
  // so the tiebreak (name) decides, as without calibration.
  auto a =
      side("h1", {measured("ucx", "ucx", 9000, 800), measured("hoststage", "tcp", 1500, 20000)});
  auto b = side("h2", a.net);
  path::Choice near, far;
  ASSERT_EQ(path::choose(a, side("h1", a.net), "", &near), HMC_SUCCESS);
  EXPECT_EQ(near.key(), "ucx/ucx");
  ASSERT_EQ(path::choose(a, b, "", &far), HMC_SUCCESS);
  EXPECT_EQ(far.key(), "hoststage/tcp");
}

TEST(PathChoice, PluginOrderAndForcedPathOverrideMeasuredFigures) {
  auto fast = measured("ucx", "ucx", 9000, 800);
  auto slow = measured("hoststage", "tcp", 1000, 30000);
  path::Choice c;
  auto plain = side("h1", {fast, slow});
  ASSERT_EQ(path::choose(plain, plain, "", &c), HMC_SUCCESS);
  EXPECT_EQ(c.key(), "ucx/ucx");
  // HMC_NET_PLUGINS=hoststage,ucx: the order wins over the figures.
  slow.preference = 1;
  fast.preference = 2;
  auto ordered = side("h1", {fast, slow});
  ASSERT_EQ(path::choose(ordered, ordered, "", &c), HMC_SUCCESS);
  EXPECT_EQ(c.key(), "hoststage/tcp");
  EXPECT_NE(c.reason.find("HMC_NET_PLUGINS order"), std::string::npos);
  // One side's order is enough (the larger position of the two is taken, both compute the same).
  auto other =
      side("h1", {measured("ucx", "ucx", 9000, 800), measured("hoststage", "tcp", 1000, 30000)});
  path::Choice c2;
  ASSERT_EQ(path::choose(other, ordered, "", &c2), HMC_SUCCESS);
  ASSERT_EQ(path::choose(ordered, other, "", &c), HMC_SUCCESS);
  EXPECT_EQ(c.key(), c2.key());
  EXPECT_EQ(c.key(), "hoststage/tcp");
  // HMC_PATH forces the slower one.
  ASSERT_EQ(path::choose(plain, plain, "hoststage/tcp", &c), HMC_SUCCESS);
  EXPECT_EQ(c.key(), "hoststage/tcp");
  EXPECT_EQ(c.reason, "forced by HMC_PATH");
}

TEST(PathChoice, WithinTheTieBandANodeLocalTransportGoesFirst) {
  // ucx measures 10% faster at bandwidth than hoststage/shm, same latency: within the band that
  // repeated loopback measurements vary by, so the node-local transport is chosen. 40% faster
  // is a real difference and wins.
  auto pick = [](uint64_t ucx_bw) {
    auto s = [&] {
      return side("h1",
                  {rec("ucx", "ucx", ucx_bw, 100), rec("hoststage", "shm", 10000, 100, kShm)});
    };
    path::Choice c;
    EXPECT_EQ(path::choose(s(), s(), "", &c), HMC_SUCCESS);
    return c.key();
  };
  EXPECT_EQ(pick(11000), "hoststage/shm");
  EXPECT_EQ(pick(14000), "ucx/ucx");
  EXPECT_EQ(pick(9000), "hoststage/shm");
}

// Devices of different names pair where they declare the same fabric (two HCAs on one RoCE
// network or IB subnet); each side's choice names its own device and the peer's. Without a
// fabric only the same name pairs, and a device with one never pairs by name with one without.
TEST(PathChoice, DevicesPairByFabricWhateverTheirNames) {
  auto a0 = rec("ibverbs", "mlx5_0:1", 12500, 2000);
  a0.fabric = "roce-v2";
  auto b1 = rec("ibverbs", "bnxt_re1:1", 25000, 2000);
  b1.fabric = "roce-v2";
  auto b_ib = rec("ibverbs", "mlx5_3:1", 25000, 2000);
  b_ib.fabric = "ib:fe80000000000000";
  auto a = side("h1", {a0});
  auto b = side("h2", {b_ib, b1});
  path::Choice ab, ba;
  ASSERT_EQ(path::choose(a, b, "", &ab), HMC_SUCCESS);
  EXPECT_EQ(ab.key(), "ibverbs/mlx5_0:1");
  EXPECT_EQ(ab.peer_device, "bnxt_re1:1");
  EXPECT_DOUBLE_EQ(ab.bandwidth_MBps, 12500);
  ASSERT_EQ(path::choose(b, a, "", &ba), HMC_SUCCESS);
  EXPECT_EQ(ba.key(), "ibverbs/bnxt_re1:1");
  EXPECT_EQ(ba.peer_device, "mlx5_0:1");
  EXPECT_EQ(path::rank(a, b).size(), 1u) << "the IB port is on another fabric";

  auto plain = rec("ibverbs", "mlx5_0:1", 12500, 2000);  // an older plugin: no fabric
  EXPECT_TRUE(path::rank(side("h1", {plain}), b).empty());
  auto same = rec("ibverbs", "mlx5_0:1", 12500, 2000);
  EXPECT_EQ(path::rank(side("h1", {plain}), side("h2", {same})).size(), 1u);
}
