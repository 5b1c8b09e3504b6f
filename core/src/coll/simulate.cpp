#include "coll/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <queue>
#include <tuple>

#include "util/status.h"

namespace hmc::coll {

namespace {

constexpr double kBytesPerNsPerGbps = 0.125;  // 1 Gb/s = 10^9 bits/s = 0.125 bytes/ns
constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr int kMaxResources = 6;

const char* action_name(ActionKind k) {
  switch (k) {
    case ActionKind::Send: return "Send";
    case ActionKind::Recv: return "Recv";
    case ActionKind::RecvReduce: return "RecvReduce";
    case ActionKind::Copy: return "Copy";
    case ActionKind::Reduce: return "Reduce";
  }
  return "?";
}

std::string ordinal(uint32_t k) {
  const char* suffix = (k % 100 >= 11 && k % 100 <= 13) ? "th"
                       : k % 10 == 1                    ? "st"
                       : k % 10 == 2                    ? "nd"
                       : k % 10 == 3                    ? "rd"
                                                        : "th";
  return std::to_string(k) + suffix;
}

// One side of a transfer, for matching: the k-th action from src to dst in a step.
struct End {
  uint32_t step, src, dst, k;
  uint32_t action;  // global action index
  bool operator<(const End& o) const {
    return std::tie(step, src, dst, k) < std::tie(o.step, o.src, o.dst, o.k);
  }
  bool same_key(const End& o) const {
    return step == o.step && src == o.src && dst == o.dst && k == o.k;
  }
};

// A transfer (matched Send and Recv) or a local Copy or Reduce: posted by its rank(s), then
// latency, then its bytes drained through the resources it uses.
struct Op {
  uint64_t bytes = 0;
  double ready_ns = 0;  // when the last of its ranks posted it
  int32_t src = -1;     // the sender, or the rank of a local op
  int32_t dst = -1;     // the receiver; -1 for a local op
  ActionKind kind = ActionKind::Send;
  uint8_t posts_left = 0;
  bool ccl = false;  // inside a vendor library: over the vendor's fabric within a host
};

// Per rank: its intra-host ports per path and direction, then its copy, reduce and network
// staging engines. NICs (tx and rx), host memories and host CPUs are numbered after all ranks.
enum RankResource : uint32_t {
  kPortOut = 0,                          // + IntraPath
  kPortIn = kPortOut + kIntraPathCount,  // + IntraPath
  kCopy = kPortIn + kIntraPathCount,
  kReduce,
  kStageOut,
  kStageIn,
  kFabricOut,  // the vendor fabric's port (transfers inside its collective library)
  kFabricIn,
  kRankResources
};

struct Resource {
  double capacity = 0;  // bytes/ns; 0: unlimited (never attached to a flow)
  std::vector<uint32_t> flows;
  double weight = 0;  // the live flows' weights: each takes weight x its rate of the capacity
  double bytes = 0;   // drained through it over the whole run
};

// An op in its draining phase.
struct Flow {
  uint32_t op = kNone;
  uint32_t res[kMaxResources];
  uint32_t pos[kMaxResources];  // its index in each resource's flow list
  double w[kMaxResources];      // bytes of the resource per byte of the flow (a single-copy
                                // transfer costs the CPUs and the memory half a ring one's)
  int nres = 0;
  double cap = 0;        // bytes/ns of its own link; 0: none
  double remaining = 0;  // bytes
  double rate = 0;       // bytes/ns
  double last_ns = 0;    // when remaining was last brought up to date
  uint32_t version = 0;  // bumped at each new finish time: older events are stale
  uint32_t dirty_epoch = 0;
};

enum class EventKind : uint8_t { Start, Finish };
struct Event {
  double t;
  uint64_t seq;
  uint32_t id;  // op (Start) or flow (Finish)
  uint32_t version;
  EventKind kind;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

class Simulator {
 public:
  Simulator(const std::vector<Schedule>& s, const Topology& topo) : scheds_(s), topo_(topo) {}

