// The services the core hands one plugin at init (hmc_host_services_t): logging with the plugin's
// "[kind/name] " prefix, configuration lookup, the monotonic clock and the default timeout.
//
// One object per plugin, alive from before init until after finalize (the loader keeps it until
// it is destroyed itself). Every callback is thread-safe, never throws across the C boundary, and
// reads only state fixed at construction, except the init-time message capture, which is locked.
#pragma once

#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include "hmc/plugin/common.h"

namespace hmc {
class Config;
}

namespace hmc::plugin {

class HostServices {
 public:
  // prefix: "net/hoststage". cfg: must outlive this object (the loader passes its own snapshot).
  // declared: the variable names this plugin may read (the core's and its own config_vars);
  // reading another one works but is warned about once per name. abi_min/abi_max: the ABI
  // versions the core accepts for this plugin's kind.
  HostServices(std::string prefix, const Config& cfg, std::set<std::string> declared,
               uint32_t timeout_ms, uint32_t abi_min, uint32_t abi_max);
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;

  const hmc_host_services_t* table() const { return &table_; }

  // Between begin_capture and end_capture (the plugin's init), messages the plugin logs are
  // remembered so that a failing init can be explained, and log_enabled answers yes for
  // error, warn and info even when the log level filters them, so that the plugin's reason is
  // formatted and can be captured (it is still written only when the level allows).
  void begin_capture();
  void end_capture();
  // The last error/warn message logged during the capture, or "".
  std::string last_problem() const;
  // The last error/warn/info message logged during the capture, or "".
  std::string last_message() const;

 private:
  static void cb_log(void* host_ctx, int level, const char* message);
  static int cb_log_enabled(void* host_ctx, int level);
  static const char* cb_config_get(void* host_ctx, const char* name);
  static uint64_t cb_now_ns(void* host_ctx);

  hmc_host_services_t table_{};
  std::string prefix_;  // "[net/hoststage] "
  const Config& cfg_;
  const std::set<std::string> declared_;

  // Read without the lock on every log/log_enabled call (plugins may ask log_enabled on hot
  // paths); the captured texts below are written under the lock.
  std::atomic<bool> capturing_{false};
  mutable std::mutex mutex_;  // guards everything below
  std::string last_problem_;
  std::string last_message_;
  std::set<std::string> warned_undeclared_;
};

}  // namespace hmc::plugin
