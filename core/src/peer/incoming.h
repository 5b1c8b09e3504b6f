// Incoming peers: the connectors on the control plane's listeners, set up concurrently and
// bounded, and the finished peers waiting for hmc_accept.
//
// Every connector accept(2) returns becomes an Arrival (peer/establish.h) with its own deadline;
// drive() advances all of them as far as their sockets allow and never waits on one, so a
// silent, slow or hostile connector costs its own slot and nothing else. It is driven by the
// progress thread, or, without one, by the thread waiting in hmc_accept (and hmc_progress).
//
// Bounds. At most max_pending arrivals are in setup at once; a connector beyond that evicts the
// oldest one still in its hello (else the oldest of all). Oldest, not newest: a real peer
// finishes its hello within a round trip or two, so the connectors that have waited longest are
// the ones least likely to be real, and refusing the newest would let a flood that keeps the
// table full lock every real peer out, which is the failure this bound exists to prevent.
// Peers that finished their setup but that nobody took yet are bounded the same way: while
// max_pending of them wait, no connector is taken from the listeners (the kernel's backlog
// holds them).
//
// Connectors that fail or time out never reach hmc_accept: they are logged (rate-limited, with
// the remote address and the reason) and counted in stats().
//
// Thread-safety: every member may be called from any thread. One thread drives at a time
// (drive() returns at once when another is driving).
#pragma once

#include <poll.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/channel.h"
#include "hmc/hmc.h"
#include "peer/establish.h"
#include "peer/peer.h"

namespace hmc {

// What IncomingPeers needs of the context that owns it.
class IncomingServices {
 public:
  virtual ~IncomingServices() = default;
  // A connector finished its setup. The one place that decides who gets the peer: the context
  // registers it, dispatches what it sent after its setup (extra) and hands it to hmc_accept
  // (IncomingPeers::queue_for_accept).
  virtual void peer_arrived(std::shared_ptr<Peer> peer,
                            std::vector<control::Channel::Message> extra) = 0;
};

class IncomingPeers {
 public:
  struct Settings {
    int unix_listener = -1;
    int tcp_listener = -1;
    int handshake_timeout_ms = 5000;  // HMC_HANDSHAKE_TIMEOUT_MS, at most HMC_TIMEOUT_MS
    size_t max_pending = 128;         // HMC_MAX_PENDING_HANDSHAKES
  };
  struct Stats {
    uint64_t accepted = 0;   // connectors whose setup finished
    uint64_t failed = 0;     // refused or broken: garbage, wrong version, token, closed early
    uint64_t timed_out = 0;  // did not finish their hello or setup in time
    uint64_t dropped = 0;    // evicted to keep max_pending
    uint32_t pending = 0;    // in setup now
    uint32_t waiting = 0;    // finished, not yet taken by hmc_accept
    hmc_status_t last_failure_status = HMC_SUCCESS;
    std::string last_failure;  // who, in which stage, and why
  };

  IncomingPeers(PeerConnector& connector, IncomingServices& services, Settings settings)
      : connector_(connector), services_(services), s_(settings) {}
  ~IncomingPeers();
  IncomingPeers(const IncomingPeers&) = delete;
  IncomingPeers& operator=(const IncomingPeers&) = delete;

  // Takes new connectors from the listeners and advances every arrival; never waits. True when
  // something happened.
  bool drive();
  // Appends the descriptors drive() has work on when they are ready (listeners, arrivals'
  // sockets), and lowers *timeout_ms to the next deadline (to 1 ms while a data path is being
  // set up: plugins are polled, not waited on).
  void add_poll_fds(std::vector<pollfd>* fds, int* timeout_ms);
  // Hands a finished peer to hmc_accept (IncomingServices::peer_arrived calls it).
  void queue_for_accept(std::shared_ptr<Peer> peer);
  // hmc_accept: the first finished peer, waiting until the deadline. With `drive` the calling
  // thread drives the arrivals meanwhile (no progress thread does). HMC_ERR_TIMEOUT when none
  // finished by then.
  hmc_status_t next(uint64_t deadline_ns, bool drive, std::shared_ptr<Peer>* out);
  Stats stats();

 private:
  // A connector that will not become a peer.
  struct Ended {
    // Probe: closed before sending a byte. Listener: accept(2) itself failed (logged, not
    // counted: no connector came of it).
    enum class Kind { Failed, Probe, Dropped, Listener };
    hmc_status_t status;
    std::string reason;  // names the connector
    Kind kind = Kind::Failed;
  };
  using Finished = std::pair<std::shared_ptr<Peer>, std::vector<control::Channel::Message>>;
  // Accepts at most `most` connectors; returns how many.
  size_t take_new_connectors(size_t most, std::vector<Ended>* ended);
  // Ends the oldest arrival still in its hello (else the oldest of all) to make room.
  void evict_one(std::vector<Ended>* ended);
  bool advance_all(std::vector<Ended>* ended, std::vector<Finished>* done);
  // Counts what one drive() did (under mutex_), then logs the ended connectors.
  void record(const std::vector<Ended>& ended, size_t accepted);
  void log_rate_limited(const Ended& e);

  PeerConnector& connector_;
  IncomingServices& services_;
  const Settings s_;

  std::mutex drive_mutex_;  // held by the driving thread; guards arrivals_ and the log limiter
  std::vector<std::unique_ptr<PeerConnector::Arrival>> arrivals_;  // oldest first
  uint64_t log_window_ns_ = 0;
  uint32_t logged_in_window_ = 0;
  uint64_t suppressed_ = 0;
  uint64_t listen_pause_until_ns_ = 0;  // after accept(2) failed (EMFILE ...)
  uint64_t listen_checked_ns_ = 0;      // when drive() last looked at the listeners

  std::mutex mutex_;  // a leaf: guards what follows
  std::condition_variable ready_cv_;
  std::deque<std::shared_ptr<Peer>> ready_;
  Stats stats_;
};

}  // namespace hmc