  hmc_status_t run(SimResult* out) {
    hmc_status_t st = flatten();
    if (st == HMC_SUCCESS) st = match();
    if (st != HMC_SUCCESS) return st;
    make_resources();
    const int n = topo_.size();
    rank_step_.assign(n, 0);
    rank_left_.assign(n, 0);
    rank_end_.assign(n, -1.0);
    for (int r = 0; r < n; ++r) enter_step(r, 0, 0.0);
    while (!events_.empty()) {
      double t = events_.top().t;
      while (!events_.empty() && events_.top().t == t) {
        Event e = events_.top();
        events_.pop();
        ++result_.events;
        if (e.kind == EventKind::Start)
          start(e.id, t);
        else if (flows_[e.id].version == e.version)
          finish_flow(e.id, t);
      }
      update_rates(t);
    }
    double end = 0;
    for (int r = 0; r < n; ++r) {
      if (rank_end_[r] < 0)
        return fail(HMC_ERR_INTERNAL, "simulate: rank {} stalled in step {} of {}", r,
                    rank_step_[r], scheds_[r].steps.size());
      end = std::max(end, rank_end_[r]);
      result_.rank_end_us.push_back(rank_end_[r] / 1000);
    }
    result_.time_us = end / 1000;
    find_bottleneck();
    *out = std::move(result_);
    return HMC_SUCCESS;
  }

 private:
  // Numbers every action (rank-major, then step, then position) and checks what one rank's
  // schedule alone can get wrong.
  hmc_status_t flatten() {
    const int n = topo_.size();
    if (static_cast<int>(scheds_.size()) != n)
      return fail(HMC_ERR_INVALID_ARGUMENT,
                  "simulate: {} schedules for a topology of {} ranks (one per rank)",
                  scheds_.size(), n);
    rank_base_.resize(n);
    uint64_t total = 0;
    for (int r = 0; r < n; ++r) {
      rank_base_[r] = static_cast<uint32_t>(step_off_.size());
      for (size_t s = 0; s < scheds_[r].steps.size(); ++s) {
        step_off_.push_back(total);
        const VendorSpec& v = topo_.vendors[topo_.vendor_of_rank[r]];
        if (scheds_[r].steps[s].ccl && v.ccl.library.empty() &&
            !scheds_[r].steps[s].actions.empty())
          return fail(HMC_ERR_INVALID_ARGUMENT,
                      "simulate: rank {}, step {}: a step of a vendor library, but the rank's "
                      "vendor ({}) has none",
                      r, s, v.name);
        for (size_t i = 0; i < scheds_[r].steps[s].actions.size(); ++i) {
          const Action& a = scheds_[r].steps[s].actions[i];
          bool remote = a.kind == ActionKind::Send || a.kind == ActionKind::Recv ||
                        a.kind == ActionKind::RecvReduce;
          bool local = a.kind == ActionKind::Copy || a.kind == ActionKind::Reduce;
          if (!remote && !local)
            return fail(HMC_ERR_INVALID_ARGUMENT, "simulate: rank {}, step {}, action {}: kind {}",
                        r, s, i, static_cast<int>(a.kind));
          if (remote && (a.peer < 0 || a.peer >= n || a.peer == r))
            return fail(HMC_ERR_INVALID_ARGUMENT,
                        "simulate: rank {}, step {}, action {}: {} with peer {} (wants another "
                        "rank of 0..{})",
                        r, s, i, action_name(a.kind), a.peer, n - 1);
          if (remote && scheds_[r].steps[s].ccl &&
              topo_.vendor_of_rank[a.peer] != topo_.vendor_of_rank[r])
            return fail(HMC_ERR_INVALID_ARGUMENT,
                        "simulate: rank {}, step {}, action {}: {} with rank {} inside the {} "
                        "library, but rank {} is of vendor {} (a library serves one vendor)",
                        r, s, i, action_name(a.kind), a.peer, v.ccl.library, a.peer,
                        topo_.vendors[topo_.vendor_of_rank[a.peer]].name);
          ++total;
        }
      }
      step_off_.push_back(total);
    }
    if (total >= kNone)
      return fail(HMC_ERR_INVALID_ARGUMENT, "simulate: {} actions is more than it handles", total);
    action_op_.assign(total, kNone);
    return HMC_SUCCESS;
  }

  const Action& action_at(int rank, uint32_t step, uint32_t global) const {
    uint64_t first = step_off_[rank_base_[rank] + step];
    return scheds_[rank].steps[step].actions[global - first];
  }

