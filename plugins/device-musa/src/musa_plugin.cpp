// The musa device plugin: Moore Threads' MUSA runtime (libmusart.so), driven by the shared
// CUDA-shaped backend (devplug/cuda_shaped.h) through the runtime-API hooks
// (devplug/runtime_shaped.h). The MUSA driver (libmusa.so), when present, supplies what the
// runtime API has no call for: device names, UUIDs and sizes, allocation ranges, and dma-buf
// export (muMemGetHandleForAddressRange). Without it the devices still work, named
// "MUSA device N", with no dma-buf capability.
#include <memory>
#include <string>
#include <vector>

#include "devplug/cuda_shaped.h"
#include "devplug/plugin.h"
#include "devplug/runtime_shaped.h"
#include "musa_api.h"

namespace hmc::devplug::musa {
namespace {

using namespace hmc::vendor::musa;

struct MusaApi {
  // Members the shared backend calls (see cuda_shaped.h); the driver's come from libmusa.
  PFN_musaGetDeviceCount device_count;
  PFN_muDeviceGet device_get;
  PFN_muDeviceGetName device_name;
  PFN_muDeviceTotalMem device_total_mem;
  PFN_muDeviceGetUuid device_uuid;
  PFN_musaDeviceGetPCIBusId pci_bus_id;
  PFN_musaMemGetInfo mem_get_info;
  PFN_musaDeviceCanAccessPeer can_access_peer;
  PFN_musaMalloc mem_alloc;
  PFN_musaFree mem_free;
  PFN_musaHostAlloc host_alloc;
  PFN_musaFreeHost host_free;
  PFN_musaHostRegister host_register;
  PFN_musaHostUnregister host_unregister;
  PFN_musaStreamCreateWithFlags stream_create;
  PFN_musaStreamDestroy stream_destroy;
  PFN_musaEventCreateWithFlags event_create;
  PFN_musaEventRecord event_record;
  PFN_musaEventQuery event_query;
  PFN_musaEventDestroy event_destroy;
  PFN_musaIpcGetMemHandle ipc_get;
  PFN_musaIpcOpenMemHandle ipc_open;
  PFN_musaIpcCloseMemHandle ipc_close;
  PFN_muMemGetAddressRange address_range;
  PFN_muMemGetHandleForAddressRange range_handle;
  PFN_musaGetErrorName error_name;
  // Runtime-API members (runtime_shaped.h) and the driver's initialisation.
  PFN_musaSetDevice set_device;
  PFN_musaGetDevice get_device;
  PFN_musaMemcpyAsync memcpy_async;
  PFN_musaPointerGetAttributes pointer_attributes;
  PFN_muInit driver_init;
};

struct MusaState {};

constexpr ErrorInfo kErrors[] = {
    {musaErrorInvalidValue, "musaErrorInvalidValue", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {musaErrorMemoryAllocation, "musaErrorMemoryAllocation", HMC_PLUGIN_ERR_NO_MEMORY},
    {musaErrorInitializationError, "musaErrorInitializationError", HMC_PLUGIN_ERR_INTERNAL},
    {musaErrorInsufficientDriver, "musaErrorInsufficientDriver", HMC_PLUGIN_ERR_VERSION},
    {musaErrorDevicesUnavailable, "musaErrorDevicesUnavailable", HMC_PLUGIN_ERR_INTERNAL},
    {musaErrorNoDevice, "musaErrorNoDevice", HMC_PLUGIN_ERR_INTERNAL},
    {musaErrorInvalidDevice, "musaErrorInvalidDevice", HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {musaErrorInvalidResourceHandle, "musaErrorInvalidResourceHandle",
     HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {musaErrorNotReady, "musaErrorNotReady", HMC_PLUGIN_IN_PROGRESS},
    {musaErrorIllegalAddress, "musaErrorIllegalAddress", HMC_PLUGIN_ERR_INTERNAL},
    {musaErrorHostMemoryAlreadyRegistered, "musaErrorHostMemoryAlreadyRegistered",
     HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {musaErrorHostMemoryNotRegistered, "musaErrorHostMemoryNotRegistered",
     HMC_PLUGIN_ERR_INVALID_ARGUMENT},
    {musaErrorLaunchFailure, "musaErrorLaunchFailure", HMC_PLUGIN_ERR_INTERNAL},
    {musaErrorNotSupported, "musaErrorNotSupported", HMC_PLUGIN_ERR_NOT_SUPPORTED},
    {musaErrorUnknown, "musaErrorUnknown", HMC_PLUGIN_ERR_INTERNAL},
};

struct Musa : RuntimeShaped<Musa> {
  using Api = MusaApi;
  using State = MusaState;
  using Result = musaError_t;
  using Device = MUdevice;
  using Uuid = MUuuid;
  using IpcHandle = musaIpcMemHandle_t;
  using Stream = musaStream_t;
  using Event = musaEvent_t;
  using MemcpyKind = musaMemcpyKind;
  using PointerAttributes = musaPointerAttributes;
  using Scope = CurrentDeviceScope<MusaApi>;

  static constexpr const char* kDisplayName = "MUSA";
  static constexpr const char* kInitCall = "muInit";
  static constexpr int kMinVersion = kMinRuntimeVersion;
  static constexpr Result kNotReady = musaErrorNotReady;
  static constexpr unsigned kStreamFlags = musaStreamNonBlocking;
  static constexpr unsigned kEventFlags = musaEventDisableTiming;
  static constexpr unsigned kHostAllocFlags = musaHostAllocPortable;
  static constexpr unsigned kHostRegisterFlags = musaHostRegisterPortable;
  static constexpr MUmemRangeHandleType kDmabufHandleType = MU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD;

  static unsigned ipc_open_flags(const State&) { return musaIpcMemLazyEnablePeerAccess; }

  static const ErrorTable& errors() {
    static const ErrorTable table(kErrors);
    return table;
  }
  static std::vector<std::string> libraries() {
    return {"libmusart.so", "/usr/local/musa/lib/libmusart.so"};
  }
  static std::vector<std::string> companion_libraries() {
    return {"libmusa.so.1", "libmusa.so", "/usr/local/musa/lib/libmusa.so"};
  }

  static const std::vector<SymbolSpec>& symbols() {
    constexpr From M = From::Main, D = From::Companion;
    static const std::vector<SymbolSpec> s = {
        DP_SYMBOL(Api, device_count, true, M, {"musaGetDeviceCount"}),
        DP_SYMBOL(Api, pci_bus_id, false, M, {"musaDeviceGetPCIBusId"}),
        DP_SYMBOL(Api, mem_get_info, false, M, {"musaMemGetInfo"}),
        DP_SYMBOL(Api, can_access_peer, false, M, {"musaDeviceCanAccessPeer"}),
        DP_SYMBOL(Api, set_device, true, M, {"musaSetDevice"}),
        DP_SYMBOL(Api, get_device, true, M, {"musaGetDevice"}),
        DP_SYMBOL(Api, mem_alloc, true, M, {"musaMalloc"}),
        DP_SYMBOL(Api, mem_free, true, M, {"musaFree"}),
        DP_SYMBOL(Api, host_alloc, false, M, {"musaHostAlloc"}),
        DP_SYMBOL(Api, host_free, false, M, {"musaFreeHost"}),
        DP_SYMBOL(Api, host_register, false, M, {"musaHostRegister"}),
        DP_SYMBOL(Api, host_unregister, false, M, {"musaHostUnregister"}),
        DP_SYMBOL(Api, memcpy_async, true, M, {"musaMemcpyAsync"}),
        DP_SYMBOL(Api, stream_create, true, M, {"musaStreamCreateWithFlags"}),
        DP_SYMBOL(Api, stream_destroy, true, M, {"musaStreamDestroy"}),
        DP_SYMBOL(Api, event_create, true, M, {"musaEventCreateWithFlags"}),
        DP_SYMBOL(Api, event_record, true, M, {"musaEventRecord"}),
        DP_SYMBOL(Api, event_query, true, M, {"musaEventQuery"}),
        DP_SYMBOL(Api, event_destroy, true, M, {"musaEventDestroy"}),
        DP_SYMBOL(Api, ipc_get, false, M, {"musaIpcGetMemHandle"}),
        DP_SYMBOL(Api, ipc_open, false, M, {"musaIpcOpenMemHandle"}),
        DP_SYMBOL(Api, ipc_close, false, M, {"musaIpcCloseMemHandle"}),
        DP_SYMBOL(Api, pointer_attributes, true, M, {"musaPointerGetAttributes"}),
        DP_SYMBOL(Api, error_name, false, M, {"musaGetErrorName"}),
        DP_SYMBOL(Api, driver_init, false, D, {"muInit"}),
        DP_SYMBOL(Api, device_get, false, D, {"muDeviceGet"}),
        DP_SYMBOL(Api, device_name, false, D, {"muDeviceGetName"}),
        DP_SYMBOL(Api, device_total_mem, false, D, {"muDeviceTotalMem"}),
        DP_SYMBOL(Api, device_uuid, false, D, {"muDeviceGetUuid"}),
        DP_SYMBOL(Api, address_range, false, D, {"muMemGetAddressRange"}),
        DP_SYMBOL(Api, range_handle, false, D, {"muMemGetHandleForAddressRange"}),
    };
    return s;
  }

  static bool read_version(const Library& lib, State&, int* version, std::string* why) {
    auto get = reinterpret_cast<PFN_musaRuntimeGetVersion>(lib.symbol("musaRuntimeGetVersion"));
    if (get == nullptr) {
      *why = "not a MUSA runtime library (it exports no musaRuntimeGetVersion)";
      return false;
    }
    int v = 0;
    musaError_t rc = get(&v);
    if (rc != musaSuccess) {
      *why = "musaRuntimeGetVersion: " + errors().describe(rc);
      return false;
    }
    *version = v;
    return true;
  }

  static std::string version_text(int v) {
    return "MUSA runtime " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  }

  // The runtime needs no initialisation; the driver does, and without it the driver's functions
  // are not used.
  static Result init(Api& api, State&, const Library&, Library& companion, const Log& log) {
    if (api.driver_init == nullptr) return musaSuccess;
    MUresult rc = api.driver_init(0);
    if (rc != MUSA_SUCCESS) {
      DP_INFO(log, "%s: muInit failed (%d); device names and dma-buf export are unavailable",
              companion.name().c_str(), static_cast<int>(rc));
      api.device_get = nullptr;
      api.device_name = nullptr;
      api.device_total_mem = nullptr;
      api.device_uuid = nullptr;
      api.address_range = nullptr;
      api.range_handle = nullptr;
    }
    return musaSuccess;
  }

  static MemKind memory_kind(const State&, int type) {
    switch (type) {
      case musaMemoryTypeUnregistered: return MemKind::Unregistered;
      case musaMemoryTypeHost: return MemKind::Host;
      case musaMemoryTypeDevice:
      case musaMemoryTypeManaged: return MemKind::Device;
      default: return MemKind::Other;
    }
  }
};

std::unique_ptr<Backend> make_backend() {
  return std::make_unique<CudaShapedBackend<Musa>>();
}

const hmc_config_var_t kConfigVars[] = {
    {"HMC_MUSA_LIBRARY", "libmusart.so",
     "MUSA runtime library the musa device plugin opens (a file name or a path); the driver "
     "libmusa.so is looked for beside it on the search path"},
    {nullptr, nullptr, nullptr}};

const PluginInfo kInfo = {"musa",      "Moore Threads", "0.1.0",           "HMC_MUSA_LIBRARY",
                          kConfigVars, &make_backend,   HMC_MEM_IFACE_MUSA};

}  // namespace
}  // namespace hmc::devplug::musa

HMC_DEVPLUG_ENTRY(hmc::devplug::musa::kInfo)
