// The mlu device plugin: Cambricon's CNRT runtime (libcnrt.so), with the CNDrv driver
// (libcndrv.so) for what CNRT has no call for: device names, UUIDs and sizes, allocation ranges,
// and dma-buf export (cnMemGetHandleForAddressRange). CNRT's API is not CUDA-shaped enough for
// the shared template (queue before direction, its own direction values, "busy" notifiers, 8-byte
// IPC handles), so this is its own Backend; it reuses the shared plugin code for everything else
// (argument checks, device list, stream/event objects, allocation records, IPC envelopes, error
// text, library loading, the per-thread device scope and the dma-buf range rule).
#include <cinttypes>
#include <cstdarg>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cnrt_api.h"
#include "devplug/backend.h"
#include "devplug/errors.h"
#include "devplug/library.h"
#include "devplug/pci.h"
#include "devplug/plugin.h"
#include "devplug/runtime_shaped.h"

namespace hmc::devplug::mlu {
namespace {

using namespace hmc::vendor::mlu;

struct CnrtApi {
  PFN_cnrtGetDeviceCount device_count;
  PFN_cnrtSetDevice set_device;
  PFN_cnrtGetDevice get_device;
  PFN_cnrtDeviceGetPCIBusId pci_bus_id;
  PFN_cnrtMemGetInfo mem_get_info;
  PFN_cnrtMalloc mem_alloc;
  PFN_cnrtFree mem_free;
  PFN_cnrtHostMalloc host_alloc;
  PFN_cnrtFreeHost host_free;
  PFN_cnrtMemcpyAsync memcpy_async;
  PFN_cnrtQueueCreate queue_create;
  PFN_cnrtQueueDestroy queue_destroy;
  PFN_cnrtNotifierCreate notifier_create;
  PFN_cnrtNotifierDestroy notifier_destroy;
  PFN_cnrtPlaceNotifier place_notifier;
  PFN_cnrtQueryNotifier query_notifier;
  PFN_cnrtAcquireMemHandle ipc_get;
  PFN_cnrtMapMemHandle ipc_open;
  PFN_cnrtUnMapMemHandle ipc_close;
  PFN_cnrtPointerGetAttributes pointer_attributes;
  PFN_cnrtGetErrorName error_name;
};

struct CndrvApi {
  PFN_cnInit init;
  PFN_cnDeviceGet device_get;
  PFN_cnDeviceGetName device_name;
  PFN_cnDeviceTotalMem device_total_mem;
  PFN_cnDeviceGetUuid device_uuid;
  PFN_cnDeviceGetAttribute attribute;
  PFN_cnMemGetAddressRange address_range;
  PFN_cnMemGetHandleForAddressRange range_handle;
  PFN_cnGetErrorName error_name;
};

constexpr ErrorInfo kCnrtErrors[] = {
    {cnrtErrorNotReady, "cnrtErrorNotReady", HMC_PLUGIN_IN_PROGRESS},
    {cnrtErrorNoDevice, "cnrtErrorNoDevice", HMC_PLUGIN_ERR_INTERNAL},
    {cnrtErrorArgsInvalid, "cnrtErrorArgsInvalid", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {cnrtErrorSys, "cnrtErrorSys", HMC_PLUGIN_ERR_SYSTEM},
    {cnrtErrorNoMem, "cnrtErrorNoMem", HMC_PLUGIN_ERR_NO_MEMORY},
    {cnrtErrorDevice, "cnrtErrorDevice", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {cnrtErrorMemcpyDirectionInvalid, "cnrtErrorMemcpyDirectionInvalid",
     HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {cnrtErrorBusy, "cnrtErrorBusy", HMC_PLUGIN_IN_PROGRESS},
};

constexpr ErrorInfo kCndrvErrors[] = {
    {CN_ERROR_NOT_READY, "CN_ERROR_NOT_READY", HMC_PLUGIN_IN_PROGRESS},
    {CN_ERROR_NOT_INITIALIZED, "CN_ERROR_NOT_INITIALIZED", HMC_PLUGIN_ERR_INTERNAL},
    {CN_ERROR_DEINITIALIZED, "CN_ERROR_DEINITIALIZED", HMC_PLUGIN_ERR_INTERNAL},
    {CN_ERROR_NO_DEVICE, "CN_ERROR_NO_DEVICE", HMC_PLUGIN_ERR_INTERNAL},
    {CN_ERROR_INVALID_DEVICE, "CN_ERROR_INVALID_DEVICE", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {CN_ERROR_INVALID_VALUE, "CN_ERROR_INVALID_VALUE", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {CN_OPS_ERROR_NOT_SUPPORTED, "CN_OPS_ERROR_NOT_SUPPORTED", HMC_PLUGIN_ERR_NOT_SUPPORTED},
    {CN_MEMORY_ERROR_OUT_OF_MEMORY, "CN_MEMORY_ERROR_OUT_OF_MEMORY", HMC_PLUGIN_ERR_NO_MEMORY},
    {CN_MEMORY_ERROR_INVALID_ADDRESS, "CN_MEMORY_ERROR_INVALID_ADDRESS",
     HMC_PLUGIN_ERR_INVALID_ARGUMENT},
};

const ErrorTable& cnrt_errors() {
  static const ErrorTable t(kCnrtErrors);
  return t;
}
const ErrorTable& cndrv_errors() {
  static const ErrorTable t(kCndrvErrors);
  return t;
}

const std::vector<SymbolSpec>& cnrt_symbols() {
  constexpr From M = From::Main;
  static const std::vector<SymbolSpec> s = {
      DP_SYMBOL(CnrtApi, device_count, true, M, {"cnrtGetDeviceCount"}),
      DP_SYMBOL(CnrtApi, set_device, true, M, {"cnrtSetDevice"}),
      DP_SYMBOL(CnrtApi, get_device, true, M, {"cnrtGetDevice"}),
      DP_SYMBOL(CnrtApi, pci_bus_id, false, M, {"cnrtDeviceGetPCIBusId"}),
      DP_SYMBOL(CnrtApi, mem_get_info, false, M, {"cnrtMemGetInfo"}),
      DP_SYMBOL(CnrtApi, mem_alloc, true, M, {"cnrtMalloc"}),
      DP_SYMBOL(CnrtApi, mem_free, true, M, {"cnrtFree"}),
      DP_SYMBOL(CnrtApi, host_alloc, false, M, {"cnrtHostMalloc"}),
      DP_SYMBOL(CnrtApi, host_free, false, M, {"cnrtFreeHost"}),
      DP_SYMBOL(CnrtApi, memcpy_async, true, M, {"cnrtMemcpyAsync"}),
      DP_SYMBOL(CnrtApi, queue_create, true, M, {"cnrtQueueCreate"}),
      DP_SYMBOL(CnrtApi, queue_destroy, true, M, {"cnrtQueueDestroy"}),
      DP_SYMBOL(CnrtApi, notifier_create, true, M, {"cnrtNotifierCreate"}),
      DP_SYMBOL(CnrtApi, notifier_destroy, true, M, {"cnrtNotifierDestroy"}),
      DP_SYMBOL(CnrtApi, place_notifier, true, M, {"cnrtPlaceNotifier"}),
      DP_SYMBOL(CnrtApi, query_notifier, true, M, {"cnrtQueryNotifier"}),
      DP_SYMBOL(CnrtApi, ipc_get, false, M, {"cnrtAcquireMemHandle"}),
      DP_SYMBOL(CnrtApi, ipc_open, false, M, {"cnrtMapMemHandle"}),
      DP_SYMBOL(CnrtApi, ipc_close, false, M, {"cnrtUnMapMemHandle"}),
      DP_SYMBOL(CnrtApi, pointer_attributes, false, M, {"cnrtPointerGetAttributes"}),
      DP_SYMBOL(CnrtApi, error_name, false, M, {"cnrtGetErrorName"}),
  };
  return s;
}

const std::vector<SymbolSpec>& cndrv_symbols() {
  constexpr From D = From::Companion;
  static const std::vector<SymbolSpec> s = {
      DP_SYMBOL(CndrvApi, init, false, D, {"cnInit"}),
      DP_SYMBOL(CndrvApi, device_get, false, D, {"cnDeviceGet"}),
      DP_SYMBOL(CndrvApi, device_name, false, D, {"cnDeviceGetName"}),
      DP_SYMBOL(CndrvApi, device_total_mem, false, D, {"cnDeviceTotalMem"}),
      DP_SYMBOL(CndrvApi, device_uuid, false, D, {"cnDeviceGetUuid"}),
      DP_SYMBOL(CndrvApi, attribute, false, D, {"cnDeviceGetAttribute"}),
      DP_SYMBOL(CndrvApi, address_range, false, D, {"cnMemGetAddressRange"}),
      DP_SYMBOL(CndrvApi, range_handle, false, D, {"cnMemGetHandleForAddressRange"}),
      DP_SYMBOL(CndrvApi, error_name, false, D, {"cnGetErrorName"}),
  };
  return s;
}

using Scope = CurrentDeviceScope<CnrtApi>;

class MluBackend final : public Backend {
 public:
  Status open(const OpenArgs& args, const Log& log, Discovery* out) override {
    log_ = &log;
    std::string why;
    std::vector<std::string> names =
        args.library.empty()
            ? std::vector<std::string>{"libcnrt.so", "/usr/local/neuware/lib64/libcnrt.so"}
            : std::vector<std::string>{args.library};
    if (!cnrt_.open(names, &why)) {
      out->reason = why;
      return HMC_PLUGIN_SUCCESS;
    }
    auto get_version = reinterpret_cast<PFN_cnrtGetLibVersion>(cnrt_.symbol("cnrtGetLibVersion"));
    if (get_version == nullptr) {
      out->reason = cnrt_.name() + ": not a CNRT library (it exports no cnrtGetLibVersion)";
      return HMC_PLUGIN_SUCCESS;
    }
    int major = 0, minor = 0, patch = 0;
    cnrtRet_t rc = get_version(&major, &minor, &patch);
    if (rc != cnrtSuccess) {
      out->reason = cnrt_.name() + ": cnrtGetLibVersion: " + cnrt_errors().describe(rc);
      return HMC_PLUGIN_SUCCESS;
    }
    out->runtime_version =
        "CNRT " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    if (major < kMinMajorVersion) {
      out->reason = out->runtime_version + " (" + cnrt_.name() + ") is older than CNRT " +
                    std::to_string(kMinMajorVersion) + ".0, the oldest this plugin supports";
      return HMC_PLUGIN_SUCCESS;
    }
    if (!resolve_symbols(
            &cnrt_api_, cnrt_symbols(),
            [this](const SymbolName& n) { return cnrt_.symbol(n.name); }, cnrt_.name(), cndrv_, log,
            &resolved_, &why)) {
      out->reason = why;
      return HMC_PLUGIN_SUCCESS;
    }
    open_driver(args, log);

    unsigned int count = 0;
    rc = cnrt_api_.device_count(&count);
    if (rc != cnrtSuccess) {
      out->reason = "cnrtGetDeviceCount: " + describe(rc);
      return HMC_PLUGIN_SUCCESS;
    }
    if (count == 0) {
      out->reason = "cnrtGetDeviceCount reports 0 devices";
      return HMC_PLUGIN_SUCCESS;
    }
    bool ipc = cnrt_api_.ipc_get && cnrt_api_.ipc_open && cnrt_api_.ipc_close;
    out->vendor_ipc_handle_size = ipc ? sizeof(cnrtIpcMemHandle) : 0;
    for (int i = 0; i < static_cast<int>(count); ++i)
      out->devices.push_back(describe_device(i, ipc));
    device_count_ = static_cast<int>(count);
    return HMC_PLUGIN_SUCCESS;
  }

  void close() override {}

  Status mem_alloc(int dev, size_t size, void** ptr) override {
    Scope scope(cnrt_api_, *this, dev);
    if (!scope.ok()) return fail(scope.result(), "cnrtSetDevice(%d) for mem_alloc", dev);
    cnrtRet_t rc = cnrt_api_.mem_alloc(ptr, size);
    if (rc != cnrtSuccess) return fail(rc, "cnrtMalloc(%zu bytes) on device %d", size, dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status mem_free(int dev, void* ptr) override {
    Scope scope(cnrt_api_, *this, dev);
    if (!scope.ok()) return fail(scope.result(), "cnrtSetDevice(%d) for mem_free", dev);
    cnrtRet_t rc = cnrt_api_.mem_free(ptr);
    if (rc != cnrtSuccess) return fail(rc, "cnrtFree(%p) on device %d", ptr, dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status host_alloc(size_t size, void** ptr) override {
    if (!cnrt_api_.host_alloc || !cnrt_api_.host_free) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    Scope scope(cnrt_api_, *this, 0);
    if (!scope.ok()) return fail(scope.result(), "cnrtSetDevice(0) for host_alloc");
    cnrtRet_t rc = cnrt_api_.host_alloc(ptr, size);
    if (rc != cnrtSuccess) return fail(rc, "cnrtHostMalloc(%zu bytes)", size);
    return HMC_PLUGIN_SUCCESS;
  }

  Status host_free(void* ptr) override {
    if (!cnrt_api_.host_free) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    cnrtRet_t rc = cnrt_api_.host_free(ptr);
    if (rc != cnrtSuccess) return fail(rc, "cnrtFreeHost(%p)", ptr);
    return HMC_PLUGIN_SUCCESS;
  }

  bool query_foreign(const void* ptr, ForeignPointer* out) override {
    if (!cnrt_api_.pointer_attributes) return false;
    union {
      cnrtPointerAttributes_t attr;
      unsigned char room[512];  // in case the runtime writes more than we declare
    } u;
    std::memset(&u, 0, sizeof u);
    if (cnrt_api_.pointer_attributes(&u.attr, ptr) != cnrtSuccess) return false;
    ForeignPointer f;
    if (u.attr.type == cnrtMemTypeHost) {
      f.is_host = true;
    } else if (u.attr.type == cnrtMemTypeDevice && u.attr.device >= 0 &&
               u.attr.device < device_count_) {
      f.device = u.attr.device;
    } else {
      return false;
    }
    f.base = reinterpret_cast<uintptr_t>(ptr);
    CNaddr base = 0;
    cn_uint64_t size = 0;
    if (cndrv_api_.address_range &&
        cndrv_api_.address_range(&base, &size, reinterpret_cast<uintptr_t>(ptr)) == CN_SUCCESS) {
      f.base = base;
      f.size = size;
    }
    *out = f;
    return true;
  }

  Status stream_create(int dev, void** stream) override {
    Scope scope(cnrt_api_, *this, dev);
    if (!scope.ok()) return fail(scope.result(), "cnrtSetDevice(%d) for stream_create", dev);
    cnrtQueue_t q = nullptr;
    cnrtRet_t rc = cnrt_api_.queue_create(&q);
    if (rc != cnrtSuccess) return fail(rc, "cnrtQueueCreate on device %d", dev);
    *stream = q;
    return HMC_PLUGIN_SUCCESS;
  }

  Status stream_destroy(int dev, void* stream) override {
    cnrtRet_t rc = cnrt_api_.queue_destroy(static_cast<cnrtQueue_t>(stream));
    if (rc != cnrtSuccess) return fail(rc, "cnrtQueueDestroy on device %d", dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status copy_async(int dev, void* stream, void* dst, const void* src, size_t size,
                    hmc_copy_kind_t kind) override {
    cnrtMemTransDir_t dir = kind == HMC_COPY_HOST_TO_DEVICE     ? cnrtMemcpyHostToDev
                            : kind == HMC_COPY_DEVICE_TO_HOST   ? cnrtMemcpyDevToHost
                            : kind == HMC_COPY_DEVICE_TO_DEVICE ? cnrtMemcpyDevToDev
                                                                : cnrtMemcpyHostToHost;
    Scope scope(cnrt_api_, *this, dev);
    if (!scope.ok()) return fail(scope.result(), "cnrtSetDevice(%d) for copy_async", dev);
    // CNRT takes the source as a non-const pointer; it does not write through it.
    cnrtRet_t rc = cnrt_api_.memcpy_async(dst, const_cast<void*>(src), size,
                                          static_cast<cnrtQueue_t>(stream), dir);
    if (rc != cnrtSuccess)
      return fail(rc, "cnrtMemcpyAsync(%zu bytes %p -> %p, direction %d) on device %d", size, src,
                  dst, static_cast<int>(dir), dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status event_create(int dev, void** event) override {
    Scope scope(cnrt_api_, *this, dev);
    if (!scope.ok()) return fail(scope.result(), "cnrtSetDevice(%d) for event_create", dev);
    cnrtNotifier_t n = nullptr;
    cnrtRet_t rc = cnrt_api_.notifier_create(&n);
    if (rc != cnrtSuccess) return fail(rc, "cnrtNotifierCreate on device %d", dev);
    *event = n;
    return HMC_PLUGIN_SUCCESS;
  }

  Status event_destroy(int dev, void* event) override {
    cnrtRet_t rc = cnrt_api_.notifier_destroy(static_cast<cnrtNotifier_t>(event));
    if (rc != cnrtSuccess) return fail(rc, "cnrtNotifierDestroy on device %d", dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status event_record(int dev, void* event, void* stream) override {
    Scope scope(cnrt_api_, *this, dev);
    if (!scope.ok()) return fail(scope.result(), "cnrtSetDevice(%d) for event_record", dev);
    cnrtRet_t rc = cnrt_api_.place_notifier(static_cast<cnrtNotifier_t>(event),
                                            static_cast<cnrtQueue_t>(stream));
    if (rc != cnrtSuccess) return fail(rc, "cnrtPlaceNotifier on device %d", dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status event_query(int dev, void* event) override {
    cnrtRet_t rc = cnrt_api_.query_notifier(static_cast<cnrtNotifier_t>(event));
    if (rc == cnrtSuccess) return HMC_PLUGIN_SUCCESS;
    if (rc == cnrtErrorBusy || rc == cnrtErrorNotReady) return HMC_PLUGIN_IN_PROGRESS;
    return fail(rc, "cnrtQueryNotifier on device %d: an operation before the notifier failed", dev);
  }

  Status ipc_get(int dev, void* base, void* vendor_handle) override {
    Scope scope(cnrt_api_, *this, dev);
    if (!scope.ok()) return fail(scope.result(), "cnrtSetDevice(%d) for ipc_export", dev);
    cnrtIpcMemHandle h{};
    cnrtRet_t rc = cnrt_api_.ipc_get(&h, base);
    if (rc != cnrtSuccess) return fail(rc, "cnrtAcquireMemHandle(%p) on device %d", base, dev);
    std::memcpy(vendor_handle, &h, sizeof h);
    return HMC_PLUGIN_SUCCESS;
  }

  Status ipc_open(int dev, const void* vendor_handle, void** ptr) override {
    Scope scope(cnrt_api_, *this, dev);
    if (!scope.ok()) return fail(scope.result(), "cnrtSetDevice(%d) for ipc_open", dev);
    cnrtIpcMemHandle h;
    std::memcpy(&h, vendor_handle, sizeof h);
    cnrtRet_t rc = cnrt_api_.ipc_open(ptr, h, 0);
    if (rc != cnrtSuccess) return fail(rc, "cnrtMapMemHandle on device %d", dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status ipc_close(int dev, void* ptr) override {
    Scope scope(cnrt_api_, *this, dev);
    if (!scope.ok()) return fail(scope.result(), "cnrtSetDevice(%d) for ipc_close", dev);
    cnrtRet_t rc = cnrt_api_.ipc_close(ptr);
    if (rc != cnrtSuccess) return fail(rc, "cnrtUnMapMemHandle(%p) on device %d", ptr, dev);
    return HMC_PLUGIN_SUCCESS;
  }

  Status dmabuf_export(int dev, uintptr_t base, size_t, const void* ptr, size_t size, int* fd,
                       uint64_t* offset) override {
    if (!cndrv_api_.range_handle) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    Scope scope(cnrt_api_, *this, dev);
    if (!scope.ok()) return fail(scope.result(), "cnrtSetDevice(%d) for dmabuf_export", dev);
    DmabufRange r = dmabuf_range(base, ptr, size);
    int out = -1;
    CNresult rc =
        cndrv_api_.range_handle(&out, r.start, r.size, CN_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (rc != CN_SUCCESS) {
      const char* name = nullptr;
      if (cndrv_api_.error_name) cndrv_api_.error_name(rc, &name);
      return report_failure(*log_, cndrv_errors(), rc, name,
                            "cnMemGetHandleForAddressRange(0x%" PRIxPTR
                            ", %zu bytes, dma-buf fd) "
                            "on device %d",
                            r.start, r.size, dev);
    }
    *fd = out;
    *offset = r.offset;
    return HMC_PLUGIN_SUCCESS;
  }

 private:
  // CNDrv, when present: initialised here; without it (or when cnInit fails) its features are off.
  void open_driver(const OpenArgs& args, const Log& log) {
    std::string why;
    if (!cndrv_.open(companion_candidates(args.library, {"libcndrv.so", "libcndrv.so.2",
                                                         "/usr/local/neuware/lib64/libcndrv.so"}),
                     &why)) {
      DP_INFO(log, "CNDrv not available (%s): device names, UUIDs and dma-buf export are off",
              why.c_str());
      return;
    }
    std::vector<std::pair<size_t, const char*>> names;
    resolve_symbols(
        &cndrv_api_, cndrv_symbols(), [](const SymbolName&) { return nullptr; }, "", cndrv_, log,
        &names, &why);
    CNresult rc = cndrv_api_.init ? cndrv_api_.init(0) : CN_ERROR_NOT_INITIALIZED;
    if (rc != CN_SUCCESS) {
      DP_INFO(log, "%s: cnInit: %s; device names, UUIDs and dma-buf export are off",
              cndrv_.name().c_str(), cndrv_errors().describe(rc).c_str());
      cndrv_api_ = CndrvApi{};
    }
  }

  DeviceDesc describe_device(int ordinal, bool ipc) {
    DeviceDesc d;
    CNdev h = static_cast<CNdev>(ordinal);
    bool have_handle = cndrv_api_.device_get && cndrv_api_.device_get(&h, ordinal) == CN_SUCCESS;
    char buf[256] = {};
    if (have_handle && cndrv_api_.device_name &&
        cndrv_api_.device_name(buf, sizeof buf - 1, h) == CN_SUCCESS)
      d.name = buf;
    else
      d.name = "MLU device " + std::to_string(ordinal);
    if (have_handle && cndrv_api_.device_uuid) {
      CNuuid u{};
      if (cndrv_api_.device_uuid(&u, h) == CN_SUCCESS) std::memcpy(d.uuid, &u, sizeof d.uuid);
    }
    char bus[64] = {};
    if (cnrt_api_.pci_bus_id &&
        cnrt_api_.pci_bus_id(bus, static_cast<int>(sizeof bus - 1), ordinal) == cnrtSuccess)
      d.pci_bus_id = normalize_pci_bus_id(bus);
    d.numa_node = pci_numa_node(d.pci_bus_id);
    cn_uint64_t total = 0;
    if (have_handle && cndrv_api_.device_total_mem &&
        cndrv_api_.device_total_mem(&total, h) == CN_SUCCESS) {
      d.mem_bytes = total;
    } else if (cnrt_api_.mem_get_info) {
      Scope scope(cnrt_api_, *this, ordinal);
      size_t free_bytes = 0, total_bytes = 0;
      if (scope.ok() && cnrt_api_.mem_get_info(&free_bytes, &total_bytes) == cnrtSuccess)
        d.mem_bytes = total_bytes;
    }
    if (ipc) d.caps |= HMC_DEVICE_CAP_IPC;
    if (cndrv_api_.range_handle) {
      int supported = 1;  // without the attribute call, the export function decides
      if (have_handle && cndrv_api_.attribute &&
          cndrv_api_.attribute(&supported, CN_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, h) != CN_SUCCESS)
        supported = 0;
      if (supported) d.caps |= HMC_DEVICE_CAP_DMABUF;
    }
    return d;
  }

  std::string describe(cnrtRet_t rc) const {
    return cnrt_errors().describe(rc, cnrt_api_.error_name ? cnrt_api_.error_name(rc) : nullptr);
  }

  __attribute__((format(printf, 3, 4))) Status fail(cnrtRet_t rc, const char* fmt, ...) const {
    va_list ap;
    va_start(ap, fmt);
    Status st = report_failurev(*log_, cnrt_errors(), rc,
                                cnrt_api_.error_name ? cnrt_api_.error_name(rc) : nullptr, fmt, ap);
    va_end(ap);
    return st;
  }

  const Log* log_ = nullptr;
  Library cnrt_;
  Library cndrv_;
  CnrtApi cnrt_api_{};
  CndrvApi cndrv_api_{};
  std::vector<std::pair<size_t, const char*>> resolved_;
  int device_count_ = 0;
};

std::unique_ptr<Backend> make_backend() {
  return std::make_unique<MluBackend>();
}

const hmc_config_var_t kConfigVars[] = {
    {"HMC_MLU_LIBRARY", "libcnrt.so",
     "CNRT runtime library the mlu device plugin opens (a file name or a path); CNDrv "
     "(libcndrv.so) is looked for beside it, then on the search path"},
    {nullptr, nullptr, nullptr}};

const PluginInfo kInfo = {"mlu",       "Cambricon",   "0.1.0",          "HMC_MLU_LIBRARY",
                          kConfigVars, &make_backend, HMC_MEM_IFACE_MLU};

}  // namespace
}  // namespace hmc::devplug::mlu

HMC_DEVPLUG_ENTRY(hmc::devplug::mlu::kInfo)
