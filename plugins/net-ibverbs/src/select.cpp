#include "select.h"

#include <cstdio>
#include <cstring>

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

std::string fabric_of(bool ethernet, GidType type, const uint8_t gid[16], bool has_gid) {
  if (!has_gid) return "";
  if (ethernet) return type == GidType::kRoceV1 ? "roce-v1" : "roce-v2";
  char hex[17];
  for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", gid[i]);
  return std::string("ib:") + hex;
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
    case 1: return 2000;     // SDR 2.5 Gb/s, 8b/10b
    case 2: return 4000;     // DDR
    case 4: return 8000;     // QDR
    case 8: return 10000;    // FDR10, 64b/66b
    case 16: return 13640;   // FDR
    case 32: return 25000;   // EDR
    case 64: return 50000;   // HDR
    case 128: return 100000; // NDR
    case 256: return 200000; // XDR
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

}  // namespace hmc::ibverbs
