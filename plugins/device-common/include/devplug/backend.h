// What a vendor adapter implements for the shared plugin code (plugin.h): the runtime-specific
// half of a device plugin. The shared half checks arguments, keeps the device list, wraps streams
// and events, records allocations, frames IPC handles and computes dma-buf ranges, so a Backend
// only talks to its runtime.
//
// Contract for every method: dev is a valid device index (checked by the caller); a failure is
// logged here, where the vendor error is seen (with the call, its arguments and the vendor's
// error name), and returned as an hmc status; outputs are set only on success. Methods may be
// called from several threads at once; native streams and events are used by one thread at a
// time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "devplug/log.h"
#include "hmc/plugin/device.h"

namespace hmc::devplug {

using Status = hmc_plugin_status_t;

// One device, as discovered at open.
struct DeviceDesc {
  std::string name;
  std::string pci_bus_id;  // normalized ("0000:3b:00.0"), or ""
  uint8_t uuid[16] = {};
  int32_t numa_node = -1;
  uint64_t mem_bytes = 0;
  uint32_t caps = 0;  // HMC_DEVICE_CAP_*
};

// What open found. No runtime, an unusable runtime, or no device is not an error: devices stays
// empty and reason says why ("libcuda.so.1: cannot open shared object file: ...",
// "cuInit: CUDA_ERROR_NO_DEVICE (100)").
struct Discovery {
  std::vector<DeviceDesc> devices;
  std::string reason;
  std::string runtime_version;        // "CUDA driver 12.8"; "" when no runtime was found
  size_t vendor_ipc_handle_size = 0;  // bytes of the vendor's IPC handle; 0 without IPC
};

struct OpenArgs {
  std::string library;  // the HMC_<VENDOR>_LIBRARY value: a file to open instead; "" = default
};

// Answer about memory the plugin did not hand out itself (the application's own allocations).
struct ForeignPointer {
  int device = -1;       // device index, -1 for host memory
  bool is_host = false;  // pinned or registered host memory
  uint64_t base = 0;
  uint64_t size = 0;  // 0 when the runtime cannot tell
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Finds the runtime, checks its version, counts and describes the devices. Returns SUCCESS
  // also when there is nothing to drive (see Discovery); an error only for a failure of the
  // plugin itself (out of memory).
  virtual Status open(const OpenArgs& args, const Log& log, Discovery* out) = 0;
  // Releases what open acquired (primary contexts). Called once, after everything else.
  virtual void close() = 0;

  virtual Status mem_alloc(int dev, size_t size, void** ptr) = 0;
  virtual Status mem_free(int dev, void* ptr) = 0;

  // Optional: HMC_PLUGIN_ERR_NOT_SUPPORTED unless overridden.
  virtual Status host_alloc(size_t size, void** ptr);
  virtual Status host_free(void* ptr);
  virtual Status host_register(void* ptr, size_t size);
  virtual Status host_unregister(void* ptr);

  // True when the runtime knows ptr as memory of one of its devices or as pinned/registered host
  // memory; false for anything else (never logged: asking is how the core finds out).
  virtual bool query_foreign(const void* ptr, ForeignPointer* out) = 0;

  virtual Status stream_create(int dev, void** stream) = 0;
  virtual Status stream_destroy(int dev, void* stream) = 0;
  virtual Status copy_async(int dev, void* stream, void* dst, const void* src, size_t size,
                            hmc_copy_kind_t kind) = 0;
  virtual Status event_create(int dev, void** event) = 0;
  virtual Status event_destroy(int dev, void* event) = 0;
  virtual Status event_record(int dev, void* event, void* stream) = 0;
  // SUCCESS, IN_PROGRESS, or the error of a failed operation before the record. Never blocks.
  virtual Status event_query(int dev, void* event) = 0;

  // IPC (optional). ipc_get writes Discovery::vendor_ipc_handle_size bytes for the allocation at
  // base; ipc_open maps such a handle on device dev.
  virtual Status ipc_get(int dev, void* base, void* vendor_handle);
  virtual Status ipc_open(int dev, const void* vendor_handle, void** ptr);
  virtual Status ipc_close(int dev, void* ptr);

  // dma-buf (optional): exports the allocation [base, base+alloc_size) of device dev, or the part
  // of it around [ptr, ptr+size), as a dma-buf. *fd belongs to the caller; *offset is where ptr
  // lies in it.
  virtual Status dmabuf_export(int dev, uintptr_t base, size_t alloc_size, const void* ptr,
                               size_t size, int* fd, uint64_t* offset);
};

// The page-aligned range to hand to a cuMemGetHandleForAddressRange-style call (those accept
// only page-aligned address and size): from the allocation's start when it is page-aligned (so
// the buffer's offset 0 is the allocation's first byte), else from ptr rounded down; to the end
// of [ptr, ptr+size) rounded up.
struct DmabufRange {
  uintptr_t start = 0;
  size_t size = 0;
  uint64_t offset = 0;  // ptr - start
};
DmabufRange dmabuf_range(uintptr_t alloc_base, const void* ptr, size_t size);

}  // namespace hmc::devplug
