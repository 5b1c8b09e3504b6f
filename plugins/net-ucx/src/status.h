// UCX statuses as the plugin ABI's, and both as text for log messages.
#pragma once

#include <ucs/type/status.h>

#include "hmc/plugin/common.h"

namespace hmc::ucx {

inline const char* status_name(hmc_plugin_status_t st) {
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
  }
  return "UNKNOWN";
}

// True for the statuses with which UCX reports a broken connection.
inline bool is_connection_error(ucs_status_t st) {
  switch (st) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_SOME_CONNECTS_FAILED:
      return true;
    default:
      return false;
  }
}

// The ABI status for a UCX status of an operation. Cancellation is resolved by the caller (it
// knows whether the user asked for it or the endpoint went away).
inline hmc_plugin_status_t from_ucs(ucs_status_t st) {
  if (st == UCS_OK) return HMC_PLUGIN_SUCCESS;
  if (st == UCS_ERR_MESSAGE_TRUNCATED) return HMC_PLUGIN_ERR_TRUNCATED;
  if (st == UCS_ERR_CANCELED) return HMC_PLUGIN_ERR_CANCELLED;
  if (st == UCS_ERR_NO_MEMORY || st == UCS_ERR_EXCEEDS_LIMIT) return HMC_PLUGIN_ERR_NO_MEMORY;
  if (st == UCS_ERR_INVALID_PARAM || st == UCS_ERR_INVALID_ADDR) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (st == UCS_ERR_UNSUPPORTED) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  if (is_connection_error(st)) return HMC_PLUGIN_ERR_PEER_LOST;
  return HMC_PLUGIN_ERR_INTERNAL;
}

}  // namespace hmc::ucx
