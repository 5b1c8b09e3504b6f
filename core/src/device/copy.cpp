#include "device/copy.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "device/backoff.h"
#include "device/stage_pool.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

namespace copy_detail {

enum Direction { kHostToDevice, kDeviceToHost, kDeviceToDevice, kDirections };

const char* direction_name(int d) {
  return d == kHostToDevice   ? "host-to-device"
         : d == kDeviceToHost ? "device-to-host"
                              : "device-to-device";
}

// One stream of a device for one direction. The mutex makes "enqueue a copy, record its event"
// one step, and keeps the plugin's rule that a stream is used by one thread at a time.
struct Lane {
  std::mutex mutex;
  hmc_device_stream_t* stream = nullptr;
};

// What the engine keeps per device: a lane per direction and a pool of events.
struct DeviceLanes {
  const Device* device = nullptr;
  Lane lanes[kDirections];
  std::mutex events_mutex;
  std::vector<hmc_device_event_t*> free_events;
  std::atomic<size_t> streams_created{0};
  std::atomic<size_t> events_created{0};

  hmc_plugin_status_t take_event(hmc_device_event_t** ev) {
    {
      std::lock_guard<std::mutex> lock(events_mutex);
      if (!free_events.empty()) {
        *ev = free_events.back();
        free_events.pop_back();
        return HMC_PLUGIN_SUCCESS;
      }
    }
    hmc_plugin_status_t st = device->plugin->event_create(device->plugin_ctx, device->index, ev);
    if (st == HMC_PLUGIN_SUCCESS) ++events_created;
    return st;
  }
  void give_event(hmc_device_event_t* ev) {
    std::lock_guard<std::mutex> lock(events_mutex);
    free_events.push_back(ev);
  }
  // An event that saw a failure is not reused: its state after an error is the runtime's business.
  void discard_event(hmc_device_event_t* ev) { device->plugin->event_destroy(ev); }

  // Enqueues on lane `dir` what enqueue(stream) posts (the stream made on first use) and records
  // ev behind it, one step under the lane's mutex. Returns the step that failed, with *pst the
  // plugin's status, or nullptr.
  template <typename Enqueue>
  const char* enqueue_recorded(int dir, hmc_device_event_t* ev, Enqueue enqueue,
                               hmc_plugin_status_t* pst) {
    Lane& lane = lanes[dir];
    std::lock_guard<std::mutex> lock(lane.mutex);
    if (lane.stream == nullptr) {
      *pst = device->plugin->stream_create(device->plugin_ctx, device->index, &lane.stream);
      if (*pst != HMC_PLUGIN_SUCCESS) {
        lane.stream = nullptr;
        return "creating its stream";
      }
      ++streams_created;
    }
    if ((*pst = enqueue(lane.stream)) != HMC_PLUGIN_SUCCESS) return "enqueueing it";
    if ((*pst = device->plugin->event_record(ev, lane.stream)) != HMC_PLUGIN_SUCCESS)
      return "recording its completion event";
    return nullptr;
  }
};

}  // namespace copy_detail

using copy_detail::DeviceLanes;

// ---- CopyJob -------------------------------------------------------------------------------

void CopyJob::begin(CopyEngine* engine, DeviceLanes* lanes, hmc_device_event_t* ev, size_t size,
                    const char* from, const char* to) {
  engine_ = engine;
  lanes_ = lanes;
  event_ = ev;
  stage_buf_ = nullptr;
  size_ = size;
  from_ = from;
  to_ = to;
  final_ = HMC_SUCCESS;
  error_.clear();
}

CopyJob::~CopyJob() {
  if (!active()) return;
  CopyEngine* engine = engine_;
  // A drop must not change the thread's error message: this wait polls without fail().
  uint64_t deadline = deadline_after_ms(CopyEngine::kDropWaitMs);
  Backoff backoff;
  while (active()) {
    hmc_plugin_status_t st = lanes_->device->plugin->event_query(event_);
    if (st != HMC_PLUGIN_IN_PROGRESS) {
      finish(st);
      return;
    }
    if (now_ns() > deadline) break;
    backoff.pause();
  }
  HMC_LOG_W(
      "a copy of {} bytes {} -> {} was dropped unfinished after {} ms; it is parked until "
      "the device ends it",
      size_, from_, to_, CopyEngine::kDropWaitMs);
  engine->park(std::move(*this));
}

