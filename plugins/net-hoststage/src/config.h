// The plugin's deploy-time settings: one table (name, default, help) that the plugin table
// exports as config_vars, and one parser that validates every value read through the core's
// config_get (with the SDK's hmc/plugin/config.hpp). An invalid value fails init with
// HMC_PLUGIN_ERR_INVALID_ARGUMENT and a logged message naming the variable.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "hmc/plugin/common.h"
#include "log.h"

namespace hmc::hoststage {

struct Config {
  int streams = 2;                        // HMC_HOSTSTAGE_STREAMS
  std::vector<std::string> ifnames;       // HMC_HOSTSTAGE_IFNAMES
  bool shm = true;                        // HMC_HOSTSTAGE_SHM
  bool shm_cma = true;                    // HMC_HOSTSTAGE_SHM_CMA
  size_t eager_limit = 64 << 10;          // HMC_HOSTSTAGE_EAGER_LIMIT (tcp)
  size_t shm_eager_limit = 16 << 10;      // HMC_HOSTSTAGE_SHM_EAGER_LIMIT
  size_t shm_ring = 512 << 10;            // HMC_HOSTSTAGE_SHM_RING (bytes per direction)
  size_t chunk = 512 << 10;               // HMC_HOSTSTAGE_CHUNK (tcp)
  size_t shm_chunk = 4 << 20;             // HMC_HOSTSTAGE_SHM_CHUNK
  size_t sockbuf = 4 << 20;               // HMC_HOSTSTAGE_SOCKBUF (0: kernel autotuning)
  std::string listen_host = "127.0.0.1";  // HMC_LISTEN_HOST (the core's control-plane address)
  int inject_errors = 0;                  // HMC_HOSTSTAGE_INJECT_ERRORS (0: never)
};

// Bounds the parser enforces (also used to size receive buffers).
constexpr size_t kMaxEagerLimit = size_t{1} << 20;
constexpr size_t kMinShmRing = size_t{64} << 10;
constexpr size_t kMaxShmRing = size_t{64} << 20;
constexpr int kMaxStreams = 64;

// NULL-terminated table for hmc_net_plugin_v2_t.config_vars.
extern const hmc_config_var_t kConfigVars[];

// Reads and validates every variable. On failure logs an error naming the variable and returns
// HMC_PLUGIN_ERR_INVALID_ARGUMENT.
hmc_plugin_status_t load_config(const hmc_host_services_t* host, const Log& log, Config* out);

}  // namespace hmc::hoststage
