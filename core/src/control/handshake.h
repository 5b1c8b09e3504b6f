// The control-plane handshake: protocol version negotiation and the optional shared-token
// (HMC_AUTH_TOKEN) mutual challenge, run on a fresh Channel right after connect/accept.
//
// Messages (payload layouts; all little-endian, see wire.h; every decoder ignores bytes after
// the fields it knows, because later protocol versions only ever append):
//   Hello    (initiator)  u16 max_version, u16 min_version, u8 flags (bit 0: has token),
//                         nonce_i[32], HelloInfo
//   HelloAck (acceptor)   u16 chosen_version, u8 flags (bit 0: has token, bit 1: proof set),
//                         nonce_a[32], proof_a[32] (zeros when unset), HelloInfo
//   Auth     (initiator)  proof_i[32]
//   Welcome  (acceptor)   empty
//   Error    (either)     i32 status (hmc_status_t), str text
//   HelloInfo             str host_id, str hostname, i32 pid, u64 context_id
//
// Flows:  no token on either side:  Hello -> HelloAck -> Welcome
//         token on both sides:      Hello -> HelloAck(proof_a) -> Auth(proof_i) -> Welcome
//         any refusal:              ... -> Error{status, text}, and both sides fail with status
//
// Proofs bind the token to both fresh nonces and to the whole exchange so far (which prevents
// replay, reflection between the two roles and undetected tampering with versions or HelloInfo):
//   T       = SHA256(Hello payload) || SHA256(HelloAck payload with proof_a zeroed)
//   proof_a = HMAC-SHA256(token, "hmc-acceptor"  || nonce_i || nonce_a || T)
//   proof_i = HMAC-SHA256(token, "hmc-initiator" || nonce_a || nonce_i || T)
// The initiator checks proof_a before it proves anything itself; the token never crosses the
// wire. Limits: only the handshake is authenticated, not the messages after it (no per-message
// MAC, no encryption); HelloInfo of each side is sent before the peer proved the token.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "control/channel.h"
#include "control/wire.h"
#include "hmc/hmc.h"
#include "util/digest.h"

