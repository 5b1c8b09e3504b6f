// What makes a plugin table acceptable: the checks the loader runs on a table before init, and on
// the devices a plugin reports after init. Each returns "" when the table passes, else the reason
// in words that name the offending field or slot (these texts reach the log and hmc-info, and the
// loader tests match them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hmc/plugin/ccl.h"
#include "hmc/plugin/device.h"
#include "hmc/plugin/net.h"

namespace hmc::plugin {

// The ABI versions this core accepts, per plugin kind: device plugins speak the device ABI 1, net
// plugins the net ABI 2 (a version 1 net plugin is refused with a reason: loader.cpp).
constexpr uint32_t kDeviceAbiMin = HMC_PLUGIN_ABI_VERSION;
constexpr uint32_t kDeviceAbiMax = HMC_PLUGIN_ABI_VERSION;
constexpr uint32_t kNetAbiMin = HMC_NET_ABI_VERSION;
constexpr uint32_t kNetAbiMax = HMC_NET_ABI_VERSION;
constexpr uint32_t kCclAbiMin = HMC_CCL_ABI_VERSION;
constexpr uint32_t kCclAbiMax = HMC_CCL_ABI_VERSION;

// Bytes of a table up to and including its last required slot.
size_t net_table_min_size();
size_t device_table_min_size();
size_t ccl_table_min_size();

// Header, name and required slots of a table as the plugin returned it.
std::string check_net_table(const hmc_net_plugin_v2_t* table);
std::string check_device_table(const hmc_device_plugin_v1_t* table);
// Also the declarations: mem_iface a device interface, dtypes and ops within the known values.
std::string check_ccl_table(const hmc_ccl_plugin_v1_t* table);
// A plugin name: non-empty, [a-z0-9_]+.
std::string check_name(const char* name);

// After a successful init. `table` is the loader's zero-extended copy, so an optional slot is
// "offered" exactly when it is non-NULL. Fills *count with the number of devices, and for device
// plugins with 0 devices *unavailable with the plugin's reason (may stay empty).
std::string check_net_devices(const hmc_net_plugin_v2_t* table, hmc_net_ctx_t* ctx, int* count);
std::string check_device_devices(const hmc_device_plugin_v1_t* table, hmc_device_ctx_t* ctx,
                                 int* count, std::string* unavailable);
// *library: library_version's text ("" when none); *unavailable: the reason when 0 devices.
std::string check_ccl_devices(const hmc_ccl_plugin_v1_t* table, hmc_ccl_ctx_t* ctx, int* count,
                              std::string* unavailable, std::string* library);

// "internal error (-10)".
std::string status_text(int status);

}  // namespace hmc::plugin
