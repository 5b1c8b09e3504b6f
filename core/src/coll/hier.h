// Hierarchical collectives of a mixed communicator: its ranks in vendor groups (the ranks of one
// device vendor, host ranks a group of their own), each group's part run by its vendor's
// collective library (a ccl plugin) where one serves the whole group and on hmc's own paths
// otherwise, and the groups stitched together on hmc's paths between counterpart ranks (rank i
// of one group with rank i of another: the rail-parallel pattern); a smaller group's rank i
// stands in for ranks i, i + size, ... of the largest one (the leaders where sizes differ).
//
// A collective becomes a plan: the parts this rank runs, one after the other, each either a
// call into the vendor library on the group's vendor communicator or an hmc schedule on the
// communicator itself. Parts carry a slot number, the same on every rank for the same exchange:
// the hmc tags of a part use the collective's first sequence number plus its slot, so ranks
// whose plans differ in length still match their messages.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coll/algorithms.h"
#include "coll/ccl.h"
#include "coll/schedule.h"
#include "coll/stream_gate.h"
#include "hmc/plugin/ccl.h"
#include "request/request.h"

namespace hmc {
class Transfers;
}

namespace hmc::coll {

struct Communicator;
struct Member;
class CollServices;
class Execution;

// The vendor groups of a communicator, groups in the order of their first rank.
struct VendorGroups {
  std::vector<int> group_of;              // by rank
  std::vector<int> local_of;              // by rank: its index within its group
  std::vector<std::vector<int>> members;  // by group: its ranks in rank order
  std::vector<std::string> vendor;        // by group
  int largest() const;
  int size_of(int group) const { return int(members[size_t(group)].size()); }
};
VendorGroups vendor_groups(const std::vector<Member>& members);

// Where a mixed communicator stands with its hierarchical forms.
enum class HierStage : uint8_t {
  Untried,  // no collective with data has run on it yet
  Ready,    // at least one group runs its parts in its vendor library
  Off,      // none does: its collectives run on hmc's flat algorithms
};

struct HierState {
  std::mutex setup;  // one thread sets it up
  HierStage stage = HierStage::Untried;
  VendorGroups groups;
  std::vector<uint8_t> served;        // by group: 1 where its vendor library runs its parts
  const CclPlugin* plugin = nullptr;  // this rank's group's, when served
  std::unique_ptr<CclComm> comm;      // this rank's group's vendor communicator, when served
  std::string why_off;                // Off: why, as logged
  std::string summary;                // "cuda x2 (nccl), hip x2 (rccl), host x1 (hmc)"
};

// One part of a hierarchical collective as this rank runs it.
struct HierPart {
  enum class Via : uint8_t { Library, Hmc };
  Via via = Via::Hmc;
  uint32_t slot = 0;
  // Library: the call (counts and root as the group's communicator sees them); its kind
  // AllToAllV means a grouped send_recv of `p2p`. Hmc: dtype and op of the schedule's reductions.
  CollArgs args;
  const void* input = nullptr;
  void* output = nullptr;
  std::vector<hmc_ccl_p2p_t> p2p;
  Schedule schedule;             // Hmc: its peers are ranks of the communicator
  uint64_t output_elements = 0;  // Hmc: what the schedule's average divides
};

struct HierPlan {
  uint32_t slots = 0;  // sequence numbers the collective takes, the same on every rank
  std::vector<HierPart> parts;
};

// Element bytes of scratch a collective's plan needs in this rank's buffers' memory (the
// reduce-scatter's whole reduction); 0 for the others.
uint64_t hier_scratch_elements(const CollArgs& args, int comm_size);

// This rank's plan. `library`: its group's parts go to the vendor library (the group is served
// and the library takes the dtype and operation). input/output are the caller's buffers,
// scratch hier_scratch_elements of them in the same memory (or null when none is needed).
// `forced`: HMC_COLL_ALGO, for the parts on hmc's paths.
HierPlan hier_plan(const CollArgs& args, const GroupShape& shape, const VendorGroups& groups,
                   int rank, bool library, Algorithm forced, const void* input, void* output,
                   void* scratch);

// A hierarchical collective running: its parts one after the other, each vendor-library call
// tested without blocking and each hmc schedule run by an Execution. Its request ends with the
// last part, or at the first failure: then the vendor communicator is aborted (no rank stays in
// the library), the communicator's connections are dropped (the other ranks' parts end at once)
// and the communicator is unusable from then on, as after any failed collective.
class HierRun {
 public:
  HierRun(Transfers& transfers, CollServices& services, std::shared_ptr<Communicator> comm,
          HierPlan plan, uint32_t seq, Request* req, std::string what, uint64_t bytes,
          int timeout_ms, std::vector<uint8_t> host_scratch, void* device_scratch, void* stream,
          std::unique_ptr<StreamGate> gate);
  ~HierRun();
  HierRun(const HierRun&) = delete;
  HierRun& operator=(const HierRun&) = delete;
  bool advance();  // true when something happened
  bool ended() const { return ended_; }
  Communicator& comm() { return *comm_; }
  bool ends(const Request* req) const { return req_ == req; }
  const std::string& what() const { return what_; }
  void abort(hmc_status_t status, const std::string& why);

 private:
  hmc_status_t start(const HierPart& part);
  void end(hmc_status_t status, std::string error);

  Transfers& transfers_;
  CollServices& services_;
  std::shared_ptr<Communicator> comm_;
  HierPlan plan_;
  uint32_t seq_;
  Request* req_;
  std::string what_;
  uint64_t bytes_;
  uint64_t deadline_ns_;
  std::vector<uint8_t> host_scratch_;
  void* device_scratch_;
  size_t next_ = 0;                    // the part to start next
  hmc_ccl_request_t* creq_ = nullptr;  // the library call running
  std::unique_ptr<Execution> exec_;    // the hmc part running
  Request* sub_ = nullptr;             // exec_'s request
  bool ended_ = false;
  void* stream_;                      // the application's, for the library parts; or null
  std::unique_ptr<StreamGate> gate_;  // the start waits for it
};

}  // namespace hmc::coll