  // Pairs every Send with its Recv (schedule.h's rule) and makes one op per transfer and per
  // local action.
  hmc_status_t match() {
    const int n = topo_.size();
    std::vector<End> sends, recvs;
    std::vector<uint32_t> count_to(n, 0), count_from(n, 0);
    std::vector<int> touched;
    uint32_t g = 0;
    for (int r = 0; r < n; ++r) {
      for (uint32_t s = 0; s < scheds_[r].steps.size(); ++s) {
        touched.clear();
        for (const Action& a : scheds_[r].steps[s].actions) {
          uint32_t id = g++;
          if (a.kind == ActionKind::Send) {
            touched.push_back(a.peer);
            sends.push_back({s, uint32_t(r), uint32_t(a.peer), count_to[a.peer]++, id});
          } else if (a.kind == ActionKind::Recv || a.kind == ActionKind::RecvReduce) {
            touched.push_back(a.peer);
            recvs.push_back({s, uint32_t(a.peer), uint32_t(r), count_from[a.peer]++, id});
          } else {
            Op op;
            op.bytes = a.bytes;
            op.src = r;
            op.kind = a.kind;
            op.posts_left = 1;
            op.ccl = scheds_[r].steps[s].ccl;
            action_op_[id] = static_cast<uint32_t>(ops_.size());
            ops_.push_back(op);
            ++result_.local_ops;
          }
        }
        for (int p : touched) count_to[p] = count_from[p] = 0;
      }
    }
    std::sort(sends.begin(), sends.end());
    std::sort(recvs.begin(), recvs.end());
    size_t i = 0, j = 0;
    while (i < sends.size() || j < recvs.size()) {
      if (j == recvs.size() || (i < sends.size() && sends[i] < recvs[j]))
        return unmatched(sends[i], true);
      if (i == sends.size() || recvs[j] < sends[i]) return unmatched(recvs[j], false);
      const End& se = sends[i++];
      const End& re = recvs[j++];
      const Action& sa = action_at(se.src, se.step, se.action);
      const Action& ra = action_at(re.dst, re.step, re.action);
      if (sa.bytes != ra.bytes)
        return fail(HMC_ERR_INVALID_ARGUMENT,
                    "simulate: step {}: rank {} sends {} bytes to rank {} (its {} Send to it in "
                    "the step) but rank {} receives {} bytes",
                    se.step, se.src, sa.bytes, se.dst, ordinal(se.k + 1), se.dst, ra.bytes);
      bool sccl = scheds_[se.src].steps[se.step].ccl, rccl = scheds_[re.dst].steps[re.step].ccl;
      if (sccl != rccl)
        return fail(HMC_ERR_INVALID_ARGUMENT,
                    "simulate: step {}: rank {} sends to rank {} {} its vendor library but rank {} "
                    "receives {} it",
                    se.step, se.src, se.dst, sccl ? "inside" : "outside", se.dst,
                    rccl ? "inside" : "outside");
      Op op;
      op.ccl = sccl;
      op.bytes = sa.bytes;
      op.src = static_cast<int32_t>(se.src);
      op.dst = static_cast<int32_t>(se.dst);
      op.kind = ra.kind;
      op.posts_left = 2;
      action_op_[se.action] = action_op_[re.action] = static_cast<uint32_t>(ops_.size());
      ops_.push_back(op);
      ++result_.transfers;
      result_.bytes_sent += op.bytes;
    }
    return HMC_SUCCESS;
  }

  hmc_status_t unmatched(const End& e, bool is_send) {
    int owner = is_send ? e.src : e.dst;
    const Action& a = action_at(owner, e.step, e.action);
    if (is_send)
      return fail(HMC_ERR_INVALID_ARGUMENT,
                  "simulate: rank {}, step {}: Send of {} bytes to rank {} (its {} to that rank "
                  "in the step) has no matching Recv on rank {} in step {}",
                  e.src, e.step, a.bytes, e.dst, ordinal(e.k + 1), e.dst, e.step);
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "simulate: rank {}, step {}: {} of {} bytes from rank {} (its {} from that rank "
                "in the step) has no matching Send on rank {} in step {}",
                e.dst, e.step, action_name(a.kind), a.bytes, e.src, ordinal(e.k + 1), e.src,
                e.step);
  }

