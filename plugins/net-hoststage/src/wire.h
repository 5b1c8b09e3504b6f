// What travels between two hoststage endpoints: the 64-byte hello that opens every stream, and
// the 56-byte header of every protocol message (on a TCP stream, or in a shared-memory ring).
//
// Integers are in the sender's byte order; the hello carries an endianness mark and a peer with
// the other order is refused at connect time, so headers need no conversion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hmc::hoststage {

// Bumped on any incompatible change of the handle, hello or headers. Checked at connect: a
// listener refuses a handle or hello of another version, naming both. 2: vectored put/get.
constexpr uint8_t kProtocolVersion = 2;
constexpr uint32_t kHelloMagic = 0x53484d48u;  // "HMHS" in memory order on little-endian hosts
constexpr uint32_t kEndianMark = 0x01020304u;

enum HelloKind : uint8_t { kHelloConnect = 1, kHelloAccept = 2 };

// First bytes on every stream. Connector -> acceptor: kHelloConnect on each stream (for shm with
// SCM_RIGHTS {ring memfd, connector's wake eventfd}). Acceptor -> connector: one kHelloAccept on
// stream 0 once all streams arrived (for shm with SCM_RIGHTS {acceptor's wake eventfd}).
struct Hello {
  uint32_t magic;
  uint8_t version;
  uint8_t kind;       // HelloKind
  uint16_t stream;    // index of this stream, 0..nstreams-1
  uint16_t nstreams;  // streams the connector opens
  uint16_t reserved0;
  uint32_t endian;       // kEndianMark as the sender stores it
  uint64_t nonce;        // from the listener's handle; echoed in the accept
  uint64_t eager_limit;  // largest inline payload the sender accepts (both sides use the min)
  uint64_t ring_bytes;   // shm: bytes per ring direction in the connector's memfd
  uint32_t pid;          // informational; shm uses SO_PEERCRED
  uint8_t reserved[20];
};
static_assert(sizeof(Hello) == 64, "hello is 64 bytes on the wire");

enum MsgType : uint8_t {
  kMsgEager = 1,  // tag, len [+ payload]: a whole message up to the eager limit
  kMsgRts,        // tag, id (sender's request), len (message size), aux (sender's buffer, shm)
  kMsgCts,        // id (sender's request), sink, len (bytes the receiver accepts): stream DATA
  kMsgFin,        // id (sender's request), status: the receiver pulled the data itself (shm)
  kMsgData,       // sink, addr (offset in the sink), len + payload: one chunk of a bulk transfer
  kMsgPut,        // tag (region key), id, addr, len [+ payload], aux (initiator's buffer, shm),
                  // sink (the notification's value, with kFlagNotify)
  kMsgPutCts,     // id, sink: the owner accepted a large put; stream DATA into sink
  kMsgPutAck,     // id, status: the put is in place (or was refused)
  kMsgGet,        // tag (region key), id, addr, len, aux (initiator's buffer, shm)
  kMsgGetResp,    // id, status, len [+ payload]; without payload on success: data was written
  kMsgPutV,       // tag (region key), id, addr (index of its first piece in the request),
                  // aux (bytes of list), len + payload: VecPieceWire[aux / 24], then with
                  // kFlagVecInline the pieces' bytes, one after the other
  kMsgGetV,       // the same for a vectored get (never inline); the owner's DATA goes to sink
                  // `id`
  kMsgVecCts,     // id, sink, addr (first piece), len (pieces): stream DATA of those pieces
  kMsgVecAck,     // id, status, len: one PutV/GetV message is done. A get's owner says in len
                  // how many bytes it streamed as DATA (0: none, or they follow inline with
                  // kFlagPayload: the pieces [addr, addr + aux) one after the other)
  kMsgTypeEnd
};

// WireHdr.flags: a payload of len bytes follows the header (not used by kMsgData, whose payload
// always follows).
constexpr uint8_t kFlagPayload = 1;
// kMsgPut: the put carries a notification (iput_notify), whose value travels in `sink`.
constexpr uint8_t kFlagNotify = 2;
// kMsgPutV: the pieces' bytes follow the list in the payload.
constexpr uint8_t kFlagVecInline = 4;

