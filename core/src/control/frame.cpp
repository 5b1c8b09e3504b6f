#include "control/frame.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cstring>

namespace hmc::control {
namespace {

uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Compact the parser's buffer once the consumed prefix is both large and most of it, so that
// compaction costs O(1) amortised per byte.
constexpr size_t kCompactThreshold = 64 * 1024;

}  // namespace

bool is_known_type(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::Hello:
    case MsgType::HelloAck:
    case MsgType::Auth:
    case MsgType::Welcome:
    case MsgType::Error:
    case MsgType::Caps:
    case MsgType::NetHandle:
    case MsgType::NetReady:
    case MsgType::Notify:
    case MsgType::Heartbeat:
    case MsgType::Bye:
    case MsgType::RegionRequest:
    case MsgType::RegionReply:
    case MsgType::User:
    case MsgType::RegionRelease:
    case MsgType::RegionGone:
    case MsgType::RegionGoneAck:
    case MsgType::StagedPut:
    case MsgType::StagedGet:
    case MsgType::StagedDone:
    case MsgType::NetHello:
    case MsgType::NotifyAck: return true;
  }
  return false;
}

const char* msg_type_name(MsgType type) {
  switch (type) {
    case MsgType::Hello: return "Hello";
    case MsgType::HelloAck: return "HelloAck";
    case MsgType::Auth: return "Auth";
    case MsgType::Welcome: return "Welcome";
    case MsgType::Error: return "Error";
    case MsgType::Caps: return "Caps";
    case MsgType::NetHandle: return "NetHandle";
    case MsgType::NetReady: return "NetReady";
    case MsgType::Notify: return "Notify";
    case MsgType::Heartbeat: return "Heartbeat";
    case MsgType::Bye: return "Bye";
    case MsgType::RegionRequest: return "RegionRequest";
    case MsgType::RegionReply: return "RegionReply";
    case MsgType::User: return "User";
    case MsgType::RegionRelease: return "RegionRelease";
    case MsgType::RegionGone: return "RegionGone";
    case MsgType::RegionGoneAck: return "RegionGoneAck";
    case MsgType::StagedPut: return "StagedPut";
    case MsgType::StagedGet: return "StagedGet";
    case MsgType::StagedDone: return "StagedDone";
    case MsgType::NotifyAck: return "NotifyAck";
    case MsgType::NetHello: return "NetHello";
  }
  return "unknown";
}

std::string msg_type_name(uint16_t type) {
  if (is_known_type(type)) return msg_type_name(static_cast<MsgType>(type));
  return fmt::format("unknown type {}", type);
}

void encode_frame(MsgType type, const uint8_t* payload, size_t len, std::vector<uint8_t>* out) {
  assert(len <= kMaxFramePayload);
  const size_t at = out->size();
  out->resize(at + kFrameHeaderSize + len);
  uint8_t* h = out->data() + at;
  store_u32(h, kFrameMagic);
  store_u16(h + 4, kFrameVersion);
  store_u16(h + 6, static_cast<uint16_t>(type));
  store_u32(h + 8, static_cast<uint32_t>(len));
  if (len) memcpy(h + kFrameHeaderSize, payload, len);
}

Decode decode_frame(const uint8_t* data, size_t len, uint16_t* type, const uint8_t** payload,
                    size_t* payload_len, size_t* consumed, std::string* err, size_t max_payload) {
  auto error = [&](std::string text) {
    if (err) *err = std::move(text);
    return Decode::Error;
  };
  if (len >= 4) {
    uint32_t magic = load_u32(data);
    if (magic != kFrameMagic)
      return error(fmt::format(
          "bad frame magic 0x{:08x} (expected 0x{:08x} \"HMC1\"): the peer is not an hmc control "
          "endpoint or the stream lost sync",
          magic, kFrameMagic));
  } else if (len > 0) {
    // Even a short prefix must agree with the magic: fail early on a non-hmc peer.
    uint8_t magic_bytes[4];
    store_u32(magic_bytes, kFrameMagic);
    if (memcmp(data, magic_bytes, len) != 0)
      return error(
          "bad frame magic (the first bytes are not \"HMC1\"): the peer is not an hmc "
          "control endpoint or the stream lost sync");
  }
  if (len >= 6) {
    uint16_t version = load_u16(data + 4);
    if (version != kFrameVersion)
      return error(
          fmt::format("unsupported control frame version {} (this side speaks frame version {})",
                      version, kFrameVersion));
  }
  if (len >= 8) {
    uint16_t t = load_u16(data + 6);
    if (!is_known_type(t)) return error(fmt::format("unknown control message type {}", t));
  }
  if (len < kFrameHeaderSize) return Decode::NeedMore;
  uint32_t plen = load_u32(data + 8);
  const size_t limit = std::min(max_payload, kMaxFramePayload);
  if (plen > limit)
    return error(fmt::format("control frame payload of {} bytes exceeds the limit of {} bytes",
                             plen, limit));
  if (len - kFrameHeaderSize < plen) return Decode::NeedMore;
  *type = load_u16(data + 6);
  *payload = data + kFrameHeaderSize;
  *payload_len = plen;
  *consumed = kFrameHeaderSize + plen;
  return Decode::Ok;
}

void FrameParser::append(const uint8_t* p, size_t n) {
  if (n == 0) return;
  if (head_ == buf_.size()) {
    buf_.clear();
    head_ = 0;
  } else if (head_ > kCompactThreshold && head_ > buf_.size() / 2) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  buf_.insert(buf_.end(), p, p + n);
}

Decode FrameParser::next(Message* out, std::string* err) {
  if (!error_.empty()) {
    if (err) *err = error_;
    return Decode::Error;
  }
  uint16_t type;
  const uint8_t* payload;
  size_t payload_len, consumed;
  std::string e;
  Decode d = decode_frame(buf_.data() + head_, buf_.size() - head_, &type, &payload, &payload_len,
                          &consumed, &e, max_payload_);
  if (d == Decode::Error) {
    error_ = e.empty() ? "malformed control frame" : e;
    buf_.clear();
    buf_.shrink_to_fit();
    head_ = 0;
    if (err) *err = error_;
    return d;
  }
  if (d == Decode::NeedMore) return d;
  out->type = static_cast<MsgType>(type);
  out->payload.assign(payload, payload + payload_len);
  head_ += consumed;
  if (head_ == buf_.size()) {
    buf_.clear();
    head_ = 0;
  }
  return Decode::Ok;
}

}  // namespace hmc::control
