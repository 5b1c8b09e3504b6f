// The C boundary every device plugin shares: the hmc_device_plugin_v1 table and its slots, built
// around one vendor Backend. A plugin supplies a PluginInfo and exports its table with
// HMC_DEVPLUG_ENTRY:
//
//   const hmc::devplug::PluginInfo kInfo = {"cuda", "NVIDIA", "0.1.0", "HMC_CUDA_LIBRARY",
//                                           kConfigVars, &make_cuda_backend};
//   HMC_DEVPLUG_ENTRY(kInfo)
//
// What the shared slots do, so that backends need not: check every argument (device index, NULL
// pointers, struct sizes, copy kinds, bounds of known allocations); keep the device list found at
// init; wrap native streams and events with their device; record every allocation, pinned or
// registered host range and IPC mapping (ptr_query answers for those without a runtime call;
// finalize releases what the caller left behind, with a warning); frame IPC handles
// (ipc_envelope.h); compute page-aligned dma-buf ranges; catch every C++ exception at the boundary.
#pragma once

#include <memory>

#include "devplug/backend.h"
#include "hmc/plugin/device.h"

namespace hmc::devplug {

struct PluginInfo {
  const char* name;         // "cuda": the device-name prefix and the loader's plugin name
  const char* vendor;       // "NVIDIA"
  const char* version;      // the plugin's own version
  const char* library_var;  // "HMC_CUDA_LIBRARY": names the runtime library to open instead
  const hmc_config_var_t* config_vars;  // must declare library_var
  std::unique_ptr<Backend> (*create_backend)();
  hmc_mem_iface_t mem_iface;  // the interface of the devices' memory, for net plugins
};

// The slots' implementation of init, for the entry point's init function.
hmc_plugin_status_t init_device_plugin(const PluginInfo& info, const hmc_host_services_t* host,
                                       hmc_device_ctx_t** ctx);
// A table with every slot filled; init must call init_device_plugin(info, ...).
hmc_device_plugin_v1_t make_device_table(const PluginInfo& info,
                                         hmc_plugin_status_t (*init)(const hmc_host_services_t*,
                                                                     hmc_device_ctx_t**));

}  // namespace hmc::devplug

// Defines the plugin's entry symbol hmc_device_plugin_v1 for the PluginInfo `info` (an object
// with static storage duration).
#define HMC_DEVPLUG_ENTRY(info)                                                           \
  namespace {                                                                             \
  hmc_plugin_status_t devplug_entry_init(const hmc_host_services_t* host,                 \
                                         hmc_device_ctx_t** ctx) {                        \
    return ::hmc::devplug::init_device_plugin(info, host, ctx);                           \
  }                                                                                       \
  }                                                                                       \
  extern "C" HMC_PLUGIN_EXPORT const hmc_device_plugin_v1_t* hmc_device_plugin_v1(void) { \
    static const hmc_device_plugin_v1_t table =                                           \
        ::hmc::devplug::make_device_table(info, devplug_entry_init);                      \
    return &table;                                                                        \
  }
