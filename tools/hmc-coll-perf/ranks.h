// Where a benchmark's ranks come from: N local processes it forks itself (--np N, meeting at a
// loopback rendezvous it picks), or one rank of a group that a launcher started (mpirun, srun,
// torchrun, or HMC_RANK/HMC_WORLD_SIZE/HMC_RENDEZVOUS; hmc_comm_create reads them).
#pragma once

#include <functional>

#include "hmc/hmc.h"

namespace coll_bench {

// Runs rank_main as every rank: np > 0 forks np local ranks and waits for them all; np == 0
// runs it here, as the launcher's rank. Returns 0 when every rank returned 0, else 1.
int run_ranks(const char* tool, int np, const std::function<int()>& rank_main);

// A rank's context and communicator, closed in order when it goes.
class Session {
 public:
  Session() = default;
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  // Creates both; on failure prints why, prefixed by tool, and returns false.
  bool open(const char* tool);
  hmc_context_t ctx = nullptr;
  hmc_comm_t comm = nullptr;
  int rank = 0, size = 1;
};

}  // namespace coll_bench