CopyJob::CopyJob(CopyJob&& other) noexcept {
  *this = std::move(other);
}

CopyJob& CopyJob::operator=(CopyJob&& other) noexcept {
  if (this == &other) return *this;
  if (active()) {
    CopyJob drop;  // ends the job this one held, as its destruction would
    drop.take_from(*this);
  }
  take_from(other);
  return *this;
}

void CopyJob::take_from(CopyJob& other) noexcept {
  engine_ = other.engine_;
  lanes_ = other.lanes_;
  event_ = other.event_;
  stage_buf_ = other.stage_buf_;
  size_ = other.size_;
  from_ = other.from_;
  to_ = other.to_;
  final_ = other.final_;
  error_.swap(other.error_);
  other.event_ = nullptr;
  other.stage_buf_ = nullptr;
}

hmc_status_t CopyJob::finish(hmc_plugin_status_t st) {
  if (st == HMC_PLUGIN_SUCCESS) {
    lanes_->give_event(event_);
    final_ = HMC_SUCCESS;
    error_.clear();
  } else {
    lanes_->discard_event(event_);
    final_ = from_plugin_status(st);
    if (final_ == HMC_IN_PROGRESS || final_ == HMC_SUCCESS) final_ = HMC_ERR_PLUGIN;
    error_ = fmt::format(
        "copy of {} bytes {} -> {} failed on the device: {} (the device "
        "plugin's log has the runtime's error)",
        size_, from_, to_, plugin_status_string(st));
  }
  event_ = nullptr;
  if (stage_buf_) {
    engine_->stage().give(stage_buf_);
    stage_buf_ = nullptr;
  }
  return final_;
}

hmc_status_t CopyJob::poll_quiet() {
  if (!active()) return final_;
  hmc_plugin_status_t st = lanes_->device->plugin->event_query(event_);
  if (st == HMC_PLUGIN_IN_PROGRESS) return HMC_IN_PROGRESS;
  return finish(st);
}

hmc_status_t CopyJob::poll() {
  hmc_status_t st = poll_quiet();
  if (st != HMC_SUCCESS && st != HMC_IN_PROGRESS) return set_error(st, error_);
  return st;
}

hmc_status_t CopyJob::wait(int timeout_ms) {
  uint64_t deadline = deadline_after_ms(timeout_ms);
  Backoff backoff;
  for (;;) {
    hmc_status_t st = poll();
    if (st != HMC_IN_PROGRESS) return st;
    if (now_ns() > deadline)
      return fail(HMC_ERR_TIMEOUT, "copy of {} bytes {} -> {} did not finish within {} ms", size_,
                  from_, to_, timeout_ms);
    backoff.pause();
  }
}

// ---- CopyEngine ----------------------------------------------------------------------------

CopyEngine::CopyEngine(DeviceRegistry& devices, StagePool& stage, int depth)
    : devices_(devices), stage_(stage), depth_(std::max(depth, 1)) {
  for (const Device& d : devices_.devices()) {
    auto l = std::make_unique<DeviceLanes>();
    l->device = &d;
    lanes_.push_back(std::move(l));
  }
}

CopyEngine::~CopyEngine() {
  reap_parked(kDropWaitMs);
  {
    std::lock_guard<std::mutex> lock(parked_mutex_);
    if (!parked_.empty())
      HMC_LOG_W(
          "copy engine closing with {} copy(ies) the devices never ended; their events are "
          "destroyed",
          parked_.size());
    for (CopyJob& j : parked_) {
      j.lanes_->device->plugin->event_destroy(j.event_);
      j.event_ = nullptr;
      j.stage_buf_ = nullptr;  // not given back: the pool goes away after the streams below
    }
    parked_.clear();
  }
  for (auto& l : lanes_) {
    const Device* d = l->device;
    if (d->is_host()) continue;
    for (auto& lane : l->lanes)
      if (lane.stream) d->plugin->stream_destroy(lane.stream);
    for (hmc_device_event_t* ev : l->free_events) d->plugin->event_destroy(ev);
  }
}

DeviceLanes* CopyEngine::lanes_of(const Device* d) {
  const auto& all = devices_.devices();
  if (all.empty() || d < &all.front() || d > &all.back()) return nullptr;
  return lanes_[static_cast<size_t>(d - &all.front())].get();
}

