// Framing of every control-plane message.
//
//   offset 0  u32 magic          0x31434D48 ("HMC1" as little-endian bytes)
//          4  u16 frame version  kFrameVersion
//          6  u16 type           MsgType
//          8  u32 payload length <= kMaxFramePayload
//         12  payload
//
// All integers little-endian. The frame version covers this header only; the protocol version
// negotiated by the handshake covers the payloads. A frame with a wrong magic, another frame
// version, an unknown type or an oversized length is an error, never skipped: the stream has
// lost sync or the peer is not an hmc peer of this generation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hmc::control {

constexpr uint32_t kFrameMagic = 0x31434D48u;  // "HMC1"
constexpr uint16_t kFrameVersion = 1;
constexpr size_t kFrameHeaderSize = 12;
constexpr size_t kMaxFramePayload = 1 << 20;

// Every message type of the control plane. New types are added here (and to is_known_type and
// msg_type_name in frame.cpp), never renumbered. A peer built before a type existed fails the
// whole stream on it (decode_frame above), so a newer type may only be sent to a peer that has
// shown it knows it: the region messages go only to peers that took part in the exchange
// (regions/regions.cpp says how).
enum class MsgType : uint16_t {
  Hello = 1,
  HelloAck = 2,
  Auth = 3,
  Welcome = 4,
  Error = 5,
  Caps = 16,
  NetHandle = 17,
  NetReady = 18,
  Notify = 19,
  Heartbeat = 20,
  Bye = 21,
  RegionRequest = 22,  // importer -> owner: register my import of your region (peer/messages.h)
  RegionReply = 23,    // owner -> importer: the answer to a RegionRequest
  User = 24,
  // 25 is unused (it stands for "an unknown type" in tests).
  RegionRelease = 26,  // importer -> owner: one import of the region was released
  RegionGone = 27,     // owner -> importer: the region is being deregistered
  RegionGoneAck = 28,  // importer -> owner: no access to that region is running or will start
  // Target-side staging (xfer/target_staging.h): one-sided access to a region of device memory that
  // the owner's net plugins cannot reach. Sent only for descriptors flagged staged, which only
  // owners that know these types pack.
  StagedPut = 29,   // initiator -> owner: receive my framed send into your region (peer/messages.h)
  StagedGet = 30,   // initiator -> owner: send me this part of your region, framed
  StagedDone = 31,  // owner -> initiator: how the owner's side of a StagedPut/StagedGet ended
  NetHello = 32,    // initiator -> acceptor during setup: the net plugin's hello (peer/messages.h)
  // Target -> initiator: how many of its Notify messages were delivered (peer/notify_order.h).
  // Sent only to peers offering kFeatureCarriedNotify.
  NotifyAck = 33,
};

bool is_known_type(uint16_t type);
// "Hello", "Caps" ...; "type <n>" text for unknown values is built by the callers.
const char* msg_type_name(MsgType type);
std::string msg_type_name(uint16_t type);

// Appends header + payload to *out. len must be <= kMaxFramePayload (the caller checks; larger
// payloads abort in debug builds and are a bug).
void encode_frame(MsgType type, const uint8_t* payload, size_t len, std::vector<uint8_t>* out);

enum class Decode { NeedMore, Ok, Error };

// Decodes the frame at the start of data[0..len).
//   Ok:       *type, *payload (points into data), *payload_len, *consumed (header + payload) set.
//   NeedMore: the bytes so far are a valid prefix of a frame; outputs untouched.
//   Error:    *err (may be NULL) says what is wrong. Checks are made as soon as the bytes
//             concerned arrived, so a bad magic is reported after 4 bytes, not after 12.
// max_payload (at most kMaxFramePayload) lowers the length limit, for a stream that may only
// carry small messages so far (an unauthenticated connector's hello).
Decode decode_frame(const uint8_t* data, size_t len, uint16_t* type, const uint8_t** payload,
                    size_t* payload_len, size_t* consumed, std::string* err,
                    size_t max_payload = kMaxFramePayload);

// One decoded control message.
struct Message {
  MsgType type = MsgType::Error;
  std::vector<uint8_t> payload;
};

// Reassembles frames from a byte stream arriving in arbitrary pieces (what Channel uses; kept
// separate so that it can be tested and fuzzed without sockets). Memory held is the bytes
// appended and not yet consumed, so at most one partial frame plus what the caller appended.
class FrameParser {
 public:
  void append(const uint8_t* p, size_t n);
  // Ok: *out holds the next complete message. NeedMore: wait for more bytes. Error: *err set;
  // the stream is unusable (later calls return Error again with the same text).
  Decode next(Message* out, std::string* err);
  size_t buffered() const { return buf_.size() - head_; }
  // Frames longer than this are an error from now on (decode_frame's max_payload).
  void set_max_payload(size_t n) { max_payload_ = n; }

 private:
  size_t max_payload_ = kMaxFramePayload;
  std::vector<uint8_t> buf_;
  size_t head_ = 0;
  std::string error_;
};

}  // namespace hmc::control
