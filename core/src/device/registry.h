// Every memory the context can allocate and copy: host memory (built in) and the devices of the
// loaded device plugins, named "host", "cuda:0", "hip:1" ...
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "hmc/hmc.h"
#include "hmc/plugin/device.h"

namespace hmc {

#define HMC_DEVICE_SLOT(table, slot) \
  (HMC_ABI_HAS_FIELD((table), hmc_device_plugin_v1_t, slot) && (table)->slot != nullptr)

struct Device {
  std::string name;  // "host", "cuda:0"
  std::string plugin_name;  // "builtin" for host
  const hmc_device_plugin_v1_t* plugin = nullptr;  // nullptr for host
  hmc_device_ctx_t* plugin_ctx = nullptr;
  int index = -1;  // plugin's device index; -1 for host
  std::string model;
  std::string pci_bus_id;
  uint8_t uuid[16] = {};
  int32_t numa_node = -1;
  uint64_t mem_bytes = 0;
  uint32_t caps = 0;
  bool is_host() const { return plugin == nullptr; }
};

// Where a pointer lives.
struct MemoryLocation {
  const Device* device = nullptr;  // host for ordinary or unknown memory
  uint64_t base = 0;
  uint64_t size = 0;               // 0 when the allocation is unknown (user host memory)
};

class DeviceRegistry {
 public:
  DeviceRegistry();
  // Adds the devices of a loaded device plugin.
  void add_plugin(const hmc_device_plugin_v1_t* table, hmc_device_ctx_t* ctx);

  const std::vector<Device>& devices() const { return devices_; }
  const Device* find(const std::string& name) const;

  hmc_status_t alloc(const std::string& device, size_t size, void** ptr);
  hmc_status_t free(void* ptr);
  // Resolves the device owning ptr (plugins are asked; anything unclaimed is host memory).
  MemoryLocation locate(const void* ptr) const;
  hmc_status_t copy(void* dst, const void* src, size_t size);
  // Frees everything still allocated through this registry.
  void release_all();

 private:
  std::vector<Device> devices_;
  struct Allocation {
    const Device* device;
    size_t size;
  };
  mutable std::mutex mutex_;
  std::map<uintptr_t, Allocation> allocations_;
};

}  // namespace hmc
