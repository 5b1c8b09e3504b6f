// The cuda device plugin: the CUDA driver API (libcuda.so.1, opened at run time), driven by the
// shared CUDA-shaped backend (devplug/cuda_shaped.h). Every driver function is resolved through
// cuGetProcAddress with the ABI version of the prototype declared in cuda_api.h, as NCCL and
// PyTorch do, so a name that cuda.h maps to a suffixed symbol (cuMemAlloc -> cuMemAlloc_v2) gets
// the ABI we declared. Work runs on each device's primary context, the one the CUDA runtime uses,
// so memory allocated by applications through the runtime (PyTorch tensors) is understood; the
// calling thread's current context is restored after every call.
#include <memory>
#include <string>
#include <vector>

#include "cuda_api.h"
#include "devplug/cuda_shaped.h"
#include "devplug/plugin.h"

namespace hmc::devplug::cuda {
namespace {

using namespace hmc::vendor::cuda;

struct CudaApi {
  // Members the shared backend calls (see cuda_shaped.h).
  PFN_cuDeviceGetCount device_count;
  PFN_cuDeviceGet device_get;
  PFN_cuDeviceGetName device_name;
  PFN_cuDeviceTotalMem_v2 device_total_mem;
  PFN_cuDeviceGetUuid_v2 device_uuid;
  PFN_cuDeviceGetPCIBusId pci_bus_id;
  PFN_cuMemGetInfo_v2 mem_get_info;
  PFN_cuDeviceCanAccessPeer can_access_peer;
  PFN_cuMemAlloc_v2 mem_alloc;
  PFN_cuMemFree_v2 mem_free;
  PFN_cuMemHostAlloc host_alloc;
  PFN_cuMemFreeHost host_free;
  PFN_cuMemHostRegister_v2 host_register;
  PFN_cuMemHostUnregister host_unregister;
  PFN_cuStreamCreate stream_create;
  PFN_cuStreamDestroy_v2 stream_destroy;
  PFN_cuEventCreate event_create;
  PFN_cuEventRecord event_record;
  PFN_cuEventQuery event_query;
  PFN_cuEventDestroy_v2 event_destroy;
  PFN_cuIpcGetMemHandle ipc_get;
  PFN_cuIpcOpenMemHandle_v2 ipc_open;
  PFN_cuIpcCloseMemHandle ipc_close;
  PFN_cuMemGetAddressRange_v2 address_range;
  PFN_cuMemGetHandleForAddressRange range_handle;
  PFN_cuGetErrorName error_name;
  // The driver API's own: contexts, per-direction copies, attributes.
  PFN_cuInit init;
  PFN_cuDevicePrimaryCtxRetain primary_retain;
  PFN_cuDevicePrimaryCtxRelease_v2 primary_release;
  PFN_cuCtxGetCurrent ctx_get;
  PFN_cuCtxSetCurrent ctx_set;
  PFN_cuDeviceGetAttribute attribute;
  PFN_cuMemcpyHtoDAsync_v2 memcpy_htod;
  PFN_cuMemcpyDtoHAsync_v2 memcpy_dtoh;
  PFN_cuMemcpyDtoDAsync_v2 memcpy_dtod;
  PFN_cuMemcpyAsync memcpy_any;
  PFN_cuPointerGetAttribute pointer_attribute;
};

struct CudaState {
  PFN_cuGetProcAddress get_proc_address = nullptr;
  std::vector<CUcontext> contexts;  // primary context per ordinal (nullptr: not retained)
};

constexpr ErrorInfo kErrors[] = {
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", HMC_PLUGIN_ERR_NO_MEMORY},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", HMC_PLUGIN_ERR_INTERNAL},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", HMC_PLUGIN_ERR_INTERNAL},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", HMC_PLUGIN_ERR_INTERNAL},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE", HMC_PLUGIN_ERR_INTERNAL},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", HMC_PLUGIN_ERR_INTERNAL},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", HMC_PLUGIN_ERR_INTERNAL},
    {CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", HMC_PLUGIN_ERR_NOT_SUPPORTED},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", HMC_PLUGIN_IN_PROGRESS},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", HMC_PLUGIN_ERR_INTERNAL},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", HMC_PLUGIN_ERR_INTERNAL},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", HMC_PLUGIN_ERR_NOT_SUPPORTED},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", HMC_PLUGIN_ERR_NOT_SUPPORTED},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     HMC_PLUGIN_ERR_VERSION},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", HMC_PLUGIN_ERR_INTERNAL},
};