namespace hmc::control {

// 2: the capability record of version 2, every field required (peer/messages.h).
// 3: Notify carries bytes (hmc_put_notify, hmc_notify_send), every field required. Peers of
// versions 1 and 2 (whose Notify is the value and count alone) are refused at the hello.
constexpr uint16_t kProtocolVersion = 3;     // newest protocol this build speaks
constexpr uint16_t kMinProtocolVersion = 3;  // oldest protocol this build still speaks
constexpr size_t kNonceSize = 32;
constexpr size_t kMaxHostIdLen = 1024;
constexpr size_t kMaxHostnameLen = 256;
constexpr size_t kMaxErrorTextLen = 4096;
// The largest payload a handshake message can have (a Hello or HelloAck with the longest host
// id and hostname, an Error with the longest text), with room for fields later versions append:
// an acceptor refuses longer frames before the hello is done, so that an unauthenticated
// connector cannot make it buffer a 1 MiB frame.
constexpr size_t kMaxHandshakePayload = 8192;
static_assert(kMaxHandshakePayload >= 2 * 1024 + kMaxHostIdLen + kMaxHostnameLen &&
                  kMaxHandshakePayload >= 2 * 1024 + kMaxErrorTextLen,
              "a handshake message must fit the acceptor's limit, with room to grow");

struct HelloInfo {
  // In `mine`: ignored (the handshake always offers kMinProtocolVersion..kProtocolVersion).
  // In `theirs`: the protocol version both sides agreed on.
  uint16_t protocol_version = kProtocolVersion;
  std::string host_id;  // host_identity() of the peer
  std::string hostname;
  int32_t pid = 0;
  uint64_t context_id = 0;
};

// Runs the initiator's (connecting side's) half. token "" means no HMC_AUTH_TOKEN here.
// *theirs is set only on success. Errors (both sides fail, with a message naming the reason):
//   HMC_ERR_VERSION   no common protocol version (the message names both ranges)
//   HMC_ERR_AUTH      token on one side only, or different tokens
//   HMC_ERR_PROTOCOL  malformed or unexpected message
//   HMC_ERR_TIMEOUT   the deadline (now_ns() based) passed
//   HMC_ERR_PEER_LOST the peer closed the connection
hmc_status_t handshake_initiator(Channel& ch, const HelloInfo& mine, const std::string& token,
                                 uint64_t deadline_ns, HelloInfo* theirs);
// The acceptor's (listening side's) half, blocking until done (AcceptorHandshake below, driven
// by this thread); same errors.
hmc_status_t handshake_acceptor(Channel& ch, const HelloInfo& mine, const std::string& token,
                                uint64_t deadline_ns, HelloInfo* theirs);

// ---- message codecs (used by the handshake, the fuzz target and tests) ----

constexpr uint8_t kHelloFlagToken = 1u << 0;
constexpr uint8_t kHelloAckFlagToken = 1u << 0;
constexpr uint8_t kHelloAckFlagProof = 1u << 1;
// Offset of proof_a in the HelloAck payload (u16 version, u8 flags, nonce_a[32]).
constexpr size_t kHelloAckProofOffset = 2 + 1 + kNonceSize;

using Nonce = std::array<uint8_t, kNonceSize>;

struct HelloMsg {
  uint16_t max_version = kProtocolVersion;
  uint16_t min_version = kMinProtocolVersion;
  uint8_t flags = 0;
  Nonce nonce{};
  HelloInfo info;
};

struct HelloAckMsg {
  uint16_t version = kProtocolVersion;
  uint8_t flags = 0;
  Nonce nonce{};
  Sha256Digest proof{};
  HelloInfo info;
};

struct AuthMsg {
  Sha256Digest proof{};
};

struct WelcomeMsg {};

struct ErrorMsg {
  int32_t status = HMC_ERR_REMOTE;
  std::string text;
};

void encode_hello_info(const HelloInfo& info, Writer* w);
bool decode_hello_info(Reader* r, HelloInfo* out);

void encode_hello(const HelloMsg& m, Writer* w);
bool decode_hello(const uint8_t* p, size_t n, HelloMsg* out);
void encode_hello_ack(const HelloAckMsg& m, Writer* w);
bool decode_hello_ack(const uint8_t* p, size_t n, HelloAckMsg* out);
void encode_auth(const AuthMsg& m, Writer* w);
bool decode_auth(const uint8_t* p, size_t n, AuthMsg* out);
void encode_welcome(const WelcomeMsg& m, Writer* w);
bool decode_welcome(const uint8_t* p, size_t n, WelcomeMsg* out);

// Error {i32 status, str text}; text longer than kMaxErrorTextLen is cut when encoding.
void encode_error(const ErrorMsg& m, Writer* w);
void encode_error(hmc_status_t status, const std::string& text, Writer* w);
bool decode_error(const uint8_t* p, size_t n, ErrorMsg* out);
// The local status for a status received in an Error: the value itself when it is one of
// hmc_status_t's errors, else HMC_ERR_REMOTE.
hmc_status_t status_from_remote(int32_t status);

// The acceptor's half as a state machine fed one received message at a time, so that a listener
// can run many handshakes at once and wait on none (peer/incoming.h). Its replies are queued on
// the channel (Channel::send writes what the socket takes at once; the owner flushes the rest),
// never waited for. The deadline is the owner's: the machine keeps no clock.
class AcceptorHandshake {
 public:
  enum class Stage { WaitHello, WaitAuth, Done, Failed };
  AcceptorHandshake(HelloInfo mine, std::string token)
      : mine_(std::move(mine)), token_(std::move(token)) {}

  // Handles the next message of the connector. HMC_SUCCESS: the stage moved on (Done once
  // Welcome is queued). Otherwise the stage is Failed, an Error message for the peer is queued
  // where one is due, and the status and last_error say why (the errors of handshake_initiator).
  hmc_status_t on_message(Channel& ch, const Message& m);
  Stage stage() const { return stage_; }
  // "Hello", "Auth": the message the handshake waits for (for timeout messages).
  const char* waiting_for() const;
  // The connector's HelloInfo, with the agreed protocol version; valid once Done.
  const HelloInfo& theirs() const { return theirs_; }

 private:
  hmc_status_t on_hello(Channel& ch, const Message& m);
  hmc_status_t on_auth(Channel& ch, const Message& m);
  hmc_status_t queue_welcome(Channel& ch);
  hmc_status_t failed(hmc_status_t st);

  HelloInfo mine_;
  std::string token_;
  Stage stage_ = Stage::WaitHello;
  HelloMsg hello_;
  HelloAckMsg ack_;
  Sha256Digest hello_hash_{};
  Sha256Digest ack_hash_{};
  HelloInfo theirs_;
};

}  // namespace hmc::control
