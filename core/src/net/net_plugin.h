// A loaded net plugin as the core sees it: its table, its context, its devices' properties, and
// the lock that serialises every call into it (net.h promises plugins that no two slots run at
// once on one context).
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "hmc/hmc.h"
#include "hmc/plugin/net.h"

namespace hmc {

// True when `table` (whose header says how large it is) has a non-NULL slot `slot`.
#define HMC_NET_SLOT(table, slot) \
  (HMC_ABI_HAS_FIELD((table), hmc_net_plugin_v2_t, slot) && (table)->slot != nullptr)

class NetPlugin;

struct NetDevice {
  NetPlugin* plugin = nullptr;
  int index = 0;
  std::string name;
  std::string pci_path;
  hmc_net_device_props_t props{};
  std::string key() const;  // "plugin/device", the name HMC_PATH uses
};

class NetPlugin {
 public:
  NetPlugin(const hmc_net_plugin_v2_t* table, hmc_net_ctx_t* ctx, std::string name,
            const hmc_host_services_t* host = nullptr);
  NetPlugin(const NetPlugin&) = delete;
  NetPlugin& operator=(const NetPlugin&) = delete;

  // Reads the device list and properties. Fails when the plugin misreports them.
  hmc_status_t query_devices();

  const std::string& name() const { return name_; }
  const hmc_net_plugin_v2_t* table() const { return table_; }
  hmc_net_ctx_t* ctx() const { return ctx_; }
  // The services ctx was created with (nullptr when unknown): another context of the same
  // plugin can be created with them.
  const hmc_host_services_t* host_services() const { return host_; }
  std::vector<NetDevice>& devices() { return devices_; }
  const std::vector<NetDevice>& devices() const { return devices_; }
  std::mutex& mutex() { return mutex_; }

  // The plugin's wake-up fd, or -1 (queried once, under the lock).
  int wait_fd();
  bool can_arm() const { return HMC_NET_SLOT(table_, arm); }

 private:
  // Every call into the plugin reads these three: they share a cache line.
  const hmc_net_plugin_v2_t* table_;
  hmc_net_ctx_t* ctx_;
  std::mutex mutex_;
  std::string name_;
  const hmc_host_services_t* host_;
  std::vector<NetDevice> devices_;
  int wait_fd_ = -2;  // -2: not queried yet
};

}  // namespace hmc
