#include "coll/algorithms.h"

#include <algorithm>

namespace hmc::coll {

namespace {

constexpr uint64_t kSmallAllReduceBytes = 64 * 1024;
// Up to this many ranks on one host, the all-gather, all-to-all, reduce-scatter and all-reduce
// post every transfer of a phase at once (direct) instead of passing blocks around a ring: the
// same bytes in one step instead of n - 1, and each step costs every rank a wake-up, which on a
// host with fewer cores than ranks is most of a small collective's time (measured:
// docs/performance.md, "Collectives against Open MPI"). Beyond it, n - 1 transfers in flight per
// rank would crowd the shared-memory rings.
constexpr int kDirectMaxRanks = 8;
// Below this, an all-reduce within such a host still takes recursive doubling: its exchanges
// with one partner at a time ended sooner than the direct form's with every rank (4 ranks on 2
// cores, 8 B and 4 KiB: 34-116 us against 123-295 us and 55-76 us against 110-597 us; 64 KiB:
// 226-468 us against 141-212 us).
constexpr uint64_t kDirectAllReduceMinBytes = 16 * 1024;

Action send(int peer, Buffer b, uint64_t off, uint64_t bytes) {
  Action a;
  a.kind = ActionKind::Send;
  a.peer = peer;
  a.src = {b, off};
  a.bytes = bytes;
  return a;
}

Action recv(int peer, Buffer b, uint64_t off, uint64_t bytes, bool reduce = false) {
  Action a;
  a.kind = reduce ? ActionKind::RecvReduce : ActionKind::Recv;
  a.peer = peer;
  a.dst = {b, off};
  a.bytes = bytes;
  return a;
}

Action copy(Buffer sb, uint64_t so, Buffer db, uint64_t dof, uint64_t bytes) {
  Action a;
  a.kind = ActionKind::Copy;
  a.src = {sb, so};
  a.dst = {db, dof};
  a.bytes = bytes;
  return a;
}

// Appends a in a new step, or in the last one when `same` (actions of one step run together).
// Zero-byte transfers are left out: both sides of a pair compute the same sizes, so both omit
// them.
void add(Schedule& s, const Action& a) {
  if (a.bytes == 0) return;
  s.steps.back().actions.push_back(a);
}
void next_step(Schedule& s) {
  s.steps.emplace_back();
}

int mod(int a, int n) {
  return ((a % n) + n) % n;
}

// Block i of `count` elements cut into n nearly equal blocks (the first count % n one larger).
void block(uint64_t count, int n, int i, uint64_t* first, uint64_t* len) {
  uint64_t base = count / uint64_t(n), rem = count % uint64_t(n);
  *first = uint64_t(i) * base + std::min<uint64_t>(uint64_t(i), rem);
  *len = base + (uint64_t(i) < rem ? 1 : 0);
}

// Dissemination: in step k each rank signals the one 2^k ahead and hears from the one 2^k
// behind; after ceil(log2 n) steps every rank has heard, indirectly, from every other.
Schedule barrier(const GroupShape& g, int r) {
  Schedule s;
  s.algorithm = "dissemination";
  s.scratch_bytes = 2;
  for (int dist = 1; dist < g.size; dist <<= 1) {
    next_step(s);
    add(s, send(mod(r + dist, g.size), Buffer::Scratch, 0, 1));
    add(s, recv(mod(r - dist, g.size), Buffer::Scratch, 1, 1));
  }
  return s;
}

Schedule broadcast(const CollArgs& a, const GroupShape& g, int r, Algorithm algo) {
  Schedule s;
  uint64_t bytes = a.count * dtype_size(a.dtype);
  int n = g.size;
  if (algo == Algorithm::Linear) {
    s.algorithm = "linear";
    next_step(s);
    for (int p = 0; p < n; ++p) {
      if (p == a.root) continue;
      if (r == a.root)
        add(s, send(p, Buffer::Output, 0, bytes));
      else if (r == p)
        add(s, recv(a.root, Buffer::Output, 0, bytes));
    }
    return s;
  }
  // Binomial tree over ranks renumbered so that the root is 0: in step k the 2^k ranks that
  // have the data send it 2^k further.
  s.algorithm = "tree";
  int v = mod(r - a.root, n);
  for (int mask = 1; mask < n; mask <<= 1) {
    next_step(s);
    if (v < mask && v + mask < n)
      add(s, send(mod(v + mask + a.root, n), Buffer::Output, 0, bytes));
    else if (v >= mask && v < 2 * mask)
      add(s, recv(mod(v - mask + a.root, n), Buffer::Output, 0, bytes));
  }
  return s;
}

// Ring: in step s each rank passes on the block it got in the step before. Direct: one step in
// which every rank sends its block to every other.
Schedule all_gather(const CollArgs& a, const GroupShape& g, int r, bool direct) {
  Schedule s;
  s.algorithm = direct ? "direct" : "ring";
  uint64_t b = a.count * dtype_size(a.dtype);
  int n = g.size;
  next_step(s);
  if (!a.in_place) add(s, copy(Buffer::Input, 0, Buffer::Output, uint64_t(r) * b, b));
  if (direct) {
    next_step(s);
    for (int k = 1; k < n; ++k) {
      add(s, send(mod(r + k, n), Buffer::Output, uint64_t(r) * b, b));
      add(s, recv(mod(r - k, n), Buffer::Output, uint64_t(mod(r - k, n)) * b, b));
    }
    return s;
  }
  for (int step = 1; step < n; ++step) {
    next_step(s);
    int out = mod(r - step + 1, n), in = mod(r - step, n);
    add(s, send(mod(r + 1, n), Buffer::Output, uint64_t(out) * b, b));
    add(s, recv(mod(r - 1, n), Buffer::Output, uint64_t(in) * b, b));
  }
  return s;
}

// Pairwise exchange: in step s rank r sends to r+s and receives from r-s, so that every rank
// talks to one peer at a time in each direction. Direct: the same transfers, all in one step.
Schedule all_to_all(const CollArgs& a, const GroupShape& g, int r, bool direct) {
  Schedule s;
  s.algorithm = direct ? "direct" : "pairwise";
  size_t es = dtype_size(a.dtype);
  int n = g.size;
  bool v = a.kind == CollKind::AllToAllV;
  auto sent = [&](int p, uint64_t* off, uint64_t* len) {
    *off = (v ? a.send_displs[p] : uint64_t(p) * a.count) * es;
    *len = (v ? a.send_counts[p] : a.count) * es;
  };
  auto got = [&](int p, uint64_t* off, uint64_t* len) {
    *off = (v ? a.recv_displs[p] : uint64_t(p) * a.count) * es;
    *len = (v ? a.recv_counts[p] : a.count) * es;
  };
  uint64_t so, sl, ro, rl;
  next_step(s);
  sent(r, &so, &sl);
  got(r, &ro, &rl);
  add(s, copy(Buffer::Input, so, Buffer::Output, ro, std::min(sl, rl)));
  if (direct) next_step(s);
  for (int step = 1; step < n; ++step) {
    if (!direct) next_step(s);
    int to = mod(r + step, n), from = mod(r - step, n);
    sent(to, &so, &sl);
    got(from, &ro, &rl);
    add(s, send(to, Buffer::Input, so, sl));
    add(s, recv(from, Buffer::Output, ro, rl));
  }
  return s;
}

// Ring reduce-scatter over `buf` cut into n blocks (block i at offsets(i)): in step s rank r
// sends its partial block r-s and reduces block r-s-1 from its left neighbour; after n-1 steps
// block r holds every rank's contribution.
template <typename Offsets>
void ring_reduce_scatter(Schedule& s, Buffer buf, int n, int r, Offsets offsets) {
  for (int step = 1; step < n; ++step) {
    next_step(s);
    uint64_t off, len;
    offsets(mod(r - step, n), &off, &len);
    add(s, send(mod(r + 1, n), buf, off, len));
    offsets(mod(r - step - 1, n), &off, &len);
    add(s, recv(mod(r - 1, n), buf, off, len, true));
  }
}

// Direct: every rank sends block j of its input to rank j and reduces what the others send it
// into its own block, in one step. Each block is reduced by one rank, in a fixed order.
Schedule reduce_scatter_direct(const CollArgs& a, const GroupShape& g, int r) {
  Schedule s;
  s.algorithm = "direct";
  uint64_t b = a.count * dtype_size(a.dtype);
  int n = g.size;
  next_step(s);
  if (!a.in_place) add(s, copy(Buffer::Input, uint64_t(r) * b, Buffer::Output, 0, b));
  next_step(s);
  for (int k = 1; k < n; ++k) {
    int to = mod(r + k, n);
    add(s, send(to, Buffer::Input, uint64_t(to) * b, b));
    add(s, recv(mod(r - k, n), Buffer::Output, 0, b, true));
  }
  s.divide_by_size = a.op == HMC_OP_AVG;
  return s;
}

Schedule reduce_scatter(const CollArgs& a, const GroupShape& g, int r, bool direct) {
  if (direct) return reduce_scatter_direct(a, g, r);
  Schedule s;
  s.algorithm = "ring";
  size_t es = dtype_size(a.dtype);
  uint64_t b = a.count * es;
  int n = g.size;
  // The caller's send buffer is not to be written: the partial sums live in scratch.
  s.scratch_bytes = b * uint64_t(n);
  next_step(s);
  add(s, copy(Buffer::Input, 0, Buffer::Scratch, 0, s.scratch_bytes));
  ring_reduce_scatter(s, Buffer::Scratch, n, r, [&](int i, uint64_t* off, uint64_t* len) {
    *off = uint64_t(i) * b;
    *len = b;
  });
  next_step(s);
  add(s, copy(Buffer::Scratch, uint64_t(r) * b, Buffer::Output, 0, b));
  s.divide_by_size = a.op == HMC_OP_AVG;
  return s;
}

// Ring all-reduce: a reduce-scatter then an all-gather of the reduced blocks, in Output.
Schedule all_reduce_ring(const CollArgs& a, const GroupShape& g, int r) {
  Schedule s;
  s.algorithm = "ring";
  size_t es = dtype_size(a.dtype);
  int n = g.size;
  auto offsets = [&](int i, uint64_t* off, uint64_t* len) {
    block(a.count, n, i, off, len);
    *off *= es;
    *len *= es;
  };
  next_step(s);
  if (!a.in_place) add(s, copy(Buffer::Input, 0, Buffer::Output, 0, a.count * es));
  ring_reduce_scatter(s, Buffer::Output, n, r, offsets);
  for (int step = 1; step < n; ++step) {
    next_step(s);
    uint64_t off, len;
    offsets(mod(r - step + 1, n), &off, &len);
    add(s, send(mod(r + 1, n), Buffer::Output, off, len));
    offsets(mod(r - step, n), &off, &len);
    add(s, recv(mod(r - 1, n), Buffer::Output, off, len));
  }
  s.divide_by_size = a.op == HMC_OP_AVG;
  return s;
}

// Direct: a reduce-scatter then an all-gather, each one step in which every rank exchanges a
// block with every other. Block j is reduced by rank j alone (in a fixed order), so every rank
// ends with the same bits.
Schedule all_reduce_direct(const CollArgs& a, const GroupShape& g, int r) {
  Schedule s;
  s.algorithm = "direct";
  size_t es = dtype_size(a.dtype);
  int n = g.size;
  auto at = [&](int i, uint64_t* off, uint64_t* len) {
    block(a.count, n, i, off, len);
    *off *= es;
    *len *= es;
  };
  next_step(s);
  if (!a.in_place) add(s, copy(Buffer::Input, 0, Buffer::Output, 0, a.count * es));
  uint64_t mo, ml, off, len;
  at(r, &mo, &ml);
  next_step(s);
  for (int k = 1; k < n; ++k) {
    int to = mod(r + k, n);
    at(to, &off, &len);
    add(s, send(to, Buffer::Output, off, len));
    add(s, recv(mod(r - k, n), Buffer::Output, mo, ml, true));
  }
  next_step(s);
  for (int k = 1; k < n; ++k) {
    int from = mod(r - k, n);
    add(s, send(mod(r + k, n), Buffer::Output, mo, ml));
    at(from, &off, &len);
    add(s, recv(from, Buffer::Output, off, len));
  }
  s.divide_by_size = a.op == HMC_OP_AVG;
  return s;
}

// Recursive doubling: log2 steps, each exchanging the whole vector with the partner across one
// bit. With n not a power of two, the first 2*(n - p) ranks pair up first (p the largest power of
// two below n): the even one of each pair hands its data to the odd one and sits out, getting the
// result back at the end. Every rank has the same steps, so that step numbers match.
Schedule all_reduce_doubling(const CollArgs& a, const GroupShape& g, int r) {
  Schedule s;
  s.algorithm = "recursive_doubling";
  uint64_t bytes = a.count * dtype_size(a.dtype);
  int n = g.size;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  int extra = n - p;
  next_step(s);
  if (!a.in_place) add(s, copy(Buffer::Input, 0, Buffer::Output, 0, bytes));
  int v;  // rank among the p that take part in the doubling, -1 for one sitting out
  if (r < 2 * extra)
    v = (r % 2) ? r / 2 : -1;
  else
    v = r - extra;
  auto real = [&](int vr) { return vr < extra ? vr * 2 + 1 : vr + extra; };
  if (extra > 0) {
    next_step(s);
    if (r < 2 * extra) {
      if (v < 0)
        add(s, send(r + 1, Buffer::Output, 0, bytes));
      else
        add(s, recv(r - 1, Buffer::Output, 0, bytes, true));
    }
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    next_step(s);
    if (v < 0) continue;
    int partner = real(v ^ mask);
    add(s, send(partner, Buffer::Output, 0, bytes));
    add(s, recv(partner, Buffer::Output, 0, bytes, true));
  }
  if (extra > 0) {
    next_step(s);
    if (r < 2 * extra) {
      if (v < 0)
        add(s, recv(r + 1, Buffer::Output, 0, bytes));
      else
        add(s, send(r - 1, Buffer::Output, 0, bytes));
    }
  }
  s.divide_by_size = a.op == HMC_OP_AVG;
  return s;
}

// Reduce to the root. The root reduces into Output; the other ranks reduce into Scratch (their
// Output is not theirs to write, and may be null) and leave their Input as it was.
//   tree: a binomial tree over ranks renumbered so that the root is 0; in step k a rank whose
//     bit k is set sends its partial vector to the rank 2^k below and is done, the others reduce
//     what the rank 2^k above sends. log2(n) steps of the whole vector: for small vectors.
//   direct: a direct reduce-scatter (every rank reduces its block from every other, one step),
//     then every rank sends its block to the root: an all-reduce's first half and a gather.
//   ring: the ring reduce-scatter, then the same gather.
// Each block is reduced in a fixed order, so the result does not depend on arrival order.
Schedule reduce_to_root(const CollArgs& a, const GroupShape& g, int r, Algorithm algo) {
  Schedule s;
  size_t es = dtype_size(a.dtype);
  uint64_t bytes = a.count * es;
  int n = g.size;
  bool root = r == a.root;
  Buffer work = root ? Buffer::Output : Buffer::Scratch;
  s.divide_by_size = root && a.op == HMC_OP_AVG;
  if (algo == Algorithm::Tree || a.count < uint64_t(n)) {
    s.algorithm = "tree";
    if (!root) s.scratch_bytes = bytes;
    next_step(s);
    if (!root || !a.in_place) add(s, copy(Buffer::Input, 0, work, 0, bytes));
    int v = mod(r - a.root, n);
    bool sent = false;
    for (int mask = 1; mask < n; mask <<= 1) {
      next_step(s);
      if (sent) continue;
      if (v & mask) {
        add(s, send(mod(v - mask + a.root, n), work, 0, bytes));
        sent = true;
      } else if (v + mask < n) {
        add(s, recv(mod(v + mask + a.root, n), work, 0, bytes, true));
      }
    }
    return s;
  }
  auto at = [&](int i, uint64_t* off, uint64_t* len) {
    block(a.count, n, i, off, len);
    *off *= es;
    *len *= es;
  };
  uint64_t mo, ml, off, len;
  at(r, &mo, &ml);
  // The last step: every other rank sends its reduced block (at `from` in its work buffer) to
  // the root, which receives each into its place in Output.
  auto gather = [&](uint64_t from) {
    next_step(s);
    if (!root) {
      add(s, send(a.root, work, from, ml));
      return;
    }
    for (int k = 1; k < n; ++k) {
      int p = mod(r + k, n);
      at(p, &off, &len);
      add(s, recv(p, Buffer::Output, off, len));
    }
  };
  if (algo == Algorithm::Direct) {
    s.algorithm = "direct";
    // A non-root rank needs room for its own block only.
    uint64_t base = root ? mo : 0;
    if (!root) s.scratch_bytes = ml;
    next_step(s);
    if (!root || !a.in_place) add(s, copy(Buffer::Input, mo, work, base, ml));
    next_step(s);
    for (int k = 1; k < n; ++k) {
      int to = mod(r + k, n);
      at(to, &off, &len);
      add(s, send(to, Buffer::Input, off, len));
      add(s, recv(mod(r - k, n), work, base, ml, true));
    }
    gather(base);
    return s;
  }
  s.algorithm = "ring";
  if (!root) s.scratch_bytes = bytes;
  next_step(s);
  if (!root || !a.in_place) add(s, copy(Buffer::Input, 0, work, 0, bytes));
  ring_reduce_scatter(s, work, n, r, at);
  gather(mo);
  return s;
}

Schedule all_reduce_flat(const CollArgs& a, const GroupShape& g, int r, Algorithm algo) {
  if (algo == Algorithm::Direct) return all_reduce_direct(a, g, r);
  bool ring = algo == Algorithm::Ring;
  if (algo != Algorithm::Ring && algo != Algorithm::RecursiveDoubling)
    ring = a.count * dtype_size(a.dtype) > kSmallAllReduceBytes && a.count >= uint64_t(g.size);
  return ring ? all_reduce_ring(a, g, r) : all_reduce_doubling(a, g, r);
}

// The ranks of each host, hosts in order of their first rank; empty when the shape does not say.
std::vector<std::vector<int>> ranks_by_host(const GroupShape& g) {
  std::vector<std::vector<int>> hosts;
  if (int(g.host_of_rank.size()) != g.size) return hosts;
  std::vector<int> index;  // host id -> position in hosts
  for (int k = 0; k < g.size; ++k) {
    int h = g.host_of_rank[size_t(k)];
    if (h < 0) return {};
    if (size_t(h) >= index.size()) index.resize(size_t(h) + 1, -1);
    if (index[size_t(h)] < 0) {
      index[size_t(h)] = int(hosts.size());
      hosts.emplace_back();
    }
    hosts[size_t(index[size_t(h)])].push_back(k);
  }
  return hosts;
}

// Hierarchical: the ranks of each host reduce into their host's leader (its first rank), the
// leaders all-reduce among themselves (ring or recursive doubling by size), and each leader
// hands the result back to its host's ranks. Only leaders cross hosts, once each way.
Schedule all_reduce_hierarchical(const CollArgs& a, const GroupShape& g, int r) {
  auto hosts = ranks_by_host(g);
  if (hosts.empty()) return all_reduce_flat(a, g, r, Algorithm::Auto);
  Schedule s;
  s.algorithm = "hierarchical";
  uint64_t bytes = a.count * dtype_size(a.dtype);
  int mine = 0;
  for (size_t h = 0; h < hosts.size(); ++h)
    for (int k : hosts[h])
      if (k == r) mine = int(h);
  const std::vector<int>& local = hosts[size_t(mine)];
  int leader = local[0];
  next_step(s);
  if (!a.in_place) add(s, copy(Buffer::Input, 0, Buffer::Output, 0, bytes));
  next_step(s);
  for (size_t i = 1; i < local.size(); ++i) {
    if (r == leader)
      add(s, recv(local[i], Buffer::Output, 0, bytes, true));
    else if (r == local[i])
      add(s, send(leader, Buffer::Output, 0, bytes));
  }
  // Every rank gets the leaders' steps (non-leaders as empty ones), so that step numbers match.
  GroupShape leaders;
  leaders.size = int(hosts.size());
  for (size_t h = 0; h < hosts.size(); ++h) {
    leaders.host_of_rank.push_back(int(h));
    leaders.vendor_of_rank.push_back(
        g.vendor_of_rank.size() == size_t(g.size) ? g.vendor_of_rank[size_t(hosts[h][0])] : "");
  }
  CollArgs across = a;
  across.in_place = true;
  Schedule inner = all_reduce_flat(across, leaders, mine, Algorithm::Auto);
  for (Step& step : inner.steps) {
    next_step(s);
    if (r != leader) continue;
    for (Action act : step.actions) {
      if (act.peer >= 0) act.peer = hosts[size_t(act.peer)][0];
      add(s, act);
    }
  }
  next_step(s);
  for (size_t i = 1; i < local.size(); ++i) {
    if (r == leader)
      add(s, send(local[i], Buffer::Output, 0, bytes));
    else if (r == local[i])
      add(s, recv(leader, Buffer::Output, 0, bytes));
  }
  s.divide_by_size = a.op == HMC_OP_AVG;
  return s;
}

// Hierarchical broadcast: the data crosses hosts once per host, down a binomial tree over the
// hosts from the root to each other host's leader (its first rank), then spreads within each host
// down a binomial tree from the rank that has it. Every rank gets every phase's steps (empty
// where it has no part, and as many within a host as the largest host needs), so that step
// numbers match.
Schedule broadcast_hierarchical(const CollArgs& a, const GroupShape& g, int r) {
  auto hosts = ranks_by_host(g);
  if (hosts.empty()) return broadcast(a, g, r, Algorithm::Tree);
  Schedule s;
  s.algorithm = "hierarchical";
  int mine = 0, root_host = 0;
  size_t most = 0;
  std::vector<int> entry;  // per host: the rank that has the data after the first phase
  for (size_t h = 0; h < hosts.size(); ++h) {
    entry.push_back(hosts[h][0]);
    most = std::max(most, hosts[h].size());
    for (int k : hosts[h]) {
      if (k == r) mine = int(h);
      if (k == a.root) {
        root_host = int(h);
        entry.back() = k;
      }
    }
  }
  GroupShape across;
  across.size = int(hosts.size());
  CollArgs between = a;
  between.root = root_host;
  for (Step& step : broadcast(between, across, mine, Algorithm::Tree).steps) {
    next_step(s);
    if (r != entry[size_t(mine)]) continue;
    for (Action act : step.actions) {
      act.peer = entry[size_t(act.peer)];
      add(s, act);
    }
  }
  const std::vector<int>& local = hosts[size_t(mine)];
  GroupShape host;
  host.size = int(local.size());
  CollArgs within = a;
  int me = 0;
  for (size_t i = 0; i < local.size(); ++i) {
    if (local[i] == entry[size_t(mine)]) within.root = int(i);
    if (local[i] == r) me = int(i);
  }
  Schedule inner = broadcast(within, host, me, Algorithm::Tree);
  for (size_t k = 0; (size_t(1) << k) < most; ++k) {
    next_step(s);
    if (k >= inner.steps.size()) continue;
    for (Action act : inner.steps[k].actions) {
      act.peer = local[size_t(act.peer)];
      add(s, act);
    }
  }
  return s;
}

// Hierarchical all-gather: each rank's block goes to its host's leader, the leaders pass their
// hosts' blocks round a ring (one step per other host, a host's blocks as runs of consecutive
// ranks), and each leader hands the whole result to the ranks of its host. Only leaders cross
// hosts; hosts whose ranks interleave so much that a host's blocks make more runs than a step
// can tag (kMaxRuns) take the ring over every rank instead.
Schedule all_gather_hierarchical(const CollArgs& a, const GroupShape& g, int r) {
  constexpr size_t kMaxRuns = 64;
  auto hosts = ranks_by_host(g);
  if (hosts.empty()) return all_gather(a, g, r, false);
  // Per host: (first rank, ranks) of each run of consecutive ranks.
  std::vector<std::vector<std::pair<int, int>>> runs(hosts.size());
  for (size_t h = 0; h < hosts.size(); ++h) {
    for (int k : hosts[h]) {
      if (!runs[h].empty() && runs[h].back().first + runs[h].back().second == k)
        ++runs[h].back().second;
      else
        runs[h].push_back({k, 1});
    }
    if (runs[h].size() > kMaxRuns) return all_gather(a, g, r, false);
  }
  Schedule s;
  s.algorithm = "hierarchical";
  uint64_t b = a.count * dtype_size(a.dtype);
  int n = g.size, nh = int(hosts.size()), mine = 0;
  for (size_t h = 0; h < hosts.size(); ++h)
    for (int k : hosts[h])
      if (k == r) mine = int(h);
  const std::vector<int>& local = hosts[size_t(mine)];
  int leader = local[0];
  next_step(s);
  if (!a.in_place) add(s, copy(Buffer::Input, 0, Buffer::Output, uint64_t(r) * b, b));
  next_step(s);
  for (size_t i = 1; i < local.size(); ++i) {
    if (r == leader)
      add(s, recv(local[i], Buffer::Output, uint64_t(local[i]) * b, b));
    else if (r == local[i])
      add(s, send(leader, Buffer::Output, uint64_t(r) * b, b));
  }
  int next = hosts[size_t(mod(mine + 1, nh))][0], prev = hosts[size_t(mod(mine - 1, nh))][0];
  for (int step = 1; step < nh; ++step) {
    next_step(s);
    if (r != leader) continue;
    for (auto [first, len] : runs[size_t(mod(mine - step + 1, nh))])
      add(s, send(next, Buffer::Output, uint64_t(first) * b, uint64_t(len) * b));
    for (auto [first, len] : runs[size_t(mod(mine - step, nh))])
      add(s, recv(prev, Buffer::Output, uint64_t(first) * b, uint64_t(len) * b));
  }
  next_step(s);
  for (size_t i = 1; i < local.size(); ++i) {
    if (r == leader)
      add(s, send(local[i], Buffer::Output, 0, uint64_t(n) * b));
    else if (r == local[i])
      add(s, recv(leader, Buffer::Output, 0, uint64_t(n) * b));
  }
  return s;
}

}  // namespace

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::Auto: return "auto";
    case Algorithm::Ring: return "ring";
    case Algorithm::RecursiveDoubling: return "recursive_doubling";
    case Algorithm::RecursiveHalving: return "recursive_halving";
    case Algorithm::Pairwise: return "pairwise";
    case Algorithm::Linear: return "linear";
    case Algorithm::Tree: return "tree";
    case Algorithm::Hierarchical: return "hierarchical";
    case Algorithm::Direct: return "direct";
  }
  return "?";
}

