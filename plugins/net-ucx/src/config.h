// Deploy-time settings of the ucx plugin (HMC_UCX_*), read through the core's config_get, and how
// they become UCX's own configuration.
#pragma once

#include <string>

#include "hmc/plugin/common.h"
#include "log.h"

namespace hmc::ucx {

// Declared to the core (hmc_net_plugin_v2_t.config_vars), NULL-terminated.
extern const hmc_config_var_t kConfigVars[];

struct Config {
  std::string tls;          // HMC_UCX_TLS -> UCX_TLS ("" = UCX's own setting)
  std::string net_devices;  // HMC_UCX_NET_DEVICES -> UCX_NET_DEVICES ("" = UCX's own setting)
  bool wakeup = true;       // HMC_UCX_WAKEUP: offer wait_fd/arm (UCP_FEATURE_WAKEUP)
  // HMC_UCX_ERROR_MODE: endpoints use UCP_ERR_HANDLING_MODE_PEER (true) or NONE (false).
  bool peer_errors = true;
  bool error_mode_auto = true;  // HMC_UCX_ERROR_MODE=auto: peer_errors follows the transports

  // Reads every variable; false (with an error logged naming the variable) on a bad value.
  bool read(const hmc_host_services_t* host, const Log& log);
};

}  // namespace hmc::ucx
