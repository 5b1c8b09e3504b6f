// Logging through the core's host services only (a plugin never writes to stderr itself).
// Messages are formatted here, prefixed with "ofi: ", and handed to host->log.
#pragma once

#include "hmc/plugin/common.h"

namespace hmc::ofi {

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

}  // namespace hmc::ofi

// Format only when the level passes the core's filter.
#define OFI_LOG(log, level, ...)                               \
  do {                                                         \
    if ((log).enabled(level)) (log).write(level, __VA_ARGS__); \
  } while (0)
#define OFI_ERROR(log, ...) OFI_LOG(log, HMC_LOG_ERROR, __VA_ARGS__)
#define OFI_WARN(log, ...) OFI_LOG(log, HMC_LOG_WARN, __VA_ARGS__)
#define OFI_INFO(log, ...) OFI_LOG(log, HMC_LOG_INFO, __VA_ARGS__)
#define OFI_DEBUG(log, ...) OFI_LOG(log, HMC_LOG_DEBUG, __VA_ARGS__)
#define OFI_TRACE(log, ...) OFI_LOG(log, HMC_LOG_TRACE, __VA_ARGS__)
