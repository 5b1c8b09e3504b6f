// The roles of collective tests: what one rank does with a communicator and checks, shared by
// the tests that fork ranks on this host (coll_test.cpp) and the ranks that run on other
// "hosts" (netns_rank.cpp). Values are exact where the datatype allows; every check names the
// first element that is wrong.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hmc/hmc.h"

namespace coll_roles {

// Memory of one rank: device memory through hmc, or host memory.
class Buf {
 public:
  Buf(hmc_context_t ctx, const std::string& mem, size_t bytes) : ctx_(ctx), bytes_(bytes) {
    if (mem == "host") {
      host_.resize(bytes ? bytes : 1);
      p_ = host_.data();
    } else if (hmc_mem_alloc(ctx, mem.c_str(), bytes ? bytes : 1, &p_) != HMC_SUCCESS) {
      p_ = nullptr;
    } else {
      device_ = true;
    }
  }
  ~Buf() {
    if (device_) hmc_mem_free(ctx_, p_);
  }
  void* get() const { return p_; }
  bool put(const void* src) {
    return !bytes_ || hmc_mem_copy(ctx_, p_, src, bytes_) == HMC_SUCCESS;
  }
  bool take(void* dst) { return !bytes_ || hmc_mem_copy(ctx_, dst, p_, bytes_) == HMC_SUCCESS; }

 private:
  hmc_context_t ctx_;
  size_t bytes_;
  void* p_ = nullptr;
  bool device_ = false;
  std::vector<uint8_t> host_;
};

struct Rank {
  hmc_context_t ctx;
  hmc_comm_t comm;
  int rank, size;
  std::string mem;
};
// A rank's part of a test: "" when every check held, else what failed.
using Role = std::function<std::string(Rank&)>;

inline std::string describe(hmc_status_t st) {
  return std::string(hmc_status_string(st)) + ": " + hmc_last_error();
}

// req is read only after the call that fills it (a parameter by value could be read before).
inline std::string wait(hmc_status_t st, hmc_request_t* req, const char* what) {
  if (st != HMC_SUCCESS) return std::string(what) + ": " + describe(st);
  st = hmc_request_wait(*req, 20000, nullptr);
  if (st != HMC_SUCCESS) return std::string(what) + " (wait): " + describe(st);
  return "";
}

// An out-of-place all-reduce of `in` (elements of t) by op, both buffers in `mem`, read back into
// *out: "" or what failed, `what` naming the call.
template <typename T>
inline std::string all_reduce_from(Rank& r, const std::string& mem, const std::vector<T>& in,
                                   hmc_dtype_t t, hmc_reduce_op_t op, const char* what,
                                   std::vector<T>* out) {
  Buf send(r.ctx, mem, in.size() * sizeof(T)), recv(r.ctx, mem, in.size() * sizeof(T));
  if (!send.put(in.data())) return "fill";
  hmc_request_t req;
  std::string e =
      wait(hmc_all_reduce(r.comm, send.get(), recv.get(), in.size(), t, op, &req), &req, what);
  if (!e.empty()) return e;
  out->resize(in.size());
  if (!recv.take(out->data())) return "read back";
  return "";
}

inline int32_t ival(int rank, size_t i) {
  return int32_t((rank + 1) * 1000 + int(i % 997));
}
inline float fval(int rank, size_t i) {
  return float(rank + 1) * 0.5f + float(i % 101) * 0.001f;
}

// All-reduce (sum of int32, exact; sum of float, within tolerance; min and max; average of
// int64), out of place and in place, for counts from 0 to past the ring's threshold.
// host_i64: the int64 part on host buffers whatever r.mem is (a device rank mixing memories);
// false where every collective must be on r.mem (a vendor group in its library).
inline std::string all_reduce_role_on(Rank& r, bool host_i64) {
  for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(40001)}) {
    for (bool in_place : {false, true}) {
      std::vector<int32_t> in(count), out(count);
      for (size_t i = 0; i < count; ++i) in[i] = ival(r.rank, i);
      Buf send(r.ctx, r.mem, count * 4), recv(r.ctx, r.mem, count * 4);
      if (!send.put(in.data())) return "fill";
      hmc_request_t req;
      void* dst = in_place ? send.get() : recv.get();
      std::string e =
          wait(hmc_all_reduce(r.comm, send.get(), dst, count, HMC_DTYPE_I32, HMC_OP_SUM, &req),
               &req, "all_reduce i32");
      if (!e.empty()) return e;
      if (!(in_place ? send : recv).take(out.data())) return "read back";
      for (size_t i = 0; i < count; ++i) {
        int32_t want = 0;
        for (int k = 0; k < r.size; ++k) want += ival(k, i);
        if (out[i] != want)
          return "all_reduce i32 count " + std::to_string(count) + " element " + std::to_string(i) +
                 ": " + std::to_string(out[i]) + " != " + std::to_string(want);
      }
    }
  }
  for (size_t count : {size_t(3), size_t(30000)}) {
    std::vector<float> in(count), out;
    for (size_t i = 0; i < count; ++i) in[i] = fval(r.rank, i);
    std::string e =
        all_reduce_from(r, r.mem, in, HMC_DTYPE_F32, HMC_OP_SUM, "all_reduce f32", &out);
    if (!e.empty()) return e;
    for (size_t i = 0; i < count; ++i) {
      double want = 0;
      for (int k = 0; k < r.size; ++k) want += fval(k, i);
      if (std::fabs(out[i] - want) > 1e-5 * std::fabs(want) + 1e-6)
        return "all_reduce f32 element " + std::to_string(i) + " off";
    }
  }
  for (hmc_reduce_op_t op : {HMC_OP_MIN, HMC_OP_MAX, HMC_OP_AVG}) {
    const size_t count = 11;
    std::vector<int64_t> in(count), out;
    for (size_t i = 0; i < count; ++i) in[i] = int64_t(r.rank * 3 + int(i)) * (i % 2 ? -1 : 1);
    std::string e = all_reduce_from(r, host_i64 ? "host" : r.mem, in, HMC_DTYPE_I64, op,
                                    "all_reduce i64", &out);
    if (!e.empty()) return e;
    for (size_t i = 0; i < count; ++i) {
      int64_t lo = INT64_MAX, hi = INT64_MIN, sum = 0;
      for (int k = 0; k < r.size; ++k) {
        int64_t v = int64_t(k * 3 + int(i)) * (i % 2 ? -1 : 1);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        sum += v;
      }
      int64_t want = op == HMC_OP_MIN ? lo : op == HMC_OP_MAX ? hi : sum / r.size;
      if (out[i] != want)
        return "all_reduce i64 op " + std::to_string(int(op)) + " element " + std::to_string(i);
    }
  }
  return "";
}