struct Cuda : VendorDefaults {
  using Api = CudaApi;
  using State = CudaState;
  using Result = CUresult;
  using Device = CUdevice;
  using Uuid = CUuuid;
  using IpcHandle = CUipcMemHandle;
  using Stream = CUstream;
  using Event = CUevent;

  static constexpr const char* kDisplayName = "CUDA";
  static constexpr const char* kInitCall = "cuInit";
  static constexpr int kMinVersion = kMinDriverVersion;
  static constexpr Result kNotReady = CUDA_ERROR_NOT_READY;
  static constexpr unsigned kStreamFlags = CU_STREAM_NON_BLOCKING;
  static constexpr unsigned kEventFlags = CU_EVENT_DISABLE_TIMING;
  static constexpr unsigned kHostAllocFlags = CU_MEMHOSTALLOC_PORTABLE;
  static constexpr unsigned kHostRegisterFlags = CU_MEMHOSTREGISTER_PORTABLE;
  static constexpr CUmemRangeHandleType kDmabufHandleType = CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD;

  static unsigned ipc_open_flags(const State&) { return CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS; }

  static const ErrorTable& errors() {
    static const ErrorTable table(kErrors);
    return table;
  }
  static std::vector<std::string> libraries() { return {"libcuda.so.1"}; }
  static std::vector<std::string> companion_libraries() { return {}; }

