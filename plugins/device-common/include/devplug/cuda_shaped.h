// One Backend for every runtime shaped like CUDA's: the CUDA driver API (device-cuda), HIP
// (device-hip, also Hygon DTK) and the MUSA runtime (device-musa). Where their APIs agree, which
// is almost everywhere (device identity, allocation, pinned and registered host memory, streams,
// events, IPC handles, address ranges, range handles for dma-buf), this template calls them
// through one set of member names; a vendor traits class V says which exported function fills
// each member, with the vendor's own prototype, and supplies the few places where they differ
// (how a device is made current, the copy call, the pointer-type query, the version check).
//
// The traits class V provides (see plugins/device-cuda/src/cuda_vendor.h for a full example):
//   types   Result (the error enum; 0 is success), Device (device handle), Uuid (16 bytes),
//           IpcHandle, Stream, Event (pointer types)
//   struct Api   function pointers named as below; optional ones may stay NULL
//   struct State per-instance extras (contexts, a second library ...)
//   class Scope  RAII: Scope(Api&, State&, int ordinal) makes that device current for the calling
//                thread and restores the previous one; ok() / result() report a failure
//   static const std::vector<SymbolSpec>& symbols();         how to fill Api
//   static const ErrorTable& errors();
//   static std::vector<std::string> libraries();             default sonames, newest first
//   static std::vector<std::string> companion_libraries();  may be empty
//   static bool read_version(const Library&, State&, int* version, std::string* why);
//   static std::string version_text(int version);  static constexpr int kMinVersion;
//   static void* resolve(const Library&, State&, const SymbolName&);  (main library)
//   static Result init(Api&, State&, const Library& main, Library& companion, const Log&);
//   static constexpr const char* kInitCall;   (for messages; "" when init calls nothing)
//   static Result open_device(Api&, State&, int ordinal, Device);  close_device(...)
//   static Result copy_async(Api&, State&, void* dst, const void* src, size_t, hmc_copy_kind_t,
//                            Stream);
//   static bool pointer_kind(Api&, State&, const void* ptr, int* ordinal, bool* is_host);
//   static bool dmabuf_attribute(Api&, State&, Device);   gpudirect_rdma(Api&, State&, Device);
//   static bool has_dmabuf_fallback(const State&);
//   static Status dmabuf_fallback(Api&, State&, const Log&, const void* ptr, size_t, int* fd,
//                                 uint64_t* offset);
//   static unsigned ipc_open_flags(const State&);   (the lazy-peer-access flag; HIP changed it)
//   constants kStreamFlags, kEventFlags, kHostAllocFlags, kHostRegisterFlags,
//             kNotReady, kDmabufHandleType, kDisplayName ("CUDA")
// VendorDefaults below supplies the usual answer for the optional hooks.
//
// Uniform Api members (vendor function in brackets for CUDA / HIP / MUSA):
//   device_count [cuDeviceGetCount / hipGetDeviceCount / musaGetDeviceCount]       required
//   device_get [cuDeviceGet / hipDeviceGet / muDeviceGet]                            optional
//   device_name, device_total_mem, device_uuid [cuDeviceGetName ... / hipDeviceGetName ... /
//                                                muDeviceGetName ...]               optional
//   pci_bus_id [cuDeviceGetPCIBusId / hipDeviceGetPCIBusId / musaDeviceGetPCIBusId]  optional
//   mem_get_info [cuMemGetInfo_v2 / hipMemGetInfo / musaMemGetInfo]                 optional
//   can_access_peer [cuDeviceCanAccessPeer / hipDeviceCanAccessPeer / ...]           optional
//   mem_alloc, mem_free, stream_create, stream_destroy, event_create, event_record, event_query,
//   event_destroy                                                                    required
//   host_alloc, host_free, host_register, host_unregister, ipc_get, ipc_open, ipc_close,
//   address_range, range_handle, error_name                                         optional
#pragma once

#include <cinttypes>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "devplug/backend.h"
#include "devplug/errors.h"
#include "devplug/library.h"
#include "devplug/log.h"
#include "devplug/pci.h"

