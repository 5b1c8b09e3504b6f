// A communicator: a group of ranks, what each rank knows of the others (their addresses, hosts
// and device vendors: the group's shape) and the peers this rank has connected to so far.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "coll/algorithms.h"
#include "coll/ccl.h"
#include "coll/hier.h"
#include "peer/peer.h"

namespace hmc {
class Context;
}

namespace hmc::coll {

// One rank as every other rank knows it.
struct Member {
  std::vector<uint8_t> address;  // its context's address blob (peer/address.h)
  uint64_t context_id = 0;
  int32_t pid = 0;
  std::string host_id;  // equal for ranks on one host
  std::string vendor;   // its first device plugin ("cuda"), "host" without one
};

struct Communicator {
  Context* owner = nullptr;
  uint64_t id = 0;  // the same on every rank; a split derives its children's from it
  int rank = 0;
  int size = 0;
  std::vector<Member> members;  // by rank
  GroupShape shape;
  // How long a collective's first use of a rank waits for the connection to it: the join's
  // timeout (hmc_comm_options_t.timeout_ms, else HMC_TIMEOUT_MS); a split's children inherit it.
  int connect_timeout_ms = 0;
  // More of its ranks on this host than this process may run on cores: a waiting rank gives
  // its core away (coll/collectives.h).
  bool crowded = false;
  // Guarded by the owning Collectives' mutex.
  std::vector<std::shared_ptr<Peer>> peers;  // by rank; null until first needed
  uint32_t next_seq = 0;                     // collectives posted so far
  uint32_t splits = 0;                       // splits made so far
  int running = 0;                           // collectives not yet ended
  // How this rank's latest collective runs (hmc_comm_last_backend): "hmc ring", "ccl nccl
  // (...)", "hierarchical: ..."; under Collectives' lock.
  std::string last_backend;
  // Its first word, a static string, for the metrics: "hmc", "ccl", "hierarchical" ("" before
  // the first). Written under Collectives' lock, read without it by the metrics of the post.
  std::atomic<const char*> backend_kind{""};
  std::string broken;  // why it can no longer be used; "" while it can
  // Host buffers that RecvReduce receives into, kept from one collective to the next: a fresh
  // buffer of megabytes costs page faults and zeroing on every collective (coll/executor.h).
  std::vector<std::vector<uint8_t>> spare_buffers;
  // The vendor communicator, made by the first collective that can use one (coll/ccl.h).
  std::shared_ptr<CclState> ccl = std::make_shared<CclState>();
  // A mixed communicator's vendor groups and its group's vendor communicator (coll/hier.h).
  std::shared_ptr<HierState> hier = std::make_shared<HierState>();
};

// The shape of a group from its members: hosts numbered in order of first appearance.
GroupShape shape_of(const std::vector<Member>& members);

}  // namespace hmc::coll
