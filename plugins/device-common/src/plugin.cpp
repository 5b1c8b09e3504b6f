// The shared slots of every device plugin (see plugin.h). Each slot converts the opaque handles,
// checks its arguments, calls the Backend and catches everything, so no exception crosses the ABI.
#include "devplug/plugin.h"

#include <cinttypes>
#include <cstring>
#include <mutex>
#include <new>
#include <set>
#include <string>

#include "devplug/alloc_table.h"
#include "devplug/ipc_envelope.h"
#include "devplug/log.h"

namespace hmc::devplug {
namespace {

struct Context;

// A plugin stream or event: the backend's native handle, with the device it belongs to.
struct Stream {
  Context* ctx;
  int dev;
  void* native;
};
struct Event {
  Context* ctx;
  int dev;
  void* native;
};

struct Context {
  const PluginInfo* info = nullptr;
  Log log;
  std::unique_ptr<Backend> backend;
  Discovery found;
  AllocTable allocs;

  // Live streams and events, so that finalize can release those the caller did not.
  std::mutex objects_mutex;
  std::set<Stream*> streams;
  std::set<Event*> events;

  int device_count() const { return static_cast<int>(found.devices.size()); }
  bool valid_device(int dev) const { return dev >= 0 && dev < device_count(); }
  const DeviceDesc& device(int dev) const { return found.devices[static_cast<size_t>(dev)]; }
};

Context* as_ctx(hmc_device_ctx_t* c) {
  return reinterpret_cast<Context*>(c);
}
Stream* as_stream(hmc_device_stream_t* s) {
  return reinterpret_cast<Stream*>(s);
}
Event* as_event(hmc_device_event_t* e) {
  return reinterpret_cast<Event*>(e);
}

template <typename F>
hmc_plugin_status_t guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return HMC_PLUGIN_ERR_NO_MEMORY;
  } catch (...) {
    return HMC_PLUGIN_ERR_INTERNAL;
  }
}

// Logs and answers INVALID_ARGUMENT for a device index out of range.
hmc_plugin_status_t bad_device(const Context& c, const char* slot, int dev) {
  if (c.device_count() == 0) {
    DP_ERROR(c.log, "%s: no %s devices (%s)", slot, c.info->name, c.found.reason.c_str());
    return HMC_PLUGIN_ERR_NO_DEVICE;
  }
  DP_ERROR(c.log, "%s: device %d does not exist (%d device%s)", slot, dev, c.device_count(),
           c.device_count() == 1 ? "" : "s");
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}

// The device allocation containing ptr: one of ours, or the application's as the runtime knows
// it. False for anything else (host memory, IPC mappings, unknown pointers).
bool find_device_allocation(Context& c, const void* ptr, Allocation* out) {
  if (c.allocs.find(ptr, out)) return out->kind == AllocKind::Device;
  if (c.device_count() == 0) return false;
  ForeignPointer f;
  if (!c.backend->query_foreign(ptr, &f) || f.is_host || !c.valid_device(f.device)) return false;
  out->base = f.base ? f.base : reinterpret_cast<uintptr_t>(ptr);
  out->size = f.size;
  out->dev = f.device;
  out->kind = AllocKind::Device;
  return true;
}

// Checks that [p, p+size) stays inside the allocation containing p, when the plugin knows it.
bool within_known_allocation(const Context& c, const void* p, size_t size, const char* which) {
  Allocation a;
  if (!c.allocs.find(p, &a)) return true;
  uintptr_t start = reinterpret_cast<uintptr_t>(p);
  if (size <= a.size && start - a.base <= a.size - size) return true;
  DP_ERROR(c.log,
           "copy_async: %zu bytes at %s %p overrun its allocation (%s of %zu bytes at 0x%" PRIxPTR
           ")",
           size, which, p, alloc_kind_name(a.kind), a.size, a.base);
  return false;
}

// ---- lifetime -----------------------------------------------------------------------------

