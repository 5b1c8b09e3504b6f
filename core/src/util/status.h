// Status codes and the calling thread's error message (hmc_last_error).
#pragma once

#include <fmt/format.h>

#include <string>

#include "hmc/hmc.h"
#include "hmc/plugin/common.h"

namespace hmc {

// "HMC_ERR_PEER_LOST" (hmc_status_string).
const char* status_name(hmc_status_t status);

// Records msg as the calling thread's last error (and counts the error by code for the metrics,
// util/metrics.h) and returns st, so that a failure reads
//   return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_send: buf is NULL with size {}", size);
hmc_status_t set_error(hmc_status_t st, std::string msg);

template <typename... Args>
hmc_status_t fail(hmc_status_t st, fmt::format_string<Args...> f, Args&&... args) {
  return set_error(st, fmt::format(f, std::forward<Args>(args)...));
}

const std::string& last_error();
void clear_error();

// Maps a plugin status onto the public one.
hmc_status_t from_plugin_status(hmc_plugin_status_t st);
const char* plugin_status_string(hmc_plugin_status_t st);

}  // namespace hmc
