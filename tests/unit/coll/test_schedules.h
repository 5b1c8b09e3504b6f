// Schedules built by hand for the simulator's tests, independent of the library's algorithms
// (coll/algorithms.h), so that the simulator is tested against answers computed on paper.
#pragma once

#include <string>
#include <vector>

#include "coll/algorithms.h"
#include "coll/schedule.h"

namespace hmc::coll::test {

inline Action send_to(int peer, uint64_t bytes, uint64_t offset = 0) {
  Action a;
  a.kind = ActionKind::Send;
  a.peer = peer;
  a.src = {Buffer::Output, offset};
  a.bytes = bytes;
  return a;
}

inline Action recv_from(int peer, uint64_t bytes, uint64_t offset = 0,
                        ActionKind kind = ActionKind::Recv) {
  Action a;
  a.kind = kind;
  a.peer = peer;
  a.dst = {Buffer::Output, offset};
  a.bytes = bytes;
  return a;
}

inline Action local(ActionKind kind, uint64_t bytes) {
  Action a;
  a.kind = kind;
  a.src = {Buffer::Input, 0};
  a.dst = {Buffer::Output, 0};
  a.bytes = bytes;
  return a;
}

// Ring all-gather of `block` bytes per rank: a copy of the rank's own block, then n-1 steps; in
// step s rank r sends block (r-s) to r+1 and receives block (r-s-1) from r-1.
inline Schedule ring_all_gather_rank(int n, uint64_t block, int r) {
  Schedule out;
  out.algorithm = "ring";
  Step copy;
  copy.actions.push_back(local(ActionKind::Copy, block));
  out.steps.push_back(copy);
  for (int s = 0; s < n - 1; ++s) {
    Step st;
    int send_block = ((r - s) % n + n) % n, recv_block = ((r - s - 1) % n + n) % n;
    st.actions.push_back(send_to((r + 1) % n, block, send_block * block));
    st.actions.push_back(recv_from((r + n - 1) % n, block, recv_block * block));
    out.steps.push_back(st);
  }
  return out;
}

// Every rank's schedule of one builder, in rank order.
inline std::vector<Schedule> every_rank(int n, uint64_t block,
                                        Schedule (*rank_schedule)(int, uint64_t, int)) {
  std::vector<Schedule> out;
  for (int r = 0; r < n; ++r) out.push_back(rank_schedule(n, block, r));
  return out;
}

inline std::vector<Schedule> ring_all_gather(int n, uint64_t block) {
  return every_rank(n, block, ring_all_gather_rank);
}

// Pairwise all-to-all of `block` bytes per peer: in step k (1..n-1) rank r sends to r+k and
// receives from r-k.
inline Schedule pairwise_all_to_all_rank(int n, uint64_t block, int r) {
  Schedule out;
  out.algorithm = "pairwise";
  for (int k = 1; k < n; ++k) {
    Step st;
    st.actions.push_back(send_to((r + k) % n, block, ((r + k) % n) * block));
    st.actions.push_back(recv_from((r + n - k) % n, block, ((r + n - k) % n) * block));
    out.steps.push_back(st);
  }
  return out;
}

inline std::vector<Schedule> pairwise_all_to_all(int n, uint64_t block) {
  return every_rank(n, block, pairwise_all_to_all_rank);
}

// The two builders behind make_schedule's signature, for the command line's tests: ring for
// AllGather, pairwise for AllToAll (count = elements per rank or per peer, of u8).
inline Schedule test_make_schedule(const CollArgs& args, const GroupShape& shape, int rank,
                                   Algorithm) {
  size_t elem = args.dtype == HMC_DTYPE_F32 || args.dtype == HMC_DTYPE_I32    ? 4
                : args.dtype == HMC_DTYPE_F16 || args.dtype == HMC_DTYPE_BF16 ? 2
                : args.dtype == HMC_DTYPE_F64 || args.dtype == HMC_DTYPE_I64  ? 8
                                                                              : 1;
  if (args.kind == CollKind::AllGather)
    return ring_all_gather_rank(shape.size, args.count * elem, rank);
  return pairwise_all_to_all_rank(shape.size, args.count * elem, rank);
}

inline bool test_parse_algorithm(const std::string& name, Algorithm* out) {
  if (name == "auto")
    *out = Algorithm::Auto;
  else if (name == "ring")
    *out = Algorithm::Ring;
  else if (name == "pairwise")
    *out = Algorithm::Pairwise;
  else
    return false;
  return true;
}

}  // namespace hmc::coll::test
