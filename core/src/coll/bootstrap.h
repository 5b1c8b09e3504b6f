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
  std::string rendezvous;  // "tcp://host:port" or "redis://host:port/prefix"
  int timeout_ms = 0;
  std::string rank_from, size_from;  // which variable or option gave them, for messages
};

// Resolves the settings: opts first, then HMC_*, then torchrun, Slurm, Open MPI. Errors:
// HMC_ERR_INVALID_ARGUMENT naming what is missing or out of range.
hmc_status_t resolve_join(const Config& config, const hmc_comm_options_t* opts,
                          int default_timeout_ms, JoinSettings* out);

// A member's record as the rendezvous stores keep it, with the size its rank joined with and
// the communicator's id (rank 0's is the one every rank takes).
std::string encode_member(const Member& m, int size, uint64_t comm_id);
bool decode_member(const std::string& s, Member* m, int* size, uint64_t* comm_id);
// "1, 2, 5" (the first 8, then how many more), for messages naming ranks.
std::string rank_list(const std::vector<int>& ranks);

// The rendezvous address for messages and the log: a password in it (redis://:secret@host)
// shown as ***.
std::string redact_rendezvous(const std::string& url);

// Meets the other ranks at the rendezvous: rank 0 hosts the store (tcp://), or a Redis server
// keeps it (redis://, coll/redis_rendezvous.h). Fills every member (self
// given as `self`) and the communicator's id. Errors: see hmc_comm_create.
hmc_status_t rendezvous(const JoinSettings& join, const Member& self, std::vector<Member>* members,
                        uint64_t* comm_id);

}  // namespace hmc::coll
