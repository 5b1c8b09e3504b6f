// One net device: an active port of an HCA, with its verbs resources (protection domain,
// completion queue and channel, shared receive queue with its eager buffers, send buffers) and
// the work requests in flight on it. Endpoints on the device post through it; its progress
// polls the completion queue and hands each completion to the endpoint it belongs to.
#pragma once

#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hmc/plugin/net.h"
#include "log.h"
#include "mr_cache.h"
#include "select.h"
#include "verbs_api.h"
#include "wire.h"

namespace hmc::ibverbs {

class Context;
class Endpoint;

// What discovery learned of a port (before any resource is allocated).
struct PortInfo {
  std::string hca;  // "mlx5_0"
  int port = 1;
  std::string name;      // "mlx5_0:1"
  std::string pci_path;  // sysfs path of the PCI function, "" for software devices
  uint64_t guid = 0;     // node GUID (host order)
  ibv_port_attr attr{};
  int gid_index = -1;
  ibv_gid gid{};
  GidType gid_type = GidType::kIb;
  std::vector<GidEntry> gids;  // the non-empty entries of the port's table
  ibv_device_attr dev_attr{};
  bool dmabuf = false;  // ibv_reg_dmabuf_mr answered EBADF to fd -1
  std::string fabric;   // what the core pairs it by (select.h, fabric_of)
  int net_bits = -1;    // the GID's leading bits its network shares (select.h, network_bits)
};

// How a posted work request is accounted for when it completes.
enum class WrKind : uint8_t {
  kMsg,       // a message from a send slot (eager, RTS, FIN, credit, notify)
  kRndvRead,  // one piece of a rendezvous read
  kPut,       // one piece of a put
  kGet,       // one piece of a get
  kProbe,     // a zero-length RDMA WRITE: the peer's HCA must acknowledge it (keepalive)
};

// One operation for a queue pair, kept whole so that it can be posted again on a new queue pair
// (after a refused access broke the put/get one).
struct SendOp {
  WrKind kind = WrKind::kMsg;
  bool rma_qp = false;            // posted on the put/get queue pair
  MsgHeader hdr{};                // kMsg: header (freed is filled in when posted)
  const void* payload = nullptr;  // kMsg: eager payload, hdr.len bytes (copied when posted)
  bool credit_taken = false;
  uint64_t local = 0;  // RDMA: local address
  uint32_t lkey = 0;
  uint32_t len = 0;
  uint64_t remote = 0;  // RDMA: remote address
  uint32_t rkey = 0;
  int reg_access = -1;  // >= 0: register [local, local + len) with this access when posted
  bool bounce = false;  // RDMA: through a bounce buffer (its registration was refused)
  int rail = -1;        // RDMA: on extra rail `rail` of its endpoint (-1: its own port)
  bool chain = false;   // RDMA: a piece that may go in one chain with its neighbours
  uint64_t req_id = 0;  // the request it counts for (0: none)
  // kRts, kRndvKey: the same bytes' keys on the endpoint's rails, sent after the header
  std::array<uint32_t, kMaxRails> rail_keys{};
  uint8_t nrail_keys = 0;
};

struct WrCtx {
  Endpoint* ep = nullptr;
  SendOp op;
  int slot = -1;                // kMsg: send slot
  Registration* reg = nullptr;  // acquired for this work request (reg_access)
  int bounce = -1;              // bounce buffer (op.bounce)
  // The last work request of a chain (post_chain), the only one signaled: the wr_id of the
  // chain's first. Its completion completes those before it too (RC completes in order).
  uint64_t chain_first = 0;
};

// Inline data asked of each queue pair: a message header and a small payload.
constexpr uint32_t kInlineWanted = 256;

// kBusy: no send slot or bounce buffer is free now (post again after a completion).
enum class PostResult { kOk, kQueueError, kRegError, kBusy };

// RDMA pieces whose local buffer cannot be registered go through these registered buffers.
constexpr size_t kBounceSize = size_t{128} << 10;
constexpr size_t kBounceCount = 4;

class Device {
 public:
  Device(Context& ctx, const PortInfo& info);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Allocates the verbs resources. False (logged) when the device cannot be used.
  bool open();

  Context& ctx() { return ctx_; }
  const VerbsApi& api() const;
  const Log& log() const;
  const PortInfo& info() const { return info_; }
  const std::string& name() const { return info_.name; }
  ibv_context* verbs() { return vctx_; }
  ibv_pd* pd() { return pd_; }
  ibv_cq* cq() { return cq_; }
  ibv_srq* srq() { return srq_; }
  int channel_fd() const { return chan_ != nullptr ? chan_->fd : -1; }
  bool ethernet() const { return info_.attr.link_layer == IBV_LINK_LAYER_ETHERNET; }
  size_t eager_limit() const { return eager_; }
  uint32_t credits() const { return credits_; }
  // Largest single RDMA READ/WRITE: HMC_IB_CHUNK within the port's max_msg_sz.
  size_t chunk() const { return chunk_; }

