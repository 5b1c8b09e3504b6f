// The checks of a loaded net plugin: its devices and their properties, a second context, and a
// loopback connection from a second context to the first over one device (tagged messages,
// truncation, zero-byte messages, cancel, one-sided put/get with its bounds, peer loss).
#pragma once

#include <chrono>
#include <string>

#include "hmc/plugin/net.h"
#include "report.h"

namespace hmc::check {

struct NetTarget {
  const hmc_net_plugin_v2_t* table;  // the loader's zero-extended copy (a NULL slot: not offered)
  hmc_net_ctx_t* ctx;                // the context the loader created; finalized by the loader
  const hmc_host_services_t* host;   // the services it was created with
};

struct NetOptions {
  int device = 0;  // the device the loopback runs over; -1: every device
  std::chrono::milliseconds timeout{10000};
};

void check_net(const NetTarget& target, const NetOptions& options, Report& report);

}  // namespace hmc::check
