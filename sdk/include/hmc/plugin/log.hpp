/*
 * Logging for C++ plugins, through the core's host services only (a plugin never writes to
 * stderr itself). Header-only, no ABI: the core prefixes each message with "[<kind>/<name>] ".
 *
 *   hmc::plugin::Log log(host);                 // host services from init
 *   HMC_PLUGIN_LOG(log, HMC_LOG_WARN, "cannot open %s: %s", path, why);
 */
#ifndef HMC_PLUGIN_LOG_HPP
#define HMC_PLUGIN_LOG_HPP

#include <cstdarg>
#include <cstdio>

#include "hmc/plugin/common.h"

namespace hmc::plugin {

class Log {
 public:
  Log() = default;
  explicit Log(const hmc_host_services_t* host) : host_(host) {}

  // Cheap check, so that messages filtered out are not formatted. False without host services.
  bool enabled(int level) const {
    return host_ != nullptr && host_->log_enabled(host_->host_ctx, level) != 0;
  }

  // printf-style; messages longer than 1 KiB are truncated.
  void write(int level, const char* fmt, ...) const __attribute__((format(printf, 3, 4))) {
    if (host_ == nullptr) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    host_->log(host_->host_ctx, level, buf);
  }

 private:
  const hmc_host_services_t* host_ = nullptr;
};

}  // namespace hmc::plugin

/* Formats only when the level passes the core's filter. */
#define HMC_PLUGIN_LOG(log, level, ...)                        \
  do {                                                         \
    if ((log).enabled(level)) (log).write(level, __VA_ARGS__); \
  } while (0)

#endif /* HMC_PLUGIN_LOG_HPP */
