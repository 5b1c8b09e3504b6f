#include "device/registry.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "device/copy.h"
#include "device/stage_pool.h"
#include "util/config.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

namespace {
constexpr size_t kFreedMax = 4096;
constexpr uint64_t kMinChunk = 4096, kMaxChunk = 1ull << 30;
constexpr int64_t kMaxDepth = 64;

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
  return page;
}

// True when some page of [p, p+size) is not mapped in this process (msync answers ENOMEM).
bool unmapped(uintptr_t p, size_t size) {
  uintptr_t start = p / page_size() * page_size();
  size_t len = p + size - start;
  return msync(reinterpret_cast<void*>(start), len, MS_ASYNC) != 0 && errno == ENOMEM;
}
}  // namespace

hmc_status_t CopySettings::from_config(const Config& cfg, int timeout_ms, CopySettings* out) {
  CopySettings s;
  uint64_t chunk = cfg.get_size("HMC_STAGE_CHUNK");
  if (chunk < kMinChunk || chunk > kMaxChunk)
    return fail(HMC_ERR_CONFIG, "HMC_STAGE_CHUNK={} is out of range: 4K to 1G",
                cfg.get("HMC_STAGE_CHUNK"));
  int64_t depth = cfg.get_int("HMC_STAGE_DEPTH");
  if (depth < 1 || depth > kMaxDepth)
    return fail(HMC_ERR_CONFIG, "HMC_STAGE_DEPTH={} is out of range: 1 to {}",
                cfg.get("HMC_STAGE_DEPTH"), kMaxDepth);
  uint64_t pool = cfg.get_size("HMC_STAGE_POOL_BYTES");
  if (pool < chunk || pool > (SIZE_MAX >> 1))
    return fail(HMC_ERR_CONFIG,
                "HMC_STAGE_POOL_BYTES={} is out of range: at least one chunk (HMC_STAGE_CHUNK={})",
                cfg.get("HMC_STAGE_POOL_BYTES"), cfg.get("HMC_STAGE_CHUNK"));
  s.stage_chunk = static_cast<size_t>(chunk);
  s.stage_depth = static_cast<int>(depth);
  s.stage_pool_bytes = static_cast<size_t>(pool);
  s.timeout_ms = timeout_ms > 0 ? timeout_ms : s.timeout_ms;
  *out = s;
  return HMC_SUCCESS;
}

DeviceRegistry::DeviceRegistry() {
  Device host;
  host.name = "host";
  host.plugin_name = "builtin";
  host.mem_iface = HMC_MEM_IFACE_HOST;
  host.model = "host memory";
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) host.mem_bytes = static_cast<uint64_t>(pages) * page;
  devices_.reserve(64);  // pointers to devices stay valid: they are handed out by locate()
  devices_.push_back(host);
}

DeviceRegistry::~DeviceRegistry() {
  // Allocations are left to release_all (the owner calls it while the plugins live); the engine
  // and pool, when a copy created them, end here at the latest.
  std::lock_guard<std::mutex> lock(engine_mutex_);
  engine_.reset();
  stage_.reset();
}

void DeviceRegistry::set_copy_settings(const CopySettings& s) {
  std::lock_guard<std::mutex> lock(engine_mutex_);
  if (engine_)
    HMC_LOG_W("copy settings changed after the copy engine started; the new ones are not used");
  else
    settings_ = s;
}

CopyEngine& DeviceRegistry::copy_engine() {
  std::lock_guard<std::mutex> lock(engine_mutex_);
  if (!engine_) {
    stage_ = std::make_unique<StagePool>(*this, settings_.stage_chunk, settings_.stage_pool_bytes);
    engine_ = std::make_unique<CopyEngine>(*this, *stage_, settings_.stage_depth);
  }
  return *engine_;
}

