// Logging for device plugins, through the core's host services only (a plugin never writes to
// stderr itself). The core prefixes each message with "[device/<name>] ".
#pragma once

#include "hmc/plugin/common.h"

namespace hmc::devplug {

class Log {
 public:
  Log() = default;
  explicit Log(const hmc_host_services_t* host) : host_(host) {}

  // Cheap check, so that messages filtered out are not formatted. False without host services.
  bool enabled(int level) const {
    return host_ != nullptr && host_->log_enabled(host_->host_ctx, level) != 0;
  }
  // printf-style; messages longer than 1 KiB are truncated.
  void write(int level, const char* fmt, ...) const __attribute__((format(printf, 3, 4)));

 private:
  const hmc_host_services_t* host_ = nullptr;
};

}  // namespace hmc::devplug

// Format only when the level passes the core's filter.
#define DP_LOG(log, level, ...)                                \
  do {                                                         \
    if ((log).enabled(level)) (log).write(level, __VA_ARGS__); \
  } while (0)
#define DP_ERROR(log, ...) DP_LOG(log, HMC_LOG_ERROR, __VA_ARGS__)
#define DP_WARN(log, ...) DP_LOG(log, HMC_LOG_WARN, __VA_ARGS__)
#define DP_INFO(log, ...) DP_LOG(log, HMC_LOG_INFO, __VA_ARGS__)
#define DP_DEBUG(log, ...) DP_LOG(log, HMC_LOG_DEBUG, __VA_ARGS__)
