// A described cluster for the collectives' simulator (coll/simulate.h): hosts, the ranks on each
// with their vendors, the paths between ranks of one host, the NICs between hosts, and the rates
// of local copies and reductions. Read from a JSON file or generated from a one-line spec for the
// large regular clusters. The format is documented in docs/collectives-simulation.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coll/algorithms.h"
#include "hmc/hmc.h"

namespace hmc::coll {

// A link: one-way latency and bandwidth in Gb/s (10^9 bits per second). 0 Gb/s means unlimited.
struct Link {
  double gbps = 0;
  double latency_us = 0;
};

// How two ranks of one host reach each other.
enum class IntraPath : uint8_t {
  DeviceIpc,     // same vendor, device to device (NVLink, xGMI, or PCIe peer to peer)
  SharedMemory,  // host memory on both sides
  Staged,        // through pinned host memory (across vendors, or device and host)
};
constexpr int kIntraPathCount = 3;
const char* intra_path_name(IntraPath p);

// A vendor's collective library (NCCL, RCCL, CNCL, MCCL) as the simulator models it: its ranks
// on one host reach each other over the vendor's fabric (NVLink, Infinity Fabric, MLU-Link,
// MTLink) rather than over hmc's paths, and across hosts over the same NICs as hmc's transfers.
// Its algorithms are schedules (coll/ccl_schedules.h) whose steps the library runs.
struct CclSpec {
  std::string library;   // "nccl", "rccl", ...; empty: the vendor has none
  Link fabric;           // one rank's fabric port, per direction (all its links together)
  double pair_gbps = 0;  // one transfer between two ranks of a host (one link); 0: fabric.gbps
  double call_us = 0;    // fixed cost of one library call (launch and set-up)
  double step_us = 0;    // cost of each step of the library's algorithm (its synchronisation)
  int channels = 1;      // rings the library runs in parallel, each with its share of the bytes
};

struct VendorSpec {
  std::string name;  // "host", "cuda", "hip", ...
  bool ipc = true;   // ranks of this vendor on one host use DeviceIpc between them
  // The NICs read and write this vendor's memory (GPUDirect RDMA); otherwise a transfer across
  // hosts is staged through host memory at copy_gbps on each side.
  bool gpudirect = true;
  double copy_gbps = 0;      // local copies (Copy actions, staging for the network)
  double reduce_gbps = 0;    // local reductions (Reduce, and RecvReduce as the bytes arrive)
  double op_latency_us = 0;  // fixed cost of one local copy or reduction (a kernel launch)
  CclSpec ccl;               // its collective library; built in for cuda, hip, mlu and musa
};

// A vendor pair's own intra-host path, overriding the default choice and the path's link.
struct PairPath {
  int vendor_a = -1, vendor_b = -1;  // indices into Topology::vendors, unordered
  IntraPath path = IntraPath::Staged;
  Link link;
};

struct HostSpec {
  std::string name;
  std::vector<int> ranks;  // global ranks, in order
  std::vector<Link> nics;  // a rank uses nic (local index * nics / ranks), rail-aligned
  double memory_gbps = 0;  // shared by SharedMemory and Staged transfers; 0: unlimited
  // CPU cores its ranks share; 0: a core per rank. Fewer cores than ranks slow the executor's
  // steps (ranks wait for a core) and share the CPU's copying among the host's transfers.
  int cores = 0;
  // Bytes a core moves through the CPU-driven work (shared-memory transfers, host-memory ranks'
  // copies and reductions), all of which share cores x cpu_gbps; 0: unlimited.
  double cpu_gbps = 0;
  // How much slower its ranks' software runs than on a core of their own: ranks / cores.
  double oversubscription() const {
    return cores > 0 && int(ranks.size()) > cores ? double(ranks.size()) / cores : 1.0;
  }
};

// The executor's own cost, which no link carries: every step a rank runs costs it step_us
// (making the step, posting, noticing the end) plus transfer_us per transfer it posts in the
// step, before the step's transfers and local ops start.
struct SoftwareCost {
  double step_us = 0;
  double transfer_us = 0;
};

// Shared-memory messages larger than `bytes` cross by one copy (cross-memory attach: the receiver
// reads the sender's buffer, HMC_HOSTSTAGE_SHM_EAGER_LIMIT) instead of two through the ring, at
// this link's rate (0: the shared_memory path's) and for half the CPU and memory traffic per byte.
struct SingleCopy {
  uint64_t bytes = 16 * 1024;  // 0: every message takes the two-copy ring
  Link link;                   // gbps 0: the path's; latency_us < 0: the path's
};

struct Topology {
  std::vector<HostSpec> hosts;
  SingleCopy shm_single_copy{16 * 1024, {0, -1}};
  std::vector<VendorSpec> vendors;
  Link paths[kIntraPathCount];  // the default link of each intra-host path, per rank and direction
  std::vector<PairPath> pairs;
  SoftwareCost executor;
  // Per rank (index = global rank).
  std::vector<int> host_of_rank;
  std::vector<int> vendor_of_rank;
  std::vector<int> nic_of_rank;  // index into its host's nics

  int size() const { return static_cast<int>(host_of_rank.size()); }
  // The group's shape as the algorithms see it.
  GroupShape shape() const;
  // Which path ranks a and b (on one host) take, and its link.
  IntraPath intra_path(int a, int b, Link* link) const;
  // One line: "64 hosts, 512 ranks (cuda 256, hip 256), 1 NIC of 400 Gb/s per host".
  std::string summary() const;
};

// Parses a topology file's text. `origin` (the file name) prefixes errors, which name the line
// and the field: "cluster.json:14: hosts[2].nics[0].gbps: wants a number >= 0, got a string".
// HMC_ERR_INVALID_ARGUMENT on a malformed file (message in hmc::last_error()).
hmc_status_t parse_topology(const std::string& text, const std::string& origin, Topology* out);
hmc_status_t load_topology(const std::string& path, Topology* out);

// Generates a regular cluster from "hosts=64,gpus_per_host=8,vendors=cuda:4+hip:4,nic_gbps=400"
// (the keys and their defaults are in docs/collectives-simulation.md).
hmc_status_t generate_topology(const std::string& spec, Topology* out);

}  // namespace hmc::coll