namespace hmc::devplug {

// A pointer passed to a runtime function that takes device addresses either as void* (HIP, the
// MUSA runtime) or as a 64-bit integer (CUdeviceptr, MUdeviceptr): converts to whichever the
// parameter is.
struct DevPtr {
  const void* p;
  operator void*() const { return const_cast<void*>(p); }
  operator unsigned long long() const { return reinterpret_cast<uintptr_t>(p); }
};

template <class T>
void* to_void_ptr(T v) {
  if constexpr (std::is_pointer_v<T>)
    return const_cast<void*>(static_cast<const void*>(v));
  else
    return reinterpret_cast<void*>(static_cast<uintptr_t>(v));
}

// Calls f(&out_value, args...) for a runtime function whose first parameter is an output
// pointer (CUdeviceptr*, void**, hipStream_t* ...) and, on success, stores the value as void*.
template <class R, class T, class... P, class... A>
R call_out(R (*f)(T*, P...), void** out, A&&... args) {
  T value{};
  R rc = f(&value, std::forward<A>(args)...);
  if (rc == R{}) *out = to_void_ptr(value);
  return rc;
}

// Base and size of the allocation containing p, through cuMemGetAddressRange and its twins.
template <class R, class T>
R call_address_range(R (*f)(T*, size_t*, T), const void* p, uintptr_t* base, size_t* size) {
  T b{};
  size_t s = 0;
  R rc = f(&b, &s, DevPtr{p});
  if (rc == R{}) {
    *base = reinterpret_cast<uintptr_t>(to_void_ptr(b));
    *size = s;
  }
  return rc;
}

// The runtime's own name for an error code, through either shape of get-error-name.
template <class R>
const char* call_error_name(R (*f)(R, const char**), R rc) {
  const char* s = nullptr;
  return (f != nullptr && f(rc, &s) == R{}) ? s : nullptr;
}
template <class R>
const char* call_error_name(const char* (*f)(R), R rc) {
  return f != nullptr ? f(rc) : nullptr;
}

// The usual answers of the optional traits hooks.
struct VendorDefaults {
  template <class Api, class State, class Device>
  static bool dmabuf_attribute(Api&, State&, Device) {
    return true;  // no attribute to ask: the presence of the export function decides
  }
  template <class Api, class State, class Device>
  static bool gpudirect_rdma(Api&, State&, Device) {
    return false;
  }
  template <class State>
  static bool has_dmabuf_fallback(const State&) {
    return false;
  }
  template <class Api, class State>
  static Status dmabuf_fallback(Api&, State&, const Log&, const void*, size_t, int*, uint64_t*) {
    return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  }
  template <class Api, class State, class Device>
  static int open_device(Api&, State&, int, Device) {
    return 0;
  }
  template <class Api, class State, class Device>
  static void close_device(Api&, State&, int, Device) {}
  template <class State>
  static void* resolve(const Library& lib, State&, const SymbolName& n) {
    return lib.symbol(n.name);
  }
};

// The exported name an Api member was resolved from, for messages.
#define DP_NAME(member) name_of(offsetof(Api, member))

template <class V>
class CudaShapedBackend final : public Backend {
 public:
  using Api = typename V::Api;
  using State = typename V::State;
  using Result = typename V::Result;
  using Device = typename V::Device;
  using Scope = typename V::Scope;

