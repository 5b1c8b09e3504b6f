#include "coll/ccl_schedules.h"

#include <algorithm>

#include "util/status.h"

namespace hmc::coll {

namespace {

int mod(int a, int n) {
  return ((a % n) + n) % n;
}

// Piece i of `count` elements cut into n nearly equal pieces (the first count % n one larger).
void piece(uint64_t count, int n, int i, uint64_t* first, uint64_t* len) {
  uint64_t base = count / uint64_t(n), rem = count % uint64_t(n);
  *first = uint64_t(i) * base + std::min<uint64_t>(uint64_t(i), rem);
  *len = base + (uint64_t(i) < rem ? 1 : 0);
}

Action transfer(ActionKind kind, int peer, uint64_t off, uint64_t bytes) {
  Action a;
  a.kind = kind;
  a.peer = peer;
  if (kind == ActionKind::Send)
    a.src = {Buffer::Output, off};
  else
    a.dst = {Buffer::Output, off};
  a.bytes = bytes;
  return a;
}

void add(Step& s, const Action& a) {
  if (a.bytes > 0) s.actions.push_back(a);
}

Step& library_step(Schedule& s, bool call) {
  s.steps.emplace_back();
  s.steps.back().ccl = true;
  s.steps.back().ccl_call = call;
  return s.steps.back();
}

// One group's rings. Every member owns block `index in group` of the buffer at the end of a
// reduce-scatter (so that counterpart ranks of two groups own the same bytes); channel c carries
// piece c of every block, round a ring that visits the hosts in order and, within each host,
// starts c ranks further on, so that the hop between two hosts leaves from a different rank (and
// NIC) in each channel.
class Rings {
 public:
  Rings(const Topology& topo, const std::vector<int>& members, int channels, uint64_t count,
        size_t elem)
      : n_(int(members.size())), channels_(channels), count_(count), elem_(elem) {
    std::vector<std::vector<int>> by_host;  // indices into members, per host in order
    int last = -1;
    for (int i = 0; i < n_; ++i) {
      int h = topo.host_of_rank[size_t(members[size_t(i)])];
      if (h != last) by_host.emplace_back();
      last = h;
      by_host.back().push_back(i);
    }
    order_.resize(size_t(channels));
    pos_.assign(size_t(channels), std::vector<int>(size_t(n_)));
    for (int c = 0; c < channels; ++c) {
      for (const auto& local : by_host)
        for (size_t k = 0; k < local.size(); ++k)
          order_[size_t(c)].push_back(local[(k + size_t(c)) % local.size()]);
      for (int p = 0; p < n_; ++p) pos_[size_t(c)][size_t(order_[size_t(c)][size_t(p)])] = p;
    }
    members_ = members;
  }

  // Channel c's share of the block that ring position p owns, in bytes.
  void at(int c, int p, uint64_t* off, uint64_t* len) const {
    uint64_t bfirst, blen, pfirst;
    piece(count_, n_, order_[size_t(c)][size_t(mod(p, n_))], &bfirst, &blen);
    piece(blen, channels_, c, &pfirst, len);
    *off = (bfirst + pfirst) * elem_;
    *len *= elem_;
  }
  int peer(int c, int p) const { return members_[size_t(order_[size_t(c)][size_t(mod(p, n_))])]; }

  // Ring reduce-scatter (`reduce`) or all-gather of member `me` (index in the group): n - 1
  // library steps, the first one the call's.
  void run(Schedule& s, int me, bool reduce, bool call) const {
    for (int step = 1; step < n_; ++step) {
      Step& st = library_step(s, call && step == 1);
      for (int c = 0; c < channels_; ++c) {
        int p = pos_[size_t(c)][size_t(me)];
        uint64_t off, len;
        at(c, reduce ? p - step : p - step + 1, &off, &len);
        add(st, transfer(ActionKind::Send, peer(c, p + 1), off, len));
        at(c, reduce ? p - step - 1 : p - step, &off, &len);
        add(st,
            transfer(reduce ? ActionKind::RecvReduce : ActionKind::Recv, peer(c, p - 1), off, len));
      }
    }
  }

