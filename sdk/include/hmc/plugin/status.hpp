/*
 * Status codes as text, for a C++ plugin's log messages.
 *
 * Header-only C++17 and no part of the ABI, like the other C++ helpers beside it (log.hpp,
 * boundary.hpp, config.hpp): it is compiled into the plugin that includes it.
 *
 *   HMC_PLUGIN_LOG(log, HMC_LOG_ERROR, "handshake failed (%s)", hmc::plugin::status_name(st));
 */
#ifndef HMC_PLUGIN_STATUS_HPP
#define HMC_PLUGIN_STATUS_HPP

#include "hmc/plugin/common.h"

namespace hmc::plugin {

// The code's name without its HMC_PLUGIN_ / HMC_PLUGIN_ERR_ prefix ("SUCCESS", "NOT_SUPPORTED",
// "PEER_LOST"), or "UNKNOWN" for a value this SDK does not define.
constexpr const char* status_name(hmc_plugin_status_t st) noexcept {
  switch (st) {
    case HMC_PLUGIN_SUCCESS: return "SUCCESS";
    case HMC_PLUGIN_IN_PROGRESS: return "IN_PROGRESS";
    case HMC_PLUGIN_ERR_NOT_SUPPORTED: return "NOT_SUPPORTED";
    case HMC_PLUGIN_ERR_NO_DEVICE: return "NO_DEVICE";
    case HMC_PLUGIN_ERR_VERSION: return "VERSION";
    case HMC_PLUGIN_ERR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case HMC_PLUGIN_ERR_NO_MEMORY: return "NO_MEMORY";
    case HMC_PLUGIN_ERR_REMOTE: return "REMOTE";
    case HMC_PLUGIN_ERR_PEER_LOST: return "PEER_LOST";
    case HMC_PLUGIN_ERR_TRUNCATED: return "TRUNCATED";
    case HMC_PLUGIN_ERR_CANCELLED: return "CANCELLED";
    case HMC_PLUGIN_ERR_INTERNAL: return "INTERNAL";
    case HMC_PLUGIN_ERR_SYSTEM: return "SYSTEM";
    case HMC_PLUGIN_ERR_CONFIG: return "CONFIG";
  }
  return "UNKNOWN";
}

// The same for a status carried in an int (a slot's result stored by a caller, a wire field).
constexpr const char* status_name(int st) noexcept {
  return status_name(static_cast<hmc_plugin_status_t>(st));
}

}  // namespace hmc::plugin

#endif /* HMC_PLUGIN_STATUS_HPP */
