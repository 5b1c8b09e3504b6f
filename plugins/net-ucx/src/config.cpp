#include "config.h"

#include <cctype>
#include <cstring>

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

std::string trimmed(const char* v) {
  if (v == nullptr) return "";
  std::string s(v);
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool parse_bool(const std::string& s, bool* out) {
  std::string l;
  for (char c : s) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "1" || l == "y" || l == "yes" || l == "on" || l == "true") {
    *out = true;
    return true;
  }
  if (l == "0" || l == "n" || l == "no" || l == "off" || l == "false") {
    *out = false;
    return true;
  }
  return false;
}

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
  auto get = [&](const char* name) { return trimmed(host->config_get(host->host_ctx, name)); };
  tls = get("HMC_UCX_TLS");
  if (!tls.empty() && !valid_list(tls)) {
    log.write(HMC_LOG_ERROR, "HMC_UCX_TLS=\"%s\" is not a comma-separated list of UCX transport "
              "names", tls.c_str());
    return false;
  }
  net_devices = get("HMC_UCX_NET_DEVICES");
  if (!net_devices.empty() && !valid_list(net_devices)) {
    log.write(HMC_LOG_ERROR, "HMC_UCX_NET_DEVICES=\"%s\" is not a comma-separated list of "
              "device names", net_devices.c_str());
    return false;
  }
  std::string w = get("HMC_UCX_WAKEUP");
  if (!w.empty() && !parse_bool(w, &wakeup)) {
    log.write(HMC_LOG_ERROR, "HMC_UCX_WAKEUP=\"%s\" is not a boolean (0/1, on/off, yes/no)",
              w.c_str());
    return false;
  }
  std::string m = get("HMC_UCX_ERROR_MODE");
  error_mode_auto = m.empty() || m == "auto";
  if (error_mode_auto || m == "peer") {
    peer_errors = true;  // auto: decided once the transports are known
  } else if (m == "none") {
    peer_errors = false;
  } else {
    log.write(HMC_LOG_ERROR, "HMC_UCX_ERROR_MODE=\"%s\" is not \"auto\", \"peer\" or \"none\"",
              m.c_str());
    return false;
  }
  return true;
}

}  // namespace hmc::ucx