// Reduce-scatter of int32 sums, `count` elements a rank, each rank's block checked exactly.
inline std::string reduce_scatter_i32(Rank& r, size_t count, const char* what) {
  std::vector<int32_t> in(count * size_t(r.size)), out(count);
  for (size_t i = 0; i < in.size(); ++i) in[i] = ival(r.rank, i);
  Buf send(r.ctx, r.mem, in.size() * 4), recv(r.ctx, r.mem, count * 4);
  if (!send.put(in.data())) return "fill";
  hmc_request_t req;
  std::string e = wait(
      hmc_reduce_scatter(r.comm, send.get(), recv.get(), count, HMC_DTYPE_I32, HMC_OP_SUM, &req),
      &req, what);
  if (!e.empty()) return e;
  if (!recv.take(out.data())) return "read back";
  for (size_t i = 0; i < count; ++i) {
    int32_t want = 0;
    for (int k = 0; k < r.size; ++k) want += ival(k, size_t(r.rank) * count + i);
    if (out[i] != want) return std::string(what) + " element " + std::to_string(i);
  }
  return "";
}

// Reduce to the first and to the last rank: int32 sums exact, out of place and in place on the
// root, for counts from 0 to past the ring's threshold; float sums and int64 max and average. A
// non-root rank passes NULL for recv, or a buffer that must stay untouched, alternately; every
// rank's send must stay as it was (except the in-place root's).
inline std::string reduce_role(Rank& r) {
  int n = r.size;
  int turn = 0;
  for (int root : {0, n - 1}) {
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(40001)}) {
      for (bool in_place : {false, true}) {
        const bool at_root = r.rank == root;
        std::vector<int32_t> in(count), out(count, -7);
        for (size_t i = 0; i < count; ++i) in[i] = ival(r.rank, i);
        Buf send(r.ctx, r.mem, count * 4), recv(r.ctx, r.mem, count * 4);
        if (!send.put(in.data()) || !recv.put(out.data())) return "fill";
        const bool null_recv = !at_root && (turn++ % 2 == 0);
        void* dst = at_root && in_place ? send.get() : null_recv ? nullptr : recv.get();
        hmc_request_t req;
        std::string what = "reduce i32 to rank " + std::to_string(root) + " count " +
                           std::to_string(count) + (in_place ? " in place" : "");
        std::string e =
            wait(hmc_reduce(r.comm, send.get(), dst, count, HMC_DTYPE_I32, HMC_OP_SUM, root, &req),
                 &req, what.c_str());
        if (!e.empty()) return e;
        std::vector<int32_t> sent(count), got(count);
        if (!send.take(sent.data()) || !recv.take(got.data())) return "read back";
        const std::vector<int32_t>& result = at_root && in_place ? sent : got;
        for (size_t i = 0; i < count; ++i) {
          int32_t want = 0;
          for (int k = 0; k < n; ++k) want += ival(k, i);
          if (at_root && result[i] != want)
            return what + ": element " + std::to_string(i) + ": " + std::to_string(result[i]) +
                   " != " + std::to_string(want);
          if (!at_root && got[i] != -7)
            return what + ": a non-root rank's recv was written at element " + std::to_string(i);
          if (!(at_root && in_place) && sent[i] != in[i])
            return what + ": send changed at element " + std::to_string(i);
        }
      }
    }
  }
  {
    const size_t count = 30000;
    const int root = n / 2;
    std::vector<float> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = fval(r.rank, i);
    Buf send(r.ctx, r.mem, count * 4), recv(r.ctx, r.mem, count * 4);
    if (!send.put(in.data())) return "fill";
    hmc_request_t req;
    std::string e = wait(
        hmc_reduce(r.comm, send.get(), recv.get(), count, HMC_DTYPE_F32, HMC_OP_SUM, root, &req),
        &req, "reduce f32");
    if (!e.empty()) return e;
    if (r.rank == root) {
      if (!recv.take(out.data())) return "read back";
      for (size_t i = 0; i < count; ++i) {
        double want = 0;
        for (int k = 0; k < n; ++k) want += fval(k, i);
        if (std::fabs(out[i] - want) > 1e-5 * std::fabs(want) + 1e-6)
          return "reduce f32 element " + std::to_string(i) + " off";
      }
    }
  }
  for (hmc_reduce_op_t op : {HMC_OP_MAX, HMC_OP_AVG}) {
    const size_t count = 5003;
    std::vector<int64_t> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = int64_t(r.rank * 3 + int(i)) * (i % 2 ? -1 : 1);
    Buf send(r.ctx, r.mem, count * 8), recv(r.ctx, r.mem, count * 8);
    if (!send.put(in.data())) return "fill";
    hmc_request_t req;
    std::string e =
        wait(hmc_reduce(r.comm, send.get(), recv.get(), count, HMC_DTYPE_I64, op, 0, &req), &req,
             "reduce i64");
    if (!e.empty()) return e;
    if (r.rank != 0) continue;
    if (!recv.take(out.data())) return "read back";
    for (size_t i = 0; i < count; ++i) {
      int64_t hi = INT64_MIN, sum = 0;
      for (int k = 0; k < n; ++k) {
        int64_t v = int64_t(k * 3 + int(i)) * (i % 2 ? -1 : 1);
        hi = std::max(hi, v);
        sum += v;
      }
      if (out[i] != (op == HMC_OP_MAX ? hi : sum / n))
        return "reduce i64 op " + std::to_string(int(op)) + " element " + std::to_string(i);
    }
  }
  return "";
}

