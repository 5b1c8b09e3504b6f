// The context: what hmc_context_create builds and every other handle hangs off. It owns the
// configuration, the plugins, the devices, the control-plane listeners, the peers and the
// subsystems (connect and accept: peer/establish.h; regions: regions/regions.h; target-side
// staging: xfer/target_staging.h; posting and completing transfers, put notifications:
// xfer/transfers.h; peer failure: progress/peer_failure.h; the progress engine and its thread:
// progress/progress.h), and wires them together: each subsystem registers the handlers of its
// control messages with the dispatch table (peer/dispatch.h). Its own methods:
//   context/context.cpp   creation, teardown, peers joining and leaving
//   context/metrics.cpp   the metrics text (util/metrics.h), its endpoint and file
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "coll/collectives.h"
#include "control/fd.h"
#include "device/copy_figures.h"
#include "device/registry.h"
#include "framed/framed_transfer.h"
#include "hmc/hmc.h"
#include "net/net_plugin.h"
#include "net/region.h"
#include "path/device_modes.h"
#include "path/path.h"
#include "peer/address.h"
#include "peer/dispatch.h"
#include "peer/establish.h"
#include "peer/incoming.h"
#include "peer/peer.h"
#include "plugin/loader.h"
#include "progress/peer_failure.h"
#include "progress/progress.h"
#include "regions/regions.h"
#include "request/request.h"
#include "util/config.h"
#include "util/metrics.h"
#include "util/metrics_http.h"
#include "xfer/target_staging.h"
#include "xfer/transfers.h"

