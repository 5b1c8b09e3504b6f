// Setup messages of the control plane whose layout grew: NetHandle's appended flags (absent from
// an older peer's message) and NetHello, the connector's plugin hello.
#include <gtest/gtest.h>

#include <vector>

#include "control/wire.h"
#include "hmc/plugin/net.h"
#include "peer/messages.h"

namespace hmc {
namespace {

TEST(PeerMessages, NetHandleFlagsRoundTripAndDefaultToZeroWhenAbsent) {
  msg::NetHandle nh;
  nh.text = "ranked 1 of 2";
  nh.plugin = "ucx";
  nh.device = "ucx";
  nh.handle = {1, 2, 3, 4};
  nh.flags = msg::kNetHandleTakesHello;
  control::Writer w;
  msg::encode_net_handle(nh, &w);
  msg::NetHandle back;
  ASSERT_TRUE(msg::decode_net_handle(w.data().data(), w.size(), &back));
  EXPECT_EQ(back.flags, msg::kNetHandleTakesHello);
  EXPECT_EQ(back.handle, nh.handle);
  EXPECT_EQ(back.plugin, "ucx");
  // An older peer's NetHandle ends after the handle: it asks for no hello.
  ASSERT_TRUE(msg::decode_net_handle(w.data().data(), w.size() - 1, &back));
  EXPECT_EQ(back.flags, 0);
  EXPECT_EQ(back.handle, nh.handle);
  // Cut inside the handle: malformed.
  EXPECT_FALSE(msg::decode_net_handle(w.data().data(), w.size() - 3, &back));
}

TEST(PeerMessages, NetHelloRoundTripsAndIsBounded) {
  msg::NetHello h;
  h.hello.assign(300, 0x42);
  control::Writer w;
  msg::encode_net_hello(h, &w);
  msg::NetHello back;
  ASSERT_TRUE(msg::decode_net_hello(w.data().data(), w.size(), &back));
  EXPECT_EQ(back.hello, h.hello);
  EXPECT_FALSE(msg::decode_net_hello(w.data().data(), w.size() - 1, &back));
  msg::NetHello big;
  big.hello.assign(HMC_NET_HELLO_MAX + 1, 1);
  control::Writer wb;
  msg::encode_net_hello(big, &wb);
  EXPECT_FALSE(msg::decode_net_hello(wb.data().data(), wb.size(), &back));
  msg::NetHello empty;
  control::Writer we;
  msg::encode_net_hello(empty, &we);
  ASSERT_TRUE(msg::decode_net_hello(we.data().data(), we.size(), &back));
  EXPECT_TRUE(back.hello.empty());
}

// A capability record of host "h" with two ibverbs ports: a as mlx5_0:1, b as mlx5_1:1.
path::Capabilities two_ports(path::NetRecord a, path::NetRecord b) {
  path::Capabilities caps;
  caps.host_id = caps.hostname = "h";
  a.plugin = b.plugin = "ibverbs";
  a.device = "mlx5_0:1";
  b.device = "mlx5_1:1";
  caps.net = {a, b};
  return caps;
}

// The fabric each net record pairs by, appended last to the capability record: it round-trips,
// an older peer's record (without it) pairs by name, and a count that disagrees is malformed.
TEST(PeerMessages, CapsFabricRoundTripsAndIsEmptyFromAnOlderPeer) {
  path::NetRecord a;
  a.fabric = "roce-v2";
  control::Writer w;
  msg::encode_caps(two_ports(a, {}), &w);
  path::Capabilities back;
  ASSERT_TRUE(msg::decode_caps(w.data().data(), w.size(), &back));
  ASSERT_EQ(back.net.size(), 2u);
  EXPECT_EQ(back.net[0].fabric, "roce-v2");
  EXPECT_EQ(back.net[1].fabric, "");
  // Without the sections after it (the interfaces registered by pointer: a count, two u64) and
  // its own (two u32 string lengths, one 7-byte string, the count).
  const size_t after = 4 + 2 * 8;
  const size_t section = 4 + (4 + 7) + 4;
  ASSERT_TRUE(msg::decode_caps(w.data().data(), w.size() - after - section, &back));
  EXPECT_EQ(back.net[0].fabric, "");
  EXPECT_EQ(back.net[0].pairs_by(), "mlx5_0:1");
  EXPECT_FALSE(msg::decode_caps(w.data().data(), w.size() - after - 2, &back)) << "cut inside it";
}

// The interfaces each record registers by pointer for put/get, appended last: they round-trip,
// and an older peer's record (without them) has none.
TEST(PeerMessages, CapsRmaMemIfacesRoundTripAndAreZeroFromAnOlderPeer) {
  path::NetRecord a;
  a.rma_mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA);
  control::Writer w;
  msg::encode_caps(two_ports(a, {}), &w);
  path::Capabilities back;
  ASSERT_TRUE(msg::decode_caps(w.data().data(), w.size(), &back));
  ASSERT_EQ(back.net.size(), 2u);
  EXPECT_EQ(back.net[0].rma_mem_ifaces, HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA));
  EXPECT_EQ(back.net[1].rma_mem_ifaces, 0u);
  ASSERT_TRUE(msg::decode_caps(w.data().data(), w.size() - (4 + 2 * 8), &back));
  EXPECT_EQ(back.net[0].rma_mem_ifaces, 0u);
  EXPECT_FALSE(msg::decode_caps(w.data().data(), w.size() - 3, &back)) << "cut inside it";
}

TEST(PeerMessages, NetHandlePeerDeviceRoundTripsAndIsEmptyFromAnOlderPeer) {
  msg::NetHandle nh;
  nh.plugin = "ibverbs";
  nh.device = "rxe1:1";
  nh.peer_device = "rxe0:1";
  nh.handle = {9, 9};
  control::Writer w;
  msg::encode_net_handle(nh, &w);
  msg::NetHandle back;
  ASSERT_TRUE(msg::decode_net_handle(w.data().data(), w.size(), &back));
  EXPECT_EQ(back.peer_device, "rxe0:1");
  ASSERT_TRUE(msg::decode_net_handle(w.data().data(), w.size() - (4 + 6), &back));
  EXPECT_EQ(back.peer_device, "");
}

}  // namespace
}  // namespace hmc
