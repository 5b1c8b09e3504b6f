/*
 * The C boundary of a C++ plugin: what every slot and every init does before the plugin's own
 * code runs. Header-only C++17, no ABI (compiled into the plugin, like log.hpp).
 *
 *   hmc_plugin_status_t my_init(const hmc_host_services_t* host, hmc_net_ctx_t** ctx) {
 *     return hmc::plugin::guarded([&] {
 *       if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
 *       hmc_plugin_status_t st = hmc::plugin::check_host_services(host, HMC_NET_ABI_VERSION);
 *       if (st != HMC_PLUGIN_SUCCESS) return st;
 *       ...
 *     });
 *   }
 */
#ifndef HMC_PLUGIN_BOUNDARY_HPP
#define HMC_PLUGIN_BOUNDARY_HPP

#include <cstdint>
#include <cstdio>
#include <new>

#include "hmc/plugin/common.h"

namespace hmc::plugin {

// Runs f (a callable returning hmc_plugin_status_t) and catches every exception, so that none
// crosses the C boundary (ABI rule 3): std::bad_alloc becomes HMC_PLUGIN_ERR_NO_MEMORY, anything
// else HMC_PLUGIN_ERR_INTERNAL. Wrap the body of every slot that can throw.
template <typename F>
hmc_plugin_status_t guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return HMC_PLUGIN_ERR_NO_MEMORY;
  } catch (...) {
    return HMC_PLUGIN_ERR_INTERNAL;
  }
}

// Checks the host services init received, before anything uses them:
//  - present, and large enough to hold every field of this SDK's hmc_host_services_t;
//  - every callback set;
//  - [core_abi_min, core_abi_max] includes abi_version, the ABI this plugin speaks
//    (HMC_NET_ABI_VERSION for a net plugin, HMC_PLUGIN_ABI_VERSION for a device plugin).
// Returns HMC_PLUGIN_SUCCESS, HMC_PLUGIN_ERR_INVALID_ARGUMENT (services missing or incomplete) or
// HMC_PLUGIN_ERR_VERSION, and logs the reason as an error whenever the services can log.
inline hmc_plugin_status_t check_host_services(const hmc_host_services_t* host,
                                               uint32_t abi_version) noexcept {
  if (host == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  const bool can_log = HMC_ABI_HAS_FIELD(host, hmc_host_services_t, log) && host->log != nullptr;
  char msg[256];
  const char* missing = nullptr;
  if (!HMC_ABI_HAS_FIELD(host, hmc_host_services_t, timeout_ms)) {
    std::snprintf(msg, sizeof msg,
                  "the host services are %u bytes, this plugin needs %zu: it was built against "
                  "a newer SDK than the core's",
                  static_cast<unsigned>(host->hdr.struct_size), sizeof(hmc_host_services_t));
    if (can_log) host->log(host->host_ctx, HMC_LOG_ERROR, msg);
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  if (host->log == nullptr)
    missing = "log";
  else if (host->log_enabled == nullptr)
    missing = "log_enabled";
  else if (host->config_get == nullptr)
    missing = "config_get";
  else if (host->now_ns == nullptr)
    missing = "now_ns";
  if (missing != nullptr) {
    std::snprintf(msg, sizeof msg, "the host services lack the %s callback", missing);
    if (can_log) host->log(host->host_ctx, HMC_LOG_ERROR, msg);
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  if (host->core_abi_min > abi_version || host->core_abi_max < abi_version) {
    std::snprintf(msg, sizeof msg,
                  "the core accepts ABI versions %u to %u, not this plugin's %u: build it "
                  "against the SDK of the core that loads it",
                  static_cast<unsigned>(host->core_abi_min),
                  static_cast<unsigned>(host->core_abi_max), static_cast<unsigned>(abi_version));
    host->log(host->host_ctx, HMC_LOG_ERROR, msg);
    return HMC_PLUGIN_ERR_VERSION;
  }
  return HMC_PLUGIN_SUCCESS;
}

}  // namespace hmc::plugin

#endif /* HMC_PLUGIN_BOUNDARY_HPP */
