// The control plane's parsers: everything that reads bytes from a control-plane peer (frames,
// the handshake's messages, the engine's messages after it, the capability record among them).
// Each input goes through:
//  1. decode_frame, repeatedly, as one stream (each complete frame's payload goes to the decoder
//     registered for its type; each frame re-encodes to the same bytes);
//  2. FrameParser, in pieces of data-dependent sizes (it must yield the same frames and the
//     same final state as step 1);
//  3. the decoder picked by data[0], with data[1..] as its payload (reaches every decoder
//     without a valid frame header).
// Every decoder is checked for encode(decode(x)) being stable.
#include <cstring>

#include "control/frame.h"
#include "control/handshake.h"
#include "control/wire.h"
#include "fuzz_target.h"
#include "peer/messages.h"

namespace hmc::control {
namespace {

// decode -> encode -> decode -> encode must reach a fixed point after the first encode
// (decoders may ignore trailing bytes, so the first encoding can differ from the input).
template <typename T, bool (*DecodeFn)(const uint8_t*, size_t, T*),
          void (*EncodeFn)(const T&, Writer*)>
void round_trip(const uint8_t* p, size_t n) {
  T a;
  if (!DecodeFn(p, n, &a)) return;
  Writer w1;
  EncodeFn(a, &w1);
  T b;
  HMC_FUZZ_CHECK(DecodeFn(w1.data().data(), w1.size(), &b));
  Writer w2;
  EncodeFn(b, &w2);
  HMC_FUZZ_CHECK(w1.data() == w2.data());
}

// For a message that has a decoder but no encoder: only memory safety is checked.
template <typename T, bool (*DecodeFn)(const uint8_t*, size_t, T*)>
void decode_only(const uint8_t* p, size_t n) {
  T v;
  (void)DecodeFn(p, n, &v);
}

using PayloadDecoder = void (*)(const uint8_t*, size_t);
struct DecoderEntry {
  MsgType type;
  PayloadDecoder decode;
};

// Every payload decoder of the control plane: one line per message type, e.g.
//   {MsgType::Caps, round_trip<CapsRecord, decode_caps, encode_caps>},
// (appending keeps the data[0] selector of existing corpus files pointing at the same decoder).
const DecoderEntry kDecoders[] = {
    {MsgType::Hello, round_trip<HelloMsg, decode_hello, encode_hello>},
    {MsgType::HelloAck, round_trip<HelloAckMsg, decode_hello_ack, encode_hello_ack>},
    {MsgType::Auth, round_trip<AuthMsg, decode_auth, encode_auth>},
    {MsgType::Welcome, round_trip<WelcomeMsg, decode_welcome, encode_welcome>},
    {MsgType::Error, round_trip<ErrorMsg, decode_error, encode_error>},
    {MsgType::Caps, round_trip<path::Capabilities, msg::decode_caps, msg::encode_caps>},
    {MsgType::NetHandle,
     round_trip<msg::NetHandle, msg::decode_net_handle, msg::encode_net_handle>},
    {MsgType::NetReady, round_trip<msg::NetReady, msg::decode_net_ready, msg::encode_net_ready>},
    {MsgType::Notify, round_trip<msg::Notify, msg::decode_notify, msg::encode_notify>},
    {MsgType::Bye, round_trip<std::string, msg::decode_bye, msg::encode_bye>},
    {MsgType::RegionRequest,
     round_trip<msg::RegionRequest, msg::decode_region_request, msg::encode_region_request>},
    {MsgType::RegionReply,
     round_trip<msg::RegionReply, msg::decode_region_reply, msg::encode_region_reply>},
    {MsgType::RegionRelease, round_trip<uint64_t, msg::decode_region_id, msg::encode_region_id>},
    {MsgType::RegionGone, round_trip<uint64_t, msg::decode_region_id, msg::encode_region_id>},
    {MsgType::RegionGoneAck, round_trip<uint64_t, msg::decode_region_id, msg::encode_region_id>},
    {MsgType::StagedPut,
     round_trip<msg::StagedAsk, msg::decode_staged_ask, msg::encode_staged_ask>},
    {MsgType::StagedGet,
     round_trip<msg::StagedAsk, msg::decode_staged_ask, msg::encode_staged_ask>},
    {MsgType::StagedDone,
     round_trip<msg::StagedDone, msg::decode_staged_done, msg::encode_staged_done>},
    {MsgType::NetHello, round_trip<msg::NetHello, msg::decode_net_hello, msg::encode_net_hello>},
    {MsgType::NotifyAck, round_trip<uint64_t, msg::decode_notify_ack, msg::encode_notify_ack>},
};
constexpr size_t kNumDecoders = sizeof(kDecoders) / sizeof(kDecoders[0]);

void dispatch(uint16_t type, const uint8_t* p, size_t n) {
  for (const DecoderEntry& e : kDecoders)
    if (static_cast<uint16_t>(e.type) == type) e.decode(p, n);
}

struct Frame {
  uint16_t type;
  size_t offset;  // of the payload in the input
  size_t len;
};

// Step 1: the input as one stream. Returns the final state (NeedMore or Error).
Decode decode_stream(const uint8_t* data, size_t len, std::vector<Frame>* frames) {
  size_t pos = 0;
  for (;;) {
    uint16_t type = 0;
    const uint8_t* payload = nullptr;
    size_t plen = 0, consumed = 0;
    std::string err;
    Decode d = decode_frame(data + pos, len - pos, &type, &payload, &plen, &consumed, &err);
    if (d == Decode::Error) {
      HMC_FUZZ_CHECK(!err.empty());
      return d;
    }
    if (d == Decode::NeedMore) return d;
    HMC_FUZZ_CHECK(consumed == kFrameHeaderSize + plen && consumed <= len - pos);
    HMC_FUZZ_CHECK(payload == data + pos + kFrameHeaderSize);
    HMC_FUZZ_CHECK(plen <= kMaxFramePayload && is_known_type(type));
    std::vector<uint8_t> again;
    encode_frame(static_cast<MsgType>(type), payload, plen, &again);
    HMC_FUZZ_CHECK(again.size() == consumed && memcmp(again.data(), data + pos, consumed) == 0);
    frames->push_back(Frame{type, pos + kFrameHeaderSize, plen});
    dispatch(type, payload, plen);
    pos += consumed;
  }
}

// Step 2: the same bytes through FrameParser in pieces whose sizes come from the data itself.
void check_parser(const uint8_t* data, size_t len, const std::vector<Frame>& frames,
                  Decode final_state) {
  FrameParser parser;
  size_t pos = 0, next_frame = 0;
  uint32_t h = 2166136261u;  // FNV-1a of the input picks the piece sizes
  for (size_t i = 0; i < len && i < 64; ++i) h = (h ^ data[i]) * 16777619u;
  Decode d = Decode::NeedMore;
  while (d != Decode::Error) {
    if (pos < len) {
      h = h * 1103515245u + 12345u;
      size_t piece = 1 + (h >> 16) % (((h >> 8) & 1) ? 7 : 4096);
      if (piece > len - pos) piece = len - pos;
      parser.append(data + pos, piece);
      pos += piece;
    }
    for (;;) {
      Message m;
      std::string err;
      d = parser.next(&m, &err);
      if (d != Decode::Ok) {
        if (d == Decode::Error) HMC_FUZZ_CHECK(!err.empty());
        break;
      }
      HMC_FUZZ_CHECK(next_frame < frames.size());
      const Frame& f = frames[next_frame++];
      HMC_FUZZ_CHECK(static_cast<uint16_t>(m.type) == f.type && m.payload.size() == f.len);
      HMC_FUZZ_CHECK(f.len == 0 || memcmp(m.payload.data(), data + f.offset, f.len) == 0);
    }
    if (pos == len && d == Decode::NeedMore) break;
  }
  HMC_FUZZ_CHECK(next_frame == frames.size());
  HMC_FUZZ_CHECK(d == final_state);
  if (d == Decode::Error) {
    // Sticky: the parser stays failed.
    Message m;
    std::string err;
    HMC_FUZZ_CHECK(parser.next(&m, &err) == Decode::Error && !err.empty());
  }
}

// Seeds helpers.
std::vector<uint8_t> frame_of(MsgType type, const Writer& w) {
  std::vector<uint8_t> out;
  encode_frame(type, w.data().data(), w.size(), &out);
  return out;
}

std::vector<uint8_t> selector_input(MsgType type, const Writer& w) {
  for (size_t i = 0; i < kNumDecoders; ++i) {
    if (kDecoders[i].type == type) {
      std::vector<uint8_t> out{static_cast<uint8_t>(i)};
      out.insert(out.end(), w.data().begin(), w.data().end());
      return out;
    }
  }
  return {};
}

}  // namespace
}  // namespace hmc::control

