// Status codes as text (for log messages) and as they travel in a header's status field.
#pragma once

#include <cstdint>

#include "hmc/plugin/common.h"

namespace hmc::hoststage {

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

// A peer's status field; anything this version does not know becomes INTERNAL.
inline hmc_plugin_status_t status_from_wire(int16_t v) {
  if (v <= HMC_PLUGIN_SUCCESS && v >= HMC_PLUGIN_ERR_SYSTEM)
    return static_cast<hmc_plugin_status_t>(v);
  return HMC_PLUGIN_ERR_INTERNAL;
}

}  // namespace hmc::hoststage
