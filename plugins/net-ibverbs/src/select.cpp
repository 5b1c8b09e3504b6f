#include "select.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "hmc/plugin/common.h"
#include "hmc/plugin/config.hpp"

namespace hmc::ibverbs {

bool parse_hca_filter(std::string_view text, HcaFilter* out, std::string* why) {
  HcaFilter f;
  text = hmc::plugin::config_detail::trim(text);
  if (!text.empty() && text[0] == '^') {
    f.exclude = true;
    text.remove_prefix(1);
  }
  if (!text.empty() && text[0] == '=') {
    f.exact = true;
    text.remove_prefix(1);
  }
  if (text.empty()) {
    if (f.exclude || f.exact) {
      *why = "no device names after '^' or '='";
      return false;
    }
    *out = f;
    return true;
  }
  std::vector<std::string> items;
  if (!hmc::plugin::parse_list(text, &items)) {
    *why = "an empty item";
    return false;
  }
  for (const std::string& item : items) {
    HcaFilter::Item it;
    size_t colon = item.find(':');
    it.name = item.substr(0, colon);
    if (it.name.empty()) {
      *why = "'" + item + "' has no device name";
      return false;
    }
    if (colon != std::string::npos) {
      long long port = 0;
      if (!hmc::plugin::parse_int(item.substr(colon + 1), 1, 255, &port)) {
        *why = "'" + item + "': the port must be a number from 1 to 255";
        return false;
      }
      it.port = static_cast<int>(port);
    }
    f.items.push_back(it);
  }
  *out = std::move(f);
  return true;
}

namespace {

bool item_matches(const HcaFilter& f, const HcaFilter::Item& it, const PortId& p) {
  bool name_ok = f.exact ? p.hca == it.name : p.hca.compare(0, it.name.size(), it.name) == 0;
  return name_ok && (it.port < 0 || it.port == p.port);
}

std::string item_text(const HcaFilter::Item& it) {
  return it.port < 0 ? it.name : it.name + ":" + std::to_string(it.port);
}

}  // namespace

std::vector<size_t> select_ports(const HcaFilter& f, const std::vector<PortId>& ports,
                                 std::vector<std::string>* unmatched) {
  std::vector<size_t> out;
  if (f.items.empty()) {
    for (size_t i = 0; i < ports.size(); ++i) out.push_back(i);
    return out;
  }
  std::vector<bool> hit(f.items.size(), false);
  if (f.exclude) {
    for (size_t i = 0; i < ports.size(); ++i) {
      bool excluded = false;
      for (size_t k = 0; k < f.items.size(); ++k)
        if (item_matches(f, f.items[k], ports[i])) excluded = hit[k] = true;
      if (!excluded) out.push_back(i);
    }
  } else {
    std::vector<bool> taken(ports.size(), false);
    for (size_t k = 0; k < f.items.size(); ++k)
      for (size_t i = 0; i < ports.size(); ++i)
        if (item_matches(f, f.items[k], ports[i])) {
          hit[k] = true;
          if (!taken[i]) out.push_back(i);
          taken[i] = true;
        }
  }
  for (size_t k = 0; k < f.items.size(); ++k)
    if (!hit[k]) unmatched->push_back(item_text(f.items[k]));
  return out;
}

bool gid_is_zero(const uint8_t raw[16]) {
  for (int i = 0; i < 16; ++i)
    if (raw[i] != 0) return false;
  return true;
}

bool gid_is_ipv4_mapped(const uint8_t raw[16]) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(raw, prefix, 12) == 0;
}

bool gid_is_link_local(const uint8_t raw[16]) {
  return raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80;
}

int network_bits(bool ethernet, GidType type, const uint8_t gid[16], int ipv4_prefix) {
  if (!ethernet) return 64;
  if (type != GidType::kRoceV2 || gid_is_link_local(gid)) return -1;
  if (!gid_is_ipv4_mapped(gid)) return 64;
  return ipv4_prefix >= 0 && ipv4_prefix <= 32 ? 96 + ipv4_prefix : -1;
}

namespace {
// The mask of a byte of a network prefix with `left` of its bits still to cover.
uint8_t prefix_mask(int left) {
  return left >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - left));
}
}  // namespace

bool same_network(const uint8_t a[16], const uint8_t b[16], int bits) {
  for (int i = 0; i < 16 && bits > 0; ++i, bits -= 8)
    if ((a[i] & prefix_mask(bits)) != (b[i] & prefix_mask(bits))) return false;
  return true;
}

