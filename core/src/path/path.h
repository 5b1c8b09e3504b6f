// Path choice: from two peers' capability records, the data paths both can use, ranked by a cost
// model (per-message latency plus size over the slowest stage). The side that accepts the
// connection computes the choice and tells the other; the computation is a pure function of the
// two records, so either side can recompute and check it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hmc/hmc.h"

namespace hmc::path {

// One net device as advertised in a capability record.
struct NetRecord {
  std::string plugin;
  std::string device;
  uint64_t bandwidth_MBps = 0;  // 0: unknown
  uint32_t latency_ns = 0;      // 0: unknown
  uint32_t mem_kinds = 0;
  uint32_t flags = 0;
  uint32_t preference = 0;      // position in HMC_NET_PLUGINS when listed, else 0
  std::string key() const { return plugin + "/" + device; }
};

struct Capabilities {
  std::string host_id;
  std::string hostname;
  int32_t pid = 0;
  uint64_t context_id = 0;
  std::vector<NetRecord> net;
};

struct Choice {
  std::string plugin;
  std::string device;
  double bandwidth_MBps = 0;  // expected, for this pair
  double latency_us = 0;
  std::string reason;         // why this one, in words
  std::string key() const { return plugin + "/" + device; }
};

// Values assumed for devices that declare none (until calibration measures them).
constexpr double kDefaultBandwidthMBps = 1000.0;
constexpr double kDefaultLatencyUs = 50.0;
// The message size paths are ranked at.
constexpr uint64_t kRankSize = 1u << 20;

// Expected time for one message of `size` bytes on the path, in microseconds.
double cost_us(const Choice& c, uint64_t size);

// All paths usable between the two sides, best first.
std::vector<Choice> rank(const Capabilities& local, const Capabilities& remote);

// The best path, or the forced one (HMC_PATH, "plugin/device"; "" for automatic).
// HMC_ERR_NO_PATH with a message listing what each side offers when none fits.
hmc_status_t choose(const Capabilities& local, const Capabilities& remote,
                    const std::string& forced, Choice* out);

}  // namespace hmc::path
