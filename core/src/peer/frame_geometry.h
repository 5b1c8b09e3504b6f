// How a peer pair cuts framed messages into pieces, agreed at connect (framed/frame_header.h has
// the rest of the framed wire format).
#pragma once

#include <cstdint>

namespace hmc {

// The first piece's size peers offer (the pair uses the smaller offer, at most its chunk): odd,
// so that no power-of-two message is sent as pieces below the chunk.
constexpr uint64_t kFirstPiece = (64u << 10) + 1;

// Sizes of a framed message's pieces.
struct FrameGeometry {
  uint64_t first = 0;  // piece 0
  uint64_t chunk = 0;  // every later piece
};

// Whether a message of `size` bytes goes as pieces: from the chunk up, and at exactly the first
// piece's size, which a single message must never have (it announces a header).
inline bool multi_piece(uint64_t size, const FrameGeometry& g) {
  return size >= g.chunk || size == g.first;
}

}  // namespace hmc
