// Everything the plugin puts on a wire, and its checks: the connection handle (listen ->
// connect, carried by the core), the setup messages on the connection's TCP side channel, the
// header of every message on the data path, and the packed remote key. Decoders never trust
// their input: lengths, magic numbers, versions and ranges are checked, and a rejected blob
// comes with the reason.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hmc::ibverbs {

constexpr uint32_t kWireVersion = 4;  // 2: staged messages; 3: rails; 4: rendezvous key segments

// listen's handle: where the listener's side channel is, and which listener.
struct ConnHandle {
  uint64_t listener_id = 0;
  sockaddr_storage addr{};  // AF_INET or AF_INET6, port set
  socklen_t addr_len = 0;
};
constexpr size_t kHandleSize = 4 + 4 + 8 + 2 + 2 + 16;
size_t encode_handle(const ConnHandle& h, uint8_t* out);  // writes kHandleSize bytes
bool decode_handle(const uint8_t* p, size_t len, ConnHandle* h, std::string* why);

// One side's queue pairs and port, exchanged at setup (HELLO from the connector, ACCEPT back).
struct QpInfo {
  uint64_t listener_id = 0;  // HELLO: the listener it is for
  uint32_t msg_qpn = 0;      // messages, rendezvous reads
  uint32_t rma_qpn = 0;      // put/get (reset on its own after a refused access)
  uint32_t msg_psn = 0;
  uint32_t rma_psn = 0;
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  uint8_t mtu = 0;         // enum ibv_mtu
  uint8_t link_layer = 0;  // IBV_LINK_LAYER_*
  uint32_t credits = 0;    // eager messages the sender may have in flight towards this side
  uint32_t eager = 0;      // payload bytes of this side's receive buffers
};
constexpr size_t kQpInfoSize = 8 + 4 * 4 + 2 + 16 + 1 + 1 + 4 + 4;
void encode_qp_info(const QpInfo& q, uint8_t* out);
bool decode_qp_info(const uint8_t* p, size_t len, QpInfo* q, std::string* why);

// Side-channel frames after setup: {type u32, length u32, payload}.
enum class SideFrame : uint32_t {
  kHello = 1,     // QpInfo
  kAccept = 2,    // QpInfo
  kReady = 3,     // empty: the connector's queue pairs are ready to receive
  kRmaReset = 4,  // RmaReset: replace the put/get queue pair after an error broke it
  // Rails (puts and gets striped over more ports): the connector's Rails once ready, the
  // listener's (at most as many, its queue pairs at RTS) back, then kRailsReady (empty).
  kRails = 5,
  kRailsReady = 6,
};

// The queue pairs of an endpoint's extra rails, in the order of the side's rail ports.
constexpr size_t kMaxRails = 16;
struct RailInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  uint8_t mtu = 0;
};
std::vector<uint8_t> encode_rails(const std::vector<RailInfo>& rails);
bool decode_rails(const uint8_t* p, size_t len, std::vector<RailInfo>* rails, std::string* why);
struct RmaReset {
  uint32_t epoch = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;
};
constexpr size_t kRmaResetSize = 12;
void encode_rma_reset(const RmaReset& r, uint8_t* out);
bool decode_rma_reset(const uint8_t* p, size_t len, RmaReset* r);

// The header of every message sent on a queue pair (into the peer's receive buffers).
enum class MsgType : uint8_t {
  kEager = 1,  // header + len payload bytes
  // A rendezvous: len bytes at addr under rkey, read them, answer kFin{cookie}. key_len != 0: the
  // rkey covers the first key_len bytes only, the keys of the rest follow as kRndvKey messages.
  // The payload (kRts, kRndvKey): the same bytes' keys on the sender's rails, 4 bytes each.
  kRts = 2,
  kFin = 3,     // the rendezvous with cookie was read
  kCredit = 4,  // only returns credits (takes no credit itself)
  kNotify = 5,  // put notification: value in len, after the put's data
  // A message whose buffer could not be registered: len bytes, sent as the kFrag messages that
  // follow it in order (cookie: the sender's request, the same in each fragment).
  kStagedRts = 6,
  kFrag = 7,  // len payload bytes of the staged message cookie, at offset addr
  // The key of the next len bytes of rendezvous cookie, from offset addr (each starts where the
  // previous one ended); len 0: no more keys, the sender could not register the rest.
  kRndvKey = 8,
  // The reader of rendezvous cookie has read its first addr bytes (at the end of a key's bytes):
  // the sender may release them and register further ahead.
  kRndvAck = 9,
};
struct MsgHeader {
  uint8_t type = 0;
  uint8_t pad[3] = {};
  uint32_t freed = 0;  // receive buffers the sender freed of the peer's messages, cumulative
  uint64_t tag = 0;
  uint64_t len = 0;
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t key_len = 0;  // kRts: bytes rkey covers (0: all of len)
  uint64_t cookie = 0;
};
static_assert(sizeof(MsgHeader) == 48, "MsgHeader is 48 bytes on the wire");
// The header of a received message of len bytes (header and payload) into a receive buffer of
// eager payload bytes, checked for what it says on its own (type, lengths, ranges); what needs
// the connection's state (cookies, order) the endpoint checks.
// rail_keys: a kRts's or kRndvKey's keys on the sender's rails (none for other types).
bool decode_message(const uint8_t* p, size_t len, size_t eager, MsgHeader* h,
                    std::vector<uint32_t>* rail_keys, std::string* why);
// Messages that take a credit (a receive buffer the peer must have granted).
inline bool takes_credit(MsgType t) {
  return t != MsgType::kCredit;
}

// The packed remote key of a registration with one device.
struct PackedKey {
  uint64_t base = 0;
  uint64_t len = 0;
  uint32_t rkey = 0;
  uint32_t access = 0;               // HMC_NET_ACCESS_*
  std::vector<uint32_t> rail_rkeys;  // the same memory on the owner's rail ports, in their order
};
// Without rails; with n, a count and n keys more.
constexpr size_t kPackedKeySize = 4 + 4 + 8 + 8 + 4 + 4;
size_t encode_key(const PackedKey& k, uint8_t* out);
bool decode_key(const uint8_t* p, size_t len, PackedKey* k, std::string* why);

}  // namespace hmc::ibverbs
