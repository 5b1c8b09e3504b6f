// net-ucx's wire format (plugins/net-ucx/src/wire.h and the remote key of region.h, compiled in
// from the plugin): the connection handle, hello, welcome and bye of connection setup, and the
// packed remote key with the range check every iput/iget goes through.
#include <cstring>

#include "fuzz_target.h"
#include "region.h"
#include "wire.h"

namespace hmc::fuzz {
namespace {

using namespace hmc::ucx;

void handle(const uint8_t* p, size_t n) {
  wire::Handle h;
  if (!accepted(wire::decode_handle, p, n, &h)) return;
  HMC_FUZZ_CHECK(h.listener_id != 0 && h.address_len > 0);
  HMC_FUZZ_CHECK(h.address == p + wire::kHandleHeader && wire::kHandleHeader + h.address_len == n);
  std::vector<uint8_t> again(n);
  HMC_FUZZ_CHECK(wire::encode_handle(h, again.data(), n) == n);
  HMC_FUZZ_CHECK(std::memcmp(again.data(), p, n) == 0);
}

void hello(const uint8_t* p, size_t n) {
  wire::Hello h;
  if (!accepted(wire::decode_hello, p, n, &h)) return;
  HMC_FUZZ_CHECK(h.rx_id != 0 && h.address == p + wire::kHelloHeader &&
                 wire::kHelloHeader + h.address_len == n);
  std::vector<uint8_t> again;
  wire::encode_hello(h, &again);
  HMC_FUZZ_CHECK(again.size() == n && std::memcmp(again.data(), p, 5) == 0 &&
                 std::memcmp(again.data() + 6, p + 6, n - 6) == 0);
}

void welcome(const uint8_t* p, size_t n) {
  wire::Welcome w;
  if (!accepted(wire::decode_welcome, p, n, &w)) return;
  std::vector<uint8_t> again;
  wire::encode_welcome(w, &again);
  HMC_FUZZ_CHECK(again.size() == n && std::memcmp(again.data(), p, 5) == 0 &&
                 std::memcmp(again.data() + 6, p + 6, n - 6) == 0);
}

void bye(const uint8_t* p, size_t n) {
  uint64_t nonce = 0;
  if (!wire::decode_bye(p, n, &nonce)) return;
  std::vector<uint8_t> again;
  wire::encode_bye(nonce, &again);
  HMC_FUZZ_CHECK(again.size() == n && std::memcmp(again.data(), p, 5) == 0 &&
                 std::memcmp(again.data() + 8, p + 8, 8) == 0);
}

// data[0..15]: an access's address and length; the rest a packed remote key.
void rkey(const uint8_t* p, size_t n) {
  if (n < 16) return;
  uint64_t addr = wire::get_u64(p), len = wire::get_u64(p + 8);
  p += 16;
  n -= 16;
  ParsedRkey k;
  std::string why;
  RkeyParse r = parse_rkey(p, n, &k, &why);
  if (r == RkeyParse::kInvalid) {
    HMC_FUZZ_CHECK(!why.empty());
    return;
  }
  HMC_FUZZ_CHECK(k.ucx == p + kRkeyHeader && kRkeyHeader + k.ucx_len == n);
  RemoteKey key;
  key.base = k.base;
  key.len = k.len;
  key.access = k.access;
  key.corrupt = r == RkeyParse::kCorrupt;
  for (uint32_t access : {1u, 2u, 3u}) {
    if (!rkey_allows(key, addr, static_cast<size_t>(len), access)) continue;
    HMC_FUZZ_CHECK(!key.corrupt && addr >= key.base && addr - key.base <= key.len &&
                   len <= key.len - (addr - key.base));
  }
  if (r != RkeyParse::kOk) return;
  MemRegion m;
  m.base = k.base;
  m.len = k.len;
  m.access = k.access;
  std::vector<uint8_t> again(n);
  HMC_FUZZ_CHECK(pack_rkey(m, k.ucx, k.ucx_len, again.data(), n) == n);
  HMC_FUZZ_CHECK(std::memcmp(again.data(), p, n) == 0);
}

const Decoder kDecoders[] = {handle, hello, welcome, bye, rkey};

}  // namespace

void fuzz_one(const uint8_t* data, size_t len) {
  pick(kDecoders, data, len);
}

std::vector<Seed> seeds() {
  std::vector<Seed> out;
  const std::vector<uint8_t> address(120, 0x3c);  // a UCP worker address's size
  wire::Handle h;
  h.flags = wire::kHandleNetOnly;
  h.listener_id = 3;
  h.nonce = 0x1122334455667788ull;
  h.address = address.data();
  h.address_len = address.size();
  std::vector<uint8_t> hb(256);
  hb.resize(wire::encode_handle(h, hb.data(), hb.size()));
  out.push_back({"handle", picked(0, hb)});
  ProcessIdentity who;
  who.boot = 0xb007;
  who.pidns = 4026531836ull;
  who.start = 123456;
  who.pid = 4242;
  wire::Hello hello;
  hello.rx_id = 5;
  hello.nonce = h.nonce;
  hello.who = who;
  hello.address = address.data();
  hello.address_len = address.size();
  std::vector<uint8_t> b;
  wire::encode_hello(hello, &b);
  out.push_back({"hello", picked(1, b)});
  wire::encode_welcome(wire::Welcome{3, h.nonce, who}, &b);
  out.push_back({"welcome", picked(2, b)});
  wire::encode_bye(h.nonce, &b);
  out.push_back({"bye", picked(3, b)});
  MemRegion m;
  m.base = 0x7f0000000000ull;
  m.len = 1u << 20;
  m.access = 3;
  const std::vector<uint8_t> ucx_key(40, 0x99);
  std::vector<uint8_t> rk(16 + kRkeyHeader + ucx_key.size());
  wire::put_u64(rk.data(), m.base + 4096);
  wire::put_u64(rk.data() + 8, 8192);
  pack_rkey(m, ucx_key.data(), ucx_key.size(), rk.data() + 16, rk.size() - 16);
  out.push_back({"rkey", picked(4, rk)});
  return out;
}

}  // namespace hmc::fuzz
