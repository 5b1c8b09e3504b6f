// The plugin context: configuration, the opened devices, the wait fd that covers all of them,
// and the registries of every object handed to the core (so finalize releases them all).
#pragma once

#include <memory>
#include <unordered_set>
#include <vector>

#include "config.h"
#include "device.h"
#include "hmc/plugin/net.h"
#include "log.h"
#include "util.h"

namespace hmc::ofi {

class Endpoint;
class Listener;
struct MemRegion;
struct RemoteKey;

class Context {
 public:
  // Reads the configuration, discovers providers and opens a device per provider. NO_DEVICE
  // (with the reason logged at info level) when none is usable.
  static hmc_plugin_status_t create(const hmc_host_services_t* host, Context** out);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Log& log() const { return log_; }
  const Config& cfg() const { return cfg_; }
  uint64_t now_ns() const { return host_->now_ns(host_->host_ctx); }
  uint64_t timeout_ns() const { return static_cast<uint64_t>(host_->timeout_ms) * 1000000ull; }

  int device_count() const { return static_cast<int>(devices_.size()); }
  bool valid_device(int dev) const { return dev >= 0 && dev < device_count(); }
  Device* device(int dev) const { return devices_[static_cast<size_t>(dev)].get(); }

  void progress();
  // The periodic part of progress (liveness reads); test() calls it with its device's progress.
  void tick();
  hmc_plugin_status_t wait_fd(int* fd) const;
  hmc_plugin_status_t arm();

  // Endpoints are made and destroyed here so the registry always knows them.
  Endpoint* make_endpoint(Device& dev);
  void destroy_endpoint(Endpoint* ep, bool drain);
  bool has_endpoint(Endpoint* ep) const { return eps_.count(ep) != 0; }

  std::unordered_set<Listener*>& listeners() { return listeners_; }
  std::unordered_set<MemRegion*>& regions() { return regions_; }
  std::unordered_set<RemoteKey*>& rkeys() { return rkeys_; }

 private:
  explicit Context(const hmc_host_services_t* host) : host_(host), log_(host) {}
  hmc_plugin_status_t init();

  const hmc_host_services_t* host_;
  Log log_;
  Config cfg_;
  std::vector<std::unique_ptr<Device>> devices_;
  Fd epoll_;  // covers every device's CQ wait fd (and timer_)
  Fd timer_;  // wakes the core to poll devices without a wait fd (shm)
  bool timer_armed_ = false;
  uint64_t last_liveness_ns_ = 0;
  uint32_t ticks_ = 0;
  bool can_wait_ = false;
  std::unordered_set<Endpoint*> eps_;
  std::unordered_set<Listener*> listeners_;
  std::unordered_set<MemRegion*> regions_;
  std::unordered_set<RemoteKey*> rkeys_;
};

}  // namespace hmc::ofi
