// Logging for device plugins through the core's host services (sdk: hmc/plugin/log.hpp); the
// core prefixes each message with "[device/<name>] ".
#pragma once

#include "hmc/plugin/log.hpp"

namespace hmc::devplug {
using Log = hmc::plugin::Log;
}  // namespace hmc::devplug

#define DP_LOG(log, level, ...) HMC_PLUGIN_LOG(log, level, __VA_ARGS__)
#define DP_ERROR(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_ERROR, __VA_ARGS__)
#define DP_WARN(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_WARN, __VA_ARGS__)
#define DP_INFO(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_INFO, __VA_ARGS__)
#define DP_DEBUG(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_DEBUG, __VA_ARGS__)