  void make_resources() {
    const int n = topo_.size();
    nic_base_ = static_cast<uint32_t>(n) * kRankResources;
    uint32_t nics = 0;
    for (const HostSpec& h : topo_.hosts) {
      host_nic_base_.push_back(nics);
      nics += static_cast<uint32_t>(h.nics.size());
    }
    mem_base_ = nic_base_ + 2 * nics;
    cpu_base_ = mem_base_ + static_cast<uint32_t>(topo_.hosts.size());
    resources_.resize(cpu_base_ + topo_.hosts.size());
    for (int r = 0; r < n; ++r) {
      const VendorSpec& v = topo_.vendors[topo_.vendor_of_rank[r]];
      Resource* rr = &resources_[static_cast<size_t>(r) * kRankResources];
      for (int p = 0; p < kIntraPathCount; ++p)
        rr[kPortOut + p].capacity = rr[kPortIn + p].capacity =
            topo_.paths[p].gbps * kBytesPerNsPerGbps;
      rr[kCopy].capacity = v.copy_gbps * kBytesPerNsPerGbps;
      rr[kReduce].capacity = v.reduce_gbps * kBytesPerNsPerGbps;
      rr[kStageOut].capacity = rr[kStageIn].capacity = v.copy_gbps * kBytesPerNsPerGbps;
      rr[kFabricOut].capacity = rr[kFabricIn].capacity = v.ccl.fabric.gbps * kBytesPerNsPerGbps;
    }
    for (size_t h = 0; h < topo_.hosts.size(); ++h) {
      for (size_t k = 0; k < topo_.hosts[h].nics.size(); ++k) {
        uint32_t id = nic_base_ + 2 * (host_nic_base_[h] + static_cast<uint32_t>(k));
        resources_[id].capacity = resources_[id + 1].capacity =
            topo_.hosts[h].nics[k].gbps * kBytesPerNsPerGbps;
      }
      resources_[mem_base_ + h].capacity = topo_.hosts[h].memory_gbps * kBytesPerNsPerGbps;
      const HostSpec& hs = topo_.hosts[h];
      int cores = hs.cores > 0 ? hs.cores : static_cast<int>(hs.ranks.size());
      resources_[cpu_base_ + h].capacity = cores * hs.cpu_gbps * kBytesPerNsPerGbps;
    }
  }

  // The resource whose bytes take longest at its full capacity: a lower bound on the time, and
  // what to look at first when a prediction is slower than hoped.
  void find_bottleneck() {
    double worst = 0;
    uint32_t at = kNone;
    for (uint32_t id = 0; id < resources_.size(); ++id) {
      const Resource& r = resources_[id];
      if (r.capacity > 0 && r.bytes > 0) result_.resource_bytes[resource_name(id)] = r.bytes;
      if (r.capacity > 0 && r.bytes / r.capacity > worst) {
        worst = r.bytes / r.capacity;
        at = id;
      }
    }
    if (at == kNone) return;
    result_.bottleneck = resource_name(at);
    result_.bottleneck_us = worst / 1000;
  }

  std::string resource_name(uint32_t id) const {
    if (id >= cpu_base_) return fmt::format("{} CPU", topo_.hosts[id - cpu_base_].name);
    if (id >= mem_base_) return fmt::format("{} memory", topo_.hosts[id - mem_base_].name);
    if (id >= nic_base_) {
      uint32_t nic = (id - nic_base_) / 2;
      size_t h = std::upper_bound(host_nic_base_.begin(), host_nic_base_.end(), nic) -
                 host_nic_base_.begin() - 1;
      return fmt::format("{} NIC {} {}", topo_.hosts[h].name, nic - host_nic_base_[h],
                         (id - nic_base_) % 2 ? "receive" : "send");
    }
    uint32_t rank = id / kRankResources, which = id % kRankResources;
    if (which < kPortIn)
      return fmt::format("rank {} {} out", rank, intra_path_name(static_cast<IntraPath>(which)));
    if (which < kCopy)
      return fmt::format("rank {} {} in", rank,
                         intra_path_name(static_cast<IntraPath>(which - kPortIn)));
    const char* engine[] = {"copy",       "reduction",  "staging out",
                            "staging in", "fabric out", "fabric in"};
    return fmt::format("rank {} {}", rank, engine[which - kCopy]);
  }