size_t CopyEngine::streams_created() const {
  size_t n = 0;
  for (const auto& l : lanes_) n += l->streams_created;
  return n;
}

size_t CopyEngine::events_created() const {
  size_t n = 0;
  for (const auto& l : lanes_) n += l->events_created;
  return n;
}

hmc_status_t CopyEngine::start(void* dst, const void* src, size_t n, CopyJob* job) {
  MemoryLocation dl = devices_.locate(dst), sl = devices_.locate(src);
  hmc_status_t st = DeviceRegistry::check_range("copy", dst, dl, n);
  if (st == HMC_SUCCESS) st = DeviceRegistry::check_range("copy", src, sl, n);
  if (st != HMC_SUCCESS) return st;
  return start(dst, dl, src, sl, n, job);
}

hmc_status_t CopyEngine::start(void* dst, const MemoryLocation& dl, const void* src,
                               const MemoryLocation& sl, size_t n, CopyJob* job) {
  if (job == nullptr) return fail(HMC_ERR_INVALID_ARGUMENT, "copy: job is NULL");
  if (job->active())
    return fail(HMC_ERR_INVALID_ARGUMENT, "copy: the job given to start is still active");
  const Device* sd = sl.device;
  const Device* dd = dl.device;
  if (sd->is_host() && dd->is_host())
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "copy: {} bytes host -> host is not a device copy (copy it on the CPU)", n);
  int dir;
  const Device* on;  // whose stream runs it
  if (dd->is_host()) {
    dir = copy_detail::kDeviceToHost;
    on = sd;
  } else if (sd->is_host()) {
    dir = copy_detail::kHostToDevice;
    on = dd;
  } else {
    bool direct =
        sd == dd || (sd->plugin_ctx == dd->plugin_ctx && (sd->caps & HMC_DEVICE_CAP_PEER_ACCESS) &&
                     (dd->caps & HMC_DEVICE_CAP_PEER_ACCESS));
    if (!direct)
      return fail(HMC_ERR_NOT_SUPPORTED,
                  "copy: no direct copy from {} to {} ({}); it goes through host memory", sd->name,
                  dd->name,
                  sd->plugin_ctx != dd->plugin_ctx ? "different device plugins"
                                                   : "no peer access between them");
    dir = copy_detail::kDeviceToDevice;
    on = sd;
  }
  if (parked_count_.load(std::memory_order_relaxed) != 0) reap_parked(0);
  DeviceLanes* lanes = lanes_of(on);
  if (lanes == nullptr)
    return fail(HMC_ERR_INTERNAL, "copy: device {} is not known to the copy engine", on->name);
  hmc_device_event_t* ev = nullptr;
  hmc_plugin_status_t pst = lanes->take_event(&ev);
  if (pst != HMC_PLUGIN_SUCCESS)
    return fail(from_plugin_status(pst), "copy: creating an event on {}: {}", on->name,
                plugin_status_string(pst));
  static const hmc_copy_kind_t kinds[] = {HMC_COPY_HOST_TO_DEVICE, HMC_COPY_DEVICE_TO_HOST,
                                          HMC_COPY_DEVICE_TO_DEVICE};
  const char* failed = lanes->enqueue_recorded(
      dir, ev,
      [&](hmc_device_stream_t* stream) {
        return on->plugin->copy_async(stream, dst, src, n, kinds[dir]);
      },
      &pst);
  if (failed) {
    lanes->discard_event(ev);
    return fail(from_plugin_status(pst) == HMC_ERR_INVALID_ARGUMENT ? HMC_ERR_INVALID_ARGUMENT
                                                                    : HMC_ERR_PLUGIN,
                "copy of {} bytes {} -> {} ({} on {}): {} failed: {}", n, sd->name, dd->name,
                copy_detail::direction_name(dir), on->name, failed, plugin_status_string(pst));
  }
  job->begin(this, lanes, ev, n, sd->name.c_str(), dd->name.c_str());
  return HMC_SUCCESS;
}

