// net-ofi's wire format (plugins/net-ofi/src/wire.h, compiled in from the plugin): data message
// headers, FIN and CTS, the connection handle, hello and ack, the packed remote key. Every
// accepted input re-encodes to what was read.
#include <cstring>

#include "fuzz_target.h"
#include "wire.h"

namespace hmc::fuzz {
namespace {

using namespace hmc::ofi;

void msg(const uint8_t* p, size_t n) {
  MsgHeader h;
  if (!decode_msg(p, n, &h)) return;
  uint8_t again[kRtsSize];
  if (h.type == MsgType::kEager) {
    HMC_FUZZ_CHECK(n == kMsgHeader + h.len);
    encode_eager_header(again, h.len, h.slot);
    HMC_FUZZ_CHECK(std::memcmp(again, p, 4) == 0 && std::memcmp(again + 8, p + 8, 8) == 0);
  } else {
    HMC_FUZZ_CHECK(n == kRtsSize);
    encode_rts(again, h);
    HMC_FUZZ_CHECK(std::memcmp(again, p, 4) == 0 && std::memcmp(again + 8, p + 8, 32) == 0);
  }
}

void fin(const uint8_t* p, size_t n) {
  uint64_t cookie = 0;
  uint8_t status = 0;
  if (!decode_fin(p, n, &cookie, &status)) return;
  uint8_t again[kFinSize];
  encode_fin(again, cookie, status);
  HMC_FUZZ_CHECK(std::memcmp(again, p, 6) == 0 && std::memcmp(again + 8, p + 8, 8) == 0);
}

void cts(const uint8_t* p, size_t n) {
  Cts c;
  if (!decode_cts(p, n, &c)) return;
  uint8_t again[kCtsSize];
  encode_cts(again, c);
  HMC_FUZZ_CHECK(std::memcmp(again, p, 6) == 0 && std::memcmp(again + 8, p + 8, 32) == 0);
}

void handle(const uint8_t* p, size_t n) {
  ConnHandle h;
  if (!accepted(decode_handle, p, n, &h)) return;
  HMC_FUZZ_CHECK(h.device.size() <= kMaxDeviceName && !h.addr.empty() && h.addr.size() <= kMaxAddr);
  uint8_t again[256];
  size_t len = encode_handle(h, again, sizeof again);
  HMC_FUZZ_CHECK(len == n && std::memcmp(again, p, n) == 0);
}

void hello(const uint8_t* p, size_t n) {
  Hello h;
  if (!decode_hello(p, n, &h)) return;
  HMC_FUZZ_CHECK(h.slot < kDataSlots && !h.addr.empty() && h.addr.size() <= kMaxAddr);
  std::vector<uint8_t> again = encode_hello(h);
  HMC_FUZZ_CHECK(again.size() == n && std::memcmp(again.data(), p, n) == 0);
}

void ack(const uint8_t* p, size_t n) {
  Ack a;
  if (!decode_ack(p, n, &a)) return;
  HMC_FUZZ_CHECK(a.status != AckStatus::kOk || a.slot < kDataSlots);
  std::vector<uint8_t> again = encode_ack(a);
  HMC_FUZZ_CHECK(again.size() == n && std::memcmp(again.data(), p, 7) == 0 &&
                 std::memcmp(again.data() + 8, p + 8, n - 8) == 0);
}

void rkey(const uint8_t* p, size_t n) {
  PackedRkey k;
  if (!accepted(decode_rkey, p, n, &k)) return;
  HMC_FUZZ_CHECK(k.base + k.size >= k.base);
  for (const RkeyEntry& e : k.entries) HMC_FUZZ_CHECK(e.device.size() <= 16);
  std::vector<uint8_t> again(kRkeyHeader + kRkeyEntry * k.entries.size() + 1);
  // A name of 16 bytes without its NUL does not re-encode (the encoder keeps 15).
  bool long_name = false;
  for (const RkeyEntry& e : k.entries) long_name |= e.device.size() > kMaxDeviceName;
  size_t len = encode_rkey(k, again.data(), again.size());
  if (long_name) {
    HMC_FUZZ_CHECK(len == 0);
    return;
  }
  HMC_FUZZ_CHECK(len == n);
  PackedRkey k2;
  HMC_FUZZ_CHECK(accepted(decode_rkey, again.data(), len, &k2));
  HMC_FUZZ_CHECK(k2.base == k.base && k2.size == k.size && k2.access == k.access &&
                 k2.entries.size() == k.entries.size());
}

const Decoder kDecoders[] = {msg, fin, cts, handle, hello, ack, rkey};

}  // namespace

void fuzz_one(const uint8_t* data, size_t len) {
  pick(kDecoders, data, len);
}

std::vector<Seed> seeds() {
  std::vector<Seed> out;
  std::vector<uint8_t> eager(kMsgHeader + 100, 0xab);
  encode_eager_header(eager.data(), 100, 3);
  out.push_back({"msg-eager", picked(0, eager)});
  MsgHeader rts;
  rts.type = MsgType::kRtsRead;
  rts.slot = 2;
  rts.len = 1u << 24;
  rts.raddr = 0x7f0000000000ull;
  rts.key = 0x1234;
  rts.cookie = 99;
  uint8_t b[kRtsSize];
  encode_rts(b, rts);
  out.push_back({"msg-rts-read", picked(0, bytes_of(b, kRtsSize))});
  rts.type = MsgType::kRtsWrite;
  encode_rts(b, rts);
  out.push_back({"msg-rts-write", picked(0, bytes_of(b, kRtsSize))});
  uint8_t f[kFinSize];
  encode_fin(f, 99, 0);
  out.push_back({"fin", picked(1, bytes_of(f, kFinSize))});
  uint8_t c[kCtsSize];
  encode_cts(c, Cts{99, 1u << 20, 0x7f0000100000ull, 0x55, 0});
  out.push_back({"cts", picked(2, bytes_of(c, kCtsSize))});
  ConnHandle h;
  h.device = "tcp";
  h.addr = {2, 0, 0x1f, 0x90, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  h.listener_id = 0x00abcdef12345678ull;
  uint8_t hb[256];
  out.push_back({"handle", picked(3, bytes_of(hb, encode_handle(h, hb, sizeof hb)))});
  Hello hello;
  hello.listener_id = h.listener_id;
  hello.nonce = 0x42;
  hello.slot = 4;
  hello.probe_addr = 0x7f0000200000ull;
  hello.probe_key = 7;
  hello.addr = h.addr;
  out.push_back({"hello", picked(4, encode_hello(hello))});
  Ack a;
  a.listener_id = h.listener_id;
  a.nonce = 0x42;
  a.slot = 1;
  out.push_back({"ack", picked(5, encode_ack(a))});
  a.status = AckStatus::kBusy;
  out.push_back({"ack-busy", picked(5, encode_ack(a))});
  PackedRkey k;
  k.base = 0x7f0000000000ull;
  k.size = 1u << 20;
  k.access = 3;
  k.entries.push_back({"tcp", 0x11, true, true});
  k.entries.push_back({"shm", 0x22, false, false});
  uint8_t kb[256];
  out.push_back({"rkey", picked(6, bytes_of(kb, encode_rkey(k, kb, sizeof kb)))});
  return out;
}

}  // namespace hmc::fuzz