 private:
  int n_, channels_;
  uint64_t count_;
  size_t elem_;
  std::vector<int> members_;
  std::vector<std::vector<int>> order_;  // per channel: ring position -> index in the group
  std::vector<std::vector<int>> pos_;    // per channel: index in the group -> ring position
};

void input_copy(Schedule& s, const CollArgs& a, uint64_t bytes, bool call) {
  Step& st = library_step(s, call);
  if (!a.in_place && bytes > 0) {
    Action c;
    c.kind = ActionKind::Copy;
    c.src = {Buffer::Input, 0};
    c.dst = {Buffer::Output, 0};
    c.bytes = bytes;
    st.actions.push_back(c);
  }
}

// Binomial reduce to index 0 of `ranks` (steps: ceil(log2 most)), or its mirror, the binomial
// broadcast from index 0. Members past ranks.size() get the steps empty.
void binomial(Schedule& s, const std::vector<int>& ranks, int me, size_t most, uint64_t bytes,
              bool reduce) {
  int n = int(ranks.size());
  std::vector<int> masks;
  for (int mask = 1; size_t(mask) < most; mask <<= 1) masks.push_back(mask);
  if (!reduce) std::reverse(masks.begin(), masks.end());
  for (int mask : masks) {
    Step& st = library_step(s, false);
    if (me < 0) continue;
    if (me % (2 * mask) == mask)
      add(st, transfer(reduce ? ActionKind::Send : ActionKind::Recv, ranks[size_t(me - mask)], 0,
                       bytes));
    else if (me % (2 * mask) == 0 && me + mask < n)
      add(st, transfer(reduce ? ActionKind::RecvReduce : ActionKind::Send, ranks[size_t(me + mask)],
                       0, bytes));
  }
}

// The library's tree all-reduce over `members`: reduce within each host to its first member,
// across the hosts' first members to the first host's, then the broadcast back down.
void tree_all_reduce(Schedule& s, const Topology& topo, const std::vector<int>& members, int rank,
                     uint64_t bytes) {
  std::vector<std::vector<int>> hosts;
  int last = -1;
  for (int m : members) {
    if (topo.host_of_rank[size_t(m)] != last) hosts.emplace_back();
    last = topo.host_of_rank[size_t(m)];
    hosts.back().push_back(m);
  }
  size_t most = 0;
  int mine = 0, me_local = 0;
  std::vector<int> leaders;
  for (size_t h = 0; h < hosts.size(); ++h) {
    most = std::max(most, hosts[h].size());
    leaders.push_back(hosts[h][0]);
    for (size_t k = 0; k < hosts[h].size(); ++k)
      if (hosts[h][k] == rank) {
        mine = int(h);
        me_local = int(k);
      }
  }
  int me_leader = me_local == 0 ? mine : -1;
  binomial(s, hosts[size_t(mine)], me_local, most, bytes, true);
  binomial(s, leaders, me_leader, leaders.size(), bytes, true);
  binomial(s, leaders, me_leader, leaders.size(), bytes, false);
  binomial(s, hosts[size_t(mine)], me_local, most, bytes, false);
}

// Each rank copies its contribution into its own published buffer (scratch block `me`), every
// rank receives every other's, then reduces them into its output one at a time: a copy of the
// first, n - 1 reductions, and the copy out of the accumulator.
void direct_all_reduce(Schedule& s, const std::vector<int>& members, int me, uint64_t bytes) {
  const int n = int(members.size());
  s.scratch_bytes = bytes * uint64_t(n + 1);
  auto local = [&](ActionKind kind, Buffer sb, uint64_t so, Buffer db, uint64_t dof) {
    Action c;
    c.kind = kind;
    c.src = {sb, so};
    c.dst = {db, dof};
    c.bytes = bytes;
    return c;
  };
  const uint64_t acc = bytes * uint64_t(n);
  add(library_step(s, true),
      local(ActionKind::Copy, Buffer::Input, 0, Buffer::Scratch, uint64_t(me) * bytes));
  Step& x = library_step(s, false);
  for (int k = 1; k < n; ++k) {
    Action snd = transfer(ActionKind::Send, members[size_t(mod(me + k, n))], 0, bytes);
    snd.src = {Buffer::Scratch, uint64_t(me) * bytes};
    Action rcv = transfer(ActionKind::Recv, members[size_t(mod(me - k, n))], 0, bytes);
    rcv.dst = {Buffer::Scratch, uint64_t(mod(me - k, n)) * bytes};
    add(x, snd);
    add(x, rcv);
  }
  add(library_step(s, false), local(ActionKind::Copy, Buffer::Scratch, 0, Buffer::Scratch, acc));
  Step& r = library_step(s, false);
  for (int k = 1; k < n; ++k)
    add(r, local(ActionKind::Reduce, Buffer::Scratch, uint64_t(k) * bytes, Buffer::Scratch, acc));
  add(library_step(s, false), local(ActionKind::Copy, Buffer::Scratch, acc, Buffer::Output, 0));
}

}  // namespace

const char* ccl_algo_name(CclAlgo a) {
  switch (a) {
    case CclAlgo::Auto: return "auto";
    case CclAlgo::Ring: return "ring";
    case CclAlgo::Tree: return "tree";
    case CclAlgo::Direct: return "direct";
  }
  return "?";
}

bool parse_ccl_algo(const std::string& name, CclAlgo* out) {
  for (CclAlgo a : {CclAlgo::Auto, CclAlgo::Ring, CclAlgo::Tree, CclAlgo::Direct})
    if (name == ccl_algo_name(a)) {
      *out = a;
      return true;
    }
  if (!name.empty()) return false;
  *out = CclAlgo::Auto;
  return true;
}

TopologyGroups topology_groups(const Topology& topo, bool per_host) {
  TopologyGroups vg;
  // Group key: vendor, or vendor and host.
  const size_t nv = topo.vendors.size();
  std::vector<int> group_of_key(per_host ? nv * topo.hosts.size() : nv, -1);
  for (int r = 0; r < topo.size(); ++r) {
    size_t v = size_t(topo.vendor_of_rank[size_t(r)]);
    size_t key = per_host ? size_t(topo.host_of_rank[size_t(r)]) * nv + v : v;
    if (group_of_key[key] < 0) {
      group_of_key[key] = int(vg.groups.size());
      vg.groups.emplace_back();
    }
    int g = group_of_key[key];
    vg.group_of_rank.push_back(g);
    vg.index_in_group.push_back(int(vg.groups[size_t(g)].size()));
    vg.groups[size_t(g)].push_back(r);
  }
  return vg;
}

hmc_status_t make_ccl_schedule(const CollArgs& a, const Topology& topo, const TopologyGroups& vg,
                               int rank, CclAlgo algo, Schedule* out) {
  const VendorSpec& v = topo.vendors[size_t(topo.vendor_of_rank[size_t(rank)])];
  if (v.ccl.library.empty())
    return fail(HMC_ERR_NOT_SUPPORTED,
                "rank {} is of vendor {}, which has no collective library in the topology (only "
                "the hmc backend runs it)",
                rank, v.name);
  const int g = vg.group_of_rank[size_t(rank)], me = vg.index_in_group[size_t(rank)];
  const std::vector<int>& members = vg.groups[size_t(g)];
  const size_t elem = dtype_size(a.dtype);
  const int channels = std::max(1, v.ccl.channels);
  Schedule s;
  if (vg.groups.size() == 1) {
    s.algorithm = v.ccl.library + " ";
    switch (a.kind) {
      case CollKind::AllReduce:
        if (algo == CclAlgo::Direct) {
          s.algorithm += "direct";
          direct_all_reduce(s, members, me, a.count * elem);
        } else if (algo == CclAlgo::Tree) {
          s.algorithm += "tree";
          input_copy(s, a, a.count * elem, true);
          tree_all_reduce(s, topo, members, rank, a.count * elem);
        } else {
          s.algorithm += "ring";
          Rings rings(topo, members, channels, a.count, elem);
          input_copy(s, a, a.count * elem, true);
          rings.run(s, me, true, false);
          rings.run(s, me, false, false);
        }
        break;
      case CollKind::ReduceScatter:
      case CollKind::AllGather: {
        // Modelled in the gathered buffer: the bytes each step moves are those of the library's.
        bool rs = a.kind == CollKind::ReduceScatter;
        s.algorithm += "ring";
        Rings rings(topo, members, channels, a.count * uint64_t(members.size()), elem);
        input_copy(s, a, rs ? a.count * elem * members.size() : a.count * elem, true);
        rings.run(s, me, rs, false);
        break;
      }
      default:
        return fail(HMC_ERR_NOT_SUPPORTED,
                    "the vendor libraries' model has all_reduce, reduce_scatter and all_gather");
    }
    s.divide_by_size = a.op == HMC_OP_AVG && a.kind != CollKind::AllGather;
    *out = std::move(s);
    return HMC_SUCCESS;
  }
  if (a.kind != CollKind::AllReduce)
    return fail(HMC_ERR_NOT_SUPPORTED,
                "the hierarchical form over vendor groups is modelled for all_reduce only");
  return make_ccl_hierarchical_all_reduce(a, topo, vg, rank, out);
}

hmc_status_t make_ccl_hierarchical_all_reduce(const CollArgs& a, const Topology& topo,
                                              const TopologyGroups& vg, int rank, Schedule* out) {
  const VendorSpec& v = topo.vendors[size_t(topo.vendor_of_rank[size_t(rank)])];
  const int g = vg.group_of_rank[size_t(rank)], me = vg.index_in_group[size_t(rank)];
  const std::vector<int>& members = vg.groups[size_t(g)];
  const size_t elem = dtype_size(a.dtype);
  const int channels = std::max(1, v.ccl.channels);
  Schedule s;
  for (const auto& grp : vg.groups) {
    const VendorSpec& gv = topo.vendors[size_t(topo.vendor_of_rank[size_t(grp[0])])];
    if (gv.ccl.library.empty())
      return fail(HMC_ERR_NOT_SUPPORTED,
                  "rank {} is of vendor {}, which has no collective library in the topology",
                  grp[0], gv.name);
    if (grp.size() != members.size())
      return fail(HMC_ERR_NOT_SUPPORTED,
                  "the vendor groups differ in size ({} {} ranks, {} {}): the model pairs "
                  "counterpart ranks and has no leaders",
                  v.name, members.size(), gv.name, grp.size());
  }
  // 1. Reduce-scatter within the group, in its library: member `me` ends with block `me`.
  s.algorithm = "hierarchical_ccl";
  Rings rings(topo, members, channels, a.count, elem);
  input_copy(s, a, a.count * elem, true);
  rings.run(s, me, true, false);
  // 2. All-reduce of block `me` across the groups, between counterpart ranks, on hmc's paths
  // with hmc's algorithm (recursive doubling for two groups, one exchange; the ring for more, so
  // that every counterpart set has the same steps).
  uint64_t first, len;
  piece(a.count, int(members.size()), me, &first, &len);
  GroupShape across;
  across.size = int(vg.groups.size());
  for (const auto& grp : vg.groups) {
    int peer = grp[size_t(me)];
    across.host_of_rank.push_back(topo.host_of_rank[size_t(peer)]);
    across.vendor_of_rank.push_back(topo.vendors[size_t(topo.vendor_of_rank[size_t(peer)])].name);
  }
  CollArgs shard = a;
  shard.count = len;
  shard.in_place = true;
  Schedule inner = make_schedule(shard, across, g,
                                 across.size == 2 ? Algorithm::RecursiveDoubling : Algorithm::Ring);
  for (Step step : inner.steps) {
    for (Action& act : step.actions) {
      if (act.peer >= 0) act.peer = vg.groups[size_t(act.peer)][size_t(me)];
      if (act.src.buffer == Buffer::Output) act.src.offset += first * elem;
      if (act.dst.buffer == Buffer::Output) act.dst.offset += first * elem;
    }
    s.steps.push_back(std::move(step));
  }
  // 3. All-gather within the group, in its library.
  rings.run(s, me, false, true);
  s.divide_by_size = a.op == HMC_OP_AVG;
  *out = std::move(s);
  return HMC_SUCCESS;
}

}  // namespace hmc::coll