StagePool& DeviceRegistry::stage_pool() {
  copy_engine();
  return *stage_;
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
    if (HMC_ABI_HAS_FIELD(&info, hmc_device_props_t, copy_bandwidth_MBps))
      d.copy_bandwidth_MBps = info.copy_bandwidth_MBps;
    // Host is no device memory's interface: a plugin saying so declared nothing useful.
    if (HMC_ABI_HAS_FIELD(table, hmc_device_plugin_v1_t, mem_iface) &&
        table->mem_iface != HMC_MEM_IFACE_HOST && table->mem_iface < HMC_MEM_IFACE_MAX)
      d.mem_iface = static_cast<int>(table->mem_iface);
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
  forget_freed_locked(reinterpret_cast<uintptr_t>(p), size);
  *ptr = p;
  return HMC_SUCCESS;
}

void DeviceRegistry::forget_freed_locked(uintptr_t base, size_t size) {
  if (freed_.empty()) return;
  auto it = freed_.upper_bound(base);
  if (it != freed_.begin() && std::prev(it)->first + std::prev(it)->second.size > base) --it;
  while (it != freed_.end() && it->first < base + size) it = freed_.erase(it);
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
    if (!a.device->is_host()) {
      uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
      forget_freed_locked(p, a.size);
      freed_[p] = a;
      freed_order_.push_back(p);
      // The oldest record goes (it may already have been forgotten by a new allocation).
      if (freed_order_.size() > kFreedMax) {
        auto old = freed_.find(freed_order_.front());
        if (old != freed_.end() && old->first != p) freed_.erase(old);
        freed_order_.pop_front();
      }
    }
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
  // Unknown to everyone: host memory, unless it lies in device memory this registry freed and
  // nothing has mapped there since (then a host access would fault).
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  if (freed_.empty()) return loc;
  auto it = freed_.upper_bound(p);
  if (it == freed_.begin()) return loc;
  --it;
  if (p < it->first + it->second.size && unmapped(p, 1)) {
    loc.freed_from = it->second.device;
    loc.base = it->first;
    loc.size = it->second.size;
  }
  return loc;
}

hmc_status_t DeviceRegistry::check_range(const char* what, const void* ptr,
                                         const MemoryLocation& loc, size_t size) {
  if (loc.freed_from)
    return fail(HMC_ERR_INVALID_HANDLE,
                "{}: {} lies in {} memory (the {}-byte allocation at {:#x}) that hmc_mem_free "
                "already released",
                what, ptr, loc.freed_from->name, loc.size, loc.base);
  uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (loc.size && (size > loc.size || p - loc.base > loc.size - size))
    return fail(HMC_ERR_OUT_OF_BOUNDS,
                "{}: {} bytes at {} overrun its allocation ({} bytes at {:#x} on {})", what, size,
                ptr, loc.size, loc.base, loc.device->name);
  return HMC_SUCCESS;
}

hmc_status_t DeviceRegistry::copy(void* dst, const void* src, size_t size) {
  MemoryLocation d = locate(dst), s = locate(src);
  hmc_status_t st = check_range("hmc_mem_copy: destination", dst, d, size);
  if (st == HMC_SUCCESS) st = check_range("hmc_mem_copy: source", src, s, size);
  if (st != HMC_SUCCESS) return st;
  if (size == 0) return HMC_SUCCESS;
  if (d.device->is_host() && s.device->is_host()) {  // no engine (nor pool) for host memory
    memmove(dst, src, size);
    return HMC_SUCCESS;
  }
  return copy_engine().copy(dst, d, src, s, size, settings_.timeout_ms);
}

void DeviceRegistry::release_all() {
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    engine_.reset();  // waits (bounded) for copies still running, before their memory goes
    stage_.reset();
  }
  std::map<uintptr_t, Allocation> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    all.swap(allocations_);
  }
  for (auto& [p, a] : all) {
    if (a.device->is_host())
      std::free(reinterpret_cast<void*>(p));
    else
      a.device->plugin->mem_free(a.device->plugin_ctx, reinterpret_cast<void*>(p));
  }
}

}  // namespace hmc