hmc_plugin_status_t dp_finalize(hmc_device_ctx_t* ctx) {
  return guarded([&] {
    if (ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    std::unique_ptr<Context> c(as_ctx(ctx));
    size_t leaked_events = c->events.size(), leaked_streams = c->streams.size();
    for (Event* e : c->events) {
      c->backend->event_destroy(e->dev, e->native);
      delete e;
    }
    for (Stream* s : c->streams) {
      c->backend->stream_destroy(s->dev, s->native);
      delete s;
    }
    std::vector<Allocation> left = c->allocs.take_all();
    if (leaked_events || leaked_streams || !left.empty())
      DP_WARN(c->log,
              "finalize: releasing what was not released: %zu stream(s), %zu event(s), %zu "
              "allocation(s)/registration(s)",
              leaked_streams, leaked_events, left.size());
    for (const Allocation& a : left) {
      void* p = reinterpret_cast<void*>(a.base);
      switch (a.kind) {
        case AllocKind::Device: c->backend->mem_free(a.dev, p); break;
        case AllocKind::HostPinned: c->backend->host_free(p); break;
        case AllocKind::HostRegistered: c->backend->host_unregister(p); break;
        case AllocKind::IpcMapped:
          for (int i = 0; i < a.refs; ++i) c->backend->ipc_close(a.dev, p);
          break;
      }
    }
    c->backend->close();
    return HMC_PLUGIN_SUCCESS;
  });
}

// ---- devices ------------------------------------------------------------------------------

hmc_plugin_status_t dp_device_count(hmc_device_ctx_t* ctx, int* count) {
  if (ctx == nullptr || count == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  *count = as_ctx(ctx)->device_count();
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t dp_device_info(hmc_device_ctx_t* ctx, int dev, hmc_device_props_t* info) {
  if (ctx == nullptr || info == nullptr || info->hdr.struct_size < sizeof(hmc_abi_header_t))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  Context& c = *as_ctx(ctx);
  if (!c.valid_device(dev)) return bad_device(c, "device_info", dev);
  const DeviceDesc& d = c.device(dev);
  using P = hmc_device_props_t;
  if (HMC_ABI_HAS_FIELD(info, P, name)) info->name = d.name.c_str();
  if (HMC_ABI_HAS_FIELD(info, P, pci_bus_id))
    info->pci_bus_id = d.pci_bus_id.empty() ? nullptr : d.pci_bus_id.c_str();
  if (HMC_ABI_HAS_FIELD(info, P, uuid)) std::memcpy(info->uuid, d.uuid, sizeof d.uuid);
  if (HMC_ABI_HAS_FIELD(info, P, numa_node)) info->numa_node = d.numa_node;
  if (HMC_ABI_HAS_FIELD(info, P, mem_bytes)) info->mem_bytes = d.mem_bytes;
  if (HMC_ABI_HAS_FIELD(info, P, caps)) info->caps = d.caps;
  if (HMC_ABI_HAS_FIELD(info, P, ipc_handle_size))
    info->ipc_handle_size =
        (d.caps & HMC_DEVICE_CAP_IPC)
            ? static_cast<uint32_t>(ipc_handle_size(c.found.vendor_ipc_handle_size))
            : 0;
  // 0 = unknown: the core measures copy bandwidth rather than trusting a declared number.
  if (HMC_ABI_HAS_FIELD(info, P, copy_bandwidth_MBps)) info->copy_bandwidth_MBps = 0;
  return HMC_PLUGIN_SUCCESS;
}

const char* dp_unavailable_reason(hmc_device_ctx_t* ctx) {
  if (ctx == nullptr) return nullptr;
  Context& c = *as_ctx(ctx);
  return c.device_count() == 0 ? c.found.reason.c_str() : nullptr;
}

const char* dp_runtime_version(hmc_device_ctx_t* ctx) {
  if (ctx == nullptr) return nullptr;
  Context& c = *as_ctx(ctx);
  return c.found.runtime_version.empty() ? nullptr : c.found.runtime_version.c_str();
}

// ---- memory -------------------------------------------------------------------------------

hmc_plugin_status_t dp_mem_alloc(hmc_device_ctx_t* ctx, int dev, size_t size, void** ptr) {
  return guarded([&] {
    if (ctx == nullptr || ptr == nullptr || size == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    if (!c.valid_device(dev)) return bad_device(c, "mem_alloc", dev);
    void* p = nullptr;
    Status st = c.backend->mem_alloc(dev, size, &p);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    if (!c.allocs.insert({reinterpret_cast<uintptr_t>(p), size, dev, AllocKind::Device})) {
      DP_ERROR(c.log,
               "mem_alloc: the runtime returned %p (%zu bytes), which overlaps memory "
               "already recorded; freeing it",
               p, size);
      c.backend->mem_free(dev, p);
      return HMC_PLUGIN_ERR_INTERNAL;
    }
    *ptr = p;
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t dp_mem_free(hmc_device_ctx_t* ctx, void* ptr) {
  return guarded([&] {
    if (ctx == nullptr || ptr == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    Allocation a;
    if (!c.allocs.take(ptr, AllocKind::Device, &a)) {
      DP_ERROR(c.log,
               "mem_free(%p): not the start of device memory allocated by mem_alloc of "
               "this plugin (or already freed)",
               ptr);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    return c.backend->mem_free(a.dev, ptr);
  });
}

hmc_plugin_status_t dp_ptr_query(hmc_device_ctx_t* ctx, const void* ptr,
                                 hmc_device_ptr_info_t* info) {
  return guarded([&] {
    if (ctx == nullptr || info == nullptr || info->hdr.struct_size < sizeof(hmc_abi_header_t))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    using I = hmc_device_ptr_info_t;
    int32_t owned = 0, device = -1, is_host = 0;
    uint64_t base = 0, size = 0;
    Allocation a;
    ForeignPointer f;
    if (ptr != nullptr && c.allocs.find(ptr, &a)) {
      owned = 1;
      device = a.is_host() ? -1 : a.dev;
      is_host = a.is_host() ? 1 : 0;
      base = a.base;
      size = a.size;
    } else if (ptr != nullptr && c.device_count() > 0 && c.backend->query_foreign(ptr, &f)) {
      owned = 1;
      device = f.is_host ? -1 : f.device;
      is_host = f.is_host ? 1 : 0;
      base = f.base;
      size = f.size;
    }
    if (HMC_ABI_HAS_FIELD(info, I, owned)) info->owned = owned;
    if (HMC_ABI_HAS_FIELD(info, I, device)) info->device = device;
    if (HMC_ABI_HAS_FIELD(info, I, base)) info->base = base;
    if (HMC_ABI_HAS_FIELD(info, I, size)) info->size = size;
    if (HMC_ABI_HAS_FIELD(info, I, is_host)) info->is_host = is_host;
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t dp_host_alloc(hmc_device_ctx_t* ctx, size_t size, void** ptr) {
  return guarded([&] {
    if (ctx == nullptr || ptr == nullptr || size == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    if (c.device_count() == 0) return bad_device(c, "host_alloc", 0);
    void* p = nullptr;
    Status st = c.backend->host_alloc(size, &p);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    if (!c.allocs.insert({reinterpret_cast<uintptr_t>(p), size, -1, AllocKind::HostPinned})) {
      DP_ERROR(c.log,
               "host_alloc: the runtime returned %p, which overlaps memory already "
               "recorded; freeing it",
               p);
      c.backend->host_free(p);
      return HMC_PLUGIN_ERR_INTERNAL;
    }
    *ptr = p;
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t dp_host_free(hmc_device_ctx_t* ctx, void* ptr) {
  return guarded([&] {
    if (ctx == nullptr || ptr == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    Allocation a;
    if (!c.allocs.take(ptr, AllocKind::HostPinned, &a)) {
      DP_ERROR(c.log,
               "host_free(%p): not memory from host_alloc of this plugin (or already "
               "freed)",
               ptr);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    return c.backend->host_free(ptr);
  });
}

hmc_plugin_status_t dp_host_register(hmc_device_ctx_t* ctx, void* ptr, size_t size) {
  return guarded([&] {
    if (ctx == nullptr || ptr == nullptr || size == 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    if (c.device_count() == 0) return bad_device(c, "host_register", 0);
    Allocation a;
    if (c.allocs.find(ptr, &a) || c.allocs.find(static_cast<const char*>(ptr) + size - 1, &a)) {
      DP_ERROR(c.log,
               "host_register(%p, %zu): overlaps %s at 0x%" PRIxPTR
               " that this plugin "
               "already handed out or registered",
               ptr, size, alloc_kind_name(a.kind), a.base);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    Status st = c.backend->host_register(ptr, size);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    if (!c.allocs.insert({reinterpret_cast<uintptr_t>(ptr), size, -1, AllocKind::HostRegistered})) {
      c.backend->host_unregister(ptr);
      DP_ERROR(c.log, "host_register(%p, %zu): overlaps memory registered concurrently", ptr, size);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t dp_host_unregister(hmc_device_ctx_t* ctx, void* ptr) {
  return guarded([&] {
    if (ctx == nullptr || ptr == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    Allocation a;
    if (!c.allocs.take(ptr, AllocKind::HostRegistered, &a)) {
      DP_ERROR(c.log,
               "host_unregister(%p): not the start of a range registered with "
               "host_register of this plugin",
               ptr);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    return c.backend->host_unregister(ptr);
  });
}

// ---- streams, copies, events ----------------------------------------------------------------

hmc_plugin_status_t dp_stream_create(hmc_device_ctx_t* ctx, int dev, hmc_device_stream_t** stream) {
  return guarded([&] {
    if (ctx == nullptr || stream == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    if (!c.valid_device(dev)) return bad_device(c, "stream_create", dev);
    auto s = std::make_unique<Stream>(Stream{&c, dev, nullptr});
    Status st = c.backend->stream_create(dev, &s->native);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    std::lock_guard<std::mutex> lock(c.objects_mutex);
    c.streams.insert(s.get());
    *stream = reinterpret_cast<hmc_device_stream_t*>(s.release());
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t dp_stream_destroy(hmc_device_stream_t* stream) {
  return guarded([&] {
    if (stream == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    std::unique_ptr<Stream> s(as_stream(stream));
    Context& c = *s->ctx;
    {
      std::lock_guard<std::mutex> lock(c.objects_mutex);
      c.streams.erase(s.get());
    }
    return c.backend->stream_destroy(s->dev, s->native);
  });
}

hmc_plugin_status_t dp_copy_async(hmc_device_stream_t* stream, void* dst, const void* src,
                                  size_t size, hmc_copy_kind_t kind) {
  return guarded([&] {
    if (stream == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Stream& s = *as_stream(stream);
    Context& c = *s.ctx;
    // A C caller may pass any int: read it as one (an out-of-range enum value is not valid C++).
    int k = 0;
    static_assert(sizeof k == sizeof kind, "hmc_copy_kind_t is an int-sized enum");
    std::memcpy(&k, &kind, sizeof k);
    if (k < HMC_COPY_HOST_TO_DEVICE || k > HMC_COPY_HOST_TO_HOST) {
      DP_ERROR(c.log, "copy_async: unknown copy kind %d", k);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    if (size == 0) return HMC_PLUGIN_SUCCESS;
    if (dst == nullptr || src == nullptr) {
      DP_ERROR(c.log, "copy_async: %zu bytes from %p to %p: NULL pointer", size, src, dst);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    if (!within_known_allocation(c, dst, size, "destination") ||
        !within_known_allocation(c, src, size, "source"))
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    return c.backend->copy_async(s.dev, s.native, dst, src, size, kind);
  });
}

hmc_plugin_status_t dp_event_create(hmc_device_ctx_t* ctx, int dev, hmc_device_event_t** ev) {
  return guarded([&] {
    if (ctx == nullptr || ev == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    if (!c.valid_device(dev)) return bad_device(c, "event_create", dev);
    auto e = std::make_unique<Event>(Event{&c, dev, nullptr});
    Status st = c.backend->event_create(dev, &e->native);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    std::lock_guard<std::mutex> lock(c.objects_mutex);
    c.events.insert(e.get());
    *ev = reinterpret_cast<hmc_device_event_t*>(e.release());
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t dp_event_destroy(hmc_device_event_t* ev) {
  return guarded([&] {
    if (ev == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    std::unique_ptr<Event> e(as_event(ev));
    Context& c = *e->ctx;
    {
      std::lock_guard<std::mutex> lock(c.objects_mutex);
      c.events.erase(e.get());
    }
    return c.backend->event_destroy(e->dev, e->native);
  });
}

hmc_plugin_status_t dp_event_record(hmc_device_event_t* ev, hmc_device_stream_t* stream) {
  return guarded([&] {
    if (ev == nullptr || stream == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Event& e = *as_event(ev);
    Stream& s = *as_stream(stream);
    if (e.ctx != s.ctx || e.dev != s.dev) {
      DP_ERROR(e.ctx->log,
               "event_record: the event belongs to device %d, the stream to device %d%s", e.dev,
               s.dev, e.ctx != s.ctx ? " of another plugin context" : "");
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    return e.ctx->backend->event_record(e.dev, e.native, s.native);
  });
}

hmc_plugin_status_t dp_event_record_native(hmc_device_event_t* ev, void* native_stream) {
  return guarded([&] {
    if (ev == nullptr || native_stream == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Event& e = *as_event(ev);
    return e.ctx->backend->event_record(e.dev, e.native, native_stream);
  });
}

hmc_plugin_status_t dp_event_query(hmc_device_event_t* ev) {
  return guarded([&] {
    if (ev == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Event& e = *as_event(ev);
    return e.ctx->backend->event_query(e.dev, e.native);
  });
}

// ---- IPC and dma-buf ------------------------------------------------------------------------

hmc_plugin_status_t dp_ipc_export(hmc_device_ctx_t* ctx, const void* ptr, void* handle,
                                  size_t* handle_len) {
  return guarded([&] {
    if (ctx == nullptr || ptr == nullptr || handle == nullptr || handle_len == nullptr)
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    if (c.device_count() == 0) return bad_device(c, "ipc_export", 0);
    Allocation a;
    if (!find_device_allocation(c, ptr, &a)) {
      DP_ERROR(c.log, "ipc_export(%p): not device memory of this plugin's devices", ptr);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    if (!(c.device(a.dev).caps & HMC_DEVICE_CAP_IPC)) {
      DP_DEBUG(c.log, "ipc_export: device %d has no IPC support", a.dev);
      return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    }
    size_t need = ipc_handle_size(c.found.vendor_ipc_handle_size);
    if (*handle_len < need) {
      DP_ERROR(c.log, "ipc_export: the handle buffer holds %zu bytes, the handle needs %zu",
               *handle_len, need);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    uint8_t vendor[HMC_DEVICE_IPC_HANDLE_MAX] = {};
    void* base = reinterpret_cast<void*>(a.base);
    Status st = c.backend->ipc_get(a.dev, base, vendor);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    size_t written = 0;
    if (!ipc_envelope_write(c.info->name, a.size, vendor, c.found.vendor_ipc_handle_size, handle,
                            *handle_len, &written))
      return HMC_PLUGIN_ERR_INTERNAL;
    *handle_len = written;
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t dp_ipc_open(hmc_device_ctx_t* ctx, int dev, const void* handle,
                                size_t handle_len, void** ptr) {
  return guarded([&] {
    if (ctx == nullptr || handle == nullptr || ptr == nullptr)
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    if (!c.valid_device(dev)) return bad_device(c, "ipc_open", dev);
    if (!(c.device(dev).caps & HMC_DEVICE_CAP_IPC)) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    IpcEnvelope env;
    std::string why;
    if (!ipc_envelope_read(c.info->name, handle, handle_len, c.found.vendor_ipc_handle_size, &env,
                           &why)) {
      DP_ERROR(c.log, "ipc_open: %s", why.c_str());
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    void* p = nullptr;
    Status st = c.backend->ipc_open(dev, env.vendor, &p);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    if (!c.allocs.insert({reinterpret_cast<uintptr_t>(p), static_cast<size_t>(env.alloc_size), dev,
                          AllocKind::IpcMapped})) {
      DP_ERROR(c.log,
               "ipc_open: the runtime mapped the handle at %p, which overlaps memory "
               "already recorded; unmapping it",
               p);
      c.backend->ipc_close(dev, p);
      return HMC_PLUGIN_ERR_INTERNAL;
    }
    *ptr = p;
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_plugin_status_t dp_ipc_close(hmc_device_ctx_t* ctx, void* ptr) {
  return guarded([&] {
    if (ctx == nullptr || ptr == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    Allocation a;
    if (!c.allocs.take(ptr, AllocKind::IpcMapped, &a)) {
      DP_ERROR(c.log, "ipc_close(%p): not a pointer returned by ipc_open of this plugin", ptr);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    return c.backend->ipc_close(a.dev, ptr);
  });
}

hmc_plugin_status_t dp_dmabuf_export(hmc_device_ctx_t* ctx, const void* ptr, size_t size, int* fd,
                                     uint64_t* offset) {
  return guarded([&] {
    if (ctx == nullptr || ptr == nullptr || size == 0 || fd == nullptr || offset == nullptr)
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    Context& c = *as_ctx(ctx);
    if (c.device_count() == 0) return bad_device(c, "dmabuf_export", 0);
    Allocation a;
    if (!find_device_allocation(c, ptr, &a)) {
      DP_ERROR(c.log, "dmabuf_export(%p): not device memory of this plugin's devices", ptr);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    if (!(c.device(a.dev).caps & HMC_DEVICE_CAP_DMABUF)) {
      DP_DEBUG(c.log, "dmabuf_export: device %d cannot export dma-bufs", a.dev);
      return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    }
    uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    if (a.size != 0 && (size > a.size || p - a.base > a.size - size)) {
      DP_ERROR(c.log,
               "dmabuf_export: %zu bytes at %p overrun the allocation of %zu bytes at "
               "0x%" PRIxPTR,
               size, ptr, a.size, a.base);
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    return c.backend->dmabuf_export(a.dev, a.base, a.size, ptr, size, fd, offset);
  });
}

}  // namespace

hmc_plugin_status_t init_device_plugin(const PluginInfo& info, const hmc_host_services_t* host,
                                       hmc_device_ctx_t** ctx) {
  return guarded([&] {
    if (host == nullptr || ctx == nullptr) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    if (!HMC_ABI_HAS_FIELD(host, hmc_host_services_t, timeout_ms) || host->log == nullptr ||
        host->log_enabled == nullptr || host->config_get == nullptr || host->now_ns == nullptr)
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    if (host->core_abi_min > HMC_PLUGIN_ABI_VERSION ||
        host->core_abi_max < HMC_PLUGIN_ABI_VERSION) {
      host->log(host->host_ctx, HMC_LOG_ERROR,
                "the core accepts plugin ABI versions that exclude this plugin's (1)");
      return HMC_PLUGIN_ERR_VERSION;
    }
    auto c = std::make_unique<Context>();
    c->info = &info;
    c->log = Log(host);
    c->backend = info.create_backend();
    OpenArgs args;
    const char* lib = host->config_get(host->host_ctx, info.library_var);
    if (lib != nullptr) args.library = lib;
    Status st = c->backend->open(args, c->log, &c->found);
    if (st != HMC_PLUGIN_SUCCESS) return st;
    if (c->found.devices.empty()) {
      if (c->found.reason.empty()) c->found.reason = "the runtime reports no devices";
      DP_INFO(c->log, "no %s devices: %s", info.name, c->found.reason.c_str());
    } else {
      std::string names;
      for (const DeviceDesc& d : c->found.devices) names += (names.empty() ? "" : ", ") + d.name;
      DP_INFO(c->log, "%s: %zu device(s): %s", c->found.runtime_version.c_str(),
              c->found.devices.size(), names.c_str());
    }
    *ctx = reinterpret_cast<hmc_device_ctx_t*>(c.release());
    return HMC_PLUGIN_SUCCESS;
  });
}

hmc_device_plugin_v1_t make_device_table(const PluginInfo& info,
                                         hmc_plugin_status_t (*init)(const hmc_host_services_t*,
                                                                     hmc_device_ctx_t**)) {
  hmc_device_plugin_v1_t t{};
  t.hdr = HMC_ABI_HEADER_INIT(hmc_device_plugin_v1_t);
  t.name = info.name;
  t.vendor = info.vendor;
  t.version = info.version;
  t.config_vars = info.config_vars;
  t.init = init;
  t.finalize = dp_finalize;
  t.device_count = dp_device_count;
  t.device_info = dp_device_info;
  t.unavailable_reason = dp_unavailable_reason;
  t.runtime_version = dp_runtime_version;
  t.mem_alloc = dp_mem_alloc;
  t.mem_free = dp_mem_free;
  t.ptr_query = dp_ptr_query;
  t.stream_create = dp_stream_create;
  t.stream_destroy = dp_stream_destroy;
  t.copy_async = dp_copy_async;
  t.event_create = dp_event_create;
  t.event_destroy = dp_event_destroy;
  t.event_record = dp_event_record;
  t.event_query = dp_event_query;
  t.host_alloc = dp_host_alloc;
  t.host_free = dp_host_free;
  t.host_register = dp_host_register;
  t.host_unregister = dp_host_unregister;
  t.ipc_export = dp_ipc_export;
  t.ipc_open = dp_ipc_open;
  t.ipc_close = dp_ipc_close;
  t.dmabuf_export = dp_dmabuf_export;
  t.mem_iface = info.mem_iface;
  t.event_record_native = dp_event_record_native;
  return t;
}

}  // namespace hmc::devplug
