// The progress engine: a pass over every net plugin some peer uses (its pending requests, the
// notifications it carried) and, when asked, over every peer's control channel (its messages
// dispatched, heartbeats, liveness), target-side staging and region withdrawals; and the
// progress thread, which runs passes while no application thread drives progress and otherwise
// sleeps in poll(2) on the plugins' wake-up fds and the control sockets, and which also drives
// the setup of incoming connectors (peer/incoming.h) and sleeps on their sockets. The context owns
// one by value and keeps the peer list it reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "control/fd.h"
#include "framed/framed_transfer.h"
#include "hmc/hmc.h"
#include "net/net_plugin.h"

namespace hmc {

class ControlDispatch;
class IncomingPeers;
class PeerFailure;
class Regions;
class TargetStaging;
class Transfers;
struct Peer;

// A subsystem above this layer that moves along with every pass (coll/collectives.h), after the
// peers, with no lock held.
class PassClient {
 public:
  virtual bool progress() = 0;

 protected:
  virtual ~PassClient() = default;
};

class Progress {
 public:
  // What the context owns and a pass reads: the peer list (under peers_mutex, which every pass
  // holds: the head of the lock order, peer/peer.h), the net plugins, the dispatch table.
  struct Wiring {
    std::mutex& peers_mutex;
    const std::vector<std::shared_ptr<Peer>>& peers;
    const std::vector<std::unique_ptr<NetPlugin>>& nets;
    const ControlDispatch& dispatch;
    Transfers& transfers;
    PeerFailure& failure;
    StageEnv& stage_env;
  };
  struct Settings {
    Regions* regions = nullptr;
    TargetStaging* staging = nullptr;
    IncomingPeers* incoming = nullptr;  // connectors in setup, driven by the thread
    int timeout_ms = 30000;             // HMC_TIMEOUT_MS
    int heartbeat_ms = 1000;            // HMC_HEARTBEAT_MS
    PassClient* collectives = nullptr;  // moved along after the peers
  };
  explicit Progress(const Wiring& w) : w_(w) {}
  ~Progress() { stop(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // Completes the wiring once the context made the other subsystems (before start).
  void configure(const Settings& settings) { settings_ = settings; }
  // Makes the wake-up eventfd and, with `thread`, starts the progress thread.
  hmc_status_t start(bool thread);
  // Stops and joins the progress thread (idempotent).
  void stop();

  // One pass over every plugin, pending request and control channel (no lock held). Returns
  // true when something happened. `control` also services the control channels (costs a
  // syscall each).
  bool pass(bool control);
  // Drives passes from this thread until done() holds or the deadline passes.
  bool until(const std::function<bool()>& done, uint64_t deadline_ns);
  // Wakes the progress thread from its poll(2) (a peer joined).
  void wake();
  // Sleeps in poll(2), for at most timeout_ms, until a plugin some peer uses, a peer's control
  // socket or wake() has something; the progress thread (`thread`) also watches every other
  // plugin and the incoming connectors. False, without sleeping, when a plugin cannot sleep now
  // (its arm found work) or, for an application thread's wait, has no wake-up fd or arm slot.
  bool sleep_for_events(int timeout_ms, bool thread);

 private:
  // The pass over plugins, requests and control channels (peers mutex held).
  bool pass_peers(bool control);
  // Reads and handles the peer's control messages, sends heartbeats, checks liveness.
  bool service_control(const std::shared_ptr<Peer>& peer, uint64_t now);
  void thread_main();

  Wiring w_;
  Settings settings_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> thread_sleeping_{false};
  control::Fd wake_fd_;  // eventfd
};

}  // namespace hmc
