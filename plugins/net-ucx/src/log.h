// Logging through the core's host services only (a plugin never writes to stderr itself).
// Messages are formatted here, prefixed with "ucx: ", and handed to host->log.
#pragma once

#include "hmc/plugin/common.h"

namespace hmc::ucx {

class Log {
 public:
  explicit Log(const hmc_host_services_t* host) : host_(host) {}

  // Cheap check, so that debug/trace messages are not formatted when filtered out.
  bool enabled(int level) const { return host_->log_enabled(host_->host_ctx, level) != 0; }

  // printf-style; long messages are truncated at 1 KiB.
  void write(int level, const char* fmt, ...) const __attribute__((format(printf, 3, 4)));

 private:
  const hmc_host_services_t* host_;
};

}  // namespace hmc::ucx

// Format only when the level passes the core's filter.
#define UX_LOG(log, level, ...)                                \
  do {                                                         \
    if ((log).enabled(level)) (log).write(level, __VA_ARGS__); \
  } while (0)
#define UX_ERROR(log, ...) UX_LOG(log, HMC_LOG_ERROR, __VA_ARGS__)
#define UX_WARN(log, ...) UX_LOG(log, HMC_LOG_WARN, __VA_ARGS__)
#define UX_INFO(log, ...) UX_LOG(log, HMC_LOG_INFO, __VA_ARGS__)
#define UX_DEBUG(log, ...) UX_LOG(log, HMC_LOG_DEBUG, __VA_ARGS__)
