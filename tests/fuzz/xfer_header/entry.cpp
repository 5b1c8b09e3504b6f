// The framed-message wire format (framed/frame_header.h): the header a sending peer puts in piece
// 0 of a framed message, the descriptors of its shared bounces, and replies/acknowledgements.
//  data[0] % 3 == 0: data[1..8] is the receiver's first-piece size, the rest a header.
//  data[0] % 3 == 1: data[1..] is a piece descriptor.
//  data[0] % 3 == 2: data[1..] is a reply (the receiver reads kReplySize bytes).
#include <cstring>

#include "framed/frame_header.h"
#include "fuzz_target.h"

namespace hmc::fuzz {
namespace {

void header(const uint8_t* p, size_t n) {
  if (n < 8) return;
  uint64_t first = 0;
  std::memcpy(&first, p, 8);
  p += 8;
  n -= 8;
  Header h;
  if (!decode_header(p, n, first, &h)) return;
  HMC_FUZZ_CHECK(h.total >= first && n <= kHeaderMax);
  if (h.kind != HeaderKind::Ipc) return;
  HMC_FUZZ_CHECK(!h.ipc.handle.empty() && h.ipc.handle.size() <= HMC_DEVICE_IPC_HANDLE_MAX);
  uint8_t again[kHeaderMax];
  size_t len = encode_ipc_header(again, h.total, h.ipc);
  HMC_FUZZ_CHECK(len <= n);  // a version 4 header without the shared flag comes back as 2
  Header h2;
  HMC_FUZZ_CHECK(decode_header(again, len, first, &h2));
  HMC_FUZZ_CHECK(h2.kind == HeaderKind::Ipc && h2.total == h.total &&
                 h2.ipc.plugin == h.ipc.plugin && h2.ipc.handle == h.ipc.handle &&
                 h2.ipc.offset == h.ipc.offset && h2.ipc.shared_too == h.ipc.shared_too);
}

void descriptor(const uint8_t* p, size_t n) {
  PieceDescriptor d;
  if (!decode_descriptor(p, n, &d)) return;
  // What the receiver maps and reads: inside the slab.
  HMC_FUZZ_CHECK(d.len == 0 || (d.offset + d.len >= d.offset && d.offset + d.len <= d.slab_bytes));
  uint8_t again[kDescriptorSize];
  encode_descriptor(again, d);
  HMC_FUZZ_CHECK(std::memcmp(again, p, kDescriptorSize) == 0);
}

void reply(const uint8_t* p, size_t n) {
  if (n < kReplySize) return;
  uint32_t code = decode_reply(p);
  uint8_t again[kReplySize];
  encode_reply(again, code);
  HMC_FUZZ_CHECK(std::memcmp(again, p, 4) == 0);
}

const Decoder kDecoders[] = {header, descriptor, reply};

std::vector<uint8_t> with_first(uint64_t first, const uint8_t* p, size_t n) {
  std::vector<uint8_t> out(8);
  std::memcpy(out.data(), &first, 8);
  out.insert(out.end(), p, p + n);
  return picked(0, out);
}

}  // namespace

void fuzz_one(const uint8_t* data, size_t len) {
  pick(kDecoders, data, len);
}

std::vector<Seed> seeds() {
  const uint64_t first = (64u << 10) + 1;
  uint8_t b[kHeaderMax];
  std::vector<Seed> out;
  out.push_back({"header-pieces", with_first(first, b, encode_pieces_header(b, 16u << 20))});
  out.push_back({"header-shared", with_first(first, b, encode_shared_header(b, 1u << 30, 4242))});
  IpcExport ex;
  ex.plugin = "cuda";
  ex.handle.assign(64, 0x5a);
  ex.offset = 4096;
  out.push_back({"header-ipc", with_first(first, b, encode_ipc_header(b, 8u << 20, ex))});
  ex.shared_too = true;
  ex.plugin = "hip";
  out.push_back({"header-ipc-shared", with_first(first, b, encode_ipc_header(b, 8u << 20, ex))});
  uint8_t d[kDescriptorSize];
  encode_descriptor(d, PieceDescriptor{7, 64u << 20, 2u << 20, 1u << 20});
  out.push_back({"descriptor", picked(1, bytes_of(d, sizeof d))});
  uint8_t r[kReplySize];
  encode_reply(r, kReplyShared);
  out.push_back({"reply-shared", picked(2, bytes_of(r, sizeof r))});
  return out;
}

}  // namespace hmc::fuzz
