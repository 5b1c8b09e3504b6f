// Emulated HSA runtime (libhsa-runtime64.so.1), only its dma-buf export (ROCm 5.6+), for the HIP 6
// flavour of the emulated HIP runtime, which links it as the real one does. Unlike the range-handle
// calls, hsa_amd_portable_export_dmabuf takes any pointer and answers the offset of that pointer
// in the buffer: the emulation exports the whole allocation from its first byte.
#include <unistd.h>

#include <cstdint>
#include <type_traits>

#include "fakegpu.h"
#include "hip_api.h"

using namespace hmc::vendor::hip;

extern "C" {

hsa_status_t hsa_amd_portable_export_dmabuf(const void* ptr, size_t size, int* dmabuf,
                                            uint64_t* offset) {
  fakegpu::Emulator& emu = fakegpu::Emulator::get("hip");
  fakegpu::PtrInfo info;
  emu.query(ptr, &info);
  auto p = reinterpret_cast<uintptr_t>(ptr);
  if (info.type != fakegpu::MemType::Device || dmabuf == nullptr || offset == nullptr ||
      size == 0 || p + size > info.base + info.size)
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t length = (p - info.base + size + page - 1) / page * page;
  int fd = -1;
  if (emu.dmabuf_export(reinterpret_cast<void*>(info.base), length, &fd) != fakegpu::Err::Ok)
    return HSA_STATUS_ERROR;
  *dmabuf = fd;
  *offset = p - info.base;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_portable_close_dmabuf(int dmabuf) {
  return close(dmabuf) == 0 ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

}  // extern "C"

static_assert(
    std::is_same_v<decltype(&hsa_amd_portable_export_dmabuf), PFN_hsa_amd_portable_export_dmabuf>);
static_assert(
    std::is_same_v<decltype(&hsa_amd_portable_close_dmabuf), PFN_hsa_amd_portable_close_dmabuf>);