namespace hmc::fuzz {

using namespace hmc::control;

void fuzz_one(const uint8_t* data, size_t len) {
  if (!data) len = 0;
  std::vector<Frame> frames;
  Decode final_state = decode_stream(data, len, &frames);
  check_parser(data, len, frames, final_state);
  if (len >= 1) kDecoders[data[0] % kNumDecoders].decode(data + 1, len - 1);
}

std::vector<Seed> seeds() {
  HelloInfo info;
  info.host_id = "node-a/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";
  info.hostname = "node-a";
  info.pid = 4242;
  info.context_id = 0x1122334455667788ull;

  HelloMsg hello;
  hello.info = info;
  for (size_t i = 0; i < hello.nonce.size(); ++i) hello.nonce[i] = static_cast<uint8_t>(i);
  HelloMsg hello_token = hello;
  hello_token.flags = kHelloFlagToken;
  HelloAckMsg ack;
  ack.info = info;
  ack.info.hostname = "node-b";
  ack.nonce.fill(0xA5);
  HelloAckMsg ack_token = ack;
  ack_token.flags = kHelloAckFlagToken | kHelloAckFlagProof;
  ack_token.proof.fill(0x5A);
  AuthMsg auth;
  auth.proof.fill(0x3C);
  ErrorMsg error{HMC_ERR_AUTH, "the accepting side requires HMC_AUTH_TOKEN"};

  Writer w_hello, w_hello_token, w_ack, w_ack_token, w_auth, w_welcome, w_error;
  encode_hello(hello, &w_hello);
  encode_hello(hello_token, &w_hello_token);
  encode_hello_ack(ack, &w_ack);
  encode_hello_ack(ack_token, &w_ack_token);
  encode_auth(auth, &w_auth);
  encode_welcome(WelcomeMsg{}, &w_welcome);
  encode_error(error, &w_error);

  auto concat = [](std::initializer_list<std::vector<uint8_t>> parts) {
    std::vector<uint8_t> out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };

  std::vector<Seed> seeds;
  seeds.push_back({"stream-handshake-plain",
                   concat({frame_of(MsgType::Hello, w_hello), frame_of(MsgType::HelloAck, w_ack),
                           frame_of(MsgType::Welcome, w_welcome)})});
  seeds.push_back(
      {"stream-handshake-token",
       concat({frame_of(MsgType::Hello, w_hello_token), frame_of(MsgType::HelloAck, w_ack_token),
               frame_of(MsgType::Auth, w_auth), frame_of(MsgType::Welcome, w_welcome)})});
  seeds.push_back({"stream-error", frame_of(MsgType::Error, w_error)});
  Writer empty;
  seeds.push_back({"stream-heartbeat-bye",
                   concat({frame_of(MsgType::Heartbeat, empty), frame_of(MsgType::Bye, empty)})});
  seeds.push_back({"select-hello", selector_input(MsgType::Hello, w_hello_token)});
  seeds.push_back({"select-hello-ack", selector_input(MsgType::HelloAck, w_ack_token)});
  seeds.push_back({"select-auth", selector_input(MsgType::Auth, w_auth)});
  seeds.push_back({"select-welcome", selector_input(MsgType::Welcome, w_welcome)});
  seeds.push_back({"select-error", selector_input(MsgType::Error, w_error)});

  // The engine's messages after the hello (peer/messages.h).
  path::Capabilities caps;
  caps.host_id = info.host_id;
  caps.hostname = info.hostname;
  caps.pid = info.pid;
  caps.context_id = info.context_id;
  caps.net.push_back({"hoststage", "tcp", 3000, 20000, 1, 3, 0});
  caps.net.push_back({"hoststage", "shm", 9000, 1000, 1, 7, 1});
  msg::NetHandle nh{0, "ranked 1 of 2", "hoststage", "shm", {1, 2, 3, 4, 5, 6, 7, 8}};
  Writer w_caps, w_nh, w_ready, w_notify, w_bye;
  msg::encode_caps(caps, &w_caps);
  msg::encode_net_handle(nh, &w_nh);
  msg::encode_net_ready({HMC_ERR_NO_PATH, "no common path"}, &w_ready);
  msg::encode_notify({0xfeedull, 2, "request-7"}, &w_notify);
  msg::encode_bye(std::string("context destroyed"), &w_bye);
  seeds.push_back({"stream-setup",
                   concat({frame_of(MsgType::Caps, w_caps), frame_of(MsgType::NetHandle, w_nh),
                           frame_of(MsgType::NetReady, w_ready),
                           frame_of(MsgType::Notify, w_notify), frame_of(MsgType::Bye, w_bye)})});
  seeds.push_back({"select-caps", selector_input(MsgType::Caps, w_caps)});
  seeds.push_back({"select-net-handle", selector_input(MsgType::NetHandle, w_nh)});
  seeds.push_back({"select-net-ready", selector_input(MsgType::NetReady, w_ready)});
  seeds.push_back({"select-notify", selector_input(MsgType::Notify, w_notify)});

  // Region withdrawal (regions/regions.cpp).
  msg::RegionRequest rq{7, info.context_id, 3, 0x7f0000001000ull, 65573, 6};
  msg::RegionReply rp{7, 3, HMC_ERR_REMOTE,
                      "region 3 (65573 bytes at 0x7f0000001000) is not registered"};
  Writer w_rq, w_rp, w_id;
  msg::encode_region_request(rq, &w_rq);
  msg::encode_region_reply(rp, &w_rp);
  msg::encode_region_id(uint64_t{3}, &w_id);
  seeds.push_back(
      {"stream-region",
       concat({frame_of(MsgType::RegionRequest, w_rq), frame_of(MsgType::RegionReply, w_rp),
               frame_of(MsgType::RegionGone, w_id), frame_of(MsgType::RegionGoneAck, w_id),
               frame_of(MsgType::RegionRelease, w_id)})});
  seeds.push_back({"select-region-request", selector_input(MsgType::RegionRequest, w_rq)});
  seeds.push_back({"select-region-reply", selector_input(MsgType::RegionReply, w_rp)});
  seeds.push_back({"select-region-gone", selector_input(MsgType::RegionGone, w_id)});
  return seeds;
}

}  // namespace hmc::fuzz
