// The Redis rendezvous of communicators (redis://[[user]:password@]host[:port][/prefix]): the
// ranks meet through a Redis server that outlives them, for pools whose members come and go.
// Each communicator made under a prefix is a new generation of keys there, opened by its rank 0,
// so that a group made after members left and others joined never reads the records of an
// earlier one; every key expires, and rank 0 deletes a generation's once every rank has read
// them. The key layout and the verdicts are in docs/collectives.md.
#pragma once

#include <cstdint>
#include <vector>

#include "coll/bootstrap.h"
#include "coll/comm.h"
#include "hmc/hmc.h"

namespace hmc::coll {

// As rendezvous() for a redis:// address. HMC_ERR_NOT_SUPPORTED when hmc was built without
// hiredis.
hmc_status_t redis_rendezvous(const JoinSettings& join, const Member& self,
                              std::vector<Member>* members, uint64_t* comm_id);

}  // namespace hmc::coll
