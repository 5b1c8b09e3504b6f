#include "control/handshake.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "util/clock.h"
#include "util/log.h"
#include "util/random.h"
#include "util/status.h"

namespace hmc::control {
namespace {

// How long a refusing side waits, at most, for its Error message to leave the socket.
constexpr uint64_t kErrorSendGraceNs = 100ull * 1000 * 1000;

const char kAcceptorLabel[] = "hmc-acceptor";
const char kInitiatorLabel[] = "hmc-initiator";

std::string peer_label(const Channel& ch) {
  return ch.peer_name().empty() ? fmt::format("peer on fd {}", ch.fd()) : ch.peer_name();
}

// Sends Error{status, text} without letting its own failure replace the caller's error
// message: the peer may well be gone already.
void send_error_best_effort(Channel& ch, hmc_status_t status, const std::string& text,
                            uint64_t deadline_ns) {
  const std::string saved = last_error();
  Writer w;
  encode_error(status, text, &w);
  if (ch.send(MsgType::Error, w) == HMC_SUCCESS && ch.want_write())
    (void)ch.flush_wait(std::min(deadline_ns, now_ns() + kErrorSendGraceNs));
  set_error(HMC_SUCCESS, saved);
}

// Refuses the handshake: tells the peer, then fails locally.
hmc_status_t refuse(Channel& ch, uint64_t deadline_ns, hmc_status_t status,
                    const std::string& to_peer, std::string local) {
  send_error_best_effort(ch, status, to_peer, deadline_ns);
  HMC_LOG_D("{}", local);
  return set_error(status, std::move(local));
}

void transcript_hash_ack(const std::vector<uint8_t>& ack_payload, Sha256Digest* out) {
  std::vector<uint8_t> copy = ack_payload;
  if (copy.size() >= kHelloAckProofOffset + 32)
    std::fill(copy.begin() + kHelloAckProofOffset, copy.begin() + kHelloAckProofOffset + 32, 0);
  sha256(copy.data(), copy.size(), out);
}

void make_proof(const std::string& token, const char* label, const Nonce& first,
                const Nonce& second, const Sha256Digest& hello_hash, const Sha256Digest& ack_hash,
                Sha256Digest* out) {
  Writer m;
  m.bytes(label, strlen(label));
  m.bytes(first.data(), first.size());
  m.bytes(second.data(), second.size());
  m.bytes(hello_hash.data(), hello_hash.size());
  m.bytes(ack_hash.data(), ack_hash.size());
  hmac_sha256(token.data(), token.size(), m.data().data(), m.size(), out);
}

hmc_status_t check_info(const char* side, const HelloInfo& mine) {
  if (mine.host_id.size() > kMaxHostIdLen || mine.hostname.size() > kMaxHostnameLen)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "handshake ({}): host_id ({} bytes, max {}) or hostname ({} bytes, max {}) too "
                "long",
                side, mine.host_id.size(), kMaxHostIdLen, mine.hostname.size(), kMaxHostnameLen);
  return HMC_SUCCESS;
}

std::string version_range(uint16_t lo, uint16_t hi) {
  return lo == hi ? fmt::format("version {}", hi) : fmt::format("versions {}..{}", lo, hi);
}

// Receives the next message, failing with context when it is neither `want` nor Error.
// On Error it returns the remote status with "peer refused" text in *refusal.
hmc_status_t expect(Channel& ch, MsgType want, uint64_t deadline_ns, const char* stage,
                    Message* out, ErrorMsg* refusal, bool* refused) {
  *refused = false;
  hmc_status_t st = ch.receive_one(out, deadline_ns);
  if (st == HMC_ERR_TIMEOUT)
    return fail(st,
                "handshake with {} stalled {}: the connection is open but the peer did not "
                "answer in time ({})",
                peer_label(ch), stage, last_error());
  if (st != HMC_SUCCESS)
    return fail(st, "handshake with {} ({}): {}", peer_label(ch), stage, last_error());
  if (out->type == MsgType::Error) {
    if (!decode_error(out->payload.data(), out->payload.size(), refusal))
      return refuse(ch, deadline_ns, HMC_ERR_PROTOCOL, "malformed Error message",
                    fmt::format("handshake with {} ({}): malformed Error message from the peer",
                                peer_label(ch), stage));
    *refused = true;
    return status_from_remote(refusal->status);
  }
  if (out->type != want)
    return refuse(
        ch, deadline_ns, HMC_ERR_PROTOCOL,
        fmt::format("expected {}, received {}", msg_type_name(want), msg_type_name(out->type)),
        fmt::format("handshake with {} ({}): expected {}, received {}", peer_label(ch), stage,
                    msg_type_name(want), msg_type_name(out->type)));
  return HMC_SUCCESS;
}

hmc_status_t malformed(Channel& ch, uint64_t deadline_ns, MsgType type) {
  return refuse(ch, deadline_ns, HMC_ERR_PROTOCOL,
                fmt::format("malformed {} message", msg_type_name(type)),
                fmt::format("handshake with {}: malformed {} message from the peer", peer_label(ch),
                            msg_type_name(type)));
}

// Refuses without waiting: the Error is queued (written at once where the socket takes it).
hmc_status_t refuse_now(Channel& ch, hmc_status_t status, const std::string& to_peer,
                        std::string local) {
  const std::string saved = last_error();
  Writer w;
  encode_error(status, to_peer, &w);
  (void)ch.send(MsgType::Error, w);
  set_error(HMC_SUCCESS, saved);
  HMC_LOG_D("{}", local);
  return set_error(status, std::move(local));
}

hmc_status_t malformed_now(Channel& ch, MsgType type) {
  return refuse_now(ch, HMC_ERR_PROTOCOL, fmt::format("malformed {} message", msg_type_name(type)),
                    fmt::format("handshake with {}: malformed {} message from the peer",
                                peer_label(ch), msg_type_name(type)));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Codecs

void encode_hello_info(const HelloInfo& info, Writer* w) {
  w->str(info.host_id.substr(0, kMaxHostIdLen));
  w->str(info.hostname.substr(0, kMaxHostnameLen));
  w->i32(info.pid);
  w->u64(info.context_id);
}

bool decode_hello_info(Reader* r, HelloInfo* out) {
  HelloInfo v;
  r->str(&v.host_id, kMaxHostIdLen);
  r->str(&v.hostname, kMaxHostnameLen);
  r->i32(&v.pid);
  r->u64(&v.context_id);
  if (!r->ok()) return false;
  *out = std::move(v);
  return true;
}

void encode_hello(const HelloMsg& m, Writer* w) {
  w->u16(m.max_version);
  w->u16(m.min_version);
  w->u8(m.flags);
  w->bytes(m.nonce.data(), m.nonce.size());
  encode_hello_info(m.info, w);
}

bool decode_hello(const uint8_t* p, size_t n, HelloMsg* out) {
  Reader r(p, n);
  HelloMsg m;
  r.u16(&m.max_version);
  r.u16(&m.min_version);
  r.u8(&m.flags);
  r.bytes(m.nonce.data(), m.nonce.size());
  if (!decode_hello_info(&r, &m.info)) return false;
  *out = std::move(m);
  return true;
}

void encode_hello_ack(const HelloAckMsg& m, Writer* w) {
  w->u16(m.version);
  w->u8(m.flags);
  w->bytes(m.nonce.data(), m.nonce.size());
  w->bytes(m.proof.data(), m.proof.size());
  encode_hello_info(m.info, w);
}

bool decode_hello_ack(const uint8_t* p, size_t n, HelloAckMsg* out) {
  Reader r(p, n);
  HelloAckMsg m;
  r.u16(&m.version);
  r.u8(&m.flags);
  r.bytes(m.nonce.data(), m.nonce.size());
  r.bytes(m.proof.data(), m.proof.size());
  if (!decode_hello_info(&r, &m.info)) return false;
  *out = std::move(m);
  return true;
}

void encode_auth(const AuthMsg& m, Writer* w) {
  w->bytes(m.proof.data(), m.proof.size());
}

bool decode_auth(const uint8_t* p, size_t n, AuthMsg* out) {
  Reader r(p, n);
  AuthMsg m;
  if (!r.bytes(m.proof.data(), m.proof.size())) return false;
  *out = m;
  return true;
}

void encode_welcome(const WelcomeMsg&, Writer*) {}

bool decode_welcome(const uint8_t* p, size_t n, WelcomeMsg* out) {
  (void)p;
  (void)n;  // later versions may append fields
  *out = WelcomeMsg{};
  return true;
}

void encode_error(const ErrorMsg& m, Writer* w) {
  w->i32(m.status);
  w->str(m.text.size() > kMaxErrorTextLen ? m.text.substr(0, kMaxErrorTextLen) : m.text);
}

void encode_error(hmc_status_t status, const std::string& text, Writer* w) {
  encode_error(ErrorMsg{static_cast<int32_t>(status), text}, w);
}

bool decode_error(const uint8_t* p, size_t n, ErrorMsg* out) {
  Reader r(p, n);
  ErrorMsg m;
  r.i32(&m.status);
  r.str(&m.text, kMaxErrorTextLen);
  if (!r.ok()) return false;
  *out = std::move(m);
  return true;
}

hmc_status_t status_from_remote(int32_t status) {
  if (status <= HMC_ERR_INVALID_ARGUMENT && status >= HMC_ERR_INTERNAL)
    return static_cast<hmc_status_t>(status);
  return HMC_ERR_REMOTE;
}

// ---------------------------------------------------------------------------------------------
// Initiator

hmc_status_t handshake_initiator(Channel& ch, const HelloInfo& mine, const std::string& token,
                                 uint64_t deadline_ns, HelloInfo* theirs) {
  hmc_status_t st = check_info("initiator", mine);
  if (st != HMC_SUCCESS) return st;
  const bool have_token = !token.empty();
  const std::string peer = peer_label(ch);

  HelloMsg hello;
  hello.flags = have_token ? kHelloFlagToken : 0;
  hello.info = mine;
  if ((st = random_bytes(hello.nonce.data(), hello.nonce.size())) != HMC_SUCCESS) return st;
  Writer hello_bytes;
  encode_hello(hello, &hello_bytes);
  if ((st = ch.send_wait(MsgType::Hello, hello_bytes, deadline_ns)) != HMC_SUCCESS)
    return fail(st, "handshake with {} (sending Hello): {}", peer, last_error());

  Message m;
  ErrorMsg refusal;
  bool refused;
  st = expect(ch, MsgType::HelloAck, deadline_ns, "waiting for HelloAck", &m, &refusal, &refused);
  if (refused) {
    if (st == HMC_ERR_AUTH && have_token)
      return fail(st, "handshake with {}: peer did not prove HMC_AUTH_TOKEN (peer said: {})", peer,
                  refusal.text);
    if (st == HMC_ERR_AUTH)
      return fail(st,
                  "handshake with {}: peer requires HMC_AUTH_TOKEN, which is not set here (peer "
                  "said: {})",
                  peer, refusal.text);
    return fail(st, "handshake with {}: peer refused the connection: {}", peer, refusal.text);
  }
  if (st != HMC_SUCCESS) return st;
  HelloAckMsg ack;
  if (!decode_hello_ack(m.payload.data(), m.payload.size(), &ack))
    return malformed(ch, deadline_ns, MsgType::HelloAck);

  if (ack.version < kMinProtocolVersion || ack.version > kProtocolVersion)
    return refuse(
        ch, deadline_ns, HMC_ERR_VERSION,
        fmt::format("protocol version {} chosen by the accepting side is not among the "
                    "connecting side's {}",
                    ack.version, version_range(kMinProtocolVersion, kProtocolVersion)),
        fmt::format("handshake with {}: protocol version mismatch: peer chose version "
                    "{}, this side speaks {}",
                    peer, ack.version, version_range(kMinProtocolVersion, kProtocolVersion)));

  const bool peer_token = (ack.flags & kHelloAckFlagToken) != 0;
  const bool peer_proof = (ack.flags & kHelloAckFlagProof) != 0;
  if (have_token) {
    if (!peer_token || !peer_proof)
      return refuse(ch, deadline_ns, HMC_ERR_AUTH,
                    "HMC_AUTH_TOKEN is set on the connecting side, but this side sent no proof",
                    fmt::format("handshake with {}: peer did not prove HMC_AUTH_TOKEN (it has "
                                "none set)",
                                peer));
    Sha256Digest hello_hash, ack_hash, expected;
    sha256(hello_bytes.data().data(), hello_bytes.size(), &hello_hash);
    transcript_hash_ack(m.payload, &ack_hash);
    make_proof(token, kAcceptorLabel, hello.nonce, ack.nonce, hello_hash, ack_hash, &expected);
    if (!constant_time_equal(expected.data(), ack.proof.data(), expected.size()))
      return refuse(ch, deadline_ns, HMC_ERR_AUTH,
                    "the connecting side rejected this side's HMC_AUTH_TOKEN proof: the tokens "
                    "differ",
                    fmt::format("handshake with {}: peer did not prove HMC_AUTH_TOKEN (its proof "
                                "does not match: the tokens differ)",
                                peer));
    AuthMsg auth;
    make_proof(token, kInitiatorLabel, ack.nonce, hello.nonce, hello_hash, ack_hash, &auth.proof);
    Writer w;
    encode_auth(auth, &w);
    if ((st = ch.send_wait(MsgType::Auth, w, deadline_ns)) != HMC_SUCCESS)
      return fail(st, "handshake with {} (sending Auth): {}", peer, last_error());
  } else if (peer_token) {
    return refuse(ch, deadline_ns, HMC_ERR_AUTH,
                  "this side requires HMC_AUTH_TOKEN, which is not set on the connecting side",
                  fmt::format("handshake with {}: peer requires HMC_AUTH_TOKEN, which is not set "
                              "here",
                              peer));
  }

  st = expect(ch, MsgType::Welcome, deadline_ns, "waiting for Welcome", &m, &refusal, &refused);
  if (refused)
    return fail(st, "handshake with {}: peer refused the connection: {}", peer, refusal.text);
  if (st != HMC_SUCCESS) return st;
  WelcomeMsg welcome;
  if (!decode_welcome(m.payload.data(), m.payload.size(), &welcome))
    return malformed(ch, deadline_ns, MsgType::Welcome);

  HMC_LOG_D("handshake with {} ({}, pid {}): protocol version {}, {}", peer, ack.info.hostname,
            ack.info.pid, ack.version, have_token ? "token verified" : "no token");
  *theirs = std::move(ack.info);
  theirs->protocol_version = ack.version;
  return HMC_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// Acceptor

hmc_status_t handshake_acceptor(Channel& ch, const HelloInfo& mine, const std::string& token,
                                uint64_t deadline_ns, HelloInfo* theirs) {
  hmc_status_t st = check_info("acceptor", mine);
  if (st != HMC_SUCCESS) return st;
  AcceptorHandshake hs(mine, token);
  while (hs.stage() != AcceptorHandshake::Stage::Done) {
    Message m;
    if ((st = ch.receive_one(&m, deadline_ns)) != HMC_SUCCESS)
      return fail(st, "handshake with {} (waiting for {}): {}", peer_label(ch), hs.waiting_for(),
                  last_error());
    if ((st = hs.on_message(ch, m)) != HMC_SUCCESS) {
      // Give the queued Error a moment to leave; the failure stands whatever happens to it.
      const std::string saved = last_error();
      (void)ch.flush_wait(std::min(deadline_ns, now_ns() + kErrorSendGraceNs));
      return set_error(st, saved);
    }
  }
  if ((st = ch.flush_wait(deadline_ns)) != HMC_SUCCESS)
    return fail(st, "handshake with {} (sending Welcome): {}", peer_label(ch), last_error());
  *theirs = hs.theirs();
  return HMC_SUCCESS;
}

const char* AcceptorHandshake::waiting_for() const {
  switch (stage_) {
    case Stage::WaitHello: return "Hello";
    case Stage::WaitAuth: return "Auth";
    case Stage::Done: return "nothing (done)";
    case Stage::Failed: return "nothing (failed)";
  }
  return "?";
}

hmc_status_t AcceptorHandshake::failed(hmc_status_t st) {
  stage_ = Stage::Failed;
  return st;
}

hmc_status_t AcceptorHandshake::on_message(Channel& ch, const Message& m) {
  if (stage_ == Stage::Done || stage_ == Stage::Failed)
    return fail(HMC_ERR_INTERNAL, "handshake with {}: message {} after the handshake {}",
                peer_label(ch), msg_type_name(m.type), stage_ == Stage::Done ? "ended" : "failed");
  const MsgType want = stage_ == Stage::WaitHello ? MsgType::Hello : MsgType::Auth;
  if (m.type == MsgType::Error) {
    ErrorMsg refusal;
    if (!decode_error(m.payload.data(), m.payload.size(), &refusal))
      return failed(refuse_now(ch, HMC_ERR_PROTOCOL, "malformed Error message",
                               fmt::format("handshake with {} (waiting for {}): malformed Error "
                                           "message from the peer",
                                           peer_label(ch), waiting_for())));
    return failed(fail(status_from_remote(refusal.status),
                       "handshake with {}: peer refused the connection: {}", peer_label(ch),
                       refusal.text));
  }
  if (m.type != want)
    return failed(refuse_now(
        ch, HMC_ERR_PROTOCOL,
        fmt::format("expected {}, received {}", msg_type_name(want), msg_type_name(m.type)),
        fmt::format("handshake with {} (waiting for {}): expected {}, received {}", peer_label(ch),
                    waiting_for(), msg_type_name(want), msg_type_name(m.type))));
  hmc_status_t st = stage_ == Stage::WaitHello ? on_hello(ch, m) : on_auth(ch, m);
  return st == HMC_SUCCESS ? st : failed(st);
}

hmc_status_t AcceptorHandshake::on_hello(Channel& ch, const Message& m) {
  const bool have_token = !token_.empty();
  const std::string peer = peer_label(ch);
  // The versions are the first fields: read them on their own, so that a peer whose Hello
  // layout we cannot parse still gets a version error rather than a protocol error.
  {
    Reader r(m.payload.data(), m.payload.size());
    uint16_t max_v = 0, min_v = 0;
    if (!r.u16(&max_v) || !r.u16(&min_v)) return malformed_now(ch, MsgType::Hello);
    const uint16_t chosen = std::min(max_v, kProtocolVersion);
    if (min_v > max_v || chosen < std::max(min_v, kMinProtocolVersion))
      return refuse_now(ch, HMC_ERR_VERSION,
                        fmt::format("protocol version mismatch: the connecting side speaks {}, "
                                    "the accepting side speaks {}",
                                    version_range(min_v, max_v),
                                    version_range(kMinProtocolVersion, kProtocolVersion)),
                        fmt::format("handshake with {}: protocol version mismatch: peer speaks "
                                    "{}, this side speaks {}",
                                    peer, version_range(min_v, max_v),
                                    version_range(kMinProtocolVersion, kProtocolVersion)));
  }
  if (!decode_hello(m.payload.data(), m.payload.size(), &hello_))
    return malformed_now(ch, MsgType::Hello);
  const bool peer_token = (hello_.flags & kHelloFlagToken) != 0;

  if (have_token && !peer_token)
    return refuse_now(ch, HMC_ERR_AUTH,
                      "the accepting side requires HMC_AUTH_TOKEN, which is not set on the "
                      "connecting side",
                      fmt::format("handshake with {}: peer did not prove HMC_AUTH_TOKEN (it has "
                                  "none set)",
                                  peer));
  if (!have_token && peer_token)
    return refuse_now(ch, HMC_ERR_AUTH,
                      "HMC_AUTH_TOKEN is not set on the accepting side, so it cannot prove it",
                      fmt::format("handshake with {}: peer requires HMC_AUTH_TOKEN, which is not "
                                  "set here",
                                  peer));

  ack_.version = std::min(hello_.max_version, kProtocolVersion);
  ack_.flags = have_token ? (kHelloAckFlagToken | kHelloAckFlagProof) : 0;
  ack_.info = mine_;
  hmc_status_t st;
  if ((st = random_bytes(ack_.nonce.data(), ack_.nonce.size())) != HMC_SUCCESS) return st;
  Writer ack_bytes;
  encode_hello_ack(ack_, &ack_bytes);  // proof zeroed: the form the transcript hashes
  if (have_token) {
    sha256(m.payload.data(), m.payload.size(), &hello_hash_);
    sha256(ack_bytes.data().data(), ack_bytes.size(), &ack_hash_);
    make_proof(token_, kAcceptorLabel, hello_.nonce, ack_.nonce, hello_hash_, ack_hash_,
               &ack_.proof);
    ack_bytes.clear();
    encode_hello_ack(ack_, &ack_bytes);
  }
  if ((st = ch.send(MsgType::HelloAck, ack_bytes)) != HMC_SUCCESS)
    return fail(st, "handshake with {} (sending HelloAck): {}", peer, last_error());
  if (have_token) {
    stage_ = Stage::WaitAuth;
    return HMC_SUCCESS;
  }
  return queue_welcome(ch);
}

hmc_status_t AcceptorHandshake::on_auth(Channel& ch, const Message& m) {
  AuthMsg auth;
  if (!decode_auth(m.payload.data(), m.payload.size(), &auth))
    return malformed_now(ch, MsgType::Auth);
  Sha256Digest expected;
  make_proof(token_, kInitiatorLabel, ack_.nonce, hello_.nonce, hello_hash_, ack_hash_, &expected);
  if (!constant_time_equal(expected.data(), auth.proof.data(), expected.size()))
    return refuse_now(ch, HMC_ERR_AUTH,
                      "the accepting side rejected this side's HMC_AUTH_TOKEN proof: the tokens "
                      "differ",
                      fmt::format("handshake with {}: peer did not prove HMC_AUTH_TOKEN (its "
                                  "proof does not match: the tokens differ)",
                                  peer_label(ch)));
  return queue_welcome(ch);
}

hmc_status_t AcceptorHandshake::queue_welcome(Channel& ch) {
  Writer welcome;
  encode_welcome(WelcomeMsg{}, &welcome);
  hmc_status_t st = ch.send(MsgType::Welcome, welcome);
  if (st != HMC_SUCCESS)
    return fail(st, "handshake with {} (sending Welcome): {}", peer_label(ch), last_error());
  HMC_LOG_D("handshake with {} ({}, pid {}): protocol version {}, {}", peer_label(ch),
            hello_.info.hostname, hello_.info.pid, ack_.version,
            token_.empty() ? "no token" : "token verified");
  theirs_ = std::move(hello_.info);
  theirs_.protocol_version = ack_.version;
  stage_ = Stage::Done;
  return HMC_SUCCESS;
}

}  // namespace hmc::control