std::string fabric_of(bool ethernet, GidType type, const uint8_t gid[16], bool has_gid, int bits,
                      const std::string& forced) {
  if (!has_gid) return "";
  if (!forced.empty()) return forced;
  if (!ethernet) {
    char hex[17];
    for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", gid[i]);
    return std::string("ib:") + hex;
  }
  if (type == GidType::kRoceV1) return "roce-v1";
  if (bits < 0) return "roce-v2";
  uint8_t net[16] = {};
  for (int i = 0, left = bits; i < 16 && left > 0; ++i, left -= 8)
    net[i] = gid[i] & prefix_mask(left);
  const bool v4 = gid_is_ipv4_mapped(gid);
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? net + 12 : net, text, sizeof text) == nullptr)
    return "roce-v2";
  return std::string("roce-v2:") + text + "/" + std::to_string(v4 ? bits - 96 : bits);
}

const char* gid_type_name(GidType t) {
  switch (t) {
    case GidType::kIb: return "IB";
    case GidType::kRoceV1: return "RoCE v1";
    case GidType::kRoceV2: return "RoCE v2";
  }
  return "?";
}

int choose_gid(const std::vector<GidEntry>& table, bool ethernet, int forced, std::string* why) {
  if (forced >= 0) {
    for (const GidEntry& e : table)
      if (e.index == forced && !gid_is_zero(e.raw)) return forced;
    *why = "HMC_IB_GID_INDEX=" + std::to_string(forced) + " names no valid GID on this port (" +
           std::to_string(table.size()) + " entries)";
    return -1;
  }
  if (!ethernet) {
    for (const GidEntry& e : table)
      if (e.index == 0 && !gid_is_zero(e.raw)) return 0;
    *why = "GID 0 is empty";
    return -1;
  }
  // Lower rank is better.
  auto rank = [](const GidEntry& e) {
    int r = e.type == GidType::kRoceV2 ? 0 : e.type == GidType::kRoceV1 ? 3 : 6;
    if (gid_is_ipv4_mapped(e.raw))
      r += 0;
    else if (!gid_is_link_local(e.raw))
      r += 1;
    else
      r += 2;
    return r;
  };
  int best = -1, best_rank = 1 << 30;
  for (const GidEntry& e : table) {
    if (gid_is_zero(e.raw)) continue;
    int r = rank(e);
    if (r < best_rank) {
      best_rank = r;
      best = e.index;
    }
  }
  if (best < 0) *why = "the port has no GID (no IP address on its network interface?)";
  return best;
}

uint64_t lane_rate_Mbps(uint32_t active_speed) {
  switch (active_speed) {
    case 1: return 2000;      // SDR 2.5 Gb/s, 8b/10b
    case 2: return 4000;      // DDR
    case 4: return 8000;      // QDR
    case 8: return 10000;     // FDR10, 64b/66b
    case 16: return 13640;    // FDR
    case 32: return 25000;    // EDR
    case 64: return 50000;    // HDR
    case 128: return 100000;  // NDR
    case 256: return 200000;  // XDR
    default: return 0;
  }
}

