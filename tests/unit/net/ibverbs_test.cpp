// What is particular to plugins/net-ibverbs: device selection (HMC_IB_HCA, NCCL_IB_HCA's syntax),
// the GID choice and link rates, tested on any machine; and, where there are RDMA devices, its
// settings and a connection between two different devices (the QEMU test bed's veth topology:
// rxe0 and rxe1 on the two ends of a veth pair, two "hosts"). The contract scenarios run over
// its configurations in contract_test.cpp.
#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "suite.h"

#ifdef HMC_TEST_IBVERBS_SELECT
#include "select.h"
#include "wire.h"
#endif

namespace net_test {
namespace {

#ifdef HMC_TEST_IBVERBS_SELECT
using namespace hmc::ibverbs;

std::vector<PortId> ports() {
  return {{"mlx5_0", 1}, {"mlx5_0", 2}, {"mlx5_1", 1}, {"mlx5_10", 1}, {"rxe0", 1}};
}

std::vector<std::string> names(const std::vector<size_t>& idx) {
  std::vector<std::string> out;
  auto p = ports();
  for (size_t i : idx) out.push_back(p[i].hca + ":" + std::to_string(p[i].port));
  return out;
}

std::vector<std::string> pick(const std::string& text, std::vector<std::string>* unmatched) {
  HcaFilter f;
  std::string why;
  EXPECT_TRUE(parse_hca_filter(text, &f, &why)) << text << ": " << why;
  return names(select_ports(f, ports(), unmatched));
}

TEST(IbverbsSelect, HcaListSelectsAndOrders) {
  std::vector<std::string> un;
  using V = std::vector<std::string>;
  EXPECT_EQ(pick("", &un), (V{"mlx5_0:1", "mlx5_0:2", "mlx5_1:1", "mlx5_10:1", "rxe0:1"}));
  // Prefixes, in the list's order; a port number narrows.
  EXPECT_EQ(pick("rxe,mlx5_0:2", &un), (V{"rxe0:1", "mlx5_0:2"}));
  EXPECT_EQ(pick("mlx5_1", &un), (V{"mlx5_1:1", "mlx5_10:1"}));
  // '=' matches exactly.
  EXPECT_EQ(pick("=mlx5_1", &un), (V{"mlx5_1:1"}));
  EXPECT_TRUE(un.empty());
  // '^' excludes; with '=' exactly.
  EXPECT_EQ(pick("^mlx5_0", &un), (V{"mlx5_1:1", "mlx5_10:1", "rxe0:1"}));
  EXPECT_EQ(pick("^=mlx5_1,mlx5_0:1", &un), (V{"mlx5_0:2", "mlx5_10:1", "rxe0:1"}));
  EXPECT_EQ(pick(" mlx5_0:1 , mlx5_0:1 ", &un), (V{"mlx5_0:1"}));
  EXPECT_TRUE(un.empty());
  // Unknown names are reported, the rest selected.
  EXPECT_EQ(pick("mlx9,rxe0:2,rxe0", &un), (V{"rxe0:1"}));
  EXPECT_EQ(un, (V{"mlx9", "rxe0:2"}));
}

TEST(IbverbsSelect, HcaListRejectsMalformed) {
  for (const char* bad :
       {"^", "=", "^=", "a,,b", "a,", ":1", "mlx5_0:0", "mlx5_0:x", "mlx5_0:256", "mlx5_0:1:2"}) {
    HcaFilter f;
    std::string why;
    EXPECT_FALSE(parse_hca_filter(bad, &f, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
}

GidEntry gid(int index, GidType t, std::initializer_list<uint8_t> bytes) {
  GidEntry e;
  e.index = index;
  e.type = t;
  size_t i = 0;
  for (uint8_t b : bytes) e.raw[i++] = b;
  return e;
}

TEST(IbverbsSelect, GidChoice) {
  const GidEntry ll_v1 =
      gid(0, GidType::kRoceV1, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8});
  const GidEntry ll_v2 =
      gid(1, GidType::kRoceV2, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8});
  const GidEntry v4_v1 =
      gid(2, GidType::kRoceV1, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1});
  const GidEntry v4_v2 =
      gid(3, GidType::kRoceV2, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1});
  const GidEntry v6_v2 =
      gid(4, GidType::kRoceV2, {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  std::string why;
  EXPECT_EQ(choose_gid({ll_v1, ll_v2, v4_v1, v4_v2, v6_v2}, true, -1, &why), 3);
  EXPECT_EQ(choose_gid({ll_v1, ll_v2, v4_v1, v6_v2}, true, -1, &why), 4);
  EXPECT_EQ(choose_gid({ll_v1, ll_v2, v4_v1}, true, -1, &why), 1);
  EXPECT_EQ(choose_gid({ll_v1, v4_v1}, true, -1, &why), 2);
  // rdma_rxe's table: 0 = link-local (v2 on recent kernels too), 1 = IPv4-mapped RoCE v2.
  GidEntry rxe0 = ll_v2, rxe1 = v4_v2;
  rxe0.index = 0;
  rxe1.index = 1;
  EXPECT_EQ(choose_gid({rxe0, rxe1}, true, -1, &why), 1);
  // Forced: must exist and not be empty.
  EXPECT_EQ(choose_gid({rxe0, rxe1}, true, 0, &why), 0);
  EXPECT_EQ(choose_gid({rxe0, rxe1}, true, 7, &why), -1);
  EXPECT_NE(why.find("HMC_IB_GID_INDEX=7"), std::string::npos) << why;
  // InfiniBand: index 0.
  GidEntry ib = gid(0, GidType::kIb, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9});
  EXPECT_EQ(choose_gid({ib}, false, -1, &why), 0);
  why.clear();
  EXPECT_EQ(choose_gid({}, true, -1, &why), -1);
  EXPECT_FALSE(why.empty());
}

TEST(IbverbsSelect, LinkRates) {
  EXPECT_EQ(port_bandwidth_MBps(32, 2), 12500u);   // EDR 4x: 100 Gb/s
  EXPECT_EQ(port_bandwidth_MBps(64, 2), 25000u);   // HDR 4x
  EXPECT_EQ(port_bandwidth_MBps(128, 2), 50000u);  // NDR 4x
  EXPECT_EQ(port_bandwidth_MBps(1, 1), 250u);      // SDR 1x
  EXPECT_EQ(port_bandwidth_MBps(3, 2), 0u);        // unknown speed code
  EXPECT_EQ(port_bandwidth_MBps(32, 3), 0u);       // unknown width code
}

// Ports of different names pair when their fabrics match: an IB subnet, a RoCE v2 network (the
// address and prefix of the GID's interface, or a global IPv6 GID's /64), a RoCE version where
// the GID tells no network, or HMC_IB_FABRIC's name for every port.
TEST(IbverbsSelect, FabricNamesTheNetworkAPortIsOn) {
  const uint8_t ib[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0x2a, 1, 2, 3, 4, 5, 6, 7, 8};
  const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 1, 77};
  const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9};
  const uint8_t ll[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  auto fabric = [](bool eth, GidType t, const uint8_t* gid, int prefix, const char* forced = "") {
    return fabric_of(eth, t, gid, true, network_bits(eth, t, gid, prefix), forced);
  };
  EXPECT_EQ(fabric(false, GidType::kIb, ib, -1), "ib:fe8000000000002a");
  EXPECT_EQ(fabric(true, GidType::kRoceV2, v4, 24), "roce-v2:10.0.1.0/24");
  EXPECT_EQ(fabric(true, GidType::kRoceV2, v4, 16), "roce-v2:10.0.0.0/16");
  EXPECT_EQ(fabric(true, GidType::kRoceV2, v4, 32), "roce-v2:10.0.1.77/32");
  EXPECT_EQ(fabric(true, GidType::kRoceV2, v4, 0), "roce-v2:0.0.0.0/0");
  EXPECT_EQ(fabric(true, GidType::kRoceV2, v4, 23), "roce-v2:10.0.0.0/23");
  EXPECT_EQ(fabric(true, GidType::kRoceV2, v4, -1), "roce-v2") << "the prefix is unknown";
  EXPECT_EQ(fabric(true, GidType::kRoceV2, v6, -1), "roce-v2:2001:db8:0:1::/64");
  EXPECT_EQ(fabric(true, GidType::kRoceV2, ll, -1), "roce-v2") << "link-local: no network";
  EXPECT_EQ(fabric(true, GidType::kRoceV1, v4, 24), "roce-v1");
  EXPECT_EQ(fabric(true, GidType::kRoceV2, v4, 24, "dc-east"), "dc-east");
  EXPECT_EQ(fabric(false, GidType::kIb, ib, -1, "dc-east"), "dc-east");
  EXPECT_EQ(fabric_of(true, GidType::kRoceV2, v4, false, 120, ""), "") << "no usable GID";
}

// A rail pairs with a peer's port on its network: the GIDs agree in the network's bits.
TEST(IbverbsSelect, SameNetworkComparesTheNetworkBits) {
  const uint8_t a[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  const uint8_t b[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
  const uint8_t c[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 1, 2};
  const int v24 = network_bits(true, GidType::kRoceV2, a, 24);
  EXPECT_EQ(v24, 120);
  EXPECT_TRUE(same_network(a, b, v24));
  EXPECT_FALSE(same_network(a, c, v24)) << "10.0.1.2 is not on 10.0.0.0/24";
  EXPECT_TRUE(same_network(a, c, network_bits(true, GidType::kRoceV2, a, 23)));
  EXPECT_FALSE(same_network(a, c, 127)) << "a bit inside a byte";
  EXPECT_TRUE(same_network(a, c, -1)) << "no network known: every port is taken to reach";
  EXPECT_TRUE(same_network(a, c, 0));
  EXPECT_EQ(network_bits(true, GidType::kRoceV1, a, 24), -1);
  EXPECT_EQ(network_bits(false, GidType::kIb, a, -1), 64);
}

// What hmc-info shows of a port (props.link_layer, props.details): every GID with its type and
// interface, the one in use marked, the link rate by its IBTA names, MTU, dma-buf, peermem.
TEST(IbverbsSelect, PortDescriptionForHmcInfo) {
  EXPECT_EQ(link_layer_text(false, GidType::kIb), "InfiniBand");
  EXPECT_EQ(link_layer_text(true, GidType::kRoceV2), "Ethernet (RoCE v2)");
  EXPECT_EQ(link_layer_text(true, GidType::kRoceV1), "Ethernet (RoCE v1)");
  const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  EXPECT_EQ(gid_text(v4), "::ffff:10.0.0.1");

  PortDescription d;
  d.hca = "rxe0";
  d.port = 1;
  d.ethernet = true;
  d.software = true;
  d.fw_ver = "0.0.0";
  d.node_guid = 0x505400fffe123456ull;
  d.gids = {gid(0, GidType::kRoceV2,
                {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56}),
            gid(1, GidType::kRoceV2, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1})};
  for (GidEntry& e : d.gids) e.netdev = "veth0";
  d.gid_index = 1;
  d.gid_type = GidType::kRoceV2;
  d.active_speed = 8;  // FDR10
  d.active_width = 1;  // 1X
  d.active_mtu = 5;    // IBV_MTU_4096
  d.max_mtu = 5;
  d.max_msg_sz = 8u << 20;
  d.chunk = 1u << 20;
  d.mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
  d.peermem = detect_peermem(PeermemMode::kOff, "/nonexistent").text;
  EXPECT_EQ(describe_port(d),
            "hca: rxe0 port 1, node GUID 5054:00ff:fe12:3456, firmware 0.0.0, software device (no "
            "PCI function)\n"
            "gid 0: RoCE v2 fe80::5054:ff:fe12:3456 on veth0\n"
            "gid 1: RoCE v2 ::ffff:10.0.0.1 on veth0 (in use)\n"
            "speed: 1X FDR10, 10 Gb/s of data (10 Gb/s per lane); a software device's is its "
            "interface's, not what it moves\n"
            "mtu: 4096 active, 4096 port maximum\n"
            "max message: 8 MiB (RDMA reads and writes posted in pieces of 1 MiB)\n"
            "dma-buf: no: ibv_reg_dmabuf_mr is not supported here\n"
            "peermem: off (HMC_IB_PEERMEM=off): device memory registers by dma-buf, else is "
            "staged");

  // InfiniBand: the LID, GIDs without a RoCE type; an HCA with dma-buf and a vendor's memory by
  // pointer; an unknown rate code is shown as such.
  PortDescription ib;
  ib.hca = "mlx5_0";
  ib.lid = 7;
  ib.gids = {gid(0, GidType::kIb, {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})};
  ib.gid_index = 0;
  ib.active_speed = 3;
  ib.active_width = 2;
  ib.active_mtu = 5;
  ib.max_mtu = 5;
  ib.dmabuf = true;
  ib.mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
  ib.peermem = detect_peermem(PeermemMode::kOn, "/nonexistent").text;
  std::string t = describe_port(ib);
  EXPECT_NE(t.find("\nlid: 7\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\ngid 0: fe80::102:304:506:708 (in use)\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\nspeed: unknown (speed code 3, width code 2)\n"), std::string::npos) << t;
  EXPECT_NE(t.find("\ndma-buf: yes"), std::string::npos) << t;
  EXPECT_NE(t.find("\npeermem: yes: cuda (assumed: HMC_IB_PEERMEM=on)"), std::string::npos) << t;
  EXPECT_EQ(t.find("max message"), std::string::npos) << "no max_msg_sz, no line: " << t;
  ib.active_speed = 32;
  EXPECT_NE(describe_port(ib).find("\nspeed: 4X EDR, 100 Gb/s of data (25 Gb/s per lane)\n"),
            std::string::npos);
}

// HMC_IB_PEERMEM and the detection of peer-memory modules, over a made-up sysfs.
TEST(IbverbsSelect, PeermemSettingAndDetection) {
  PeermemMode m = PeermemMode::kOff;
  EXPECT_TRUE(parse_peermem(" AUTO ", &m));
  EXPECT_EQ(m, PeermemMode::kAuto);
  EXPECT_TRUE(parse_peermem("on", &m));
  EXPECT_EQ(m, PeermemMode::kOn);
  EXPECT_TRUE(parse_peermem("0", &m));
  EXPECT_EQ(m, PeermemMode::kOff);
  EXPECT_TRUE(parse_peermem("yes", &m));
  EXPECT_EQ(m, PeermemMode::kOn);
  for (const char* bad : {"", "maybe", "2", "onn"}) EXPECT_FALSE(parse_peermem(bad, &m)) << bad;

  char tmpl[] = "/tmp/hmc-sysfs-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  auto make = [&](const std::string& path) {
    std::string dir = root;
    for (size_t at = 1; (at = path.find('/', at)) != std::string::npos; ++at) {
      dir = root + path.substr(0, at);
      mkdir(dir.c_str(), 0755);
    }
    std::ofstream(root + path) << "1.0\n";
  };
  const uint64_t cuda = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA);
  const uint64_t rocm = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_ROCM);

  // Nothing loaded: none (auto), CUDA assumed (on), none (off).
  Peermem p = detect_peermem(PeermemMode::kAuto, root);
  EXPECT_EQ(p.ifaces, 0u);
  EXPECT_EQ(p.text.rfind("no: no peer-memory module", 0), 0u) << p.text;
  EXPECT_EQ(detect_peermem(PeermemMode::kOn, root).ifaces, cuda);
  EXPECT_EQ(detect_peermem(PeermemMode::kOff, root).ifaces, 0u);

  // MLNX_OFED's peer-memory client of nv_peer_mem, then the modules by name.
  make("/kernel/mm/memory_peers/nv_mem/version");
  p = detect_peermem(PeermemMode::kAuto, root);
  EXPECT_EQ(p.ifaces, cuda);
  EXPECT_NE(p.text.find("cuda (peer-memory client nv_mem)"), std::string::npos) << p.text;
  make("/module/nvidia_peermem/refcnt");
  p = detect_peermem(PeermemMode::kAuto, root);
  EXPECT_EQ(p.text,
            "yes: cuda (nvidia_peermem is loaded); puts and gets of registered device "
            "memory by pointer");
  // AMD's client adds ROCm; off still says no to both.
  make("/kernel/mm/memory_peers/amdkfd/version");
  p = detect_peermem(PeermemMode::kAuto, root);
  EXPECT_EQ(p.ifaces, cuda | rocm);
  EXPECT_NE(p.text.find("rocm (peer-memory client amdkfd)"), std::string::npos) << p.text;
  p = detect_peermem(PeermemMode::kOff, root);
  EXPECT_EQ(p.ifaces, 0u);
  EXPECT_EQ(p.text.rfind("off (HMC_IB_PEERMEM=off)", 0), 0u) << p.text;
  std::filesystem::remove_all(root);
}

