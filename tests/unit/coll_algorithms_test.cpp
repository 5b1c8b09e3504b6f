// The collectives' schedules, run for every rank of a group in memory: each step's sends are
// matched with the receives of the same step and position, as the executor tags them, and the
// results are checked against a reference. Every send must meet its receive, of the same size.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "coll/algorithms.h"
#include "coll/reduce.h"

using namespace hmc::coll;

namespace {

struct RankMem {
  std::vector<uint8_t> in, out, scratch;
  uint8_t* at(const Range& r) {
    auto& b = r.buffer == Buffer::Input ? in : r.buffer == Buffer::Output ? out : scratch;
    return b.data() + r.offset;
  }
  size_t size(Buffer b) {
    return (b == Buffer::Input ? in : b == Buffer::Output ? out : scratch).size();
  }
};

// Which host each rank is on: two ranks a host unless a test says otherwise.
int (*g_host_of)(int) = [](int r) { return r / 2; };

// Runs every rank's schedule; returns "" or what went wrong. mem[r].in/out are set by the caller.
std::string run_all(const CollArgs& args_of_rank0, const std::vector<CollArgs>& per_rank,
                    std::vector<RankMem>& mem, Algorithm algo) {
  int n = int(mem.size());
  GroupShape g;
  g.size = n;
  for (int r = 0; r < n; ++r) {
    g.host_of_rank.push_back(g_host_of(r));
    g.vendor_of_rank.push_back(r % 2 ? "cuda" : "hip");
  }
  std::vector<Schedule> s;
  for (int r = 0; r < n; ++r) {
    const CollArgs& a = per_rank.empty() ? args_of_rank0 : per_rank[size_t(r)];
    s.push_back(make_schedule(a, g, r, algo));
    mem[size_t(r)].scratch.assign(s.back().scratch_bytes, 0);
  }
  for (int r = 1; r < n; ++r)
    if (s[size_t(r)].steps.size() != s[0].steps.size()) return "ranks have different step counts";
  auto check = [&](int r, const Range& rg, uint64_t bytes) {
    return rg.offset + bytes <= mem[size_t(r)].size(rg.buffer);
  };
  for (size_t step = 0; step < s[0].steps.size(); ++step) {
    // (from, to, pos) -> bytes sent
    std::map<std::tuple<int, int, int>, std::vector<uint8_t>> sent;
    for (int r = 0; r < n; ++r) {
      std::vector<int> pos(size_t(n), 0);
      for (const Action& a : s[size_t(r)].steps[step].actions) {
        if (a.kind == ActionKind::Copy) {
          if (!check(r, a.src, a.bytes) || !check(r, a.dst, a.bytes)) return "copy out of bounds";
          memmove(mem[size_t(r)].at(a.dst), mem[size_t(r)].at(a.src), a.bytes);
        } else if (a.kind == ActionKind::Reduce) {
          reduce_into(mem[size_t(r)].at(a.dst), mem[size_t(r)].at(a.src),
                      a.bytes / dtype_size(args_of_rank0.dtype), args_of_rank0.dtype,
                      args_of_rank0.op);
        }
      }
      for (const Action& a : s[size_t(r)].steps[step].actions) {
        if (a.kind != ActionKind::Send) continue;
        if (a.peer < 0 || a.peer >= n || a.peer == r) return "send to a bad peer";
        if (!check(r, a.src, a.bytes)) return "send out of bounds";
        const uint8_t* p = mem[size_t(r)].at(a.src);
        sent[{r, a.peer, pos[size_t(a.peer)]++}] = std::vector<uint8_t>(p, p + a.bytes);
      }
    }
    struct Pending {
      int r;
      const Action* a;
      std::vector<uint8_t> data;
    };
    std::vector<Pending> reduce_later;
    for (int r = 0; r < n; ++r) {
      std::vector<int> pos(size_t(n), 0);
      for (const Action& a : s[size_t(r)].steps[step].actions) {
        if (a.kind != ActionKind::Recv && a.kind != ActionKind::RecvReduce) continue;
        auto it = sent.find({a.peer, r, pos[size_t(a.peer)]++});
        if (it == sent.end()) return "a receive with no send, step " + std::to_string(step);
        if (it->second.size() != a.bytes) return "sizes disagree, step " + std::to_string(step);
        if (!check(r, a.dst, a.bytes)) return "receive out of bounds";
        if (a.kind == ActionKind::Recv)
          memcpy(mem[size_t(r)].at(a.dst), it->second.data(), a.bytes);
        else
          reduce_later.push_back({r, &a, it->second});
        sent.erase(it);
      }
    }
    if (!sent.empty()) return "a send with no receive, step " + std::to_string(step);
    for (auto& p : reduce_later)
      reduce_into(mem[size_t(p.r)].at(p.a->dst), p.data.data(),
                  p.a->bytes / dtype_size(args_of_rank0.dtype), args_of_rank0.dtype,
                  args_of_rank0.op);
  }
  for (int r = 0; r < n; ++r) {
    if (!s[size_t(r)].divide_by_size) continue;
    finish_average(mem[size_t(r)].out.data(),
                   mem[size_t(r)].out.size() / dtype_size(args_of_rank0.dtype), args_of_rank0.dtype,
                   n);
  }
  return "";
}

int32_t val(int r, size_t i) {
  return int32_t(r * 100003 + int(i) * 7 + 1);
}

std::vector<uint8_t> ints(size_t count, int r, size_t base = 0) {
  std::vector<uint8_t> b(count * 4);
  for (size_t i = 0; i < count; ++i) {
    int32_t v = val(r, base + i);
    memcpy(&b[i * 4], &v, 4);
  }
  return b;
}

int32_t get(const std::vector<uint8_t>& b, size_t i) {
  int32_t v;
  memcpy(&v, &b[i * 4], 4);
  return v;
}

const int kSizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16};
const size_t kCounts[] = {0, 1, 3, 17, 1000, 20000};

