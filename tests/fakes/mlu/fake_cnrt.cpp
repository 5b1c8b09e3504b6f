// Emulated Cambricon CNRT runtime (libcnrt.so) over the fakegpu emulation core, with CNRT's own
// shapes: unsigned device count, queue before direction in cnrtMemcpyAsync, its direction values
// (a direction out of 0..5 is cnrtErrorMemcpyDirectionInvalid), notifiers that answer
// cnrtErrorBusy while pending, and 8-byte IPC handles. Prototypes come from the plugin's
// declarations (plugins/device-mlu/src/cnrt_api.h).
//
// Settings: FAKEGPU_MLU_VERSION_MAJOR / _MINOR / _PATCH, what cnrtGetLibVersion answers
// (default 6.14.0).
#include <cstdio>
#include <type_traits>

#include "cnrt_api.h"
#include "fakegpu.h"

using namespace hmc::vendor::mlu;
using fakegpu::Dir;
using fakegpu::Err;

namespace {

thread_local int t_device = 0;

fakegpu::Emulator& emu() {
  return fakegpu::Emulator::get("mlu");
}

cnrtRet_t to_cnrt(Err e) {
  switch (e) {
    case Err::Ok: return cnrtSuccess;
    case Err::NotReady: return cnrtErrorBusy;
    case Err::InvalidValue:
    case Err::InvalidHandle:
    case Err::AlreadyRegistered:
    case Err::NotRegistered: return cnrtErrorArgsInvalid;
    case Err::OutOfMemory: return cnrtErrorNoMem;
    case Err::NoDevice:
    case Err::DeviceLost: return cnrtErrorNoDevice;
    case Err::InvalidDevice:
    case Err::InvalidContext: return cnrtErrorDevice;
    case Err::NotSupported:
    case Err::CopyFailed:
    case Err::Timeout: return cnrtErrorSys;
  }
  return cnrtErrorSys;
}

fakegpu::Stream* as_queue(cnrtQueue_t q) {
  return reinterpret_cast<fakegpu::Stream*>(q);
}
fakegpu::Event* as_notifier(cnrtNotifier_t n) {
  return reinterpret_cast<fakegpu::Event*>(n);
}

// What a create call made, as CNRT's handle in *out when e is Ok; e as CNRT's status.
template <typename Handle, typename Object>
cnrtRet_t created(Err e, Object* const* made, Handle* out) {
  if (e == Err::Ok) *out = reinterpret_cast<Handle>(*made);
  return to_cnrt(e);
}

}  // namespace

