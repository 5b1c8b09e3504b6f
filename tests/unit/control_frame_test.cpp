// Framing of control messages (core/src/control/frame.h): layout, round trips, truncations,
// and rejection of wrong magic, frame version, type and length with a message that says so.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "control/frame.h"

using namespace hmc::control;

namespace {

std::vector<uint8_t> frame(MsgType type, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out;
  encode_frame(type, payload.data(), payload.size(), &out);
  return out;
}

struct Decoded {
  Decode result;
  uint16_t type = 0xFFFF;
  const uint8_t* payload = nullptr;
  size_t payload_len = 12345;
  size_t consumed = 12345;
  std::string err;
};

Decoded decode(const std::vector<uint8_t>& b, size_t len) {
  Decoded d;
  d.result = decode_frame(b.data(), len, &d.type, &d.payload, &d.payload_len, &d.consumed, &d.err);
  return d;
}
Decoded decode(const std::vector<uint8_t>& b) {
  return decode(b, b.size());
}

void put_u16(std::vector<uint8_t>* b, size_t at, uint16_t v) {
  (*b)[at] = static_cast<uint8_t>(v);
  (*b)[at + 1] = static_cast<uint8_t>(v >> 8);
}
void put_u32(std::vector<uint8_t>* b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

const MsgType kAllTypes[] = {MsgType::Hello,       MsgType::HelloAck, MsgType::Auth,
                             MsgType::Welcome,     MsgType::Error,    MsgType::Caps,
                             MsgType::NetHandle,   MsgType::NetReady, MsgType::Notify,
                             MsgType::Heartbeat,   MsgType::Bye,      MsgType::RegionRequest,
                             MsgType::RegionReply, MsgType::User};

}  // namespace

TEST(ControlFrame, HeaderLayout) {
  std::vector<uint8_t> f = frame(MsgType::Caps, {0xAA, 0xBB, 0xCC});
  ASSERT_EQ(f.size(), kFrameHeaderSize + 3);
  EXPECT_EQ(0, memcmp(f.data(), "HMC1", 4));
  const std::vector<uint8_t> header = {'H', 'M', 'C', '1', 1, 0, 16, 0, 3, 0, 0, 0};
  EXPECT_EQ(std::vector<uint8_t>(f.begin(), f.begin() + 12), header);
  EXPECT_EQ(f[12], 0xAA);
  EXPECT_EQ(f[14], 0xCC);
}

TEST(ControlFrame, RoundTripEveryTypeAndAppends) {
  std::vector<uint8_t> stream;
  for (MsgType t : kAllTypes) {
    std::vector<uint8_t> payload(static_cast<size_t>(t) * 3, static_cast<uint8_t>(t));
    encode_frame(t, payload.data(), payload.size(), &stream);
  }
  size_t pos = 0;
  for (MsgType t : kAllTypes) {
    uint16_t type;
    const uint8_t* p;
    size_t plen, consumed;
    std::string err;
    ASSERT_EQ(
        decode_frame(stream.data() + pos, stream.size() - pos, &type, &p, &plen, &consumed, &err),
        Decode::Ok)
        << err;
    EXPECT_EQ(type, static_cast<uint16_t>(t));
    ASSERT_EQ(plen, static_cast<size_t>(t) * 3);
    for (size_t i = 0; i < plen; ++i) ASSERT_EQ(p[i], static_cast<uint8_t>(t));
    EXPECT_EQ(consumed, kFrameHeaderSize + plen);
    pos += consumed;
  }
  EXPECT_EQ(pos, stream.size());
}

TEST(ControlFrame, EmptyPayload) {
  std::vector<uint8_t> f = frame(MsgType::Heartbeat, {});
  Decoded d = decode(f);
  ASSERT_EQ(d.result, Decode::Ok);
  EXPECT_EQ(d.payload_len, 0u);
  EXPECT_EQ(d.consumed, kFrameHeaderSize);
}

TEST(ControlFrame, EveryTruncationNeedsMoreAndLeavesOutputs) {
  std::vector<uint8_t> f = frame(MsgType::User, std::vector<uint8_t>(100, 7));
  for (size_t n = 0; n < f.size(); ++n) {
    Decoded d = decode(f, n);
    ASSERT_EQ(d.result, Decode::NeedMore) << "prefix of " << n << " bytes: " << d.err;
    EXPECT_EQ(d.type, 0xFFFF);
    EXPECT_EQ(d.consumed, 12345u);
    EXPECT_TRUE(d.err.empty());
  }
  EXPECT_EQ(decode(f).result, Decode::Ok);
}

TEST(ControlFrame, WrongMagicRejectedAsSoonAsSeen) {
  std::vector<uint8_t> f = frame(MsgType::Hello, {1, 2, 3});
  f[0] = 'X';
  for (size_t n = 1; n <= f.size(); ++n) {
    Decoded d = decode(f, n);
    ASSERT_EQ(d.result, Decode::Error) << n;
    EXPECT_NE(d.err.find("magic"), std::string::npos) << d.err;
  }
  std::vector<uint8_t> http = {'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1', '.'};
  Decoded d = decode(http);
  EXPECT_EQ(d.result, Decode::Error);
  EXPECT_NE(d.err.find("0x20544547"), std::string::npos) << d.err;
}

TEST(ControlFrame, WrongFrameVersionNamesBothVersions) {
  std::vector<uint8_t> f = frame(MsgType::Hello, {1, 2, 3});
  put_u16(&f, 4, 2);
  Decoded d = decode(f, 6);  // rejected once the version field is complete
  ASSERT_EQ(d.result, Decode::Error);
  EXPECT_NE(d.err.find("frame version 2"), std::string::npos) << d.err;
  EXPECT_NE(d.err.find("version 1"), std::string::npos) << d.err;
  put_u16(&f, 4, 0);
  EXPECT_EQ(decode(f).result, Decode::Error);
}

TEST(ControlFrame, UnknownTypeRejected) {
  for (uint16_t t : {0, 6, 15, 25, 999, 0xFFFF}) {
    EXPECT_FALSE(is_known_type(t)) << t;
    std::vector<uint8_t> f = frame(MsgType::Hello, {});
    put_u16(&f, 6, t);
    Decoded d = decode(f, 8);
    ASSERT_EQ(d.result, Decode::Error) << t;
    EXPECT_NE(d.err.find("type " + std::to_string(t)), std::string::npos) << d.err;
  }
  for (MsgType t : kAllTypes) EXPECT_TRUE(is_known_type(static_cast<uint16_t>(t)));
}

TEST(ControlFrame, LengthLimit) {
  // Exactly the limit: accepted (needs the payload), one more: rejected from the header alone.
  std::vector<uint8_t> header = frame(MsgType::User, {});
  put_u32(&header, 8, static_cast<uint32_t>(kMaxFramePayload));
  EXPECT_EQ(decode(header).result, Decode::NeedMore);
  std::vector<uint8_t> full = frame(MsgType::User, std::vector<uint8_t>(kMaxFramePayload, 1));
  Decoded ok = decode(full);
  ASSERT_EQ(ok.result, Decode::Ok);
  EXPECT_EQ(ok.payload_len, kMaxFramePayload);

  for (uint32_t len : {static_cast<uint32_t>(kMaxFramePayload + 1), 0xFFFFFFFFu}) {
    put_u32(&header, 8, len);
    Decoded d = decode(header);
    ASSERT_EQ(d.result, Decode::Error);
    EXPECT_NE(d.err.find(std::to_string(len)), std::string::npos) << d.err;
    EXPECT_NE(d.err.find("limit"), std::string::npos) << d.err;
  }
}

// A parser told to take only small frames (an acceptor before the hello is done) refuses a
// longer one from its header alone, before buffering any of its payload.
TEST(ControlFrameParser, LowerPayloadLimitRefusesFromTheHeader) {
  FrameParser p;
  p.set_max_payload(100);
  std::vector<uint8_t> small = frame(MsgType::Hello, std::vector<uint8_t>(100, 7));
  p.append(small.data(), small.size());
  Message m;
  std::string err;
  ASSERT_EQ(p.next(&m, &err), Decode::Ok) << err;
  EXPECT_EQ(m.payload.size(), 100u);
  std::vector<uint8_t> header = frame(MsgType::Hello, {});
  put_u32(&header, 8, 101);
  p.append(header.data(), header.size());
  ASSERT_EQ(p.next(&m, &err), Decode::Error);
  EXPECT_NE(err.find("limit of 100 bytes"), std::string::npos) << err;
}

TEST(ControlFrame, NullErrIsAllowed) {
  std::vector<uint8_t> f = {'X', 'X', 'X', 'X'};
  uint16_t type;
  const uint8_t* p;
  size_t plen, consumed;
  EXPECT_EQ(decode_frame(f.data(), f.size(), &type, &p, &plen, &consumed, nullptr), Decode::Error);
}

TEST(ControlFrame, TypeNames) {
  EXPECT_STREQ(msg_type_name(MsgType::HelloAck), "HelloAck");
  EXPECT_EQ(msg_type_name(static_cast<uint16_t>(19)), "Notify");
  EXPECT_EQ(msg_type_name(static_cast<uint16_t>(77)), "unknown type 77");
}

TEST(ControlFrameParser, ByteByByteYieldsEveryMessage) {
  std::vector<uint8_t> stream;
  for (int i = 0; i < 3; ++i) {
    std::vector<uint8_t> payload(static_cast<size_t>(i) * 1000, static_cast<uint8_t>(i + 1));
    encode_frame(MsgType::Notify, payload.data(), payload.size(), &stream);
  }
  FrameParser parser;
  std::vector<Message> got;
  for (uint8_t b : stream) {
    parser.append(&b, 1);
    Message m;
    std::string err;
    Decode d;
    while ((d = parser.next(&m, &err)) == Decode::Ok) got.push_back(m);
    ASSERT_EQ(d, Decode::NeedMore) << err;
  }
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].type, MsgType::Notify);
    EXPECT_EQ(got[i].payload,
              std::vector<uint8_t>(static_cast<size_t>(i) * 1000, static_cast<uint8_t>(i + 1)));
  }
  EXPECT_EQ(parser.buffered(), 0u);
}

TEST(ControlFrameParser, ErrorIsSticky) {
  std::vector<uint8_t> stream = frame(MsgType::Bye, {});
  std::vector<uint8_t> bad = frame(MsgType::Bye, {});
  bad[0] ^= 0xFF;
  stream.insert(stream.end(), bad.begin(), bad.end());
  FrameParser parser;
  parser.append(stream.data(), stream.size());
  Message m;
  std::string err;
  ASSERT_EQ(parser.next(&m, &err), Decode::Ok);
  EXPECT_EQ(m.type, MsgType::Bye);
  ASSERT_EQ(parser.next(&m, &err), Decode::Error);
  EXPECT_NE(err.find("magic"), std::string::npos);
  std::vector<uint8_t> good = frame(MsgType::Bye, {});
  parser.append(good.data(), good.size());
  std::string err2;
  EXPECT_EQ(parser.next(&m, &err2), Decode::Error);
  EXPECT_EQ(err2, err);
}