// A collective of `count` int32.
CollArgs int32_args(CollKind kind, size_t count, bool in_place = false) {
  CollArgs a;
  a.kind = kind;
  a.dtype = HMC_DTYPE_I32;
  a.count = count;
  a.in_place = in_place;
  return a;
}

// An in-place broadcast of 33 int32 from root over n ranks by algo: every rank ends with root's.
void broadcast_in_place(int n, int root, Algorithm algo) {
  CollArgs a = int32_args(CollKind::Broadcast, 33, true);
  a.root = root;
  std::vector<RankMem> mem(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    mem[size_t(r)].out = r == root ? ints(33, root) : std::vector<uint8_t>(132, 0);
  ASSERT_EQ(run_all(a, {}, mem, algo), "") << "n=" << n;
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(mem[size_t(r)].out, ints(33, root)) << "n=" << n << " root " << root;
}

}  // namespace

TEST(CollAlgorithms, AllReduceEveryAlgorithm) {
  for (Algorithm algo : {Algorithm::Auto, Algorithm::Ring, Algorithm::RecursiveDoubling,
                         Algorithm::Hierarchical, Algorithm::Direct}) {
    for (int n : kSizes) {
      for (size_t count : kCounts) {
        for (bool in_place : {false, true}) {
          CollArgs a = int32_args(CollKind::AllReduce, count, in_place);
          std::vector<RankMem> mem(static_cast<size_t>(n));
          for (int r = 0; r < n; ++r) {
            mem[size_t(r)].in = ints(count, r);
            mem[size_t(r)].out =
                in_place ? mem[size_t(r)].in : std::vector<uint8_t>(count * 4, 0xee);
          }
          ASSERT_EQ(run_all(a, {}, mem, algo), "")
              << algorithm_name(algo) << " n=" << n << " count=" << count;
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count; ++i) {
              int32_t want = 0;
              for (int k = 0; k < n; ++k) want += val(k, i);
              ASSERT_EQ(get(mem[size_t(r)].out, i), want)
                  << algorithm_name(algo) << " n=" << n << " count=" << count << " rank " << r
                  << " i=" << i;
            }
        }
      }
    }
  }
}

