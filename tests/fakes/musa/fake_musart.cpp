// Emulated Moore Threads MUSA runtime (libmusart.so) over the fakegpu emulation core: the CUDA
// runtime API renamed, as the real one is. Prototypes come from the plugin's declarations
// (plugins/device-musa/src/musa_api.h).
//
// Settings: FAKEGPU_MUSA_VERSION, what musaRuntimeGetVersion answers (default 3010 = 3.1).
#include <cstdio>
#include <type_traits>

#include "fakegpu.h"
#include "musa_api.h"

using namespace hmc::vendor::musa;
using fakegpu::Dir;
using fakegpu::Err;

namespace {

thread_local int t_device = 0;

fakegpu::Emulator& emu() {
  return fakegpu::Emulator::get("musa");
}

musaError_t to_musa(Err e) {
  switch (e) {
    case Err::Ok: return musaSuccess;
    case Err::NotReady: return musaErrorNotReady;
    case Err::InvalidValue:
    case Err::InvalidContext: return musaErrorInvalidValue;
    case Err::OutOfMemory: return musaErrorMemoryAllocation;
    case Err::NoDevice: return musaErrorNoDevice;
    case Err::InvalidDevice: return musaErrorInvalidDevice;
    case Err::InvalidHandle: return musaErrorInvalidResourceHandle;
    case Err::AlreadyRegistered: return musaErrorHostMemoryAlreadyRegistered;
    case Err::NotRegistered: return musaErrorHostMemoryNotRegistered;
    case Err::NotSupported: return musaErrorNotSupported;
    case Err::DeviceLost: return musaErrorDevicesUnavailable;
    case Err::CopyFailed: return musaErrorIllegalAddress;
    case Err::Timeout: return musaErrorUnknown;
  }
  return musaErrorUnknown;
}

Dir to_dir(musaMemcpyKind k) {
  switch (k) {
    case musaMemcpyHostToHost: return Dir::HostToHost;
    case musaMemcpyHostToDevice: return Dir::HostToDevice;
    case musaMemcpyDeviceToHost: return Dir::DeviceToHost;
    case musaMemcpyDeviceToDevice: return Dir::DeviceToDevice;
    case musaMemcpyDefault: return Dir::Default;
  }
  return Dir::Default;
}

fakegpu::Stream* as_stream(musaStream_t s) {
  return reinterpret_cast<fakegpu::Stream*>(s);
}
fakegpu::Event* as_event(musaEvent_t e) {
  return reinterpret_cast<fakegpu::Event*>(e);
}

}  // namespace