extern "C" {

cnrtRet_t cnrtGetLibVersion(int* major, int* minor, int* patch) {
  *major = static_cast<int>(emu().setting("VERSION_MAJOR", 6));
  *minor = static_cast<int>(emu().setting("VERSION_MINOR", 14));
  *patch = static_cast<int>(emu().setting("VERSION_PATCH", 0));
  return cnrtSuccess;
}

const char* cnrtGetErrorName(cnrtRet_t e) {
  switch (e) {
    case cnrtSuccess: return "cnrtSuccess";
    case cnrtErrorNoDevice: return "cnrtErrorNoDevice";
    case cnrtErrorNoMem: return "cnrtErrorNoMem";
    default: return "cnrtErrorUnknown";
  }
}

cnrtRet_t cnrtGetDeviceCount(unsigned int* count) {
  int n = emu().device_count();
  *count = static_cast<unsigned>(n);
  return n == 0 ? cnrtErrorNoDevice : cnrtSuccess;
}

cnrtRet_t cnrtSetDevice(int dev) {
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_cnrt(e);
  t_device = dev;
  return cnrtSuccess;
}

cnrtRet_t cnrtGetDevice(int* dev) {
  *dev = t_device;
  return cnrtSuccess;
}

cnrtRet_t cnrtDeviceGetPCIBusId(char* id, int len, int dev) {
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_cnrt(e);
  std::snprintf(id, static_cast<size_t>(len), "%s", emu().pci_bus_id(dev).c_str());
  return cnrtSuccess;
}

cnrtRet_t cnrtMemGetInfo(size_t* free_bytes, size_t* total) {
  return to_cnrt(emu().mem_info(t_device, free_bytes, total));
}

cnrtRet_t cnrtMalloc(void** ptr, size_t bytes) {
  return to_cnrt(emu().alloc(t_device, bytes, ptr));
}
cnrtRet_t cnrtFree(void* ptr) {
  return to_cnrt(emu().free(ptr));
}
cnrtRet_t cnrtHostMalloc(void** ptr, size_t bytes) {
  return to_cnrt(emu().host_alloc(bytes, ptr));
}
cnrtRet_t cnrtFreeHost(void* ptr) {
  return to_cnrt(emu().host_free(ptr));
}

cnrtRet_t cnrtMemcpyAsync(void* dst, void* src, size_t bytes, cnrtQueue_t queue,
                          cnrtMemTransDir_t dir) {
  Dir d;
  switch (dir) {
    case cnrtMemcpyHostToDev: d = Dir::HostToDevice; break;
    case cnrtMemcpyDevToDev:
    case cnrtMemcpyPeerToPeer: d = Dir::DeviceToDevice; break;
    case cnrtMemcpyDevToHost: d = Dir::DeviceToHost; break;
    case cnrtMemcpyHostToHost: d = Dir::HostToHost; break;
    case cnrtMemcpyNoDirection: d = Dir::Default; break;
    default: return cnrtErrorMemcpyDirectionInvalid;
  }
  int dev = queue != nullptr ? emu().stream_device(as_queue(queue)) : t_device;
  return to_cnrt(emu().copy_async(dev, as_queue(queue), dst, src, bytes, d));
}

cnrtRet_t cnrtMemcpy(void* dst, void* src, size_t bytes, cnrtMemTransDir_t dir) {
  Dir d = dir == cnrtMemcpyHostToDev   ? Dir::HostToDevice
          : dir == cnrtMemcpyDevToHost ? Dir::DeviceToHost
          : dir == cnrtMemcpyDevToDev  ? Dir::DeviceToDevice
                                       : Dir::Default;
  return to_cnrt(emu().copy_sync(t_device, dst, src, bytes, d));
}

cnrtRet_t cnrtQueueCreate(cnrtQueue_t* queue) {
  fakegpu::Stream* s = nullptr;
  return created(emu().stream_create(t_device, &s), &s, queue);
}

cnrtRet_t cnrtQueueDestroy(cnrtQueue_t queue) {
  return to_cnrt(emu().stream_destroy(as_queue(queue)));
}
cnrtRet_t cnrtQueueSync(cnrtQueue_t queue) {
  return to_cnrt(emu().stream_sync(as_queue(queue)));
}
cnrtRet_t cnrtQueueQuery(cnrtQueue_t queue) {
  return to_cnrt(emu().stream_query(as_queue(queue)));
}

cnrtRet_t cnrtNotifierCreate(cnrtNotifier_t* notifier) {
  fakegpu::Event* e = nullptr;
  return created(emu().event_create(t_device, &e), &e, notifier);
}

cnrtRet_t cnrtNotifierDestroy(cnrtNotifier_t n) {
  return to_cnrt(emu().event_destroy(as_notifier(n)));
}

cnrtRet_t cnrtPlaceNotifier(cnrtNotifier_t n, cnrtQueue_t queue) {
  return to_cnrt(emu().event_record(as_notifier(n), as_queue(queue)));
}

cnrtRet_t cnrtQueryNotifier(cnrtNotifier_t n) {
  return to_cnrt(emu().event_query(as_notifier(n)));
}
cnrtRet_t cnrtWaitNotifier(cnrtNotifier_t n) {
  return to_cnrt(emu().event_sync(as_notifier(n)));
}

cnrtRet_t cnrtAcquireMemHandle(cnrtIpcMemHandle* handle, void* ptr) {
  return to_cnrt(emu().ipc_get(ptr, handle->reserved, sizeof handle->reserved));
}

cnrtRet_t cnrtMapMemHandle(void** ptr, cnrtIpcMemHandle handle, int) {
  return to_cnrt(emu().ipc_open(t_device, handle.reserved, sizeof handle.reserved, ptr));
}

cnrtRet_t cnrtUnMapMemHandle(void* ptr) {
  return to_cnrt(emu().ipc_close(ptr));
}

cnrtRet_t cnrtPointerGetAttributes(cnrtPointerAttributes_t* attr, const void* ptr) {
  fakegpu::PtrInfo info;
  emu().query(ptr, &info);
  *attr = cnrtPointerAttributes_t{};
  attr->device = -1;
  switch (info.type) {
    case fakegpu::MemType::Unregistered: attr->type = cnrtMemTypeUnregistered; break;
    case fakegpu::MemType::Host:
      attr->type = cnrtMemTypeHost;
      attr->hostPointer = const_cast<void*>(ptr);
      break;
    case fakegpu::MemType::Device:
      attr->type = cnrtMemTypeDevice;
      attr->device = info.device;
      attr->size = info.size;
      attr->devicePointer = const_cast<void*>(ptr);
      break;
  }
  return cnrtSuccess;
}

}  // extern "C"

// The emulated functions have exactly the prototypes the plugin declares.
static_assert(std::is_same_v<decltype(&cnrtGetDeviceCount), PFN_cnrtGetDeviceCount>);
static_assert(std::is_same_v<decltype(&cnrtMemcpyAsync), PFN_cnrtMemcpyAsync>);
static_assert(std::is_same_v<decltype(&cnrtMapMemHandle), PFN_cnrtMapMemHandle>);
static_assert(std::is_same_v<decltype(&cnrtPointerGetAttributes), PFN_cnrtPointerGetAttributes>);
static_assert(std::is_same_v<decltype(&cnrtQueryNotifier), PFN_cnrtQueryNotifier>);
static_assert(std::is_same_v<decltype(&cnrtGetLibVersion), PFN_cnrtGetLibVersion>);
