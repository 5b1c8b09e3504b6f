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
  return hmc::status_name(status);
}
}