  void fill_props(hmc_net_device_props_t* props) const;
  uint64_t mem_ifaces() const;
  // A queue pair of this device was created with max_inline_data bytes of inline data: messages
  // up to the least of these go inline.
  void note_inline(uint32_t max_inline_data) {
    inline_max_ = std::min(inline_max_, max_inline_data);
  }

  // Endpoints grant credits from the shared receive queue: each new one grows it.
  bool grow_receive_pool();
  void register_qp(uint32_t qpn, Endpoint* ep) { qps_[qpn] = ep; }
  void unregister_qp(uint32_t qpn) { qps_.erase(qpn); }

  // Posts op on qp. kQueueError: the queue pair refused it; kRegError: the local buffer (or, for
  // a bounce op, the bounce pool) could not be registered (*why says why, naming RLIMIT_MEMLOCK
  // where it is the likely cause); kBusy: every send slot or bounce buffer is in use.
  PostResult post(Endpoint* ep, ibv_qp* qp, const SendOp& op, std::string* why);
  // Posts RDMA pieces ops[0, n) (no bounce) on qp in one ibv_post_send, linked, the last one
  // signaled; *posted says how many went (a piece that cannot be registered ends the chain
  // before it: kRegError when it is the first). Each piece still completes on its own for its
  // endpoint (on_send_complete), the unsignaled ones when the last does.
  PostResult post_chain(Endpoint* ep, ibv_qp* qp, const SendOp* ops, size_t n, size_t* posted,
                        std::string* why);
  // Registers memory with this device's protection domain; nullptr with *why on failure.
  ibv_mr* reg(void* addr, size_t len, int access, std::string* why);
  // True the first time only: a refused dma-buf registration is a warning once per device, then
  // debug (each region falls back to staging on its own, and the core logs each region's way).
  bool first_dmabuf_refusal() { return !std::exchange(dmabuf_refused_, true); }
  // The same for device memory registered by pointer (peermem).
  bool first_peermem_refusal() { return !std::exchange(peermem_refused_, true); }
  // Forgets every work request of ep (its queue pairs are gone); returns their send slots.
  void forget(Endpoint* ep);
  // Takes the work requests of ep on qp out of the books, oldest first (to post them again).
  std::vector<SendOp> take(Endpoint* ep, bool rma_qp);
  size_t sends_in_flight() const { return wrs_.size(); }
  bool can_post() const { return wrs_.size() < send_budget_; }
  size_t send_budget() const { return send_budget_; }

  // Polls the completion queue (bounded batches); true when something completed.
  bool poll();
  // Consumes completion channel events and re-arms the queue; false when it reported nothing.
  void drain_channel();
  // Re-arms notification; IN_PROGRESS when completions are waiting.
  hmc_plugin_status_t arm();

 private:
  struct Chunk {
    uint8_t* mem = nullptr;
    size_t bytes = 0;
    ibv_mr* mr = nullptr;
  };
  bool add_chunk(std::vector<Chunk>* chunks, size_t count, int access, std::string* why);
  bool map_chunk(Chunk* c, size_t bytes, int access, std::string* why);
  int take_bounce(std::string* why);
  void release(const WrCtx& w);
  uint8_t* recv_buf(uint64_t id);
  void post_recv(uint64_t id);
  bool add_send_slots(std::string* why);
  // A send slot; -1 when none is free and no more can be registered now.
  int take_slot();
  uint8_t* slot_buf(int slot, uint32_t* lkey);
  void handle(const ibv_wc& wc);

  Context& ctx_;
  PortInfo info_;
  size_t eager_ = 0;  // receive buffer payload
  size_t bufsz_ = 0;  // header + payload, rounded
  uint32_t credits_ = 0;
  size_t chunk_ = 0;
  uint32_t inline_max_ = kInlineWanted;
  std::string link_layer_;  // props.link_layer and props.details (select.h, describe_port)
  std::string details_;
  ibv_context* vctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* chan_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_srq* srq_ = nullptr;
  size_t cq_size_ = 0;
  size_t send_budget_ = 0;
  std::vector<Chunk> recv_chunks_;  // kRecvChunk buffers each
  size_t recv_posted_ = 0;
  std::vector<Chunk> send_chunks_;  // kSendChunk slots each
  Chunk bounce_;                    // kBounceCount x kBounceSize, registered when first needed
  std::vector<int> free_bounce_;
  std::vector<int> free_slots_;
  std::unordered_map<uint32_t, Endpoint*> qps_;
  std::unordered_map<uint64_t, WrCtx> wrs_;
  uint64_t next_wr_ = 1;
  unsigned unacked_events_ = 0;
  bool dmabuf_refused_ = false;
  bool peermem_refused_ = false;
};

}  // namespace hmc::ibverbs
