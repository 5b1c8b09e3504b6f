// A collective as data: the steps each rank runs, made by the algorithms (coll/algorithms.h),
// run on real peers by the executor and timed by the simulator (coll/simulate.h). Keeping the
// schedule plain data lets one algorithm be both run and predicted, so the simulator's figures
// are for the exact sends the library makes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hmc/hmc.h"

namespace hmc::coll {

// Which buffer a byte range lives in. Input and Output are the caller's (the same memory for an
// in-place call); Scratch is the executor's temporary space of Schedule::scratch_bytes, in host
// memory or the ranks's device memory as the executor decides.
enum class Buffer : uint8_t { Input, Output, Scratch };

struct Range {
  Buffer buffer = Buffer::Input;
  uint64_t offset = 0;  // bytes
};

enum class ActionKind : uint8_t {
  Send,        // send `bytes` from src to `peer`
  Recv,        // receive `bytes` from `peer` into dst
  RecvReduce,  // receive `bytes` from `peer` and reduce them into dst (dst = dst op received)
  Copy,        // local copy of `bytes` from src to dst
  Reduce,      // local reduction: dst = dst op src, `bytes` long
};

struct Action {
  ActionKind kind = ActionKind::Send;
  int peer = -1;  // rank in the communicator (Send, Recv, RecvReduce); -1 otherwise
  Range src;      // Send, Copy, Reduce
  Range dst;      // Recv, RecvReduce, Copy, Reduce
  uint64_t bytes = 0;
};

// The actions of one step may run concurrently; a step starts when the previous one ended. A
// Send and a Recv between the same two ranks in the same step match in the order they are
// listed (the executor tags them by step and position among that pair's actions).
struct Step {
  std::vector<Action> actions;
  // The step runs inside the vendor's collective library of its ranks' memory, not in hmc's
  // executor: only the simulator's models of the libraries (coll/ccl_schedules.h) make such
  // steps, and the simulator times them on the vendor's fabric with the library's costs.
  // `ccl_call`: the first step of one library call (it pays the call's fixed cost).
  bool ccl = false;
  bool ccl_call = false;
};

struct Schedule {
  std::string algorithm;  // "ring", "recursive_doubling", "pairwise", "hierarchical", ...
  std::vector<Step> steps;
  uint64_t scratch_bytes = 0;
  bool divide_by_size = false;  // HMC_OP_AVG: divide Output by the communicator size at the end
};

// Sizes of one hmc datatype in bytes (0 for an unknown one).
size_t dtype_size(hmc_dtype_t dtype);

}  // namespace hmc::coll
