#include "wire.h"

#include <arpa/inet.h>

#include <cstring>

namespace hmc::ibverbs {
namespace {

constexpr uint32_t kHandleMagic = 0x48494248;  // "HIBH"
constexpr uint32_t kQpInfoMagic = 0x48494251;  // "HIBQ"
constexpr uint32_t kKeyMagic = 0x4849424b;     // "HIBK"

// Little-endian writer/reader.
struct Out {
  uint8_t* p;
  void u8(uint8_t v) { *p++ = v; }
  void u16(uint16_t v) {
    for (int i = 0; i < 2; ++i) *p++ = static_cast<uint8_t>(v >> (8 * i));
  }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) *p++ = static_cast<uint8_t>(v >> (8 * i));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) *p++ = static_cast<uint8_t>(v >> (8 * i));
  }
  void bytes(const void* b, size_t n) {
    std::memcpy(p, b, n);
    p += n;
  }
};
struct In {
  const uint8_t* p;
  uint8_t u8() { return *p++; }
  uint16_t u16() {
    uint16_t v = 0;
    for (int i = 0; i < 2; ++i) v = static_cast<uint16_t>(v | (uint16_t{*p++} << (8 * i)));
    return v;
  }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{*p++} << (8 * i);
    return v;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{*p++} << (8 * i);
    return v;
  }
  void bytes(void* b, size_t n) {
    std::memcpy(b, p, n);
    p += n;
  }
};

bool check_header(In& in, uint32_t magic, std::string* why, const char* what) {
  uint32_t m = in.u32(), v = in.u32();
  if (m != magic) {
    *why = std::string("not an ibverbs ") + what + " (bad magic)";
    return false;
  }
  if (v != kWireVersion) {
    *why = std::string(what) + " version " + std::to_string(v) + ", this plugin speaks " +
           std::to_string(kWireVersion);
    return false;
  }
  return true;
}

}  // namespace

size_t encode_handle(const ConnHandle& h, uint8_t* out) {
  Out o{out};
  o.u32(kHandleMagic);
  o.u32(kWireVersion);
  o.u64(h.listener_id);
  uint8_t addr[16] = {};
  uint16_t port = 0;
  uint16_t family = h.addr.ss_family;
  if (family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&h.addr);
    std::memcpy(addr, &a->sin_addr, 4);
    port = ntohs(a->sin_port);
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&h.addr);
    std::memcpy(addr, &a->sin6_addr, 16);
    port = ntohs(a->sin6_port);
  }
  o.u16(family);
  o.u16(port);
  o.bytes(addr, 16);
  return kHandleSize;
}

bool decode_handle(const uint8_t* p, size_t len, ConnHandle* h, std::string* why) {
  if (len != kHandleSize) {
    *why = "a handle is " + std::to_string(kHandleSize) + " bytes, not " + std::to_string(len);
    return false;
  }
  In in{p};
  if (!check_header(in, kHandleMagic, why, "connection handle")) return false;
  ConnHandle r;
  r.listener_id = in.u64();
  uint16_t family = in.u16(), port = in.u16();
  uint8_t addr[16];
  in.bytes(addr, 16);
  if (port == 0) {
    *why = "port 0";
    return false;
  }
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&r.addr);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    std::memcpy(&a->sin_addr, addr, 4);
    r.addr_len = sizeof(sockaddr_in);
  } else if (family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&r.addr);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    std::memcpy(&a->sin6_addr, addr, 16);
    r.addr_len = sizeof(sockaddr_in6);
  } else {
    *why = "unknown address family " + std::to_string(family);
    return false;
  }
  *h = r;
  return true;
}

void encode_qp_info(const QpInfo& q, uint8_t* out) {
  Out o{out};
  o.u64(q.listener_id);
  o.u32(q.msg_qpn);
  o.u32(q.rma_qpn);
  o.u32(q.msg_psn);
  o.u32(q.rma_psn);
  o.u16(q.lid);
  o.bytes(q.gid, 16);
  o.u8(q.mtu);
  o.u8(q.link_layer);
  o.u32(q.credits);
  o.u32(q.eager);
}

bool decode_qp_info(const uint8_t* p, size_t len, QpInfo* q, std::string* why) {
  if (len != kQpInfoSize) {
    *why = "queue pair info of " + std::to_string(len) + " bytes, expected " +
           std::to_string(kQpInfoSize);
    return false;
  }
  In in{p};
  QpInfo r;
  r.listener_id = in.u64();
  r.msg_qpn = in.u32();
  r.rma_qpn = in.u32();
  r.msg_psn = in.u32();
  r.rma_psn = in.u32();
  r.lid = in.u16();
  in.bytes(r.gid, 16);
  r.mtu = in.u8();
  r.link_layer = in.u8();
  r.credits = in.u32();
  r.eager = in.u32();
  constexpr uint32_t k24 = 1u << 24;
  if (r.msg_qpn == 0 || r.msg_qpn >= k24 || r.rma_qpn == 0 || r.rma_qpn >= k24 ||
      r.msg_psn >= k24 || r.rma_psn >= k24) {
    *why = "queue pair numbers or PSNs out of range";
    return false;
  }
  if (r.mtu < 1 || r.mtu > 5) {
    *why = "MTU code " + std::to_string(r.mtu);
    return false;
  }
  if (r.credits < 1 || r.credits > 4096 || r.eager < 64 || r.eager > (1u << 20)) {
    *why = "credits or eager size out of range";
    return false;
  }
  *q = r;
  return true;
}

void encode_rma_reset(const RmaReset& r, uint8_t* out) {
  Out o{out};
  o.u32(r.epoch);
  o.u32(r.qpn);
  o.u32(r.psn);
}

