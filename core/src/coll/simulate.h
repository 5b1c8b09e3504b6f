// Predicts how long a collective takes on a described cluster (coll/topology.h), from the
// schedules every rank would run (coll/schedule.h). A discrete-event simulation: a rank starts a
// step when its previous step ended; a transfer starts when both its Send and its Recv are
// posted, waits its path's latency, then drains its bytes at a rate shared with the other
// transfers on the same NICs and links; local copies and reductions drain at the vendor's rate.
// The model and its assumptions are in docs/collectives-simulation.md. Pure code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "coll/schedule.h"
#include "coll/topology.h"
#include "hmc/hmc.h"

namespace hmc::coll {

struct SimResult {
  double time_us = 0;               // from every rank starting together to the last one ending
  std::vector<double> rank_end_us;  // when each rank ended its last step
  uint64_t transfers = 0;           // matched Send/Recv pairs
  uint64_t local_ops = 0;           // Copy and Reduce actions
  uint64_t bytes_sent = 0;          // over all transfers
  uint64_t events = 0;              // simulation events processed (for the cost of a run)
  // The resource whose bytes take longest at its full capacity ("node3 NIC 0 send",
  // "rank 5 staged out", "rank 2 reduction", ...) and that time: a lower bound on time_us.
  // Empty when nothing was drained.
  std::string bottleneck;
  double bottleneck_us = 0;
  // Bytes through each resource of limited capacity that carried any, by the bottleneck's names
  // ("host0 NIC 3 send", "rank 2 fabric out", ...): what each link moved.
  std::map<std::string, double> resource_bytes;
};

// Times `schedules` (index = rank; one per rank of `topo`). HMC_ERR_INVALID_ARGUMENT for a
// malformed set, with what is wrong in hmc::last_error(): a Send without its Recv (or the
// reverse), sizes that differ between the two, a peer out of range or the rank itself, a
// schedule count that is not the topology's size. Matching follows schedule.h: the k-th Send
// from a to b in step s pairs with the k-th Recv or RecvReduce from a on b in step s.
hmc_status_t simulate(const std::vector<Schedule>& schedules, const Topology& topo, SimResult* out);

// nccl-tests' definitions, so the figures read like theirs: algbw is size / time, where size
// (algbw_bytes) is the buffer nccl-tests names for the collective; busbw is algbw times
// busbw_factor, the share of the data that crosses the busiest link of an ideal algorithm.
// `count` is CollArgs::count (per rank for AllGather, AllToAll and ReduceScatter; in all for
// Broadcast and AllReduce), `elem` the datatype's size.
uint64_t algbw_bytes(CollKind kind, uint64_t count, size_t elem, int n);
double busbw_factor(CollKind kind, int n);

}  // namespace hmc::coll
