// The wire format of framed messages (core/src/framed/frame_header.h, docs/protocols-wire.md):
// the bytes are pinned, since peers of other builds read them.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "framed/frame_header.h"

namespace hmc {
namespace {

using Bytes = std::vector<uint8_t>;

const Bytes kV1 = {0x48, 0x43, 0x4d, 0x46, 0x01, 0x00, 0x00, 0x00,
                   0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
const Bytes kV3 = {0x48, 0x43, 0x4d, 0x46, 0x03, 0x00, 0x00, 0x00, 0xe0, 0x93, 0x04, 0x00,
                   0x00, 0x00, 0x00, 0x00, 0x34, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
const Bytes kV2 = {0x48, 0x43, 0x4d, 0x46, 0x02, 0x00, 0x03, 0x00, 0x00, 0x00, 0x10,
                   0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00,
                   0x00, 0x00, 0x63, 0x75, 0x64, 0x61, 0x00, 0x00, 0x00, 0x00, 0x00,
                   0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xaa, 0xbb, 0xcc};
const Bytes kV4 = {0x48, 0x43, 0x4d, 0x46, 0x04, 0x00, 0x03, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00,
                   0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x63, 0x75,
                   0x64, 0x61, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                   0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xaa, 0xbb, 0xcc};
const Bytes kDesc = {0x48, 0x4d, 0x53, 0x44, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40,
                     0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
                     0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00};

IpcExport cuda_export(bool shared_too) {
  IpcExport ex;
  ex.plugin = "cuda";
  ex.handle = {0xaa, 0xbb, 0xcc};
  ex.offset = 0x10;
  ex.shared_too = shared_too;
  return ex;
}

Bytes encoded(size_t n, const uint8_t* b) {
  return Bytes(b, b + n);
}

TEST(FrameHeader, EncodesTheBytesOfEveryVersion) {
  uint8_t b[kHeaderMax];
  EXPECT_EQ(encoded(encode_pieces_header(b, 0x0102030405060708ull), b), kV1);
  EXPECT_EQ(encoded(encode_shared_header(b, 300000, 0x1234), b), kV3);
  EXPECT_EQ(encoded(encode_ipc_header(b, 1u << 20, cuda_export(false)), b), kV2);
  EXPECT_EQ(encoded(encode_ipc_header(b, 1u << 20, cuda_export(true)), b), kV4);
  EXPECT_EQ(kHeaderMax, 176u);  // the header receive's length
}

TEST(FrameHeader, DecodesWhatItEncodes) {
  Header h;
  ASSERT_TRUE(decode_header(kV1.data(), kV1.size(), 1, &h));
  EXPECT_EQ(h.kind, HeaderKind::Pieces);
  EXPECT_EQ(h.total, 0x0102030405060708ull);
  ASSERT_TRUE(decode_header(kV3.data(), kV3.size(), 1, &h));
  EXPECT_EQ(h.kind, HeaderKind::Shared);
  EXPECT_EQ(h.total, 300000u);
  for (bool v4 : {false, true}) {
    const Bytes& in = v4 ? kV4 : kV2;
    ASSERT_TRUE(decode_header(in.data(), in.size(), 1, &h));
    EXPECT_EQ(h.kind, HeaderKind::Ipc);
    EXPECT_EQ(h.total, 1u << 20);
    EXPECT_EQ(h.ipc.plugin, "cuda");
    EXPECT_EQ(h.ipc.handle, Bytes({0xaa, 0xbb, 0xcc}));
    EXPECT_EQ(h.ipc.offset, 0x10u);
    EXPECT_EQ(h.ipc.shared_too, v4);
  }
}

TEST(FrameHeader, RefusesMalformedHeaders) {
  Header h;
  auto refused = [&](Bytes in, size_t got, uint64_t first = 1) {
    in.resize(kHeaderMax);
    return !decode_header(in.data(), got, first, &h);
  };
  EXPECT_TRUE(refused(kV1, 15));
  EXPECT_TRUE(refused(kV1, 17));  // each version has its exact length
  EXPECT_TRUE(refused(kV3, 16));
  EXPECT_TRUE(refused(kV2, kV2.size() - 1));
  EXPECT_TRUE(refused(kV4, kV4.size() + 1));
  EXPECT_TRUE(refused(kV1, kV1.size(), 0x0102030405060709ull));  // less than piece 0
  EXPECT_TRUE(refused(kV3, kV3.size(), 300001));
  Bytes bad = kV1;
  bad[0] ^= 1;  // magic
  EXPECT_TRUE(refused(bad, bad.size()));
  bad = kV1;
  bad[4] = 5;  // version
  EXPECT_TRUE(refused(bad, bad.size()));
  bad = kV2;
  bad[6] = 0;  // no handle
  EXPECT_TRUE(refused(bad, 40));
  bad = kV2;
  std::memset(bad.data() + 24, 'x', 16);  // the plugin name is not NUL-terminated
  EXPECT_TRUE(refused(bad, bad.size()));
  bad.assign(kHeaderMax + 48, 0);  // a handle longer than HMC_DEVICE_IPC_HANDLE_MAX
  std::copy(kV4.begin(), kV4.begin() + 48, bad.begin());
  uint16_t len = HMC_DEVICE_IPC_HANDLE_MAX + 1;
  std::memcpy(bad.data() + 6, &len, 2);
  EXPECT_FALSE(decode_header(bad.data(), 48 + len, 1, &h));
}

TEST(FrameHeader, PieceDescriptorsStayInsideTheirSlab) {
  PieceDescriptor d;
  d.fd = 7;
  d.slab_bytes = 1u << 22;
  d.offset = 1u << 18;
  d.len = 1u << 18;
  uint8_t b[kDescriptorSize];
  encode_descriptor(b, d);
  EXPECT_EQ(encoded(sizeof b, b), kDesc);
  PieceDescriptor out;
  ASSERT_TRUE(decode_descriptor(b, sizeof b, &out));
  EXPECT_EQ(out.fd, 7);
  EXPECT_EQ(out.len, 1u << 18);
  EXPECT_FALSE(decode_descriptor(b, sizeof b - 1, &out));
  d.offset = d.slab_bytes - 1;  // runs past the slab's end
  encode_descriptor(b, d);
  EXPECT_FALSE(decode_descriptor(b, sizeof b, &out));
  d.len = 0;  // an abort: no buffer to check
  encode_descriptor(b, d);
  EXPECT_TRUE(decode_descriptor(b, sizeof b, &out));
}

TEST(FrameHeader, RepliesAreACodeAndFourZeroBytes) {
  uint8_t b[kReplySize];
  std::memset(b, 0xff, sizeof b);
  encode_reply(b, kReplyShared);
  EXPECT_EQ(encoded(sizeof b, b), Bytes({3, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(decode_reply(b), kReplyShared);
}

TEST(FrameGeometry, PiecesEndOnChunkMultiples) {
  const FrameGeometry g{65537, 262144};
  EXPECT_EQ(piece_count(0, g), 1u);
  EXPECT_EQ(piece_count(65536, g), 1u);
  EXPECT_EQ(piece_count(65537, g), 2u);  // exactly piece 0: a header follows, no pieces
  EXPECT_EQ(piece_count(65538, g), 1u);
  EXPECT_EQ(piece_count(262143, g), 1u);
  EXPECT_EQ(piece_count(262144, g), 3u);
  EXPECT_EQ(piece_count(262145, g), 4u);
  EXPECT_EQ(piece_count(8388613, g), 35u);
  ASSERT_EQ(framed_piece_count(786449, g), 6u);
  const size_t want[][2] = {{65537, 196607}, {262144, 262144}, {524288, 262144}, {786432, 17}};
  for (size_t i = 2; i < 6; ++i) {
    size_t off, len;
    piece_span(i, 786449, g, &off, &len);
    EXPECT_EQ(off, want[i - 2][0]) << "piece " << i;
    EXPECT_EQ(len, want[i - 2][1]) << "piece " << i;
  }
  EXPECT_EQ(wire_tag(5, 0), 5u);
  EXPECT_EQ(wire_tag(5, 1), 5u | kContinuationTagBit);
  EXPECT_EQ(reply_tag(5), 5u | kReplyTagBit);
}

}  // namespace
}  // namespace hmc
