// Collectives: the subsystem that owns the communicators of a context and the collectives
// running on them (coll/executor.h), moved along by every progress pass. Connections come from
// the context (CollServices): one per pair of contexts, shared by their communicators, made the
// first time a collective needs the pair, in the calling thread.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coll/algorithms.h"
#include "coll/ccl.h"
#include "coll/comm.h"
#include "coll/executor.h"
#include "coll/hier.h"
#include "progress/progress.h"
#include "util/config.h"

namespace hmc {
class Context;
class Transfers;
}  // namespace hmc

namespace hmc::coll {

class Collectives final : public PassClient {
 public:
  struct Settings {
    Context* owner = nullptr;            // stamped on requests
    int timeout_ms = 30000;              // HMC_TIMEOUT_MS
    Algorithm forced = Algorithm::Auto;  // HMC_COLL_ALGO
    Member self;                         // this context as other ranks see it
    Backend backend = Backend::Auto;     // HMC_COLL_BACKEND
    std::vector<CclPlugin> ccl;          // ccl plugins serving devices here, by preference
  };
  Collectives(Transfers& transfers, CollServices& services, Settings settings)
      : transfers_(transfers), services_(services), s_(std::move(settings)) {}
  ~Collectives() override;

  // hmc_comm_create: joins at the rendezvous; blocks until every rank did or the timeout.
  hmc_status_t create(const Config& config, const hmc_comm_options_t* opts, Communicator** out);
  // Refused (HMC_ERR_INVALID_ARGUMENT) while collectives run on it.
  hmc_status_t destroy(Communicator* comm);
  // hmc_comm_split: collective over comm; *out null for a negative color.
  hmc_status_t split(Communicator* comm, int color, int key, Communicator** out);
  // Starts a collective whose arguments the API checked. `what` names it in messages.
  hmc_status_t post(Communicator* comm, const CollArgs& args, const void* input, void* output,
                    uint64_t output_elements, const char* what, Request** out);
  // How this rank's latest collective on comm runs ("" before the first; hmc_comm_last_backend).
  std::string last_backend(Communicator* comm);

  // hmc_request_cancel of a collective: it ends at once with HMC_ERR_CANCELLED. Its ranks'
  // connections are dropped first, so that no message of it can land in its buffers once this
  // returns; the communicator is then unusable, as after any failed collective, and the other
  // ranks' collectives end with HMC_ERR_PEER_LOST. HMC_ERR_NOT_SUPPORTED: it has already ended.
  hmc_status_t cancel(Request* req);

  // PassClient: moves running collectives along (from any thread; one at a time).
  bool progress() override;
  // Ends every running collective with HMC_ERR_CANCELLED (the context is going away).
  void shutdown();

 private:
  std::shared_ptr<Communicator> find(Communicator* comm);
  // post() on hmc's own algorithms.
  hmc_status_t post_hmc(Communicator* comm, const CollArgs& args, const void* input, void* output,
                        uint64_t output_elements, const char* what, Request** out);
  // Runs a collective of host buffers on hmc's algorithms and waits for it (the ccl set-up).
  hmc_status_t run_hmc(Communicator* comm, const CollArgs& args, const void* input, void* output,
                       const char* what);
  // Which ccl plugin could run this collective on this rank (coll/ccl.h).
  CclEligible ccl_eligible(const Communicator& comm, const CollArgs& args, const void* input,
                           const void* output);
  // Makes the communicator's vendor communicator if it has not been tried: collective over its
  // ranks, through hmc's own broadcast and all-reduce. Leaves the stage Ready or Off.
  void ccl_setup(Communicator* comm, const CclEligible& use, const char* what);
  // Posts on the vendor communicator.
  hmc_status_t post_ccl(const std::shared_ptr<Communicator>& comm, const CollArgs& args,
                        const void* input, void* output, uint64_t output_elements, const char* what,
                        Request** out);
  // A mixed communicator's collective in its hierarchical form: true with *st set when it took
  // it (posted, or failed), false when the collective runs on hmc's flat algorithms instead.
  bool post_hier(const std::shared_ptr<Communicator>& comm, const CollArgs& args, const void* input,
                 void* output, uint64_t output_elements, const char* what, Request** out,
                 hmc_status_t* st);
  // Finds the vendor groups and makes each served group's vendor communicator, collective over
  // the communicator's ranks through hmc's own all-gathers. Leaves the stage Ready or Off.
  void hier_setup(Communicator* comm, const void* input, const void* output, const char* what);
  // The gate of a collective given the application's stream (coll/stream_gate.h); none
  // without one.
  hmc_status_t stream_gate(const CollArgs& args, const void* input, const void* output,
                           const char* what, std::unique_ptr<StreamGate>* out);
  // Connects every peer the schedule names that is not connected yet.
  hmc_status_t connect_peers(Communicator& comm, const Schedule& schedule, const char* what);
  hmc_status_t adopt(std::shared_ptr<Communicator> comm, Communicator** out);

  Transfers& transfers_;
  CollServices& services_;
  const Settings s_;
  std::mutex mutex_;  // comms_, running_, and every Communicator's guarded fields
  std::vector<std::shared_ptr<Communicator>> comms_;
  std::vector<std::unique_ptr<Execution>> running_;
  std::vector<std::unique_ptr<CclRun>> ccl_running_;
  std::vector<std::unique_ptr<HierRun>> hier_running_;
  // running_.size() + ccl_running_.size() + hier_running_.size(), read without the lock
  std::atomic<int> active_{0};
  void count_active() {
    active_.store(int(running_.size() + ccl_running_.size() + hier_running_.size()),
                  std::memory_order_release);
  }
};

}  // namespace hmc::coll
