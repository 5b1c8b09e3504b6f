// Path choice: from two peers' capability records, the data paths both can use, ranked by a cost
// model (per-message latency plus size over bandwidth). The side that accepts the connection
// computes the choice and tells the other; the computation is a pure function of the two records,
// so either side can recompute and check it.
//
// Figures a path is ranked by, per device and side (figures_of):
//   1. what the plugin declared (hmc_net_device_props_t.bandwidth_MBps / latency_ns), when not 0;
//   2. else, between two processes on one host, what calibration measured on this host
//      (path/calibrate.h: the device talking to itself over loopback);
//   3. else the defaults below -- for peers on different hosts clamped by the loopback
//      measurement, which is a best case for the plugin's software (no wire): bandwidth at most,
//      latency at least, what loopback showed.
// The pair is bounded by the slower side (smaller bandwidth, larger latency), so both sides
// compute the same numbers.
//
// Ranking, best first:
//   1. an explicit HMC_NET_PLUGINS order (NetRecord.preference) wins outright;
//   2. the smallest worst-case slowdown over kRankSizes: for each candidate and each size, its
//      cost divided by the cheapest candidate's cost at that size; a candidate's score is the
//      largest of those ratios. A path that is best at every size scores 1. This ranks the path
//      that is never far from the best at small, medium and large messages first, instead of
//      the one that wins at a single size;
//   3. candidates scoring within kScoreTieBand of the best are a tie (loopback measurements
//      vary that much between runs): among them node-local transports (SAME_HOST) go first;
//   4. the smaller worst case, then the smaller sum of those ratios;
//   5. node-local transports, then the name, so every tie is broken the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hmc/hmc.h"
#include "path/device_modes.h"

namespace hmc::path {

// One net device as advertised in a capability record.
struct NetRecord {
  std::string plugin;
  std::string device;
  uint64_t bandwidth_MBps = 0;  // declared by the plugin; 0: unknown
  uint32_t latency_ns = 0;      // declared by the plugin; 0: unknown
  uint64_t mem_ifaces = 0;      // HMC_MEM_IFACE_BIT of the interfaces it reaches natively
  uint32_t flags = 0;
  uint32_t preference = 0;  // position in HMC_NET_PLUGINS when listed, else 0
  // Measured by calibration on the advertising host, over loopback; 0: not measured (declared
  // figures present, calibration off, failed or not run).
  uint64_t measured_bandwidth_MBps = 0;
  uint32_t measured_latency_ns = 0;
  uint64_t nic_guid = 0;  // the NIC it is a port or rail of; 0: unknown
  uint32_t nic_port = 0;
  std::string fabric = "";      // what it pairs with (net.h); empty: a device of the same name
  uint64_t rma_mem_ifaces = 0;  // interfaces it registers by pointer for put/get (net.h)
  std::string key() const { return plugin + "/" + device; }
  // Devices of one plugin pair when these are equal.
  const std::string& pairs_by() const { return fabric.empty() ? device : fabric; }
};

struct Capabilities {
  std::string host_id;
  std::string hostname;
  int32_t pid = 0;
  uint64_t context_id = 0;
  std::vector<NetRecord> net;
  // Staging (docs/protocols-wire.md): this side's HMC_STAGE_CHUNK and how many device-memory
  // devices it has. A pair where either side has devices frames its messages with the smaller
  // chunk.
  uint64_t stage_chunk = 0;
  uint32_t device_count = 0;
  // Device plugins ("cuda") with a device that can export and map memory by IPC, offered to
  // peers on this host (HMC_DEVICE_IPC=0: none).
  std::vector<std::string> ipc_plugins;
  // The first piece's size of framed messages this side offers (framed/frame_header.h).
  uint64_t stage_first = 0;
  // Optional protocol features this side offers (kFeature*).
  uint32_t features = 0;
  // Copy figures of this side's device plugins (path/device_modes.h); empty without device memory.
  std::vector<CopyRecord> copy;
};

// Capabilities::features
constexpr uint32_t kFeatureSharedBounces = 1u << 0;  // shared bounces (framed/shared_bounces.cpp)
// Version 4 device IPC headers: IPC offered with shared bounces as the receiver's alternative.
constexpr uint32_t kFeatureIpcOrShared = 1u << 1;
// Polls net plugins' carried put notifications, orders them with Notify messages and answers
// those with NotifyAck (peer/notify_order.h).
constexpr uint32_t kFeatureCarriedNotify = 1u << 2;
// Not a feature but a mark of this one connection: it carries collectives (coll/), and the
// acceptor hands it to its communicators rather than to the application's hmc_accept.
constexpr uint32_t kFeatureGroupLink = 1u << 3;

struct Choice {
  std::string plugin;
  std::string device;         // this side's
  std::string peer_device;    // the peer's: another name where the two pair by fabric
  double bandwidth_MBps = 0;  // expected, for this pair
  double latency_us = 0;
  std::string basis;   // where the figures come from: "declared", "measured", "default"...
  double score = 0;    // worst-case slowdown against the best candidate (1 = best everywhere)
  std::string reason;  // why this one, in words
  std::string key() const { return plugin + "/" + device; }
};

// Values assumed for devices that declare none and were not measured.
constexpr double kDefaultBandwidthMBps = 1000.0;
constexpr double kDefaultLatencyUs = 50.0;
// Worst-case slowdowns within this factor of the best count as a tie (see the ranking above).
constexpr double kScoreTieBand = 1.15;
// The message sizes paths are ranked at: latency-bound, medium, bandwidth-bound.
constexpr uint64_t kRankSizes[] = {8, 64u << 10, 4u << 20};

// Figures of one side's record for a pair that is (or is not) on one host.
struct Figures {
  double bandwidth_MBps = 0;
  double latency_us = 0;
  const char* basis = "";  // "declared", "measured", "default", "default, bounded by loopback"
};
Figures figures_of(const NetRecord& r, bool same_host);

// Expected time for one message of `size` bytes on the path, in microseconds.
double cost_us(const Choice& c, uint64_t size);

// All paths usable between the two sides, best first.
std::vector<Choice> rank(const Capabilities& local, const Capabilities& remote);

// The best path, or the forced one (HMC_PATH, "plugin/device"; "" for automatic).
// HMC_ERR_NO_PATH with a message listing what each side offers when none fits.
hmc_status_t choose(const Capabilities& local, const Capabilities& remote,
                    const std::string& forced, Choice* out);

}  // namespace hmc::path