bool decode_rma_reset(const uint8_t* p, size_t len, RmaReset* r) {
  if (len != kRmaResetSize) return false;
  In in{p};
  RmaReset v;
  v.epoch = in.u32();
  v.qpn = in.u32();
  v.psn = in.u32();
  if (v.qpn == 0 || v.qpn >= (1u << 24) || v.psn >= (1u << 24)) return false;
  *r = v;
  return true;
}

size_t encode_key(const PackedKey& k, uint8_t* out) {
  Out o{out};
  o.u32(kKeyMagic);
  o.u32(kWireVersion);
  o.u64(k.base);
  o.u64(k.len);
  o.u32(k.rkey);
  o.u32(k.access);
  if (k.rail_rkeys.empty()) return kPackedKeySize;
  o.u32(static_cast<uint32_t>(k.rail_rkeys.size()));
  for (uint32_t r : k.rail_rkeys) o.u32(r);
  return kPackedKeySize + 4 + 4 * k.rail_rkeys.size();
}

bool decode_key(const uint8_t* p, size_t len, PackedKey* k, std::string* why) {
  uint32_t rails = 0;
  if (len >= kPackedKeySize + 4) {
    In n{p + kPackedKeySize};
    rails = n.u32();
  }
  if (len != kPackedKeySize &&
      (rails == 0 || rails > kMaxRails || len != kPackedKeySize + 4 + 4 * rails)) {
    *why = "a packed key is " + std::to_string(kPackedKeySize) + " bytes (or 4 more and 4 per " +
           "rail), not " + std::to_string(len);
    return false;
  }
  In in{p};
  if (!check_header(in, kKeyMagic, why, "remote key")) return false;
  PackedKey r;
  r.base = in.u64();
  r.len = in.u64();
  r.rkey = in.u32();
  r.access = in.u32();
  if (len > kPackedKeySize) {
    in.u32();
    for (uint32_t i = 0; i < rails; ++i) r.rail_rkeys.push_back(in.u32());
  }
  if (r.base + r.len < r.base) {
    *why = "the region wraps around the address space";
    return false;
  }
  *k = r;
  return true;
}

bool decode_message(const uint8_t* p, size_t len, size_t eager, MsgHeader* h,
                    std::vector<uint32_t>* rail_keys, std::string* why) {
  if (len < sizeof(MsgHeader)) {
    *why = "a message of " + std::to_string(len) + " bytes (malformed)";
    return false;
  }
  MsgHeader m;
  std::memcpy(&m, p, sizeof m);
  const size_t payload = len - sizeof m;
  const bool keys = payload % 4 == 0 && payload / 4 <= kMaxRails;
  bool ok = true;
  switch (static_cast<MsgType>(m.type)) {
    case MsgType::kEager: ok = m.len == payload && m.len <= eager; break;
    case MsgType::kRts:
      ok = keys && (m.len > eager || m.len == 0) && (m.key_len == 0 || m.key_len < m.len) &&
           m.addr + m.len >= m.addr;
      break;
    case MsgType::kStagedRts: ok = payload == 0 && m.len > eager; break;
    case MsgType::kFrag: ok = m.len != 0 && m.len == payload && m.len <= eager; break;
    case MsgType::kRndvKey: ok = keys && m.addr + m.len >= m.addr; break;
    case MsgType::kFin:
    case MsgType::kCredit:
    case MsgType::kNotify:
    case MsgType::kRndvAck: ok = payload == 0; break;
    default: *why = "a message of unknown type " + std::to_string(m.type); return false;
  }
  if (!ok) {
    *why = "a malformed message header (type " + std::to_string(m.type) + ")";
    return false;
  }
  *h = m;
  rail_keys->clear();
  if (m.type == static_cast<uint8_t>(MsgType::kRts) ||
      m.type == static_cast<uint8_t>(MsgType::kRndvKey)) {
    rail_keys->resize(payload / 4);
    if (payload > 0) std::memcpy(rail_keys->data(), p + sizeof m, payload);
  }
  return true;
}

std::vector<uint8_t> encode_rails(const std::vector<RailInfo>& rails) {
  std::vector<uint8_t> b(1 + rails.size() * (4 + 4 + 2 + 16 + 1));
  Out o{b.data()};
  o.u8(static_cast<uint8_t>(rails.size()));
  for (const RailInfo& r : rails) {
    o.u32(r.qpn);
    o.u32(r.psn);
    o.u16(r.lid);
    o.bytes(r.gid, 16);
    o.u8(r.mtu);
  }
  return b;
}

bool decode_rails(const uint8_t* p, size_t len, std::vector<RailInfo>* rails, std::string* why) {
  constexpr size_t kEntry = 4 + 4 + 2 + 16 + 1;
  if (len < 1 || p[0] > kMaxRails || len != 1 + p[0] * kEntry) {
    *why = "a rail list of " + std::to_string(len) + " bytes";
    return false;
  }
  In in{p + 1};
  std::vector<RailInfo> out(p[0]);
  for (RailInfo& r : out) {
    r.qpn = in.u32();
    r.psn = in.u32();
    r.lid = in.u16();
    in.bytes(r.gid, 16);
    r.mtu = in.u8();
    if (r.qpn == 0 || r.qpn >= (1u << 24) || r.psn >= (1u << 24) || r.mtu < 1 || r.mtu > 5) {
      *why = "a rail's queue pair number, PSN or MTU out of range";
      return false;
    }
  }
  *rails = std::move(out);
  return true;
}

}  // namespace hmc::ibverbs
