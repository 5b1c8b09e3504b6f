// One plugin context (hmc_net_ctx_t): the UCP context and its single worker, the configuration
// it was made from, what the device offers, the ids that route tagged messages to endpoints
// (tags.h), request completion, progress, arm/wait_fd, and every object handed to the core.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "config.h"
#include "hmc/plugin/net.h"
#include "identity.h"
#include "log.h"
#include "region.h"
#include "request.h"

namespace hmc::ucx {

class Endpoint;
class Listener;

class Context {
 public:
  // Reads the configuration, initialises UCP (features TAG, RMA, WAKEUP as available), creates
  // the worker. NO_DEVICE (logged) when UCX cannot run here; INVALID_ARGUMENT on a bad setting.
  static hmc_plugin_status_t create(const hmc_host_services_t* host, Context** out);
  // Closes every endpoint and listener, releases every registration and key, then the worker
  // and the UCP context. Bounded: pending endpoint closes get at most kCloseBudgetNs.
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  static bool valid_device(int dev) { return dev == 0; }
  void fill_props(hmc_net_device_props_t* props) const;
  uint64_t mem_ifaces() const { return mem_ifaces_; }
  bool rma() const { return rma_; }
  // Endpoints use UCP_ERR_HANDLING_MODE_PEER (else NONE): HMC_UCX_ERROR_MODE.
  bool peer_errors() const { return cfg_.peer_errors; }

  ucp_context_h ucp() const { return ucp_; }
  ucp_worker_h worker() const { return worker_; }
  // The worker address a listener hands out, and whether it is the network-only variant.
  // Empty when neither fits in a connection handle (listen then fails, saying so).
  const std::vector<uint8_t>& handle_address(bool* net_only) const {
    *net_only = handle_address_net_only_;
    return handle_address_;
  }
  // The full worker address (carried in hello messages, which have no size limit).
  const std::vector<uint8_t>& full_address() const { return full_address_; }
  const ProcessIdentity& self() const { return self_; }

  // --- progress --------------------------------------------------------------------------
  // One ucp_worker_progress, then deferred work (endpoint failures, liveness checks, closes).
  void progress();
  // Runs UCX until it has nothing more to do right now (bounded): what has arrived is matched
  // or queued as unexpected. Not from inside a UCX callback.
  void drain_events() {
    for (int i = 0; i < 256 && ucp_worker_progress(worker_) != 0; ++i) {
    }
  }
  // test()'s policy: when the core tests many requests in a row (one pass over its pending
  // list, right after progress), only every kMaxSkips-th test progresses the worker; a request
  // tested repeatedly progresses it every time.
  void progress_for_test(const Request* r) {
    if (last_call_ != nullptr && last_call_ != r && skips_ < kMaxSkips) {
      ++skips_;
    } else {
      progress();
    }
    last_call_ = r;
  }
  // Any other slot: the next test progresses.
  void note_call() { last_call_ = nullptr; }
  void note_progress_slot() { last_call_ = &last_call_; }
  hmc_plugin_status_t arm();
  int wait_fd() const { return efd_; }

  // --- requests --------------------------------------------------------------------------
  Request* new_request(ReqKind kind) { return pool_.get(this, nullptr, kind); }
  // Ends r with st (its result is final; it leaves its endpoint's pending list).
  void finish(Request* r, hmc_plugin_status_t st);
  // Ends r from what UCX reported, once its last UCX operation called back.
  void complete(Request* r);
  // test reported r: it goes back to the pool (or waits for UCX as an orphan).
  void release(Request* r);
  // Nobody will test r (close_ep, finalize, a control message no longer wanted).
  void abandon(Request* r);
  // After a forced close, before the core hands the buffers of the endpoint's requests back to
  // the application: runs UCX until `held()` turns false (UCX called back every operation
  // still moving bytes of theirs), or until every closing endpoint is gone and nothing more
  // arrives (no transport is left to deliver their bytes: UCX never calls some of them back),
  // or kCloseBudgetNs passed (logged: false). Not from inside a UCX callback.
  template <class Held>
  bool settle(Held held) {
    const uint64_t deadline = now_ns() + kCloseBudgetNs;
    while (held()) {
      const bool moved = ucp_worker_progress(worker_) != 0;
      reap_closing();
      if (closing_.empty() && !moved) return true;
      if (now_ns() >= deadline) {
        UX_WARN(log_,
                "UCX still holds operations of a closed endpoint after %llu ms: their "
                "buffers may yet be read or written",
                static_cast<unsigned long long>(kCloseBudgetNs / 1000000));
        return false;
      }
    }
    return true;
  }
  // Requests abandoned (close_ep) while UCX held them, not yet called back.
  size_t data_orphans() const { return data_orphans_; }
  // Accounts for one UCX post of r: its return value `s` (NULL: done at once, an error pointer:
  // failed, else pending). Returns the error status when the post failed, else UCS_OK.
  ucs_status_t absorb(Request* r, void* s);

