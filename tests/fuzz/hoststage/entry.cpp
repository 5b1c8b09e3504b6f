// net-hoststage's wire format (plugins/net-hoststage/src, compiled in from the plugin): the
// connection handle (handle.cpp), a TCP stream's frames as Stream::parse splits them
// (take_stream_frame) with the vectored lists the handlers read (vec_list_ok), and the records
// of a shared-memory ring as its consumer reads them (RingRx::next, ring.h), its control block
// and data written by the peer.
#include <arpa/inet.h>

#include <cstring>
#include <memory>

#include "fuzz_target.h"
#include "handle.h"
#include "ring.h"
#include "wire.h"

namespace hmc::hoststage {
namespace {

using fuzz::Decoder;

void handle(const uint8_t* p, size_t n) {
  ConnHandle h;
  if (!fuzz::accepted(decode_handle, p, n, &h)) return;
  if (h.dev == DevKind::kTcp)
    HMC_FUZZ_CHECK(!h.addrs.empty() && h.addrs.size() <= kMaxHandleAddrs);
  else
    HMC_FUZZ_CHECK(!h.unix_name.empty() && h.unix_name.size() <= kMaxUnixName);
  std::vector<uint8_t> again(n);
  HMC_FUZZ_CHECK(encode_handle(h, again.data(), n) == n);
  ConnHandle h2;
  HMC_FUZZ_CHECK(fuzz::accepted(decode_handle, again.data(), n, &h2));
  HMC_FUZZ_CHECK(h2.dev == h.dev && h2.nonce == h.nonce && h2.pid == h.pid &&
                 h2.unix_name == h.unix_name && h2.addrs.size() == h.addrs.size());
}

// What the handlers do with a message's payload of plen bytes: a vectored one's list is read
// piece by piece (Endpoint::on_vec), inside the payload.
void handle_msg(const WireHdr& h, const uint8_t* payload, uint64_t plen) {
  if (h.type != kMsgPutV && h.type != kMsgGetV) return;
  if (!vec_list_ok(h)) return;
  HMC_FUZZ_CHECK(h.aux <= plen);
  uint64_t total = 0;
  const size_t n = static_cast<size_t>(h.aux / sizeof(VecPieceWire));
  HMC_FUZZ_CHECK(n <= kVecMaxPieces);
  for (size_t i = 0; i < n; ++i) {
    VecPieceWire piece;
    std::memcpy(&piece, payload + i * sizeof(piece), sizeof(piece));
    total += piece.len;
  }
  (void)total;
}

// data[0..1]: the receiver's inline limit (HS_EAGER_LIMIT-like, up to 1 MiB), then the stream.
void stream(const uint8_t* p, size_t n) {
  if (n < 2) return;
  const size_t rx_inline_max = (size_t(p[0] | (p[1] << 8)) << 4);
  p += 2;
  n -= 2;
  size_t rd = 0;
  uint64_t data_left = 0;
  for (;;) {
    if (data_left > 0) {  // a DATA frame's payload goes to its sink
      uint64_t take = std::min<uint64_t>(data_left, n - rd);
      if (take == 0) return;
      rd += static_cast<size_t>(take);
      data_left -= take;
      continue;
    }
    WireHdr h;
    size_t used = 0;
    StreamFrame f = take_stream_frame(p + rd, n - rd, rx_inline_max, &h, &used);
    if (f == StreamFrame::kNeedMore || f == StreamFrame::kTooLong) return;
    HMC_FUZZ_CHECK(used >= sizeof(WireHdr) && used <= n - rd);
    if (f == StreamFrame::kData) {
      HMC_FUZZ_CHECK(used == sizeof(WireHdr) && h.type == kMsgData);
      data_left = h.len;
    } else {
      const uint64_t plen = used - sizeof(WireHdr);
      HMC_FUZZ_CHECK(plen <= payload_limit(h.type, rx_inline_max));
      HMC_FUZZ_CHECK(plen == ((h.flags & kFlagPayload) ? h.len : 0));
      handle_msg(h, p + rd + sizeof(WireHdr), plen);
    }
    rd += used;
  }
}

// data[0..15]: the ring's head and tail as the peer left them, the rest its data (a ring of
// 4 KiB, the smallest power of two the records of a message of 4 KiB - 64 fit in).
void ring(const uint8_t* p, size_t n) {
  constexpr size_t kCap = 4096;
  if (n < 16) return;
  auto ctl = std::make_unique<RingCtl>();
  uint64_t head = 0, tail = 0;
  std::memcpy(&head, p, 8);
  std::memcpy(&tail, p + 8, 8);
  ctl->head.store(head);
  ctl->tail.store(tail);
  ctl->consumer_sleeping.store(0);
  ctl->producer_waiting.store(0);
  // Exactly kCap bytes, so that a read past the ring's end is one ASan sees.
  std::unique_ptr<uint8_t[]> data(new uint8_t[kCap]);
  std::memset(data.get(), 0, kCap);
  std::memcpy(data.get(), p + 16, std::min(n - 16, kCap));
  RingRx rx;
  rx.attach(ctl.get(), data.get(), kCap);
  for (int i = 0; i < 256; ++i) {
    WireHdr h;
    const uint8_t* payload = nullptr;
    int r = rx.next(&h, &payload);
    if (r <= 0) return;
    HMC_FUZZ_CHECK(payload >= data.get() + kRecordHeader && payload <= data.get() + kCap);
    const uint64_t plen = (h.flags & kFlagPayload) ? h.len : 0;
    HMC_FUZZ_CHECK(plen <= static_cast<uint64_t>(data.get() + kCap - payload));
    handle_msg(h, payload, plen);
    rx.advance();
  }
}

const Decoder kDecoders[] = {handle, stream, ring};

WireHdr hdr(uint8_t type, uint8_t flags, uint64_t len, uint64_t aux = 0) {
  WireHdr h{};
  h.type = type;
  h.flags = flags;
  h.tag = 0x10;
  h.id = 7;
  h.sink = 3;
  h.addr = 0x1000;
  h.len = len;
  h.aux = aux;
  return h;
}

void append(std::vector<uint8_t>* out, const WireHdr& h, size_t payload) {
  const auto* b = reinterpret_cast<const uint8_t*>(&h);
  out->insert(out->end(), b, b + sizeof h);
  out->resize(out->size() + payload, 0x5a);
}

void append_vec(std::vector<uint8_t>* out, uint8_t type, uint8_t flags, size_t pieces,
                size_t piece_len) {
  const bool inline_data = (flags & kFlagVecInline) != 0;
  const size_t list = pieces * sizeof(VecPieceWire);
  const size_t len = list + (inline_data ? pieces * piece_len : 0);
  WireHdr h = hdr(type, static_cast<uint8_t>(flags | kFlagPayload), len, list);
  const auto* b = reinterpret_cast<const uint8_t*>(&h);
  out->insert(out->end(), b, b + sizeof h);
  for (size_t i = 0; i < pieces; ++i) {
    VecPieceWire v{0x1000 + i * 256, piece_len, 0x7f0000000000ull + i * 256};
    const auto* pb = reinterpret_cast<const uint8_t*>(&v);
    out->insert(out->end(), pb, pb + sizeof v);
  }
  out->resize(out->size() + (len - list), 0x5a);
}

}  // namespace
}  // namespace hmc::hoststage

