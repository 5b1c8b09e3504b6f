// Emulated HIP runtime (libamdhip64.so.<major>) over the fakegpu emulation core, built in three
// flavours from this one source (FAKEGPU_HIP_MAJOR = 5, 6 or 7):
//   5  libamdhip64.so.5: HIP 5.x values (hipMemoryType Host=0 Device=1; an unknown pointer is an
//      error; hipIpcMemLazyEnablePeerAccess = 0), no dma-buf export at all (as Debian's 5.2);
//   6  libamdhip64.so.6: HIP 6.x values (Unregistered=0 Host=1 Device=2; an unknown pointer is
//      "unregistered"; the lazy flag is 1); dma-buf through the HSA runtime it links
//      (fake_hsa.cpp, libhsa-runtime64.so.1);
//   7  libamdhip64.so.7: as 6, plus hipMemGetHandleForAddressRange.
// The 5/6 behaviour follows the version hipRuntimeGetVersion reports, so FAKEGPU_HIP_VERSION
// (default 50221153, 60241134 or 70051831 by flavour) also switches it, and a version older than
// the plugin's minimum can be emulated. Prototypes come from the plugin's declarations
// (plugins/device-hip/src/hip_api.h).
#include <cstdio>
#include <type_traits>

#include "fakegpu.h"
#include "hip_api.h"

#ifndef FAKEGPU_HIP_MAJOR
#error "FAKEGPU_HIP_MAJOR must be 5, 6 or 7"
#endif

using namespace hmc::vendor::hip;
using fakegpu::Dir;
using fakegpu::Err;

namespace {

thread_local int t_device = 0;

fakegpu::Emulator& emu() {
  return fakegpu::Emulator::get("hip");
}

int runtime_version() {
  constexpr long kDefault = FAKEGPU_HIP_MAJOR == 5   ? 50221153
                            : FAKEGPU_HIP_MAJOR == 6 ? 60241134
                                                     : 70051831;
  return static_cast<int>(emu().setting("VERSION", kDefault));
}
bool v6_values() {
  return runtime_version() / 10000000 >= 6;
}

hipError_t to_hip(Err e) {
  switch (e) {
    case Err::Ok: return hipSuccess;
    case Err::NotReady: return hipErrorNotReady;
    case Err::InvalidValue: return hipErrorInvalidValue;
    case Err::OutOfMemory: return hipErrorOutOfMemory;
    case Err::NoDevice: return hipErrorNoDevice;
    case Err::InvalidDevice: return hipErrorInvalidDevice;
    case Err::InvalidContext: return hipErrorInvalidContext;
    case Err::InvalidHandle: return hipErrorInvalidHandle;
    case Err::AlreadyRegistered: return hipErrorHostMemoryAlreadyRegistered;
    case Err::NotRegistered: return hipErrorHostMemoryNotRegistered;
    case Err::NotSupported: return hipErrorNotSupported;
    case Err::DeviceLost: return hipErrorNoDevice;
    case Err::CopyFailed: return hipErrorIllegalAddress;
    case Err::Timeout: return hipErrorUnknown;
  }
  return hipErrorUnknown;
}

Dir to_dir(hipMemcpyKind k) {
  switch (k) {
    case hipMemcpyHostToHost: return Dir::HostToHost;
    case hipMemcpyHostToDevice: return Dir::HostToDevice;
    case hipMemcpyDeviceToHost: return Dir::DeviceToHost;
    case hipMemcpyDeviceToDevice: return Dir::DeviceToDevice;
    case hipMemcpyDefault: return Dir::Default;
  }
  return Dir::Default;
}

fakegpu::Stream* as_stream(hipStream_t s) {
  return reinterpret_cast<fakegpu::Stream*>(s);
}
fakegpu::Event* as_event(hipEvent_t e) {
  return reinterpret_cast<fakegpu::Event*>(e);
}

}  // namespace