uint32_t lane_count(uint32_t active_width) {
  switch (active_width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

uint64_t port_bandwidth_MBps(uint32_t active_speed, uint32_t active_width) {
  return lane_rate_Mbps(active_speed) * lane_count(active_width) / 8;
}

std::string link_layer_text(bool ethernet, GidType chosen) {
  if (!ethernet) return "InfiniBand";
  return std::string("Ethernet (") +
         gid_type_name(chosen == GidType::kIb ? GidType::kRoceV1 : chosen) + ")";
}

std::string gid_text(const uint8_t raw[16]) {
  char b[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, raw, b, sizeof b) == nullptr) return "?";
  return b;
}

namespace {

// IBTA names of ibv_port_attr.active_speed and .active_width.
const char* speed_name(uint32_t s) {
  switch (s) {
    case 1: return "SDR";
    case 2: return "DDR";
    case 4: return "QDR";
    case 8: return "FDR10";
    case 16: return "FDR";
    case 32: return "EDR";
    case 64: return "HDR";
    case 128: return "NDR";
    case 256: return "XDR";
    default: return nullptr;
  }
}

std::string size_text(uint64_t n) {
  char b[32];
  if (n >= (1ull << 30) && n % (1ull << 30) == 0)
    std::snprintf(b, sizeof b, "%" PRIu64 " GiB", n >> 30);
  else if (n >= (1ull << 20) && n % (1ull << 20) == 0)
    std::snprintf(b, sizeof b, "%" PRIu64 " MiB", n >> 20);
  else if (n >= (1ull << 10) && n % (1ull << 10) == 0)
    std::snprintf(b, sizeof b, "%" PRIu64 " KiB", n >> 10);
  else
    std::snprintf(b, sizeof b, "%" PRIu64 " B", n);
  return b;
}

int mtu_bytes(int code) {
  return code >= 1 && code <= 5 ? 128 << code : 0;
}

}  // namespace

std::string describe_port(const PortDescription& d) {
  std::string s;
  auto line = [&](const std::string& name, const std::string& value) {
    s += (s.empty() ? "" : "\n") + name + ": " + value;
  };
  char guid[32];
  std::snprintf(guid, sizeof guid, "%04x:%04x:%04x:%04x", static_cast<unsigned>(d.node_guid >> 48),
                static_cast<unsigned>(d.node_guid >> 32) & 0xffff,
                static_cast<unsigned>(d.node_guid >> 16) & 0xffff,
                static_cast<unsigned>(d.node_guid) & 0xffff);
  line("hca", d.hca + " port " + std::to_string(d.port) + ", node GUID " + guid +
                  (d.fw_ver.empty() ? "" : ", firmware " + d.fw_ver) +
                  (d.software ? ", software device (no PCI function)" : ""));
  if (!d.ethernet) line("lid", std::to_string(d.lid));
  for (const GidEntry& e : d.gids) {
    std::string v = d.ethernet ? std::string(gid_type_name(e.type)) + " " : "";
    v += gid_text(e.raw);
    if (!e.netdev.empty()) v += " on " + e.netdev;
    if (e.index == d.gid_index) v += " (in use)";
    line("gid " + std::to_string(e.index), v);
  }
  const uint64_t lane = lane_rate_Mbps(d.active_speed);
  const uint32_t lanes = lane_count(d.active_width);
  std::string speed;
  if (lane == 0 || lanes == 0) {
    speed = "unknown (speed code " + std::to_string(d.active_speed) + ", width code " +
            std::to_string(d.active_width) + ")";
  } else {
    char b[96];
    std::snprintf(b, sizeof b, "%uX %s, %g Gb/s of data (%g Gb/s per lane)", lanes,
                  speed_name(d.active_speed), static_cast<double>(lane * lanes) / 1000,
                  static_cast<double>(lane) / 1000);
    speed = b;
  }
  if (d.software) speed += "; a software device's is its interface's, not what it moves";
  line("speed", speed);
  line("mtu", std::to_string(mtu_bytes(d.active_mtu)) + " active, " +
                  std::to_string(mtu_bytes(d.max_mtu)) + " port maximum");
  if (d.max_msg_sz != 0)
    line("max message", size_text(d.max_msg_sz) + " (RDMA reads and writes posted in pieces of " +
                            size_text(d.chunk) + ")");
  line("dma-buf", d.dmabuf ? "yes: device memory registers through its dma-buf"
                           : "no: ibv_reg_dmabuf_mr is not supported here");
  line("peermem", d.peermem);
  return s;
}

bool parse_peermem(std::string_view text, PeermemMode* out) {
  const std::string_view v = hmc::plugin::config_detail::trim(text);
  if (hmc::plugin::config_detail::iequal(v, "auto")) {
    *out = PeermemMode::kAuto;
    return true;
  }
  bool on = false;  // the spellings of the core's booleans otherwise
  if (!hmc::plugin::parse_bool(v, &on)) return false;
  *out = on ? PeermemMode::kOn : PeermemMode::kOff;
  return true;
}

Peermem detect_peermem(PeermemMode mode, const std::string& sys_root) {
  Peermem p;
  if (mode == PeermemMode::kOff) {
    p.text = "off (HMC_IB_PEERMEM=off): device memory registers by dma-buf, else is staged";
    return p;
  }
  auto exists = [&](const char* path) { return access((sys_root + path).c_str(), F_OK) == 0; };
  std::string cuda;
  if (exists("/module/nvidia_peermem"))
    cuda = "nvidia_peermem is loaded";
  else if (exists("/module/nv_peer_mem"))
    cuda = "nv_peer_mem is loaded";
  else if (exists("/kernel/mm/memory_peers/nv_mem/version"))
    cuda = "peer-memory client nv_mem";
  else if (mode == PeermemMode::kOn)
    cuda = "assumed: HMC_IB_PEERMEM=on";
  std::string rocm;
  if (exists("/kernel/mm/memory_peers/amdkfd/version")) rocm = "peer-memory client amdkfd";
  std::string which;
  if (!cuda.empty()) {
    p.ifaces |= HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA);
    which = "cuda (" + cuda + ")";
  }
  if (!rocm.empty()) {
    p.ifaces |= HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_ROCM);
    which += (which.empty() ? "" : ", ") + std::string("rocm (") + rocm + ")";
  }
  p.text = p.ifaces != 0
               ? "yes: " + which + "; puts and gets of registered device memory by pointer"
               : "no: no peer-memory module (nvidia_peermem, nv_peer_mem, amdkfd's client); "
                 "device memory registers by dma-buf, else is staged";
  return p;
}

}  // namespace hmc::ibverbs
