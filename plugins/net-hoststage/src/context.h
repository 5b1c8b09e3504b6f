// One plugin context (hmc_net_ctx_t): configuration, the epoll set that wait_fd exposes, the
// registry of what is polled, every endpoint, listener and registration, and progress/arm.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "config.h"
#include "hmc/plugin/net.h"
#include "log.h"
#include "region.h"
#include "request.h"
#include "sockets.h"
#include "util.h"

namespace hmc::hoststage {

class Endpoint;
class Listener;
class Stream;

// What an epoll event belongs to.
enum class PollKind : uint8_t { kStream, kDial, kListen, kIncoming, kWake };

class Context {
 public:
  // Reads the configuration and sets up the epoll set (and the wake eventfd for shm).
  static hmc_plugin_status_t create(const hmc_host_services_t* host, Context** out);
  ~Context();  // closes every endpoint and listener, drops every registration
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device_count() const { return cfg_.shm ? 2 : 1; }
  bool valid_device(int dev) const { return dev >= 0 && dev < device_count(); }

  void progress();
  hmc_plugin_status_t arm();
  // The progress slot: the core drives progress itself, so test stops doing it (see test_tick).
  void progress_from_core() {
    test_driven_ = false;
    tests_since_core_progress_ = 0;
    progress();
  }
  // Called by test for a pending request. A core that calls the progress slot gets cheap tests
  // (no system call per test, which matters with hundreds of requests in flight); a caller that
  // only ever tests is detected after a short while and from then on each test progresses.
  void test_tick() {
    if (!test_driven_ && ++tests_since_core_progress_ < kTestsBeforeTestDriven) return;
    test_driven_ = true;
    progress();
  }
  int wait_fd() const { return epfd_.get(); }

  // epoll registry: tokens are never reused, so a stale event for a closed fd finds nothing.
  uint64_t watch(int fd, uint32_t events, PollKind kind, void* obj, void* aux = nullptr,
                 int index = 0);
  void modify(int fd, uint64_t token, uint32_t events);
  void unwatch(int fd, uint64_t token);

  uint64_t now_ns() const { return host_->now_ns(host_->host_ctx); }
  uint64_t timeout_ns() const { return static_cast<uint64_t>(host_->timeout_ms) * 1000000ull; }
  // Budget-limited work is left over: arm must not let the core sleep.
  void note_more_work() { more_work_ = true; }

  const Log& log() const { return log_; }
  const Config& cfg() const { return cfg_; }
  // HMC_HOSTSTAGE_INJECT_ERRORS: whether this post is one of the one in N that fail (logged).
  bool inject_error(const char* what);
  const TcpAddresses& tcp_addresses() const { return tcp_; }
  int wake_event_fd() const { return wake_.get(); }
  RegionTable& regions() { return regions_; }

  // Request objects, recycled: a small message costs no malloc and free. Calls into one context
  // are serialised by the core, so the list needs no lock.
  Request* alloc_request() {
    if (free_reqs_.empty()) return new Request;
    Request* r = free_reqs_.back();
    free_reqs_.pop_back();
    std::vector<VecPieceWire> vec = std::move(r->vec);  // its storage serves the next one
    *r = Request{};
    vec.clear();
    r->vec = std::move(vec);
    return r;
  }
  void free_request(Request* r) {
    if (free_reqs_.size() < kFreeRequestsKept)
      free_reqs_.push_back(r);
    else
      delete r;
  }

  // Lifetime bookkeeping for objects handed to the core.
  void add_endpoint(Endpoint* ep) { eps_.push_back(ep); }
  void remove_endpoint(Endpoint* ep);
  void add_listener(Listener* l) { listeners_.push_back(l); }
  void remove_listener(Listener* l);
  std::unordered_set<MemRegion*>& mrs() { return mrs_; }
  std::unordered_set<RemoteKey*>& rkeys() { return rkeys_; }

  // Logs the first cross-memory-attach failure of this context at warn level, later ones at debug.
  bool first_cma_failure() {
    bool first = !cma_failure_logged_;
    cma_failure_logged_ = true;
    return first;
  }

 private:
  explicit Context(const hmc_host_services_t* host) : host_(host), log_(host) {}
  int poll_sockets();  // dispatches ready events; returns how many there were
  void disarm();

  struct Poller {
    PollKind kind;
    void* obj;
    void* aux;
    int index;
  };

  const hmc_host_services_t* host_;
  Log log_;
  Config cfg_;
  uint64_t inject_state_ = 0;
  TcpAddresses tcp_;
  Fd epfd_;
  Fd wake_;
  uint64_t next_token_ = 1;
  std::unordered_map<uint64_t, Poller> pollers_;
  std::vector<Endpoint*> eps_;
  std::vector<Listener*> listeners_;
  RegionTable regions_;
  std::unordered_set<MemRegion*> mrs_;
  std::unordered_set<RemoteKey*> rkeys_;
  static constexpr size_t kFreeRequestsKept = 256;
  std::vector<Request*> free_reqs_;
  static constexpr uint32_t kTestsBeforeTestDriven = 64;
  bool test_driven_ = true;  // until the core shows it calls the progress slot
  uint32_t tests_since_core_progress_ = 0;
  bool more_work_ = false;
  bool armed_ = false;
  bool cma_failure_logged_ = false;
  uint32_t tick_ = 0;
};

}  // namespace hmc::hoststage
