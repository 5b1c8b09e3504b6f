#include "ccl_check.h"

#include <cstring>
#include <string>

#include "hmc/plugin/status.hpp"
#include "rules.h"

namespace hmc::check {
namespace {

using hmc::plugin::status_name;

// A communicator of one rank from a fresh id: made, healthy, destroyed.
void check_single_rank(const CclTarget& t, const unsigned char* id, size_t len, Report& r) {
  r.step("ccl: comm_create of one rank");
  hmc_ccl_comm_t* comm = nullptr;
  hmc_plugin_status_t st = t.table->comm_create(t.ctx, id, len, 1, 0, 0, &comm);
  if (st != HMC_PLUGIN_SUCCESS || comm == nullptr) {
    r.fail("communicator", rule::kCclComm, "comm_create(1 rank, rank 0, device 0) answered %s%s",
           status_name(st), comm == nullptr ? " and no communicator" : "");
    return;
  }
  st = t.table->comm_async_error(comm);
  if (st != HMC_PLUGIN_SUCCESS)
    r.fail("communicator", rule::kCclComm,
           "comm_async_error of a fresh communicator answered %s (%s)", status_name(st),
           t.table->comm_error_text ? t.table->comm_error_text(comm) : "no text");
  r.step("ccl: comm_destroy");
  st = t.table->comm_destroy(comm);
  if (st != HMC_PLUGIN_SUCCESS)
    r.fail("communicator", rule::kCclComm, "comm_destroy answered %s", status_name(st));
  else
    r.ok("communicator", "one rank on device 0: made, healthy, destroyed");
}

// ccl.h: INVALID_ARGUMENT for an id of the wrong length, a rank outside 0..nranks-1 or a
// device the plugin does not serve. Each is refused before anything waits for other ranks.
void check_refusals(const CclTarget& t, const unsigned char* id, size_t len, int devices,
                    Report& r) {
  struct Case {
    const char* what;
    size_t len;
    int nranks, rank, device;
  } cases[] = {
      {"an id one byte short", len - 1, 1, 0, 0},
      {"rank 1 of 1", len, 1, 1, 0},
      {"rank -1", len, 1, -1, 0},
      {"a device past the last", len, 1, 0, devices},
  };
  bool all = true;
  for (const Case& c : cases) {
    r.step("ccl: comm_create refusals");
    hmc_ccl_comm_t* comm = nullptr;
    hmc_plugin_status_t st =
        t.table->comm_create(t.ctx, id, c.len, c.nranks, c.rank, c.device, &comm);
    if (st == HMC_PLUGIN_SUCCESS && comm) t.table->comm_destroy(comm);
    if (st != HMC_PLUGIN_ERR_INVALID_ARGUMENT) {
      r.fail("refusals", rule::kCclRefusal, "comm_create with %s answered %s", c.what,
             status_name(st));
      all = false;
    }
  }
  if (all)
    r.ok("refusals",
         "comm_create refuses a short id, ranks outside the communicator and a "
         "device past the last (INVALID_ARGUMENT)");
}

}  // namespace

void check_ccl(const CclTarget& t, bool require_devices, Report& r) {
  r.step("ccl: device_count");
  int devices = -1;
  hmc_plugin_status_t st = t.table->device_count(t.ctx, &devices);
  if (st != HMC_PLUGIN_SUCCESS || devices < 0) {
    r.fail("devices", rule::kCclLibrary, "device_count answered %s, count %d", status_name(st),
           devices);
    return;
  }
  const char* version = t.table->library_version ? t.table->library_version(t.ctx) : nullptr;
  if (devices == 0) {
    const char* why = t.table->unavailable_reason ? t.table->unavailable_reason(t.ctx) : nullptr;
    if (why == nullptr || *why == '\0') {
      r.fail("devices", rule::kNoDevice, "0 devices and no unavailable_reason");
    } else if (require_devices) {
      r.fail("devices", rule::kNoDevice, "0 devices: %s (--require-devices)", why);
    } else {
      r.skip("devices", "0 devices, so nothing is exercised: %s", why);
    }
    return;
  }
  if (version == nullptr || *version == '\0') {
    r.fail("library", rule::kCclLibrary, "%d devices served, but library_version is empty",
           devices);
    return;
  }
  r.ok("devices", "%s, %d device%s of memory interface %u served", version, devices,
       devices == 1 ? "" : "s", t.table->mem_iface);

  r.step("ccl: unique_id");
  unsigned char id[HMC_CCL_UNIQUE_ID_MAX], again[HMC_CCL_UNIQUE_ID_MAX];
  size_t len = sizeof id, len2 = sizeof again;
  st = t.table->unique_id(t.ctx, id, &len);
  hmc_plugin_status_t st2 = t.table->unique_id(t.ctx, again, &len2);
  if (st != HMC_PLUGIN_SUCCESS || st2 != HMC_PLUGIN_SUCCESS || len == 0 ||
      len > HMC_CCL_UNIQUE_ID_MAX || len2 != len) {
    r.fail("unique id", rule::kCclId, "unique_id answered %s then %s, %zu then %zu bytes",
           status_name(st), status_name(st2), len, len2);
    return;
  }
  if (std::memcmp(id, again, len) == 0)
    r.fail("unique id", rule::kCclId, "two calls of unique_id gave the same %zu-byte id", len);
  else
    r.ok("unique id", "%zu bytes, a fresh one per call", len);

  check_refusals(t, id, len, devices, r);
  check_single_rank(t, id, len, r);
  r.skip("collectives",
         "they need every rank's device memory: the core's CclBackend tests run "
         "them through the plugin");
}

}  // namespace hmc::check