// Every form of the reduce, every root position: the root ends with the sum; the other ranks
// have no Output at all (a schedule that touched it would be out of bounds) and keep their Input.
TEST(CollAlgorithms, ReduceEveryFormAndRoot) {
  for (Algorithm algo : {Algorithm::Auto, Algorithm::Tree, Algorithm::Ring, Algorithm::Direct}) {
    for (int n : kSizes) {
      for (size_t count : kCounts) {
        for (int root : {0, n / 2, n - 1}) {
          for (bool in_place : {false, true}) {
            CollArgs a = int32_args(CollKind::Reduce, count, in_place);
            a.root = root;
            std::vector<CollArgs> per_rank(size_t(n), a);
            std::vector<RankMem> mem(static_cast<size_t>(n));
            for (int r = 0; r < n; ++r) {
              per_rank[size_t(r)].in_place = in_place && r == root;
              mem[size_t(r)].in = ints(count, r);
              if (r == root)
                mem[size_t(r)].out =
                    in_place ? mem[size_t(r)].in : std::vector<uint8_t>(count * 4, 0xee);
            }
            std::string where = std::string(algorithm_name(algo)) + " n=" + std::to_string(n) +
                                " count=" + std::to_string(count) + " root " +
                                std::to_string(root) + (in_place ? " in place" : "");
            ASSERT_EQ(run_all(a, per_rank, mem, algo), "") << where;
            for (size_t i = 0; i < count; ++i) {
              int32_t want = 0;
              for (int k = 0; k < n; ++k) want += val(k, i);
              ASSERT_EQ(get(mem[size_t(root)].out, i), want) << where << " i=" << i;
            }
            for (int r = 0; r < n; ++r)
              if (r != root) ASSERT_EQ(mem[size_t(r)].in, ints(count, r)) << where << " rank " << r;
          }
        }
      }
    }
  }
}

TEST(CollAlgorithms, AllReduceAverage) {
  for (int n : {3, 4, 6}) {
    CollArgs a = int32_args(CollKind::AllReduce, 5);
    a.op = HMC_OP_AVG;
    std::vector<RankMem> mem(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      mem[size_t(r)].in = ints(5, r);
      mem[size_t(r)].out.assign(20, 0);
    }
    ASSERT_EQ(run_all(a, {}, mem, Algorithm::Auto), "");
    int64_t sum = 0;
    for (int k = 0; k < n; ++k) sum += val(k, 2);
    EXPECT_EQ(get(mem[1].out, 2), int32_t(sum / n));
  }
}

TEST(CollAlgorithms, AllGatherReduceScatterAllToAll) {
  for (Algorithm algo : {Algorithm::Auto, Algorithm::Direct}) {
    for (int n : kSizes) {
      for (size_t count : kCounts) {
        CollArgs a;
        a.dtype = HMC_DTYPE_I32;
        a.count = count;
        const size_t un = size_t(n);
        // all-gather
        a.kind = CollKind::AllGather;
        std::vector<RankMem> mem(un);
        for (int r = 0; r < n; ++r) {
          mem[size_t(r)].in = ints(count, r);
          mem[size_t(r)].out.assign(count * 4 * un, 0xee);
        }
        ASSERT_EQ(run_all(a, {}, mem, algo), "") << "all_gather n=" << n;
        for (int r = 0; r < n; ++r)
          for (int k = 0; k < n; ++k)
            for (size_t i = 0; i < count; ++i)
              ASSERT_EQ(get(mem[size_t(r)].out, size_t(k) * count + i), val(k, i))
                  << "all_gather n=" << n;
        // reduce-scatter
        a.kind = CollKind::ReduceScatter;
        for (int r = 0; r < n; ++r) {
          mem[size_t(r)].in = ints(count * un, r);
          mem[size_t(r)].out.assign(count * 4, 0xee);
        }
        ASSERT_EQ(run_all(a, {}, mem, algo), "") << "reduce_scatter n=" << n;
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) {
            int32_t want = 0;
            for (int k = 0; k < n; ++k) want += val(k, size_t(r) * count + i);
            ASSERT_EQ(get(mem[size_t(r)].out, i), want) << "reduce_scatter n=" << n;
          }
        // all-to-all
        a.kind = CollKind::AllToAll;
        for (int r = 0; r < n; ++r) {
          mem[size_t(r)].in = ints(count * un, r);
          mem[size_t(r)].out.assign(count * 4 * un, 0xee);
        }
        ASSERT_EQ(run_all(a, {}, mem, algo), "") << "all_to_all n=" << n;
        for (int r = 0; r < n; ++r)
          for (int k = 0; k < n; ++k)
            for (size_t i = 0; i < count; ++i)
              ASSERT_EQ(get(mem[size_t(r)].out, size_t(k) * count + i),
                        val(k, size_t(r) * count + i));
      }
    }
  }
}

