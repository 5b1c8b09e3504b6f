// One connection to one peer (hmc_net_ep_t) and the protocol that runs over it:
//  - tag matching: posted receives in post order, unexpected messages queued per tag (eager data
//    buffered, rendezvous requests kept until a receive is posted);
//  - eager messages inline on the control channel (tcp stream 0, or the shm ring);
//  - rendezvous for larger ones: RTS, then either the receiver pulls the bytes itself with
//    cross-memory attach and answers FIN (shm), or it answers CTS and the sender streams DATA
//    chunks over all streams straight into the receive buffer (tcp, and shm without CMA);
//  - one-sided put/get, checked by the owner of the memory before any byte moves; vectored ones
//    as one message per kVecMaxPieces pieces, which the owner serves with one stream of DATA
//    (tcp) or a few cross-memory copies of many iovecs each (shm);
//  - peer death: every pending request ends with HMC_PLUGIN_ERR_PEER_LOST.
//
// Control messages keep their send order because they all travel one ordered channel; bulk DATA
// chunks carry {sink, offset, length} and may take any stream.
#pragma once

#include <sys/types.h>

#include <cstdarg>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "handle.h"
#include "put_notes.h"
#include "request.h"
#include "ring.h"
#include "stream.h"
#include "util.h"
#include "wire.h"

namespace hmc::hoststage {

class Context;

class Endpoint {
 public:
  enum class State : uint8_t { kConnecting, kReady, kFailed };

  // Keeps the endpoint's resources alive while a handler runs: fail() inside a handler only
  // marks the endpoint, and the last Busy to leave tears the sockets and tables down.
  class Busy {
   public:
    explicit Busy(Endpoint& ep) : ep_(ep) { ++ep_.busy_; }
    ~Busy() {
      if (--ep_.busy_ == 0 && ep_.teardown_pending_) ep_.teardown();
    }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    Endpoint& ep_;
  };

  Endpoint(Context& ctx, DevKind dev);
  ~Endpoint();  // releases every request and resource without blocking
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // --- establishment (connect.cpp) ---
  // Connector side: starts dialling the peer named by handle. Errors the caller made (or local
  // resource failures) are returned; errors reaching the peer show up through ready_status().
  hmc_plugin_status_t dial(const ConnHandle& h);
  // Acceptor side: the listener verified every stream's hello; sends the accept and becomes
  // ready. For shm, segment/peer_event/peer_pid come from the connector's hello.
  void start_accepted_tcp(std::vector<Fd> socks, const Hello& peer);
  void start_accepted_shm(Fd sock, Mapping segment, Fd peer_event, pid_t peer_pid,
                          const Hello& peer);
  void on_dial_event(int index, uint32_t events);
  // SUCCESS, IN_PROGRESS, or the failure status (for ep_ready).
  hmc_plugin_status_t ready_status();
  void check_deadline(uint64_t now_ns);

  // --- operations (entry points; arguments already validated) ---
  hmc_plugin_status_t post_send(const void* buf, size_t len, uint64_t tag, Request** out);
  hmc_plugin_status_t post_recv(void* buf, size_t len, uint64_t tag, Request** out);
  // notify: the put carries `value` to the target's notify_poll (iput_notify).
  hmc_plugin_status_t post_put(const void* buf, size_t len, uint64_t raddr, uint64_t key,
                               bool notify, uint64_t value, Request** out);
  // The next notification of a put that landed here, in the order of the puts (notify_poll).
  bool poll_notification(uint64_t* value) { return notes_.poll(value); }
  hmc_plugin_status_t post_get(void* buf, size_t len, uint64_t raddr, uint64_t key, Request** out);
  // Vectored put/get of the pieces already in vec (aux: each piece's local bytes), against key.
  // vec is swapped into the request.
  hmc_plugin_status_t post_vec(bool put, std::vector<VecPieceWire>* vec, uint64_t key,
                               Request** out);
  // Where the entry point gathers a vectored request's pieces for post_vec, which swaps them
  // into the request (the lists' storage goes round between requests, not reallocated).
  std::vector<VecPieceWire>& vec_scratch() { return vec_scratch_; }
  hmc_plugin_status_t cancel(Request* r);
  void release(Request* r);  // test reported r done

  // --- driven by the context ---
  void progress_shm();       // ring, cross-memory copies, ring backlog
  bool socket_busy() const;  // sockets need polling on every progress call
  void arm_flags();          // shm: ask the peer to signal before the core sleeps
  void disarm_flags();
  bool has_unsignalled_work();

