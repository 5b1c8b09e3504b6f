// Logging through the core's host services (sdk: hmc/plugin/log.hpp); the core prefixes each
// message with "[net/ofi] ".
#pragma once

#include "hmc/plugin/log.hpp"

namespace hmc::ofi {
using Log = hmc::plugin::Log;
}  // namespace hmc::ofi

#define OFI_ERROR(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_ERROR, __VA_ARGS__)
#define OFI_WARN(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_WARN, __VA_ARGS__)
#define OFI_INFO(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_INFO, __VA_ARGS__)
#define OFI_DEBUG(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_DEBUG, __VA_ARGS__)
#define OFI_TRACE(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_TRACE, __VA_ARGS__)
