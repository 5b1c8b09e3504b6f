// The collectives as the benchmarks see them: names, buffer shapes for a size (nccl-tests'
// conventions), bus-bandwidth factors, and one rank's buffers for one size in either form
// (out-of-place or in-place), which it can fill for a check, run, and count wrong elements of.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "elements.h"
#include "hmc/hmc.h"

namespace coll_bench {

enum class Coll { AllReduce, AllGather, AllToAll, AllToAllv, ReduceScatter, Broadcast, Reduce };

struct CollInfo {
  Coll coll;
  const char* name;  // hmc-coll-perf's name: all_reduce, ...
  bool reduces;      // takes a reduction
  bool rooted;       // takes a root
};
const std::vector<CollInfo>& collectives();
const CollInfo& info(Coll c);
const CollInfo* find_coll(const std::string& name);

// busbw = algbw x this, on n ranks: 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
// reduce-scatter and all-to-all(v), 1 for broadcast and reduce (nccl-tests' definitions).
double bus_factor(Coll c, int n);

// One size of a collective on n ranks. `bytes` (nccl-tests' size) is a rank's largest buffer,
// rounded down to whole blocks: the vector of an all-reduce, reduce or broadcast, the gathered
// output of an all-gather, the input of a reduce-scatter, the send buffer of an all-to-all.
struct Shape {
  uint64_t count = 0;       // the collective's count argument (per block where there are n)
  uint64_t send_elems = 0;  // a rank's send buffer, out of place
  uint64_t recv_elems = 0;  // a rank's receive buffer
  uint64_t bytes = 0;
};
Shape shape_of(Coll c, uint64_t size_bytes, size_t elem_size, int n);

// One collective's settings.
struct Case {
  Coll coll = Coll::AllReduce;
  Dtype dtype{};
  hmc_reduce_op_t op = HMC_OP_SUM;
  int root = 0;
  bool in_place = false;
  int timeout_ms = -1;  // of each wait; -1: HMC_TIMEOUT_MS
};

// A rank's memory for one size of one case. hmc has no in-place all-to-all(v) and no
// out-of-place broadcast; those forms are what an application does instead: a local copy
// (hmc_mem_copy, counted in the time) and the form hmc has.
class Run {
 public:
  Run(hmc_context_t ctx, hmc_comm_t comm, const Case& c, const Shape& s, std::string mem);
  ~Run();
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  // Allocates the buffers in the rank's memory ("host", "cuda:0", ...), for this shape and every
  // smaller one.
  hmc_status_t allocate();
  // Goes on with a shape no larger than the allocated one, in the same buffers.
  void reshape(const Shape& s);
  // One collective, posted and waited for.
  hmc_status_t once();
  // Writes every rank's known input (and zeroes the output) for a check.
  hmc_status_t fill();
  // Reads the result back and counts the elements that differ from the reference (this rank's).
  hmc_status_t count_wrong(int64_t* wrong);
  const char* failed_call() const { return failed_; }

 private:
  void* alloc(uint64_t bytes);
  hmc_status_t post(hmc_request_t* req);
  double expected(uint64_t i) const;

  hmc_context_t ctx_;
  hmc_comm_t comm_;
  Case c_;
  Shape s_;
  std::string mem_;
  int rank_ = 0, n_ = 1;
  void* send_ = nullptr;  // out of place only
  void* recv_ = nullptr;
  void* scratch_ = nullptr;  // in-place all-to-all(v): a copy of the input
  std::vector<void*> owned_;
  std::vector<std::vector<uint8_t>> host_;  // host buffers (moving a vector keeps its data)
  std::vector<size_t> counts_, displs_;
  const char* failed_ = "";
};

// The time of one rank's collective across the group: the slowest (Max), the fastest (Min), the
// mean (Avg) or rank 0's (Rank0).
enum class Across { Rank0, Avg, Min, Max };
hmc_status_t time_across(hmc_comm_t comm, double mine, Across how, int timeout_ms, double* out);
// The sum over every rank of a count.
hmc_status_t sum_across(hmc_comm_t comm, int64_t mine, int timeout_ms, int64_t* out);

}  // namespace coll_bench