  Status open(const OpenArgs& args, const Log& log, Discovery* out) override {
    log_ = &log;
    std::string why;
    std::vector<std::string> names =
        args.library.empty() ? V::libraries() : std::vector<std::string>{args.library};
    if (!main_.open(names, &why)) {
      out->reason = why;
      return HMC_PLUGIN_SUCCESS;
    }
    int version = 0;
    if (!V::read_version(main_, state_, &version, &why)) {
      out->reason = main_.name() + ": " + why;
      return HMC_PLUGIN_SUCCESS;
    }
    out->runtime_version = V::version_text(version);
    if (version < V::kMinVersion) {
      out->reason = out->runtime_version + " (" + main_.name() + ") is older than " +
                    V::version_text(V::kMinVersion) + ", the oldest this plugin supports";
      return HMC_PLUGIN_SUCCESS;
    }
    std::vector<std::string> companions =
        companion_candidates(args.library, V::companion_libraries());
    if (!companions.empty() && !companion_.open(companions, &why))
      DP_INFO(log, "%s companion library not available (%s): the features it provides are off",
              V::kDisplayName, why.c_str());
    if (!resolve_symbols(&why)) {
      out->reason = why;
      return HMC_PLUGIN_SUCCESS;
    }
    Result rc = V::init(api_, state_, main_, companion_, log);
    if (rc != Result{}) {
      out->reason = std::string(V::kInitCall) + ": " + describe(rc);
      return HMC_PLUGIN_SUCCESS;
    }
    int count = 0;
    rc = api_.device_count(&count);
    if (rc != Result{}) {
      out->reason = std::string(name_of(offsetof(Api, device_count))) + ": " + describe(rc);
      return HMC_PLUGIN_SUCCESS;
    }
    if (count <= 0) {
      out->reason = std::string(name_of(offsetof(Api, device_count))) + " reports 0 devices";
      return HMC_PLUGIN_SUCCESS;
    }
    if (api_.ipc_get && api_.ipc_open && api_.ipc_close)
      out->vendor_ipc_handle_size = sizeof(typename V::IpcHandle);
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      DeviceDesc d;
      if (open_one(ordinal, out->vendor_ipc_handle_size != 0, &d, &why))
        out->devices.push_back(std::move(d));
      else
        DP_WARN(log, "%s device %d skipped: %s", V::kDisplayName, ordinal, why.c_str());
    }
    if (out->devices.empty()) out->reason = "no usable device: " + why;
    add_peer_caps(out);
    return HMC_PLUGIN_SUCCESS;
  }

  void close() override {
    for (size_t i = 0; i < ordinals_.size(); ++i)
      V::close_device(api_, state_, ordinals_[i], handles_[i]);
  }