  uint32_t rank_resource(int rank, uint32_t which) const {
    return static_cast<uint32_t>(rank) * kRankResources + which;
  }

  // What an op goes through: its resources, its own link's rate and its latency.
  void route(const Op& op, Flow* f, double* latency_ns) const {
    f->nres = 0;
    f->cap = 0;
    auto use = [&](uint32_t id, double weight = 1) {
      if (resources_[id].capacity > 0) {
        f->w[f->nres] = weight;
        f->res[f->nres++] = id;
      }
    };
    const VendorSpec& sv = topo_.vendors[topo_.vendor_of_rank[op.src]];
    if (op.dst < 0) {
      use(rank_resource(op.src, op.kind == ActionKind::Copy ? kCopy : kReduce));
      // A host rank's copies and reductions run through the same memory and CPUs as its host's
      // transfers.
      if (sv.name == "host") {
        use(mem_base_ + static_cast<uint32_t>(topo_.host_of_rank[op.src]));
        use(cpu_base_ + static_cast<uint32_t>(topo_.host_of_rank[op.src]));
      }
      *latency_ns = sv.op_latency_us * 1000;
      return;
    }
    const VendorSpec& dv = topo_.vendors[topo_.vendor_of_rank[op.dst]];
    int hs = topo_.host_of_rank[op.src], hd = topo_.host_of_rank[op.dst];
    if (hs == hd && op.ccl) {
      // Inside the vendor's library: its own fabric, not hmc's paths.
      use(rank_resource(op.src, kFabricOut));
      use(rank_resource(op.dst, kFabricIn));
      f->cap = (sv.ccl.pair_gbps > 0 ? sv.ccl.pair_gbps : sv.ccl.fabric.gbps) * kBytesPerNsPerGbps;
      *latency_ns = sv.ccl.fabric.latency_us * 1000;
    } else if (hs == hd) {
      Link link;
      IntraPath p = topo_.intra_path(op.src, op.dst, &link);
      // A large shared-memory message crosses by one copy instead of two: its own link, and
      // half the memory traffic and CPU time per byte.
      const SingleCopy& one = topo_.shm_single_copy;
      bool single = p == IntraPath::SharedMemory && one.bytes > 0 && op.bytes > one.bytes;
      if (single) {
        if (one.link.gbps > 0) link.gbps = one.link.gbps;
        if (one.link.latency_us >= 0) link.latency_us = one.link.latency_us;
      }
      double weight = single ? 0.5 : 1;
      // (Not through the ring's ports: the receiver reads the sender's buffer.)
      if (!single) {
        use(rank_resource(op.src, kPortOut + static_cast<uint32_t>(p)));
        use(rank_resource(op.dst, kPortIn + static_cast<uint32_t>(p)));
      }
      if (p != IntraPath::DeviceIpc) use(mem_base_ + static_cast<uint32_t>(hs), weight);
      // Shared-memory transfers are copies the host's CPUs make (staging copies are the devices'
      // copy engines').
      if (p == IntraPath::SharedMemory) use(cpu_base_ + static_cast<uint32_t>(hs), weight);
      f->cap = link.gbps * kBytesPerNsPerGbps;
      *latency_ns = link.latency_us * 1000;
    } else {
      const Link& ns = topo_.hosts[hs].nics[topo_.nic_of_rank[op.src]];
      const Link& nd = topo_.hosts[hd].nics[topo_.nic_of_rank[op.dst]];
      use(nic_base_ + 2 * (host_nic_base_[hs] + static_cast<uint32_t>(topo_.nic_of_rank[op.src])));
      use(nic_base_ + 2 * (host_nic_base_[hd] + static_cast<uint32_t>(topo_.nic_of_rank[op.dst])) +
          1);
      if (sv.name != "host" && !sv.gpudirect) use(rank_resource(op.src, kStageOut));
      if (dv.name != "host" && !dv.gpudirect) use(rank_resource(op.dst, kStageIn));
      *latency_ns = std::max(ns.latency_us, nd.latency_us) * 1000;
    }
    if (op.kind == ActionKind::RecvReduce) use(rank_resource(op.dst, kReduce));
  }