// The data path's message headers as a peer could send them, and mutations of them (a bounded
// fuzz of decode_message): nothing it accepts breaks what the endpoint relies on, and the
// rendezvous key messages' own checks hold. The same checks run under libFuzzer in
// tests/fuzz/ibverbs (docs/testing.md#fuzzing).
TEST(IbverbsWireFormat, MessageHeadersFuzzed) {
  const size_t eager = 8192;
  auto msg = [](MsgType t, uint64_t len, uint64_t addr, uint32_t key_len, size_t payload) {
    MsgHeader h;
    h.type = static_cast<uint8_t>(t);
    h.len = len;
    h.addr = addr;
    h.rkey = 0x1234;
    h.key_len = key_len;
    h.cookie = 77;
    std::vector<uint8_t> b(sizeof h + payload, 0xab);
    std::memcpy(b.data(), &h, sizeof h);
    return b;
  };
  MsgHeader h;
  std::vector<uint32_t> rails;
  std::string why;
  auto ok = [&](const std::vector<uint8_t>& b) {
    return decode_message(b.data(), b.size(), eager, &h, &rails, &why);
  };
  // Valid ones.
  EXPECT_TRUE(ok(msg(MsgType::kEager, 100, 0, 0, 100))) << why;
  EXPECT_TRUE(ok(msg(MsgType::kRts, 1u << 30, 4096, 16u << 20, 0))) << why;
  EXPECT_EQ(h.key_len, 16u << 20);
  EXPECT_TRUE(ok(msg(MsgType::kRts, 1u << 30, 4096, 0, 0))) << why;
  EXPECT_TRUE(ok(msg(MsgType::kRndvKey, 16u << 20, 32u << 20, 0, 0))) << why;
  EXPECT_TRUE(ok(msg(MsgType::kRndvKey, 0, 32u << 20, 0, 0))) << "no more keys: " << why;
  EXPECT_TRUE(ok(msg(MsgType::kRndvAck, 0, 16u << 20, 0, 0))) << why;
  // With keys on the sender's rails after the header.
  EXPECT_TRUE(ok(msg(MsgType::kRndvKey, 16u << 20, 0, 0, 8))) << why;
  EXPECT_EQ(rails, (std::vector<uint32_t>{0xabababab, 0xabababab}));
  EXPECT_TRUE(ok(msg(MsgType::kRts, 1u << 30, 0, 1u << 24, 4 * kMaxRails))) << why;
  EXPECT_EQ(rails.size(), kMaxRails);
  // The new messages' refusals: a payload that is no list of keys or too long, a range that
  // wraps, an RTS key beyond the message.
  EXPECT_FALSE(ok(msg(MsgType::kRndvKey, 16u << 20, 0, 0, 6)));
  EXPECT_FALSE(ok(msg(MsgType::kRts, 1u << 30, 0, 1u << 24, 4 * kMaxRails + 4)));
  EXPECT_FALSE(ok(msg(MsgType::kRndvKey, 2, ~uint64_t{0}, 0, 0)));
  EXPECT_FALSE(ok(msg(MsgType::kRndvAck, 0, 0, 0, 4)));
  EXPECT_FALSE(ok(msg(MsgType::kRts, 1u << 20, 0, 1u << 20, 0)));
  EXPECT_FALSE(ok(msg(MsgType::kRts, 100, 0, 0, 0))) << "an RTS of an eager size";
  EXPECT_FALSE(ok(msg(static_cast<MsgType>(10), 0, 0, 0, 0)));
  EXPECT_NE(why.find("unknown type 10"), std::string::npos) << why;
  EXPECT_FALSE(ok(std::vector<uint8_t>(47)));

  std::vector<std::vector<uint8_t>> seeds = {
      msg(MsgType::kEager, 100, 0, 0, 100),     msg(MsgType::kRts, 1u << 30, 4096, 1u << 24, 0),
      msg(MsgType::kFin, 0, 0, 0, 0),           msg(MsgType::kCredit, 0, 0, 0, 0),
      msg(MsgType::kNotify, 5, 0, 0, 0),        msg(MsgType::kStagedRts, 1u << 20, 0, 0, 0),
      msg(MsgType::kFrag, 8192, 0, 0, 8192),    msg(MsgType::kRndvKey, 1u << 24, 1u << 24, 0, 8),
      msg(MsgType::kRndvAck, 0, 1u << 24, 0, 0)};
  uint64_t x = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  size_t accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::vector<uint8_t> b = seeds[next() % seeds.size()];
    const int edits = 1 + static_cast<int>(next() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (next() % 4) {
        case 0: b[next() % b.size()] ^= static_cast<uint8_t>(1u << (next() % 8)); break;
        case 1:
          b[next() % std::min<size_t>(b.size(), sizeof(MsgHeader))] = static_cast<uint8_t>(next());
          break;
        case 2: b.resize(next() % (sizeof(MsgHeader) + eager + 16)); break;
        default: b[0] = static_cast<uint8_t>(next() % 12); break;
      }
      if (b.empty()) b.push_back(0);
    }
    if (!ok(b)) {
      EXPECT_FALSE(why.empty());
      continue;
    }
    ++accepted;
    const size_t payload = b.size() - sizeof(MsgHeader);
    const auto t = static_cast<MsgType>(h.type);
    ASSERT_GE(h.type, 1);
    ASSERT_LE(h.type, 9);
    if (t == MsgType::kEager || t == MsgType::kFrag) {
      ASSERT_EQ(h.len, payload);
      ASSERT_LE(h.len, eager);
    } else if (t == MsgType::kRts || t == MsgType::kRndvKey) {
      ASSERT_EQ(payload % 4, 0u);
      ASSERT_EQ(rails.size(), payload / 4);
      ASSERT_LE(rails.size(), kMaxRails);
    } else {
      ASSERT_EQ(payload, 0u) << "type " << int{h.type};
    }
    if (t == MsgType::kRts) {
      ASSERT_TRUE(h.len == 0 || h.len > eager);
      ASSERT_TRUE(h.key_len == 0 || h.key_len < h.len);
    }
    if (t == MsgType::kRndvKey || t == MsgType::kRts) {
      ASSERT_GE(h.addr + h.len, h.addr);
    }
  }
  EXPECT_GT(accepted, 1000u) << "the mutations should leave many valid";
}

