// What travels between two net-ofi plugins: the 64-bit tag layout, the connection handle the
// core carries over its control plane, the hello/ack pair that completes a connection, and the
// packed remote key. All fixed layouts, little-endian, each with a magic and a version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hmc::ofi {

// ---- tags -----------------------------------------------------------------------------------
// One RDM endpoint serves every peer, and a receive matches on the 64-bit tag alone (plus the
// sender's address with FI_DIRECTED_RECV), so the connection a message is for lives in the tag:
//
//   bit 63 set     plugin control: bits 59..56 = message type, bits 55..0 = listener id or
//                  connector nonce or rendezvous cookie
//   bit 63 clear   data: the core's tag (bits 62..0; the core uses all of them: user tags
//                  below 2^59, its own bits 59 to 61, collectives bit 62) XOR the key of the
//                  receiving connection's slot
//
// The receiver picks its slot (0..14) and tells the sender (hello/ack); a sender XORs the
// peer's slot key into every tag. XOR with one key is a bijection, so the tags of one
// connection never meet each other; slot 0's key is 0, and the others' are fixed 63-bit
// values with bits everywhere, so two connections sharing the endpoint meet only on tags that
// differ by exactly the XOR of their keys. Should it happen anyway, the receive that matched
// the other connection's message sees it: a protocol message (devices with RMA) carries the
// slot it was sent to, and the receive ends with an error naming the collision instead of
// delivering another connection's bytes (plain tagged messages, devices without RMA, carry no
// header to tell it). With FI_DIRECTED_RECV receives also name the peer's fi_addr, so slots
// only tell apart the connections between the same two endpoints (15 at most); without it a
// slot is unique in the whole device (15 connections per device).
constexpr uint64_t kCtrlBit = uint64_t{1} << 63;
constexpr uint64_t kUserTagLimit = kCtrlBit;
constexpr int kDataSlots = 15;
constexpr uint64_t kCtrlIdMask = (uint64_t{1} << 56) - 1;

enum class CtrlType : uint64_t { kHello = 1, kAck = 2, kFin = 3, kCts = 4 };

// The key of a slot: 0 for slot 0, else a splitmix64 value of the slot with bit 63 cleared.
constexpr uint64_t slot_key(int slot) {
  if (slot == 0) return 0;
  uint64_t z = static_cast<uint64_t>(slot) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (z ^ (z >> 31)) & ~kCtrlBit;
}
inline uint64_t data_tag(int slot, uint64_t user_tag) {
  return user_tag ^ slot_key(slot);
}
inline uint64_t ctrl_tag(CtrlType type, uint64_t id) {
  return kCtrlBit | (static_cast<uint64_t>(type) << 56) | (id & kCtrlIdMask);
}

// ---- data messages (devices with RMA) ------------------------------------------------------
// The provider never sees a receive smaller than a message: libfabric 1.17's tcp (rxm) drops
// the connection when it truncates a message and its shm provider hangs on large ones. So
// every message on a data tag is at most kMsgHeader + eager limit bytes, received into a bounce
// buffer that large, and the plugin truncates itself:
//  - eager (len <= eager limit): header + payload, copied out of the bounce buffer;
//  - rendezvous by write (providers that order sends after writes, FI_ORDER_SAW): an RTS
//    {len, cookie}; the receiver registers min(len, its buffer) of the user buffer for remote
//    writes and answers CTS {accepted length, address, key} on a control tag; the sender
//    fi_writes that many bytes and sends FIN {cookie} right behind them, which the receiver
//    completes on (the ordering guarantees the data landed first);
//  - rendezvous by read (otherwise): an RTS {len, address, key, cookie}; the receiver fi_reads
//    min(len, its buffer) straight into the user buffer, then answers FIN {cookie, status},
//    which completes the send.
// Either way the data moves once, between the two user buffers.
// Every message on a data tag starts with the receiving connection's slot as its sender
// addressed it (byte 3), which the receiver checks against its own (see tags, above).
constexpr size_t kMsgHeader = 16;
constexpr size_t kRtsSize = 40;
constexpr size_t kFinSize = 16;
constexpr size_t kCtsSize = 40;
constexpr size_t kAnswerOffset = 64;   // where a rendezvous' CTS or FIN lands in a bounce buffer
constexpr size_t kFinOutOffset = 128;  // where a writing sender builds its FIN

enum class MsgType : uint8_t { kEager = 1, kRtsRead = 2, kRtsWrite = 3 };

