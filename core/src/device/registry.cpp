#include "device/registry.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "util/log.h"
#include "util/status.h"

namespace hmc {

DeviceRegistry::DeviceRegistry() {
  Device host;
  host.name = "host";
  host.plugin_name = "builtin";
  host.model = "host memory";
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) host.mem_bytes = static_cast<uint64_t>(pages) * page;
  devices_.reserve(64);  // pointers to devices stay valid: they are handed out by locate()
  devices_.push_back(host);
}

void DeviceRegistry::add_plugin(const hmc_device_plugin_v1_t* table, hmc_device_ctx_t* ctx) {
  int count = 0;
  if (table->device_count(ctx, &count) != HMC_PLUGIN_SUCCESS) return;
  for (int i = 0; i < count && devices_.size() < devices_.capacity(); ++i) {
    hmc_device_props_t info{};
    info.hdr = HMC_ABI_HEADER_INIT(hmc_device_props_t);
    if (table->device_info(ctx, i, &info) != HMC_PLUGIN_SUCCESS) {
      HMC_LOG_W("device plugin {}: device_info({}) failed; device skipped", table->name, i);
      continue;
    }
    Device d;
    d.name = fmt::format("{}:{}", table->name, i);
    d.plugin_name = table->name;
    d.plugin = table;
    d.plugin_ctx = ctx;
    d.index = i;
    d.model = info.name ? info.name : "";
    d.pci_bus_id = info.pci_bus_id ? info.pci_bus_id : "";
    memcpy(d.uuid, info.uuid, sizeof d.uuid);
    d.numa_node = info.numa_node;
    d.mem_bytes = info.mem_bytes;
    d.caps = info.caps;
    devices_.push_back(std::move(d));
  }
}

const Device* DeviceRegistry::find(const std::string& name) const {
  for (const auto& d : devices_)
    if (d.name == name) return &d;
  return nullptr;
}

hmc_status_t DeviceRegistry::alloc(const std::string& name, size_t size, void** ptr) {
  const Device* d = find(name);
  if (!d) {
    std::string known;
    for (const auto& x : devices_) known += (known.empty() ? "" : ", ") + x.name;
    return fail(HMC_ERR_NOT_FOUND, "hmc_mem_alloc: no device '{}' (devices: {})", name, known);
  }
  void* p = nullptr;
  if (d->is_host()) {
    // Page-aligned so that it can be registered with any transport.
    size_t page = static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
    if (size > SIZE_MAX - page)
      return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_mem_alloc: size {} overflows", size);
    int rc = posix_memalign(&p, page, (size + page - 1) / page * page);
    if (rc != 0)
      return fail(HMC_ERR_NO_MEMORY, "hmc_mem_alloc: {} bytes of host memory: {}", size,
                  strerror(rc));
  } else {
    hmc_plugin_status_t st = d->plugin->mem_alloc(d->plugin_ctx, d->index, size, &p);
    if (st != HMC_PLUGIN_SUCCESS || !p)
      return fail(st == HMC_PLUGIN_ERR_NO_MEMORY ? HMC_ERR_NO_MEMORY : from_plugin_status(st),
                  "hmc_mem_alloc: {} bytes on {}: {}", size, d->name, plugin_status_string(st));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_[reinterpret_cast<uintptr_t>(p)] = {d, size};
  *ptr = p;
  return HMC_SUCCESS;
}

hmc_status_t DeviceRegistry::free(void* ptr) {
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations_.end())
      return fail(HMC_ERR_INVALID_HANDLE,
                  "hmc_mem_free: {} was not returned by hmc_mem_alloc of this context (or was "
                  "already freed)",
                  ptr);
    a = it->second;
    allocations_.erase(it);
  }
  if (a.device->is_host()) {
    std::free(ptr);
    return HMC_SUCCESS;
  }
  hmc_plugin_status_t st = a.device->plugin->mem_free(a.device->plugin_ctx, ptr);
  if (st != HMC_PLUGIN_SUCCESS)
    return fail(from_plugin_status(st), "hmc_mem_free: {} on {}: {}", ptr, a.device->name,
                plugin_status_string(st));
  return HMC_SUCCESS;
}

MemoryLocation DeviceRegistry::locate(const void* ptr) const {
  MemoryLocation loc;
  loc.device = &devices_[0];
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocations_.upper_bound(reinterpret_cast<uintptr_t>(ptr));
    if (it != allocations_.begin()) {
      --it;
      if (reinterpret_cast<uintptr_t>(ptr) < it->first + it->second.size) {
        loc.device = it->second.device;
        loc.base = it->first;
        loc.size = it->second.size;
        return loc;
      }
    }
  }
  // Memory allocated by the application through a vendor runtime: ask each plugin once.
  const hmc_device_plugin_v1_t* asked = nullptr;
  for (const auto& d : devices_) {
    if (d.is_host() || d.plugin == asked) continue;
    asked = d.plugin;
    hmc_device_ptr_info_t info{};
    info.hdr = HMC_ABI_HEADER_INIT(hmc_device_ptr_info_t);
    if (d.plugin->ptr_query(d.plugin_ctx, ptr, &info) != HMC_PLUGIN_SUCCESS || !info.owned)
      continue;
    if (info.is_host) break;  // pinned host memory: host for our purposes
    for (const auto& dev : devices_) {
      if (dev.plugin == d.plugin && dev.index == info.device) {
        loc.device = &dev;
        loc.base = info.base;
        loc.size = info.size;
        return loc;
      }
    }
  }
  return loc;
}

hmc_status_t DeviceRegistry::copy(void* dst, const void* src, size_t size) {
  MemoryLocation d = locate(dst), s = locate(src);
  if (d.size && reinterpret_cast<uintptr_t>(dst) - d.base + size > d.size)
    return fail(HMC_ERR_OUT_OF_BOUNDS, "hmc_mem_copy: {} bytes at {} overrun its {}-byte allocation",
                size, dst, d.size);
  if (s.size && reinterpret_cast<uintptr_t>(src) - s.base + size > s.size)
    return fail(HMC_ERR_OUT_OF_BOUNDS, "hmc_mem_copy: {} bytes at {} overrun its {}-byte allocation",
                size, src, s.size);
  if (d.device->is_host() && s.device->is_host()) {
    memmove(dst, src, size);
    return HMC_SUCCESS;
  }
  return fail(HMC_ERR_NOT_SUPPORTED, "hmc_mem_copy: copies involving device memory ({} -> {}) are "
              "not implemented yet", s.device->name, d.device->name);
}

void DeviceRegistry::release_all() {
  std::map<uintptr_t, Allocation> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    all.swap(allocations_);
  }
  for (auto& [p, a] : all) {
    if (a.device->is_host()) std::free(reinterpret_cast<void*>(p));
    else a.device->plugin->mem_free(a.device->plugin_ctx, reinterpret_cast<void*>(p));
  }
}

}  // namespace hmc