bool parse_algorithm(const std::string& name, Algorithm* out) {
  for (Algorithm a : {Algorithm::Auto, Algorithm::Ring, Algorithm::RecursiveDoubling,
                      Algorithm::RecursiveHalving, Algorithm::Pairwise, Algorithm::Linear,
                      Algorithm::Tree, Algorithm::Hierarchical, Algorithm::Direct}) {
    if (name == algorithm_name(a)) {
      *out = a;
      return true;
    }
  }
  if (name.empty()) {
    *out = Algorithm::Auto;
    return true;
  }
  return false;
}

Schedule make_schedule(const CollArgs& args, const GroupShape& shape, int rank, Algorithm algo) {
  // A forced algorithm that does not apply to this collective falls back to the choice by size
  // (one HMC_COLL_ALGO can then be set for a whole run).
  auto hosts = ranks_by_host(shape);
  bool direct = algo == Algorithm::Direct ||
                (algo == Algorithm::Auto && hosts.size() == 1 && shape.size <= kDirectMaxRanks);
  switch (args.kind) {
    case CollKind::Barrier: return barrier(shape, rank);
    case CollKind::Broadcast:
      if (algo == Algorithm::Hierarchical) return broadcast_hierarchical(args, shape, rank);
      return broadcast(args, shape, rank, algo == Algorithm::Linear ? algo : Algorithm::Tree);
    case CollKind::AllGather:
      if (algo == Algorithm::Hierarchical) return all_gather_hierarchical(args, shape, rank);
      return all_gather(args, shape, rank, direct);
    case CollKind::AllToAll:
    case CollKind::AllToAllV: return all_to_all(args, shape, rank, direct);
    case CollKind::ReduceScatter: return reduce_scatter(args, shape, rank, direct);
    case CollKind::Reduce: {
      // As the all-reduce chooses: direct within such a host from 16 KiB, else the ring above
      // 64 KiB, the tree below.
      uint64_t bytes = args.count * dtype_size(args.dtype);
      Algorithm form = algo;
      if (form != Algorithm::Tree && form != Algorithm::Ring && form != Algorithm::Direct) {
        if (direct && bytes >= kDirectAllReduceMinBytes)
          form = Algorithm::Direct;
        else
          form = bytes > kSmallAllReduceBytes ? Algorithm::Ring : Algorithm::Tree;
      }
      return reduce_to_root(args, shape, rank, form);
    }
    case CollKind::AllReduce: {
      // Across hosts with several ranks on some, the hierarchy unless an algorithm is forced.
      bool spans = hosts.size() > 1 && hosts.size() < size_t(shape.size);
      if (algo == Algorithm::Hierarchical || (algo == Algorithm::Auto && spans))
        return all_reduce_hierarchical(args, shape, rank);
      if (direct && (algo == Algorithm::Direct ||
                     args.count * dtype_size(args.dtype) >= kDirectAllReduceMinBytes))
        return all_reduce_direct(args, shape, rank);
      return all_reduce_flat(args, shape, rank, algo);
    }
  }
  return {};
}

}  // namespace hmc::coll
