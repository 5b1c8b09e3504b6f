// Emulated Cambricon CNDrv driver (libcndrv.so), the part the mlu plugin takes from it: device
// identity, allocation ranges and dma-buf export, over the same emulator as the emulated CNRT
// (libcnrt.so), so memory from cnrtMalloc can be exported here. CNDrv's error values are its own.
// Settings: FAKEGPU_MLU_DRIVER_INIT_FAILS=1 makes cnInit fail (a driver the plugin cannot use).
// Build toggle: FAKEGPU_NO_DMABUF leaves out cnMemGetHandleForAddressRange.
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "cnrt_api.h"
#include "fakegpu.h"

using namespace hmc::vendor::mlu;
using fakegpu::Err;

namespace {

bool g_initialized = false;

fakegpu::Emulator& emu() {
  return fakegpu::Emulator::get("mlu");
}

CNresult to_cn(Err e) {
  switch (e) {
    case Err::Ok: return CN_SUCCESS;
    case Err::NotReady: return CN_ERROR_NOT_READY;
    case Err::OutOfMemory: return CN_MEMORY_ERROR_OUT_OF_MEMORY;
    case Err::NoDevice:
    case Err::DeviceLost: return CN_ERROR_NO_DEVICE;
    case Err::InvalidDevice: return CN_ERROR_INVALID_DEVICE;
    case Err::NotSupported: return CN_OPS_ERROR_NOT_SUPPORTED;
    default: return CN_ERROR_INVALID_VALUE;
  }
}

Err check(CNdev dev) {
  return emu().check_device(static_cast<int>(dev));
}

}  // namespace

#define REQUIRE_INIT \
  if (!g_initialized) return CN_ERROR_NOT_INITIALIZED

extern "C" {

CNresult cnInit(unsigned int flags) {
  if (flags != 0) return CN_ERROR_INVALID_VALUE;
  if (emu().setting("DRIVER_INIT_FAILS", 0) != 0) return CN_ERROR_NOT_INITIALIZED;
  g_initialized = true;
  return emu().device_count() == 0 ? CN_ERROR_NO_DEVICE : CN_SUCCESS;
}

CNresult cnDriverGetVersion(int* major, int* minor, int* patch) {
  *major = 2;
  *minor = 15;
  *patch = 5;
  return CN_SUCCESS;
}

CNresult cnGetErrorName(CNresult error, const char** pstr) {
  *pstr = error == CN_SUCCESS ? "CN_SUCCESS" : "CN_ERROR";
  return CN_SUCCESS;
}

CNresult cnDeviceGet(CNdev* pdev, int ordinal) {
  REQUIRE_INIT;
  if (Err e = emu().check_device(ordinal); e != Err::Ok) return to_cn(e);
  *pdev = static_cast<CNdev>(ordinal);
  return CN_SUCCESS;
}

CNresult cnDeviceGetName(char* name, unsigned int len, CNdev dev) {
  REQUIRE_INIT;
  if (Err e = check(dev); e != Err::Ok) return to_cn(e);
  std::string n = "Cambricon " + emu().device_name(static_cast<int>(dev));
  if (n.size() >= len) return CN_ERROR_INVALID_VALUE;  // as documented: no truncation
  std::memcpy(name, n.c_str(), n.size() + 1);
  return CN_SUCCESS;
}

CNresult cnDeviceTotalMem(cn_uint64_t* pbytes, CNdev dev) {
  REQUIRE_INIT;
  if (Err e = check(dev); e != Err::Ok) return to_cn(e);
  *pbytes = emu().config().mem_bytes;
  return CN_SUCCESS;
}

CNresult cnDeviceGetUuid(CNuuid* uuid, CNdev dev) {
  REQUIRE_INIT;
  if (Err e = check(dev); e != Err::Ok) return to_cn(e);
  emu().device_uuid(static_cast<int>(dev), reinterpret_cast<unsigned char*>(uuid->bytes));
  return CN_SUCCESS;
}

CNresult cnDeviceGetAttribute(int* pi, CNdevice_attribute attrib, CNdev dev) {
  REQUIRE_INIT;
  if (Err e = check(dev); e != Err::Ok) return to_cn(e);
  if (attrib != CN_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) return CN_ERROR_INVALID_VALUE;
  *pi = 1;
  return CN_SUCCESS;
}

CNresult cnMemGetAddressRange(CNaddr* pbase, cn_uint64_t* psize, CNaddr addr) {
  REQUIRE_INIT;
  fakegpu::PtrInfo info;
  emu().query(reinterpret_cast<void*>(addr), &info);
  if (info.type != fakegpu::MemType::Device) return CN_MEMORY_ERROR_INVALID_ADDRESS;
  *pbase = info.base;
  *psize = info.size;
  return CN_SUCCESS;
}

#ifndef FAKEGPU_NO_DMABUF
CNresult cnMemGetHandleForAddressRange(void* handle, CNaddr dptr, size_t size,
                                       CNmemRangeHandleType type, cn_uint64_t flags) {
  REQUIRE_INIT;
  if (type != CN_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags != 0 || handle == nullptr)
    return CN_ERROR_INVALID_VALUE;
  return to_cn(emu().dmabuf_export(reinterpret_cast<void*>(dptr), size, static_cast<int*>(handle)));
}
#endif

}  // extern "C"

static_assert(std::is_same_v<decltype(&cnDeviceGetName), PFN_cnDeviceGetName>);
#ifndef FAKEGPU_NO_DMABUF
static_assert(
    std::is_same_v<decltype(&cnMemGetHandleForAddressRange), PFN_cnMemGetHandleForAddressRange>);
#endif
static_assert(std::is_same_v<decltype(&cnMemGetAddressRange), PFN_cnMemGetAddressRange>);