namespace hmc::fuzz {

void fuzz_one(const uint8_t* data, size_t len) {
  pick(hoststage::kDecoders, data, len);
}

std::vector<Seed> seeds() {
  using namespace hmc::hoststage;
  std::vector<Seed> out;
  ConnHandle tcp;
  tcp.nonce = 0x1122334455667788ull;
  tcp.addrs = {{htonl(0x7f000001), 40001}, {htonl(0x0a000007), 40001}};
  uint8_t b[256];
  out.push_back({"handle-tcp", picked(0, bytes_of(b, encode_handle(tcp, b, sizeof b)))});
  ConnHandle shm;
  shm.dev = DevKind::kShm;
  shm.nonce = 0x99;
  shm.pid = 4242;
  shm.unix_name = "hmc-hs-4242-99";
  out.push_back({"handle-shm", picked(0, bytes_of(b, encode_handle(shm, b, sizeof b)))});

  // A stream: every message type once, a DATA frame with its payload, vectored put and get.
  const uint16_t limit_code = (64u << 10) >> 4;  // an inline limit of 64 KiB
  std::vector<uint8_t> s{uint8_t(limit_code), uint8_t(limit_code >> 8)};
  append(&s, hdr(kMsgEager, kFlagPayload, 100), 100);
  append(&s, hdr(kMsgRts, 0, 1u << 20), 0);
  append(&s, hdr(kMsgCts, 0, 1u << 20), 0);
  append(&s, hdr(kMsgData, 0, 300), 300);
  append(&s, hdr(kMsgFin, 0, 0), 0);
  append(&s, hdr(kMsgPut, kFlagPayload | kFlagNotify, 64), 64);
  append(&s, hdr(kMsgPutCts, 0, 0), 0);
  append(&s, hdr(kMsgPutAck, 0, 0), 0);
  append(&s, hdr(kMsgGet, 0, 4096), 0);
  append(&s, hdr(kMsgGetResp, kFlagPayload, 128), 128);
  append_vec(&s, kMsgPutV, kFlagVecInline, 3, 16);
  append_vec(&s, kMsgGetV, 0, 4, 4096);
  append(&s, hdr(kMsgVecCts, 0, 4), 0);
  append(&s, hdr(kMsgVecAck, 0, 0), 0);
  out.push_back({"stream", picked(1, s)});

  // A ring as its producer leaves it (RingTx::push), wrap record included.
  constexpr size_t kCap = 4096;
  auto ctl = std::make_unique<RingCtl>();
  ctl->head.store(3072);  // start near the end, so that the records wrap
  ctl->tail.store(3072);
  std::vector<uint8_t> data(kCap, 0);
  RingTx tx;
  tx.attach(ctl.get(), data.data(), kCap);
  std::vector<uint8_t> payload(200, 0x5a);
  tx.push(hdr(kMsgEager, kFlagPayload, 200), payload.data(), payload.size());
  tx.push(hdr(kMsgRts, 0, 1u << 20), nullptr, 0);
  std::vector<uint8_t> vec;
  append_vec(&vec, kMsgPutV, kFlagVecInline, 2, 32);
  WireHdr vh;
  std::memcpy(&vh, vec.data(), sizeof vh);
  tx.push(vh, vec.data() + sizeof vh, vec.size() - sizeof vh);
  tx.push(hdr(kMsgEager, kFlagPayload, 900), std::vector<uint8_t>(900, 1).data(), 900);
  std::vector<uint8_t> r(16);
  uint64_t head = ctl->head.load(), tail = 3072;
  std::memcpy(r.data(), &head, 8);
  std::memcpy(r.data() + 8, &tail, 8);
  r.insert(r.end(), data.begin(), data.end());
  out.push_back({"ring", picked(2, r)});
  return out;
}

}  // namespace hmc::fuzz
