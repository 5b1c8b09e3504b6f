// The plugin's deploy-time settings: one table (name, default, help) exported as config_vars,
// and one parser that validates every value read through the core's config_get. An invalid
// value fails init with HMC_PLUGIN_ERR_INVALID_ARGUMENT and a message naming the variable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hmc/plugin/common.h"
#include "log.h"
#include "select.h"

namespace hmc::ibverbs {

struct Config {
  std::string library = "libibverbs.so.1";   // HMC_IBVERBS_LIBRARY
  HcaFilter hca;                             // HMC_IB_HCA
  int gid_index = -1;                        // HMC_IB_GID_INDEX (-1: automatic)
  int timeout = -1;                          // HMC_IB_TIMEOUT (-1: from the host's timeout)
  int retry_cnt = 7;                         // HMC_IB_RETRY_CNT
  size_t eager_limit = 8192;                 // HMC_IB_EAGER_LIMIT (payload bytes)
  uint32_t credits = 32;                     // HMC_IB_CREDITS (eager messages in flight per peer)
  size_t chunk = size_t{1} << 20;            // HMC_IB_CHUNK (largest single RDMA READ/WRITE)
  size_t mr_cache = size_t{1} << 30;         // HMC_IB_MR_CACHE (bytes kept registered, 0: off)
  int rails = 1;                             // HMC_IB_RAILS (ports one endpoint stripes over)
  PeermemMode peermem = PeermemMode::kAuto;  // HMC_IB_PEERMEM
  std::string fabric;                        // HMC_IB_FABRIC (every port's fabric; "": its network)
  std::string listen_host = "127.0.0.1";     // HMC_LISTEN_HOST (the core's)
};

constexpr size_t kMaxEagerLimit = size_t{64} << 10;
// HMC_IB_FABRIC: what hmc_net_info_t.fabric holds.
constexpr size_t kMaxFabric = 63;

// NULL-terminated table for hmc_net_plugin_v2_t.config_vars.
extern const hmc_config_var_t kConfigVars[];

hmc_plugin_status_t load_config(const hmc_host_services_t* host, const Log& log, Config* out);

// The RC local ACK timeout exponent (4.096 us x 2^t per try) for which every retry together
// (retry_cnt + 1 tries) stays within half of timeout_ms, clamped to [8, 24].
int timeout_for(uint32_t timeout_ms, int retry_cnt);

}  // namespace hmc::ibverbs
