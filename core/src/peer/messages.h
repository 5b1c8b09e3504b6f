// Payloads of the control-plane messages that follow the hello: capability records, the data
// path's connection handle, notifications, teardown. Framing, hello and auth are in control/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/wire.h"
#include "path/path.h"

namespace hmc::msg {

// Caps: everything path choice needs to know about one side, version 2 of the record
// (docs/protocols-wire.md, "The capability record"): a magic and the version, the identity, the
// staging figures and features, the net records, the IPC plugins and the copy figures. Every
// field is required; a decoder refuses another version (and records from before the versioned
// one) by name rather than guessing at missing fields.
inline constexpr uint32_t kCapsMagic = 0x50414348;  // "HCAP" little-endian
inline constexpr uint16_t kCapsVersion = 2;
enum class CapsDecode { Ok, Unversioned, OtherVersion, Malformed };
void encode_caps(const path::Capabilities& caps, control::Writer* w);
// True for a well-formed record of this version; *why (when given) says what else it was.
bool decode_caps(const uint8_t* p, size_t n, path::Capabilities* caps, CapsDecode* why);
inline bool decode_caps(const uint8_t* p, size_t n, path::Capabilities* caps) {
  return decode_caps(p, n, caps, nullptr);
}
// What a refused record was, for the error that ends the connect.
const char* caps_decode_text(CapsDecode d);

// NetHandle (acceptor -> initiator): the chosen path and the plugin's connection handle, or the
// reason no path could be chosen.
struct NetHandle {
  int32_t status = 0;  // hmc_status_t
  std::string text;    // error text when status != 0, else the choice's reason
  std::string plugin;
  std::string device;
  std::vector<uint8_t> handle;
  // kNetHandleTakesHello: the acceptor's plugin takes the connector's hello (net.h,
  // accept_hello) in a NetHello message.
  uint8_t flags = 0;
  // The connector's device of the chosen pair, where it has another name than the acceptor's
  // (devices pairing by fabric); empty: the same name as `device`. Every field is required.
  std::string peer_device = "";
};
constexpr uint8_t kNetHandleTakesHello = 1;
void encode_net_handle(const NetHandle& m, control::Writer* w);
bool decode_net_handle(const uint8_t* p, size_t n, NetHandle* m);

// NetHello (initiator -> acceptor, before NetReady, only when NetHandle asked for it): the
// connector's half of the plugin's handshake (net.h, connect_hello), possibly empty.
struct NetHello {
  std::vector<uint8_t> hello;
};
void encode_net_hello(const NetHello& m, control::Writer* w);
bool decode_net_hello(const uint8_t* p, size_t n, NetHello* m);

// NetReady (initiator -> acceptor): whether connecting the data path worked.
struct NetReady {
  int32_t status = 0;
  std::string text;
};
void encode_net_ready(const NetReady& m, control::Writer* w);
bool decode_net_ready(const uint8_t* p, size_t n, NetReady* m);

// Notify: the value of a put with HMC_PUT_NOTIFY, sent after the data is in place (or of
// hmc_notify_send), how many notifications the initiator's net plugin carried to this target
// before it, and the bytes it carries (at most HMC_NOTIFY_MAX_BYTES). Every field is required.
struct Notify {
  uint64_t value = 0;
  uint64_t carried_before = 0;
  std::string bytes;
};
void encode_notify(const Notify& m, control::Writer* w);
bool decode_notify(const uint8_t* p, size_t n, Notify* m);

// NotifyAck: how many Notify messages from the receiver of this one were delivered so far.
void encode_notify_ack(const uint64_t& delivered, control::Writer* w);
bool decode_notify_ack(const uint8_t* p, size_t n, uint64_t* delivered);

// Bye: orderly close, with a reason.
void encode_bye(const std::string& reason, control::Writer* w);
bool decode_bye(const uint8_t* p, size_t n, std::string* reason);

// Decoders take the payload bytes of one message; the fuzz target
// (tests/fuzz/control_fuzz_entry.cpp) runs each of them through a decode -> encode -> decode
// round trip.

// --- Region bookkeeping (regions/regions.cpp) ------------------------------------------------
// An importer tells the owner of a region which of its regions it holds, so that the owner can
// withdraw them before it deregisters (one-sided access is not seen by the owner on every path).
// Every decoder below ignores bytes after the fields it knows (later versions only append).

// RegionRequest (importer -> owner): "I imported your region region_id, described as follows";
// the owner checks the description against its live registration and answers RegionReply.
struct RegionRequest {
  uint64_t token = 0;       // chosen by the importer, echoed in the reply
  uint64_t context_id = 0;  // the owner's context id, as the descriptor says
  uint64_t region_id = 0;
  uint64_t base = 0;  // the descriptor's claims
  uint64_t size = 0;
  uint32_t access = 0;
};
void encode_region_request(const RegionRequest& m, control::Writer* w);
bool decode_region_request(const uint8_t* p, size_t n, RegionRequest* m);

// RegionReply (owner -> importer): status 0, or why the import is refused (hmc_status_t + text).
struct RegionReply {
  uint64_t token = 0;
  uint64_t region_id = 0;
  int32_t status = 0;
  std::string text;
};
void encode_region_reply(const RegionReply& m, control::Writer* w);
bool decode_region_reply(const uint8_t* p, size_t n, RegionReply* m);

// RegionRelease (importer -> owner), RegionGone (owner -> importer) and RegionGoneAck
// (importer -> owner) carry the region id alone.
void encode_region_id(const uint64_t& region_id, control::Writer* w);
bool decode_region_id(const uint8_t* p, size_t n, uint64_t* region_id);

// --- Target-side staging (xfer/target_staging.cpp) -------------------------------------------
// One-sided access to a peer's region of device memory that its net plugins cannot reach: the
// owner moves the bytes with a framed transfer on an internal tag (docs/protocols-wire.md,
// kInternalTagBit) posted by its progress engine.

// StagedPut / StagedGet (initiator -> owner): "receive my framed send on `tag` into region
// region_id at offset" / "send offset..offset+size of region region_id to me, framed, on `tag`".
struct StagedAsk {
  uint64_t tag = 0;  // the internal tag, chosen by the initiator, unique among its transfers
  uint64_t region_id = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};
void encode_staged_ask(const StagedAsk& m, control::Writer* w);
bool decode_staged_ask(const uint8_t* p, size_t n, StagedAsk* m);

// StagedDone (owner -> initiator): the owner's side of the transfer on `tag` ended: status 0
// (a put's bytes are in place), or why it was refused or failed (hmc_status_t + text).
struct StagedDone {
  uint64_t tag = 0;
  int32_t status = 0;
  std::string text;
};
void encode_staged_done(const StagedDone& m, control::Writer* w);
bool decode_staged_done(const uint8_t* p, size_t n, StagedDone* m);

}  // namespace hmc::msg
