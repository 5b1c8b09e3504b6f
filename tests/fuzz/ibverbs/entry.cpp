// net-ibverbs' wire format (plugins/net-ibverbs/src/wire.h, compiled in from the plugin): the
// connection handle, the side channel's queue-pair info, rails and RMA reset, the data path's
// message headers (with the checks of IbverbsWireFormat.MessageHeadersFuzzed, unit-tested in
// tests/unit/net/ibverbs_test.cpp) and the packed remote key.
#include <cstring>

#include "fuzz_target.h"
#include "wire.h"

namespace hmc::fuzz {
namespace {

using namespace hmc::ibverbs;

void handle(const uint8_t* p, size_t n) {
  ConnHandle h;
  if (!accepted(decode_handle, p, n, &h)) return;
  HMC_FUZZ_CHECK(h.addr.ss_family == AF_INET || h.addr.ss_family == AF_INET6);
  HMC_FUZZ_CHECK(h.addr_len ==
                 (h.addr.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6)));
  uint8_t again[kHandleSize];
  encode_handle(h, again);
  ConnHandle h2;
  HMC_FUZZ_CHECK(accepted(decode_handle, again, kHandleSize, &h2));
  HMC_FUZZ_CHECK(h2.listener_id == h.listener_id && h2.addr_len == h.addr_len &&
                 std::memcmp(&h2.addr, &h.addr, h.addr_len) == 0);
}

void qp_info(const uint8_t* p, size_t n) {
  QpInfo q;
  if (!accepted(decode_qp_info, p, n, &q)) return;
  HMC_FUZZ_CHECK(q.mtu >= 1 && q.mtu <= 5 && q.credits >= 1 && q.credits <= 4096);
  uint8_t again[kQpInfoSize];
  encode_qp_info(q, again);
  HMC_FUZZ_CHECK(std::memcmp(again, p, kQpInfoSize) == 0);
}

void rails(const uint8_t* p, size_t n) {
  std::vector<RailInfo> r;
  if (!accepted(decode_rails, p, n, &r)) return;
  HMC_FUZZ_CHECK(r.size() <= kMaxRails);
  std::vector<uint8_t> again = encode_rails(r);
  HMC_FUZZ_CHECK(again.size() == n && std::memcmp(again.data(), p, n) == 0);
}

void rma_reset(const uint8_t* p, size_t n) {
  RmaReset r;
  if (!decode_rma_reset(p, n, &r)) return;
  uint8_t again[kRmaResetSize];
  encode_rma_reset(r, again);
  HMC_FUZZ_CHECK(std::memcmp(again, p, kRmaResetSize) == 0);
}

// data[0..1]: the receiver's eager size (64 bytes to 1 MiB, as decode_qp_info allows), the
// rest a received message.
void message(const uint8_t* p, size_t n) {
  if (n < 2) return;
  const size_t eager = 64 + (size_t(p[0] | (p[1] << 8)) << 4);
  p += 2;
  n -= 2;
  MsgHeader h;
  std::vector<uint32_t> keys;
  std::string why;
  if (!decode_message(p, n, eager, &h, &keys, &why)) {
    HMC_FUZZ_CHECK(!why.empty());
    return;
  }
  const size_t payload = n - sizeof(MsgHeader);
  const auto t = static_cast<MsgType>(h.type);
  HMC_FUZZ_CHECK(h.type >= 1 && h.type <= 9);
  if (t == MsgType::kEager || t == MsgType::kFrag) {
    HMC_FUZZ_CHECK(h.len == payload && h.len <= eager);
  } else if (t == MsgType::kRts || t == MsgType::kRndvKey) {
    HMC_FUZZ_CHECK(payload % 4 == 0 && keys.size() == payload / 4 && keys.size() <= kMaxRails);
    HMC_FUZZ_CHECK(h.addr + h.len >= h.addr);
  } else {
    HMC_FUZZ_CHECK(payload == 0);
    HMC_FUZZ_CHECK(keys.empty());
  }
  if (t == MsgType::kRts) {
    HMC_FUZZ_CHECK(h.len == 0 || h.len > eager);
    HMC_FUZZ_CHECK(h.key_len == 0 || h.key_len < h.len);
  }
  if (t == MsgType::kStagedRts) HMC_FUZZ_CHECK(h.len > eager);
}

void key(const uint8_t* p, size_t n) {
  PackedKey k;
  if (!accepted(decode_key, p, n, &k)) return;
  HMC_FUZZ_CHECK(k.base + k.len >= k.base && k.rail_rkeys.size() <= kMaxRails);
  std::vector<uint8_t> again(kPackedKeySize + 4 + 4 * kMaxRails);
  size_t len = encode_key(k, again.data());
  HMC_FUZZ_CHECK(len == n && std::memcmp(again.data(), p, n) == 0);
}

const Decoder kDecoders[] = {handle, qp_info, rails, rma_reset, message, key};

std::vector<uint8_t> message_of(MsgType t, uint64_t len, uint64_t addr, uint32_t key_len,
                                size_t payload) {
  MsgHeader h;
  h.type = static_cast<uint8_t>(t);
  h.freed = 3;
  h.tag = 0x77;
  h.len = len;
  h.addr = addr;
  h.rkey = 0x1234;
  h.key_len = key_len;
  h.cookie = 77;
  const uint16_t eager_code = (8192 - 64) >> 4;  // an eager size of 8192
  std::vector<uint8_t> b{uint8_t(eager_code), uint8_t(eager_code >> 8)};
  b.resize(2 + sizeof h + payload, 0xab);
  std::memcpy(b.data() + 2, &h, sizeof h);
  return picked(4, b);
}

}  // namespace