struct MsgHeader {
  MsgType type = MsgType::kEager;
  uint8_t slot = 0;     // the receiver's slot the sender addressed
  uint64_t len = 0;     // payload length (eager) or the whole message's length (RTS)
  uint64_t raddr = 0;   // read RTS: address or offset of the sender's buffer for fi_read
  uint64_t key = 0;     // read RTS: the key of its registration
  uint64_t cookie = 0;  // RTS: the CTS/FIN control-tag id
};
void encode_eager_header(uint8_t* out, uint64_t len, uint8_t slot);  // kMsgHeader bytes
void encode_rts(uint8_t* out, const MsgHeader& h);                   // kRtsSize bytes
// Parses what a data receive got (n bytes). Eager payloads follow the header.
bool decode_msg(const uint8_t* p, size_t n, MsgHeader* h);

void encode_fin(uint8_t* out, uint64_t cookie, uint8_t status);  // kFinSize bytes
bool decode_fin(const uint8_t* p, size_t n, uint64_t* cookie, uint8_t* status);

// The receiver's answer to a write RTS: write `len` bytes (0: none) at raddr with key.
struct Cts {
  uint64_t cookie = 0;
  uint64_t len = 0;
  uint64_t raddr = 0;
  uint64_t key = 0;
  uint8_t status = 0;  // 0: go ahead; else the receiver could not take the data
};
void encode_cts(uint8_t* out, const Cts& c);  // kCtsSize bytes
bool decode_cts(const uint8_t* p, size_t n, Cts* c);

// ---- connection handle (listen -> core -> connect) -----------------------------------------
constexpr size_t kMaxDeviceName = 15;
constexpr size_t kMaxAddr = 200;  // fi_getname of an RDM endpoint; sockaddr_in6 is 28, IB 48

struct ConnHandle {
  std::string device;         // the listener's device name ("tcp")
  std::vector<uint8_t> addr;  // the listener's endpoint address (fi_getname)
  uint64_t listener_id = 0;   // 56 significant bits
};
size_t encode_handle(const ConnHandle& h, uint8_t* out, size_t cap);  // 0 when it does not fit
bool decode_handle(const uint8_t* p, size_t len, ConnHandle* h, std::string* why);

// ---- hello (connector -> listener) and ack (listener -> connector) --------------------------
// Both carry the sender's liveness word ({address, key} of 8 readable bytes, 0/0 without RMA):
// a peer with operations waiting reads it now and then, and a read that fails with a
// connection error means the peer is gone (RDM has no connection to watch).
struct Hello {
  uint64_t listener_id = 0;
  uint64_t nonce = 0;  // the ack's tag id
  uint8_t slot = 0;    // the connector's receive slot
  uint64_t probe_addr = 0;
  uint64_t probe_key = 0;
  std::vector<uint8_t> addr;  // the connector's endpoint address
};
constexpr size_t kHelloMax = 40 + kMaxAddr;
std::vector<uint8_t> encode_hello(const Hello& h);
bool decode_hello(const uint8_t* p, size_t len, Hello* h);

enum class AckStatus : uint8_t { kOk = 0, kNoSlot = 1, kBusy = 2 };
struct Ack {
  uint64_t listener_id = 0;
  uint64_t nonce = 0;
  uint8_t slot = 0;  // the listener's receive slot
  AckStatus status = AckStatus::kOk;
  uint64_t probe_addr = 0;
  uint64_t probe_key = 0;
};
constexpr size_t kAckSize = 40;
std::vector<uint8_t> encode_ack(const Ack& a);
bool decode_ack(const uint8_t* p, size_t len, Ack* a);

// ---- packed remote key (reg_mr -> core -> peer's rkey_unpack) -------------------------------
// The region as the owner registered it (virtual base, size, HMC_NET_ACCESS_* bits) and, per
// device it was registered with, the provider key and how remote addresses are formed.
struct RkeyEntry {
  std::string device;
  uint64_t key = 0;
  bool virt_addr = false;  // FI_MR_VIRT_ADDR: address = virtual address, else offset from base
  bool readable = false;   // registered with FI_REMOTE_READ (the read completion mode needs it)
};
struct PackedRkey {
  uint64_t base = 0;
  uint64_t size = 0;
  uint32_t access = 0;
  std::vector<RkeyEntry> entries;
};
constexpr size_t kRkeyHeader = 24;
constexpr size_t kRkeyEntry = 32;
size_t encode_rkey(const PackedRkey& k, uint8_t* out, size_t cap);  // 0 when it does not fit
bool decode_rkey(const uint8_t* p, size_t len, PackedRkey* k, std::string* why);

}  // namespace hmc::ofi
