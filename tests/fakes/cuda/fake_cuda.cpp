// Emulated CUDA driver (libcuda.so.1) over the fakegpu emulation core: the driver API functions
// the cuda plugin uses, under their exported (suffixed) names, plus cuGetProcAddress, which returns
// them by name and version as the real driver does (the newest ABI not newer than the version
// asked for, and none newer than the emulated driver). Prototypes come from the plugin's own
// declarations (plugins/device-cuda/src/cuda_api.h), which abi_check.cpp holds to cuda.h.
//
// Settings (see fakegpu.h for the common ones):
//   FAKEGPU_CUDA_DRIVER_VERSION  what cuDriverGetVersion answers (default 12080 = 12.8)
// Build toggle: FAKEGPU_NO_DMABUF leaves out cuMemGetHandleForAddressRange (a driver without it).
//
// Contexts: each device has one primary context; the calling thread's current context decides
// the device of allocations, streams and events, and calls that need one fail with
// CUDA_ERROR_INVALID_CONTEXT without it, as with the real driver.
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "cuda_api.h"
#include "fakegpu.h"

using namespace hmc::vendor::cuda;
using fakegpu::Dir;
using fakegpu::Err;

struct hmc::vendor::cuda::CUctx_st {
  int dev;
};

namespace {

constexpr int kMaxDevices = 64;
CUctx_st g_contexts[kMaxDevices];
bool g_initialized = false;
thread_local CUcontext t_current = nullptr;

fakegpu::Emulator& emu() {
  return fakegpu::Emulator::get("cuda");
}

int driver_version() {
  return static_cast<int>(emu().setting("DRIVER_VERSION", 12080));
}

CUresult to_cu(Err e) {
  switch (e) {
    case Err::Ok: return CUDA_SUCCESS;
    case Err::NotReady: return CUDA_ERROR_NOT_READY;
    case Err::InvalidValue: return CUDA_ERROR_INVALID_VALUE;
    case Err::OutOfMemory: return CUDA_ERROR_OUT_OF_MEMORY;
    case Err::NoDevice: return CUDA_ERROR_NO_DEVICE;
    case Err::InvalidDevice: return CUDA_ERROR_INVALID_DEVICE;
    case Err::InvalidContext: return CUDA_ERROR_INVALID_CONTEXT;
    case Err::InvalidHandle: return CUDA_ERROR_INVALID_HANDLE;
    case Err::AlreadyRegistered: return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    case Err::NotRegistered: return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    case Err::NotSupported: return CUDA_ERROR_NOT_SUPPORTED;
    case Err::DeviceLost: return CUDA_ERROR_DEVICE_UNAVAILABLE;
    case Err::CopyFailed: return CUDA_ERROR_ILLEGAL_ADDRESS;
    case Err::Timeout: return CUDA_ERROR_UNKNOWN;
  }
  return CUDA_ERROR_UNKNOWN;
}

// The device of the calling thread's current context, or -1.
int current_device() {
  return t_current != nullptr ? t_current->dev : -1;
}

fakegpu::Stream* as_stream(CUstream s) {
  return reinterpret_cast<fakegpu::Stream*>(s);
}
fakegpu::Event* as_event(CUevent e) {
  return reinterpret_cast<fakegpu::Event*>(e);
}
void* as_ptr(CUdeviceptr p) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

// The device a copy runs on: its stream's, else the current context's.
int copy_device(CUstream s) {
  return s != nullptr ? emu().stream_device(as_stream(s)) : current_device();
}

}  // namespace

#define REQUIRE_INIT \
  if (!g_initialized) return CUDA_ERROR_NOT_INITIALIZED
#define REQUIRE_CONTEXT \
  REQUIRE_INIT;         \
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT

