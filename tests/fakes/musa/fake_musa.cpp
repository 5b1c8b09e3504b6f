// Emulated Moore Threads MUSA driver (libmusa.so.1), the part the musa plugin takes from it:
// device identity, allocation ranges and dma-buf export, over the same emulator as the emulated
// runtime (libmusart.so), so memory from musaMalloc can be exported here.
// Settings: FAKEGPU_MUSA_DRIVER_INIT_FAILS=1 makes muInit fail (a driver the plugin cannot use).
// Build toggle: FAKEGPU_NO_DMABUF leaves out muMemGetHandleForAddressRange.
#include <cstdio>
#include <type_traits>

#include "fakegpu.h"
#include "musa_api.h"

using namespace hmc::vendor::musa;
using fakegpu::Err;

namespace {

bool g_initialized = false;

fakegpu::Emulator& emu() {
  return fakegpu::Emulator::get("musa");
}

MUresult to_mu(Err e) {
  switch (e) {
    case Err::Ok: return MUSA_SUCCESS;
    case Err::NoDevice:
    case Err::DeviceLost: return MUSA_ERROR_NO_DEVICE;
    case Err::NotSupported: return MUSA_ERROR_NOT_SUPPORTED;
    default: return MUSA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

#define REQUIRE_INIT \
  if (!g_initialized) return MUSA_ERROR_NOT_INITIALIZED

extern "C" {

MUresult muInit(unsigned int flags) {
  if (flags != 0) return MUSA_ERROR_INVALID_VALUE;
  if (emu().setting("DRIVER_INIT_FAILS", 0) != 0) return MUSA_ERROR_NOT_INITIALIZED;
  if (emu().device_count() == 0) return MUSA_ERROR_NO_DEVICE;
  g_initialized = true;
  return MUSA_SUCCESS;
}

MUresult muGetErrorName(MUresult error, const char** str) {
  *str = error == MUSA_SUCCESS ? "MUSA_SUCCESS" : "MUSA_ERROR";
  return MUSA_SUCCESS;
}

MUresult muDeviceGet(MUdevice* device, int ordinal) {
  REQUIRE_INIT;
  if (Err e = emu().check_device(ordinal); e != Err::Ok) return to_mu(e);
  *device = ordinal;
  return MUSA_SUCCESS;
}

MUresult muDeviceGetName(char* name, int len, MUdevice dev) {
  REQUIRE_INIT;
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_mu(e);
  std::snprintf(name, static_cast<size_t>(len), "Moore Threads %s", emu().device_name(dev).c_str());
  return MUSA_SUCCESS;
}

MUresult muDeviceTotalMem(size_t* bytes, MUdevice dev) {
  REQUIRE_INIT;
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_mu(e);
  *bytes = emu().config().mem_bytes;
  return MUSA_SUCCESS;
}

MUresult muDeviceGetUuid(MUuuid* uuid, MUdevice dev) {
  REQUIRE_INIT;
  if (Err e = emu().check_device(dev); e != Err::Ok) return to_mu(e);
  emu().device_uuid(dev, reinterpret_cast<unsigned char*>(uuid->bytes));
  return MUSA_SUCCESS;
}

MUresult muMemGetAddressRange(MUdeviceptr* pbase, size_t* psize, MUdeviceptr dptr) {
  REQUIRE_INIT;
  fakegpu::PtrInfo info;
  emu().query(reinterpret_cast<void*>(static_cast<uintptr_t>(dptr)), &info);
  if (info.type != fakegpu::MemType::Device) return MUSA_ERROR_NOT_FOUND;
  *pbase = info.base;
  *psize = info.size;
  return MUSA_SUCCESS;
}

#ifndef FAKEGPU_NO_DMABUF
MUresult muMemGetHandleForAddressRange(void* handle, MUdeviceptr dptr, size_t size,
                                       MUmemRangeHandleType type, unsigned long long flags) {
  REQUIRE_INIT;
  if (type != MU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags != 0 || handle == nullptr)
    return MUSA_ERROR_INVALID_VALUE;
  return to_mu(emu().dmabuf_export(reinterpret_cast<void*>(static_cast<uintptr_t>(dptr)), size,
                                   static_cast<int*>(handle)));
}
#endif

}  // extern "C"

static_assert(std::is_same_v<decltype(&muDeviceGetName), PFN_muDeviceGetName>);
#ifndef FAKEGPU_NO_DMABUF
static_assert(
    std::is_same_v<decltype(&muMemGetHandleForAddressRange), PFN_muMemGetHandleForAddressRange>);
#endif
static_assert(std::is_same_v<decltype(&muMemGetAddressRange), PFN_muMemGetAddressRange>);