hmc_status_t CopyEngine::start_reduce(const Device* on, void* dst, const void* a, const void* b,
                                      size_t count, uint32_t dtype, uint32_t op, size_t bytes,
                                      CopyJob* job) {
  if (job == nullptr || job->active())
    return fail(HMC_ERR_INVALID_ARGUMENT, "reduce: the job is NULL or still active");
  if (on->is_host() || !HMC_DEVICE_SLOT(on->plugin, reduce))
    return fail(HMC_ERR_NOT_SUPPORTED, "reduce: {} offers no device reduction", on->name);
  if (parked_count_.load(std::memory_order_relaxed) != 0) reap_parked(0);
  DeviceLanes* lanes = lanes_of(on);
  if (lanes == nullptr)
    return fail(HMC_ERR_INTERNAL, "reduce: device {} is not known to the copy engine", on->name);
  hmc_device_event_t* ev = nullptr;
  hmc_plugin_status_t pst = lanes->take_event(&ev);
  if (pst != HMC_PLUGIN_SUCCESS)
    return fail(from_plugin_status(pst), "reduce: creating an event on {}: {}", on->name,
                plugin_status_string(pst));
  bool declined = false;  // the plugin does not reduce this dtype or op: nothing was enqueued
  const char* failed = lanes->enqueue_recorded(
      copy_detail::kDeviceToDevice, ev,
      [&](hmc_device_stream_t* stream) {
        hmc_plugin_status_t r = on->plugin->reduce(stream, dst, a, b, count, dtype, op);
        declined = r == HMC_PLUGIN_ERR_NOT_SUPPORTED;
        return r;
      },
      &pst);
  if (failed) {
    if (declined) {
      lanes->give_event(ev);
      return fail(HMC_ERR_NOT_SUPPORTED, "reduce on {}: the plugin does not reduce dtype {} op {}",
                  on->name, dtype, op);
    }
    lanes->discard_event(ev);
    return fail(HMC_ERR_PLUGIN, "reduce of {} elements on {}: {} failed: {}", count, on->name,
                failed, plugin_status_string(pst));
  }
  job->begin(this, lanes, ev, bytes, on->name.c_str(), on->name.c_str());
  return HMC_SUCCESS;
}

hmc_status_t CopyEngine::copy(void* dst, const void* src, size_t n, int timeout_ms) {
  MemoryLocation dl = devices_.locate(dst), sl = devices_.locate(src);
  hmc_status_t st = DeviceRegistry::check_range("copy", dst, dl, n);
  if (st == HMC_SUCCESS) st = DeviceRegistry::check_range("copy", src, sl, n);
  if (st != HMC_SUCCESS) return st;
  return copy(dst, dl, src, sl, n, timeout_ms);
}

hmc_status_t CopyEngine::copy(void* dst, const MemoryLocation& dl, const void* src,
                              const MemoryLocation& sl, size_t n, int timeout_ms) {
  if (n == 0) return HMC_SUCCESS;
  if (timeout_ms <= 0)
    return fail(HMC_ERR_INVALID_ARGUMENT, "copy: timeout {} ms (must be positive)", timeout_ms);
  const Device* sd = sl.device;
  const Device* dd = dl.device;
  if (sd->is_host() && dd->is_host()) {
    memmove(dst, src, n);
    return HMC_SUCCESS;
  }
  uint64_t deadline = deadline_after_ms(timeout_ms);
  bool staged = !sd->is_host() && !dd->is_host() && sd != dd &&
                !(sd->plugin_ctx == dd->plugin_ctx && (sd->caps & HMC_DEVICE_CAP_PEER_ACCESS) &&
                  (dd->caps & HMC_DEVICE_CAP_PEER_ACCESS));
  if (staged)
    return staged_copy(static_cast<char*>(dst), dl, static_cast<const char*>(src), sl, n, deadline);
  CopyJob job;
  hmc_status_t st = start(dst, dl, src, sl, n, &job);
  if (st != HMC_SUCCESS) return st;
  Backoff backoff;
  for (;;) {
    st = job.poll();
    if (st != HMC_IN_PROGRESS) return st;
    if (now_ns() > deadline)
      // The job's destruction waits a little more, then parks it: the caller's memory is not
      // written behind its back for longer than that.
      return fail(HMC_ERR_TIMEOUT, "copy of {} bytes {} -> {} did not finish within {} ms", n,
                  sd->name, dd->name, timeout_ms);
    backoff.pause();
  }
}

