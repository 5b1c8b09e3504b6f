#include "device/copy_figures.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "device/copy.h"
#include "device/stage_pool.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

namespace {
constexpr size_t kFirstSize = 64u << 10;
constexpr double kEnoughUs = 2000.0;  // a copy this long is timed well enough
constexpr int kRepeats = 5;
constexpr int kBatch = 4;

// Microseconds per copy of `count` copies started back to back on the direction's stream (they
// run one after the other, as staged pieces do), so that the wake-up of whoever notices the end
// is paid once per batch; negative when one failed (error set).
double time_copies(CopyEngine& eng, void* dst, const void* src, size_t n, int count, int timeout_ms,
                   std::string* error) {
  CopyJob jobs[kBatch];
  count = std::min(count, kBatch);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i)
    if (eng.start(dst, src, n, &jobs[i]) != HMC_SUCCESS) {
      *error = "a copy failed to start: " + last_error();
      return -1;
    }
  for (int i = 0; i < count; ++i)
    if (jobs[i].wait(timeout_ms) != HMC_SUCCESS) {
      *error = "a copy failed: " + last_error();
      return -1;
    }
  double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return us / count;
}

struct Direction {
  void* dst;
  const void* src;
  size_t size = 0;  // the size timed
  double best_us = std::numeric_limits<double>::infinity();
};

// The size a direction is timed at: doubling from 64 KiB until a copy takes 2 ms or reaches
// max, each size copied twice and the faster copy counted (the first touches memory not
// touched before: an emulated device's pages fault in on first use; and a copy the scheduler
// interrupted must not stop the doubling at a size where every later interruption weighs more).
// False when a copy failed.
bool pick_size(CopyEngine& eng, Direction* d, size_t max, int timeout_ms, std::string* error) {
  size_t n = std::min(kFirstSize, max);
  for (;;) {
    double us = std::numeric_limits<double>::infinity();
    for (int round = 0; round < 2; ++round) {
      double t = time_copies(eng, d->dst, d->src, n, 1, timeout_ms, error);
      if (t < 0) return false;
      us = std::min(us, t);
    }
    if (us >= kEnoughUs || n >= max) break;
    n = std::min(n * 2, max);
  }
  d->size = n;
  return true;
}

// Times the directions in kRepeats interleaved rounds of a batch each and keeps each one's best
// per-copy time: a busy machine only ever makes a copy slower, and interleaving lets a slow
// spell hit every direction alike, so that the figures compare with each other. False when a
// copy failed.
bool time_directions(CopyEngine& eng, Direction* dirs, int n, size_t max, int timeout_ms,
                     std::string* error) {
  for (int i = 0; i < n; ++i)
    if (!pick_size(eng, &dirs[i], max, timeout_ms, error)) return false;
  for (int round = 0; round < kRepeats; ++round)
    for (int i = 0; i < n; ++i) {
      double us =
          time_copies(eng, dirs[i].dst, dirs[i].src, dirs[i].size, kBatch, timeout_ms, error);
      if (us < 0) return false;
      dirs[i].best_us = std::min(dirs[i].best_us, us);
    }
  return true;
}

uint64_t rate(const Direction& d) {
  return static_cast<uint64_t>(static_cast<double>(d.size) / std::max(d.best_us, 0.001));
}
}  // namespace

CopyFigures copy_figures(DeviceRegistry& reg, const Device& d, int timeout_ms) {
  CopyFigures f;
  if (d.is_host()) return f;
  if (d.copy_bandwidth_MBps) {
    f.d2h_MBps = f.h2d_MBps = d.copy_bandwidth_MBps;
    f.basis = "declared";
    return f;
  }
  StagePool& pool = reg.stage_pool();
  CopyEngine& eng = reg.copy_engine();
  const size_t size = pool.chunk();
  void* host = pool.take();
  if (!host) {
    f.basis = "not measured: no staging buffer free";
    return f;
  }
  void* a = nullptr;
  void* b = nullptr;
  std::string error;
  if (reg.alloc(d.name, size, &a) != HMC_SUCCESS || reg.alloc(d.name, size, &b) != HMC_SUCCESS) {
    error = std::string("no device memory for it: ") + last_error();
  } else {
    Direction dirs[3] = {{host, a}, {a, host}, {b, a}};  // d2h, h2d, d2d
    if (time_directions(eng, dirs, 3, size, timeout_ms, &error)) {
      f.d2h_MBps = rate(dirs[0]);
      f.h2d_MBps = rate(dirs[1]);
      f.d2d_MBps = rate(dirs[2]);
    }
  }
  if (a) reg.free(a);
  if (b) reg.free(b);
  pool.give(host);
  if (!error.empty()) {
    HMC_LOG_W("{}: copy rates not measured ({}); default figures are used", d.name, error);
    f = CopyFigures{};
    f.basis = "not measured: " + error;
    return f;
  }
  f.basis = "measured";
  HMC_LOG_I(
      "{}: copies measured at {} MB/s device to host, {} MB/s host to device, {} MB/s "
      "device to device",
      d.name, f.d2h_MBps, f.h2d_MBps, f.d2d_MBps);
  return f;
}

}  // namespace hmc