  Status mem_alloc(int dev, size_t size, void** ptr) override {
    Scope scope(api_, state_, ordinals_[dev]);
    if (!scope.ok()) return fail(scope.result(), "make device %d current for mem_alloc", dev);
    Result rc = call_out(api_.mem_alloc, ptr, size);
    if (rc != Result{})
      return fail(rc, "%s(%zu bytes) on device %d", DP_NAME(mem_alloc), size, dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status mem_free(int dev, void* ptr) override {
    Scope scope(api_, state_, ordinals_[dev]);
    if (!scope.ok()) return fail(scope.result(), "make device %d current for mem_free", dev);
    Result rc = api_.mem_free(DevPtr{ptr});
    if (rc != Result{}) return fail(rc, "%s(%p) on device %d", DP_NAME(mem_free), ptr, dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status host_alloc(size_t size, void** ptr) override {
    if (!api_.host_alloc || !api_.host_free) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    Scope scope(api_, state_, ordinals_[0]);  // pinned memory is portable to every device
    if (!scope.ok()) return fail(scope.result(), "make device 0 current for host_alloc");
    Result rc = api_.host_alloc(ptr, size, V::kHostAllocFlags);
    if (rc != Result{}) return fail(rc, "%s(%zu bytes, portable)", DP_NAME(host_alloc), size);
    return HMC_PLUGIN_SUCCESS;
  }

  Status host_free(void* ptr) override {
    if (!api_.host_free) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    Scope scope(api_, state_, ordinals_[0]);
    if (!scope.ok()) return fail(scope.result(), "make device 0 current for host_free");
    Result rc = api_.host_free(ptr);
    if (rc != Result{}) return fail(rc, "%s(%p)", DP_NAME(host_free), ptr);
    return HMC_PLUGIN_SUCCESS;
  }

  Status host_register(void* ptr, size_t size) override {
    if (!api_.host_register || !api_.host_unregister) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    Scope scope(api_, state_, ordinals_[0]);
    if (!scope.ok()) return fail(scope.result(), "make device 0 current for host_register");
    Result rc = api_.host_register(ptr, size, V::kHostRegisterFlags);
    if (rc != Result{})
      return fail(rc, "%s(%p, %zu bytes, portable)", DP_NAME(host_register), ptr, size);
    return HMC_PLUGIN_SUCCESS;
  }

  Status host_unregister(void* ptr) override {
    if (!api_.host_unregister) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    Scope scope(api_, state_, ordinals_[0]);
    if (!scope.ok()) return fail(scope.result(), "make device 0 current for host_unregister");
    Result rc = api_.host_unregister(ptr);
    if (rc != Result{}) return fail(rc, "%s(%p)", DP_NAME(host_unregister), ptr);
    return HMC_PLUGIN_SUCCESS;
  }

  bool query_foreign(const void* ptr, ForeignPointer* out) override {
    Scope scope(api_, state_, ordinals_[0]);
    if (!scope.ok()) return false;
    int ordinal = -1;
    bool is_host = false;
    if (!V::pointer_kind(api_, state_, ptr, &ordinal, &is_host)) return false;
    int dev = -1;
    for (size_t i = 0; i < ordinals_.size(); ++i)
      if (ordinals_[i] == ordinal) dev = static_cast<int>(i);
    if (!is_host && dev < 0) return false;  // a device this plugin does not drive
    ForeignPointer f;
    f.device = is_host ? -1 : dev;
    f.is_host = is_host;
    f.base = reinterpret_cast<uintptr_t>(ptr);
    uintptr_t base = 0;
    size_t size = 0;
    if (api_.address_range && ok(call_address_range(api_.address_range, ptr, &base, &size))) {
      f.base = base;
      f.size = size;
    }
    *out = f;
    return true;
  }

  Status stream_create(int dev, void** stream) override {
    Scope scope(api_, state_, ordinals_[dev]);
    if (!scope.ok()) return fail(scope.result(), "make device %d current for stream_create", dev);
    Result rc = call_out(api_.stream_create, stream, V::kStreamFlags);
    if (rc != Result{})
      return fail(rc, "%s(non-blocking) on device %d", DP_NAME(stream_create), dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status stream_destroy(int dev, void* stream) override {
    Result rc = api_.stream_destroy(static_cast<typename V::Stream>(stream));
    if (rc != Result{}) return fail(rc, "%s on device %d", DP_NAME(stream_destroy), dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status copy_async(int dev, void* stream, void* dst, const void* src, size_t size,
                    hmc_copy_kind_t kind) override {
    Scope scope(api_, state_, ordinals_[dev]);
    if (!scope.ok()) return fail(scope.result(), "make device %d current for copy_async", dev);
    Result rc =
        V::copy_async(api_, state_, dst, src, size, kind, static_cast<typename V::Stream>(stream));
    if (rc != Result{})
      return fail(rc, "asynchronous copy of %zu bytes %p -> %p (%s) on a device %d stream", size,
                  src, dst, kind_name(kind), dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status event_create(int dev, void** event) override {
    Scope scope(api_, state_, ordinals_[dev]);
    if (!scope.ok()) return fail(scope.result(), "make device %d current for event_create", dev);
    Result rc = call_out(api_.event_create, event, V::kEventFlags);
    if (rc != Result{}) return fail(rc, "%s on device %d", DP_NAME(event_create), dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status event_destroy(int dev, void* event) override {
    Result rc = api_.event_destroy(static_cast<typename V::Event>(event));
    if (rc != Result{}) return fail(rc, "%s on device %d", DP_NAME(event_destroy), dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status event_record(int dev, void* event, void* stream) override {
    Scope scope(api_, state_, ordinals_[dev]);
    if (!scope.ok()) return fail(scope.result(), "make device %d current for event_record", dev);
    Result rc = api_.event_record(static_cast<typename V::Event>(event),
                                  static_cast<typename V::Stream>(stream));
    if (rc != Result{}) return fail(rc, "%s on device %d", DP_NAME(event_record), dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status event_query(int dev, void* event) override {
    Result rc = api_.event_query(static_cast<typename V::Event>(event));
    if (rc == Result{}) return HMC_PLUGIN_SUCCESS;
    if (rc == V::kNotReady) return HMC_PLUGIN_IN_PROGRESS;
    return fail(rc, "%s on device %d: an operation before the event failed", DP_NAME(event_query),
                dev);
  }

  Status ipc_get(int dev, void* base, void* vendor_handle) override {
    Scope scope(api_, state_, ordinals_[dev]);
    if (!scope.ok()) return fail(scope.result(), "make device %d current for ipc_export", dev);
    typename V::IpcHandle h{};
    Result rc = api_.ipc_get(&h, DevPtr{base});
    if (rc != Result{}) return fail(rc, "%s(%p) on device %d", DP_NAME(ipc_get), base, dev);
    std::memcpy(vendor_handle, &h, sizeof h);
    return HMC_PLUGIN_SUCCESS;
  }

  Status ipc_open(int dev, const void* vendor_handle, void** ptr) override {
    Scope scope(api_, state_, ordinals_[dev]);
    if (!scope.ok()) return fail(scope.result(), "make device %d current for ipc_open", dev);
    typename V::IpcHandle h;
    std::memcpy(&h, vendor_handle, sizeof h);
    Result rc = call_out(api_.ipc_open, ptr, h, V::ipc_open_flags(state_));
    if (rc != Result{}) return fail(rc, "%s on device %d", DP_NAME(ipc_open), dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status ipc_close(int dev, void* ptr) override {
    Scope scope(api_, state_, ordinals_[dev]);
    if (!scope.ok()) return fail(scope.result(), "make device %d current for ipc_close", dev);
    Result rc = api_.ipc_close(DevPtr{ptr});
    if (rc != Result{}) return fail(rc, "%s(%p) on device %d", DP_NAME(ipc_close), ptr, dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status dmabuf_export(int dev, uintptr_t base, size_t alloc_size, const void* ptr, size_t size,
                       int* fd, uint64_t* offset) override {
    Scope scope(api_, state_, ordinals_[dev]);
    if (!scope.ok()) return fail(scope.result(), "make device %d current for dmabuf_export", dev);
    if (!api_.range_handle) return V::dmabuf_fallback(api_, state_, *log_, ptr, size, fd, offset);
    DmabufRange r = dmabuf_range(base, ptr, size);
    int out = -1;
    auto rc = api_.range_handle(&out, DevPtr{reinterpret_cast<void*>(r.start)}, r.size,
                                V::kDmabufHandleType, 0);
    if (!ok(rc))
      return fail(rc, "%s(0x%" PRIxPTR ", %zu bytes, dma-buf fd) on device %d",
                  DP_NAME(range_handle), r.start, r.size, dev);
    *fd = out;
    *offset = r.offset;
    return HMC_PLUGIN_SUCCESS;
  }

 private:
  bool resolve_symbols(std::string* why) {
    return devplug::resolve_symbols(
        &api_, V::symbols(), [this](const SymbolName& n) { return V::resolve(main_, state_, n); },
        main_.name(), companion_, *log_, &resolved_, why);
  }

  // Describes device `ordinal`; false with *why when it cannot be used.
  bool open_one(int ordinal, bool ipc, DeviceDesc* d, std::string* why) {
    Device h = static_cast<Device>(ordinal);
    if (api_.device_get) {
      auto rc = api_.device_get(&h, ordinal);
      if (!ok(rc)) {
        *why =
            std::string(DP_NAME(device_get)) + "(" + std::to_string(ordinal) + "): " + describe(rc);
        return false;
      }
    }
    Result rc = static_cast<Result>(V::open_device(api_, state_, ordinal, h));
    if (!ok(rc)) {
      *why = "opening device " + std::to_string(ordinal) + ": " + describe(rc);
      return false;
    }
    ordinals_.push_back(ordinal);
    handles_.push_back(h);
    char buf[256] = {};
    if (api_.device_name && ok(api_.device_name(buf, static_cast<int>(sizeof buf - 1), h)))
      d->name = buf;
    else
      d->name = std::string(V::kDisplayName) + " device " + std::to_string(ordinal);
    if (api_.device_uuid) {
      typename V::Uuid u{};
      static_assert(sizeof u == sizeof d->uuid, "a device UUID is 16 bytes");
      if (ok(api_.device_uuid(&u, h))) std::memcpy(d->uuid, &u, sizeof d->uuid);
    }
    char bus[64] = {};
    if (api_.pci_bus_id && ok(api_.pci_bus_id(bus, static_cast<int>(sizeof bus - 1), h)))
      d->pci_bus_id = normalize_pci_bus_id(bus);
    d->numa_node = pci_numa_node(d->pci_bus_id);
    size_t total = 0;
    if (api_.device_total_mem && ok(api_.device_total_mem(&total, h))) {
      d->mem_bytes = total;
    } else if (api_.mem_get_info) {
      Scope scope(api_, state_, ordinal);
      size_t free_bytes = 0;
      if (scope.ok() && ok(api_.mem_get_info(&free_bytes, &total))) d->mem_bytes = total;
    }
    // The 64-byte handles of CUDA (and of HIP and MUSA, built the same way) carry an allocation
    // identity, not just an address: UCX's cuda_ipc and rocm_ipc caches rely on it too.
    if (ipc) d->caps |= HMC_DEVICE_CAP_IPC | HMC_DEVICE_CAP_IPC_UNIQUE_HANDLES;
    if (api_.host_register && api_.host_unregister) d->caps |= HMC_DEVICE_CAP_HOST_REGISTER;
    if ((api_.range_handle || V::has_dmabuf_fallback(state_)) &&
        V::dmabuf_attribute(api_, state_, h))
      d->caps |= HMC_DEVICE_CAP_DMABUF;
    if (V::gpudirect_rdma(api_, state_, h)) d->caps |= HMC_DEVICE_CAP_GPUDIRECT_RDMA;
    return true;
  }

  // PEER_ACCESS for a device that can reach every other device of the plugin directly.
  void add_peer_caps(Discovery* out) {
    if (!api_.can_access_peer || out->devices.size() < 2) return;
    for (size_t i = 0; i < handles_.size(); ++i) {
      bool all = true;
      for (size_t j = 0; j < handles_.size() && all; ++j) {
        int can = 0;
        if (i != j && (!ok(api_.can_access_peer(&can, handles_[i], handles_[j])) || !can))
          all = false;
      }
      if (all) out->devices[i].caps |= HMC_DEVICE_CAP_PEER_ACCESS;
    }
  }

  // Success of any of the runtime's result enums (a companion library may have its own).
  template <class R>
  static bool ok(R rc) {
    return rc == R{};
  }

  // "NAME (code)" for a result of the main library (named by the runtime when our table does
  // not know it) or of its companion.
  template <class R>
  std::string describe(R rc) const {
    const char* runtime_name = nullptr;
    if constexpr (std::is_same_v<R, Result>) runtime_name = call_error_name(api_.error_name, rc);
    return V::errors().describe(static_cast<int>(rc), runtime_name);
  }

  // Logs "<what>: <vendor error>" and returns the mapped status.
  template <class R>
  __attribute__((format(printf, 3, 4))) Status fail(R rc, const char* fmt, ...) const {
    const char* runtime_name = nullptr;
    if constexpr (std::is_same_v<R, Result>) runtime_name = call_error_name(api_.error_name, rc);
    va_list ap;
    va_start(ap, fmt);
    Status st = report_failurev(*log_, V::errors(), static_cast<int>(rc), runtime_name, fmt, ap);
    va_end(ap);
    return st;
  }

  // The exported name a member was resolved from, for messages.
  const char* name_of(size_t offset) const {
    for (const auto& [off, name] : resolved_)
      if (off == offset) return name;
    for (const SymbolSpec& s : V::symbols())
      if (s.offset == offset) return s.alt[0].name;
    return "?";
  }

  static const char* kind_name(hmc_copy_kind_t kind) {
    switch (kind) {
      case HMC_COPY_HOST_TO_DEVICE: return "host to device";
      case HMC_COPY_DEVICE_TO_HOST: return "device to host";
      case HMC_COPY_DEVICE_TO_DEVICE: return "device to device";
      case HMC_COPY_HOST_TO_HOST: return "host to host";
    }
    return "?";
  }

  const Log* log_ = nullptr;
  Library main_;
  Library companion_;
  Api api_{};
  State state_{};
  std::vector<std::pair<size_t, const char*>> resolved_;
  std::vector<int> ordinals_;    // plugin device index -> runtime ordinal
  std::vector<Device> handles_;  // plugin device index -> runtime device handle
};

#undef DP_NAME

}  // namespace hmc::devplug
