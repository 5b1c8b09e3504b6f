// A plugin context (hmc_net_ctx_t): the loaded verbs library, the devices discovery chose, the
// wait set (an epoll fd over the completion channels and side-channel sockets: the context's
// wait_fd), and the registries of its objects.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "config.h"
#include "device.h"
#include "hmc/plugin/net.h"
#include "log.h"
#include "mr_cache.h"
#include "verbs_api.h"

namespace hmc::ibverbs {

class Endpoint;
class Listener;
struct MemRegion;
struct RemoteKey;

// How often progress looks at the wait set (side channels, completion events) while the core
// polls: a peer that ended is seen this much later at most.
constexpr uint64_t kWaitSetIntervalNs = 100000;

class Context {
 public:
  // NO_DEVICE (with the reason logged at info) when there is nothing to drive here.
  static hmc_plugin_status_t create(const hmc_host_services_t* host, Context** out);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Log& log() const { return log_; }
  const Config& config() const { return cfg_; }
  // Device memory the ports register by pointer for puts and gets (HMC_IB_PEERMEM).
  const Peermem& peermem() const { return peermem_; }
  const VerbsApi& api() const { return api_; }
  const hmc_host_services_t* host() const { return host_; }
  uint64_t now_ns() const { return host_->now_ns(host_->host_ctx); }
  uint32_t timeout_ms() const { return host_->timeout_ms; }
  int rc_timeout() const { return rc_timeout_; }

  int device_count() const { return static_cast<int>(devices_.size()); }
  bool valid_device(int dev) const { return dev >= 0 && dev < device_count(); }
  Device* device(int dev) { return devices_[static_cast<size_t>(dev)].get(); }
  // The other ports an endpoint on d stripes over: active ports of d's link layer and GID type,
  // on any network, in device order, at most HMC_IB_RAILS - 1. The connector offers them in
  // this order; the listener pairs each with one of its own on the same network (on_rails).
  std::vector<Device*> rails_of(const Device& d);

  std::set<Endpoint*>& endpoints() { return endpoints_; }
  std::set<Listener*>& listeners() { return listeners_; }
  std::set<MemRegion*>& regions() { return regions_; }
  std::set<RemoteKey*>& rkeys() { return rkeys_; }
  MrCache& mr_cache() { return *cache_; }
  uint64_t next_id() { return ++ids_; }
  uint64_t random64();

  // Adds fd to the wait set (readable wakes the core) / removes it.
  void watch(int fd);
  void unwatch(int fd);

  // Polls every device, services the ready fds, moves every endpoint on. True when a
  // completion or a side-channel event was handled. full: look at the wait set now (else it is
  // looked at every kWaitSetIntervalNs once every connection is up).
  bool progress(bool full = false);
  hmc_plugin_status_t wait_fd(int* fd) const;
  hmc_plugin_status_t arm();

 private:
  explicit Context(const hmc_host_services_t* host) : host_(host), log_(host) {}
  hmc_plugin_status_t discover();
  std::string cfg_hca_text() const;

  const hmc_host_services_t* host_;
  Log log_;
  Config cfg_;
  Peermem peermem_;
  VerbsApi api_;
  int rc_timeout_ = 14;
  std::vector<std::unique_ptr<Device>> devices_;
  std::unique_ptr<MrCache> cache_;  // before the devices go: it holds their registrations
  int epfd_ = -1;
  std::set<Endpoint*> endpoints_;
  std::vector<Endpoint*> walk_;  // progress: the endpoints of this call
  bool setting_up_ = false;      // an endpoint was being set up at the last progress
  uint64_t wait_set_ns_ = 0;     // when progress last looked at the wait set
  std::set<Listener*> listeners_;
  std::set<MemRegion*> regions_;
  std::set<RemoteKey*> rkeys_;
  uint64_t ids_ = 0;
  uint64_t rng_ = 0;
};

}  // namespace hmc::ibverbs
