#include "util/status.h"

#include "util/metrics.h"

namespace hmc {
namespace {
thread_local std::string t_last_error;
}

hmc_status_t set_error(hmc_status_t st, std::string msg) {
  count_error(st);
  t_last_error = std::move(msg);
  return st;
}

const char* status_name(hmc_status_t status) {
  switch (status) {
#define HMC_CASE(x) \
  case x: return #x;
    HMC_CASE(HMC_SUCCESS)
    HMC_CASE(HMC_IN_PROGRESS)
    HMC_CASE(HMC_ERR_INVALID_ARGUMENT)
    HMC_CASE(HMC_ERR_INVALID_HANDLE)
    HMC_CASE(HMC_ERR_OUT_OF_BOUNDS)
    HMC_CASE(HMC_ERR_NOT_SUPPORTED)
    HMC_CASE(HMC_ERR_NOT_FOUND)
    HMC_CASE(HMC_ERR_NO_MEMORY)
    HMC_CASE(HMC_ERR_TIMEOUT)
    HMC_CASE(HMC_ERR_PEER_LOST)
    HMC_CASE(HMC_ERR_REMOTE)
    HMC_CASE(HMC_ERR_TRUNCATED)
    HMC_CASE(HMC_ERR_CANCELLED)
    HMC_CASE(HMC_ERR_AUTH)
    HMC_CASE(HMC_ERR_VERSION)
    HMC_CASE(HMC_ERR_CONFIG)
    HMC_CASE(HMC_ERR_NO_PATH)
    HMC_CASE(HMC_ERR_SYSTEM)
    HMC_CASE(HMC_ERR_PLUGIN)
    HMC_CASE(HMC_ERR_PROTOCOL)
    HMC_CASE(HMC_ERR_INTERNAL)
#undef HMC_CASE
  }
  return "HMC_ERR_UNKNOWN";
}

const std::string& last_error() {
  return t_last_error;
}
void clear_error() {
  t_last_error.clear();
}

hmc_status_t from_plugin_status(hmc_plugin_status_t st) {
  switch (st) {
    case HMC_PLUGIN_SUCCESS: return HMC_SUCCESS;
    case HMC_PLUGIN_IN_PROGRESS: return HMC_IN_PROGRESS;
    case HMC_PLUGIN_ERR_NOT_SUPPORTED: return HMC_ERR_NOT_SUPPORTED;
    case HMC_PLUGIN_ERR_NO_DEVICE: return HMC_ERR_NOT_FOUND;
    case HMC_PLUGIN_ERR_VERSION: return HMC_ERR_VERSION;
    case HMC_PLUGIN_ERR_INVALID_ARGUMENT: return HMC_ERR_INVALID_ARGUMENT;
    case HMC_PLUGIN_ERR_NO_MEMORY: return HMC_ERR_NO_MEMORY;
    case HMC_PLUGIN_ERR_REMOTE: return HMC_ERR_REMOTE;
    case HMC_PLUGIN_ERR_PEER_LOST: return HMC_ERR_PEER_LOST;
    case HMC_PLUGIN_ERR_TRUNCATED: return HMC_ERR_TRUNCATED;
    case HMC_PLUGIN_ERR_CANCELLED: return HMC_ERR_CANCELLED;
    case HMC_PLUGIN_ERR_SYSTEM: return HMC_ERR_SYSTEM;
    case HMC_PLUGIN_ERR_INTERNAL: return HMC_ERR_PLUGIN;
    case HMC_PLUGIN_ERR_CONFIG: return HMC_ERR_CONFIG;
  }
  return HMC_ERR_PLUGIN;
}

const char* plugin_status_string(hmc_plugin_status_t st) {
  switch (st) {
    case HMC_PLUGIN_SUCCESS: return "success";
    case HMC_PLUGIN_IN_PROGRESS: return "in progress";
    case HMC_PLUGIN_ERR_NOT_SUPPORTED: return "not supported";
    case HMC_PLUGIN_ERR_NO_DEVICE: return "no device";
    case HMC_PLUGIN_ERR_VERSION: return "incompatible version";
    case HMC_PLUGIN_ERR_INVALID_ARGUMENT: return "invalid argument";
    case HMC_PLUGIN_ERR_NO_MEMORY: return "out of memory";
    case HMC_PLUGIN_ERR_REMOTE: return "refused by the peer";
    case HMC_PLUGIN_ERR_PEER_LOST: return "peer lost";
    case HMC_PLUGIN_ERR_TRUNCATED: return "message truncated";
    case HMC_PLUGIN_ERR_CANCELLED: return "cancelled";
    case HMC_PLUGIN_ERR_INTERNAL: return "internal error";
    case HMC_PLUGIN_ERR_SYSTEM: return "system call failed";
    case HMC_PLUGIN_ERR_CONFIG: return "invalid configuration";
  }
  return "unknown plugin status";
}

}  // namespace hmc