// Device to device through host memory. Each of up to depth slots carries one chunk at a time
// through a staging buffer: device-to-host on the source device's stream, then host-to-device
// on the destination's. Device-to-host copies queue back to back on the source, so while chunk
// k goes host-to-device, chunks k+1.. come out of the source: the time approaches the slower
// stage, not the sum.
hmc_status_t CopyEngine::staged_copy(char* dst, const MemoryLocation& dl, const char* src,
                                     const MemoryLocation& sl, size_t n, uint64_t deadline) {
  struct Slot {
    void* buf = nullptr;
    size_t off = 0, len = 0;
    int phase = 0;  // 0 idle, 1 device-to-host, 2 host-to-device
    CopyJob job;
  };
  const size_t chunk = stage_.chunk();
  const size_t nslots = std::min<size_t>(static_cast<size_t>(depth_), (n + chunk - 1) / chunk);
  std::vector<Slot> slots(nslots);
  MemoryLocation host;
  host.device = &devices_.devices().front();
  size_t issued = 0, landed = 0;
  hmc_status_t st = HMC_SUCCESS;
  std::string error;
  Backoff backoff;
  while (landed < n) {
    bool progressed = false;
    for (Slot& s : slots) {
      if (s.phase == 0) continue;
      hmc_status_t js = s.job.poll_quiet();
      if (js == HMC_IN_PROGRESS) continue;
      if (js != HMC_SUCCESS) {
        st = js;
        error = s.job.error_;
        break;
      }
      progressed = true;
      if (s.phase == 1) {
        js = start(dst + s.off, dl, s.buf, host, s.len, &s.job);
        if (js != HMC_SUCCESS) {
          st = js;
          error = last_error();
          break;
        }
        s.phase = 2;
      } else {
        landed += s.len;
        s.phase = 0;
      }
    }
    if (st != HMC_SUCCESS) break;
    for (Slot& s : slots) {
      if (s.phase != 0 || issued == n) continue;
      if (s.buf == nullptr && (s.buf = stage_.take()) == nullptr) break;  // pool in use: later
      s.off = issued;
      s.len = std::min(chunk, n - issued);
      hmc_status_t js = start(s.buf, host, src + s.off, sl, s.len, &s.job);
      if (js != HMC_SUCCESS) {
        st = js;
        error = last_error();
        break;
      }
      s.phase = 1;
      issued += s.len;
      progressed = true;
    }
    if (st != HMC_SUCCESS || landed == n) break;
    if (now_ns() > deadline) {
      bool had_buffer =
          std::any_of(slots.begin(), slots.end(), [](const Slot& s) { return s.buf != nullptr; });
      st = HMC_ERR_TIMEOUT;
      error = fmt::format(
          "copy of {} bytes {} -> {} through host memory did not finish in time ({} of {} bytes "
          "landed{})",
          n, sl.device->name, dl.device->name, landed, n,
          had_buffer ? "" : "; no staging buffer was free (HMC_STAGE_POOL_BYTES in use)");
      break;
    }
    if (progressed)
      backoff.reset();
    else
      backoff.pause();
  }
  // Chunks still moving keep their buffer until their device ends them (parked: their memory is
  // ours and the devices', never the caller's host memory).
  for (Slot& s : slots) {
    if (s.job.active()) {
      s.job.adopt_stage_buffer(s.buf);
      park(std::move(s.job));
    } else if (s.buf) {
      stage_.give(s.buf);
    }
    s.buf = nullptr;
  }
  if (st != HMC_SUCCESS) return set_error(st, error);
  return HMC_SUCCESS;
}

void CopyEngine::park(CopyJob&& job) {
  std::lock_guard<std::mutex> lock(parked_mutex_);
  parked_.emplace_back();
  parked_.back().take_from(job);
  parked_count_.store(parked_.size(), std::memory_order_relaxed);
}

void CopyEngine::reap_parked(int max_wait_ms) {
  uint64_t deadline = deadline_after_ms(max_wait_ms);
  Backoff backoff;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(parked_mutex_);
      for (size_t i = 0; i < parked_.size();) {
        if (parked_[i].poll_quiet() == HMC_IN_PROGRESS) {
          ++i;
          continue;
        }
        parked_.erase(parked_.begin() + static_cast<std::ptrdiff_t>(i));
      }
      parked_count_.store(parked_.size(), std::memory_order_relaxed);
      if (parked_.empty()) return;
    }
    if (now_ns() > deadline) return;
    backoff.pause();
  }
}

}  // namespace hmc
