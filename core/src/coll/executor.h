// Runs one rank's schedule of one collective on real peers: step by step, the step's sends and
// receives posted together on the pairs' data paths (any memory: the transfers handle device
// memory however the pair's path allows), local copies and reductions done in place. Reductions
// of device memory run on the device or staged through pinned buffers (coll/staged_reduce.h).
// Moved along by the progress engine (Collectives::progress); its request ends when the last
// step did, or at the first failure once every transfer it posted has ended.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "coll/algorithms.h"
#include "coll/comm.h"
#include "coll/schedule.h"
#include "coll/stream_gate.h"
#include "request/request.h"

namespace hmc {
class DeviceRegistry;
class Transfers;
}  // namespace hmc

namespace hmc::coll {

// What the executor needs of the context.
class CollServices {
 public:
  // The connection to another context for collectives: made (initiate) or awaited until the
  // deadline. Shared by every communicator that has the pair.
  virtual hmc_status_t group_peer(const Member& m, bool initiate, uint64_t deadline_ns,
                                  std::shared_ptr<Peer>* out) = 0;
  // Drops the connection so that the other side's transfers on it fail at once (a collective
  // failed: whatever the other ranks wait for will not come).
  virtual void abandon_peer(Peer& peer, const std::string& reason) = 0;
  // A blocking copy between any two memories.
  virtual hmc_status_t copy(void* dst, const void* src, size_t size) = 0;
  virtual bool host_memory(const void* p) = 0;
  // The context's devices, for reductions of device memory.
  virtual DeviceRegistry& device_registry() = 0;

 protected:
  ~CollServices() = default;
};

// The reserved tag bit of collectives' transfers (framed/frame_header.h has bits 59 to 61), and
// the fields below it: communicator, which collective (so that ranks calling different ones
// never match each other's messages), its sequence number, step, position of the action among
// the step's actions with that peer in that direction.
constexpr uint64_t kCollTagBit = uint64_t(1) << 62;
constexpr int kTagPosBits = 7, kTagStepBits = 16, kTagSeqBits = 20, kTagKindBits = 3,
              kTagCommBits = 13;
static_assert(kTagPosBits + kTagStepBits + kTagSeqBits + kTagKindBits + kTagCommBits == 59,
              "collective tags use the 59 bits below the reserved ones");

uint64_t coll_tag(uint64_t comm_id, CollKind kind, uint32_t seq, uint32_t step, uint32_t pos);

// The size of the pieces a step's only transfer with a peer in one direction goes in (`bytes`
// itself when it is short): 256 KiB, or bytes / 32 rounded up to 4 KiB for larger messages.
uint64_t piece_bytes(uint64_t bytes);

class Execution {
 public:
  struct Buffers {
    const void* input = nullptr;
    void* output = nullptr;
    uint64_t output_elements = 0;  // what HMC_OP_AVG divides
  };
  Execution(Transfers& transfers, CollServices& services, std::shared_ptr<Communicator> comm,
            Schedule schedule, const CollArgs& args, const Buffers& buffers, uint32_t seq,
            Request* req, std::string what);
  ~Execution();
  Execution(const Execution&) = delete;
  Execution& operator=(const Execution&) = delete;

  // Moves along as far as it can without waiting. Returns true when something happened.
  bool advance();
  bool ended() const { return ended_; }
  Communicator& comm() { return *comm_; }
  // Whether req is the request this execution ends, and what it is called in messages.
  bool ends(const Request* req) const { return req_ == req; }
  const std::string& what() const { return what_; }
  // Ends it with status (the context is going away, or the communicator was destroyed).
  void abort(hmc_status_t status, const std::string& why);
  // Holds it back until the application's stream has passed the gate (set before the first
  // advance).
  void set_gate(std::unique_ptr<StreamGate> gate) { gate_ = std::move(gate); }

 private:
  struct Posted {
    Request* req = nullptr;
    const Action* action = nullptr;
    uint64_t offset = 0;  // this piece of the action's bytes (a large message goes in pieces)
    uint64_t bytes = 0;
    std::vector<uint8_t> received;  // RecvReduce: what arrived, until it is reduced into dst
    bool arrived = false;           // its transfer ended well
    bool reduced = false;           // RecvReduce: reduced into dst already
  };
  uint8_t* at(const Range& r);
  bool host(Buffer b) const;
  hmc_status_t start_step();
  hmc_status_t local(const Action& a);
  hmc_status_t reduce(uint8_t* dst, Buffer db, const uint8_t* src, uint64_t bytes);
  hmc_status_t finish_step();
  // Reduces the step's RecvReduce messages that have arrived, in the order they were posted, as
  // far as the first one still on its way: the reductions overlap the transfers still running,
  // and every rank reduces in the same order as when all waited for the step's end.
  hmc_status_t reduce_arrived();
  // A host buffer of at least `bytes` from the communicator's spares, and its return.
  std::vector<uint8_t> take_buffer(uint64_t bytes);
  void give_back(std::vector<uint8_t> buffer);
  // Records the first failure and drops the communicator's connections; returns status.
  hmc_status_t record_failure(hmc_status_t status, const std::string& why);
  void end(hmc_status_t status, std::string error);

  Transfers& transfers_;
  CollServices& services_;
  std::shared_ptr<Communicator> comm_;
  Schedule schedule_;
  CollArgs args_;
  Buffers buffers_;
  uint32_t seq_;
  Request* req_;
  std::string what_;  // "hmc_all_reduce (rank 2 of 4)"
  std::vector<uint8_t> scratch_;
  bool input_host_ = true, output_host_ = true;
  size_t step_ = 0;
  bool step_started_ = false;
  std::vector<Posted> posted_;
  size_t reduce_next_ = 0;  // the first entry of posted_ reduce_arrived has not passed
  uint64_t received_bytes_ = 0;
  hmc_status_t failure_ = HMC_SUCCESS;  // the first failure; the end waits for posted_ to drain
  std::string failure_text_;
  bool ended_ = false;
  std::unique_ptr<StreamGate> gate_;
};

}  // namespace hmc::coll
