// Setup messages of the control plane: the capability record (version 2, every field required),
// NetHandle and NetHello, the connector's plugin hello.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "control/wire.h"
#include "hmc/plugin/net.h"
#include "peer/messages.h"

namespace hmc {
namespace {

path::Capabilities full_caps() {
  path::Capabilities caps;
  caps.host_id = "0123456789abcdef";
  caps.hostname = "node7";
  caps.pid = 4242;
  caps.context_id = 0x1122334455667788ull;
  caps.stage_chunk = 1 << 20;
  caps.stage_first = 65537;
  caps.device_count = 2;
  caps.features = path::kFeatureSharedBounces;
  path::NetRecord a, b;
  a.plugin = b.plugin = "ibverbs";
  a.device = "mlx5_0:1";
  a.fabric = "roce-v2";
  a.bandwidth_MBps = 12500;
  a.latency_ns = 1800;
  a.measured_bandwidth_MBps = 11000;
  a.measured_latency_ns = 2100;
  a.mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST) | HMC_MEM_IFACE_BIT(40);
  a.rma_mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA);
  a.flags = HMC_NET_FLAG_TAGGED;
  a.preference = 1;
  a.nic_guid = 0xfeedf00dull;
  a.nic_port = 2;
  b.device = "mlx5_1:1";
  caps.net = {a, b};
  caps.ipc_plugins = {"cuda", "hip"};
  caps.copy = {{"cuda", 12000, 11000, 90000}, {"hip", 0, 0, 0}};
  return caps;
}

std::vector<uint8_t> encoded(const path::Capabilities& caps) {
  control::Writer w;
  msg::encode_caps(caps, &w);
  return w.data();
}

TEST(PeerMessages, CapsRecordRoundTripsEveryField) {
  path::Capabilities caps = full_caps();
  std::vector<uint8_t> bytes = encoded(caps);
  path::Capabilities back;
  msg::CapsDecode why = msg::CapsDecode::Malformed;
  ASSERT_TRUE(msg::decode_caps(bytes.data(), bytes.size(), &back, &why));
  EXPECT_EQ(why, msg::CapsDecode::Ok);
  EXPECT_EQ(back.host_id, caps.host_id);
  EXPECT_EQ(back.hostname, "node7");
  EXPECT_EQ(back.pid, 4242);
  EXPECT_EQ(back.context_id, caps.context_id);
  EXPECT_EQ(back.stage_chunk, 1u << 20);
  EXPECT_EQ(back.stage_first, 65537u);
  EXPECT_EQ(back.device_count, 2u);
  EXPECT_EQ(back.features, path::kFeatureSharedBounces);
  ASSERT_EQ(back.net.size(), 2u);
  const path::NetRecord& a = back.net[0];
  EXPECT_EQ(a.key(), "ibverbs/mlx5_0:1");
  EXPECT_EQ(a.fabric, "roce-v2");
  EXPECT_EQ(a.bandwidth_MBps, 12500u);
  EXPECT_EQ(a.latency_ns, 1800u);
  EXPECT_EQ(a.measured_bandwidth_MBps, 11000u);
  EXPECT_EQ(a.measured_latency_ns, 2100u);
  EXPECT_EQ(a.mem_ifaces, caps.net[0].mem_ifaces);  // interfaces past the first 32 too
  EXPECT_EQ(a.rma_mem_ifaces, HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA));
  EXPECT_EQ(a.flags, uint32_t(HMC_NET_FLAG_TAGGED));
  EXPECT_EQ(a.preference, 1u);
  EXPECT_EQ(a.nic_guid, 0xfeedf00dull);
  EXPECT_EQ(a.nic_port, 2u);
  EXPECT_EQ(back.net[1].fabric, "");
  EXPECT_EQ(back.net[1].pairs_by(), "mlx5_1:1");
  EXPECT_EQ(back.ipc_plugins, caps.ipc_plugins);
  ASSERT_EQ(back.copy.size(), 2u);
  EXPECT_EQ(back.copy[0].plugin, "cuda");
  EXPECT_EQ(back.copy[0].d2h_MBps, 12000u);
  EXPECT_EQ(back.copy[0].h2d_MBps, 11000u);
  EXPECT_EQ(back.copy[0].d2d_MBps, 90000u);
  EXPECT_EQ(encoded(back), bytes);  // and encodes to the same bytes
  // Empty lists are a count of 0, not an absent section.
  path::Capabilities bare;
  std::vector<uint8_t> b2 = encoded(bare);
  ASSERT_TRUE(msg::decode_caps(b2.data(), b2.size(), &back));
  EXPECT_TRUE(back.net.empty() && back.ipc_plugins.empty() && back.copy.empty());
}