  // Names and cuGetProcAddress versions (the version that introduced the prototype we declare).
  static const std::vector<SymbolSpec>& symbols() {
    constexpr From M = From::Main;
    static const std::vector<SymbolSpec> s = {
        DP_SYMBOL(Api, init, true, M, {"cuInit", 2000}),
        DP_SYMBOL(Api, device_count, true, M, {"cuDeviceGetCount", 2000}),
        DP_SYMBOL(Api, device_get, true, M, {"cuDeviceGet", 2000}),
        DP_SYMBOL(Api, device_name, false, M, {"cuDeviceGetName", 2000}),
        DP_SYMBOL(Api, device_total_mem, false, M, {"cuDeviceTotalMem", 3020}),
        DP_SYMBOL(Api, device_uuid, false, M, {"cuDeviceGetUuid", 11040},
                  {"cuDeviceGetUuid", 9020}),
        DP_SYMBOL(Api, pci_bus_id, false, M, {"cuDeviceGetPCIBusId", 4010}),
        DP_SYMBOL(Api, mem_get_info, false, M, {"cuMemGetInfo", 3020}),
        DP_SYMBOL(Api, can_access_peer, false, M, {"cuDeviceCanAccessPeer", 4000}),
        DP_SYMBOL(Api, attribute, true, M, {"cuDeviceGetAttribute", 2000}),
        DP_SYMBOL(Api, primary_retain, true, M, {"cuDevicePrimaryCtxRetain", 7000}),
        DP_SYMBOL(Api, primary_release, true, M, {"cuDevicePrimaryCtxRelease", 11000}),
        DP_SYMBOL(Api, ctx_get, true, M, {"cuCtxGetCurrent", 4000}),
        DP_SYMBOL(Api, ctx_set, true, M, {"cuCtxSetCurrent", 4000}),
        DP_SYMBOL(Api, mem_alloc, true, M, {"cuMemAlloc", 3020}),
        DP_SYMBOL(Api, mem_free, true, M, {"cuMemFree", 3020}),
        DP_SYMBOL(Api, host_alloc, false, M, {"cuMemHostAlloc", 2020}),
        DP_SYMBOL(Api, host_free, false, M, {"cuMemFreeHost", 2000}),
        DP_SYMBOL(Api, host_register, false, M, {"cuMemHostRegister", 6050}),
        DP_SYMBOL(Api, host_unregister, false, M, {"cuMemHostUnregister", 4000}),
        DP_SYMBOL(Api, memcpy_htod, true, M, {"cuMemcpyHtoDAsync", 3020}),
        DP_SYMBOL(Api, memcpy_dtoh, true, M, {"cuMemcpyDtoHAsync", 3020}),
        DP_SYMBOL(Api, memcpy_dtod, true, M, {"cuMemcpyDtoDAsync", 3020}),
        DP_SYMBOL(Api, memcpy_any, true, M, {"cuMemcpyAsync", 4000}),
        DP_SYMBOL(Api, stream_create, true, M, {"cuStreamCreate", 2000}),
        DP_SYMBOL(Api, stream_destroy, true, M, {"cuStreamDestroy", 4000}),
        DP_SYMBOL(Api, event_create, true, M, {"cuEventCreate", 2000}),
        DP_SYMBOL(Api, event_record, true, M, {"cuEventRecord", 2000}),
        DP_SYMBOL(Api, event_query, true, M, {"cuEventQuery", 2000}),
        DP_SYMBOL(Api, event_destroy, true, M, {"cuEventDestroy", 4000}),
        DP_SYMBOL(Api, ipc_get, false, M, {"cuIpcGetMemHandle", 4010}),
        DP_SYMBOL(Api, ipc_open, false, M, {"cuIpcOpenMemHandle", 11000}),
        DP_SYMBOL(Api, ipc_close, false, M, {"cuIpcCloseMemHandle", 4010}),
        DP_SYMBOL(Api, pointer_attribute, true, M, {"cuPointerGetAttribute", 4000}),
        DP_SYMBOL(Api, address_range, false, M, {"cuMemGetAddressRange", 3020}),
        DP_SYMBOL(Api, range_handle, false, M, {"cuMemGetHandleForAddressRange", 11070}),
        DP_SYMBOL(Api, error_name, false, M, {"cuGetErrorName", 6000}),
    };
    return s;
  }

  // cuDriverGetVersion and cuGetProcAddress are the two functions taken with dlsym: the first
  // exists in every driver, the second is how everything else is found.
  static bool read_version(const Library& lib, State& st, int* version, std::string* why) {
    auto get = reinterpret_cast<PFN_cuDriverGetVersion>(lib.symbol("cuDriverGetVersion"));
    if (get == nullptr) {
      *why = "not a CUDA driver library (it exports no cuDriverGetVersion)";
      return false;
    }
    int v = 0;
    CUresult rc = get(&v);
    if (rc != CUDA_SUCCESS) {
      *why = "cuDriverGetVersion: " + errors().describe(rc);
      return false;
    }
    st.get_proc_address = reinterpret_cast<PFN_cuGetProcAddress>(lib.symbol("cuGetProcAddress"));
    if (v >= kMinVersion && st.get_proc_address == nullptr) {
      *why = version_text(v) + " exports no cuGetProcAddress";
      return false;
    }
    *version = v;
    return true;
  }

  static std::string version_text(int v) {
    return "CUDA driver " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  }

  static void* resolve(const Library&, State& st, const SymbolName& n) {
    void* fn = nullptr;
    if (st.get_proc_address(n.name, &fn, n.version, 0) != CUDA_SUCCESS) return nullptr;
    return fn;
  }

  static Result init(Api& api, State&, const Library&, Library&, const Log&) { return api.init(0); }