extern "C" {

hipError_t hipInit(unsigned int flags) {
  return flags == 0 ? hipSuccess : hipErrorInvalidValue;
}

hipError_t hipRuntimeGetVersion(int* v) {
  *v = runtime_version();
  return hipSuccess;
}

hipError_t hipDriverGetVersion(int* v) {
  *v = runtime_version();
  return hipSuccess;
}

const char* hipGetErrorName(hipError_t e) {
  switch (e) {
    case hipSuccess: return "hipSuccess";
    case hipErrorNoDevice: return "hipErrorNoDevice";
    case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
    default: return "hipErrorUnknown";
  }
}

hipError_t hipGetDeviceCount(int* count) {
  *count = emu().device_count();
  return *count == 0 ? hipErrorNoDevice : hipSuccess;
}

hipError_t hipDeviceGet(hipDevice_t* device, int ordinal) {
  if (Err e = emu().check_device(ordinal); e != Err::Ok) return to_hip(e);
  *device = ordinal;
  return hipSuccess;
}

hipError_t hipDeviceGetName(char* name, int len, hipDevice_t dev) {
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_hip(e);
  std::snprintf(name, static_cast<size_t>(len), "AMD %s", emu().device_name(dev).c_str());
  return hipSuccess;
}

hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t dev) {
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_hip(e);
  *bytes = emu().config().mem_bytes;
  return hipSuccess;
}

hipError_t hipDeviceGetUuid(hipUUID* uuid, hipDevice_t dev) {
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_hip(e);
  emu().device_uuid(dev, reinterpret_cast<unsigned char*>(uuid->bytes));
  return hipSuccess;
}

hipError_t hipDeviceGetPCIBusId(char* id, int len, int dev) {
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_hip(e);
  std::snprintf(id, static_cast<size_t>(len), "%s", emu().pci_bus_id(dev).c_str());
  return hipSuccess;
}

hipError_t hipDeviceGetAttribute(int* pi, hipDeviceAttribute_t attr, int dev) {
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_hip(e);
  switch (attr) {
    case hipDeviceAttributePciBusId: *pi = 0x2a + dev; return hipSuccess;
    case hipDeviceAttributePciDeviceId:
    case hipDeviceAttributePciDomainID: *pi = 0; return hipSuccess;
  }
  return hipErrorInvalidValue;
}

hipError_t hipDeviceCanAccessPeer(int* can, int dev, int peer) {
  if (emu().check_device(dev) != Err::Ok || emu().check_device(peer) != Err::Ok)
    return hipErrorInvalidDevice;
  *can = dev != peer ? 1 : 0;
  return hipSuccess;
}

hipError_t hipSetDevice(int dev) {
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_hip(e);
  t_device = dev;
  return hipSuccess;
}

hipError_t hipGetDevice(int* dev) {
  *dev = t_device;
  return hipSuccess;
}

hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total) {
  return to_hip(emu().mem_info(t_device, free_bytes, total));
}

hipError_t hipMalloc(void** ptr, size_t size) {
  return to_hip(emu().alloc(t_device, size, ptr));
}
hipError_t hipFree(void* ptr) {
  return to_hip(emu().free(ptr));
}

hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int) {
  return to_hip(emu().host_alloc(size, ptr));
}
hipError_t hipHostFree(void* ptr) {
  return to_hip(emu().host_free(ptr));
}

hipError_t hipHostRegister(void* ptr, size_t size, unsigned int) {
  return to_hip(emu().host_register(ptr, size));
}
hipError_t hipHostUnregister(void* ptr) {
  return to_hip(emu().host_unregister(ptr));
}

hipError_t hipMemcpyAsync(void* dst, const void* src, size_t n, hipMemcpyKind kind, hipStream_t s) {
  int dev = s != nullptr ? emu().stream_device(as_stream(s)) : t_device;
  return to_hip(emu().copy_async(dev, as_stream(s), dst, src, n, to_dir(kind)));
}

hipError_t hipMemcpy(void* dst, const void* src, size_t n, hipMemcpyKind kind) {
  return to_hip(emu().copy_sync(t_device, dst, src, n, to_dir(kind)));
}

hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int) {
  fakegpu::Stream* s = nullptr;
  Err e = emu().stream_create(t_device, &s);
  if (e == Err::Ok) *stream = reinterpret_cast<hipStream_t>(s);
  return to_hip(e);
}

hipError_t hipStreamDestroy(hipStream_t s) {
  return to_hip(emu().stream_destroy(as_stream(s)));
}
hipError_t hipStreamSynchronize(hipStream_t s) {
  return to_hip(emu().stream_sync(as_stream(s)));
}

hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned) {
  fakegpu::Event* e = nullptr;
  Err err = emu().event_create(t_device, &e);
  if (err == Err::Ok) *event = reinterpret_cast<hipEvent_t>(e);
  return to_hip(err);
}