TEST(CollAlgorithms, AllToAllVWithZeroCounts) {
  for (Algorithm algo : {Algorithm::Auto, Algorithm::Direct}) {
    for (int n : kSizes) {
      const size_t un = size_t(n);
      auto cnt = [](int from, int to) { return uint64_t((from * 3 + to) % 4) * 5; };
      std::vector<CollArgs> args(un);
      std::vector<RankMem> mem(un);
      for (int r = 0; r < n; ++r) {
        CollArgs& a = args[size_t(r)];
        a.kind = CollKind::AllToAllV;
        a.dtype = HMC_DTYPE_I32;
        uint64_t so = 0, ro = 0;
        for (int j = 0; j < n; ++j) {
          a.send_counts.push_back(cnt(r, j));
          a.send_displs.push_back(so);
          so += cnt(r, j);
          a.recv_counts.push_back(cnt(j, r));
          a.recv_displs.push_back(ro + 1);  // a gap before each block
          ro += cnt(j, r) + 1;
        }
        mem[size_t(r)].in = ints(so, r);
        mem[size_t(r)].out.assign((ro + 1) * 4, 0xee);
      }
      ASSERT_EQ(run_all(args[0], args, mem, algo), "") << "n=" << n;
      for (int r = 0; r < n; ++r)
        for (int j = 0; j < n; ++j)
          for (uint64_t i = 0; i < cnt(j, r); ++i)
            ASSERT_EQ(get(mem[size_t(r)].out, args[size_t(r)].recv_displs[size_t(j)] + i),
                      val(j, args[size_t(j)].send_displs[size_t(r)] + i));
    }
  }
}

TEST(CollAlgorithms, BroadcastEveryRootAndBarrier) {
  for (Algorithm algo : {Algorithm::Tree, Algorithm::Linear}) {
    for (int n : kSizes) {
      for (int root = 0; root < n; ++root)
        ASSERT_NO_FATAL_FAILURE(broadcast_in_place(n, root, algo));
      CollArgs b;
      b.kind = CollKind::Barrier;
      std::vector<RankMem> mem(static_cast<size_t>(n));
      ASSERT_EQ(run_all(b, {}, mem, algo), "");
    }
  }
}

TEST(CollAlgorithms, Names) {
  Algorithm a;
  for (const char* name : {"ring", "recursive_doubling", "pairwise", "tree", "linear",
                           "hierarchical", "direct", "auto"}) {
    ASSERT_TRUE(parse_algorithm(name, &a)) << name;
    EXPECT_STREQ(algorithm_name(a), name);
  }
  EXPECT_TRUE(parse_algorithm("", &a));
  EXPECT_EQ(a, Algorithm::Auto);
  EXPECT_FALSE(parse_algorithm("fastest", &a));
}