// Every field is required: a record cut anywhere, or followed by anything, is malformed; none
// is read as a record of missing fields.
TEST(PeerMessages, CapsRecordCutAnywhereOrWithTrailingBytesIsRefused) {
  std::vector<uint8_t> bytes = encoded(full_caps());
  path::Capabilities back;
  for (size_t n = 0; n < bytes.size(); ++n) {
    msg::CapsDecode why = msg::CapsDecode::Ok;
    EXPECT_FALSE(msg::decode_caps(bytes.data(), n, &back, &why)) << n << " bytes";
    EXPECT_EQ(why, n < 4 ? msg::CapsDecode::Unversioned : msg::CapsDecode::Malformed)
        << n << " bytes";
  }
  bytes.push_back(0);
  msg::CapsDecode why = msg::CapsDecode::Ok;
  EXPECT_FALSE(msg::decode_caps(bytes.data(), bytes.size(), &back, &why));
  EXPECT_EQ(why, msg::CapsDecode::Malformed);
}

// Another version, and the unversioned record of earlier builds (it starts with the host id's
// length), are refused by name, never guessed at.
TEST(PeerMessages, CapsRecordOfAnotherVersionIsRefusedByName) {
  std::vector<uint8_t> bytes = encoded(full_caps());
  uint16_t v3 = 3;
  std::memcpy(bytes.data() + 4, &v3, 2);
  path::Capabilities back;
  msg::CapsDecode why = msg::CapsDecode::Ok;
  EXPECT_FALSE(msg::decode_caps(bytes.data(), bytes.size(), &back, &why));
  EXPECT_EQ(why, msg::CapsDecode::OtherVersion);
  EXPECT_NE(std::strstr(msg::caps_decode_text(why), "another version than 2"), nullptr);
  control::Writer old;  // how the record began before version 2
  old.str("0123456789abcdef");
  old.str("node7");
  old.i32(4242);
  old.u64(9);
  old.u32(0);
  EXPECT_FALSE(msg::decode_caps(old.data().data(), old.size(), &back, &why));
  EXPECT_EQ(why, msg::CapsDecode::Unversioned);
  EXPECT_NE(std::strstr(msg::caps_decode_text(why), "before version 2"), nullptr);
}

TEST(PeerMessages, NetHandleRoundTripsAndRequiresEveryField) {
  msg::NetHandle nh;
  nh.text = "ranked 1 of 2";
  nh.plugin = "ibverbs";
  nh.device = "rxe1:1";
  nh.peer_device = "rxe0:1";
  nh.handle = {1, 2, 3, 4};
  nh.flags = msg::kNetHandleTakesHello;
  control::Writer w;
  msg::encode_net_handle(nh, &w);
  msg::NetHandle back;
  ASSERT_TRUE(msg::decode_net_handle(w.data().data(), w.size(), &back));
  EXPECT_EQ(back.flags, msg::kNetHandleTakesHello);
  EXPECT_EQ(back.handle, nh.handle);
  EXPECT_EQ(back.plugin, "ibverbs");
  EXPECT_EQ(back.peer_device, "rxe0:1");
  for (size_t n = 0; n < w.size(); ++n)
    EXPECT_FALSE(msg::decode_net_handle(w.data().data(), n, &back)) << n << " bytes";
  std::vector<uint8_t> longer = w.data();
  longer.push_back(0);
  EXPECT_FALSE(msg::decode_net_handle(longer.data(), longer.size(), &back));
  // The same name on both sides travels as an empty peer_device.
  nh.peer_device.clear();
  control::Writer w2;
  msg::encode_net_handle(nh, &w2);
  ASSERT_TRUE(msg::decode_net_handle(w2.data().data(), w2.size(), &back));
  EXPECT_EQ(back.peer_device, "");
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

}  // namespace
}  // namespace hmc
