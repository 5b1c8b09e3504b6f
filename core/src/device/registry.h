// Every memory the context can allocate and copy: host memory (built in) and the devices of the
// loaded device plugins, named "host", "cuda:0", "hip:1" ...
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hmc/hmc.h"
#include "hmc/plugin/device.h"

namespace hmc {

class Config;
class CopyEngine;
class StagePool;

#define HMC_DEVICE_SLOT(table, slot) \
  (HMC_ABI_HAS_FIELD((table), hmc_device_plugin_v1_t, slot) && (table)->slot != nullptr)

struct Device {
  std::string name;                                // "host", "cuda:0"
  std::string plugin_name;                         // "builtin" for host
  const hmc_device_plugin_v1_t* plugin = nullptr;  // nullptr for host
  hmc_device_ctx_t* plugin_ctx = nullptr;
  int index = -1;  // plugin's device index; -1 for host
  std::string model;
  std::string pci_bus_id;
  uint8_t uuid[16] = {};
  int32_t numa_node = -1;
  uint64_t mem_bytes = 0;
  uint32_t caps = 0;
  uint64_t copy_bandwidth_MBps = 0;  // declared by the plugin; 0: unknown
  // The interface of its memory (hmc_mem_iface_t) as the plugin declares it; -1: not declared,
  // so no net device reaches it natively (dma-buf export may still work).
  int mem_iface = -1;
  bool is_host() const { return plugin == nullptr; }
};

// Where a pointer lives.
struct MemoryLocation {
  const Device* device = nullptr;  // host for ordinary or unknown memory
  uint64_t base = 0;
  uint64_t size = 0;  // 0 when the allocation is unknown (user host memory)
  // Set (device is then host) when the pointer lies in device memory that hmc_mem_free released
  // and nothing has mapped since: a use after free, refused by copies rather than faulting.
  const Device* freed_from = nullptr;
};

// Sizes of the copy engine and its staging pool (HMC_STAGE_*), and the bound of hmc_mem_copy.
struct CopySettings {
  size_t stage_chunk = 2u << 20;        // HMC_STAGE_CHUNK
  int stage_depth = 4;                  // HMC_STAGE_DEPTH
  size_t stage_pool_bytes = 64u << 20;  // HMC_STAGE_POOL_BYTES
  int timeout_ms = 30000;               // HMC_TIMEOUT_MS
  // Reads and range-checks HMC_STAGE_CHUNK, HMC_STAGE_DEPTH and HMC_STAGE_POOL_BYTES (the
  // config table has already checked they parse). HMC_ERR_CONFIG naming the variable when out
  // of range. timeout_ms is the context's HMC_TIMEOUT_MS.
  static hmc_status_t from_config(const Config& cfg, int timeout_ms, CopySettings* out);
};

class DeviceRegistry {
 public:
  DeviceRegistry();
  ~DeviceRegistry();  // ends the copy engine and staging pool (not the allocations)
  DeviceRegistry(const DeviceRegistry&) = delete;
  DeviceRegistry& operator=(const DeviceRegistry&) = delete;
  // Adds the devices of a loaded device plugin. All plugins are added before the first copy
  // (the copy engine and staging pool see the devices present when they are created).
  void add_plugin(const hmc_device_plugin_v1_t* table, hmc_device_ctx_t* ctx);
  // Sizes for the copy engine and staging pool; takes effect only before the first copy (or
  // first copy_engine()/stage_pool() call), which creates them.
  void set_copy_settings(const CopySettings& s);
  const CopySettings& copy_settings() const { return settings_; }

  const std::vector<Device>& devices() const { return devices_; }
  const Device* find(const std::string& name) const;

  hmc_status_t alloc(const std::string& device, size_t size, void** ptr);
  hmc_status_t free(void* ptr);
  // Resolves the device owning ptr (plugins are asked; anything unclaimed is host memory).
  MemoryLocation locate(const void* ptr) const;
  // hmc_mem_copy: any two memories (host, any vendor's device), blocking, bounded by the
  // settings' timeout. Checks size against both allocations when they are known.
  hmc_status_t copy(void* dst, const void* src, size_t size);
  // HMC_ERR_OUT_OF_BOUNDS when [ptr, ptr+size) overruns the allocation loc describes;
  // HMC_ERR_INVALID_HANDLE when loc is freed device memory. `what` prefixes the message.
  static hmc_status_t check_range(const char* what, const void* ptr, const MemoryLocation& loc,
                                  size_t size);
  // The context's copy engine and staging pool, created on first use. Thread-safe.
  CopyEngine& copy_engine();
  StagePool& stage_pool();
  // Ends the copy engine and the staging pool (their streams, events, pinned slabs), then frees
  // everything still allocated through this registry. Call before the plugins are finalized.
  void release_all();

 private:
  void forget_freed_locked(uintptr_t base, size_t size);

  std::vector<Device> devices_;
  struct Allocation {
    const Device* device;
    size_t size;
  };
  mutable std::mutex mutex_;
  std::map<uintptr_t, Allocation> allocations_;
  // Device memory released by free() (the newest kFreedMax), so that a copy from or into it
  // is refused with a clear message instead of faulting.
  std::map<uintptr_t, Allocation> freed_;
  std::deque<uintptr_t> freed_order_;

  CopySettings settings_;
  std::mutex engine_mutex_;
  std::unique_ptr<StagePool> stage_;  // declared before the engine: destroyed after it
  std::unique_ptr<CopyEngine> engine_;
};

}  // namespace hmc
