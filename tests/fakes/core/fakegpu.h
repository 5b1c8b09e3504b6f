// The emulation core shared by the emulated vendor runtimes in tests/fakes (libcuda.so.1,
// libamdhip64.so.*, libcnrt.so + libcndrv.so, libmusart.so + libmusa.so). Built once as
// libfakegpu.so; each vendor library is a thin layer that maps its API and error codes onto this.
//
// What it emulates, per vendor (one Emulator per vendor name, shared by that vendor's libraries):
//  - a configurable number of devices whose memory the host cannot dereference: every allocation
//    is a memfd mapped twice, PROT_NONE at the address handed out as the device pointer (a host
//    access faults with SIGSEGV) and read-write at a private address the emulator copies through;
//  - pinned host memory and host registration (plain host memory, remembered for queries);
//  - streams with a worker thread each: copies complete later than they are issued, at a
//    configurable bandwidth (a stream is one copy engine: copies queued behind each other run
//    back to back on its timeline, whenever its worker thread gets the CPU); events complete
//    when the worker reaches them;
//  - IPC handles that another process opens while the exporter lives (/proc/<pid>/fd/<n> of the
//    allocation's memfd); dma-buf export as a real fd (a dup of the allocation's memfd, whose
//    offset 0 is the allocation's first byte);
//  - injected failures: the Nth allocation fails, the Nth copy fails (reported on the next event
//    of its stream), the devices disappear after N operations (every later call fails, in-flight
//    copies fail, nothing hangs).
//
// Configuration, read from the environment when an emulator is first used and again by
// fakegpu_reset() (FAKEGPU_<VENDOR>_<NAME> overrides FAKEGPU_<NAME>; VENDOR is CUDA, HIP, MLU,
// MUSA):
//   FAKEGPU_DEVICES            number of devices (default 2; 0 = the runtime reports none)
//   FAKEGPU_MEM_MB             memory per device in MiB (default 1024; address space only)
//   FAKEGPU_BANDWIDTH_MBPS     copy bandwidth in MB/s for every copy (default 0 = unlimited)
//   FAKEGPU_D2D_BANDWIDTH_MBPS copy bandwidth of device-to-device copies (default: the above),
//                              as between devices without a peer link
//   FAKEGPU_FAIL_ALLOC_NTH     the Nth allocation (1-based) fails: out of memory (0 = never)
//   FAKEGPU_FAIL_COPY_NTH      the Nth asynchronous copy fails with a copy error (0 = never)
//   FAKEGPU_LOSE_DEVICE_AFTER  after N operations every device is lost (0 = never)
//   FAKEGPU_FAIL_IPC_OPEN      1: every IPC open fails (invalid handle), as between containers
// and per vendor layer (read through setting(); see each layer): FAKEGPU_CUDA_DRIVER_VERSION,
// FAKEGPU_HIP_VERSION, FAKEGPU_MLU_VERSION_MAJOR/_MINOR/_PATCH, FAKEGPU_MUSA_VERSION, and
// FAKEGPU_MLU_DRIVER_INIT_FAILS / FAKEGPU_MUSA_DRIVER_INIT_FAILS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#define FAKEGPU_API __attribute__((visibility("default")))

namespace fakegpu {

// Errors of the emulation; each vendor layer maps them to its own codes.
enum class Err {
  Ok,
  NotReady,
  InvalidValue,
  OutOfMemory,
  NoDevice,
  InvalidDevice,
  InvalidContext,
  InvalidHandle,
  AlreadyRegistered,
  NotRegistered,
  NotSupported,
  DeviceLost,  // the devices disappeared (FAKEGPU_LOSE_DEVICE_AFTER)
  CopyFailed,  // an injected copy failure (FAKEGPU_FAIL_COPY_NTH)
  Timeout,     // a synchronisation waited more than a minute
};
FAKEGPU_API const char* err_name(Err e);

enum class MemType { Unregistered, Host, Device };

struct PtrInfo {
  MemType type = MemType::Unregistered;
  int device = -1;
  uintptr_t base = 0;
  size_t size = 0;
};

// Copy directions as the APIs name them; Default infers from the addresses.
enum class Dir { HostToDevice, DeviceToHost, DeviceToDevice, HostToHost, Default };

struct Config {
  int devices = 2;
  uint64_t mem_bytes = 1024ull << 20;
  uint64_t bandwidth_MBps = 0;
  uint64_t d2d_bandwidth_MBps = 0;  // FAKEGPU_D2D_BANDWIDTH_MBPS (default bandwidth_MBps)
  long fail_alloc_nth = 0;
  long fail_copy_nth = 0;
  long lose_device_after = 0;
  bool fail_ipc_open = false;  // FAKEGPU_FAIL_IPC_OPEN
};

class Stream;
class Event;
class EmulatorImpl;

class FAKEGPU_API Emulator {
 public:
  // The emulator of a vendor ("cuda", "hip", "mlu", "musa"), created on first use. Never
  // destroyed (its worker threads may outlive static destructors).
  static Emulator& get(const char* vendor);
  // An integer setting: FAKEGPU_<VENDOR>_<name>, else FAKEGPU_<name>, else def.
  long setting(const char* name, long def) const;

