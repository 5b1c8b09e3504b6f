// The vendors' collective libraries (NCCL, RCCL, CNCL, MCCL) as schedules, for the simulator
// (coll/simulate.h): the library's own algorithms within a group of one vendor's ranks, and the
// hierarchical all-reduce that stitches vendor groups together (reduce-scatter within each group
// in its library, all-reduce of the shards across groups between counterpart ranks on hmc's
// paths, all-gather within). The executor never runs these: a collective in a library goes
// through a ccl plugin (coll/ccl.h) as one call. Steps the library runs are marked Step::ccl.
// Pure code; the model is in docs/collectives-simulation.md.
#pragma once

#include <string>
#include <vector>

#include "coll/algorithms.h"
#include "coll/schedule.h"
#include "coll/topology.h"
#include "hmc/hmc.h"

namespace hmc::coll {

// The library's algorithm within a group. Ring: NCCL's ring, one ring per channel, each channel
// with its share of every block, the rings entering each host at a different rank (so that the
// channels spread over the host's NICs). Tree: a binomial tree within each host, then across the
// hosts' first ranks, the whole buffer per step (all-reduce only). Auto: the caller simulates
// both and keeps the faster, as NCCL's tuner chooses by its own model. Direct: every rank
// publishes its contribution, reads every other's and reduces them locally in rank order, one
// after another (all-reduce only): the algorithm of the emulated NCCL in tests/fakes/nccl, which
// the model is checked against on a host without GPUs (bench/coll_sim_ccl_validate.sh).
enum class CclAlgo : uint8_t { Auto, Ring, Tree, Direct };
const char* ccl_algo_name(CclAlgo a);
// "auto" (or ""), "ring", "tree", "direct"
bool parse_ccl_algo(const std::string& name, CclAlgo* out);

// The vendor groups of a topology: the ranks of each vendor, groups in order of their first
// rank; with `per_host`, one group per vendor per host (the library within a host only, hmc's
// paths across hosts as well as across vendors).
struct TopologyGroups {
  std::vector<std::vector<int>> groups;  // global ranks, in rank order
  std::vector<int> group_of_rank;
  std::vector<int> index_in_group;
};
TopologyGroups topology_groups(const Topology& topo, bool per_host = false);

// The schedule `rank` runs when every collective goes to the vendor libraries: the library's own
// algorithm `algo` (Auto taken as Ring) for one vendor group (all-reduce, reduce-scatter,
// all-gather); the hierarchical form for several (all-reduce; groups of equal size).
// HMC_ERR_NOT_SUPPORTED with the reason in hmc::last_error() for what the model has no form for.
hmc_status_t make_ccl_schedule(const CollArgs& args, const Topology& topo, const TopologyGroups& vg,
                               int rank, CclAlgo algo, Schedule* out);

// The hierarchical all-reduce over the groups of `vg` (any number of them, one included: then
// the library's ring all-reduce in two calls). Groups of equal size, every vendor with a library.
hmc_status_t make_ccl_hierarchical_all_reduce(const CollArgs& args, const Topology& topo,
                                              const TopologyGroups& vg, int rank, Schedule* out);

}  // namespace hmc::coll
