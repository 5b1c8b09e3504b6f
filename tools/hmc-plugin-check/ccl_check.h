// The checks of a loaded ccl plugin (plugin-contract.md section 7): its devices and library, the
// unique id, and a communicator of one rank made, queried and destroyed, with the refusals
// ccl.h promises for a bad rank, id or device. Collectives need every rank's device memory and
// are left to the core's tests (tests/coll, CclBackend.*), which run them through the plugin.
#pragma once

#include "hmc/plugin/ccl.h"
#include "report.h"

namespace hmc::check {

struct CclTarget {
  const hmc_ccl_plugin_v1_t* table;  // the loader's zero-extended copy
  hmc_ccl_ctx_t* ctx;                // the loader's context; finalized by the loader
};

void check_ccl(const CclTarget& target, bool require_devices, Report& report);

}  // namespace hmc::check
