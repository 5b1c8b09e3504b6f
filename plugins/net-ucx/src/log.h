// Logging through the core's host services (sdk: hmc/plugin/log.hpp); the core prefixes each
// message with "[net/ucx] ".
#pragma once

#include "hmc/plugin/log.hpp"

namespace hmc::ucx {
using Log = hmc::plugin::Log;
}  // namespace hmc::ucx

// The functions on the path of every message, kept together by the compiler (see the core's
// util/hot.h).
#if defined(__GNUC__)
#define UX_HOT __attribute__((hot))
#else
#define UX_HOT
#endif

#define UX_ERROR(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_ERROR, __VA_ARGS__)
#define UX_WARN(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_WARN, __VA_ARGS__)
#define UX_INFO(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_INFO, __VA_ARGS__)
#define UX_DEBUG(log, ...) HMC_PLUGIN_LOG(log, HMC_LOG_DEBUG, __VA_ARGS__)
