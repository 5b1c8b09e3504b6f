// How a transfer list's ranges become the chunks of vectored puts and gets
// (core/src/framed/pieced_rma.h, make_vec_pieces): every range a piece at its local address with
// the list's registration, in list order; a chunk ends at kVecChunkPieces pieces or before the
// piece that would take it past kVecChunkBytes, and a range larger than that is a chunk alone.
#include <gtest/gtest.h>

#include <vector>

#include "framed/pieced_rma.h"

namespace hmc {
namespace {

constexpr size_t kMaxPieces = VecPieces::kVecChunkPieces;
constexpr uint64_t kMaxBytes = VecPieces::kVecChunkBytes;

// Every piece in exactly one chunk, in order; each chunk's byte count its pieces' sum.
void expect_consistent(const VecPieces& v) {
  size_t next = 0;
  for (const VecPieces::Chunk& c : v.chunks) {
    EXPECT_EQ(c.first, next);
    EXPECT_GT(c.count, 0u);
    uint64_t bytes = 0;
    for (size_t i = c.first; i < c.first + c.count; ++i) bytes += v.iov[i].len;
    EXPECT_EQ(c.bytes, bytes);
    EXPECT_TRUE(c.count == 1 || c.bytes <= kMaxBytes) << "chunk at piece " << c.first;
    EXPECT_LE(c.count, kMaxPieces);
    next += c.count;
  }
  EXPECT_EQ(next, v.iov.size());
}

TEST(VecPieces, PiecesKeepTheListOrderAddressesAndRegistration) {
  std::vector<uint8_t> mem(1000);
  auto* mr = reinterpret_cast<hmc_net_mr_t*>(0x1234);
  std::vector<RmaSpan> spans = {{500, 0x9000, 10}, {0, 0x100, 1}, {20, 0x5000, 300}};
  auto v = make_vec_pieces(mem.data(), spans, mr);
  EXPECT_EQ(v->mr, mr);
  ASSERT_EQ(v->iov.size(), 3u);
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(v->iov[i].buf, mem.data() + spans[i].local);
    EXPECT_EQ(v->iov[i].len, spans[i].len);
    EXPECT_EQ(v->iov[i].mr, mr);
    EXPECT_EQ(v->iov[i].remote_addr, spans[i].remote_addr);
  }
  ASSERT_EQ(v->chunks.size(), 1u);
  EXPECT_EQ(v->chunks[0].bytes, 311u);
  expect_consistent(*v);
}

TEST(VecPieces, ChunksEndAtThePieceLimit) {
  std::vector<RmaSpan> spans;
  for (uint64_t i = 0; i < 2 * kMaxPieces + 3; ++i) spans.push_back({i * 128, i * 256, 64});
  auto v = make_vec_pieces(nullptr, spans, nullptr);
  ASSERT_EQ(v->chunks.size(), 3u);
  EXPECT_EQ(v->chunks[0].count, kMaxPieces);
  EXPECT_EQ(v->chunks[1].count, kMaxPieces);
  EXPECT_EQ(v->chunks[2].count, 3u);
  expect_consistent(*v);
}

TEST(VecPieces, ChunksEndBeforeTheByteLimitAndLargeRangesGoAlone) {
  const uint64_t quarter = kMaxBytes / 4;
  std::vector<RmaSpan> spans;
  uint64_t at = 0;
  auto add = [&](uint64_t len) {
    spans.push_back({at, at, len});
    at += len;
  };
  for (int i = 0; i < 4; ++i) add(quarter);  // exactly the limit: one chunk
  add(1);                                    // starts the next
  add(3 * kMaxBytes);                        // larger than the limit: alone
  add(quarter);
  auto v = make_vec_pieces(nullptr, spans, nullptr);
  ASSERT_EQ(v->chunks.size(), 4u);
  EXPECT_EQ(v->chunks[0].count, 4u);
  EXPECT_EQ(v->chunks[0].bytes, kMaxBytes);
  EXPECT_EQ(v->chunks[1].count, 1u);
  EXPECT_EQ(v->chunks[2].count, 1u);
  EXPECT_EQ(v->chunks[2].bytes, 3 * kMaxBytes);
  EXPECT_EQ(v->chunks[3].count, 1u);
  expect_consistent(*v);
}

}  // namespace
}  // namespace hmc