  // --- used by streams ---
  void on_msg(const WireHdr& h, const uint8_t* payload);
  bool next_chunk(OutFrame* f);
  bool expecting_bulk() const { return !sinks_.empty(); }
  bool data_begin(const WireHdr& h);
  // Where the next len bytes of a DATA payload go, from offset off of piece `piece` (a vectored
  // sink's payload runs on across its pieces; other sinks have piece 0): up to max iovecs,
  // their count, 0 when the bytes are to be dropped (the transfer ended or was refused).
  int data_iov(uint64_t sink, uint64_t piece, uint64_t off, uint64_t len, iovec* iov, int max);
  // Moves (piece, off) on by n payload bytes.
  void data_advance(uint64_t sink, uint64_t* piece, uint64_t* off, uint64_t n);
  void data_end(uint64_t sink, uint64_t len);
  void on_frame_written(const OutFrame& f);
  void on_stream_eof(Stream& s);
  void on_stream_error(const Stream& s, int err);
  void protocol_error(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

  Context& ctx() { return ctx_; }
  DevKind dev() const { return dev_; }
  State state() const { return state_; }
  bool failed() const { return state_ == State::kFailed; }
  bool ready() const { return state_ == State::kReady; }
  const char* name() const { return name_.c_str(); }
  // Ends every pending request with st and closes the connection (deferred while busy).
  void fail(hmc_plugin_status_t st, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

 private:
  struct Unexpected {
    bool rts = false;
    uint64_t size = 0;
    uint64_t sender_id = 0;  // rts
    uint64_t src = 0;        // rts on shm: the sender's buffer
    std::vector<uint8_t> data;
  };
  enum class SinkKind : uint8_t { kRecv, kGet, kPutTarget, kGetV, kPutVTarget };
  // Where DATA chunks for one bulk transfer land.
  struct Sink {
    SinkKind kind;
    uint8_t* dst;
    uint64_t len;
    uint64_t got;
    Request* req;     // kRecv, kGet
    uint64_t key;     // kPutTarget: region re-checked before every chunk
    uint64_t put_id;  // kPutTarget: initiator's request, for the ack
    bool valid;       // kPutTarget: false once the region went away (data then discarded)
    uint64_t note = PutNotes::kNone;  // kPutTarget: the put's notification slot
    std::vector<VecSpan> vec{};       // kPutVTarget: where the pieces land (kGetV: req->vec)
  };
  // Chunks this side still has to stream.
  struct BulkJob {
    Request* req;  // send or put being streamed; nullptr when answering a get
    uint64_t sink;
    const uint8_t* base;
    uint64_t total;
    uint64_t next;
    uint64_t key;  // answering a get: region re-checked before every chunk
    uint64_t get_id;
    // Vectored: the pieces streamed (the job's base unused; its frames hold them too), the next
    // one, and the index the first carries in its DATA frames. Answering a get, the last chunk
    // is followed by the VecAck to get_id.
    std::shared_ptr<const std::vector<VecSpan>> vec{};
    size_t piece = 0;
    uint64_t tag_base = 0;
    uint64_t streamed = 0;
    bool refused = false;  // the region went away while answering a get
  };
  // A cross-memory copy this side performs (shm).
  struct CmaJob {
    enum Kind : uint8_t { kRecvPull, kPutPull, kGetPush, kPutVPull, kGetVPush } kind;
    Request* req;  // kRecvPull
    uint8_t* local;
    uint64_t remote;
    uint64_t len;
    uint64_t done;
    uint64_t peer_id;                 // sender's request (recv) or initiator's request (put/get)
    uint64_t key;                     // put/get: owner's region, re-checked before every step
    uint64_t note = PutNotes::kNone;  // kPutPull: the put's notification slot
    // kPutVPull, kGetVPush: the pieces (local/remote/len unused), the next one and the offset
    // in it, and the index of the first in the initiator's request.
    std::vector<VecSpan> vec{};
    size_t piece = 0;
    uint64_t first = 0;
  };

  friend class Busy;

  // establishment
  void become_ready();
  void advance_dial();
  void send_accept_tcp();
  void attach_shm(Mapping segment, size_t ring_bytes, bool connector, Fd peer_event,
                  pid_t peer_pid);
  void set_limits(const Hello& peer);
  void teardown();
  void vfail(hmc_plugin_status_t st, const char* fmt, va_list ap);

  // requests
  Request* new_request(ReqKind kind, const void* buf, size_t len, uint64_t tag);
  void track(Request* r);
  void complete(Request* r, hmc_plugin_status_t st, size_t bytes);
  Request* find_tracked(uint64_t id, ReqKind kind);
  void link_posted(Request* r);
  void unlink_posted(Request* r);
  Request* match_posted(uint64_t tag);
  hmc_plugin_status_t check_postable() const;

  // control channel
  void send_ctrl(const WireHdr& h, const void* payload, size_t len, Request* done_req);
  // The same with a payload the frame owns until it is written.
  void send_ctrl_owned(const WireHdr& h, std::shared_ptr<const std::vector<uint8_t>> payload);
  void flush_ring_backlog();
  void signal_peer();
  void poll_ring();
  void kick_bulk();
  void add_bulk(const BulkJob& j);

  // protocol
  void start_rndv_recv(Request* r, uint64_t size, uint64_t sender_id, uint64_t src);
  void on_eager(const WireHdr& h, const uint8_t* payload);
  void on_rts(const WireHdr& h);
  void on_cts(const WireHdr& h);
  void on_fin(const WireHdr& h);
  void on_put(const WireHdr& h, const uint8_t* payload);
  void on_put_cts(const WireHdr& h);
  void on_put_ack(const WireHdr& h);
  void on_get(const WireHdr& h);
  void on_get_resp(const WireHdr& h, const uint8_t* payload);
  void on_vec(const WireHdr& h, const uint8_t* payload);
  void on_vec_cts(const WireHdr& h);
  void on_vec_ack(const WireHdr& h, const uint8_t* payload);
  // Ends a vectored request once every message was answered and its DATA arrived.
  void vec_try_finish(Request* r);
  void vec_ack(uint64_t id, hmc_plugin_status_t st, uint64_t streamed);
  uint8_t* data_dst(uint64_t sink, uint64_t off, uint64_t len);
  // A vectored sink's pieces: their count, and piece i's bytes here and length.
  static size_t sink_pieces(const Sink& s);
  static uint8_t* sink_piece(const Sink& s, size_t i, uint64_t* len);
  bool next_vec_chunk(BulkJob& j, size_t chunk, OutFrame* f);
  void finish_sink(uint64_t id);
  void reply(uint8_t type, uint64_t id, hmc_plugin_status_t st);

  // cross-memory attach (cma.cpp)
  void run_cma();
  // One step of a vectored job: many iovecs in one system call. False when it ended.
  bool run_cma_vec(CmaJob& j, size_t* budget);
  void finish_cma(const CmaJob& j, hmc_plugin_status_t local_st, hmc_plugin_status_t peer_st);
  void cma_fallback(const CmaJob& j, int err);

  Context& ctx_;
  DevKind dev_;
  State state_ = State::kConnecting;
  hmc_plugin_status_t fail_status_ = HMC_PLUGIN_SUCCESS;
  std::string name_;  // for log messages: "tcp peer 127.0.0.1:4242"
  int busy_ = 0;
  bool teardown_pending_ = false;
  bool torn_down_ = false;
  bool closing_ = false;  // draining the other streams after the peer closed one

  // establishment (connector)
  struct DialSock {
    Fd fd;
    uint64_t token = 0;
    bool connected = false;
    bool hello_sent = false;
    Hello ack{};
    size_t ack_got = 0;
    std::vector<Fd> ack_fds;
  };
  std::vector<DialSock> dial_;
  std::vector<uint8_t> dial_target_;  // sockaddr of the shm peer, for connect retries
  uint16_t dial_nstreams_ = 0;
  uint64_t nonce_ = 0;
  uint64_t deadline_ns_ = 0;
  Mapping pending_segment_;  // connector's shm segment until ready
  Fd pending_memfd_;

  std::vector<std::unique_ptr<Stream>> streams_;
  size_t inline_limit_ = 0;   // largest payload sent inline (min of both sides' limits)
  size_t rx_inline_max_ = 0;  // largest inline payload accepted

  // shm
  Mapping segment_;
  RingTx tx_;
  RingRx rx_;
  Fd peer_event_;
  pid_t peer_pid_ = 0;
  bool cma_ok_ = false;
  std::deque<OutFrame> ring_backlog_;

  // protocol state
  uint64_t next_id_ = 1;
  Request* reqs_ = nullptr;
  Request* posted_head_ = nullptr;
  Request* posted_tail_ = nullptr;
  std::unordered_map<uint64_t, std::deque<Unexpected>> unexpected_;
  size_t unexpected_count_ = 0;
  std::unordered_map<uint64_t, Request*> tracked_;
  std::unordered_map<uint64_t, Sink> sinks_;
  std::deque<BulkJob> bulk_;
  std::deque<CmaJob> cma_;
  PutNotes notes_;
  std::vector<VecPieceWire> vec_scratch_;
};

}  // namespace hmc::hoststage
