// This side's capability record as peers receive it: the context's declared net devices, with
// the figures calibration measured for devices that declare none (path/calibrate.h).
#pragma once

#include <string>
#include <vector>

#include "path/calibrate.h"
#include "path/path.h"

namespace hmc {

class PeerConnector;
struct Device;

// The record with calibrated figures filled in, per mode:
//   Measure     what connect and accept send: measures (once per device and process) what a
//               choice could depend on; nothing when HMC_PATH forces the path;
//   MeasureAll  measures every device that declares no figures (hmc_net_calibrate);
//   LookupOnly  only what this process or the on-disk cache already knows (hmc_net_device_info).
// outcomes (may be NULL) receives per record what became of its calibration. Thread-safe; never
// fails (a device that cannot be measured keeps its declared or default figures).
path::Capabilities local_capabilities(PeerConnector& connector, path::CalibrationMode mode,
                                      std::vector<path::CalibrationOutcome>* outcomes);

// How device d's memory would cross to another process like this one on this host: the ways the
// cost model ranks best first with the MB/s it expects for 64 MiB messages (path/device_modes.h),
// from the figures known so far ("" before the copy measurement). For hmc_device_info.
std::string same_host_ways(PeerConnector& connector, const Device& d);

}  // namespace hmc