// A peer of another wire version is refused where it first shows: its connection handle.
TEST(IbverbsWireFormat, OtherVersionsAreRefused) {
  ConnHandle c;
  auto* a = reinterpret_cast<sockaddr_in*>(&c.addr);
  a->sin_family = AF_INET;
  a->sin_port = htons(5000);
  c.addr_len = sizeof(sockaddr_in);
  uint8_t b[kHandleSize];
  encode_handle(c, b);
  ConnHandle out;
  std::string why;
  EXPECT_TRUE(decode_handle(b, sizeof b, &out, &why)) << why;
  b[4] = 3;  // version 3: rendezvous keys were whole-buffer
  EXPECT_FALSE(decode_handle(b, sizeof b, &out, &why));
  EXPECT_NE(why.find("version 3, this plugin speaks " + std::to_string(kWireVersion)),
            std::string::npos)
      << why;
}
#endif  // HMC_TEST_IBVERBS_SELECT

// *limit: RLIMIT_MEMLOCK in bytes, where it is finite and from lo_mib to hi_mib MiB
// (tests/rdma/memlock_check sets it); elsewhere the child skips, saying why.
void memlock_limit_within(size_t lo_mib, size_t hi_mib, size_t* limit) {
  rlimit rl{};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &rl), 0);
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur < (lo_mib << 20) || rl.rlim_cur > (hi_mib << 20))
    skip_child(
        std::string("RLIMIT_MEMLOCK is not ") +
        (lo_mib == 0 ? "low" : std::to_string(lo_mib) + " to " + std::to_string(hi_mib) + " MiB") +
        " here (tests/rdma/memlock_check sets it)");
  *limit = rl.rlim_cur;
}

