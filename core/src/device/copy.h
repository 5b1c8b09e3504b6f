// The local copy engine: copies between any two memories of this process (host memory and the
// devices of every loaded device plugin), on streams and events of the device plugins.
//
//   CopyEngine::start  one asynchronous copy where at least one side is device memory
//                      (device<->host, or device<->device of one plugin), completed through a
//                      CopyJob that is polled; never blocks.
//   CopyEngine::copy   a blocking copy between any two memories, bounded by a timeout. Across
//                      vendors (or between devices of one plugin without peer access) the data
//                      goes through the context's StagePool in chunks, pipelined: the
//                      device-to-host copy of chunk k+1 runs while chunk k goes host-to-device.
//
// Streams and events are pooled per device and created on first use: one stream per device and
// direction (host-to-device, device-to-host, device-to-device), so copies in different
// directions overlap and copies in one direction on one device run in the order they were
// started (a copy engine per direction is what the hardware has); events are reused. Nothing is
// created per copy once warm.
//
// Thread-safe: start, copy and CopyJob::poll may run on any threads (one job is polled by one
// thread at a time). The engine must outlive its jobs and be destroyed before the device plugins
// are finalized.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device/registry.h"
#include "device/stage_pool.h"
#include "hmc/hmc.h"
#include "hmc/plugin/device.h"

namespace hmc {

class CopyEngine;

namespace copy_detail {
struct DeviceLanes;
}

// One asynchronous copy started by CopyEngine::start. Movable, not copyable.
class CopyJob {
 public:
  CopyJob() = default;
  // A job still active is waited for (bounded: CopyEngine::kDropWaitMs); if it has not ended by
  // then, the engine keeps its event (and staging buffer) until the device finishes, so no stream
  // or event dangles and no buffer returns to the pool while a device still writes it.
  ~CopyJob();
  CopyJob(CopyJob&& other) noexcept;
  CopyJob& operator=(CopyJob&& other) noexcept;
  CopyJob(const CopyJob&) = delete;
  CopyJob& operator=(const CopyJob&) = delete;

  // True from a successful start until poll has seen the end.
  bool active() const { return event_ != nullptr; }
  // HMC_IN_PROGRESS while running; HMC_SUCCESS when the data has landed; an error (message set
  // through hmc::fail, naming the devices) when the copy failed or the device was lost. Once
  // ended, the job is inactive and poll answers the same final status again. A job that never
  // started answers HMC_SUCCESS. Never blocks.
  hmc_status_t poll();
  // Polls until the end or timeout_ms (HMC_ERR_TIMEOUT, the job stays active). For tests and
  // simple callers: it spins, yielding the CPU.
  hmc_status_t wait(int timeout_ms);

  size_t size() const { return size_; }

  // Hands a buffer of the engine's StagePool to the job: it goes back to the pool when the job
  // ends (poll sees the end, or, for a job dropped while active, when the device ends it), never
  // while a device may still read or write it. The job must be active.
  void adopt_stage_buffer(void* buf) { stage_buf_ = buf; }

 private:
  friend class CopyEngine;
  // Makes this inactive job the one ending with ev, just recorded on one of lanes' streams.
  void begin(CopyEngine* engine, copy_detail::DeviceLanes* lanes, hmc_device_event_t* ev,
             size_t size, const char* from, const char* to);
  // Moves other's job into this inactive one.
  void take_from(CopyJob& other) noexcept;
  // poll without touching the thread's error message (error_ keeps it).
  hmc_status_t poll_quiet();
  hmc_status_t finish(hmc_plugin_status_t st);

  CopyEngine* engine_ = nullptr;
  copy_detail::DeviceLanes* lanes_ = nullptr;
  hmc_device_event_t* event_ = nullptr;
  void* stage_buf_ = nullptr;  // a StagePool buffer the device still uses; given back at the end
  size_t size_ = 0;
  const char* from_ = "";  // device names, for messages (they live as long as the registry)
  const char* to_ = "";
  hmc_status_t final_ = HMC_SUCCESS;
  std::string error_;
};

class CopyEngine {
 public:
  // How long a CopyJob destroyed while active is waited for before it is parked.
  static constexpr int kDropWaitMs = 1000;