namespace hmc {

class Context final : private RegionServices,
                      private EstablishServices,
                      private IncomingServices,
                      private StagingServices,
                      private TransferServices,
                      private coll::CollServices {
 public:
  // Builds a context; on failure returns the status with the thread's error message set.
  static hmc_status_t create(const hmc_context_options_t* opts, std::unique_ptr<Context>* out);
  ~Context() override;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // --- inventory -------------------------------------------------------------------------
  const Config& config() const { return config_; }
  const plugin::Loader& loader() const { return loader_; }
  DeviceRegistry& devices() { return devices_; }
  std::vector<NetDevice*> net_devices() const;
  // Copy figures of each device plugin, from its first device (device/copy_figures.h): declared,
  // or measured once, on first use, unless HMC_DEVICE_COPY_CALIBRATE=0. Thread-safe. With
  // measure false: only what is known already (empty before the measurement).
  const std::vector<path::CopyRecord>& copy_records(bool measure = true) override;
  // The figures that stand for device d (its plugin's first device's), with their basis
  // ("measured on cuda:0" for the others); an empty basis before the measurement.
  CopyFigures copy_figures_of(const Device& d);
  int timeout_ms() const { return timeout_ms_; }
  bool progress_thread() const { return use_progress_thread_; }
  // -1 -> HMC_TIMEOUT_MS; other negatives are rejected by the API layer.
  int resolve_timeout(int timeout_ms) const { return timeout_ms < 0 ? timeout_ms_ : timeout_ms; }

  // --- peers (peer/establish.h) -------------------------------------------------------------
  std::vector<uint8_t> address() const;
  PeerConnector& connector() { return *connector_; }
  hmc_status_t connect(const Address& addr, int timeout_ms, std::shared_ptr<Peer>* out);
  // The first incoming peer whose setup finished (peer/incoming.h), waiting up to timeout_ms.
  hmc_status_t accept(int timeout_ms, std::shared_ptr<Peer>* out);
  IncomingPeers::Stats accept_stats() { return incoming_->stats(); }
  // Advances the incoming connectors from this thread (hmc_progress, without a progress thread).
  void drive_incoming() {
    if (!use_progress_thread_) incoming_->drive();
  }
  hmc_status_t close_peer(const std::shared_ptr<Peer>& peer);

  // --- transfers (xfer/transfers.h) --------------------------------------------------------
  // A member, not a pointer: the path of every message reaches it with no load of its own.
  Transfers& transfers() { return transfers_; }

  // --- collectives (coll/collectives.h) --------------------------------------------------------
  coll::Collectives& collectives() { return *collectives_; }

  // --- metrics (util/metrics.h, docs/metrics.md) --------------------------------------------
  // The context's metrics in Prometheus' text format. Thread-safe.
  std::string metrics_text();
  CollMetrics& coll_metrics() { return coll_metrics_; }
  // Where HMC_METRICS_ADDR serves them ("" when it does not).
  const std::string& metrics_address() const { return metrics_server_.address(); }

  // --- regions (regions/regions.h) ---------------------------------------------------------
  Regions& regions() { return *regions_; }

  // --- progress (progress/progress.h) -----------------------------------------------------------
  // One pass over every plugin, pending request and control channel. Returns true when
  // something happened. `control` also services the control channels (costs a syscall each).
  bool progress(bool control) override { return progress_.pass(control); }
  bool sleep_for_events(int timeout_ms) override {
    return progress_.sleep_for_events(timeout_ms, false);
  }

 private:
  Context()
      : transfers_(static_cast<TransferServices&>(*this), devices_, stage_env_),
        failure_(transfers_, dispatch_, stage_env_),
        progress_({peers_mutex_, peers_, nets_, dispatch_, transfers_, failure_, stage_env_}) {}
  hmc_status_t init(const hmc_context_options_t* opts);
  hmc_status_t start_control_plane(const std::string& host, uint16_t port);
  void build_capabilities();
  hmc_status_t start_metrics();
  void write_metrics_file();

  // Peer failure (progress/peer_failure.h), for the subsystems' services.
  void fail_peer_locked(Peer& peer, hmc_status_t status, const std::string& reason) override {
    failure_.fail_peer_locked(peer, status, reason);
  }
  void fail_peer(Peer& peer, hmc_status_t status, const std::string& reason) override {
    failure_.fail_peer(peer, status, reason);
  }
  bool closed_in_order_locked(Peer& peer) override { return failure_.closed_in_order_locked(peer); }
  // Has each subsystem register the handlers of its control messages (and the peer layer its
  // liveness ones).
  void wire_control_handlers();
  void register_peer(const std::shared_ptr<Peer>& peer);
  // IncomingServices: where a peer that finished connecting to us goes. Today every one is
  // registered and queued for hmc_accept; a peer that something else waits for (a group being
  // formed) would be routed here, after its registration.
  void peer_arrived(std::shared_ptr<Peer> peer,
                    std::vector<control::Channel::Message> extra) override;
  // CollServices: connections for collectives, kept by the remote context's id. Incoming ones
  // marked path::kFeatureGroupLink are filed there by peer_arrived, never queued for
  // hmc_accept.
  hmc_status_t group_peer(const coll::Member& m, bool initiate, uint64_t deadline_ns,
                          std::shared_ptr<Peer>* out) override;
  void abandon_peer(Peer& peer, const std::string& reason) override;
  hmc_status_t copy(void* dst, const void* src, size_t size) override {
    return devices_.copy(dst, src, size);
  }
  DeviceRegistry& device_registry() override { return devices_; }
  bool host_memory(const void* p) override {
    MemoryLocation loc = devices_.locate(p);
    return !loc.device || loc.device->is_host();
  }
  // RegionServices and StagingServices.
  bool progress_until(const std::function<bool()>& done, uint64_t deadline_ns) override {
    return progress_.until(done, deadline_ns);
  }
  void settle_staged_region(Region* region) override { staging_->settle_region(region); }
  std::mutex& progress_mutex() override { return peers_mutex_; }

  // Device copy figures (copy_records), guarded by copy_mutex_; fixed once copy_done_.
  std::mutex copy_mutex_;
  bool copy_done_ = false;
  std::vector<path::CopyRecord> copy_records_;
  std::map<std::string, std::pair<std::string, CopyFigures>>
      copy_by_plugin_;  // plugin -> (device, figures)

  Config config_;
  plugin::Loader loader_;
  DeviceRegistry devices_;
  std::vector<std::unique_ptr<NetPlugin>> nets_;
  int timeout_ms_ = 30000;
  int heartbeat_ms_ = 1000;
  int64_t wait_spin_us_ = 1000;  // HMC_WAIT_SPIN_US
  std::string auth_token_;
  std::string forced_path_;
  uint64_t id_ = 0;
  path::Capabilities caps_;

  control::Fd unix_listener_;
  control::Fd tcp_listener_;
  Address address_;
  ControlDispatch dispatch_;                  // filled by init, read-only after
  std::unique_ptr<PeerConnector> connector_;  // made by init
  std::unique_ptr<IncomingPeers> incoming_;   // made by init, after connector_

  std::mutex peers_mutex_;
  std::vector<std::shared_ptr<Peer>> peers_;  // live peers
  std::vector<std::shared_ptr<Peer>>
      closed_peers_;  // kept until destroy (requests may point at them)

  std::unique_ptr<Regions> regions_;  // made by init

  std::unique_ptr<TargetStaging> staging_;  // made by init

  std::unique_ptr<coll::Collectives> collectives_;  // made by init
  std::mutex group_mutex_;
  std::map<uint64_t, std::shared_ptr<Peer>> group_peers_;  // by remote context id

  bool use_progress_thread_ = true;

  // Staging of device memory over host-only paths (framed/framed_transfer.h). ~Context ends every
  // transfer and drains the parked ones before devices_.release_all() ends the pool and engine.
  uint64_t stage_chunk_ = 0;
  StageEnv stage_env_;  // the registry's pool and engine

  CollMetrics coll_metrics_;
  MetricsServer metrics_server_;  // HMC_METRICS_ADDR; stopped first in ~Context
  uint64_t created_ns_ = 0;
  bool metrics_ready_ = false;                     // init got as far as the metrics
  std::map<const Peer*, uint64_t> peer_ordinals_;  // the metrics' conn label; peers_mutex_

  Transfers transfers_;  // wired by init (Transfers::configure)
  PeerFailure failure_;  // wired by init (PeerFailure::configure)
  Progress progress_;    // wired by init (Progress::configure); its thread stops first in ~Context
};

}  // namespace hmc
