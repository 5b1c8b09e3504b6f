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

#include "accept_within.h"
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

using hmc::control::test::accept_within;

// A connected pair of Unix sockets; each end is named for the side it reaches.
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

// The Error message the other side sent on ch (status HMC_ERR_INTERNAL where none came whole).
ErrorMsg expect_error(Channel& ch) {
  Message m = expect_message(ch, MsgType::Error);
  ErrorMsg e;
  e.status = HMC_ERR_INTERNAL;
  EXPECT_TRUE(decode_error(m.payload.data(), m.payload.size(), &e));
  return e;
}

// The payload of a Hello sent on ch.
std::vector<uint8_t> send_hello(Channel& ch, const HelloMsg& hello) {
  Writer w;
  encode_hello(hello, &w);
  send_frame(ch, MsgType::Hello, w);
  return w.data();
}

// A connected loopback TCP pair {client, server}; invalid Fds where a step failed.
std::pair<Fd, Fd> loopback_tcp_pair() {
  Fd listener, client;
  uint16_t port = 0;
  if (listen_tcp("127.0.0.1", 0, &listener, &port) != HMC_SUCCESS ||
      connect_tcp("127.0.0.1", port, 2000, &client) != HMC_SUCCESS)
    return {};
  return {std::move(client), accept_within(listener.get(), 5000)};
}

// Each test has a socket pair: the initiator's end (its peer named "acceptor-side") and the
// acceptor's. A test runs both halves (run_handshake), or one half on a thread (start_acceptor,
// start_initiator) or here (accept_here) while it plays the other through the public frame and
// wire functions.
class ControlHandshake : public testing::Test {
 protected:
  void TearDown() override {
    if (side_.joinable()) side_.join();
  }

  // Both halves concurrently over the pair (the acceptor on a thread).
  std::pair<Result, Result> run_handshake(const std::string& initiator_token,
                                          const std::string& acceptor_token,
                                          int timeout_ms = 5000) {
    const uint64_t deadline = deadline_after_ms(timeout_ms);
    start_on_thread(true, info_of("node-b", 222, 0xB), acceptor_token, deadline);
    Result init;
    init.theirs.hostname = "unset";
    init.status = handshake_initiator(initiator_end, info_of("node-a", 111, 0xA), initiator_token,
                                      deadline, &init.theirs);
    init.error = hmc::last_error();
    return {init, finish()};
  }

  // The real acceptor ("b") or initiator ("a") on a thread, on its end of the pair.
  void start_acceptor(const std::string& token = "", int timeout_ms = 2000) {
    start_on_thread(true, info_of("b", 2, 2), token, deadline_after_ms(timeout_ms));
  }
  void start_initiator(const std::string& token = "", int timeout_ms = 2000) {
    start_on_thread(false, info_of("a", 1, 1), token, deadline_after_ms(timeout_ms));
  }
  // Waits for the half started on the thread: what it returned.
  const Result& finish() {
    side_.join();
    return result_;
  }

  // The acceptor ("b", no token) run here on what the test sent already.
  hmc_status_t accept_here(uint64_t deadline = deadline_after_ms(2000)) {
    HelloInfo theirs;
    return handshake_acceptor(acceptor_end, info_of("b", 2, 2), "", deadline, &theirs);
  }

  std::pair<Channel, Channel> pair_ = channel_pair();
  Channel& initiator_end = pair_.first;
  Channel& acceptor_end = pair_.second;

 private:
  void start_on_thread(bool acceptor, const HelloInfo& mine, const std::string& token,
                       uint64_t deadline) {
    result_.theirs.hostname = "unset";
    side_ = std::thread([this, acceptor, mine, token, deadline] {
      result_.status =
          acceptor ? handshake_acceptor(acceptor_end, mine, token, deadline, &result_.theirs)
                   : handshake_initiator(initiator_end, mine, token, deadline, &result_.theirs);
      result_.error = hmc::last_error();
    });
  }

  Result result_;
  std::thread side_;
};

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

// ---- full handshakes ----

