#include "collective.h"

#include <algorithm>
#include <cstring>

namespace coll_bench {

const std::vector<CollInfo>& collectives() {
  static const std::vector<CollInfo> v = {{Coll::AllReduce, "all_reduce", true, false},
                                          {Coll::AllGather, "all_gather", false, false},
                                          {Coll::AllToAll, "all_to_all", false, false},
                                          {Coll::AllToAllv, "all_to_allv", false, false},
                                          {Coll::ReduceScatter, "reduce_scatter", true, false},
                                          {Coll::Broadcast, "broadcast", false, true},
                                          {Coll::Reduce, "reduce", true, true}};
  return v;
}

const CollInfo& info(Coll c) {
  for (const auto& x : collectives())
    if (x.coll == c) return x;
  return collectives().front();
}

const CollInfo* find_coll(const std::string& name) {
  for (const auto& x : collectives())
    if (name == x.name) return &x;
  return nullptr;
}

double bus_factor(Coll c, int n) {
  switch (c) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::Broadcast:
    case Coll::Reduce: return 1.0;
    default: return double(n - 1) / n;
  }
}

namespace {
bool in_blocks(Coll c) {
  return c != Coll::AllReduce && c != Coll::Broadcast && c != Coll::Reduce;
}
}  // namespace

Shape shape_of(Coll c, uint64_t size_bytes, size_t elem_size, int n) {
  Shape s;
  uint64_t blocks = in_blocks(c) ? uint64_t(n) : 1;
  s.count = size_bytes / elem_size / blocks;
  uint64_t total = s.count * blocks;
  s.send_elems = c == Coll::AllGather ? s.count : total;
  s.recv_elems = c == Coll::ReduceScatter ? s.count : total;
  s.bytes = total * elem_size;
  return s;
}

Run::Run(hmc_context_t ctx, hmc_comm_t comm, const Case& c, const Shape& s, std::string mem)
    : ctx_(ctx), comm_(comm), c_(c), mem_(std::move(mem)) {
  hmc_comm_rank(comm, &rank_);
  hmc_comm_size(comm, &n_);
  reshape(s);
}

void Run::reshape(const Shape& s) {
  s_ = s;
  counts_.assign(size_t(n_), size_t(s.count));
  displs_.resize(size_t(n_));
  for (int p = 0; p < n_; ++p) displs_[size_t(p)] = size_t(p) * s.count;
}

Run::~Run() {
  for (void* p : owned_) hmc_mem_free(ctx_, p);
}

void* Run::alloc(uint64_t bytes) {
  bytes = std::max<uint64_t>(bytes, 1);
  if (mem_ == "host") {
    host_.emplace_back(bytes);
    return host_.back().data();
  }
  void* p = nullptr;
  if (hmc_mem_alloc(ctx_, mem_.c_str(), bytes, &p) != HMC_SUCCESS) return nullptr;
  owned_.push_back(p);
  return p;
}

hmc_status_t Run::allocate() {
  size_t es = c_.dtype.size;
  uint64_t total = std::max(s_.send_elems, s_.recv_elems);
  if (c_.in_place) {
    recv_ = alloc(total * es);
    if (recv_ && (c_.coll == Coll::AllToAll || c_.coll == Coll::AllToAllv))
      scratch_ = alloc(total * es);
    bool ok = recv_ && (scratch_ || (c_.coll != Coll::AllToAll && c_.coll != Coll::AllToAllv));
    return ok ? HMC_SUCCESS : HMC_ERR_NO_MEMORY;
  }
  send_ = alloc(s_.send_elems * es);
  recv_ = send_ ? alloc(s_.recv_elems * es) : nullptr;
  return recv_ ? HMC_SUCCESS : HMC_ERR_NO_MEMORY;
}

hmc_status_t Run::post(hmc_request_t* req) {
  size_t es = c_.dtype.size;
  hmc_dtype_t t = c_.dtype.type;
  uint64_t n = s_.count;
  auto* recv = static_cast<uint8_t*>(recv_);
  const void* send = c_.in_place ? recv_ : send_;
  switch (c_.coll) {
    case Coll::AllReduce: return hmc_all_reduce(comm_, send, recv_, n, t, c_.op, req);
    case Coll::AllGather:
      if (c_.in_place) send = recv + uint64_t(rank_) * n * es;
      return hmc_all_gather(comm_, send, recv_, n, t, req);
    case Coll::ReduceScatter:
      return hmc_reduce_scatter(comm_, send, c_.in_place ? recv + uint64_t(rank_) * n * es : recv_,
                                n, t, c_.op, req);
    case Coll::AllToAll:
    case Coll::AllToAllv:
      if (c_.in_place) {
        failed_ = "hmc_mem_copy";
        hmc_status_t st = hmc_mem_copy(ctx_, scratch_, recv_, s_.recv_elems * es);
        if (st != HMC_SUCCESS) return st;
        send = scratch_;
      }
      if (c_.coll == Coll::AllToAll) return hmc_all_to_all(comm_, send, recv_, n, t, req);
      return hmc_all_to_allv(comm_, send, counts_.data(), displs_.data(), recv_, counts_.data(),
                             displs_.data(), t, req);
    case Coll::Broadcast:
      if (!c_.in_place && rank_ == c_.root && n) {
        failed_ = "hmc_mem_copy";
        hmc_status_t st = hmc_mem_copy(ctx_, recv_, send_, n * es);
        if (st != HMC_SUCCESS) return st;
      }
      return hmc_broadcast(comm_, recv_, n, t, c_.root, req);
    case Coll::Reduce: return hmc_reduce(comm_, send, recv_, n, t, c_.op, c_.root, req);
  }
  return HMC_ERR_INVALID_ARGUMENT;
}