// The tests of the ibverbs plugin's contexts, with its table in t (skipped where the plugin was
// not built).
class IbverbsPlugin : public ::testing::Test {
 protected:
  void SetUp() override { NET_REQUIRE_PLUGIN("ibverbs", &t); }
  // body(limit) in a child process, where RLIMIT_MEMLOCK is `limit` bytes, from lo_mib to
  // hi_mib MiB (memlock_limit_within).
  void with_memlock_limit(size_t lo_mib, size_t hi_mib, const std::function<void(size_t)>& body) {
    in_child([&] {
      size_t limit = 0;
      ASSERT_NO_FATAL_FAILURE(memlock_limit_within(lo_mib, hi_mib, &limit));
      body(limit);
    });
  }

  const hmc_net_plugin_v2_t* t = nullptr;
};

// Without any RDMA device (or rdma-core), init says so and the plugin is skipped; a bad setting
// is an error that names it. Runs everywhere.
TEST_F(IbverbsPlugin, NoDeviceOrBadSettingsAreReported) {
  in_child([&] {
    {
      Host h(Cfg{{"HMC_IBVERBS_LIBRARY", "libdoes-not-exist.so.1"}});
      hmc_net_ctx_t* c = nullptr;
      EXPECT_EQ(t->init(h.services(), &c), HMC_PLUGIN_ERR_NO_DEVICE);
      EXPECT_TRUE(h.logged("libdoes-not-exist.so.1")) << h.all_logs();
    }
    for (const auto& kv : std::vector<std::pair<std::string, std::string>>{
             {"HMC_IB_HCA", "mlx5_0:x"},
             {"HMC_IB_GID_INDEX", "-1"},
             {"HMC_IB_RETRY_CNT", "8"},
             {"HMC_IB_EAGER_LIMIT", "1G"},
             {"HMC_IB_CREDITS", "2"},
             {"HMC_IB_TIMEOUT", "0"},
             {"HMC_IB_PEERMEM", "maybe"},
             {"HMC_IB_FABRIC", std::string(64, 'f')}}) {
      Host h(Cfg{{kv.first, kv.second}});
      hmc_net_ctx_t* c = nullptr;
      EXPECT_EQ(t->init(h.services(), &c), HMC_PLUGIN_ERR_CONFIG) << kv.first;
      EXPECT_TRUE(h.logged("invalid " + kv.first)) << h.all_logs();
    }
    // An unknown name selects nothing: no device, and the reason names the setting.
    Host h(Cfg{{"HMC_IB_HCA", "=no_such_hca"}});
    hmc_net_ctx_t* c = nullptr;
    hmc_plugin_status_t st = t->init(h.services(), &c);
    EXPECT_EQ(st, HMC_PLUGIN_ERR_NO_DEVICE) << h.all_logs();
    if (st == HMC_PLUGIN_SUCCESS) t->finalize(c);
  });
}

