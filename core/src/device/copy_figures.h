// A device's copy rates, for choosing how its memory crosses to a peer (path/device_modes.h):
// what the plugin declared (hmc_device_props_t.copy_bandwidth_MBps, taken for both directions
// between host and device), else a short measurement through the context's copy engine:
// device to pinned host, pinned host to device and device to device (two allocations on the
// device). Each direction is timed at the size where a copy takes 2 ms or the staging chunk
// (the size staged transfers copy in), whichever is smaller, and its figure is the best of 5
// batches of 4 copies started back to back, the three directions taking turns.
#pragma once

#include <cstdint>
#include <string>

#include "device/registry.h"
#include "hmc/hmc.h"

namespace hmc {

struct CopyFigures {
  uint64_t d2h_MBps = 0;  // 0: unknown
  uint64_t h2d_MBps = 0;
  uint64_t d2d_MBps = 0;
  std::string basis;  // "declared", "measured", "" (unknown); why, when the measurement failed
};

// The declared figures, or measures them (about 3 x 50 ms on a slow device, a few in all on a fast
// one). A failed measurement is not an error: the figures stay unknown and basis says why.
CopyFigures copy_figures(DeviceRegistry& reg, const Device& d, int timeout_ms);

}  // namespace hmc
