// Logging through the core's host services (sdk: hmc/plugin/log.hpp); the core prefixes each
// message with "[net/hoststage] ".
#pragma once

#include "hmc/plugin/log.hpp"

namespace hmc::hoststage {
using Log = hmc::plugin::Log;
}  // namespace hmc::hoststage

#define HS_ERROR(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_ERROR, __VA_ARGS__)
#define HS_WARN(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_WARN, __VA_ARGS__)
#define HS_INFO(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_INFO, __VA_ARGS__)
#define HS_DEBUG(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_DEBUG, __VA_ARGS__)
#define HS_TRACE(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_TRACE, __VA_ARGS__)
