// Which ports become devices, which GID each uses, and what a port's link rate is: pure logic
// over what discovery read from the verbs library and sysfs, so that the net plugin suite tests
// it on machines without an RDMA device.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hmc::ibverbs {

// HMC_IB_HCA, with NCCL_IB_HCA's syntax: "mlx5_0:1,mlx5_1" selects and orders; a leading '^'
// excludes the listed ones instead; a leading '=' (after '^' when both) makes names match
// exactly rather than as prefixes. A port number is optional (no port: every port).
struct HcaFilter {
  struct Item {
    std::string name;
    int port = -1;  // -1: every port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Item> items;  // empty: every port, in discovery order
};

// Parses text ("" gives an empty filter). False, with what is wrong in *why, on an empty item,
// an item without a name, or a port that is not a number from 1 to 255.
bool parse_hca_filter(std::string_view text, HcaFilter* out, std::string* why);

// A port as discovery found it.
struct PortId {
  std::string hca;  // "mlx5_0"
  int port = 1;
};

// The ports the filter selects, as indexes into ports: in the filter's order when it lists
// names (ports of one item in discovery order), else in discovery order. Items that matched no
// port are appended to *unmatched as written ("mlx5_9:1").
std::vector<size_t> select_ports(const HcaFilter& f, const std::vector<PortId>& ports,
                                 std::vector<std::string>* unmatched);

// One entry of a port's GID table.
enum class GidType { kIb, kRoceV1, kRoceV2 };
struct GidEntry {
  int index = 0;
  GidType type = GidType::kIb;
  uint8_t raw[16] = {};
  std::string netdev;  // RoCE: the network interface the address belongs to ("" unknown)
};

bool gid_is_zero(const uint8_t raw[16]);
bool gid_is_ipv4_mapped(const uint8_t raw[16]);  // ::ffff:a.b.c.d
bool gid_is_link_local(const uint8_t raw[16]);   // fe80::/10
const char* gid_type_name(GidType t);

// The GID index a port's connections use, or -1 with the reason in *why. forced >= 0
// (HMC_IB_GID_INDEX) must name a non-empty entry. Otherwise: on InfiniBand index 0; on
// Ethernet RoCE v2 with an IPv4-mapped address first, then RoCE v2 with another global
// address, then RoCE v2 link-local, then RoCE v1 in the same order.
int choose_gid(const std::vector<GidEntry>& table, bool ethernet, int forced, std::string* why);

// The leading bits of its GID that a port shares with every port it reaches: for a RoCE v2
// IPv4-mapped address 96 + the prefix length of its interface's address (ipv4_prefix, -1
// unknown), for another global RoCE v2 address 64 (its /64), on InfiniBand 64 (the subnet
// prefix). -1 where the GID tells no network (RoCE v1, link-local, an unknown prefix): such a
// port is taken to reach every port of its fabric.
int network_bits(bool ethernet, GidType type, const uint8_t gid[16], int ipv4_prefix);
// True when a and b agree in their first bits bits (bits < 0: always).
bool same_network(const uint8_t a[16], const uint8_t b[16], int bits);

// The fabric a port is on (net.h, hmc_net_device_props_t.fabric), which the core pairs ports of
// different names by: forced (HMC_IB_FABRIC) where not empty; "ib:<subnet prefix>" on
// InfiniBand (the GID's upper 64 bits, hex); on Ethernet RoCE v2 its network where bits
// (network_bits) says it, "roce-v2:10.0.1.0/24" or "roce-v2:2001:db8:0:1::/64", else "roce-v2",
// and "roce-v1" (one Ethernet segment, which the GID does not tell). "" for a port without a
// usable GID.
std::string fabric_of(bool ethernet, GidType type, const uint8_t gid[16], bool has_gid, int bits,
                      const std::string& forced);

// Data rate of one lane in Mbit/s for ibv_port_attr.active_speed (SDR 2000 ... NDR 100000, after
// line coding), and the lane count for active_width; 0 when unknown.
uint64_t lane_rate_Mbps(uint32_t active_speed);
uint32_t lane_count(uint32_t active_width);
// Port bandwidth in 10^6 bytes/s (lane rate x lanes / 8), 0 when unknown.
uint64_t port_bandwidth_MBps(uint32_t active_speed, uint32_t active_width);

// What hmc-info shows of a port (hmc_net_device_props_t.link_layer and .details), from what
// discovery read.
struct PortDescription {
  std::string hca;
  int port = 1;
  bool ethernet = false;
  bool software = false;  // no PCI function (rdma_rxe, siw)
  std::string fw_ver;
  uint64_t node_guid = 0;      // host order
  uint16_t lid = 0;            // InfiniBand
  std::vector<GidEntry> gids;  // non-empty entries
  int gid_index = -1;          // the one connections use
  GidType gid_type = GidType::kIb;
  uint32_t active_speed = 0;  // ibv_port_attr codes
  uint32_t active_width = 0;
  int active_mtu = 0;  // enum ibv_mtu codes
  int max_mtu = 0;
  uint64_t max_msg_sz = 0;
  uint64_t chunk = 0;  // the largest RDMA READ/WRITE the plugin posts
  bool dmabuf = false;
  uint64_t mem_ifaces = 0;  // hmc_net_device_props_t.mem_ifaces
  std::string peermem;      // Peermem::text
};

// HMC_IB_PEERMEM: legacy GPUDirect, device memory registered by pointer (ibv_reg_mr) where a
// peer-memory kernel module serves the HCA's pinning of it.
enum class PeermemMode { kAuto, kOn, kOff };
// "auto", "on", "off" (and 1/0, yes/no, true/false for on/off), any case; false otherwise.
bool parse_peermem(std::string_view text, PeermemMode* out);

// What the ports register by pointer for puts and gets (hmc_net_device_props_t.rma_mem_ifaces)
// and why, for hmc-info's "peermem" line.
struct Peermem {
  uint64_t ifaces = 0;  // HMC_MEM_IFACE_BIT of CUDA and/or ROCm
  std::string text;     // "yes: cuda (nvidia_peermem is loaded); ..." / "no: ..." / "off: ..."
};
// Detection under sys_root (normally "/sys"): CUDA where nvidia_peermem (/sys/module/
// nvidia_peermem) or its predecessor nv_peer_mem (/sys/module/nv_peer_mem, or the peer-memory
// client /sys/kernel/mm/memory_peers/nv_mem/version of MLNX_OFED kernels) is loaded; ROCm where
// amdkfd registered its peer-memory client (/sys/kernel/mm/memory_peers/amdkfd/version). kOn
// assumes CUDA's (a module of another name) and still detects ROCm's; kOff: none.
Peermem detect_peermem(PeermemMode mode, const std::string& sys_root);

// "InfiniBand", "Ethernet (RoCE v2)", "Ethernet (RoCE v1)".
std::string link_layer_text(bool ethernet, GidType chosen);
// An address of the GID table as text: "::ffff:10.0.0.1", "fe80::1:2:3:4".
std::string gid_text(const uint8_t raw[16]);
// "name: value" lines (net.h): the HCA and port, LID (InfiniBand), each GID with its type and
// interface (the one in use marked "(in use)"), the link rate, MTU, largest message, dma-buf and
// peermem (device memory by pointer).
std::string describe_port(const PortDescription& d);

}  // namespace hmc::ibverbs