inline std::string gather_scatter_role(Rank& r) {
  int n = r.size;
  for (size_t count : {size_t(1), size_t(13), size_t(5000)}) {
    // all-gather, out of place and in place
    for (bool in_place : {false, true}) {
      std::vector<int32_t> mine(count), all(count * size_t(n));
      for (size_t i = 0; i < count; ++i) mine[i] = ival(r.rank, i);
      Buf recv(r.ctx, r.mem, all.size() * 4), send(r.ctx, r.mem, count * 4);
      void* src = send.get();
      if (in_place) {
        std::vector<int32_t> init(all.size(), -1);
        for (size_t i = 0; i < count; ++i) init[size_t(r.rank) * count + i] = mine[i];
        recv.put(init.data());
        src = static_cast<int32_t*>(recv.get()) + size_t(r.rank) * count;
      } else {
        send.put(mine.data());
      }
      hmc_request_t req;
      std::string e = wait(hmc_all_gather(r.comm, src, recv.get(), count, HMC_DTYPE_I32, &req),
                           &req, "all_gather");
      if (!e.empty()) return e;
      recv.take(all.data());
      for (int k = 0; k < n; ++k)
        for (size_t i = 0; i < count; ++i)
          if (all[size_t(k) * count + i] != ival(k, i))
            return "all_gather block " + std::to_string(k) + " element " + std::to_string(i);
    }
    // reduce-scatter
    {
      std::string e = reduce_scatter_i32(r, count, "reduce_scatter");
      if (!e.empty()) return e;
    }
    // all-to-all
    {
      std::vector<int32_t> in(count * size_t(n)), out(count * size_t(n));
      for (size_t i = 0; i < in.size(); ++i) in[i] = ival(r.rank, i);
      Buf send(r.ctx, r.mem, in.size() * 4), recv(r.ctx, r.mem, out.size() * 4);
      send.put(in.data());
      hmc_request_t req;
      std::string e =
          wait(hmc_all_to_all(r.comm, send.get(), recv.get(), count, HMC_DTYPE_I32, &req), &req,
               "all_to_all");
      if (!e.empty()) return e;
      recv.take(out.data());
      for (int k = 0; k < n; ++k)
        for (size_t i = 0; i < count; ++i)
          if (out[size_t(k) * count + i] != ival(k, size_t(r.rank) * count + i))
            return "all_to_all from rank " + std::to_string(k) + " element " + std::to_string(i);
    }
    // broadcast from the last rank, both algorithms (the second forced through the options of
    // the environment is per process: the tree is the default)
    {
      std::vector<int32_t> v(count);
      int root = n - 1;
      for (size_t i = 0; i < count; ++i) v[i] = r.rank == root ? ival(root, i) : 0;
      Buf buf(r.ctx, r.mem, count * 4);
      buf.put(v.data());
      hmc_request_t req;
      std::string e = wait(hmc_broadcast(r.comm, buf.get(), count, HMC_DTYPE_I32, root, &req), &req,
                           "broadcast");
      if (!e.empty()) return e;
      buf.take(v.data());
      for (size_t i = 0; i < count; ++i)
        if (v[i] != ival(root, i)) return "broadcast element " + std::to_string(i);
    }
  }
  hmc_request_t req;
  return wait(hmc_barrier(r.comm, &req), &req, "barrier");
}

