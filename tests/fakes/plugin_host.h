// A minimal host for device plugins in tests: dlopens a plugin file, hands it host services
// (a captured log, a configuration map, the clock) and runs init/finalize, without the core.
// Also the small helpers the device tests share: bounded waits on events, byte patterns.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "hmc/plugin/device.h"

namespace hmc::test {

class PluginHost {
 public:
  // config: what config_get answers (for instance {"HMC_CUDA_LIBRARY", "/path/libcuda.so.1"}).
  explicit PluginHost(std::map<std::string, std::string> config = {});
  ~PluginHost();  // finalizes if init succeeded
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  // dlopens path and reads its table; false with *why.
  bool load(const std::string& path, std::string* why);
  hmc_plugin_status_t init();
  hmc_plugin_status_t finalize();

  const hmc_device_plugin_v1_t* table() const { return table_; }
  hmc_device_ctx_t* ctx() const { return ctx_; }
  const hmc_device_plugin_v1_t* operator->() const { return table_; }

  // Every message the plugin logged, as "LEVEL message".
  std::vector<std::string> logs() const;
  bool logged(const std::string& fragment) const;
  std::string log_text() const;

 private:
  static void cb_log(void* host_ctx, int level, const char* message);
  static int cb_log_enabled(void* host_ctx, int level);
  static const char* cb_config_get(void* host_ctx, const char* name);
  static uint64_t cb_now_ns(void* host_ctx);

  std::map<std::string, std::string> config_;
  hmc_host_services_t services_{};
  void* handle_ = nullptr;
  const hmc_device_plugin_v1_t* table_ = nullptr;
  hmc_device_ctx_t* ctx_ = nullptr;
  mutable std::mutex mutex_;
  std::vector<std::string> logs_;
};

// Polls event_query until it answers something other than IN_PROGRESS, for at most `limit`;
// returns the last answer (IN_PROGRESS when the limit passed).
hmc_plugin_status_t wait_event(const hmc_device_plugin_v1_t* t, hmc_device_event_t* ev,
                               std::chrono::milliseconds limit = std::chrono::seconds(10));

// Fills / checks size bytes with a pattern derived from seed.
void fill_pattern(void* p, size_t size, uint32_t seed);
bool check_pattern(const void* p, size_t size, uint32_t seed, size_t* first_bad = nullptr);

std::string to_hex(const void* p, size_t n);
std::vector<uint8_t> from_hex(const std::string& s);

}  // namespace hmc::test
