// Logging through the core's host services (sdk: hmc/plugin/log.hpp); the core prefixes each
// message with "[net/ibverbs] ".
#pragma once

#include "hmc/plugin/log.hpp"

namespace hmc::ibverbs {
using Log = hmc::plugin::Log;
}  // namespace hmc::ibverbs

#define IB_ERROR(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_ERROR, __VA_ARGS__)
#define IB_WARN(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_WARN, __VA_ARGS__)
#define IB_INFO(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_INFO, __VA_ARGS__)
#define IB_DEBUG(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_DEBUG, __VA_ARGS__)