extern "C" {

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = driver_version();
  return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (emu().device_count() == 0) return CUDA_ERROR_NO_DEVICE;
  g_initialized = true;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** str) {
  static const struct {
    CUresult code;
    const char* name;
  } names[] = {{CUDA_SUCCESS, "CUDA_SUCCESS"},
               {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
               {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
               {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
               {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
               {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"}};
  for (const auto& n : names)
    if (n.code == error) {
      *str = n.name;
      return CUDA_SUCCESS;
    }
  *str = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetCount(int* count) {
  REQUIRE_INIT;
  *count = emu().device_count();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  REQUIRE_INIT;
  if (ordinal < 0 || ordinal >= emu().device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  REQUIRE_INIT;
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_cu(e);
  std::snprintf(name, static_cast<size_t>(len), "NVIDIA %s", emu().device_name(dev).c_str());
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  REQUIRE_INIT;
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_cu(e);
  *bytes = emu().config().mem_bytes;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  REQUIRE_INIT;
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_cu(e);
  emu().device_uuid(dev, reinterpret_cast<unsigned char*>(uuid->bytes));
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult cuDeviceGetPCIBusId(char* id, int len, CUdevice dev) {
  REQUIRE_INIT;
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_cu(e);
  std::snprintf(id, static_cast<size_t>(len), "%s", emu().pci_bus_id(dev).c_str());
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  REQUIRE_INIT;
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_cu(e);
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = 0x1a + dev; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = 0; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: *pi = 1; return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) {
  REQUIRE_INIT;
  if (emu().check_device(dev) != Err::Ok || emu().check_device(peer) != Err::Ok)
    return CUDA_ERROR_INVALID_DEVICE;
  *can = dev != peer ? 1 : 0;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  REQUIRE_INIT;
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_cu(e);
  if (dev >= kMaxDevices) return CUDA_ERROR_INVALID_DEVICE;
  g_contexts[dev].dev = dev;
  *pctx = &g_contexts[dev];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  REQUIRE_INIT;
  return dev >= 0 && dev < kMaxDevices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  REQUIRE_INIT;
  if (ctx != nullptr && (ctx < g_contexts || ctx >= g_contexts + kMaxDevices))
    return CUDA_ERROR_INVALID_CONTEXT;
  t_current = ctx;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  REQUIRE_INIT;
  *pctx = t_current;
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  REQUIRE_CONTEXT;
  return to_cu(emu().mem_info(current_device(), free_bytes, total_bytes));
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  REQUIRE_CONTEXT;
  void* p = nullptr;
  Err e = emu().alloc(current_device(), bytesize, &p);
  if (e == Err::Ok) *dptr = reinterpret_cast<uintptr_t>(p);
  return to_cu(e);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  REQUIRE_INIT;
  return to_cu(emu().free(as_ptr(dptr)));
}

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int) {
  REQUIRE_CONTEXT;
  return to_cu(emu().host_alloc(bytesize, pp));
}

CUresult cuMemFreeHost(void* p) {
  REQUIRE_INIT;
  return to_cu(emu().host_free(p));
}

CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int) {
  REQUIRE_CONTEXT;
  return to_cu(emu().host_register(p, bytesize));
}

CUresult cuMemHostUnregister(void* p) {
  REQUIRE_INIT;
  return to_cu(emu().host_unregister(p));
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  REQUIRE_INIT;
  return to_cu(
      emu().copy_async(copy_device(s), as_stream(s), as_ptr(dst), src, n, Dir::HostToDevice));
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  REQUIRE_INIT;
  return to_cu(
      emu().copy_async(copy_device(s), as_stream(s), dst, as_ptr(src), n, Dir::DeviceToHost));
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  REQUIRE_INIT;
  return to_cu(emu().copy_async(copy_device(s), as_stream(s), as_ptr(dst), as_ptr(src), n,
                                Dir::DeviceToDevice));
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  REQUIRE_INIT;
  return to_cu(
      emu().copy_async(copy_device(s), as_stream(s), as_ptr(dst), as_ptr(src), n, Dir::Default));
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  REQUIRE_CONTEXT;
  return to_cu(emu().copy_sync(current_device(), as_ptr(dst), src, n, Dir::HostToDevice));
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  REQUIRE_CONTEXT;
  return to_cu(emu().copy_sync(current_device(), dst, as_ptr(src), n, Dir::DeviceToHost));
}

CUresult cuStreamCreate(CUstream* stream, unsigned int) {
  REQUIRE_CONTEXT;
  fakegpu::Stream* s = nullptr;
  Err e = emu().stream_create(current_device(), &s);
  if (e == Err::Ok) *stream = reinterpret_cast<CUstream>(s);
  return to_cu(e);
}

CUresult cuStreamDestroy_v2(CUstream s) {
  REQUIRE_INIT;
  return to_cu(emu().stream_destroy(as_stream(s)));
}

CUresult cuStreamSynchronize(CUstream s) {
  REQUIRE_INIT;
  return to_cu(emu().stream_sync(as_stream(s)));
}

CUresult cuEventCreate(CUevent* event, unsigned int) {
  REQUIRE_CONTEXT;
  fakegpu::Event* e = nullptr;
  Err err = emu().event_create(current_device(), &e);
  if (err == Err::Ok) *event = reinterpret_cast<CUevent>(e);
  return to_cu(err);
}

CUresult cuEventRecord(CUevent event, CUstream s) {
  REQUIRE_INIT;
  return to_cu(emu().event_record(as_event(event), as_stream(s)));
}

CUresult cuEventQuery(CUevent event) {
  REQUIRE_INIT;
  return to_cu(emu().event_query(as_event(event)));
}

CUresult cuEventSynchronize(CUevent event) {
  REQUIRE_INIT;
  return to_cu(emu().event_sync(as_event(event)));
}

CUresult cuEventDestroy_v2(CUevent event) {
  REQUIRE_INIT;
  return to_cu(emu().event_destroy(as_event(event)));
}

CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
  REQUIRE_CONTEXT;
  return to_cu(emu().ipc_get(as_ptr(dptr), handle->reserved, sizeof handle->reserved));
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int) {
  REQUIRE_CONTEXT;
  void* p = nullptr;
  Err e = emu().ipc_open(current_device(), handle.reserved, sizeof handle.reserved, &p);
  if (e == Err::Ok) *pdptr = reinterpret_cast<uintptr_t>(p);
  return to_cu(e);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  REQUIRE_INIT;
  return to_cu(emu().ipc_close(as_ptr(dptr)));
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  REQUIRE_INIT;
  fakegpu::PtrInfo info;
  emu().query(as_ptr(ptr), &info);
  if (info.type == fakegpu::MemType::Unregistered) return CUDA_ERROR_INVALID_VALUE;
  bool device = info.type == fakegpu::MemType::Device;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = device ? info.device : 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = device ? &g_contexts[info.device] : nullptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = info.base;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = info.size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = ptr;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (device) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = as_ptr(ptr);
      return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  REQUIRE_INIT;
  fakegpu::PtrInfo info;
  emu().query(as_ptr(dptr), &info);
  if (info.type != fakegpu::MemType::Device) return CUDA_ERROR_NOT_FOUND;
  if (pbase != nullptr) *pbase = info.base;
  if (psize != nullptr) *psize = info.size;
  return CUDA_SUCCESS;
}

#ifndef FAKEGPU_NO_DMABUF
CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size,
                                       CUmemRangeHandleType type, unsigned long long flags) {
  REQUIRE_CONTEXT;
  if (type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags != 0 || handle == nullptr)
    return CUDA_ERROR_INVALID_VALUE;
  return to_cu(emu().dmabuf_export(as_ptr(dptr), size, static_cast<int*>(handle)));
}
#endif

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);

}  // extern "C"

namespace {

struct Entry {
  const char* name;
  int version;  // the driver version that introduced this ABI
  void* fn;
};

// The static_cast checks each function against the plugin's declared prototype.
#define ENTRY(name, version, fn)                                       \
  Entry {                                                              \
    name, version, reinterpret_cast<void*>(static_cast<PFN_##fn>(&fn)) \
  }

const Entry kEntries[] = {
    ENTRY("cuInit", 2000, cuInit),
    ENTRY("cuDriverGetVersion", 2020, cuDriverGetVersion),
    ENTRY("cuGetErrorName", 6000, cuGetErrorName),
    ENTRY("cuDeviceGetCount", 2000, cuDeviceGetCount),
    ENTRY("cuDeviceGet", 2000, cuDeviceGet),
    ENTRY("cuDeviceGetName", 2000, cuDeviceGetName),
    ENTRY("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    Entry{"cuDeviceGetUuid", 9020, reinterpret_cast<void*>(&cuDeviceGetUuid)},
    ENTRY("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    ENTRY("cuDeviceGetPCIBusId", 4010, cuDeviceGetPCIBusId),
    ENTRY("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    ENTRY("cuDeviceCanAccessPeer", 4000, cuDeviceCanAccessPeer),
    ENTRY("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    ENTRY("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    ENTRY("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    ENTRY("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    ENTRY("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    ENTRY("cuMemAlloc", 3020, cuMemAlloc_v2),
    ENTRY("cuMemFree", 3020, cuMemFree_v2),
    ENTRY("cuMemHostAlloc", 2020, cuMemHostAlloc),
    ENTRY("cuMemFreeHost", 2000, cuMemFreeHost),
    ENTRY("cuMemHostRegister", 6050, cuMemHostRegister_v2),
    ENTRY("cuMemHostUnregister", 4000, cuMemHostUnregister),
    ENTRY("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2),
    ENTRY("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2),
    ENTRY("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2),
    ENTRY("cuMemcpyAsync", 4000, cuMemcpyAsync),
    Entry{"cuMemcpyHtoD", 3020, reinterpret_cast<void*>(&cuMemcpyHtoD_v2)},
    Entry{"cuMemcpyDtoH", 3020, reinterpret_cast<void*>(&cuMemcpyDtoH_v2)},
    ENTRY("cuStreamCreate", 2000, cuStreamCreate),
    ENTRY("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    Entry{"cuStreamSynchronize", 2000, reinterpret_cast<void*>(&cuStreamSynchronize)},
    ENTRY("cuEventCreate", 2000, cuEventCreate),
    ENTRY("cuEventRecord", 2000, cuEventRecord),
    ENTRY("cuEventQuery", 2000, cuEventQuery),
    Entry{"cuEventSynchronize", 2000, reinterpret_cast<void*>(&cuEventSynchronize)},
    ENTRY("cuEventDestroy", 4000, cuEventDestroy_v2),
    ENTRY("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    ENTRY("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
    ENTRY("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),
    ENTRY("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
    ENTRY("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
#ifndef FAKEGPU_NO_DMABUF
    ENTRY("cuMemGetHandleForAddressRange", 11070, cuMemGetHandleForAddressRange),
#endif
};

}  // namespace

extern "C" {

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  int limit = cudaVersion < driver_version() ? cudaVersion : driver_version();
  const Entry* best = nullptr;
  for (const Entry& e : kEntries)
    if (std::strcmp(e.name, symbol) == 0 && e.version <= limit &&
        (best == nullptr || e.version > best->version))
      best = &e;
  if (best == nullptr) return CUDA_ERROR_NOT_FOUND;
  *pfn = best->fn;
  return CUDA_SUCCESS;
}

// The CUDA 12 form, with a query result (0 found, 1 symbol not found, 2 version too old).
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                             int* symbolStatus) {
  CUresult rc = cuGetProcAddress(symbol, pfn, cudaVersion, flags);
  if (symbolStatus != nullptr) *symbolStatus = rc == CUDA_SUCCESS ? 0 : 1;
  return rc;
}

}  // extern "C"

static_assert(std::is_same_v<decltype(&cuGetProcAddress), PFN_cuGetProcAddress>);