extern "C" {

musaError_t musaRuntimeGetVersion(int* v) {
  *v = static_cast<int>(emu().setting("VERSION", 3010));
  return musaSuccess;
}

musaError_t musaDriverGetVersion(int* v) {
  return musaRuntimeGetVersion(v);
}

const char* musaGetErrorName(musaError_t e) {
  switch (e) {
    case musaSuccess: return "musaSuccess";
    case musaErrorNoDevice: return "musaErrorNoDevice";
    case musaErrorMemoryAllocation: return "musaErrorMemoryAllocation";
    default: return "musaErrorUnknown";
  }
}

musaError_t musaGetDeviceCount(int* count) {
  *count = emu().device_count();
  return *count == 0 ? musaErrorNoDevice : musaSuccess;
}

musaError_t musaSetDevice(int dev) {
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_musa(e);
  t_device = dev;
  return musaSuccess;
}

musaError_t musaGetDevice(int* dev) {
  *dev = t_device;
  return musaSuccess;
}

musaError_t musaDeviceGetPCIBusId(char* id, int len, int dev) {
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_musa(e);
  std::snprintf(id, static_cast<size_t>(len), "%s", emu().pci_bus_id(dev).c_str());
  return musaSuccess;
}

musaError_t musaDeviceCanAccessPeer(int* can, int dev, int peer) {
  if (emu().check_device(dev) != Err::Ok || emu().check_device(peer) != Err::Ok)
    return musaErrorInvalidDevice;
  *can = dev != peer ? 1 : 0;
  return musaSuccess;
}

musaError_t musaMemGetInfo(size_t* free_bytes, size_t* total) {
  return to_musa(emu().mem_info(t_device, free_bytes, total));
}

musaError_t musaMalloc(void** ptr, size_t size) {
  return to_musa(emu().alloc(t_device, size, ptr));
}
musaError_t musaFree(void* ptr) {
  return to_musa(emu().free(ptr));
}
musaError_t musaHostAlloc(void** ptr, size_t size, unsigned int) {
  return to_musa(emu().host_alloc(size, ptr));
}
musaError_t musaFreeHost(void* ptr) {
  return to_musa(emu().host_free(ptr));
}
musaError_t musaHostRegister(void* ptr, size_t size, unsigned int) {
  return to_musa(emu().host_register(ptr, size));
}
musaError_t musaHostUnregister(void* ptr) {
  return to_musa(emu().host_unregister(ptr));
}

musaError_t musaMemcpyAsync(void* dst, const void* src, size_t n, musaMemcpyKind kind,
                            musaStream_t s) {
  int dev = s != nullptr ? emu().stream_device(as_stream(s)) : t_device;
  return to_musa(emu().copy_async(dev, as_stream(s), dst, src, n, to_dir(kind)));
}

musaError_t musaMemcpy(void* dst, const void* src, size_t n, musaMemcpyKind kind) {
  return to_musa(emu().copy_sync(t_device, dst, src, n, to_dir(kind)));
}

musaError_t musaStreamCreateWithFlags(musaStream_t* stream, unsigned int) {
  fakegpu::Stream* s = nullptr;
  Err e = emu().stream_create(t_device, &s);
  if (e == Err::Ok) *stream = reinterpret_cast<musaStream_t>(s);
  return to_musa(e);
}

musaError_t musaStreamDestroy(musaStream_t s) {
  return to_musa(emu().stream_destroy(as_stream(s)));
}
musaError_t musaStreamSynchronize(musaStream_t s) {
  return to_musa(emu().stream_sync(as_stream(s)));
}

musaError_t musaEventCreateWithFlags(musaEvent_t* event, unsigned int) {
  fakegpu::Event* e = nullptr;
  Err err = emu().event_create(t_device, &e);
  if (err == Err::Ok) *event = reinterpret_cast<musaEvent_t>(e);
  return to_musa(err);
}

musaError_t musaEventRecord(musaEvent_t event, musaStream_t s) {
  return to_musa(emu().event_record(as_event(event), as_stream(s)));
}
musaError_t musaEventQuery(musaEvent_t event) {
  return to_musa(emu().event_query(as_event(event)));
}
musaError_t musaEventSynchronize(musaEvent_t event) {
  return to_musa(emu().event_sync(as_event(event)));
}
musaError_t musaEventDestroy(musaEvent_t event) {
  return to_musa(emu().event_destroy(as_event(event)));
}

musaError_t musaIpcGetMemHandle(musaIpcMemHandle_t* handle, void* ptr) {
  return to_musa(emu().ipc_get(ptr, handle->reserved, sizeof handle->reserved));
}

musaError_t musaIpcOpenMemHandle(void** ptr, musaIpcMemHandle_t handle, unsigned int) {
  return to_musa(emu().ipc_open(t_device, handle.reserved, sizeof handle.reserved, ptr));
}

musaError_t musaIpcCloseMemHandle(void* ptr) {
  return to_musa(emu().ipc_close(ptr));
}

musaError_t musaPointerGetAttributes(musaPointerAttributes* attr, const void* ptr) {
  fakegpu::PtrInfo info;
  emu().query(ptr, &info);
  *attr = musaPointerAttributes{};
  attr->device = -2;
  switch (info.type) {
    case fakegpu::MemType::Unregistered: attr->type = musaMemoryTypeUnregistered; break;
    case fakegpu::MemType::Host:
      attr->type = musaMemoryTypeHost;
      attr->hostPointer = const_cast<void*>(ptr);
      break;
    case fakegpu::MemType::Device:
      attr->type = musaMemoryTypeDevice;
      attr->device = info.device;
      attr->devicePointer = const_cast<void*>(ptr);
      break;
  }
  return musaSuccess;
}

}  // extern "C"

// The emulated functions have exactly the prototypes the plugin declares.
static_assert(std::is_same_v<decltype(&musaMalloc), PFN_musaMalloc>);
static_assert(std::is_same_v<decltype(&musaMemcpyAsync), PFN_musaMemcpyAsync>);
static_assert(std::is_same_v<decltype(&musaPointerGetAttributes), PFN_musaPointerGetAttributes>);
static_assert(std::is_same_v<decltype(&musaIpcOpenMemHandle), PFN_musaIpcOpenMemHandle>);
static_assert(std::is_same_v<decltype(&musaGetErrorName), PFN_musaGetErrorName>);