hmc_status_t Run::once() {
  hmc_request_t req;
  failed_ = info(c_.coll).name;
  hmc_status_t st = post(&req);
  if (st != HMC_SUCCESS) return st;
  failed_ = "hmc_request_wait";
  return hmc_request_wait(req, c_.timeout_ms, nullptr);
}

hmc_status_t Run::fill() {
  size_t es = c_.dtype.size;
  hmc_dtype_t t = c_.dtype.type;
  uint64_t n = s_.count;
  hmc_reduce_op_t op = info(c_.coll).reduces ? c_.op : HMC_OP_SUM;
  uint64_t total = std::max(s_.send_elems, s_.recv_elems);
  std::vector<uint8_t> h(total * es + 1, 0);
  failed_ = "hmc_mem_copy";
  auto put = [&](void* dst, uint64_t elems) {
    return elems ? hmc_mem_copy(ctx_, dst, h.data(), elems * es) : HMC_SUCCESS;
  };
  if (c_.coll == Coll::Broadcast) {
    if (rank_ == c_.root)
      for (uint64_t i = 0; i < n; ++i) store(h.data(), i, input(op, c_.root, i), t);
    if (!c_.in_place) {
      hmc_status_t st = put(send_, n);
      if (st != HMC_SUCCESS) return st;
      std::fill(h.begin(), h.end(), 0);
    }
    return put(recv_, n);
  }
  if (c_.in_place) {
    // The input where the in-place form takes it; the rest of the buffer zero.
    uint64_t at = c_.coll == Coll::AllGather ? uint64_t(rank_) * n : 0;
    uint64_t elems = c_.coll == Coll::AllGather ? n : total;
    for (uint64_t i = 0; i < elems; ++i) store(h.data(), at + i, input(op, rank_, i), t);
    return put(recv_, total);
  }
  for (uint64_t i = 0; i < s_.send_elems; ++i) store(h.data(), i, input(op, rank_, i), t);
  hmc_status_t st = put(send_, s_.send_elems);
  if (st != HMC_SUCCESS) return st;
  std::fill(h.begin(), h.end(), 0);
  return put(recv_, s_.recv_elems);
}

double Run::expected(uint64_t i) const {
  uint64_t n = std::max<uint64_t>(s_.count, 1);
  switch (c_.coll) {
    case Coll::AllReduce:
    case Coll::Reduce: return reduced(c_.op, n_, i);
    case Coll::ReduceScatter: return reduced(c_.op, n_, uint64_t(rank_) * s_.count + i);
    case Coll::AllGather: return input(HMC_OP_SUM, int(i / n), i % n);
    case Coll::Broadcast: return input(HMC_OP_SUM, c_.root, i);
    case Coll::AllToAll:
    case Coll::AllToAllv: return input(HMC_OP_SUM, int(i / n), uint64_t(rank_) * n + i % n);
  }
  return 0;
}

hmc_status_t Run::count_wrong(int64_t* wrong) {
  size_t es = c_.dtype.size;
  // A reduce's result is the root's alone (the others' recv is not written), as nccl-tests checks.
  uint64_t elems = c_.coll == Coll::Reduce && rank_ != c_.root ? 0 : s_.recv_elems;
  const uint8_t* result = static_cast<const uint8_t*>(recv_);
  if (c_.in_place && c_.coll == Coll::ReduceScatter) result += uint64_t(rank_) * s_.count * es;
  std::vector<uint8_t> h(elems * es + 1);
  failed_ = "hmc_mem_copy";
  if (elems) {
    hmc_status_t st = hmc_mem_copy(ctx_, h.data(), result, elems * es);
    if (st != HMC_SUCCESS) return st;
  }
  int64_t bad = 0;
  for (uint64_t i = 0; i < elems; ++i)
    bad += !matches(load(h.data(), i, c_.dtype.type), expected(i), c_.op, c_.dtype.type);
  *wrong = bad;
  return HMC_SUCCESS;
}

hmc_status_t time_across(hmc_comm_t comm, double mine, Across how, int timeout_ms, double* out) {
  hmc_request_t req;
  double v = mine;
  hmc_status_t st;
  if (how == Across::Rank0) {
    st = hmc_broadcast(comm, &v, 1, HMC_DTYPE_F64, 0, &req);
  } else {
    hmc_reduce_op_t op = how == Across::Min   ? HMC_OP_MIN
                         : how == Across::Max ? HMC_OP_MAX
                                              : HMC_OP_AVG;
    st = hmc_all_reduce(comm, &mine, &v, 1, HMC_DTYPE_F64, op, &req);
  }
  if (st == HMC_SUCCESS) st = hmc_request_wait(req, timeout_ms, nullptr);
  if (st == HMC_SUCCESS) *out = v;
  return st;
}

hmc_status_t sum_across(hmc_comm_t comm, int64_t mine, int timeout_ms, int64_t* out) {
  hmc_request_t req;
  int64_t v = 0;
  hmc_status_t st = hmc_all_reduce(comm, &mine, &v, 1, HMC_DTYPE_I64, HMC_OP_SUM, &req);
  if (st == HMC_SUCCESS) st = hmc_request_wait(req, timeout_ms, nullptr);
  if (st == HMC_SUCCESS) *out = v;
  return st;
}

}  // namespace coll_bench