// Registrations refused for pinned memory (RLIMIT_MEMLOCK; run by tests/rdma/memlock_check with
// a low limit and CAP_IPC_LOCK dropped, skipped elsewhere): the test pins all but ~600 KiB of what
// the limit allows, then moves 1 MiB by put, get and message between unregistered buffers. Each
// refusal is logged naming the limit; puts and gets go through the bounce buffers, the message
// through the eager buffers; every byte arrives.
TEST_F(IbverbsPlugin, RefusedRegistrationsAreStaged) {
  with_memlock_limit(0, 64, [&](size_t limit) {
    constexpr size_t kLen = 1u << 20;
    const Cfg cfg = {{"HMC_IB_EAGER_LIMIT", "8K"}};
    LocalPair p(t, cfg, 0);
    ASSERT_NO_FATAL_FAILURE(p.connect());
    std::vector<uint8_t> region(kLen, 0);
    std::vector<uint8_t> rkey;
    hmc_net_mr_t* mr = reg(t, p.a, 0, region.data(), kLen, HMC_NET_ACCESS_LOCAL | kRemoteRw, &rkey);
    ASSERT_NE(mr, nullptr) << p.ha.all_logs();
    // Pin what the limit still allows, less room for the bounce buffers.
    size_t pinned_kib = 0;
    {
      std::ifstream st("/proc/self/status");
      std::string line;
      while (std::getline(st, line))
        if (line.rfind("VmPin:", 0) == 0) pinned_kib = std::stoul(line.substr(6));
    }
    const size_t room = 600u << 10;
    const size_t pinned = pinned_kib << 10;
    if (limit < pinned + room + 4096)
      skip_child("RLIMIT_MEMLOCK (" + std::to_string(limit) + " bytes) leaves no room " +
                 "beside the plugin's own buffers (" + std::to_string(pinned) + " bytes pinned)");
    const size_t filler_len = (limit - pinned - room) & ~size_t{4095};
    void* filler =
        mmap(nullptr, filler_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(filler, MAP_FAILED);
    std::vector<uint8_t> unused_key;
    hmc_net_mr_t* fmr = reg(t, p.b, 0, filler, filler_len, HMC_NET_ACCESS_LOCAL, &unused_key);
    ASSERT_NE(fmr, nullptr) << p.hb.all_logs();

    hmc_net_rkey_t* k = nullptr;
    ASSERT_EQ(t->rkey_unpack(p.eb, rkey.data(), rkey.size(), &k), HMC_PLUGIN_SUCCESS);
    std::vector<uint8_t> src(kLen), dst(kLen, 0);
    fill(src.data(), kLen, 71);
    hmc_net_request_t* r = nullptr;
    ASSERT_EQ(
        t->iput(p.eb, src.data(), kLen, nullptr, reinterpret_cast<uintptr_t>(region.data()), k, &r),
        HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS) << p.hb.all_logs();
    EXPECT_EQ(first_mismatch(region.data(), kLen, 71), -1) << "put";
    fill(region.data(), kLen, 72);
    ASSERT_EQ(
        t->iget(p.eb, dst.data(), kLen, nullptr, reinterpret_cast<uintptr_t>(region.data()), k, &r),
        HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS) << p.hb.all_logs();
    EXPECT_EQ(first_mismatch(dst.data(), kLen, 72), -1) << "get";
    EXPECT_TRUE(p.hb.logged("RLIMIT_MEMLOCK is " + std::to_string(limit) + " bytes"))
        << p.hb.all_logs();
    EXPECT_TRUE(p.hb.logged("bounce buffers")) << p.hb.all_logs();

    std::fill(dst.begin(), dst.end(), 0);
    hmc_net_request_t *rs = nullptr, *rr = nullptr;
    ASSERT_EQ(t->irecv(p.ea, dst.data(), kLen, nullptr, 9, &rr), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(t->isend(p.eb, src.data(), kLen, nullptr, 9, &rs), HMC_PLUGIN_SUCCESS);
    size_t got = 0;
    EXPECT_EQ(p.wait(rs), HMC_PLUGIN_SUCCESS) << p.hb.all_logs();
    EXPECT_EQ(p.wait(rr, &got), HMC_PLUGIN_SUCCESS) << p.ha.all_logs();
    EXPECT_EQ(got, kLen);
    EXPECT_EQ(first_mismatch(dst.data(), kLen, 71), -1) << "message";
    EXPECT_TRUE(p.hb.logged("eager buffers")) << p.hb.all_logs();

    EXPECT_EQ(t->rkey_release(k), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(deregister_memory(t, p.b, 0, fmr), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(deregister_memory(t, p.a, 0, mr), HMC_PLUGIN_SUCCESS);
    munmap(filler, filler_len);
  });
}

// A rendezvous whose later segment the limit refuses while the reader still reads an earlier
// one (run by tests/rdma/memlock_check with RLIMIT_MEMLOCK at 24 MiB and CAP_IPC_LOCK dropped,
// skipped elsewhere): the test leaves room for about one 16 MiB segment, the registration cache
// off so that a read segment is deregistered at once. The sender waits for the reader's
// acknowledgement, registers the next segment then, and the 64 MiB arrive byte-exact.
TEST_F(IbverbsPlugin, RefusedSegmentsWaitForTheReader) {
  with_memlock_limit(20, 64, [&](size_t limit) {
    constexpr size_t kLen = 64u << 20;
    const Cfg cfg = {
        {"HMC_IB_EAGER_LIMIT", "8K"}, {"HMC_IB_MR_CACHE", "0"}, {"HMC_IB_CHUNK", "64K"}};
    LocalPair p(t, cfg, 0);
    ASSERT_NO_FATAL_FAILURE(p.connect());
    size_t pinned_kib = 0;
    {
      std::ifstream st("/proc/self/status");
      std::string line;
      while (std::getline(st, line))
        if (line.rfind("VmPin:", 0) == 0) pinned_kib = std::stoul(line.substr(6));
    }
    // Room for one segment and the reader's pieces (16 x 64 KiB), not for two segments.
    const size_t room = (16u << 20) + (3u << 20);
    const size_t pinned = pinned_kib << 10;
    ASSERT_GT(limit, pinned + room) << "the plugin's own buffers take " << pinned;
    const size_t filler_len = (limit - pinned - room) & ~size_t{4095};
    void* filler =
        mmap(nullptr, filler_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(filler, MAP_FAILED);
    std::vector<uint8_t> unused_key;
    hmc_net_mr_t* fmr = nullptr;
    if (filler_len > 0) {
      fmr = reg(t, p.b, 0, filler, filler_len, HMC_NET_ACCESS_LOCAL, &unused_key);
      ASSERT_NE(fmr, nullptr) << p.hb.all_logs();
    }
    std::vector<uint8_t> src(kLen), dst(kLen, 0);
    fill(src.data(), kLen, 95);
    hmc_net_request_t *rs = nullptr, *rr = nullptr;
    ASSERT_EQ(t->irecv(p.ea, dst.data(), kLen, nullptr, 5, &rr), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(t->isend(p.eb, src.data(), kLen, nullptr, 5, &rs), HMC_PLUGIN_SUCCESS);
    size_t got = 0;
    EXPECT_EQ(p.wait(rs, nullptr, 60), HMC_PLUGIN_SUCCESS) << p.hb.all_logs();
    EXPECT_EQ(p.wait(rr, &got, 60), HMC_PLUGIN_SUCCESS) << p.ha.all_logs();
    EXPECT_EQ(got, kLen);
    EXPECT_EQ(first_mismatch(dst.data(), kLen, 95), -1);
    EXPECT_TRUE(p.hb.logged("retried once the reader has read more")) << p.hb.all_logs();
    EXPECT_FALSE(p.hb.logged("eager buffers")) << "not staged: " << p.hb.all_logs();
    if (fmr != nullptr) {
      EXPECT_EQ(deregister_memory(t, p.b, 0, fmr), HMC_PLUGIN_SUCCESS);
    }
    munmap(filler, filler_len);
  });
}

// ---------------------------------------------------------------------------------------------
// Faults between two "hosts": the test bed's veth topology (rxe0 on veth0, rxe1 on veth1; skipped
// elsewhere). A listener on the first host's device, a connector on the second's, in two
// processes; the side channel runs over 127.0.0.1, so only the RDMA traffic crosses the veth.

std::string testbed(const std::string& name) {
  const char* v = std::getenv(("RDMA_TESTBED_" + name).c_str());
  return v != nullptr ? v : "";
}

// parent(side, child's pid) listens with parent_cfg; child(side) connects with child_cfg in a
// child process, which must exit 0 (or die of killed_by) within reap_s seconds of the parent's
// end. timeout_ms: the host's timeout (HMC_TIMEOUT_MS) of both sides.
void across(const hmc_net_plugin_v2_t* t, const Cfg& parent_cfg, const Cfg& child_cfg,
            uint32_t timeout_ms, const std::function<void(Side&, pid_t)>& parent,
            const std::function<void(Side&)>& child, int killed_by = 0, int reap_s = 30) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(sv[0]);
    int code = 100;
    {
      Side s(t, child_cfg, 0, sv[1], timeout_ms);
      std::string err = s.setup(false);
      if (err.empty()) {
        child(s);
        code = ::testing::Test::HasFailure() ? 1 : 0;
      } else {
        std::fprintf(stderr, "child setup: %s\n", err.c_str());
      }
    }
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(code);
  }
  ::close(sv[1]);
  {
    Side s(t, parent_cfg, 0, sv[0], timeout_ms);
    std::string err = s.setup(true);
    EXPECT_EQ(err, "");
    if (err.empty()) parent(s, pid);
  }
  bool timed_out = false;
  int st = reap(pid, sv[0], reap_s, &timed_out);
  ::close(sv[0]);
  ASSERT_FALSE(timed_out) << "the child side did not finish";
  if (killed_by != 0) {
    EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == killed_by) << "child status " << st;
  } else {
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the child side failed (above)";
  }
}

class IbverbsWire : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testbed("TOPOLOGY") != "veth")
      GTEST_SKIP() << "needs the RDMA test bed's veth topology (tests/rdma/guest run --topology "
                      "veth)";
    NET_REQUIRE_PLUGIN("ibverbs", &t_);
    dev0_ = testbed("HOST0_DEVS").substr(0, testbed("HOST0_DEVS").find(' '));
    dev1_ = testbed("HOST1_DEVS").substr(0, testbed("HOST1_DEVS").find(' '));
    netdev0_ = testbed("NETDEV_" + dev0_);
    ASSERT_FALSE(dev0_.empty() || dev1_.empty() || netdev0_.empty());
  }

  // parent(side, child's pid) listens on the first host's device; child(side) connects from the
  // second's in a child process, which must exit 0 (or die of killed_by).
  void across(const std::function<void(Side&, pid_t)>& parent,
              const std::function<void(Side&)>& child, int killed_by = 0) {
    net_test::across(t_, Cfg{{"HMC_IB_HCA", "=" + dev0_}}, Cfg{{"HMC_IB_HCA", "=" + dev1_}},
                     kTimeoutMs, parent, child, killed_by);
  }

  static constexpr uint32_t kTimeoutMs = 5000;  // the host's timeout (HMC_TIMEOUT_MS)
  const hmc_net_plugin_v2_t* t_ = nullptr;
  std::string dev0_, dev1_, netdev0_;
};

