// One operation the plugin posts to libfabric: a tagged send or receive, a put or get, or one
// of the plugin's own control messages (hello, ack, FIN). The fi_context2 libfabric needs
// (FI_CONTEXT, FI_CONTEXT2 modes) lives inside the request, so nothing is allocated per
// completion.
//
// A request is made of parts posted in order (Device::post_part): a rendezvous send is a FIN
// receive plus the RTS send; a put completed by a read is the write plus the read. A receive
// has two phases: matching (into a bounce buffer), then, for a rendezvous, reading the sender's
// data into the user buffer.
//
// Lifetime: the plugin allocates every request and frees it exactly once, in Device::release:
//  - a request handed to the core is freed when test() reports it ended (or at close/finalize);
//  - a request still inside the provider when its endpoint closes becomes an orphan owned by
//    its device, freed when its completions arrive (or when the device's endpoint is closed at
//    finalize, after which libfabric touches no context any more).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>

#include "hmc/plugin/net.h"

namespace hmc::ofi {

class Endpoint;
class Listener;
struct CachedMr;
struct Request;

enum class ReqKind : uint8_t { kSend, kRecv, kPut, kGet, kCtrlSend, kHelloRecv, kAckRecv, kProbe };

// What libfabric gets as the operation context. fi_context2 is first, so the op_context pointer
// a completion carries is the OpCtx itself.
struct OpCtx {
  fi_context2 fi;
  Request* owner;
};

// A chunk of the device's bounce pool: registered memory (when the provider needs local
// descriptors) for control messages, eager payloads and data receives.
struct Bounce {
  uint8_t* data = nullptr;
  void* desc = nullptr;
};

// What the caller's registration (reg_mr) says about a local buffer; defaults for none.
struct LocalBuf {
  void* desc = nullptr;  // descriptor on the endpoint's device, or nullptr
  uint32_t iface = HMC_MEM_IFACE_HOST;
  int ordinal = -1;  // vendor device index for device memory
};

// What a send or receive is doing (wire.h has the protocol).
namespace Phase {
constexpr uint8_t kEager = 0;        // send: one message from the bounce buffer
constexpr uint8_t kSendRead = 1;     // send: RTS out, waiting for the reader's FIN
constexpr uint8_t kSendWaitCts = 2;  // send: RTS out, waiting for the CTS
constexpr uint8_t kSendWrite = 3;    // send: writing the data, FIN behind it
constexpr uint8_t kMatch = 0;        // receive: posted, matching into the bounce buffer
constexpr uint8_t kRecvRead = 1;     // receive: reading the sender's data
constexpr uint8_t kRecvWaitFin = 2;  // receive: CTS sent, waiting for the writer's FIN
}  // namespace Phase

struct Request {
  OpCtx op{};   // the main operation
  OpCtx aux{};  // the second one: a rendezvous send's FIN receive, a receive's read, a put's read
  ReqKind kind = ReqKind::kSend;
  uint8_t phase = 0;    // see Phase
  bool native = false;  // plain fi_tsend/fi_trecv of the user buffer (devices without RMA)

  Endpoint* ep = nullptr;        // nullptr: orphan (its endpoint closed) or a listener's hello
  Listener* listener = nullptr;  // kHelloRecv only; nullptr once the listener closed

  // Post parameters, kept so a request queued on -FI_EAGAIN can be posted later.
  void* buf = nullptr;  // the user buffer
  size_t len = 0;
  void* desc = nullptr;                 // its local descriptor (FI_MR_LOCAL), or nullptr
  CachedMr* cached = nullptr;           // the cache entry desc came from, released with the request
  uint32_t iface = HMC_MEM_IFACE_HOST;  // hmc_mem_iface_t of the user buffer
  int ordinal = -1;                     // its vendor device index (device memory)
  fi_addr_t addr = FI_ADDR_UNSPEC;
  uint64_t tag = 0;
  uint64_t remote_addr = 0;    // put/get/rendezvous read: the address or offset to use
  uint64_t key = 0;            // ... and the provider key
  bool trailing_read = false;  // put: follow the write with an ordered 1-byte read
  Bounce bounce;               // control payload, eager message, or a receive's landing area
  size_t bounce_len = 0;       // bytes to send from it, or room to receive into
  fid_mr* own_mr = nullptr;    // rendezvous send: the user buffer registered for the peer's read
  uint64_t cookie = 0;         // rendezvous: pairs the RTS with its FIN
  uint64_t msg_len = 0;        // rendezvous receive: the sender's whole length
  size_t xfer = 0;             // rendezvous: bytes actually moved (min of both lengths)
  size_t read_off = 0;         // rendezvous: start of the piece being read or written

  // State.
  bool queued = false;   // waiting in the device's backlog (not yet in the provider)
  int in_provider = 0;   // parts posted and not completed yet (0..2)
  int posted_parts = 0;  // parts of the current phase posted so far
  bool cancel_requested = false;
  bool orphan = false;  // its endpoint or listener is gone; freed on completion
  bool done = false;
  hmc_plugin_status_t result = HMC_PLUGIN_SUCCESS;
  int first_error = 0;  // positive libfabric error number of the first failed part
  size_t rx_len = 0;    // bytes the provider delivered into the receive buffer
  size_t bytes = 0;     // what test() reports
};

}  // namespace hmc::ofi