  Config config() const;
  int device_count() const;
  // Ok for a valid device of a present emulator; InvalidDevice, or DeviceLost once lost.
  Err check_device(int dev);
  bool lost() const;

  // Identity: deterministic per vendor and index.
  std::string device_name(int dev) const;  // "<Vendor> FakeGPU <dev>"
  void device_uuid(int dev, unsigned char out[16]) const;
  std::string pci_bus_id(int dev) const;  // "0000:1A:00.0" (upper case, as drivers answer)
  Err mem_info(int dev, size_t* free_bytes, size_t* total_bytes);

  // Memory.
  Err alloc(int dev, size_t size, void** ptr);
  Err free(const void* ptr);
  Err host_alloc(size_t size, void** ptr);
  Err host_free(void* ptr);
  Err host_register(void* ptr, size_t size);
  Err host_unregister(void* ptr);
  // Unregistered (and Ok) for memory the emulator does not know.
  Err query(const void* ptr, PtrInfo* out);

  // Streams and events. A null stream is the device's default stream.
  Err stream_create(int dev, Stream** out);
  Err stream_destroy(Stream* s);
  Err stream_query(Stream* s);
  Err stream_sync(Stream* s);
  Err copy_async(int dev, Stream* s, void* dst, const void* src, size_t size, Dir dir);
  Err copy_sync(int dev, void* dst, const void* src, size_t size, Dir dir);
  Err event_create(int dev, Event** out);
  Err event_destroy(Event* e);
  Err event_record(Event* e, Stream* s);
  Err event_query(Event* e);
  Err event_sync(Event* e);
  int stream_device(const Stream* s) const;
  // Host work in stream order, as a kernel of another library would run (the emulated NCCL's
  // collectives): fn runs on the stream's worker after what was queued before it, and later
  // work waits for it. An error it returns is the stream's, reported by the next event recorded
  // on it. A null stream is the device's default stream.
  Err launch_host(int dev, Stream* s, std::function<Err()> fn);
  // Where the emulator keeps [ptr, ptr+size) of a device allocation, for such host work to read
  // and write; *hold keeps the allocation mapped while the caller uses *at. InvalidValue for
  // memory that is not one device allocation's.
  Err device_view(const void* ptr, size_t size, std::shared_ptr<void>* hold, char** at);

  // IPC. handle_len is 64 (CUDA, HIP, MUSA) or 8 (CNRT).
  Err ipc_get(const void* ptr, void* handle, size_t handle_len);
  Err ipc_open(int dev, const void* handle, size_t handle_len, void** ptr);
  Err ipc_close(const void* ptr);

  // dma-buf: an fd for [ptr, ptr+size) of a device allocation. ptr and size must be page
  // aligned and ptr must be the allocation's start (the fd's offset 0 is that byte).
  Err dmabuf_export(const void* ptr, size_t size, int* fd);

  // Re-reads the configuration and clears the failure counters and the lost state.
  void reset();

  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;

 private:
  explicit Emulator(const char* vendor);
  EmulatorImpl* impl_;
};

}  // namespace fakegpu

// For tests: every emulator of the process re-reads the environment (see Emulator::reset).
extern "C" FAKEGPU_API void fakegpu_reset(void);
