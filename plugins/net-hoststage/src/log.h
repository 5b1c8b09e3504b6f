// Logging through the core's host services only (a plugin never writes to stderr itself).
// Messages are formatted here, prefixed with "hoststage: ", and handed to host->log.
#pragma once

#include "hmc/plugin/common.h"

namespace hmc::hoststage {

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

}  // namespace hmc::hoststage

// Format only when the level passes the core's filter.
#define HS_LOG(log, level, ...)                                \
  do {                                                         \
    if ((log).enabled(level)) (log).write(level, __VA_ARGS__); \
  } while (0)
#define HS_ERROR(log, ...) HS_LOG(log, HMC_LOG_ERROR, __VA_ARGS__)
#define HS_WARN(log, ...) HS_LOG(log, HMC_LOG_WARN, __VA_ARGS__)
#define HS_INFO(log, ...) HS_LOG(log, HMC_LOG_INFO, __VA_ARGS__)
#define HS_DEBUG(log, ...) HS_LOG(log, HMC_LOG_DEBUG, __VA_ARGS__)
#define HS_TRACE(log, ...) HS_LOG(log, HMC_LOG_TRACE, __VA_ARGS__)