  static Result open_device(Api& api, State& st, int ordinal, Device dev) {
    if (st.contexts.size() <= static_cast<size_t>(ordinal)) st.contexts.resize(ordinal + 1);
    return api.primary_retain(&st.contexts[ordinal], dev);
  }

  static void close_device(Api& api, State& st, int ordinal, Device dev) {
    if (static_cast<size_t>(ordinal) < st.contexts.size() && st.contexts[ordinal] != nullptr) {
      api.primary_release(dev);
      st.contexts[ordinal] = nullptr;
    }
  }

  // Makes the device's primary context current for the calling thread, and restores the
  // previous one (the application's) on exit.
  class Scope {
   public:
    Scope(Api& api, State& st, int ordinal) : api_(api) {
      CUcontext want = st.contexts[ordinal];
      rc_ = api.ctx_get(&previous_);
      if (rc_ == CUDA_SUCCESS && previous_ != want) {
        rc_ = api.ctx_set(want);
        switched_ = rc_ == CUDA_SUCCESS;
      }
    }
    ~Scope() {
      if (switched_) api_.ctx_set(previous_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    bool ok() const { return rc_ == CUDA_SUCCESS; }
    CUresult result() const { return rc_; }

   private:
    Api& api_;
    CUcontext previous_ = nullptr;
    CUresult rc_ = CUDA_SUCCESS;
    bool switched_ = false;
  };

  static Result copy_async(Api& api, State&, void* dst, const void* src, size_t size,
                           hmc_copy_kind_t kind, Stream stream) {
    switch (kind) {
      case HMC_COPY_HOST_TO_DEVICE: return api.memcpy_htod(DevPtr{dst}, src, size, stream);
      case HMC_COPY_DEVICE_TO_HOST: return api.memcpy_dtoh(dst, DevPtr{src}, size, stream);
      case HMC_COPY_DEVICE_TO_DEVICE:
        return api.memcpy_dtod(DevPtr{dst}, DevPtr{src}, size, stream);
      case HMC_COPY_HOST_TO_HOST:
        // With unified addressing the driver tells host memory by its address.
        return api.memcpy_any(DevPtr{dst}, DevPtr{src}, size, stream);
    }
    return CUDA_ERROR_INVALID_VALUE;
  }

  static bool pointer_kind(Api& api, State&, const void* ptr, int* ordinal, bool* is_host) {
    unsigned int type = 0;  // the attribute is written as a CUmemorytype (an unsigned int)
    if (api.pointer_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, DevPtr{ptr}) != CUDA_SUCCESS)
      return false;
    if (type == CU_MEMORYTYPE_HOST) {
      *is_host = true;
      return true;
    }
    if (type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED) return false;
    int dev = -1;
    if (api.pointer_attribute(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, DevPtr{ptr}) !=
        CUDA_SUCCESS)
      return false;
    *ordinal = dev;
    *is_host = false;
    return true;
  }

  static bool dmabuf_attribute(Api& api, State&, Device dev) {
    int v = 0;
    return api.attribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) == CUDA_SUCCESS && v != 0;
  }

  static bool gpudirect_rdma(Api& api, State&, Device dev) {
    int v = 0;
    return api.attribute(&v, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, dev) == CUDA_SUCCESS &&
           v != 0;
  }
};

std::unique_ptr<Backend> make_backend() {
  return std::make_unique<CudaShapedBackend<Cuda>>();
}

const hmc_config_var_t kConfigVars[] = {
    {"HMC_CUDA_LIBRARY", "libcuda.so.1",
     "CUDA driver library the cuda device plugin opens (a file name or a path)"},
    {nullptr, nullptr, nullptr}};

const PluginInfo kInfo = {"cuda",      "NVIDIA",      "0.1.0",           "HMC_CUDA_LIBRARY",
                          kConfigVars, &make_backend, HMC_MEM_IFACE_CUDA};

}  // namespace
}  // namespace hmc::devplug::cuda

HMC_DEVPLUG_ENTRY(hmc::devplug::cuda::kInfo)