// Hosts whose ranks interleave (rank r on host r % 3) and one host alone: leaders are not
// neighbours, and a host may hold one rank.
TEST(CollAlgorithms, AllReduceHierarchicalUnevenHosts) {
  for (auto host_of : {+[](int r) { return r % 3; }, +[](int r) { return r == 0 ? 5 : 1; }}) {
    g_host_of = host_of;
    for (int n : kSizes) {
      for (size_t count : {size_t(1), size_t(40), size_t(30000)}) {
        CollArgs a = int32_args(CollKind::AllReduce, count);
        std::vector<RankMem> mem(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          mem[size_t(r)].in = ints(count, r);
          mem[size_t(r)].out.assign(count * 4, 0);
        }
        ASSERT_EQ(run_all(a, {}, mem, Algorithm::Hierarchical), "") << "n=" << n;
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) {
            int32_t want = 0;
            for (int k = 0; k < n; ++k) want += val(k, i);
            ASSERT_EQ(get(mem[size_t(r)].out, i), want) << "n=" << n << " rank " << r;
          }
      }
    }
  }
  g_host_of = [](int r) { return r / 2; };
}

// Hierarchical broadcast from every root and all-gather, out of place and in place, over two
// ranks a host, interleaved hosts (rank r on host r % 3), a lone host, and every rank alone.
TEST(CollAlgorithms, BroadcastAndAllGatherHierarchical) {
  for (auto host_of : {+[](int r) { return r / 2; }, +[](int r) { return r % 3; },
                       +[](int r) { return r == 0 ? 5 : 1; }, +[](int r) { return r; }}) {
    g_host_of = host_of;
    for (int n : kSizes) {
      const size_t un = size_t(n);
      for (int root = 0; root < n; ++root)
        ASSERT_NO_FATAL_FAILURE(broadcast_in_place(n, root, Algorithm::Hierarchical));
      for (size_t count : {size_t(0), size_t(5), size_t(3000)}) {
        for (bool in_place : {false, true}) {
          CollArgs a = int32_args(CollKind::AllGather, count, in_place);
          std::vector<RankMem> mem(un);
          for (int r = 0; r < n; ++r) {
            mem[size_t(r)].in = ints(count, r);
            mem[size_t(r)].out.assign(count * 4 * un, 0xee);
            if (in_place && count > 0)  // (an empty vector's data() may be NULL)
              memcpy(mem[size_t(r)].out.data() + size_t(r) * count * 4, mem[size_t(r)].in.data(),
                     count * 4);
          }
          ASSERT_EQ(run_all(a, {}, mem, Algorithm::Hierarchical), "") << "all_gather n=" << n;
          for (int r = 0; r < n; ++r)
            for (int k = 0; k < n; ++k)
              for (size_t i = 0; i < count; ++i)
                ASSERT_EQ(get(mem[size_t(r)].out, size_t(k) * count + i), val(k, i))
                    << "all_gather n=" << n << " rank " << r;
        }
      }
    }
  }
  g_host_of = [](int r) { return r / 2; };
}

// Up to 8 ranks on one host take the direct forms (one step per phase); more ranks, or ranks on
// several hosts, the step-by-step ones.
TEST(CollAlgorithms, DirectWithinOneSmallHost) {
  for (int n : {2, 4, 8, 9}) {
    GroupShape g;
    g.size = n;
    g.host_of_rank.assign(size_t(n), 0);
    g.vendor_of_rank.assign(size_t(n), "host");
    CollArgs a;
    a.dtype = HMC_DTYPE_F32;
    a.count = 1 << 18;
    for (CollKind k :
         {CollKind::AllGather, CollKind::AllToAll, CollKind::ReduceScatter, CollKind::AllReduce}) {
      a.kind = k;
      Schedule s = make_schedule(a, g, 0, Algorithm::Auto);
      EXPECT_EQ(s.algorithm == "direct", n <= 8) << "n=" << n << " " << s.algorithm;
      if (n <= 8) EXPECT_EQ(s.steps.size(), k == CollKind::AllReduce ? 3u : 2u);
    }
    // Small all-reduces keep recursive doubling.
    a.kind = CollKind::AllReduce;
    a.count = 2;
    EXPECT_EQ(make_schedule(a, g, 0, Algorithm::Auto).algorithm, "recursive_doubling");
    g.host_of_rank[size_t(n - 1)] = 1;
    a.kind = CollKind::AllGather;
    EXPECT_EQ(make_schedule(a, g, 0, Algorithm::Auto).algorithm, "ring") << "n=" << n;
  }
}