  void push(double t, uint32_t id, uint32_t version, EventKind kind) {
    events_.push({t, seq_++, id, version, kind});
  }

  // Rank r begins step s at t (or ends, past its last step), skipping empty steps.
  void enter_step(int r, uint32_t s, double t) {
    const auto& steps = scheds_[r].steps;
    // A library call whose first step is empty still costs the call, in its next step.
    bool call = false;
    while (s < steps.size() && steps[s].actions.empty()) {
      call = call || steps[s].ccl_call;
      ++s;
    }
    rank_step_[r] = s;
    if (s == steps.size()) {
      rank_end_[r] = t;
      return;
    }
    uint64_t first = step_off_[rank_base_[r] + s], last = step_off_[rank_base_[r] + s + 1];
    rank_left_[r] = static_cast<uint32_t>(last - first);
    // The executor's software cost: nothing of the step starts before the rank has posted it,
    // and a rank without a core of its own waits for one.
    uint32_t transfers = 0;
    for (const Action& a : steps[s].actions) transfers += a.peer >= 0;
    double posted;
    if (steps[s].ccl) {
      // The library's kernel runs the step: its cost per step, and per call at the first; the
      // call is the host's work (the launch), slowed as hmc's is on a host short of cores.
      const CclSpec& lib = topo_.vendors[topo_.vendor_of_rank[r]].ccl;
      call = call || steps[s].ccl_call;
      posted =
          t + (lib.step_us +
               (call ? lib.call_us * topo_.hosts[topo_.host_of_rank[r]].oversubscription() : 0)) *
                  1000;
    } else {
      posted = t + (topo_.executor.step_us + topo_.executor.transfer_us * transfers) * 1000 *
                       topo_.hosts[topo_.host_of_rank[r]].oversubscription();
    }
    for (uint64_t g = first; g < last; ++g) {
      uint32_t id = action_op_[g];
      Op& op = ops_[id];
      op.ready_ns = std::max(op.ready_ns, posted);
      if (--op.posts_left == 0) {
        Flow f;
        double latency = 0;
        route(op, &f, &latency);
        push(op.ready_ns + latency, id, 0, EventKind::Start);
      }
    }
  }

  void op_done(uint32_t id, double t) {
    const Op& op = ops_[id];
    for (int r : {op.src, op.dst})
      if (r >= 0 && --rank_left_[r] == 0) enter_step(r, rank_step_[r] + 1, t);
  }

  // Both ranks posted the op and its latency has passed: its bytes start to flow.
  void start(uint32_t id, double t) {
    const Op& op = ops_[id];
    Flow f;
    double latency = 0;
    route(op, &f, &latency);
    if (op.bytes == 0 || (f.nres == 0 && f.cap == 0)) {
      op_done(id, t);
      return;
    }
    f.op = id;
    f.remaining = static_cast<double>(op.bytes);
    f.last_ns = t;
    uint32_t fid;
    if (!free_flows_.empty()) {
      fid = free_flows_.back();
      free_flows_.pop_back();
    } else {
      fid = static_cast<uint32_t>(flows_.size());
      flows_.emplace_back();
    }
    f.version = flows_[fid].version + 1;
    f.dirty_epoch = flows_[fid].dirty_epoch;
    flows_[fid] = f;
    Flow& nf = flows_[fid];
    for (int k = 0; k < nf.nres; ++k) {
      auto& list = resources_[nf.res[k]].flows;
      nf.pos[k] = static_cast<uint32_t>(list.size());
      list.push_back(fid);
      resources_[nf.res[k]].weight += nf.w[k];
    }
    mark_neighbours(fid, t);
  }

