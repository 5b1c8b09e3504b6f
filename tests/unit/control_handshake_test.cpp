// The control-plane handshake (core/src/control/handshake.h): message codecs, version
// negotiation, the HMC_AUTH_TOKEN challenge on both sides, and peers that misbehave.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "control/handshake.h"
#include "control/socket.h"
#include "util/clock.h"
#include "util/digest.h"
#include "util/status.h"

using namespace hmc::control;
using hmc::deadline_after_ms;
using hmc::hmac_sha256;
using hmc::now_ns;
using hmc::sha256;
using hmc::Sha256Digest;

namespace {

std::pair<Channel, Channel> channel_pair() {
  int sv[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  Channel a{Fd(sv[0])}, b{Fd(sv[1])};
  a.set_peer_name("acceptor-side");
  b.set_peer_name("initiator-side");
  return {std::move(a), std::move(b)};
}

HelloInfo info_of(const std::string& host, int32_t pid, uint64_t ctx) {
  HelloInfo i;
  i.host_id = host + "/boot-1234";
  i.hostname = host;
  i.pid = pid;
  i.context_id = ctx;
  return i;
}

struct Result {
  hmc_status_t status = HMC_ERR_INTERNAL;
  std::string error;
  HelloInfo theirs;
};

// Runs both halves concurrently (acceptor on a thread) over one channel pair.
std::pair<Result, Result> run_handshake(const std::string& initiator_token,
                                        const std::string& acceptor_token, int timeout_ms = 5000) {
  auto pair1 = channel_pair();
  Channel& to_acceptor = pair1.first;
  Channel& to_initiator = pair1.second;
  Result init, acc;
  const uint64_t deadline = deadline_after_ms(timeout_ms);
  std::thread t([&, ch = &to_initiator] {
    acc.theirs.hostname = "unset";
    acc.status =
        handshake_acceptor(*ch, info_of("node-b", 222, 0xB), acceptor_token, deadline, &acc.theirs);
    acc.error = hmc::last_error();
  });
  init.theirs.hostname = "unset";
  init.status = handshake_initiator(to_acceptor, info_of("node-a", 111, 0xA), initiator_token,
                                    deadline, &init.theirs);
  init.error = hmc::last_error();
  t.join();
  return {init, acc};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Raw peer helpers: the test plays one side through the public frame/wire functions.
void send_frame(Channel& ch, MsgType type, const Writer& w) {
  ASSERT_EQ(ch.send_wait(type, w, deadline_after_ms(2000)), HMC_SUCCESS) << hmc::last_error();
}

Message expect_message(Channel& ch, MsgType type) {
  Message m;
  EXPECT_EQ(ch.receive_one(&m, deadline_after_ms(2000)), HMC_SUCCESS) << hmc::last_error();
  EXPECT_EQ(m.type, type) << msg_type_name(m.type);
  return m;
}

}  // namespace

// ---- codecs ----

TEST(ControlHandshakeCodec, RoundTripsAndRejectsEveryTruncation) {
  HelloMsg hello;
  hello.max_version = 3;
  hello.min_version = 2;
  hello.flags = kHelloFlagToken;
  hello.nonce.fill(0x11);
  hello.info = info_of("host-x", -5, 0xFFFFFFFFFFFFFFFFull);
  Writer wh;
  encode_hello(hello, &wh);
  HelloMsg h2;
  ASSERT_TRUE(decode_hello(wh.data().data(), wh.size(), &h2));
  EXPECT_EQ(h2.max_version, 3);
  EXPECT_EQ(h2.min_version, 2);
  EXPECT_EQ(h2.flags, kHelloFlagToken);
  EXPECT_EQ(h2.nonce, hello.nonce);
  EXPECT_EQ(h2.info.host_id, "host-x/boot-1234");
  EXPECT_EQ(h2.info.hostname, "host-x");
  EXPECT_EQ(h2.info.pid, -5);
  EXPECT_EQ(h2.info.context_id, 0xFFFFFFFFFFFFFFFFull);
  for (size_t n = 0; n < wh.size(); ++n) EXPECT_FALSE(decode_hello(wh.data().data(), n, &h2)) << n;

  HelloAckMsg ack;
  ack.version = 1;
  ack.flags = kHelloAckFlagToken | kHelloAckFlagProof;
  ack.nonce.fill(0x22);
  ack.proof.fill(0x33);
  ack.info = info_of("host-y", 7, 9);
  Writer wa;
  encode_hello_ack(ack, &wa);
  EXPECT_EQ(wa.data()[kHelloAckProofOffset], 0x33);
  EXPECT_EQ(wa.data()[kHelloAckProofOffset - 1], 0x22);
  HelloAckMsg a2;
  ASSERT_TRUE(decode_hello_ack(wa.data().data(), wa.size(), &a2));
  EXPECT_EQ(a2.version, 1);
  EXPECT_EQ(a2.flags, ack.flags);
  EXPECT_EQ(a2.nonce, ack.nonce);
  EXPECT_EQ(a2.proof, ack.proof);
  EXPECT_EQ(a2.info.hostname, "host-y");
  for (size_t n = 0; n < wa.size(); ++n)
    EXPECT_FALSE(decode_hello_ack(wa.data().data(), n, &a2)) << n;

  AuthMsg auth;
  auth.proof.fill(0x44);
  Writer wu;
  encode_auth(auth, &wu);
  AuthMsg u2;
  ASSERT_TRUE(decode_auth(wu.data().data(), wu.size(), &u2));
  EXPECT_EQ(u2.proof, auth.proof);
  for (size_t n = 0; n < wu.size(); ++n) EXPECT_FALSE(decode_auth(wu.data().data(), n, &u2));

  Writer we;
  encode_error(HMC_ERR_VERSION, "versions differ", &we);
  ErrorMsg e2;
  ASSERT_TRUE(decode_error(we.data().data(), we.size(), &e2));
  EXPECT_EQ(e2.status, HMC_ERR_VERSION);
  EXPECT_EQ(e2.text, "versions differ");
  for (size_t n = 0; n < we.size(); ++n) EXPECT_FALSE(decode_error(we.data().data(), n, &e2));
}

TEST(ControlHandshakeCodec, LimitsAndRemoteStatus) {
  // An Error text over the limit is cut when encoding and refused when decoding.
  Writer w;
  encode_error(HMC_ERR_AUTH, std::string(kMaxErrorTextLen + 100, 'x'), &w);
  ErrorMsg e;
  ASSERT_TRUE(decode_error(w.data().data(), w.size(), &e));
  EXPECT_EQ(e.text.size(), kMaxErrorTextLen);
  Writer lying;
  lying.i32(HMC_ERR_AUTH);
  lying.u32(static_cast<uint32_t>(kMaxErrorTextLen + 1));
  lying.bytes(std::string(kMaxErrorTextLen + 1, 'y').data(), kMaxErrorTextLen + 1);
  EXPECT_FALSE(decode_error(lying.data().data(), lying.size(), &e));

  EXPECT_EQ(status_from_remote(HMC_ERR_AUTH), HMC_ERR_AUTH);
  EXPECT_EQ(status_from_remote(HMC_ERR_INTERNAL), HMC_ERR_INTERNAL);
  EXPECT_EQ(status_from_remote(0), HMC_ERR_REMOTE);
  EXPECT_EQ(status_from_remote(1), HMC_ERR_REMOTE);
  EXPECT_EQ(status_from_remote(-1000), HMC_ERR_REMOTE);
}

// ---- full handshakes ----

TEST(ControlHandshake, NoTokenSucceedsAndExchangesInfo) {
  auto [init, acc] = run_handshake("", "");
  ASSERT_EQ(init.status, HMC_SUCCESS) << init.error;
  ASSERT_EQ(acc.status, HMC_SUCCESS) << acc.error;
  EXPECT_EQ(init.theirs.hostname, "node-b");
  EXPECT_EQ(init.theirs.host_id, "node-b/boot-1234");
  EXPECT_EQ(init.theirs.pid, 222);
  EXPECT_EQ(init.theirs.context_id, 0xBu);
  EXPECT_EQ(init.theirs.protocol_version, kProtocolVersion);
  EXPECT_EQ(acc.theirs.hostname, "node-a");
  EXPECT_EQ(acc.theirs.pid, 111);
  EXPECT_EQ(acc.theirs.context_id, 0xAu);
  EXPECT_EQ(acc.theirs.protocol_version, kProtocolVersion);
}

TEST(ControlHandshake, SameTokenSucceeds) {
  auto [init, acc] = run_handshake("s3cret-token", "s3cret-token");
  ASSERT_EQ(init.status, HMC_SUCCESS) << init.error;
  ASSERT_EQ(acc.status, HMC_SUCCESS) << acc.error;
  EXPECT_EQ(init.theirs.pid, 222);
  EXPECT_EQ(acc.theirs.pid, 111);
}

TEST(ControlHandshake, DifferentTokensFailOnBothSides) {
  auto [init, acc] = run_handshake("token-one", "token-two");
  EXPECT_EQ(init.status, HMC_ERR_AUTH) << init.error;
  EXPECT_EQ(acc.status, HMC_ERR_AUTH) << acc.error;
  EXPECT_TRUE(contains(init.error, "peer did not prove HMC_AUTH_TOKEN")) << init.error;
  EXPECT_TRUE(contains(init.error, "acceptor-side")) << init.error;
  EXPECT_TRUE(contains(acc.error, "tokens differ")) << acc.error;
  EXPECT_EQ(init.theirs.hostname, "unset") << "outputs are set only on success";
  EXPECT_EQ(acc.theirs.hostname, "unset");
}

TEST(ControlHandshake, TokenOnlyOnInitiatorFailsOnBothSides) {
  auto [init, acc] = run_handshake("only-here", "");
  EXPECT_EQ(init.status, HMC_ERR_AUTH) << init.error;
  EXPECT_EQ(acc.status, HMC_ERR_AUTH) << acc.error;
  EXPECT_TRUE(contains(init.error, "peer did not prove HMC_AUTH_TOKEN")) << init.error;
  EXPECT_TRUE(contains(acc.error, "peer requires HMC_AUTH_TOKEN, which is not set here"))
      << acc.error;
}

TEST(ControlHandshake, TokenOnlyOnAcceptorFailsOnBothSides) {
  auto [init, acc] = run_handshake("", "only-there");
  EXPECT_EQ(init.status, HMC_ERR_AUTH) << init.error;
  EXPECT_EQ(acc.status, HMC_ERR_AUTH) << acc.error;
  EXPECT_TRUE(contains(init.error, "peer requires HMC_AUTH_TOKEN, which is not set here"))
      << init.error;
  EXPECT_TRUE(contains(acc.error, "peer did not prove HMC_AUTH_TOKEN")) << acc.error;
}

TEST(ControlHandshake, OverLoopbackTcp) {
  Fd listener;
  uint16_t port = 0;
  ASSERT_EQ(listen_tcp("127.0.0.1", 0, &listener, &port), HMC_SUCCESS) << hmc::last_error();
  Fd client;
  ASSERT_EQ(connect_tcp("127.0.0.1", port, 2000, &client), HMC_SUCCESS) << hmc::last_error();
  Fd server;
  const uint64_t deadline = deadline_after_ms(5000);
  while (accept_one(listener.get(), &server) == HMC_IN_PROGRESS)
    ASSERT_EQ(wait_fd(listener.get(), POLLIN, deadline, nullptr), 1);
  ASSERT_TRUE(server.valid());
  Channel ci(std::move(client)), ca(std::move(server));
  Result acc;
  std::thread t([&] {
    acc.status = handshake_acceptor(ca, info_of("b", 2, 2), "tok", deadline, &acc.theirs);
    acc.error = hmc::last_error();
  });
  HelloInfo theirs;
  hmc_status_t st = handshake_initiator(ci, info_of("a", 1, 1), "tok", deadline, &theirs);
  std::string err = hmc::last_error();
  t.join();
  ASSERT_EQ(st, HMC_SUCCESS) << err;
  ASSERT_EQ(acc.status, HMC_SUCCESS) << acc.error;
  EXPECT_EQ(theirs.hostname, "b");
  EXPECT_EQ(acc.theirs.hostname, "a");
  // The channel carries on after the handshake.
  Writer w;
  w.u32(5);
  ASSERT_EQ(ci.send_wait(MsgType::Caps, w, deadline), HMC_SUCCESS);
  Message m = expect_message(ca, MsgType::Caps);
  EXPECT_EQ(m.payload, w.data());
}

// ---- versions ----

namespace {
// A Hello offering only `offered`: the acceptor refuses it with HMC_ERR_VERSION, and both it
// and the peer (told in an Error) name the two versions.
void expect_version_refused(uint16_t offered, const char* offered_text) {
  auto pair = channel_pair();
  Channel& test_side = pair.first;
  Channel& acceptor_side = pair.second;
  HelloMsg hello;
  hello.max_version = hello.min_version = offered;
  hello.info = info_of("other", 9, 9);
  Writer w;
  encode_hello(hello, &w);
  send_frame(test_side, MsgType::Hello, w);

  HelloInfo theirs;
  EXPECT_EQ(
      handshake_acceptor(acceptor_side, info_of("b", 2, 2), "", deadline_after_ms(2000), &theirs),
      HMC_ERR_VERSION);
  const std::string err = hmc::last_error();
  EXPECT_TRUE(contains(err, offered_text)) << err;
  EXPECT_TRUE(contains(err, "version 2")) << err;
  Message m = expect_message(test_side, MsgType::Error);
  ErrorMsg e;
  ASSERT_TRUE(decode_error(m.payload.data(), m.payload.size(), &e));
  EXPECT_EQ(e.status, HMC_ERR_VERSION);
  EXPECT_TRUE(contains(e.text, offered_text)) << e.text;
  EXPECT_TRUE(contains(e.text, "version 2")) << e.text;
}
}  // namespace

TEST(ControlHandshake, AcceptorRefusesAnUnsupportedVersion) {
  expect_version_refused(99, "99");
}

// An earlier build, whose capability record this one no longer reads: refused at the hello.
TEST(ControlHandshake, AcceptorRefusesAPeerOfVersion1) {
  expect_version_refused(1, "version 1");
}

TEST(ControlHandshake, AcceptorRefusesAHelloWithOnlyAVersionItCannotSpeak) {
  // A future peer whose Hello layout changed: only the leading version fields are read.
  auto pair3 = channel_pair();
  Channel& test_side = pair3.first;
  Channel& acceptor_side = pair3.second;
  Writer w;
  w.u16(99);
  w.u16(50);
  w.u8(0xEE);  // not a valid v1 Hello beyond this point
  send_frame(test_side, MsgType::Hello, w);
  HelloInfo theirs;
  EXPECT_EQ(
      handshake_acceptor(acceptor_side, info_of("b", 2, 2), "", deadline_after_ms(2000), &theirs),
      HMC_ERR_VERSION);
  EXPECT_TRUE(contains(hmc::last_error(), "versions 50..99")) << hmc::last_error();
}

TEST(ControlHandshake, NewerPeerThatStillSpeaksThisVersionIsAccepted) {
  // Versions 1..99, with fields appended after the Hello's layout: negotiated down to this one.
  auto pair4 = channel_pair();
  Channel& test_side = pair4.first;
  Channel& acceptor_side = pair4.second;
  HelloMsg hello;
  hello.max_version = 99;
  hello.min_version = 1;
  hello.info = info_of("newer", 5, 5);
  Writer w;
  encode_hello(hello, &w);
  w.str("a field from a future version");
  send_frame(test_side, MsgType::Hello, w);

  Result acc;
  std::thread t([&] {
    acc.status = handshake_acceptor(acceptor_side, info_of("b", 2, 2), "", deadline_after_ms(2000),
                                    &acc.theirs);
    acc.error = hmc::last_error();
  });
  Message m = expect_message(test_side, MsgType::HelloAck);
  HelloAckMsg ack;
  ASSERT_TRUE(decode_hello_ack(m.payload.data(), m.payload.size(), &ack));
  EXPECT_EQ(ack.version, kProtocolVersion);
  expect_message(test_side, MsgType::Welcome);
  t.join();
  ASSERT_EQ(acc.status, HMC_SUCCESS) << acc.error;
  EXPECT_EQ(acc.theirs.hostname, "newer");
  EXPECT_EQ(acc.theirs.protocol_version, kProtocolVersion);
}

TEST(ControlHandshake, InitiatorRefusesAVersionItDidNotOffer) {
  auto pair5 = channel_pair();
  Channel& initiator_side = pair5.first;
  Channel& test_side = pair5.second;
  Result init;
  std::thread t([&] {
    init.status = handshake_initiator(initiator_side, info_of("a", 1, 1), "",
                                      deadline_after_ms(2000), &init.theirs);
    init.error = hmc::last_error();
  });
  expect_message(test_side, MsgType::Hello);
  HelloAckMsg ack;
  ack.version = 99;
  ack.info = info_of("b", 2, 2);
  Writer w;
  encode_hello_ack(ack, &w);
  send_frame(test_side, MsgType::HelloAck, w);
  Message m = expect_message(test_side, MsgType::Error);
  t.join();
  EXPECT_EQ(init.status, HMC_ERR_VERSION) << init.error;
  EXPECT_TRUE(contains(init.error, "99")) << init.error;
  ErrorMsg e;
  ASSERT_TRUE(decode_error(m.payload.data(), m.payload.size(), &e));
  EXPECT_EQ(e.status, HMC_ERR_VERSION);
}

TEST(ControlHandshake, InitiatorReportsTheAcceptorsVersionRefusal) {
  auto pair6 = channel_pair();
  Channel& initiator_side = pair6.first;
  Channel& test_side = pair6.second;
  Result init;
  std::thread t([&] {
    init.status = handshake_initiator(initiator_side, info_of("a", 1, 1), "",
                                      deadline_after_ms(2000), &init.theirs);
    init.error = hmc::last_error();
  });
  expect_message(test_side, MsgType::Hello);
  Writer w;
  encode_error(HMC_ERR_VERSION, "the accepting side speaks version 7", &w);
  send_frame(test_side, MsgType::Error, w);
  t.join();
  EXPECT_EQ(init.status, HMC_ERR_VERSION);
  EXPECT_TRUE(contains(init.error, "the accepting side speaks version 7")) << init.error;
}

// ---- misbehaving peers ----

TEST(ControlHandshake, ForgedAuthProofIsRefused) {
  auto pair7 = channel_pair();
  Channel& test_side = pair7.first;
  Channel& acceptor_side = pair7.second;
  Result acc;
  std::thread t([&] {
    acc.status = handshake_acceptor(acceptor_side, info_of("b", 2, 2), "tok",
                                    deadline_after_ms(2000), &acc.theirs);
    acc.error = hmc::last_error();
  });
  HelloMsg hello;
  hello.flags = kHelloFlagToken;
  hello.info = info_of("forger", 6, 6);
  Writer w;
  encode_hello(hello, &w);
  send_frame(test_side, MsgType::Hello, w);
  Message m = expect_message(test_side, MsgType::HelloAck);
  HelloAckMsg ack;
  ASSERT_TRUE(decode_hello_ack(m.payload.data(), m.payload.size(), &ack));
  EXPECT_TRUE(ack.flags & kHelloAckFlagProof);
  // Replaying the acceptor's own proof back (a reflection attempt) must not pass.
  AuthMsg auth;
  auth.proof = ack.proof;
  Writer wa;
  encode_auth(auth, &wa);
  send_frame(test_side, MsgType::Auth, wa);
  Message err = expect_message(test_side, MsgType::Error);
  t.join();
  EXPECT_EQ(acc.status, HMC_ERR_AUTH);
  EXPECT_TRUE(contains(acc.error, "did not prove HMC_AUTH_TOKEN")) << acc.error;
  ErrorMsg e;
  ASSERT_TRUE(decode_error(err.payload.data(), err.payload.size(), &e));
  EXPECT_EQ(e.status, HMC_ERR_AUTH);
}

// The proofs are computed here from the bytes on the wire, as handshake.h describes them: a peer
// built from that description (or from an older hmc) interoperates.
TEST(ControlHandshake, ProofsFollowTheDocumentedTranscript) {
  auto pair = channel_pair();
  Channel& test_side = pair.first;
  Channel& acceptor_side = pair.second;
  const std::string token = "s3cret-token";
  Result acc;
  std::thread t([&] {
    acc.status = handshake_acceptor(acceptor_side, info_of("b", 2, 2), token,
                                    deadline_after_ms(2000), &acc.theirs);
    acc.error = hmc::last_error();
  });
  HelloMsg hello;
  hello.flags = kHelloFlagToken;
  hello.info = info_of("a", 1, 1);
  for (size_t i = 0; i < hello.nonce.size(); ++i) hello.nonce[i] = static_cast<uint8_t>(i);
  Writer w;
  encode_hello(hello, &w);
  send_frame(test_side, MsgType::Hello, w);
  Message m = expect_message(test_side, MsgType::HelloAck);
  HelloAckMsg ack;
  ASSERT_TRUE(decode_hello_ack(m.payload.data(), m.payload.size(), &ack));

  // T = SHA256(Hello payload) || SHA256(HelloAck payload with proof_a zeroed)
  std::vector<uint8_t> ack_zeroed = m.payload;
  std::fill_n(ack_zeroed.begin() + kHelloAckProofOffset, ack.proof.size(), 0);
  Sha256Digest hello_hash{}, ack_hash{};
  EXPECT_EQ(sha256(w.data().data(), w.size(), &hello_hash), HMC_SUCCESS);
  EXPECT_EQ(sha256(ack_zeroed.data(), ack_zeroed.size(), &ack_hash), HMC_SUCCESS);
  auto proof = [&](const std::string& label, const Nonce& first, const Nonce& second) {
    std::vector<uint8_t> msg(label.begin(), label.end());
    for (const auto* part : {&first, &second}) msg.insert(msg.end(), part->begin(), part->end());
    msg.insert(msg.end(), hello_hash.begin(), hello_hash.end());
    msg.insert(msg.end(), ack_hash.begin(), ack_hash.end());
    Sha256Digest d{};
    EXPECT_EQ(hmac_sha256(token.data(), token.size(), msg.data(), msg.size(), &d), HMC_SUCCESS);
    return d;
  };
  EXPECT_EQ(ack.proof, proof("hmc-acceptor", hello.nonce, ack.nonce));
  AuthMsg auth;
  auth.proof = proof("hmc-initiator", ack.nonce, hello.nonce);
  Writer wa;
  encode_auth(auth, &wa);
  send_frame(test_side, MsgType::Auth, wa);
  expect_message(test_side, MsgType::Welcome);
  t.join();
  EXPECT_EQ(acc.status, HMC_SUCCESS) << acc.error;
  EXPECT_EQ(acc.theirs.hostname, "a");
}

TEST(ControlHandshake, TokenNeverCrossesTheWire) {
  auto pair8 = channel_pair();
  Channel& test_side = pair8.first;
  Channel& acceptor_side = pair8.second;
  const std::string token = "a-very-recognisable-token-value";
  Result acc;
  std::thread t([&] {
    acc.status = handshake_acceptor(acceptor_side, info_of("b", 2, 2), token,
                                    deadline_after_ms(1000), &acc.theirs);
  });
  HelloMsg hello;
  hello.flags = kHelloFlagToken;
  Writer w;
  encode_hello(hello, &w);
  send_frame(test_side, MsgType::Hello, w);
  Message m = expect_message(test_side, MsgType::HelloAck);
  std::string bytes(m.payload.begin(), m.payload.end());
  EXPECT_FALSE(contains(bytes, token));
  test_side = Channel(Fd());  // hang up: the acceptor sees the peer lost
  t.join();
  EXPECT_EQ(acc.status, HMC_ERR_PEER_LOST);
}

TEST(ControlHandshake, GarbageIsAProtocolErrorOnBothRoles) {
  {
    auto pair9 = channel_pair();
    Channel& test_side = pair9.first;
    Channel& acceptor_side = pair9.second;
    const std::string junk = "SSH-2.0-OpenSSH_9.0\r\n";
    ASSERT_EQ(write(test_side.fd(), junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
    HelloInfo theirs;
    const uint64_t t0 = now_ns();
    EXPECT_EQ(
        handshake_acceptor(acceptor_side, info_of("b", 2, 2), "", t0 + 200ull * 1000000, &theirs),
        HMC_ERR_PROTOCOL);
    EXPECT_LT((now_ns() - t0) / 1000000, 1000u);
    EXPECT_TRUE(contains(hmc::last_error(), "magic")) << hmc::last_error();
  }
  {
    auto pair10 = channel_pair();
    Channel& initiator_side = pair10.first;
    Channel& test_side = pair10.second;
    Result init;
    std::thread t([&] {
      init.status = handshake_initiator(initiator_side, info_of("a", 1, 1), "",
                                        deadline_after_ms(2000), &init.theirs);
      init.error = hmc::last_error();
    });
    expect_message(test_side, MsgType::Hello);
    const std::string junk(40, '\xFF');
    ASSERT_EQ(write(test_side.fd(), junk.data(), junk.size()), 40);
    t.join();
    EXPECT_EQ(init.status, HMC_ERR_PROTOCOL) << init.error;
  }
}

TEST(ControlHandshake, UnexpectedMessageIsAProtocolError) {
  auto pair11 = channel_pair();
  Channel& test_side = pair11.first;
  Channel& acceptor_side = pair11.second;
  send_frame(test_side, MsgType::Welcome, Writer());
  HelloInfo theirs;
  EXPECT_EQ(
      handshake_acceptor(acceptor_side, info_of("b", 2, 2), "", deadline_after_ms(2000), &theirs),
      HMC_ERR_PROTOCOL);
  EXPECT_TRUE(contains(hmc::last_error(), "expected Hello, received Welcome")) << hmc::last_error();
  Message m = expect_message(test_side, MsgType::Error);
  ErrorMsg e;
  ASSERT_TRUE(decode_error(m.payload.data(), m.payload.size(), &e));
  EXPECT_EQ(e.status, HMC_ERR_PROTOCOL);
}

TEST(ControlHandshake, MalformedHelloIsAProtocolError) {
  auto pair12 = channel_pair();
  Channel& test_side = pair12.first;
  Channel& acceptor_side = pair12.second;
  Writer w;
  w.u16(kProtocolVersion);
  w.u16(kProtocolVersion);
  w.u8(0);  // nonce and HelloInfo missing
  send_frame(test_side, MsgType::Hello, w);
  HelloInfo theirs;
  EXPECT_EQ(
      handshake_acceptor(acceptor_side, info_of("b", 2, 2), "", deadline_after_ms(2000), &theirs),
      HMC_ERR_PROTOCOL);
  EXPECT_TRUE(contains(hmc::last_error(), "malformed Hello")) << hmc::last_error();
}

TEST(ControlHandshake, SilentPeerTimesOutWithinTheDeadline) {
  for (bool as_acceptor : {true, false}) {
    auto pair13 = channel_pair();
    Channel& mine = pair13.first;
    Channel& silent = pair13.second;  // kept open, never answers
    (void)silent;
    HelloInfo theirs;
    const uint64_t t0 = now_ns();
    const uint64_t deadline = t0 + 200ull * 1000000;
    hmc_status_t st = as_acceptor
                          ? handshake_acceptor(mine, info_of("b", 2, 2), "tok", deadline, &theirs)
                          : handshake_initiator(mine, info_of("a", 1, 1), "tok", deadline, &theirs);
    const uint64_t ms = (now_ns() - t0) / 1000000;
    EXPECT_EQ(st, HMC_ERR_TIMEOUT) << hmc::last_error();
    EXPECT_GE(ms, 200u);
    EXPECT_LT(ms, 1500u);
    EXPECT_TRUE(contains(hmc::last_error(), "acceptor-side")) << hmc::last_error();
  }
}

TEST(ControlHandshake, PeerThatHangsUpIsPeerLost) {
  auto pair14 = channel_pair();
  Channel& mine = pair14.first;
  Channel& other = pair14.second;
  other = Channel(Fd());
  HelloInfo theirs;
  EXPECT_EQ(handshake_initiator(mine, info_of("a", 1, 1), "", deadline_after_ms(2000), &theirs),
            HMC_ERR_PEER_LOST);
}

TEST(ControlHandshake, OversizedInfoIsRefusedLocally) {
  auto pair15 = channel_pair();
  Channel& a = pair15.first;
  (void)pair15.second;
  HelloInfo big = info_of("a", 1, 1);
  big.hostname = std::string(kMaxHostnameLen + 1, 'h');
  HelloInfo theirs;
  EXPECT_EQ(handshake_initiator(a, big, "", deadline_after_ms(100), &theirs),
            HMC_ERR_INVALID_ARGUMENT);
}
