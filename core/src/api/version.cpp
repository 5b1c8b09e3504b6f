// Library identity functions of the public API.
#include "hmc/hmc.h"
#include "util/status.h"

extern "C" {

HMC_API const char* hmc_version(void) {
  return HMC_VERSION_STRING;
}

HMC_API const char* hmc_last_error(void) {
  return hmc::last_error().c_str();
}

HMC_API const char* hmc_status_string(hmc_status_t status) {
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
}