hipError_t hipEventRecord(hipEvent_t event, hipStream_t s) {
  return to_hip(emu().event_record(as_event(event), as_stream(s)));
}
hipError_t hipEventQuery(hipEvent_t event) {
  return to_hip(emu().event_query(as_event(event)));
}
hipError_t hipEventSynchronize(hipEvent_t event) {
  return to_hip(emu().event_sync(as_event(event)));
}
hipError_t hipEventDestroy(hipEvent_t event) {
  return to_hip(emu().event_destroy(as_event(event)));
}

hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* ptr) {
  return to_hip(emu().ipc_get(ptr, handle->reserved, sizeof handle->reserved));
}

hipError_t hipIpcOpenMemHandle(void** ptr, hipIpcMemHandle_t handle, unsigned int flags) {
  // The lazy-peer-access flag is 0 in HIP 5 and 1 in HIP 6: anything else is refused, so a
  // plugin that decodes the version wrongly fails here.
  unsigned expected =
      v6_values() ? v6::hipIpcMemLazyEnablePeerAccess : v5::hipIpcMemLazyEnablePeerAccess;
  if (flags != expected) return hipErrorInvalidValue;
  return to_hip(emu().ipc_open(t_device, handle.reserved, sizeof handle.reserved, ptr));
}

hipError_t hipIpcCloseMemHandle(void* ptr) {
  return to_hip(emu().ipc_close(ptr));
}

hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attr, const void* ptr) {
  fakegpu::PtrInfo info;
  emu().query(ptr, &info);
  *attr = hipPointerAttribute_t{};
  switch (info.type) {
    case fakegpu::MemType::Unregistered:
      if (!v6_values()) return hipErrorInvalidValue;  // HIP 5: unknown memory is an error
      attr->type = v6::hipMemoryTypeUnregistered;
      return hipSuccess;
    case fakegpu::MemType::Host:
      attr->type = v6_values() ? v6::hipMemoryTypeHost : v5::hipMemoryTypeHost;
      attr->hostPointer = const_cast<void*>(ptr);
      attr->devicePointer = const_cast<void*>(ptr);
      attr->device = t_device;
      return hipSuccess;
    case fakegpu::MemType::Device:
      attr->type = v6_values() ? v6::hipMemoryTypeDevice : v5::hipMemoryTypeDevice;
      attr->devicePointer = const_cast<void*>(ptr);
      attr->device = info.device;
      return hipSuccess;
  }
  return hipErrorInvalidValue;
}

hipError_t hipMemGetAddressRange(hipDeviceptr_t* base, size_t* size, hipDeviceptr_t ptr) {
  fakegpu::PtrInfo info;
  emu().query(ptr, &info);
  if (info.type != fakegpu::MemType::Device) return hipErrorNotFound;
  *base = reinterpret_cast<void*>(info.base);
  *size = info.size;
  return hipSuccess;
}

#if FAKEGPU_HIP_MAJOR >= 7
hipError_t hipMemGetHandleForAddressRange(void* handle, hipDeviceptr_t ptr, size_t size,
                                          hipMemRangeHandleType type, unsigned long long flags) {
  if (type != hipMemRangeHandleTypeDmaBufFd || flags != 0 || handle == nullptr)
    return hipErrorInvalidValue;
  return to_hip(emu().dmabuf_export(ptr, size, static_cast<int*>(handle)));
}
static_assert(
    std::is_same_v<decltype(&hipMemGetHandleForAddressRange), PFN_hipMemGetHandleForAddressRange>);
#endif

}  // extern "C"

// The emulated functions have exactly the prototypes the plugin declares.
static_assert(std::is_same_v<decltype(&hipMalloc), PFN_hipMalloc>);
static_assert(std::is_same_v<decltype(&hipMemcpyAsync), PFN_hipMemcpyAsync>);
static_assert(std::is_same_v<decltype(&hipPointerGetAttributes), PFN_hipPointerGetAttributes>);
static_assert(std::is_same_v<decltype(&hipIpcOpenMemHandle), PFN_hipIpcOpenMemHandle>);
static_assert(std::is_same_v<decltype(&hipMemGetAddressRange), PFN_hipMemGetAddressRange>);
static_assert(std::is_same_v<decltype(&hipGetErrorName), PFN_hipGetErrorName>);