void fuzz_one(const uint8_t* data, size_t len) {
  pick(kDecoders, data, len);
}

std::vector<Seed> seeds() {
  std::vector<Seed> out;
  ConnHandle h;
  auto* a = reinterpret_cast<sockaddr_in*>(&h.addr);
  a->sin_family = AF_INET;
  a->sin_port = htons(18515);
  a->sin_addr.s_addr = htonl(0x7f000001);
  h.addr_len = sizeof(sockaddr_in);
  h.listener_id = 0x1122334455667788ull;
  uint8_t hb[kHandleSize];
  encode_handle(h, hb);
  out.push_back({"handle-v4", picked(0, bytes_of(hb, kHandleSize))});
  QpInfo q;
  q.listener_id = h.listener_id;
  q.msg_qpn = 0x101;
  q.rma_qpn = 0x102;
  q.msg_psn = 0x5555;
  q.rma_psn = 0x6666;
  q.lid = 0;
  q.gid[10] = 0xff;
  q.gid[11] = 0xff;
  q.mtu = 3;
  q.link_layer = 2;
  q.credits = 64;
  q.eager = 8192;
  uint8_t qb[kQpInfoSize];
  encode_qp_info(q, qb);
  out.push_back({"qp-info", picked(1, bytes_of(qb, kQpInfoSize))});
  RailInfo r;
  r.qpn = 0x201;
  r.psn = 0x42;
  r.mtu = 3;
  out.push_back({"rails", picked(2, encode_rails({r, r}))});
  uint8_t rb[kRmaResetSize];
  encode_rma_reset(RmaReset{2, 0x301, 0x43}, rb);
  out.push_back({"rma-reset", picked(3, bytes_of(rb, kRmaResetSize))});
  out.push_back({"msg-eager", message_of(MsgType::kEager, 100, 0, 0, 100)});
  out.push_back({"msg-rts", message_of(MsgType::kRts, 1u << 30, 4096, 1u << 24, 8)});
  out.push_back({"msg-fin", message_of(MsgType::kFin, 0, 0, 0, 0)});
  out.push_back({"msg-credit", message_of(MsgType::kCredit, 0, 0, 0, 0)});
  out.push_back({"msg-notify", message_of(MsgType::kNotify, 5, 0, 0, 0)});
  out.push_back({"msg-staged-rts", message_of(MsgType::kStagedRts, 1u << 20, 0, 0, 0)});
  out.push_back({"msg-frag", message_of(MsgType::kFrag, 8192, 0, 0, 8192)});
  out.push_back({"msg-rndv-key", message_of(MsgType::kRndvKey, 1u << 24, 1u << 24, 0, 8)});
  out.push_back({"msg-rndv-ack", message_of(MsgType::kRndvAck, 0, 1u << 24, 0, 0)});
  PackedKey k;
  k.base = 0x7f0000000000ull;
  k.len = 1u << 20;
  k.rkey = 0x4444;
  k.access = 3;
  uint8_t kb[kPackedKeySize + 4 + 4 * kMaxRails];
  out.push_back({"key", picked(5, bytes_of(kb, encode_key(k, kb)))});
  k.rail_rkeys = {0x5555, 0x6666};
  out.push_back({"key-rails", picked(5, bytes_of(kb, encode_key(k, kb)))});
  return out;
}

}  // namespace hmc::fuzz