// One rank's all-to-all-v counts and displacements (in elements), both sides packed in rank
// order, from count(from, to): what rank `from` sends to rank `to`.
struct AllToAllvLayout {
  std::vector<size_t> sc, sd, rc, rd;  // send counts, send displs, recv counts, recv displs
  size_t st = 0, rt = 0;               // elements sent and received in all
};

inline AllToAllvLayout all_to_allv_layout(int rank, int n,
                                          const std::function<size_t(int, int)>& count) {
  AllToAllvLayout v;
  for (int j = 0; j < n; ++j) {
    v.sc.push_back(count(rank, j));
    v.sd.push_back(v.st);
    v.st += v.sc.back();
    v.rc.push_back(count(j, rank));
    v.rd.push_back(v.rt);
    v.rt += v.rc.back();
  }
  return v;
}

// All-to-all-v of the MoE shape: rank r sends (r + j) % 3 elements to rank j (zero for some
// pairs), packed, and receives packed in rank order.
inline std::string all_to_allv_role(Rank& r) {
  int n = r.size;
  auto cnt = [](int from, int to) { return size_t((from + to) % 3) * 17; };
  AllToAllvLayout lay = all_to_allv_layout(r.rank, n, cnt);
  std::vector<int32_t> in(lay.st), out(lay.rt, -1);
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < lay.sc[size_t(j)]; ++i)
      in[lay.sd[size_t(j)] + i] = ival(r.rank, size_t(j) * 1000 + i);
  Buf send(r.ctx, r.mem, lay.st * 4), recv(r.ctx, r.mem, lay.rt * 4);
  send.put(in.data());
  hmc_request_t req;
  std::string e = wait(hmc_all_to_allv(r.comm, send.get(), lay.sc.data(), lay.sd.data(), recv.get(),
                                       lay.rc.data(), lay.rd.data(), HMC_DTYPE_I32, &req),
                       &req, "all_to_allv");
  if (!e.empty()) return e;
  recv.take(out.data());
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < lay.rc[size_t(j)]; ++i)
      if (out[lay.rd[size_t(j)] + i] != ival(j, size_t(r.rank) * 1000 + i))
        return "all_to_allv from rank " + std::to_string(j) + " element " + std::to_string(i);
  return "";
}

inline std::string all_reduce_role(Rank& r) {
  return all_reduce_role_on(r, true);
}

inline std::string everything_role_on(Rank& r, bool host_i64) {
  std::string e = all_reduce_role_on(r, host_i64);
  if (e.empty()) e = gather_scatter_role(r);
  if (e.empty()) e = all_to_allv_role(r);
  return e;
}

// With a reduce, which runs on hmc's algorithms whatever the memory (the ccl plugin ABI has none).
inline std::string everything_role(Rank& r) {
  std::string e = everything_role_on(r, true);
  if (e.empty()) e = reduce_role(r);
  return e;
}

}  // namespace coll_roles
