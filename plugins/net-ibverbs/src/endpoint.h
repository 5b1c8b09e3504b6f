// A connection to one peer (hmc_net_ep_t): two RC queue pairs on one device (messages and
// rendezvous reads on one; put/get on the other, so that an access the peer's HCA refuses breaks
// only that one, which is replaced over the side channel), the side channel itself, credits,
// tag matching, and the requests of this connection.
//
// Messages: eager (header + payload in one SEND into a receive buffer of the peer's shared
// receive queue) up to the peer's eager size, else rendezvous: an RTS {len, addr, rkey, cookie},
// the receiver RDMA-READs min(len, its buffer) straight into the user buffer and answers FIN.
// A rendezvous buffer the plugin registers itself (no caller's mr, no cached registration of the
// whole) is registered a segment at a time: the RTS goes once the first is (its key_len says how
// far its key reaches), each further segment's key follows in a kRndvKey message, at most
// kRndvWindow segments ahead of what the reader acknowledged (kRndvAck at each segment's end),
// and the reader reads each segment once its key is there.
// Credits: each side may have `credits` credit-taking messages unanswered; every header carries
// the count of the peer's messages freed so far, and a CREDIT message (which takes none) returns
// them when half are due and no other message carries them.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "device.h"
#include "hmc/plugin/net.h"
#include "request.h"
#include "sock.h"
#include "wire.h"

namespace hmc::ibverbs {

class Context;
struct MemRegion;

// One piece of a vectored put or get: the caller's buffer (mr checked, or nullptr) and where it
// goes in the remote key's region.
struct RmaPiece {
  void* buf = nullptr;
  size_t len = 0;
  const MemRegion* mr = nullptr;
  uint64_t remote = 0;
};

class Endpoint {
 public:
  enum class Stage {
    kDialing,     // connector: TCP connect in progress
    kHelloSent,   // connector: waiting for ACCEPT
    kAwaitReady,  // acceptor: ACCEPT sent, waiting for READY
    kReady,
    kLost,  // the connection broke (or setup failed): see why_
  };

  explicit Endpoint(Device& dev);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  Device& dev() { return dev_; }
  Context& ctx();
  Stage stage() const { return stage_; }
  int side_fd() const { return side_ ? side_->fd() : -1; }

  // Connector: starts the side-channel connect.
  hmc_plugin_status_t dial(const ConnHandle& h);
  // Acceptor: takes the side channel whose HELLO announced remote, brings the queue pairs up and
  // answers ACCEPT.
  hmc_plugin_status_t answer(std::unique_ptr<SideChannel> side, const QpInfo& remote);
  hmc_plugin_status_t ready_status();

  // Moves setup, side-channel frames, backlogs and credits on.
  void progress();
  // The side channel's fd is readable (or failed).
  void on_side_readable();
  // A completion of one of its work requests / a message in a receive buffer.
  void on_send_complete(const ibv_wc& wc, const WrCtx& w);
  void on_message(const ibv_wc& wc, bool rma_qp, const uint8_t* buf, size_t len);
  bool owns_qp(uint32_t qpn, bool* rma) const;

  hmc_plugin_status_t post_send(const void* buf, size_t len, const MemRegion* mr, uint64_t tag,
                                Request** out);
  hmc_plugin_status_t post_recv(void* buf, size_t len, const MemRegion* mr, uint64_t tag,
                                Request** out);
  hmc_plugin_status_t post_rma(bool put, void* buf, size_t len, const MemRegion* mr,
                               uint64_t remote, const PackedKey& key, const uint64_t* notify,
                               Request** out);
  // iput_v/iget_v: one request for every piece (checked against the key by the caller), each
  // piece cut and striped as post_rma does; small pieces are posted in chains.
  hmc_plugin_status_t post_rma_v(bool put, const std::vector<RmaPiece>& pieces,
                                 const PackedKey& key, Request** out);
  hmc_plugin_status_t notify_poll(uint64_t* value);
  hmc_plugin_status_t cancel(Request* r);
  // Releases an ended request (test reported it).
  void retire(Request* r);
  bool has_work() const;

  void lose(const std::string& why);