// The peer process is SIGKILLed while the listener reads its 64 MiB message across the wire:
// the read and an unmatched receive end with PEER_LOST within the host's timeout, the process
// carries on, and later posts fail with PEER_LOST.
TEST_F(IbverbsWire, PeerKilledMidTransfer) {
  constexpr size_t kBig = 64u << 20;
  across(
      [&](Side& s, pid_t child) {
        std::vector<uint8_t> big(kBig), small(64);
        hmc_net_request_t* r_big = s.irecv(big.data(), kBig, 1);
        hmc_net_request_t* r_never = s.irecv(small.data(), small.size(), 2);
        ASSERT_TRUE(r_big && r_never);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());  // the send is posted and being read
        for (int i = 0; i < 200; ++i) s.t()->progress(s.ctx());
        ::kill(child, SIGKILL);
        const uint64_t t0 = mono_ns();
        auto st = s.wait_all({r_big, r_never}, nullptr, 20);
        const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
        EXPECT_EQ(st[0], HMC_PLUGIN_ERR_PEER_LOST) << "the large receive";
        EXPECT_EQ(st[1], HMC_PLUGIN_ERR_PEER_LOST) << "the unmatched receive";
        EXPECT_LT(secs, kTimeoutMs / 1000.0) << "the death was noticed after " << secs << " s";
        hmc_net_request_t* r = nullptr;
        EXPECT_EQ(s.t()->isend(s.ep(), small.data(), small.size(), nullptr, 3, &r),
                  HMC_PLUGIN_ERR_PEER_LOST);
      },
      [&](Side& s) {
        std::vector<uint8_t> big(kBig, 0x5a);
        ASSERT_TRUE(s.await());
        ASSERT_NE(s.isend(big.data(), kBig, 1), nullptr);
        for (int i = 0; i < 200; ++i) s.t()->progress(s.ctx());
        ASSERT_TRUE(s.signal());
        for (;;) {
          s.t()->progress(s.ctx());
          ::usleep(1000);
        }
      },
      SIGKILL);
}

// A receive waits 3 s for its message (the keepalive probes go meanwhile: the peer's HCA takes
// them, and nothing is in flight long enough to look stalled): it succeeds, and so does a put
// issued after the sender sat idle as long.
// Rendezvous messages larger than a key segment (16 MiB), from buffers the plugin registers
// itself: the RTS carries the first segment's key and the others follow as the reads go. A
// receive posted first; one posted after the RTS and every key it could get arrived (kept with
// the unexpected announcement); one shorter than the message (truncated: it reads only what it
// keeps). Byte-exact, in both directions' roles.
TEST_F(IbverbsWire, LargeMessagesGoBySegments) {
  constexpr size_t kLen = (40u << 20) + 3, kShort = 20u << 20;
  across(
      [&](Side& s, pid_t) {
        std::vector<uint8_t> a(kLen, 0), b(kLen, 0), c(kShort, 0);
        hmc_net_request_t* ra = s.irecv(a.data(), kLen, 1);
        ASSERT_NE(ra, nullptr);
        ASSERT_TRUE(s.signal());
        size_t n = 0;
        EXPECT_EQ(s.wait(ra, &n), HMC_PLUGIN_SUCCESS) << s.host().all_logs();
        EXPECT_EQ(n, kLen);
        EXPECT_EQ(first_mismatch(a.data(), kLen, 81), -1) << "posted first";
        // The second message's RTS and keys arrive before its receive is posted.
        const uint64_t until = mono_ns() + 500000000ull;
        while (mono_ns() < until) s.t()->progress(s.ctx());
        EXPECT_EQ(s.wait(s.irecv(b.data(), kLen, 2), &n), HMC_PLUGIN_SUCCESS)
            << s.host().all_logs();
        EXPECT_EQ(n, kLen);
        EXPECT_EQ(first_mismatch(b.data(), kLen, 82), -1) << "posted late";
        EXPECT_EQ(s.wait(s.irecv(c.data(), kShort, 3), &n), HMC_PLUGIN_ERR_TRUNCATED)
            << s.host().all_logs();
        EXPECT_EQ(n, kLen);
        EXPECT_EQ(first_mismatch(c.data(), kShort, 83), -1) << "truncated";
      },
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs(3, std::vector<uint8_t>(kLen));
        for (size_t i = 0; i < bufs.size(); ++i) fill(bufs[i].data(), kLen, 81 + i);
        ASSERT_TRUE(s.await());
        std::vector<hmc_net_request_t*> reqs;
        for (size_t i = 0; i < bufs.size(); ++i)
          reqs.push_back(s.isend(bufs[i].data(), kLen, 1 + i));
        for (auto st : s.wait_all(reqs, nullptr, 60)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
      });
}

