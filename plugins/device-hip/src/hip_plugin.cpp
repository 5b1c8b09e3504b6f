// The hip device plugin: AMD's HIP runtime (libamdhip64, opened at run time; also Hygon DTK,
// which ships a HIP-compatible library of the same name), driven by the shared CUDA-shaped
// backend (devplug/cuda_shaped.h) through the runtime-API hooks (devplug/runtime_shaped.h).
//
// Versions: HIP 5.x and 6.x differ in the values of hipMemoryType; the plugin reads
// hipRuntimeGetVersion first and decodes pointer attributes by its major version.
// dma-buf: hipMemGetHandleForAddressRange where the runtime has it (HIP 7.0+), else
// hsa_amd_portable_export_dmabuf from the HSA runtime the HIP library loaded (ROCm 5.6+); neither
// (HIP 5.2, DTK) means no HMC_DEVICE_CAP_DMABUF.
#include <memory>
#include <string>
#include <vector>

#include "devplug/cuda_shaped.h"
#include "devplug/plugin.h"
#include "devplug/runtime_shaped.h"
#include "hip_api.h"

namespace hmc::devplug::hip {
namespace {

using namespace hmc::vendor::hip;

struct HipApi {
  // Members the shared backend calls (see cuda_shaped.h).
  PFN_hipGetDeviceCount device_count;
  PFN_hipDeviceGet device_get;
  PFN_hipDeviceGetName device_name;
  PFN_hipDeviceTotalMem device_total_mem;
  PFN_hipDeviceGetUuid device_uuid;
  PFN_hipDeviceGetPCIBusId pci_bus_id;
  PFN_hipMemGetInfo mem_get_info;
  PFN_hipDeviceCanAccessPeer can_access_peer;
  PFN_hipMalloc mem_alloc;
  PFN_hipFree mem_free;
  PFN_hipHostMalloc host_alloc;
  PFN_hipHostFree host_free;
  PFN_hipHostRegister host_register;
  PFN_hipHostUnregister host_unregister;
  PFN_hipStreamCreateWithFlags stream_create;
  PFN_hipStreamDestroy stream_destroy;
  PFN_hipEventCreateWithFlags event_create;
  PFN_hipEventRecord event_record;
  PFN_hipEventQuery event_query;
  PFN_hipEventDestroy event_destroy;
  PFN_hipIpcGetMemHandle ipc_get;
  PFN_hipIpcOpenMemHandle ipc_open;
  PFN_hipIpcCloseMemHandle ipc_close;
  PFN_hipMemGetAddressRange address_range;
  PFN_hipMemGetHandleForAddressRange range_handle;
  PFN_hipGetErrorName error_name;
  // Runtime-API members (runtime_shaped.h) and HIP's own.
  PFN_hipInit init;
  PFN_hipSetDevice set_device;
  PFN_hipGetDevice get_device;
  PFN_hipMemcpyAsync memcpy_async;
  PFN_hipPointerGetAttributes pointer_attributes;
};

struct HipState {
  int version = 0;  // hipRuntimeGetVersion
  // dma-buf before HIP 7, from the HSA runtime the HIP library loaded.
  PFN_hsa_amd_portable_export_dmabuf hsa_export = nullptr;
};

constexpr ErrorInfo kErrors[] = {
    {hipErrorInvalidValue, "hipErrorInvalidValue", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {hipErrorOutOfMemory, "hipErrorOutOfMemory", HMC_PLUGIN_ERR_NO_MEMORY},
    {hipErrorNotInitialized, "hipErrorNotInitialized", HMC_PLUGIN_ERR_INTERNAL},
    {hipErrorDeinitialized, "hipErrorDeinitialized", HMC_PLUGIN_ERR_INTERNAL},
    {hipErrorInsufficientDriver, "hipErrorInsufficientDriver", HMC_PLUGIN_ERR_VERSION},
    {hipErrorNoDevice, "hipErrorNoDevice", HMC_PLUGIN_ERR_INTERNAL},
    {hipErrorInvalidDevice, "hipErrorInvalidDevice", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {hipErrorInvalidContext, "hipErrorInvalidContext", HMC_PLUGIN_ERR_INTERNAL},
    {hipErrorInvalidHandle, "hipErrorInvalidHandle", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {hipErrorNotFound, "hipErrorNotFound", HMC_PLUGIN_ERR_NOT_SUPPORTED},
    {hipErrorNotReady, "hipErrorNotReady", HMC_PLUGIN_IN_PROGRESS},
    {hipErrorIllegalAddress, "hipErrorIllegalAddress", HMC_PLUGIN_ERR_INTERNAL},
    {hipErrorHostMemoryAlreadyRegistered, "hipErrorHostMemoryAlreadyRegistered",
     HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {hipErrorHostMemoryNotRegistered, "hipErrorHostMemoryNotRegistered",
     HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {hipErrorLaunchFailure, "hipErrorLaunchFailure", HMC_PLUGIN_ERR_INTERNAL},
    {hipErrorNotSupported, "hipErrorNotSupported", HMC_PLUGIN_ERR_NOT_SUPPORTED},
    {hipErrorUnknown, "hipErrorUnknown", HMC_PLUGIN_ERR_INTERNAL},
};

struct Hip : RuntimeShaped<Hip> {
  using Api = HipApi;
  using State = HipState;
  using Result = hipError_t;
  using Device = hipDevice_t;
  using Uuid = hipUUID;
  using IpcHandle = hipIpcMemHandle_t;
  using Stream = hipStream_t;
  using Event = hipEvent_t;
  using MemcpyKind = hipMemcpyKind;
  using PointerAttributes = hipPointerAttribute_t;
  using Scope = CurrentDeviceScope<HipApi>;

  static constexpr const char* kDisplayName = "HIP";
  static constexpr const char* kInitCall = "hipInit";
  static constexpr int kMinVersion = kMinRuntimeVersion;
  static constexpr Result kNotReady = hipErrorNotReady;
  static constexpr unsigned kStreamFlags = hipStreamNonBlocking;
  static constexpr unsigned kEventFlags = hipEventDisableTiming;
  static constexpr unsigned kHostAllocFlags = hipHostMallocPortable;
  static constexpr unsigned kHostRegisterFlags = hipHostRegisterPortable;
  static constexpr hipMemRangeHandleType kDmabufHandleType = hipMemRangeHandleTypeDmaBufFd;

  static const ErrorTable& errors() {
    static const ErrorTable table(kErrors);
    return table;
  }
  // Newest first; the unversioned paths find ROCm and Hygon DTK installs that are not on the
  // loader's search path.
  static std::vector<std::string> libraries() {
    return {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5",
            "/opt/rocm/lib/libamdhip64.so", "/opt/dtk/lib/libamdhip64.so"};
  }
  static std::vector<std::string> companion_libraries() { return {}; }

  static const std::vector<SymbolSpec>& symbols() {
    constexpr From M = From::Main;
    static const std::vector<SymbolSpec> s = {
        DP_SYMBOL(Api, init, true, M, {"hipInit"}),
        DP_SYMBOL(Api, device_count, true, M, {"hipGetDeviceCount"}),
        DP_SYMBOL(Api, device_get, false, M, {"hipDeviceGet"}),
        DP_SYMBOL(Api, device_name, false, M, {"hipDeviceGetName"}),
        DP_SYMBOL(Api, device_total_mem, false, M, {"hipDeviceTotalMem"}),
        DP_SYMBOL(Api, device_uuid, false, M, {"hipDeviceGetUuid"}),
        DP_SYMBOL(Api, pci_bus_id, false, M, {"hipDeviceGetPCIBusId"}),
        DP_SYMBOL(Api, mem_get_info, false, M, {"hipMemGetInfo"}),
        DP_SYMBOL(Api, can_access_peer, false, M, {"hipDeviceCanAccessPeer"}),
        DP_SYMBOL(Api, set_device, true, M, {"hipSetDevice"}),
        DP_SYMBOL(Api, get_device, true, M, {"hipGetDevice"}),
        DP_SYMBOL(Api, mem_alloc, true, M, {"hipMalloc"}),
        DP_SYMBOL(Api, mem_free, true, M, {"hipFree"}),
        DP_SYMBOL(Api, host_alloc, false, M, {"hipHostMalloc"}, {"hipHostAlloc"}),
        DP_SYMBOL(Api, host_free, false, M, {"hipHostFree"}, {"hipFreeHost"}),
        DP_SYMBOL(Api, host_register, false, M, {"hipHostRegister"}),
        DP_SYMBOL(Api, host_unregister, false, M, {"hipHostUnregister"}),
        DP_SYMBOL(Api, memcpy_async, true, M, {"hipMemcpyAsync"}),
        DP_SYMBOL(Api, stream_create, true, M, {"hipStreamCreateWithFlags"}),
        DP_SYMBOL(Api, stream_destroy, true, M, {"hipStreamDestroy"}),
        DP_SYMBOL(Api, event_create, true, M, {"hipEventCreateWithFlags"}),
        DP_SYMBOL(Api, event_record, true, M, {"hipEventRecord"}),
        DP_SYMBOL(Api, event_query, true, M, {"hipEventQuery"}),
        DP_SYMBOL(Api, event_destroy, true, M, {"hipEventDestroy"}),
        DP_SYMBOL(Api, ipc_get, false, M, {"hipIpcGetMemHandle"}),
        DP_SYMBOL(Api, ipc_open, false, M, {"hipIpcOpenMemHandle"}),
        DP_SYMBOL(Api, ipc_close, false, M, {"hipIpcCloseMemHandle"}),
        DP_SYMBOL(Api, pointer_attributes, true, M, {"hipPointerGetAttributes"}),
        DP_SYMBOL(Api, address_range, false, M, {"hipMemGetAddressRange"}),
        DP_SYMBOL(Api, range_handle, false, M, {"hipMemGetHandleForAddressRange"}),
        DP_SYMBOL(Api, error_name, false, M, {"hipGetErrorName"}),
    };
    return s;
  }

  static bool read_version(const Library& lib, State& st, int* version, std::string* why) {
    auto get = reinterpret_cast<PFN_hipRuntimeGetVersion>(lib.symbol("hipRuntimeGetVersion"));
    if (get == nullptr) {
      *why = "not a HIP runtime library (it exports no hipRuntimeGetVersion)";
      return false;
    }
    int v = 0;
    hipError_t rc = get(&v);
    if (rc != hipSuccess) {
      *why = "hipRuntimeGetVersion: " + errors().describe(rc);
      return false;
    }
    st.version = v;
    *version = v;
    return true;
  }

  static std::string version_text(int v) {
    return "HIP runtime " + std::to_string(v / 10000000) + "." + std::to_string(v / 100000 % 100) +
           "." + std::to_string(v % 100000);
  }

  static Result init(Api& api, State& st, const Library& main, Library&, const Log& log) {
    hipError_t rc = api.init(0);
    if (rc != hipSuccess || api.range_handle) return rc;
    // Before HIP 7: the export of the HSA runtime that this HIP library itself depends on
    // (dlsym through the HIP library searches it and its dependencies, never another HSA
    // runtime the process may have loaded).
    st.hsa_export = reinterpret_cast<PFN_hsa_amd_portable_export_dmabuf>(
        main.symbol("hsa_amd_portable_export_dmabuf"));
    DP_DEBUG(log, "dma-buf export: %s",
             st.hsa_export ? "hsa_amd_portable_export_dmabuf"
                           : "none (no hipMemGetHandleForAddressRange, no HSA export)");
    return rc;
  }

  static MemKind memory_kind(const State& st, int type) {
    if (st.version / 10000000 >= 6) {
      switch (type) {
        case v6::hipMemoryTypeUnregistered: return MemKind::Unregistered;
        case v6::hipMemoryTypeHost: return MemKind::Host;
        case v6::hipMemoryTypeDevice:
        case v6::hipMemoryTypeManaged:
        case v6::hipMemoryTypeUnified: return MemKind::Device;
        default: return MemKind::Other;
      }
    }
    switch (type) {
      case v5::hipMemoryTypeHost: return MemKind::Host;
      case v5::hipMemoryTypeDevice:
      case v5::hipMemoryTypeUnified: return MemKind::Device;
      default: return MemKind::Other;
    }
  }

  static unsigned ipc_open_flags(const State& st) {
    return st.version / 10000000 >= 6 ? v6::hipIpcMemLazyEnablePeerAccess
                                      : v5::hipIpcMemLazyEnablePeerAccess;
  }

  static bool has_dmabuf_fallback(const State& st) { return st.hsa_export != nullptr; }

  static Status dmabuf_fallback(Api&, State& st, const Log& log, const void* ptr, size_t size,
                                int* fd, uint64_t* offset) {
    if (st.hsa_export == nullptr) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    int out = -1;
    uint64_t off = 0;
    hsa_status_t s = st.hsa_export(ptr, size, &out, &off);
    if (s != HSA_STATUS_SUCCESS) {
      DP_ERROR(log, "hsa_amd_portable_export_dmabuf(%p, %zu bytes): HSA status 0x%x", ptr, size,
               static_cast<unsigned>(s));
      return s == HSA_STATUS_ERROR_INVALID_ARGUMENT ? HMC_PLUGIN_ERR_INVALID_ARGUMENT
                                                    : HMC_PLUGIN_ERR_INTERNAL;
    }
    *fd = out;
    *offset = off;
    return HMC_PLUGIN_SUCCESS;
  }
};

std::unique_ptr<Backend> make_backend() {
  return std::make_unique<CudaShapedBackend<Hip>>();
}

const hmc_config_var_t kConfigVars[] = {
    {"HMC_HIP_LIBRARY", "",
     "HIP runtime library the hip device plugin opens (a file name or a path); default: "
     "libamdhip64.so.7, .so.6, .so.5, then /opt/rocm/lib and /opt/dtk/lib (Hygon DTK)"},
    {nullptr, nullptr, nullptr}};

const PluginInfo kInfo = {"hip",       "AMD",         "0.1.0",           "HMC_HIP_LIBRARY",
                          kConfigVars, &make_backend, HMC_MEM_IFACE_ROCM};

}  // namespace
}  // namespace hmc::devplug::hip

HMC_DEVPLUG_ENTRY(hmc::devplug::hip::kInfo)
