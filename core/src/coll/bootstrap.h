// Joining a communicator: where rank, size and rendezvous come from (the options, HMC_RANK,
// HMC_WORLD_SIZE, HMC_RENDEZVOUS, else the launchers' own variables), and the exchange through
// the rendezvous store that tells every rank the others' addresses, hosts and vendors.
#pragma once

#include <string>
#include <vector>

#include "coll/comm.h"
#include "hmc/hmc.h"
#include "util/config.h"

namespace hmc::coll {

struct JoinSettings {
  int rank = -1;
  int size = 0;
  std::string rendezvous;  // "tcp://host:port"
  int timeout_ms = 0;
  std::string rank_from, size_from;  // which variable or option gave them, for messages
};

// Resolves the settings: opts first, then HMC_*, then torchrun, Slurm, Open MPI. Errors:
// HMC_ERR_INVALID_ARGUMENT naming what is missing or out of range.
hmc_status_t resolve_join(const Config& config, const hmc_comm_options_t* opts,
                          int default_timeout_ms, JoinSettings* out);

// Meets the other ranks at the rendezvous: rank 0 hosts the store. Fills every member (self
// given as `self`) and the communicator's id. Errors: see hmc_comm_create.
hmc_status_t rendezvous(const JoinSettings& join, const Member& self, std::vector<Member>* members,
                        uint64_t* comm_id);

}  // namespace hmc::coll
