// The wire format of framed messages (docs/protocols-wire.md): reserved tag bits, how a message
// is cut into pieces, its header versions, shared-bounce descriptors, replies and acknowledgements.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hmc/plugin/device.h"
#include "peer/frame_geometry.h"

namespace hmc {

// Reserved tag bits (user tags are below HMC_TAG_MAX = 2^59).
constexpr uint64_t kContinuationTagBit = uint64_t(1) << 59;  // a message's header and later pieces
constexpr uint64_t kReplyTagBit = uint64_t(1) << 60;         // replies and acknowledgements
constexpr uint64_t kInternalTagBit = uint64_t(1) << 61;      // the core's own transfers

// Pieces of a message of `size` bytes sent as pieces, header included.
inline size_t framed_piece_count(uint64_t size, const FrameGeometry& g) {
  uint64_t rest = size <= g.first ? 0 : (size + g.chunk - 1) / g.chunk - g.first / g.chunk;
  return 2 + static_cast<size_t>(rest);
}

// Pieces of a message of `size` bytes, header included (1 for a single message).
inline size_t piece_count(uint64_t size, const FrameGeometry& g) {
  return multi_piece(size, g) ? framed_piece_count(size, g) : 1;
}

// Where piece `index` (>= 2) of a `total`-byte message starts, and its length. Pieces after the
// first end on multiples of the chunk, so that device copies start chunk-aligned.
inline void piece_span(size_t index, uint64_t total, const FrameGeometry& g, size_t* offset,
                       size_t* len) {
  uint64_t j = index - 2, base = g.first / g.chunk;
  uint64_t off = j == 0 ? g.first : (base + j) * g.chunk;
  uint64_t end = std::min<uint64_t>((base + j + 1) * g.chunk, total);
  *offset = static_cast<size_t>(off);
  *len = static_cast<size_t>(end - off);
}

// The tag piece `index` travels on: piece 0 on the user's, the rest on the continuation tag.
inline uint64_t wire_tag(uint64_t tag, size_t index) {
  return index == 0 ? tag : tag | kContinuationTagBit;
}
inline uint64_t reply_tag(uint64_t tag) {
  return tag | kReplyTagBit;
}

// A sender's device IPC export of the allocation holding a message (DeviceRegistry::ipc_export).
struct IpcExport {
  std::string plugin;           // device plugin name ("cuda"), as the receiver's registry knows it
  std::vector<uint8_t> handle;  // the plugin's handle (at most HMC_DEVICE_IPC_HANDLE_MAX bytes)
  uint64_t offset = 0;          // where the message starts in the allocation
  bool shared_too = false;      // the header (version 4) also offers shared bounces
};

// Header sizes: version 1 and 3 are fixed; 2 and 4 end with the IPC handle.
constexpr size_t kPiecesHeaderSize = 16;
constexpr size_t kSharedHeaderSize = 24;
constexpr size_t kIpcHeaderFixed = 40;
constexpr size_t kIpcSharedHeaderFixed = 48;
// The receive buffer of a header: the longest version 4.
constexpr size_t kHeaderMax = kIpcSharedHeaderFixed + HMC_DEVICE_IPC_HANDLE_MAX;
static_assert(kHeaderMax == 176, "the header receive's length is part of the wire protocol");

// What the header says comes after piece 0.
enum class HeaderKind {
  Pieces,  // version 1: the pieces, through the transport
  Ipc,     // version 2 or 4: an IPC handle of the sender's allocation
  Shared,  // version 3: descriptors of the sender's bounce buffers, if the receiver replies so
};

struct Header {
  HeaderKind kind = HeaderKind::Pieces;
  uint64_t total = 0;  // the message's size
  IpcExport ipc;       // HeaderKind::Ipc
};

// Encoders write into a kHeaderMax buffer and return the header's length.
size_t encode_pieces_header(uint8_t* out, uint64_t total);
size_t encode_ipc_header(uint8_t* out, uint64_t total, const IpcExport& ex);  // 4 if shared_too
size_t encode_shared_header(uint8_t* out, uint64_t total, uint32_t pid);
// A received header of `got` bytes; false when it is malformed or announces fewer than `first`
// bytes.
bool decode_header(const uint8_t* in, size_t got, uint64_t first, Header* out);

// Shared bounces: each piece travels as a descriptor of the sender's bounce buffer.
constexpr size_t kDescriptorSize = 32;
struct PieceDescriptor {
  int32_t fd = -1;          // the staging slab's memfd in the sender's process
  uint64_t slab_bytes = 0;  // the slab's size
  uint64_t offset = 0;      // of the buffer in the slab
  uint64_t len = 0;         // 0: the sender's device failed; the message is aborted
};
void encode_descriptor(uint8_t* out, const PieceDescriptor& d);
// False when malformed, or when a non-empty piece lies outside its slab.
bool decode_descriptor(const uint8_t* in, size_t got, PieceDescriptor* d);

// Replies to a header offering device IPC or shared bounces, and acknowledgements of shared
// pieces: a u32 code and 4 zero bytes on the reply tag.
constexpr size_t kReplySize = 8;
constexpr uint32_t kReplyDone = 0;      // the receiver has what it needs; the sender is done
constexpr uint32_t kReplyPieces = 1;    // send the pieces (version 1)
constexpr uint32_t kReplyNoIpc = 2;     // send the pieces, and no more IPC to this peer
constexpr uint32_t kReplyShared = 3;    // send descriptors of shared bounces
constexpr uint32_t kAckRead = 0;        // the shared piece was read
constexpr uint32_t kAckUnreadable = 1;  // it could not be: no more shared bounces to this peer
void encode_reply(uint8_t* out, uint32_t code);
uint32_t decode_reply(const uint8_t* in);

}  // namespace hmc