  // Control messages (connection setup and teardown, wire.h). The request owns the bytes (sent,
  // or the receive buffer of `cap` bytes); it always comes back, ended at once when UCX refused
  // the post. on_done (may be null) runs when it ends.
  Request* post_control_recv(uint64_t tag, size_t cap, void* owner, void (*on_done)(Request*));
  Request* post_control_send(ucp_ep_h uep, uint64_t tag, std::vector<uint8_t>&& bytes);

  static void send_cb(void* ucx_req, ucs_status_t st, void* user);
  static void recv_cb(void* ucx_req, ucs_status_t st, const ucp_tag_recv_info_t* info, void* user);
  static void ep_error_cb(void* arg, ucp_ep_h ep, ucs_status_t st);

  // --- endpoint ids (tags.h) -------------------------------------------------------------
  // A free id, 1..65535, handed out round-robin so an id is reused as late as possible; any
  // message still queued for it from an earlier endpoint is discarded first. 0: none left.
  uint16_t alloc_id();
  void free_id(uint16_t id);

  // --- endpoints and listeners -----------------------------------------------------------
  void add_endpoint(Endpoint* ep, ucp_ep_h uep);
  void remove_endpoint(Endpoint* ep, ucp_ep_h uep);
  void add_listener(Listener* l) { listeners_.push_back(l); }
  void remove_listener(Listener* l);
  // Queues ep for Endpoint::service() after the current UCX progress call returns (UCX
  // callbacks must not close endpoints themselves).
  void attend(Endpoint* ep);
  void unattend(Endpoint* ep);
  // Force-closes a UCP endpoint; the close completes in the background.
  void close_ucp_ep(ucp_ep_h uep);
  // Closes uep once `bye` (a control send on it) completed, or after kLingerNs.
  void linger(ucp_ep_h uep, Request* bye);

  // --- registrations ---------------------------------------------------------------------
  std::unordered_set<MemRegion*>& mrs() { return mrs_; }
  std::unordered_set<RemoteKey*>& rkeys() { return rkeys_; }

  // How long a close waits for UCX to let go of what it still holds.
  static constexpr uint64_t kCloseBudgetNs = 1000ull * 1000000;

  const Log& log() const { return log_; }
  uint64_t now_ns() const { return host_->now_ns(host_->host_ctx); }
  uint64_t timeout_ns() const { return static_cast<uint64_t>(host_->timeout_ms) * 1000000ull; }
  uint32_t timeout_ms() const { return host_->timeout_ms; }
  // A random 64-bit value (never 0).
  uint64_t random64();

 private:
  explicit Context(const hmc_host_services_t* host) : host_(host), log_(host) {}
  hmc_plugin_status_t init();
  hmc_plugin_status_t init_ucp(ucp_config_t* cfg);
  void describe_resources();
  void drain_id(uint16_t id);
  // Receives into nothing every queued message whose tag matches; returns how many.
  int drain(uint64_t tag, uint64_t mask);
  void service();
  void periodic();
  void check_liveness();
  void service_lingering(bool force_all);
  void reap_closing();

  size_t data_orphans_ = 0;  // abandoned send/recv/put/get requests UCX still holds

  static constexpr int kMaxSkips = 16;
  static constexpr uint64_t kPeriodicNs = 50ull * 1000000;
  static constexpr uint64_t kLingerNs = 200ull * 1000000;

  const hmc_host_services_t* host_;
  // What every progress pass reads, together (a test's poll touches these lines and no others
  // of the context).
  ucp_worker_h worker_ = nullptr;
  const void* last_call_ = nullptr;
  int skips_ = 0;
  uint32_t ticks_ = 0;
  size_t unreported_ = 0;  // requests done but not yet tested
  std::vector<Endpoint*> attention_;
  struct Lingering {
    ucp_ep_h uep;
    Request* bye;
    uint64_t deadline_ns;
  };
  std::vector<Lingering> lingering_;
  uint64_t next_periodic_ns_ = 0;

  Log log_;
  Config cfg_;
  ucp_context_h ucp_ = nullptr;
  int efd_ = -1;
  bool rma_ = false;
  bool same_host_only_ = false;
  uint64_t mem_ifaces_ = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
  std::string transports_;  // "tcp/lo tcp/eth0", for log messages
  std::vector<uint8_t> full_address_;
  std::vector<uint8_t> handle_address_;
  bool handle_address_net_only_ = false;
  ProcessIdentity self_;

  RequestPool pool_;

  std::vector<bool> id_used_;
  uint32_t next_id_ = 1;
  std::vector<Endpoint*> eps_;
  std::unordered_map<ucp_ep_h, Endpoint*> by_uep_;
  std::vector<Listener*> listeners_;
  std::vector<void*> closing_;  // ucp_ep_close_nbx requests still running
  std::unordered_set<MemRegion*> mrs_;
  std::unordered_set<RemoteKey*> rkeys_;
  uint64_t rng_state_ = 0;
};

}  // namespace hmc::ucx
