#include "path/device_modes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace hmc::path {

const char* mode_name(DeviceMode m) {
  switch (m) {
    case DeviceMode::Ipc: return "device IPC";
    case DeviceMode::Shared: return "shared bounces";
    case DeviceMode::Transport: return "transport";
  }
  return "?";
}

namespace {
double figure(uint64_t v) {
  return v ? static_cast<double>(v) : kDefaultCopyMBps;
}

// The receiver's slowest host-to-device figure; infinite for a receiver without device memory
// (its buffer is host memory: nothing is copied in).
double remote_h2d(const std::vector<CopyRecord>& remote) {
  double v = std::numeric_limits<double>::infinity();
  for (const auto& r : remote) v = std::min(v, figure(r.h2d_MBps));
  return v;
}
}  // namespace

std::vector<ModeCost> device_mode_costs(const ModeInputs& in) {
  std::vector<ModeCost> out;
  const double chunk = static_cast<double>(in.chunk);
  const double d2h = figure(in.local.d2h_MBps);
  const double h2d = remote_h2d(in.remote);
  // Pipeline fill and drain of the two-copy ways: one piece out before anything moves, one in
  // after the last piece arrived.
  const double fill = chunk / d2h + (std::isinf(h2d) ? 0.0 : chunk / h2d);
  if (in.ipc) {
    double d2d = figure(in.local.d2d_MBps);
    for (const auto& r : in.remote)
      if (r.plugin == in.local.plugin) d2d = std::min(d2d, figure(r.d2d_MBps));
    out.push_back({DeviceMode::Ipc, d2d, 2 * in.net_latency_us});
  }
  if (in.shared)
    out.push_back({DeviceMode::Shared, std::min(d2h, h2d), 2 * in.net_latency_us + fill});
  if (in.net_bandwidth_MBps > 0)  // 0: no net path to rank (hmc-info without one)
    out.push_back({DeviceMode::Transport, std::min({d2h, h2d, in.net_bandwidth_MBps}),
                   in.net_latency_us + fill});
  return out;
}

int rank_device_modes(const std::vector<ModeCost>& costs, uint64_t size, DeviceMode out[3]) {
  // At most three ways: a fixed-size sort, no allocation (this runs per message).
  const ModeCost* order[3];
  int n = 0;
  for (const auto& c : costs)
    if (n < 3) order[n++] = &c;
  // Cheaper first; within the tie band, fewer copies first (the enum's order).
  auto before = [size](const ModeCost* a, const ModeCost* b) {
    double ca = a->cost_us(size), cb = b->cost_us(size);
    if (ca * kModeTieBand < cb) return true;
    if (cb * kModeTieBand < ca) return false;
    return a->mode < b->mode;
  };
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && before(order[j], order[j - 1]); --j) std::swap(order[j], order[j - 1]);
  for (int i = 0; i < n; ++i) out[i] = order[i]->mode;
  return n;
}

std::string describe_modes(const std::vector<ModeCost>& costs, uint64_t size) {
  DeviceMode order[3];
  int n = rank_device_modes(costs, size, order);
  std::string s;
  for (int i = 0; i < n; ++i)
    for (const auto& c : costs)
      if (c.mode == order[i])
        s += fmt::format("{}{} {:.0f} MB/s", s.empty() ? "" : ", ", mode_name(c.mode),
                         static_cast<double>(size) / c.cost_us(size));
  return s;
}

}  // namespace hmc::path
