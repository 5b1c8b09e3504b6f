// The rules of every query slot that fills a versioned props struct for a device index
// (device_info, device_props): it answers each device, refuses an index out of range, and
// writes nothing past the struct_size of a caller built against an older header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "hmc/plugin/common.h"
#include "hmc/plugin/status.hpp"
#include "report.h"
#include "rules.h"

namespace hmc::check {

// The devices a run exercises: --device's (chosen >= 0), or all of count (chosen < 0). A chosen
// index the plugin does not have is reported as failed under id, and none is exercised.
inline std::vector<int> chosen_devices(Report& r, const std::string& id, int chosen, int count) {
  if (chosen >= count) {
    r.fail(id, rule::kDeviceIndex, "--device %d: the plugin has %d device%s", chosen, count,
           count == 1 ? "" : "s");
    return {};
  }
  if (chosen >= 0) return {chosen};
  std::vector<int> all;
  for (int d = 0; d < count; ++d) all.push_back(d);
  return all;
}

// query(index, p) into *p (its header set); when the slot fails, reports call as failed under
// rule and returns false.
template <typename Props, typename Query>
bool read_props(Report& r, const char* call, const char* rule, int index, Props* p, Query query) {
  const int st = query(index, p);
  if (st == HMC_PLUGIN_SUCCESS) return true;
  r.fail(call, rule, "%s(%d) returned %s", call, index, hmc::plugin::status_name(st));
  return false;
}

// query(index, p) for the indices just outside 0..count-1, into copies of blank (its header
// set): each must be refused ("device_index"). False when one was answered.
template <typename Props, typename Query>
bool check_indices_refused(Report& r, const char* call, int count, const Props& blank,
                           Query query) {
  bool refused = true;
  for (int bad : {count, -1}) {
    Props p = blank;
    if (query(bad, &p) == HMC_PLUGIN_SUCCESS) {
      r.fail("device_index", rule::kDeviceIndex, "%s(%d) returned SUCCESS", call, bad);
      refused = false;
    }
  }
  return refused;
}

// Calls query(props) with a Props whose header says short_size bytes (the fields an older caller
// knows), inside a poisoned buffer longer than the whole struct, and reports whether the call
// wrote past short_size ("struct_size"). call names the slot. False when it did.
template <typename Props, typename Query>
bool check_short_struct(Report& r, const char* call, size_t short_size, uint32_t abi_version,
                        Query query) {
  constexpr unsigned char kPoison = 0xA5;
  alignas(Props) unsigned char raw[sizeof(Props) + 64];
  std::memset(raw, kPoison, sizeof raw);
  auto* shorter = reinterpret_cast<Props*>(raw);
  shorter->hdr = {static_cast<uint32_t>(short_size), abi_version};
  const int st = query(shorter);
  size_t first_written = short_size;
  while (first_written < sizeof raw && raw[first_written] == kPoison) ++first_written;
  if (st == HMC_PLUGIN_SUCCESS && first_written != sizeof raw) {
    r.fail("struct_size", rule::kStructSize,
           "%s with hdr.struct_size %zu wrote byte %zu of the caller's struct", call, short_size,
           first_written);
    return false;
  }
  r.ok("struct_size", "%s with a %zu-byte struct %s", call, short_size,
       st == HMC_PLUGIN_SUCCESS ? "wrote only what fits" : "was refused");
  return true;
}

}  // namespace hmc::check
