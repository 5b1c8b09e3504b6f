#include "devplug/backend.h"

#include <unistd.h>

namespace hmc::devplug {

Status Backend::host_alloc(size_t, void**) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
Status Backend::host_free(void*) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
Status Backend::host_register(void*, size_t) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
Status Backend::host_unregister(void*) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
Status Backend::ipc_get(int, void*, void*) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
Status Backend::ipc_open(int, const void*, void**) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
Status Backend::ipc_close(int, void*) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
Status Backend::dmabuf_export(int, uintptr_t, size_t, const void*, size_t, int*, uint64_t*) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}

DmabufRange dmabuf_range(uintptr_t alloc_base, const void* ptr, size_t size) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  DmabufRange r;
  r.start =
      (alloc_base != 0 && alloc_base % page == 0 && alloc_base <= p) ? alloc_base : p / page * page;
  uintptr_t end = (p + size + page - 1) / page * page;
  r.size = end - r.start;
  r.offset = p - r.start;
  return r;
}

}  // namespace hmc::devplug