 private:
  Request* new_request(ReqKind kind);
  void finish(Request* r, hmc_plugin_status_t st, size_t bytes);
  bool create_qps();
  bool connect_qp(ibv_qp* qp, uint32_t remote_qpn, uint32_t remote_psn, uint32_t local_psn);
  bool replace_rma_qp();
  void start_rma_reset();
  void on_frame(const Frame& f);
  void queue(SendOp op);
  void pump();
  void deliver(Request* r, const MsgHeader& h, const uint8_t* payload);
  void start_read(Request* r, const MsgHeader& rts, const std::vector<uint32_t>& rail_keys);
  // Segmented rendezvous. Reader: the next len bytes of r's message are readable under rkey;
  // r ends (FIN) once every byte it wants was read, or the sender said it has no more keys.
  // With the sender's keys of them on every rail (rails up), the reads of a segment of two
  // pieces or more are striped over the port and the rails by port speed, like a put's.
  void add_keys(Request* r, size_t len, uint32_t rkey, const std::vector<uint32_t>& rail_keys);
  void end_read_if_done(Request* r);
  void on_rndv_key(const MsgHeader& h, const std::vector<uint32_t>& rail_keys);
  // A piece of r's reads completed: acknowledges the segments wholly read, oldest first.
  void note_read(Request* r, const SendOp& op);
  // Sender: registers the next segment of one send whose window allows it (one registration
  // per call: a large one takes a while, progress stays responsive), announcing its key.
  void announce_segments();
  void on_rndv_ack(const MsgHeader& h);
  void end_send(Request* r);
  // Sender, rails up: [addr, addr + len) registered on every rail too (kept in r->seg_regs until
  // the reader acknowledged end), their keys in op; none where a rail refuses.
  void add_rail_keys(Request* r, void* addr, size_t len, size_t end, SendOp* op);
  size_t rndv_segment() const;
  // Striping: of the port (0) and the rails (i: rails_[i - 1]), the one given the fewest bytes
  // relative to its speed; given has rails_.size() + 1 entries.
  size_t least_given(const std::vector<uint64_t>& given) const;
  // Queues the pieces of one put or get of [buf, buf + len) to remote for request r (post_rma's
  // cutting and striping); true when striped over the rails. chain: pieces small enough go in
  // chains (pump_chained).
  bool queue_rma(Request* r, bool put, uint8_t* buf, size_t len, const MemRegion* mr,
                 uint64_t remote, const PackedKey& key, bool chain);
  // Posts the chained pieces at the front of the put/get backlog, several work requests per
  // ibv_post_send; false when the peer was lost.
  bool pump_chained();
  void maybe_return_credits();
  // The RDMA piece at the front of backlog q could not be registered (why): it goes through the
  // device's bounce buffers instead.
  void stage_through_bounce(std::deque<SendOp>& backlog, const std::string& why);
  // Rails: the connector offers its rails once ready; each side answers the other's frame.
  void start_rails();
  void on_rails(const Frame& f);
  void drop_rails();
  void pump_rails();
  bool bring_up(Device& d, ibv_qp* qp, uint32_t rqpn, uint32_t rpsn, const uint8_t* rgid,
                uint16_t rlid, uint8_t rmtu, uint32_t lpsn);
  // A message whose buffer could not be registered (why): kStagedRts and kFrag messages.
  void queue_staged_send(Request* r, const void* buf, size_t len, const std::string& why);
  void on_fragment(const MsgHeader& h, const uint8_t* payload);
  // The local key for [buf, buf + len) from mr, or a registration made when posted (access).
  void local_key(const void* buf, size_t len, const MemRegion* mr, int access, SendOp* op);
  int32_t send_credits() const;
  // Keepalive: with requests pending and nothing of ours in flight on the message queue pair
  // for a while, a probe the peer's HCA must acknowledge, so that a peer gone silent (a link
  // down, a host gone) fails its retries and is lost within the host's timeout.
  void maybe_probe();
  // Counts a work request posted on queue pair q (0 messages, 1 put/get).
  void posted(int q);
  // Loses the peer when a queue pair has had work requests in flight and no completion for half
  // of the host's timeout; true then.
  bool stalled();

  Device& dev_;
  Stage stage_ = Stage::kDialing;
  std::string why_;
  uint64_t deadline_ns_ = 0;
  uint64_t listener_id_ = 0;
  std::unique_ptr<SideChannel> side_;
  ibv_qp* msg_qp_ = nullptr;
  ibv_qp* rma_qp_ = nullptr;
  QpInfo local_{}, remote_{};
  // put/get queue pair replacement after a refused access
  uint32_t rma_epoch_ = 0;
  bool rma_resetting_ = false;

  // credits (mod 2^32 counters)
  uint32_t sent_credited_ = 0;  // credit-taking messages posted
  uint32_t peer_freed_ = 0;     // of those, freed by the peer (its latest header)
  uint32_t freed_ = 0;          // the peer's credit-taking messages we freed
  uint32_t reported_ = 0;       // freed_ as last sent in a header

  // Extra ports large puts, gets and rendezvous reads are striped over (Context::rails_of), one
  // queue pair each.
  struct Rail {
    Device* dev = nullptr;
    ibv_qp* qp = nullptr;
    RailInfo local{}, remote{};
    std::deque<SendOp> backlog;
    int in_flight = 0;
    uint64_t last_completion_ns = 0;
    uint64_t weight = 1;  // port speed
  };
  std::vector<Rail> rails_;
  bool rails_up_ = false;

  std::deque<SendOp> backlog_[2];  // [0] message queue pair, [1] put/get queue pair
  int in_flight_[2] = {0, 0};
  uint64_t last_probe_ns_ = 0;
  uint64_t last_completion_ns_[2] = {0, 0};  // or when the first of those in flight was posted
  bool staged_logged_[2] = {false, false};   // the first refusal logged: messages, RDMA pieces

  struct Unexpected {
    MsgHeader hdr;
    std::vector<uint8_t> data;        // eager payload; a staged message's fragments so far
    std::vector<uint32_t> rail_keys;  // a rendezvous's keys on the sender's rails
    // a segmented rendezvous: the kRndvKey messages so far, with their rail keys
    std::vector<std::pair<MsgHeader, std::vector<uint32_t>>> keys;
    size_t keyed = 0;  // and the bytes they and the RTS cover
    bool whole() const {
      return hdr.type == static_cast<uint8_t>(MsgType::kEager) ||
             (hdr.type == static_cast<uint8_t>(MsgType::kStagedRts) && data.size() == hdr.len);
    }
  };
  std::deque<Request*> posted_;  // receives in posting order
  std::list<Unexpected> unexpected_;
  // Staged messages whose fragments are still arriving, by the sender's cookie.
  std::unordered_map<uint64_t, Request*> staged_recvs_;
  std::unordered_map<uint64_t, Unexpected*> staged_unexpected_;
  // Segmented rendezvous by the sender's cookie: receives reading them, announcements not yet
  // matched; and our sends with segments still to register, in posting order.
  std::unordered_map<uint64_t, Request*> rndv_recvs_;
  std::unordered_map<uint64_t, Unexpected*> rndv_unexpected_;
  std::deque<uint64_t> keying_;
  std::deque<uint64_t> notifications_;
  std::unordered_map<uint64_t, std::unique_ptr<Request>> reqs_;
};

}  // namespace hmc::ibverbs