// One piece of a PutV/GetV message. A DATA frame of a vectored transfer carries in `tag` the
// index (within the sink's pieces) of the piece its payload starts in, and in `addr` the offset
// there; the payload runs on across the following pieces.
struct VecPieceWire {
  uint64_t addr;  // in the owner's region
  uint64_t len;
  uint64_t aux;  // the initiator's buffer (its address, for cross-memory attach on shm)
};
static_assert(sizeof(VecPieceWire) == 24, "a vectored piece is 24 bytes on the wire");
// Pieces per PutV/GetV message: its list (6 KiB) is accepted whatever the eager limit (plus the
// eager limit's bytes of data, for an inline put); a request of more pieces sends several
// messages. A message whose pieces hold at most the eager limit's bytes carries them inline
// (put) or is answered with them inline (get): for small pieces, two copies beat a system call
// or a DATA frame per piece.
constexpr size_t kVecMaxPieces = 256;
constexpr size_t kVecListMax = kVecMaxPieces * sizeof(VecPieceWire);

struct WireHdr {
  uint8_t type;  // MsgType
  uint8_t flags;
  int16_t status;  // hmc_plugin_status_t for acks/responses
  uint32_t reserved;
  uint64_t tag;   // message tag, or region key for put/get
  uint64_t id;    // initiator's request id
  uint64_t sink;  // receiver-side sink id for bulk data
  uint64_t addr;  // remote address (put/get) or offset (data)
  uint64_t len;   // payload, message, or transfer length
  uint64_t aux;   // shm: the initiator's buffer address, for cross-memory attach
};
static_assert(sizeof(WireHdr) == 56, "header is 56 bytes on the wire");

// ---- reading what a peer sent (the stream's and the ring's receivers, and the handlers) -----

// The largest payload a frame of this type may carry inline, for a receiver whose inline limit
// is rx_inline_max: a vectored put/get's list is accepted whatever the limit.
inline size_t payload_limit(uint8_t type, size_t rx_inline_max) {
  return type == kMsgPutV   ? kVecListMax + rx_inline_max
         : type == kMsgGetV ? kVecListMax
                            : rx_inline_max;
}

// The frame at the front of a stream's received bytes.
enum class StreamFrame {
  kNeedMore,  // not all of it is here yet
  kData,      // a DATA header (*used = its size); its len payload bytes stream after it
  kMsg,       // a message: header and inline payload, *used bytes in all
  kTooLong,   // a message announcing more inline payload than payload_limit
};
inline StreamFrame take_stream_frame(const uint8_t* p, size_t avail, size_t rx_inline_max,
                                     WireHdr* h, size_t* used) {
  if (avail < sizeof(WireHdr)) return StreamFrame::kNeedMore;
  std::memcpy(h, p, sizeof(*h));
  if (h->type == kMsgData) {
    *used = sizeof(WireHdr);
    return StreamFrame::kData;
  }
  uint64_t plen = (h->flags & kFlagPayload) != 0 ? h->len : 0;
  if (plen > payload_limit(h->type, rx_inline_max)) return StreamFrame::kTooLong;
  if (avail < sizeof(WireHdr) + plen) return StreamFrame::kNeedMore;
  *used = sizeof(WireHdr) + static_cast<size_t>(plen);
  return StreamFrame::kMsg;
}

// Whether a PutV/GetV header describes a list its payload holds: aux bytes of whole pieces, at
// most kVecListMax, the whole payload unless (a put with kFlagVecInline) the pieces' bytes
// follow it.
inline bool vec_list_ok(const WireHdr& h) {
  const bool inline_data = h.type == kMsgPutV && (h.flags & kFlagVecInline) != 0;
  return (h.flags & kFlagPayload) != 0 && h.aux % sizeof(VecPieceWire) == 0 &&
         h.aux <= kVecListMax && h.aux <= h.len && (inline_data || h.aux == h.len);
}

}  // namespace hmc::hoststage