  void finish_flow(uint32_t fid, double t) {
    Flow& f = flows_[fid];
    for (int k = 0; k < f.nres; ++k) {
      auto& list = resources_[f.res[k]].flows;
      Resource& res = resources_[f.res[k]];
      res.weight = list.size() > 1 ? res.weight - f.w[k] : 0;  // no drift left when it empties
      uint32_t moved = list.back();
      list[f.pos[k]] = moved;
      list.pop_back();
      if (moved != fid) {
        Flow& m = flows_[moved];
        for (int q = 0; q < m.nres; ++q)
          if (m.res[q] == f.res[k]) m.pos[q] = f.pos[k];
      }
    }
    uint32_t op = f.op;
    for (int k = 0; k < f.nres; ++k)
      resources_[f.res[k]].bytes += f.w[k] * static_cast<double>(ops_[op].bytes);
    f.op = kNone;
    ++f.version;  // its pending events, if any, are stale now
    mark_neighbours(fid, t);
    free_flows_.push_back(fid);
    op_done(op, t);
  }

  // The flows sharing a resource with fid (and fid itself, if live) get new rates at the end
  // of this instant; their progress so far is booked at the old rates now.
  void mark(uint32_t fid, double t) {
    Flow& f = flows_[fid];
    if (f.op == kNone || f.dirty_epoch == epoch_) return;
    f.dirty_epoch = epoch_;
    f.remaining = std::max(0.0, f.remaining - f.rate * (t - f.last_ns));
    f.last_ns = t;
    dirty_.push_back(fid);
  }
  void mark_neighbours(uint32_t fid, double t) {
    mark(fid, t);
    const Flow& f = flows_[fid];
    for (int k = 0; k < f.nres; ++k)
      for (uint32_t other : resources_[f.res[k]].flows) mark(other, t);
  }

  // Each flow drains at its fair share of its tightest resource: every flow on a resource at the
  // same rate, capacity / the flows' weights (capacity / flows when all weigh 1).
  void update_rates(double t) {
    for (uint32_t fid : dirty_) {
      Flow& f = flows_[fid];
      if (f.op == kNone) continue;
      double rate = f.cap > 0 ? f.cap : std::numeric_limits<double>::infinity();
      for (int k = 0; k < f.nres; ++k) {
        const Resource& r = resources_[f.res[k]];
        rate = std::min(rate, r.capacity / r.weight);
      }
      f.rate = rate;
      push(t + f.remaining / rate, fid, ++f.version, EventKind::Finish);
    }
    dirty_.clear();
    ++epoch_;
  }

  const std::vector<Schedule>& scheds_;
  const Topology& topo_;
  std::vector<uint32_t> rank_base_;  // per rank: its first entry in step_off_
  std::vector<uint64_t> step_off_;   // per rank and step: its first global action
  std::vector<uint32_t> action_op_;  // global action -> op
  std::vector<Op> ops_;
  std::vector<Resource> resources_;
  uint32_t nic_base_ = 0, mem_base_ = 0, cpu_base_ = 0;
  std::vector<uint32_t> host_nic_base_;
  std::vector<Flow> flows_;
  std::vector<uint32_t> free_flows_;
  std::vector<uint32_t> dirty_;
  uint32_t epoch_ = 1;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t seq_ = 0;
  std::vector<uint32_t> rank_step_, rank_left_;
  std::vector<double> rank_end_;
  SimResult result_;
};

}  // namespace

hmc_status_t simulate(const std::vector<Schedule>& schedules, const Topology& topo,
                      SimResult* out) {
  return Simulator(schedules, topo).run(out);
}

uint64_t algbw_bytes(CollKind kind, uint64_t count, size_t elem, int n) {
  switch (kind) {
    case CollKind::Barrier: return 0;
    case CollKind::Broadcast:
    case CollKind::AllReduce:
    case CollKind::Reduce: return count * elem;
    case CollKind::AllGather:
    case CollKind::ReduceScatter:
    case CollKind::AllToAll:
    case CollKind::AllToAllV: return count * elem * static_cast<uint64_t>(n);
  }
  return 0;
}

double busbw_factor(CollKind kind, int n) {
  if (n <= 0) return 0;
  switch (kind) {
    case CollKind::Barrier: return 0;
    case CollKind::Broadcast:
    case CollKind::Reduce: return 1;
    case CollKind::AllReduce: return 2.0 * (n - 1) / n;
    case CollKind::AllGather:
    case CollKind::ReduceScatter:
    case CollKind::AllToAll:
    case CollKind::AllToAllV: return static_cast<double>(n - 1) / n;
  }
  return 0;
}

}  // namespace hmc::coll
