// The collectives' algorithms: each makes the schedule (coll/schedule.h) one rank runs, for a
// collective's arguments and the group's shape. The executor runs a rank's schedule; the
// simulator builds every rank's and times them together.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coll/schedule.h"
#include "hmc/hmc.h"

namespace hmc::coll {

enum class CollKind : uint8_t {
  Barrier,
  Broadcast,
  AllGather,
  AllToAll,
  AllToAllV,
  ReduceScatter,
  AllReduce,
  Reduce
};

// One rank's arguments. Counts are in elements of dtype. For AllToAllV the four vectors have
// `size` entries each (this rank's view); otherwise `count` is per rank (AllGather, AllToAll,
// ReduceScatter: the block each rank contributes or receives) or in all (Broadcast,
// AllReduce, Reduce).
struct CollArgs {
  CollKind kind = CollKind::Barrier;
  hmc_dtype_t dtype = HMC_DTYPE_U8;
  hmc_reduce_op_t op = HMC_OP_SUM;
  uint64_t count = 0;
  std::vector<uint64_t> send_counts, send_displs, recv_counts, recv_displs;
  int root = 0;
  bool in_place = false;
  // The application's stream the collective is ordered after (hmc.h, *_on_stream); null: none.
  void* stream = nullptr;
};

// Who the ranks are: the host and the device vendor of each ("host", "cuda", "hip", ...).
struct GroupShape {
  int size = 0;
  std::vector<int> host_of_rank;
  std::vector<std::string> vendor_of_rank;
};

enum class Algorithm : uint8_t {
  Auto,
  Ring,
  RecursiveDoubling,
  RecursiveHalving,
  Pairwise,
  Linear,
  Tree,
  Hierarchical,
  Direct
};
const char* algorithm_name(Algorithm a);
bool parse_algorithm(const std::string& name, Algorithm* out);  // "ring", ... (HMC_COLL_ALGO)

// The schedule `rank` runs. `algo` Auto chooses by size and shape.
Schedule make_schedule(const CollArgs& args, const GroupShape& shape, int rank, Algorithm algo);

}  // namespace hmc::coll
