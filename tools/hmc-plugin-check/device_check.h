// The checks of a loaded device plugin: its devices, a second context, and on one device memory
// allocation and pointer queries, copies host->device, device->device and device->host completed
// through events, pinned and registered host memory, dma-buf export, and IPC with another
// process (the checker itself, run as the peer).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "hmc/plugin/device.h"
#include "report.h"

namespace hmc::check {

struct DeviceTarget {
  const hmc_device_plugin_v1_t* table;  // the loader's zero-extended copy
  hmc_device_ctx_t* ctx;                // the loader's context; finalized by the loader
  const hmc_host_services_t* host;
  std::string path;  // the plugin file, which the IPC peer loads
};

struct DeviceOptions {
  int device = 0;  // the device exercised; -1: every device
  std::chrono::milliseconds timeout{10000};
  bool require_devices = false;  // 0 devices fails instead of skipping
  std::string self;              // this program, run as the IPC peer
};

void check_device(const DeviceTarget& target, const DeviceOptions& options, Report& report);

// The IPC peer: hmc-plugin-check --ipc-peer PLUGIN DEVICE HANDLE_HEX SIZE SEED TIMEOUT_MS. Loads
// the plugin file, opens the handle on the device, checks that the memory holds the pattern of
// SEED, writes the pattern of SEED + 1, and closes it, each wait bounded by TIMEOUT_MS (the
// checker's --timeout). Exit status 0 when all of that worked; messages on
// stderr otherwise.
int ipc_peer_main(const std::vector<std::string>& args);

}  // namespace hmc::check
