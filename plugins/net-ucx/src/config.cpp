#include "config.h"

#include <cctype>

#include "hmc/plugin/config.hpp"

namespace hmc::ucx {

const hmc_config_var_t kConfigVars[] = {
    {"HMC_UCX_TLS", "",
     "UCX transports to use, passed to UCX as UCX_TLS (e.g. \"tcp\", \"posix,cma,self\", "
     "\"rc,sm\"); empty: UCX's own choice (UCX_TLS, default all)"},
    {"HMC_UCX_NET_DEVICES", "",
     "network devices UCX may use, passed as UCX_NET_DEVICES (e.g. \"mlx5_0:1,eth0\"); "
     "empty: UCX's own choice"},
    {"HMC_UCX_WAKEUP", "1",
     "offer a wait fd so an idle core can sleep (UCP_FEATURE_WAKEUP); 0: the core polls"},
    {"HMC_UCX_ERROR_MODE", "auto",
     "peer: UCX reports broken connections and a dead peer fails only its requests "
     "(UCP_ERR_HANDLING_MODE_PEER; UCX 1.13 then uses neither cma nor several tcp lanes); "
     "none: UCX's fastest lanes, but UCX 1.13 aborts the process when a shared-memory peer dies "
     "during a cma transfer (for peers that live and die together); auto: none when "
     "HMC_UCX_TLS names no shared-memory transport (a dead peer is then found by the process "
     "watch and the core's control plane), else peer"},
    {nullptr, nullptr, nullptr},
};

namespace {

// UCX lists: comma-separated names of letters, digits, '_', ':', '.', '-', with an optional
// leading '^' (exclusion). Anything else is a typo better reported here than by UCX's parser.
bool valid_list(const std::string& s) {
  size_t start = (!s.empty() && s[0] == '^') ? 1 : 0;
  if (start >= s.size()) return false;
  bool empty_item = true;
  for (size_t i = start; i < s.size(); ++i) {
    char c = s[i];
    if (c == ',') {
      if (empty_item) return false;
      empty_item = true;
      continue;
    }
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '.' ||
          c == '-'))
      return false;
    empty_item = false;
  }
  return !empty_item;
}

}  // namespace

bool Config::read(const hmc_host_services_t* host, const Log& log) {
  hmc::plugin::ConfigReader r(host, log);
  tls = r.text("HMC_UCX_TLS");
  if (!tls.empty() && !valid_list(tls))
    return r.invalid("HMC_UCX_TLS", tls, "a comma-separated list of UCX transport names");
  net_devices = r.text("HMC_UCX_NET_DEVICES");
  if (!net_devices.empty() && !valid_list(net_devices))
    return r.invalid("HMC_UCX_NET_DEVICES", net_devices, "a comma-separated list of device names");
  if (!r.read_bool("HMC_UCX_WAKEUP", &wakeup)) return false;
  enum { kAuto, kPeer, kNone };
  int mode = kAuto;
  if (!r.read_choice("HMC_UCX_ERROR_MODE", {"auto", "peer", "none"}, &mode)) return false;
  error_mode_auto = mode == kAuto;
  peer_errors = mode != kNone;  // auto: decided once the transports are known
  return true;
}

}  // namespace hmc::ucx