TEST_F(ControlHandshake, NoTokenSucceedsAndExchangesInfo) {
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

TEST_F(ControlHandshake, SameTokenSucceeds) {
  auto [init, acc] = run_handshake("s3cret-token", "s3cret-token");
  ASSERT_EQ(init.status, HMC_SUCCESS) << init.error;
  ASSERT_EQ(acc.status, HMC_SUCCESS) << acc.error;
  EXPECT_EQ(init.theirs.pid, 222);
  EXPECT_EQ(acc.theirs.pid, 111);
}

TEST_F(ControlHandshake, DifferentTokensFailOnBothSides) {
  auto [init, acc] = run_handshake("token-one", "token-two");
  EXPECT_EQ(init.status, HMC_ERR_AUTH) << init.error;
  EXPECT_EQ(acc.status, HMC_ERR_AUTH) << acc.error;
  EXPECT_TRUE(contains(init.error, "peer did not prove HMC_AUTH_TOKEN")) << init.error;
  EXPECT_TRUE(contains(init.error, "acceptor-side")) << init.error;
  EXPECT_TRUE(contains(acc.error, "tokens differ")) << acc.error;
  EXPECT_EQ(init.theirs.hostname, "unset") << "outputs are set only on success";
  EXPECT_EQ(acc.theirs.hostname, "unset");
}

TEST_F(ControlHandshake, TokenOnlyOnInitiatorFailsOnBothSides) {
  auto [init, acc] = run_handshake("only-here", "");
  EXPECT_EQ(init.status, HMC_ERR_AUTH) << init.error;
  EXPECT_EQ(acc.status, HMC_ERR_AUTH) << acc.error;
  EXPECT_TRUE(contains(init.error, "peer did not prove HMC_AUTH_TOKEN")) << init.error;
  EXPECT_TRUE(contains(acc.error, "peer requires HMC_AUTH_TOKEN, which is not set here"))
      << acc.error;
}

TEST_F(ControlHandshake, TokenOnlyOnAcceptorFailsOnBothSides) {
  auto [init, acc] = run_handshake("", "only-there");
  EXPECT_EQ(init.status, HMC_ERR_AUTH) << init.error;
  EXPECT_EQ(acc.status, HMC_ERR_AUTH) << acc.error;
  EXPECT_TRUE(contains(init.error, "peer requires HMC_AUTH_TOKEN, which is not set here"))
      << init.error;
  EXPECT_TRUE(contains(acc.error, "peer did not prove HMC_AUTH_TOKEN")) << acc.error;
}

TEST_F(ControlHandshake, OverLoopbackTcp) {
  auto [client, server] = loopback_tcp_pair();
  ASSERT_TRUE(client.valid() && server.valid()) << hmc::last_error();
  Channel ci(std::move(client)), ca(std::move(server));
  const uint64_t deadline = deadline_after_ms(5000);
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

// A Hello offering only one version: the acceptor refuses it with HMC_ERR_VERSION, and both it
// and the peer (told in an Error) name the two versions.
struct RefusedVersion {
  uint16_t offered;
  const char* offered_text;
  const char* name;
};

class ControlHandshakeVersions : public ControlHandshake,
                                 public testing::WithParamInterface<RefusedVersion> {};

TEST_P(ControlHandshakeVersions, AcceptorRefusesAHelloOfOnlyThatVersion) {
  const RefusedVersion& v = GetParam();
  HelloMsg hello;
  hello.max_version = hello.min_version = v.offered;
  hello.info = info_of("other", 9, 9);
  send_hello(initiator_end, hello);
  EXPECT_EQ(accept_here(), HMC_ERR_VERSION);
  const std::string err = hmc::last_error();
  EXPECT_TRUE(contains(err, v.offered_text)) << err;
  EXPECT_TRUE(contains(err, "version 3")) << err;
  ErrorMsg e = expect_error(initiator_end);
  EXPECT_EQ(e.status, HMC_ERR_VERSION);
  EXPECT_TRUE(contains(e.text, v.offered_text)) << e.text;
  EXPECT_TRUE(contains(e.text, "version 3")) << e.text;
}

// An unsupported future version, and earlier builds whose messages this one no longer reads
// (1: the capability record, 2: Notify; refused at the hello).
INSTANTIATE_TEST_SUITE_P(Offered, ControlHandshakeVersions,
                         testing::Values(RefusedVersion{99, "99", "Unsupported"},
                                         RefusedVersion{1, "version 1", "Version1"},
                                         RefusedVersion{2, "version 2", "Version2"}),
                         [](const testing::TestParamInfo<RefusedVersion>& info) {
                           return std::string(info.param.name);
                         });

TEST_F(ControlHandshake, AcceptorRefusesAHelloWithOnlyAVersionItCannotSpeak) {
  // A future peer whose Hello layout changed: only the leading version fields are read.
  Writer w;
  w.u16(99);
  w.u16(50);
  w.u8(0xEE);  // not a valid v1 Hello beyond this point
  send_frame(initiator_end, MsgType::Hello, w);
  EXPECT_EQ(accept_here(), HMC_ERR_VERSION);
  EXPECT_TRUE(contains(hmc::last_error(), "versions 50..99")) << hmc::last_error();
}

TEST_F(ControlHandshake, NewerPeerThatStillSpeaksThisVersionIsAccepted) {
  // Versions 1..99, with fields appended after the Hello's layout: negotiated down to this one.
  HelloMsg hello;
  hello.max_version = 99;
  hello.min_version = 1;
  hello.info = info_of("newer", 5, 5);
  Writer w;
  encode_hello(hello, &w);
  w.str("a field from a future version");
  send_frame(initiator_end, MsgType::Hello, w);
  start_acceptor();
  Message m = expect_message(initiator_end, MsgType::HelloAck);
  HelloAckMsg ack;
  ASSERT_TRUE(decode_hello_ack(m.payload.data(), m.payload.size(), &ack));
  EXPECT_EQ(ack.version, kProtocolVersion);
  expect_message(initiator_end, MsgType::Welcome);
  const Result& acc = finish();
  ASSERT_EQ(acc.status, HMC_SUCCESS) << acc.error;
  EXPECT_EQ(acc.theirs.hostname, "newer");
  EXPECT_EQ(acc.theirs.protocol_version, kProtocolVersion);
}

TEST_F(ControlHandshake, InitiatorRefusesAVersionItDidNotOffer) {
  start_initiator();
  expect_message(acceptor_end, MsgType::Hello);
  HelloAckMsg ack;
  ack.version = 99;
  ack.info = info_of("b", 2, 2);
  Writer w;
  encode_hello_ack(ack, &w);
  send_frame(acceptor_end, MsgType::HelloAck, w);
  ErrorMsg e = expect_error(acceptor_end);
  const Result& init = finish();
  EXPECT_EQ(init.status, HMC_ERR_VERSION) << init.error;
  EXPECT_TRUE(contains(init.error, "99")) << init.error;
  EXPECT_EQ(e.status, HMC_ERR_VERSION);
}

TEST_F(ControlHandshake, InitiatorReportsTheAcceptorsVersionRefusal) {
  start_initiator();
  expect_message(acceptor_end, MsgType::Hello);
  Writer w;
  encode_error(HMC_ERR_VERSION, "the accepting side speaks version 7", &w);
  send_frame(acceptor_end, MsgType::Error, w);
  const Result& init = finish();
  EXPECT_EQ(init.status, HMC_ERR_VERSION);
  EXPECT_TRUE(contains(init.error, "the accepting side speaks version 7")) << init.error;
}

// ---- misbehaving peers ----

TEST_F(ControlHandshake, ForgedAuthProofIsRefused) {
  start_acceptor("tok");
  HelloMsg hello;
  hello.flags = kHelloFlagToken;
  hello.info = info_of("forger", 6, 6);
  send_hello(initiator_end, hello);
  Message m = expect_message(initiator_end, MsgType::HelloAck);
  HelloAckMsg ack;
  ASSERT_TRUE(decode_hello_ack(m.payload.data(), m.payload.size(), &ack));
  EXPECT_TRUE(ack.flags & kHelloAckFlagProof);
  // Replaying the acceptor's own proof back (a reflection attempt) must not pass.
  AuthMsg auth;
  auth.proof = ack.proof;
  Writer wa;
  encode_auth(auth, &wa);
  send_frame(initiator_end, MsgType::Auth, wa);
  ErrorMsg e = expect_error(initiator_end);
  const Result& acc = finish();
  EXPECT_EQ(acc.status, HMC_ERR_AUTH);
  EXPECT_TRUE(contains(acc.error, "did not prove HMC_AUTH_TOKEN")) << acc.error;
  EXPECT_EQ(e.status, HMC_ERR_AUTH);
}

// The proofs are computed here from the bytes on the wire, as handshake.h describes them: a peer
// built from that description (or from an older hmc) interoperates.
TEST_F(ControlHandshake, ProofsFollowTheDocumentedTranscript) {
  const std::string token = "s3cret-token";
  start_acceptor(token);
  HelloMsg hello;
  hello.flags = kHelloFlagToken;
  hello.info = info_of("a", 1, 1);
  for (size_t i = 0; i < hello.nonce.size(); ++i) hello.nonce[i] = static_cast<uint8_t>(i);
  const std::vector<uint8_t> hello_payload = send_hello(initiator_end, hello);
  Message m = expect_message(initiator_end, MsgType::HelloAck);
  HelloAckMsg ack;
  ASSERT_TRUE(decode_hello_ack(m.payload.data(), m.payload.size(), &ack));

  // T = SHA256(Hello payload) || SHA256(HelloAck payload with proof_a zeroed)
  std::vector<uint8_t> ack_zeroed = m.payload;
  std::fill_n(ack_zeroed.begin() + kHelloAckProofOffset, ack.proof.size(), 0);
  Sha256Digest hello_hash{}, ack_hash{};
  sha256(hello_payload.data(), hello_payload.size(), &hello_hash);
  sha256(ack_zeroed.data(), ack_zeroed.size(), &ack_hash);
  auto proof = [&](const std::string& label, const Nonce& first, const Nonce& second) {
    std::vector<uint8_t> msg(label.begin(), label.end());
    for (const auto* part : {&first, &second}) msg.insert(msg.end(), part->begin(), part->end());
    msg.insert(msg.end(), hello_hash.begin(), hello_hash.end());
    msg.insert(msg.end(), ack_hash.begin(), ack_hash.end());
    Sha256Digest d{};
    hmac_sha256(token.data(), token.size(), msg.data(), msg.size(), &d);
    return d;
  };
  EXPECT_EQ(ack.proof, proof("hmc-acceptor", hello.nonce, ack.nonce));
  AuthMsg auth;
  auth.proof = proof("hmc-initiator", ack.nonce, hello.nonce);
  Writer wa;
  encode_auth(auth, &wa);
  send_frame(initiator_end, MsgType::Auth, wa);
  expect_message(initiator_end, MsgType::Welcome);
  const Result& acc = finish();
  EXPECT_EQ(acc.status, HMC_SUCCESS) << acc.error;
  EXPECT_EQ(acc.theirs.hostname, "a");
}

TEST_F(ControlHandshake, TokenNeverCrossesTheWire) {
  const std::string token = "a-very-recognisable-token-value";
  start_acceptor(token, 1000);
  HelloMsg hello;
  hello.flags = kHelloFlagToken;
  send_hello(initiator_end, hello);
  Message m = expect_message(initiator_end, MsgType::HelloAck);
  std::string bytes(m.payload.begin(), m.payload.end());
  EXPECT_FALSE(contains(bytes, token));
  initiator_end = Channel(Fd());  // hang up: the acceptor sees the peer lost
  EXPECT_EQ(finish().status, HMC_ERR_PEER_LOST);
}

TEST_F(ControlHandshake, GarbageIsAProtocolErrorForTheAcceptor) {
  const std::string junk = "SSH-2.0-OpenSSH_9.0\r\n";
  ASSERT_EQ(write(initiator_end.fd(), junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  const uint64_t t0 = now_ns();
  EXPECT_EQ(accept_here(t0 + 200ull * 1000000), HMC_ERR_PROTOCOL);
  EXPECT_LT((now_ns() - t0) / 1000000, 1000u);
  EXPECT_TRUE(contains(hmc::last_error(), "magic")) << hmc::last_error();
}

TEST_F(ControlHandshake, GarbageIsAProtocolErrorForTheInitiator) {
  start_initiator();
  expect_message(acceptor_end, MsgType::Hello);
  const std::string junk(40, '\xFF');
  ASSERT_EQ(write(acceptor_end.fd(), junk.data(), junk.size()), 40);
  const Result& init = finish();
  EXPECT_EQ(init.status, HMC_ERR_PROTOCOL) << init.error;
}

TEST_F(ControlHandshake, UnexpectedMessageIsAProtocolError) {
  send_frame(initiator_end, MsgType::Welcome, Writer());
  EXPECT_EQ(accept_here(), HMC_ERR_PROTOCOL);
  EXPECT_TRUE(contains(hmc::last_error(), "expected Hello, received Welcome")) << hmc::last_error();
  EXPECT_EQ(expect_error(initiator_end).status, HMC_ERR_PROTOCOL);
}

TEST_F(ControlHandshake, MalformedHelloIsAProtocolError) {
  Writer w;
  w.u16(kProtocolVersion);
  w.u16(kProtocolVersion);
  w.u8(0);  // nonce and HelloInfo missing
  send_frame(initiator_end, MsgType::Hello, w);
  EXPECT_EQ(accept_here(), HMC_ERR_PROTOCOL);
  EXPECT_TRUE(contains(hmc::last_error(), "malformed Hello")) << hmc::last_error();
}

TEST_F(ControlHandshake, SilentPeerTimesOutWithinTheDeadline) {
  for (bool as_acceptor : {true, false}) {
    auto pair = channel_pair();
    Channel& mine = pair.first;  // the other end is kept open and never answers
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

TEST_F(ControlHandshake, PeerThatHangsUpIsPeerLost) {
  acceptor_end = Channel(Fd());
  HelloInfo theirs;
  EXPECT_EQ(
      handshake_initiator(initiator_end, info_of("a", 1, 1), "", deadline_after_ms(2000), &theirs),
      HMC_ERR_PEER_LOST);
}

TEST_F(ControlHandshake, OversizedInfoIsRefusedLocally) {
  HelloInfo big = info_of("a", 1, 1);
  big.hostname = std::string(kMaxHostnameLen + 1, 'h');
  HelloInfo theirs;
  EXPECT_EQ(handshake_initiator(initiator_end, big, "", deadline_after_ms(100), &theirs),
            HMC_ERR_INVALID_ARGUMENT);
}
