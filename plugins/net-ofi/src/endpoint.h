// One connection to a peer: an address-vector entry on the device's RDM endpoint, the receive
// slot this side chose and the one the peer chose (wire.h), and the requests posted on it.
//
// Establishment: the connector inserts the listener's address, posts a receive for the ack,
// and sends a hello carrying its own address and receive slot; the listener inserts the
// connector's address, picks its slot and answers with the ack. The listener's endpoint is
// ready when the hello arrived, the connector's when the ack did, so neither side sends data
// before the other has the address in its AV.
//
// A peer is lost when an operation towards it fails with a connection error: receives still
// pending are cancelled and end with PEER_LOST, later posts fail with it. RDM has no
// connection to watch, so receives from a peer that died silently stay pending until close():
// the core notices through its own control channel and closes the endpoint.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_set>
#include <vector>

#include "device.h"
#include "hmc/plugin/net.h"
#include "request.h"
#include "wire.h"

namespace hmc::ofi {

struct RemoteKey;

class Endpoint {
 public:
  explicit Endpoint(Device& dev) : dev_(dev) {}
  ~Endpoint() { close(false); }
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  Device& dev() const { return dev_; }
  bool lost() const { return lost_; }
  // The slot this side receives on (wire.h); -1 before the connection is made.
  int my_slot() const { return my_slot_; }

  // Posts the provider refused for now (owned by the device's posting logic), in post order:
  // receives and sends wait apart, so that receives waiting for room in the provider's
  // receive queue never hold up sends (the peer's messages, which free that room, may wait
  // for ours), nor sends the receives. stall_since_ns: since when the head of the send queue
  // has been refused with -FI_EAGAIN (0: it is not), the sign of an unreachable peer.
  std::deque<Request*>& rx_queue() { return rx_queue_; }
  std::deque<Request*>& tx_queue() { return tx_queue_; }
  bool has_queued() const { return !rx_queue_.empty() || !tx_queue_.empty(); }
  uint64_t stall_since_ns = 0;

  // Connector side: starts establishing towards the listener that made h.
  hmc_plugin_status_t dial(const ConnHandle& h);
  // Listener side: a hello arrived from the peer at av, which receives on peer_slot.
  void adopt(AvEntry* av, int my_slot, int peer_slot, uint64_t probe_addr, uint64_t probe_key) {
    av_ = av;
    my_slot_ = my_slot;
    peer_slot_ = peer_slot;
    probe_addr_ = probe_addr;
    probe_key_ = probe_key;
    state_ = State::kReady;
  }
  // Called now and then by the context: while operations wait on the peer and nothing has
  // completed for a while, reads the peer's liveness word; a read failing with a connection
  // error ends every pending request with PEER_LOST. A live peer is never declared lost for
  // being slow: only a failed read counts.
  void check_liveness(uint64_t now_ns);
  // Sends one of the plugin's own messages to the peer (hello, ack, FIN).
  hmc_plugin_status_t send_ctrl(const std::vector<uint8_t>& payload, uint64_t tag);
  // Answers a rendezvous: the data was read (status 0) or not (FIN), or where to write (CTS).
  void send_fin(uint64_t cookie, uint8_t status);
  void send_cts(const Cts& cts);
  hmc_plugin_status_t ready_status();

  // lb: what the caller's registration says about buf (descriptor, memory kind). Device
  // memory always goes by rendezvous (it cannot be copied through a bounce buffer).
  hmc_plugin_status_t post_send(const void* buf, size_t len, const LocalBuf& lb, uint64_t tag,
                                Request** out);
  hmc_plugin_status_t post_recv(void* buf, size_t len, const LocalBuf& lb, uint64_t tag,
                                Request** out);
  hmc_plugin_status_t post_put(const void* buf, size_t len, const LocalBuf& lb,
                               uint64_t remote_addr, const RemoteKey& k, Request** out);
  hmc_plugin_status_t post_get(void* buf, size_t len, const LocalBuf& lb, uint64_t remote_addr,
                               const RemoteKey& k, Request** out);
  hmc_plugin_status_t cancel(Request* r);
  // Frees a request test() reported as ended.
  void retire(Request* r);

  // Ends the endpoint: requests that ended are freed, pending receives are cancelled, the rest
  // is left to the device until the provider completes it. With drain, waits (bounded) for the
  // cancellations to come back so the provider is quiet towards the peer before it is removed
  // from the address vector.
  void close(bool drain);

  // Called by the device.
  void on_ctrl_sent(Request* r, int err);
  void on_ack(Request* r, int err);
  void on_data_done(Request* r, int err);
  void on_probe(Request* r, int err);
  void lose(const std::string& why);

 private:
  enum class State { kIdle, kConnecting, kReady, kFailed };

  hmc_plugin_status_t usable(const char* what) const;
  // usable(what), and tag below kUserTagLimit (bit 63 is the plugin's own): isend, irecv.
  hmc_plugin_status_t usable_tagged(const char* what, uint64_t tag) const;
  hmc_plugin_status_t submit(Request* r);
  // The end of a post: r, whose preparation ended with st, is released when st is an error,
  // else submitted, and given to the caller in *out once posted.
  hmc_plugin_status_t post_prepared(Request* r, hmc_plugin_status_t st, Request** out);
  void fail(hmc_plugin_status_t st, const std::string& why);
  hmc_plugin_status_t post_rma(ReqKind kind, void* buf, size_t len, const LocalBuf& lb,
                               uint64_t remote_addr, const RemoteKey& k, Request** out);

  Device& dev_;
  State state_ = State::kIdle;
  hmc_plugin_status_t fail_status_ = HMC_PLUGIN_ERR_PEER_LOST;
  std::string fail_reason_;
  bool lost_ = false;
  bool closed_ = false;
  AvEntry* av_ = nullptr;
  int my_slot_ = -1;
  int peer_slot_ = -1;
  uint64_t nonce_ = 0;
  uint64_t listener_id_ = 0;
  uint64_t deadline_ns_ = 0;
  uint64_t probe_addr_ = 0;  // the peer's liveness word
  uint64_t probe_key_ = 0;
  bool probing_ = false;
  uint64_t last_activity_ns_ = 0;
  std::unordered_set<Request*> reqs_;  // every request attached to this endpoint
  std::deque<Request*> rx_queue_;
  std::deque<Request*> tx_queue_;
  uint64_t probe_started_ns_ = 0;
};

}  // namespace hmc::ofi
