// Provider discovery: which libfabric providers and domains this context opens, and what each
// one offers. Runs fi_getinfo with the capabilities the plugin wants and steps down from there
// (with and without FI_HMEM, FI_DIRECTED_RECV, FI_RMA), so that a provider missing a capability
// still serves what it can and the log says what is missing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config.h"
#include "fid.h"
#include "log.h"

namespace hmc::ofi {

struct DeviceChoice {
  FiInfoPtr info;                  // exactly one fi_info (next == NULL) to open
  std::string name;                // the device name: the core provider's name ("tcp", "shm")
  bool rma = false;                // FI_RMA granted
  bool directed = false;           // FI_DIRECTED_RECV granted
  bool delivery_complete = false;  // fi_getinfo accepts FI_DELIVERY_COMPLETE as an op flag
  bool hmem = false;               // FI_HMEM granted
  uint64_t mem_ifaces = 0;  // HMC_MEM_IFACE_BIT of the interfaces this device reaches directly
};

// The devices to open, in order. When the list is empty, *why_none says why (for the log and
// the NO_DEVICE answer).
std::vector<DeviceChoice> discover(const Config& cfg, const Log& log, std::string* why_none);

// "tcp;ofi_rxm" -> "tcp": the provider a user names in HMC_OFI_PROVIDER.
std::string core_provider_name(const char* prov_name);

// Providers that reach only processes on the same host.
bool same_host_provider(const std::string& name);

}  // namespace hmc::ofi