  // devices: every device the engine may see (its list must not change afterwards).
  // stage: the context's bounce buffers for copies that cross vendors; depth: chunks in flight
  // per staged copy (>= 1). Creates no stream or event yet.
  CopyEngine(DeviceRegistry& devices, StagePool& stage, int depth);
  // Waits (bounded, kDropWaitMs) for parked jobs, then destroys every stream and event.
  ~CopyEngine();
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;

  // Starts an asynchronous copy of n bytes from src to dst where at least one side is device
  // memory: device<->host, or device<->device of one plugin (the same device, or two devices
  // that both have HMC_DEVICE_CAP_PEER_ACCESS). Locates both pointers and checks n against
  // their allocations. *job must be inactive. Never blocks (the first copy on a device and
  // direction creates its stream). Errors: HMC_ERR_INVALID_ARGUMENT (host<->host, active job),
  // HMC_ERR_NOT_SUPPORTED (devices of different plugins, or without peer access: use copy()),
  // HMC_ERR_OUT_OF_BOUNDS, HMC_ERR_INVALID_HANDLE (freed memory), or the plugin's failure.
  hmc_status_t start(void* dst, const void* src, size_t n, CopyJob* job);
  // The same with both locations already known (DeviceRegistry::locate); no bounds check.
  hmc_status_t start(void* dst, const MemoryLocation& dst_loc, const void* src,
                     const MemoryLocation& src_loc, size_t n, CopyJob* job);

  // Starts dst = a op b over count elements on device `on` through its plugin's reduce slot
  // (device.h: dtype and op as HMC_DEVICE_DTYPE_*, HMC_DEVICE_REDUCE_*), on the device's
  // device-to-device stream, so that it runs after the device-to-device copies started before
  // it; completed through job as a copy is. The caller has located the three pointers on `on`.
  // HMC_ERR_NOT_SUPPORTED when the plugin has no reduce slot or declines this dtype or op
  // (message set), HMC_ERR_PLUGIN when it fails otherwise.
  hmc_status_t start_reduce(const Device* on, void* dst, const void* a, const void* b, size_t count,
                            uint32_t dtype, uint32_t op, size_t bytes, CopyJob* job);

  // Copies n bytes between any two memories and returns when the data has landed, or after
  // timeout_ms (> 0) with HMC_ERR_TIMEOUT. Same plugin: one direct copy; different vendors (or
  // devices of one plugin without peer access): through the staging pool, depth chunks in
  // flight. Errors as start's, plus HMC_ERR_TIMEOUT.
  hmc_status_t copy(void* dst, const void* src, size_t n, int timeout_ms);
  hmc_status_t copy(void* dst, const MemoryLocation& dst_loc, const void* src,
                    const MemoryLocation& src_loc, size_t n, int timeout_ms);

  StagePool& stage() { return stage_; }
  int depth() const { return depth_; }
  // Streams and events created so far (for tests: they must not grow per copy).
  size_t streams_created() const;
  size_t events_created() const;

 private:
  friend class CopyJob;
  copy_detail::DeviceLanes* lanes_of(const Device* d);
  hmc_status_t staged_copy(char* dst, const MemoryLocation& dst_loc, const char* src,
                           const MemoryLocation& src_loc, size_t n, uint64_t deadline_ns);
  // Takes over the event (and staging buffer) of a job dropped while active.
  void park(CopyJob&& job);
  // Ends parked jobs whose devices finished (or failed). max_wait_ms 0: one pass.
  void reap_parked(int max_wait_ms);

  DeviceRegistry& devices_;
  StagePool& stage_;
  const int depth_;
  std::vector<std::unique_ptr<copy_detail::DeviceLanes>> lanes_;  // per device, index as registry
  std::mutex parked_mutex_;
  std::vector<CopyJob> parked_;
  std::atomic<size_t> parked_count_{0};  // parked_.size(), read without the lock
};

}  // namespace hmc
