// Status codes as text (for log messages: the SDK's status_name) and as they travel in a header's
// status field.
#pragma once

#include <cstdint>

#include "hmc/plugin/common.h"
#include "hmc/plugin/status.hpp"

namespace hmc::hoststage {

using hmc::plugin::status_name;

// A peer's status field; anything this version does not know becomes INTERNAL.
inline hmc_plugin_status_t status_from_wire(int16_t v) {
  if (v <= HMC_PLUGIN_SUCCESS && v >= HMC_PLUGIN_ERR_SYSTEM)
    return static_cast<hmc_plugin_status_t>(v);
  return HMC_PLUGIN_ERR_INTERNAL;
}

}  // namespace hmc::hoststage
