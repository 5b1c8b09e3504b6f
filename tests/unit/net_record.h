// A test helper over core/src/path/path.h: a peer's net record that registers host memory only.
#pragma once

#include <cstdint>
#include <string>

#include "hmc/plugin/net.h"
#include "path/path.h"

namespace hmc::test {

// The record of plugin's device dev with the given HMC_NET_FLAG_* flags, host memory only.
inline path::NetRecord host_record(const std::string& plugin, const std::string& dev,
                                   uint32_t flags) {
  path::NetRecord r;
  r.plugin = plugin;
  r.device = dev;
  r.mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
  r.flags = flags;
  return r;
}

}  // namespace hmc::test
