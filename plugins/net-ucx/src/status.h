// UCX statuses as the plugin ABI's, and the ABI's as text for log messages (the SDK's
// status_name).
#pragma once

#include <ucs/type/status.h>

#include "hmc/plugin/common.h"
#include "hmc/plugin/status.hpp"

namespace hmc::ucx {

using hmc::plugin::status_name;

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
    case UCS_ERR_SOME_CONNECTS_FAILED: return true;
    default: return false;
  }
}

// The ABI status for a UCX status of an operation. Cancellation is resolved by the caller (it
// knows whether the user asked for it or the endpoint went away).
inline hmc_plugin_status_t from_ucs(ucs_status_t st) {
  if (st == UCS_OK) return HMC_PLUGIN_SUCCESS;
  if (st == UCS_ERR_MESSAGE_TRUNCATED) return HMC_PLUGIN_ERR_TRUNCATED;
  if (st == UCS_ERR_CANCELED) return HMC_PLUGIN_ERR_CANCELLED;
  if (st == UCS_ERR_NO_MEMORY || st == UCS_ERR_EXCEEDS_LIMIT) return HMC_PLUGIN_ERR_NO_MEMORY;
  if (st == UCS_ERR_INVALID_PARAM || st == UCS_ERR_INVALID_ADDR)
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (st == UCS_ERR_UNSUPPORTED) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  if (is_connection_error(st)) return HMC_PLUGIN_ERR_PEER_LOST;
  return HMC_PLUGIN_ERR_INTERNAL;
}

}  // namespace hmc::ucx