TEST_F(IbverbsWire, IdlePeersAreNotLost) {
  constexpr size_t kLen = 1u << 20;
  across(
      [&](Side& s, pid_t) {
        std::vector<uint8_t> buf(kLen);
        hmc_net_request_t* r = s.irecv(buf.data(), kLen, 1);
        ASSERT_NE(r, nullptr);
        ASSERT_TRUE(s.signal());
        EXPECT_EQ(s.wait(r, nullptr, 20), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(buf.data(), kLen, 81), -1);
        ASSERT_TRUE(s.await());
      },
      [&](Side& s) {
        std::vector<uint8_t> src(kLen);
        fill(src.data(), kLen, 81);
        ASSERT_TRUE(s.await());
        const uint64_t until = mono_ns() + 3000000000ull;
        while (mono_ns() < until) {
          s.t()->progress(s.ctx());
          ::usleep(1000);
        }
        EXPECT_EQ(s.wait(s.isend(src.data(), kLen, 1), nullptr, 20), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
      });
}

// Vectored puts and gets of small pieces go in chains of work requests, only the last one
// signaled. A chain the owner's HCA refuses (a region deregistered after its key was sent: the
// initiator's own check passes) ends the list with REMOTE, its other pieces flushed with it; the
// put/get queue pair is replaced, and the next lists, put and got back, are byte-exact.
TEST_F(IbverbsWire, VectoredChainRefusedByTheHca) {
  constexpr size_t kPieces = 300, kStride = 96, kPiece = 40, kRegion = kPieces * kStride;
  auto iov = [&](uint8_t* local, uint64_t remote) {
    std::vector<hmc_net_iov_t> v;
    for (size_t i = 0; i < kPieces; ++i)
      v.push_back({local + i * kPiece, kPiece, nullptr, remote + i * kStride + i % 7});
    return v;
  };
  auto vec = [&](Side& s, bool put, const std::vector<hmc_net_iov_t>& v, hmc_net_rkey_t* k) {
    hmc_net_request_t* r = nullptr;
    hmc_plugin_status_t st = put ? s.t()->iput_v(s.ep(), v.data(), v.size(), k, &r)
                                 : s.t()->iget_v(s.ep(), v.data(), v.size(), k, &r);
    return st != HMC_PLUGIN_SUCCESS ? st : s.wait(r, nullptr, 20);
  };
  across(
      [&](Side& s, pid_t) {
        std::vector<uint8_t> region(kRegion, 0), dead(kRegion, 0);
        std::vector<uint8_t> k_live, k_dead;
        hmc_net_mr_t* live = reg(s, region.data(), kRegion, kRemoteRw, &k_live);
        hmc_net_mr_t* gone = reg(s, dead.data(), kRegion, kRemoteRw, &k_dead);
        ASSERT_TRUE(live && gone);
        ASSERT_EQ(deregister_memory(s.t(), s.ctx(), s.dev(), gone), HMC_PLUGIN_SUCCESS);
        send_region(s, reinterpret_cast<uintptr_t>(region.data()), k_live);
        send_region(s, reinterpret_cast<uintptr_t>(dead.data()), k_dead);
        ASSERT_TRUE(s.await());  // the peer's lists are done
        std::vector<uint8_t> want(kRegion, 0);
        std::vector<uint8_t> src(kPieces * kPiece);
        fill(src.data(), src.size(), 61);
        for (size_t i = 0; i < kPieces; ++i)
          std::memcpy(want.data() + i * kStride + i % 7, src.data() + i * kPiece, kPiece);
        EXPECT_TRUE(want == region) << "the put's pieces are not where they belong";
        EXPECT_TRUE(std::all_of(dead.begin(), dead.end(), [](uint8_t b) { return b == 0; }))
            << "the refused region was written";
        withdraw_region(s, live);
      },
      [&](Side& s) {
        RemoteRegion live, dead;
        hmc_net_rkey_t *k_live = recv_key(s, &live), *k_dead = recv_key(s, &dead);
        ASSERT_TRUE(k_live && k_dead);
        std::vector<uint8_t> src(kPieces * kPiece), back(kPieces * kPiece, 0);
        fill(src.data(), src.size(), 61);
        EXPECT_EQ(vec(s, true, iov(src.data(), dead.base), k_dead), HMC_PLUGIN_ERR_REMOTE);
        EXPECT_EQ(vec(s, false, iov(back.data(), dead.base), k_dead), HMC_PLUGIN_ERR_REMOTE);
        EXPECT_EQ(vec(s, true, iov(src.data(), live.base), k_live), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(vec(s, false, iov(back.data(), live.base), k_live), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(back.data(), back.size(), 61), -1) << "got back";
        EXPECT_EQ(s.t()->rkey_release(k_live), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(s.t()->rkey_release(k_dead), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      });
}

// The first host's link goes down (ip link set veth0 down) while 16 MiB messages cross it: on
// both sides the requests still pending end with PEER_LOST within the host's timeout (the
// reader's RDMA READs exhaust their retries; the sender, with nothing in flight while it waits
// for the reader's answer, learns it from its keepalive probe), both processes carry on.
TEST_F(IbverbsWire, LinkDownUnderTraffic) {
  constexpr size_t kLen = 16u << 20;
  constexpr int kN = 6;
  const std::string down = "ip link set " + netdev0_ + " down";
  const std::string up = "ip link set " + netdev0_ + " up";
  across(
      [&](Side& s, pid_t) {
        std::vector<std::vector<uint8_t>> bufs(kN, std::vector<uint8_t>(kLen));
        std::vector<hmc_net_request_t*> reqs;
        for (int i = 0; i < kN; ++i) reqs.push_back(s.irecv(bufs[i].data(), kLen, 10 + i));
        ASSERT_TRUE(s.signal());
        EXPECT_EQ(s.wait(reqs[0], nullptr, 30), HMC_PLUGIN_SUCCESS) << "the first message";
        ASSERT_EQ(std::system(down.c_str()), 0) << down;
        const uint64_t t0 = mono_ns();
        ASSERT_TRUE(s.signal());  // over the socketpair: not through the link
        std::vector<hmc_net_request_t*> rest(reqs.begin() + 1, reqs.end());
        auto st = s.wait_all(rest, nullptr, 20);
        const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
        EXPECT_EQ(std::system(up.c_str()), 0) << up;
        int lost = 0;
        for (size_t i = 0; i < st.size(); ++i) {
          EXPECT_TRUE(st[i] == HMC_PLUGIN_SUCCESS || st[i] == HMC_PLUGIN_ERR_PEER_LOST)
              << "receive " << i + 1 << ": " << st[i];
          lost += st[i] == HMC_PLUGIN_ERR_PEER_LOST;
        }
        EXPECT_GT(lost, 0) << "every message arrived before the link went down";
        EXPECT_LT(secs, kTimeoutMs / 1000.0) << "the receiver noticed after " << secs << " s";
        ASSERT_TRUE(s.await());  // the sender's verdict is in
      },
      [&](Side& s) {
        std::vector<uint8_t> src(kLen, 0x3c);
        std::vector<hmc_net_request_t*> reqs;
        ASSERT_TRUE(s.await());
        for (int i = 0; i < kN; ++i) reqs.push_back(s.isend(src.data(), kLen, 10 + i));
        ASSERT_TRUE(s.await(nullptr, 60));  // the link is down
        const uint64_t t0 = mono_ns();
        auto st = s.wait_all(reqs, nullptr, 20);
        const double secs = static_cast<double>(mono_ns() - t0) / 1e9;
        EXPECT_EQ(st.back(), HMC_PLUGIN_ERR_PEER_LOST) << "the last send";
        for (size_t i = 0; i < st.size(); ++i)
          EXPECT_TRUE(st[i] == HMC_PLUGIN_SUCCESS || st[i] == HMC_PLUGIN_ERR_PEER_LOST)
              << "send " << i << ": " << st[i];
        EXPECT_LT(secs, kTimeoutMs / 1000.0) << "the sender noticed after " << secs << " s";
        ASSERT_TRUE(s.signal());
      });
}

// ---------------------------------------------------------------------------------------------
// Rails: the test bed's rails topology (two veth pairs; the first host has rxe0 and rxe2, the
// second rxe1 and rxe3; skipped elsewhere). Each side selects both its ports and HMC_IB_RAILS=2;
// an endpoint on the first port stripes puts and gets over both.

uint64_t tx_bytes(const std::string& netdev) {
  std::ifstream f("/sys/class/net/" + netdev + "/statistics/tx_bytes");
  uint64_t v = 0;
  f >> v;
  return v;
}

// Two ports a "host": the test bed's rails topology (rxe0/rxe2 and rxe1/rxe3; skipped
// elsewhere), both ports of a side in HMC_IB_HCA and HMC_IB_RAILS=2.
class IbverbsRails : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testbed("TOPOLOGY") != "rails")
      GTEST_SKIP() << "needs the RDMA test bed's rails topology (tests/rdma/guest run --topology "
                      "rails)";
    NET_REQUIRE_PLUGIN("ibverbs", &t_);
    auto list = [](std::string devs) {
      for (char& c : devs)
        if (c == ' ') c = ',';
      return devs;
    };
    host0_ = list(testbed("HOST0_DEVS"));
    host1_ = list(testbed("HOST1_DEVS"));
  }
  // The netdevs of a side's two ports ("rxe0,rxe2": veth0 and veth2).
  static std::pair<std::string, std::string> netdevs(const std::string& host) {
    return {testbed("NETDEV_" + host.substr(0, host.find(','))),
            testbed("NETDEV_" + host.substr(host.find(',') + 1))};
  }
  // The rails come up over the side channel after the endpoint: let them.
  void settle(Side& s) {
    for (int i = 0; i < 100; ++i) {
      t_->progress(s.ctx());
      ::usleep(1000);
    }
  }
  // parent(side) on the first host's ports, child(side) on the second's in a child process.
  void across(const std::function<void(Side&)>& parent, const std::function<void(Side&)>& child) {
    net_test::across(
        t_, Cfg{{"HMC_IB_HCA", "=" + host0_}, {"HMC_IB_RAILS", "2"}},
        Cfg{{"HMC_IB_HCA", "=" + host1_}, {"HMC_IB_RAILS", "2"}}, 5000,
        [&](Side& s, pid_t) { parent(s); }, child, 0, 60);
  }

  static constexpr size_t kLen = 32u << 20;
  const hmc_net_plugin_v2_t* t_ = nullptr;
  std::string host0_, host1_;
};

// Each side's bytes on its two netdevs: both must have carried more than a quarter.
void expect_both_carried(const std::string& net_a, uint64_t a, const std::string& net_b, uint64_t b,
                         size_t len) {
  EXPECT_GT(a, len / 4) << net_a << " sent " << a << " bytes, " << net_b << " " << b;
  EXPECT_GT(b, len / 4) << net_a << " sent " << a << " bytes, " << net_b << " " << b;
}

// A 32 MiB put (notified) and get between unregistered local buffers and a registered region:
// byte-exact, the notification after the data, and each of the putting side's two ports sent a
// fair share of the bytes (equal port speeds: about half each).
TEST_F(IbverbsRails, PutsAndGetsAreStriped) {
  const auto nets = netdevs(host1_);
  const std::string net_a = nets.first, net_b = nets.second;
  const hmc_net_plugin_v2_t* t = t_;
  across(
      [&](Side& s) {
        std::vector<uint8_t> region(kLen, 0);
        std::vector<uint8_t> rkey;
        hmc_net_mr_t* mr = reg(s, region.data(), kLen, HMC_NET_ACCESS_LOCAL | kRemoteRw, &rkey);
        ASSERT_NE(mr, nullptr);
        EXPECT_GT(rkey.size(), 32u) << "the key carries no rail";
        settle(s);
        send_region(s, reinterpret_cast<uintptr_t>(region.data()), rkey);
        uint64_t v = 0;
        const uint64_t deadline = mono_ns() + 60000000000ull;
        hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
        while ((st = t->notify_poll(s.ep(), &v)) == HMC_PLUGIN_IN_PROGRESS && mono_ns() < deadline)
          ::usleep(100);
        EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(v, 7u);
        EXPECT_EQ(first_mismatch(region.data(), kLen, 91), -1) << "the put, at its notification";
        EXPECT_TRUE(s.await());
        fill(region.data(), kLen, 92);
        EXPECT_TRUE(s.signal());
        EXPECT_TRUE(s.await());
        EXPECT_EQ(deregister_memory(s.t(), s.ctx(), s.dev(), mr), HMC_PLUGIN_SUCCESS);
      },
      [&](Side& s) {
        RemoteRegion rr;
        hmc_net_rkey_t* k = recv_key(s, &rr);
        EXPECT_NE(k, nullptr);
        settle(s);  // the rails' confirmation
        std::vector<uint8_t> src(kLen), back(kLen, 0);
        fill(src.data(), kLen, 91);
        const uint64_t a0 = tx_bytes(net_a), b0 = tx_bytes(net_b);
        hmc_net_request_t* r = nullptr;
        EXPECT_EQ(t->iput_notify(s.ep(), src.data(), kLen, nullptr, rr.base, k, 7, &r),
                  HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(s.wait(r, nullptr, 60), HMC_PLUGIN_SUCCESS);
        expect_both_carried(net_a, tx_bytes(net_a) - a0, net_b, tx_bytes(net_b) - b0, kLen);
        EXPECT_TRUE(s.signal());
        EXPECT_TRUE(s.await());  // the owner checked and changed the region
        EXPECT_EQ(t->iget(s.ep(), back.data(), kLen, nullptr, rr.base, k, &r), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(s.wait(r, nullptr, 60), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(back.data(), kLen, 92), -1) << "get";
        EXPECT_EQ(t->rkey_release(k), HMC_PLUGIN_SUCCESS);
        EXPECT_TRUE(s.signal());
      });
}

// A 32 MiB rendezvous message (the plugin registers the send buffer, two segments) with two rails
// up: the receiver's reads go over both ports by their speed, each segment's keys on every rail
// announced with it. Byte-exact, and each of the sender's netdevs sends at least a quarter.
TEST_F(IbverbsRails, MessagesAreStriped) {
  const auto nets = netdevs(host0_);
  const std::string net_a = nets.first, net_b = nets.second;
  across(
      [&](Side& s) {
        settle(s);
        std::vector<uint8_t> src(kLen);
        fill(src.data(), kLen, 93);
        const uint64_t a0 = tx_bytes(net_a), b0 = tx_bytes(net_b);
        hmc_net_request_t* r = s.isend(src.data(), kLen, 1);
        EXPECT_NE(r, nullptr);
        EXPECT_TRUE(s.signal());
        EXPECT_EQ(s.wait(r, nullptr, 60), HMC_PLUGIN_SUCCESS) << s.host().all_logs();
        expect_both_carried(net_a, tx_bytes(net_a) - a0, net_b, tx_bytes(net_b) - b0, kLen);
        EXPECT_TRUE(s.await());  // the receiver checked it
      },
      [&](Side& s) {
        settle(s);
        std::vector<uint8_t> dst(kLen, 0);
        hmc_net_request_t* r = s.irecv(dst.data(), kLen, 1);
        EXPECT_NE(r, nullptr);
        EXPECT_TRUE(s.await());  // the message is sent
        size_t n = 0;
        EXPECT_EQ(s.wait(r, &n, 60), HMC_PLUGIN_SUCCESS) << s.host().all_logs();
        EXPECT_EQ(n, kLen);
        EXPECT_EQ(first_mismatch(dst.data(), kLen, 93), -1) << "the message";
        EXPECT_TRUE(s.signal());
      });
}

}  // namespace
}  // namespace net_test
