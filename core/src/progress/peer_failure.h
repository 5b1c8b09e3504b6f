// Peer failure: marking a peer lost (its endpoint closed, every request pending on it failed,
// its framing state and held notifications dropped), whether a peer closed in order, and the
// staging state of failed transfers, parked until their device copies end. The context owns one
// by value; Regions, TargetStaging and Transfers reach it through their services.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "framed/framed_transfer.h"
#include "hmc/hmc.h"

namespace hmc {

class ControlDispatch;
class Regions;
class Transfers;
struct Peer;

class PeerFailure {
 public:
  PeerFailure(Transfers& transfers, const ControlDispatch& dispatch, StageEnv& stage_env)
      : transfers_(transfers), dispatch_(dispatch), stage_env_(stage_env) {}
  PeerFailure(const PeerFailure&) = delete;
  PeerFailure& operator=(const PeerFailure&) = delete;
  // Completes the wiring once the context made the regions (before any peer).
  void configure(Regions* regions) { regions_ = regions; }

  // Marks the peer lost (net mutex held): closes its endpoint, fails every pending request.
  void fail_peer_locked(Peer& peer, hmc_status_t status, const std::string& reason);
  // The same, taking the peer's net mutex (no lock held).
  void fail_peer(Peer& peer, hmc_status_t status, const std::string& reason);
  // The data path and the control channel are two connections: the peer's Bye (sent before it
  // closes its data path) may not have been read yet when the data path's end is seen. Reads
  // the control channel to find out (net mutex held; takes ctrl_mutex).
  bool closed_in_order_locked(Peer& peer);
  // Frees parked transfers whose copies ended; with a deadline, waits for all of them and leaks
  // (never frees) those still copying when it passes.
  void reap_parked_transfers(uint64_t deadline_ns = 0);

 private:
  // Parks a failed transfer's staging state until its device copies ended.
  void park_failed_transfer(std::unique_ptr<FramedTransfer> f);

  Transfers& transfers_;
  const ControlDispatch& dispatch_;
  StageEnv& stage_env_;
  Regions* regions_ = nullptr;
  std::mutex parked_mutex_;  // a leaf, taken under a net mutex
  std::vector<std::unique_ptr<FramedTransfer>> parked_;
};

}  // namespace hmc
