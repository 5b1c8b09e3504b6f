#include "coll/hier.h"

#include <fmt/format.h>

#include <algorithm>

#include "coll/comm.h"
#include "coll/executor.h"
#include "device/registry.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/status.h"
#include "xfer/transfers.h"

namespace hmc::coll {

int VendorGroups::largest() const {
  size_t m = 0;
  for (const auto& g : members) m = std::max(m, g.size());
  return int(m);
}

VendorGroups vendor_groups(const std::vector<Member>& members) {
  VendorGroups g;
  for (size_t r = 0; r < members.size(); ++r) {
    const std::string& v = members[r].vendor;
    auto it = std::find(g.vendor.begin(), g.vendor.end(), v);
    int k = int(it - g.vendor.begin());
    if (it == g.vendor.end()) {
      g.vendor.push_back(v);
      g.members.emplace_back();
    }
    g.group_of.push_back(k);
    g.local_of.push_back(int(g.members[size_t(k)].size()));
    g.members[size_t(k)].push_back(int(r));
  }
  return g;
}

uint64_t hier_scratch_elements(const CollArgs& args, int comm_size) {
  return args.kind == CollKind::ReduceScatter ? args.count * uint64_t(comm_size) : 0;
}

namespace {

Action transfer(ActionKind kind, int peer, Buffer b, uint64_t off, uint64_t bytes) {
  Action a;
  a.kind = kind;
  a.peer = peer;
  if (kind == ActionKind::Send)
    a.src = {b, off};
  else
    a.dst = {b, off};
  a.bytes = bytes;
  return a;
}

Action local_copy(Buffer sb, uint64_t so, Buffer db, uint64_t dof, uint64_t bytes) {
  Action a;
  a.kind = ActionKind::Copy;
  a.src = {sb, so};
  a.dst = {db, dof};
  a.bytes = bytes;
  return a;
}

// Builds one rank's plan.
class Planner {
 public:
  Planner(const CollArgs& a, const GroupShape& shape, const VendorGroups& g, int rank, bool library,
          Algorithm forced)
      : a_(a),
        shape_(shape),
        g_(g),
        rank_(rank),
        library_(library),
        forced_(forced),
        es_(dtype_size(a.dtype)),
        group_(g.group_of[size_t(rank)]),
        local_(g.local_of[size_t(rank)]),
        size_(g.size_of(group_)),
        largest_(g.largest()) {}

  HierPlan plan(const void* in, void* out, void* scratch);

 private:
  // The rank of group h that stands for index i of the largest group.
  int counterpart(int h, int i) const { return g_.members[size_t(h)][size_t(i % g_.size_of(h))]; }
  // Rail i: the rank standing for index i in every group.
  std::vector<int> rail(int i) const {
    std::vector<int> r;
    for (int h = 0; h < int(g_.members.size()); ++h) r.push_back(counterpart(h, i));
    return r;
  }
  static bool contains(const std::vector<int>& v, int x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  }
  uint8_t* at(void* p, uint64_t elements) const {
    return static_cast<uint8_t*>(p) + elements * es_;
  }

  void add_hmc(uint32_t slot, Schedule s, const CollArgs& args, const void* in, void* out,
               uint64_t output_elements = 0);
  // An hmc collective among `ranks` (this one among them), by hmc's algorithm for their shape.
  void among(uint32_t slot, const std::vector<int>& ranks, CollArgs args, const void* in,
             void* out);
  // A collective within this rank's group: the library's call when it runs the group's parts.
  // count and root as the group sees them.
  void within(uint32_t slot, CollKind kind, uint64_t count, int root, const void* in, void* out);
  // Point-to-point parts within this rank's group (peers are ranks of the communicator, buffers
  // offsets in elements of in for sends and of out for receives).
  struct P2p {
    int peer;
    bool is_send;
    uint64_t offset;
    uint64_t count;
  };
  void within_p2p(uint32_t slot, const std::vector<P2p>& parts, const void* in, void* out);

  void all_reduce(uint32_t first_slot, uint64_t n, const void* in, void* out);
  void all_gather(const void* in, void* out);
  void all_to_all(const void* in, void* out);
  void broadcast(void* buf);
  void barrier();

  const CollArgs& a_;
  const GroupShape& shape_;
  const VendorGroups& g_;
  const int rank_;
  const bool library_;
  const Algorithm forced_;
  const size_t es_;
  const int group_, local_, size_, largest_;
  HierPlan plan_;
};

void Planner::add_hmc(uint32_t slot, Schedule s, const CollArgs& args, const void* in, void* out,
                      uint64_t output_elements) {
  bool any = s.divide_by_size;
  for (const Step& st : s.steps) any |= !st.actions.empty();
  if (!any) return;
  HierPart p;
  p.via = HierPart::Via::Hmc;
  p.slot = slot;
  p.args = args;
  p.input = in;
  p.output = out;
  p.schedule = std::move(s);
  p.output_elements = output_elements;
  plan_.parts.push_back(std::move(p));
}

void Planner::among(uint32_t slot, const std::vector<int>& ranks, CollArgs args, const void* in,
                    void* out) {
  GroupShape sub;
  sub.size = int(ranks.size());
  int me = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    int r = ranks[i];
    if (r == rank_) me = int(i);
    if (shape_.host_of_rank.size() == size_t(shape_.size))
      sub.host_of_rank.push_back(shape_.host_of_rank[size_t(r)]);
    if (shape_.vendor_of_rank.size() == size_t(shape_.size))
      sub.vendor_of_rank.push_back(shape_.vendor_of_rank[size_t(r)]);
  }
  if (me < 0) return;
  Schedule s = make_schedule(args, sub, me, forced_);
  s.divide_by_size = false;  // an average divides once, by the whole communicator's size
  for (Step& st : s.steps)
    for (Action& act : st.actions)
      if (act.peer >= 0) act.peer = ranks[size_t(act.peer)];
  add_hmc(slot, std::move(s), args, in, out);
}

void Planner::within(uint32_t slot, CollKind kind, uint64_t count, int root, const void* in,
                     void* out) {
  CollArgs args;
  args.kind = kind;
  args.dtype = a_.dtype;
  args.op = a_.op == HMC_OP_AVG ? HMC_OP_SUM : a_.op;
  args.count = count;
  args.root = root;
  const uint8_t* ip = static_cast<const uint8_t*>(in);
  const uint8_t* op = static_cast<const uint8_t*>(out);
  switch (kind) {
    case CollKind::AllGather: args.in_place = ip == op + uint64_t(local_) * count * es_; break;
    case CollKind::ReduceScatter: args.in_place = op == ip + uint64_t(local_) * count * es_; break;
    default: args.in_place = ip == op; break;
  }
  if (count == 0) return;
  if (size_ == 1) {
    // Alone in its group: its own data is the group's.
    if (kind == CollKind::Broadcast || args.in_place) return;
    Schedule s;
    s.steps.emplace_back();
    s.steps.back().actions.push_back(local_copy(Buffer::Input, 0, Buffer::Output, 0, count * es_));
    add_hmc(slot, std::move(s), args, in, out);
    return;
  }
  if (!library_) {
    among(slot, g_.members[size_t(group_)], args, in, out);
    return;
  }
  HierPart p;
  p.via = HierPart::Via::Library;
  p.slot = slot;
  p.args = args;
  p.input = in;
  p.output = out;
  plan_.parts.push_back(std::move(p));
}

void Planner::within_p2p(uint32_t slot, const std::vector<P2p>& parts, const void* in, void* out) {
  if (parts.empty()) return;
  CollArgs args;
  args.kind = CollKind::AllToAllV;
  args.dtype = a_.dtype;
  if (library_) {
    HierPart p;
    p.via = HierPart::Via::Library;
    p.slot = slot;
    p.args = args;
    for (const P2p& x : parts) {
      void* buf = x.is_send ? at(const_cast<void*>(in), x.offset) : at(out, x.offset);
      p.p2p.push_back({g_.local_of[size_t(x.peer)], x.is_send ? 1 : 0, buf, size_t(x.count)});
    }
    plan_.parts.push_back(std::move(p));
    return;
  }
  Schedule s;
  s.algorithm = "direct";
  s.steps.emplace_back();
  for (const P2p& x : parts) {
    if (x.peer == rank_) continue;  // the caller lists a copy for itself
    s.steps.back().actions.push_back(transfer(x.is_send ? ActionKind::Send : ActionKind::Recv,
                                              x.peer, x.is_send ? Buffer::Input : Buffer::Output,
                                              x.offset * es_, x.count * es_));
  }
  add_hmc(slot, std::move(s), args, in, out);
}

// Reduce-scatter within each group into shards of the largest group's size (where the group is
// that large and the shards equal; else all-reduce within, each rank then holding every shard),
// the shards all-reduced across the groups on the rails, gathered back within each group (by
// all-gather, or shard by shard by broadcast). Slots first_slot .. first_slot + 2m + 1.
void Planner::all_reduce(uint32_t first, uint64_t n, const void* in, void* out) {
  const int m = largest_;
  const bool even = size_ == m && m > 1 && n % uint64_t(m) == 0;
  const uint64_t c = n / uint64_t(m);
  auto shard = [&](int j, uint64_t* off, uint64_t* len) {
    uint64_t b = n * uint64_t(j) / uint64_t(m), e = n * uint64_t(j + 1) / uint64_t(m);
    *off = b;
    *len = e - b;
  };
  if (even)
    within(first, CollKind::ReduceScatter, c, 0, in, at(out, uint64_t(local_) * c));
  else
    within(first, CollKind::AllReduce, n, 0, in, out);
  for (int j = 0; j < m; ++j) {
    std::vector<int> r = rail(j);
    uint64_t off, len;
    shard(j, &off, &len);
    if (!contains(r, rank_) || len == 0) continue;
    CollArgs across;
    across.kind = CollKind::AllReduce;
    across.dtype = a_.dtype;
    across.op = a_.op == HMC_OP_AVG ? HMC_OP_SUM : a_.op;
    across.count = len;
    across.in_place = true;
    among(first + 1 + uint32_t(j), r, across, at(out, off), at(out, off));
  }
  if (even) {
    within(first + 1 + uint32_t(m), CollKind::AllGather, c, 0, at(out, uint64_t(local_) * c), out);
  } else if (size_ > 1) {
    for (int j = 0; j < m; ++j) {
      uint64_t off, len;
      shard(j, &off, &len);
      within(first + 1 + uint32_t(m + j), CollKind::Broadcast, len, j % size_, at(out, off),
             at(out, off));
    }
  }
  if (a_.op == HMC_OP_AVG) {
    Schedule s;
    s.divide_by_size = true;
    add_hmc(first + 1 + uint32_t(2 * m), std::move(s), a_, out, out, n);
  }
}

// Across first: each rank's block goes to its counterpart in every other group, then each group
// gathers what its ranks hold (own block and the counterparts' received) within. Every block
// reaches each group through exactly one of its ranks.
void Planner::all_gather(const void* in, void* out) {
  const uint64_t c = a_.count, b = c * es_;
  const int n = shape_.size;
  Schedule s;
  s.algorithm = "direct";
  s.steps.emplace_back();
  auto& acts = s.steps.back().actions;
  if (!a_.in_place)
    acts.push_back(local_copy(Buffer::Input, 0, Buffer::Output, uint64_t(rank_) * b, b));
  auto holder = [&](int x, int h) { return counterpart(h, g_.local_of[size_t(x)]); };
  for (int h = 0; h < int(g_.members.size()); ++h)
    if (h != group_)
      acts.push_back(transfer(ActionKind::Send, holder(rank_, h), Buffer::Input, 0, b));
  for (int y = 0; y < n; ++y)
    if (g_.group_of[size_t(y)] != group_ && holder(y, group_) == rank_)
      acts.push_back(transfer(ActionKind::Recv, y, Buffer::Output, uint64_t(y) * b, b));
  add_hmc(0, std::move(s), a_, in, out);
  // What each rank of this group holds after the first part, in rank order.
  auto held = [&](int z) {
    std::vector<int> v;
    for (int y = 0; y < n; ++y)
      if (y == z || (g_.group_of[size_t(y)] != group_ && holder(y, group_) == z)) v.push_back(y);
    return v;
  };
  std::vector<P2p> parts;
  std::vector<int> mine = held(rank_);
  for (int z : g_.members[size_t(group_)]) {
    if (z == rank_) continue;
    for (int y : mine) parts.push_back({z, true, uint64_t(y) * c, c});
    for (int y : held(z)) parts.push_back({z, false, uint64_t(y) * c, c});
  }
  within_p2p(1, parts, out, out);
}

// Within the group through the library (its own block included), across on hmc's paths
// directly between the ranks.
void Planner::all_to_all(const void* in, void* out) {
  const int n = shape_.size;
  const bool v = a_.kind == CollKind::AllToAllV;
  auto sc = [&](int r) { return v ? a_.send_counts[size_t(r)] : a_.count; };
  auto sd = [&](int r) { return v ? a_.send_displs[size_t(r)] : uint64_t(r) * a_.count; };
  auto rc = [&](int r) { return v ? a_.recv_counts[size_t(r)] : a_.count; };
  auto rd = [&](int r) { return v ? a_.recv_displs[size_t(r)] : uint64_t(r) * a_.count; };
  std::vector<P2p> parts;
  Schedule self;
  self.steps.emplace_back();
  for (int z : g_.members[size_t(group_)]) {
    if (z == rank_ && !library_) {
      self.steps.back().actions.push_back(
          local_copy(Buffer::Input, sd(z) * es_, Buffer::Output, rd(z) * es_, sc(z) * es_));
      continue;
    }
    if (sc(z)) parts.push_back({z, true, sd(z), sc(z)});
    if (rc(z)) parts.push_back({z, false, rd(z), rc(z)});
  }
  if (library_ && size_ == 1) {  // alone: a copy, not a library call
    parts.clear();
    self.steps.back().actions.push_back(local_copy(Buffer::Input, sd(rank_) * es_, Buffer::Output,
                                                   rd(rank_) * es_, sc(rank_) * es_));
  }
  add_hmc(0, std::move(self), a_, in, out);
  within_p2p(0, parts, in, out);
  Schedule s;
  s.algorithm = "direct";
  s.steps.emplace_back();
  for (int y = 0; y < n; ++y) {
    if (g_.group_of[size_t(y)] == group_) continue;
    s.steps.back().actions.push_back(
        transfer(ActionKind::Send, y, Buffer::Input, sd(y) * es_, sc(y) * es_));
    s.steps.back().actions.push_back(
        transfer(ActionKind::Recv, y, Buffer::Output, rd(y) * es_, rc(y) * es_));
  }
  add_hmc(1, std::move(s), a_, in, out);
}

// Across on the root's rail, then within each group from the rank that has it.
void Planner::broadcast(void* buf) {
  const int root = a_.root, lr = g_.local_of[size_t(root)];
  std::vector<int> r = rail(lr);
  CollArgs across = a_;
  across.in_place = true;
  across.root = int(std::find(r.begin(), r.end(), root) - r.begin());
  among(0, r, across, buf, buf);
  within(1, CollKind::Broadcast, a_.count, lr % size_, buf, buf);
}

// Within each group, across its first ranks, within again: nobody leaves before everyone came.
void Planner::barrier() {
  CollArgs b;
  b.kind = CollKind::Barrier;
  among(0, g_.members[size_t(group_)], b, nullptr, nullptr);
  std::vector<int> leaders;
  for (const auto& m : g_.members) leaders.push_back(m[0]);
  among(1, leaders, b, nullptr, nullptr);
  among(2, g_.members[size_t(group_)], b, nullptr, nullptr);
}

HierPlan Planner::plan(const void* in, void* out, void* scratch) {
  const uint32_t m = uint32_t(largest_);
  switch (a_.kind) {
    case CollKind::AllReduce:
      plan_.slots = 2 * m + 2;
      all_reduce(0, a_.count, in, out);
      break;
    case CollKind::ReduceScatter: {
      // The whole reduction into scratch, this rank's block of it copied out.
      plan_.slots = 2 * m + 3;
      const uint64_t n = a_.count * uint64_t(shape_.size);
      all_reduce(0, n, in, scratch);
      Schedule s;
      s.steps.emplace_back();
      s.steps.back().actions.push_back(local_copy(Buffer::Input, uint64_t(rank_) * a_.count * es_,
                                                  Buffer::Output, 0, a_.count * es_));
      add_hmc(2 * m + 2, std::move(s), a_, scratch, out);
      break;
    }
    case CollKind::AllGather:
      plan_.slots = 2;
      if (a_.count) all_gather(in, out);
      break;
    case CollKind::AllToAll:
    case CollKind::AllToAllV:
      plan_.slots = 2;
      all_to_all(in, out);
      break;
    case CollKind::Broadcast:
      plan_.slots = 2;
      if (a_.count) broadcast(out);
      break;
    case CollKind::Barrier:
      plan_.slots = 3;
      barrier();
      break;
    case CollKind::Reduce: break;  // Collectives::post_hier runs a reduce on the flat algorithms
  }
  return std::move(plan_);
}

}  // namespace

HierPlan hier_plan(const CollArgs& args, const GroupShape& shape, const VendorGroups& groups,
                   int rank, bool library, Algorithm forced, const void* input, void* output,
                   void* scratch) {
  Planner p(args, shape, groups, rank, library, forced);
  return p.plan(input, output, scratch);
}

// ---- running a plan ------------------------------------------------------------------------

HierRun::HierRun(Transfers& transfers, CollServices& services, std::shared_ptr<Communicator> comm,
                 HierPlan plan, uint32_t seq, Request* req, std::string what, uint64_t bytes,
                 int timeout_ms, std::vector<uint8_t> host_scratch, void* device_scratch,
                 void* stream, std::unique_ptr<StreamGate> gate)
    : transfers_(transfers),
      services_(services),
      comm_(std::move(comm)),
      plan_(std::move(plan)),
      seq_(seq),
      req_(req),
      what_(std::move(what)),
      bytes_(bytes),
      deadline_ns_(deadline_after_ms(timeout_ms)),
      host_scratch_(std::move(host_scratch)),
      device_scratch_(device_scratch),
      stream_(stream),
      gate_(std::move(gate)) {}

HierRun::~HierRun() {
  exec_.reset();
  if (sub_) RequestTable::release(sub_);
  if (device_scratch_) services_.device_registry().free(device_scratch_);
}

namespace {

// Posts a library part on the group's vendor communicator.
int post_library(CclComm& ccl, const HierPart& p, void* stream, const char** call,
                 hmc_ccl_request_t** creq) {
  const hmc_ccl_plugin_v1_t* t = ccl.plugin().table;
  hmc_ccl_comm_t* c = ccl.get();
  const uint32_t dtype = uint32_t(p.args.dtype), op = uint32_t(p.args.op);
  switch (p.args.kind) {
    case CollKind::AllReduce:
      *call = "all_reduce";
      return t->all_reduce(c, p.input, p.output, p.args.count, dtype, op, stream, creq);
    case CollKind::AllGather:
      *call = "all_gather";
      return t->all_gather(c, p.input, p.output, p.args.count, dtype, stream, creq);
    case CollKind::ReduceScatter:
      *call = "reduce_scatter";
      return t->reduce_scatter(c, p.input, p.output, p.args.count, dtype, op, stream, creq);
    case CollKind::Broadcast:
      *call = "broadcast";
      return t->broadcast(c, p.input, p.output, p.args.count, dtype, p.args.root, stream, creq);
    case CollKind::AllToAll:
    case CollKind::AllToAllV:
      *call = "send_recv";
      return t->send_recv(c, p.p2p.data(), p.p2p.size(), dtype, stream, creq);
    case CollKind::Reduce:  // never planned: Collectives::post_hier runs it flat
    case CollKind::Barrier: break;
  }
  *call = "?";
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}

}  // namespace

hmc_status_t HierRun::start(const HierPart& p) {
  if (p.via == HierPart::Via::Library) {
    CclComm& ccl = *comm_->hier->comm;
    const char* call = "?";
    int st = post_library(ccl, p, stream_, &call, &creq_);
    if (st == HMC_PLUGIN_SUCCESS) return HMC_SUCCESS;
    creq_ = nullptr;
    return fail(ccl_status(st), "{}: part {}: {} {}: {}", what_, p.slot, ccl.describe(), call,
                ccl_error_text(ccl, st));
  }
  sub_ = RequestTable::acquire(comm_->owner);
  sub_->op = Op::Coll;
  Execution::Buffers buffers{p.input, p.output, p.output_elements};
  ++comm_->running;
  exec_ =
      std::make_unique<Execution>(transfers_, services_, comm_, p.schedule, p.args, buffers,
                                  seq_ + p.slot, sub_, fmt::format("{} part {}", what_, p.slot));
  return HMC_SUCCESS;
}

bool HierRun::advance() {
  if (ended_) return false;
  if (gate_) {
    hmc_status_t st;
    if (!gate_->passed(&st)) {
      if (now_ns() < deadline_ns_) return false;
      abort(HMC_ERR_TIMEOUT,
            fmt::format("{}: the application's stream did not reach it within the timeout", what_));
      return true;
    }
    gate_.reset();
    if (st != HMC_SUCCESS) {
      abort(st, last_error());
      return true;
    }
  }
  bool busy = false;
  for (;;) {
    if (exec_) {
      busy |= exec_->advance();
      if (!exec_->ended()) break;
      hmc_status_t st = sub_->status;
      std::string error = sub_->error;
      exec_.reset();
      RequestTable::release(sub_);
      sub_ = nullptr;
      if (st != HMC_SUCCESS) {
        abort(st, error);
        return true;
      }
      ++next_;
    } else if (creq_) {
      int done = 0;
      int st = comm_->hier->plugin->table->test(creq_, &done);
      if (!done && st == HMC_PLUGIN_SUCCESS) {
        // A rank lost on hmc's paths will not finish its part: leave the library now.
        for (size_t r = 0; r < comm_->peers.size(); ++r) {
          const auto& peer = comm_->peers[r];
          if (peer && peer->lost.load(std::memory_order_acquire)) {
            abort(HMC_ERR_PEER_LOST,
                  fmt::format("{}: rank {} (pid {}) was lost; the vendor communicator of {} is "
                              "aborted",
                              what_, r, comm_->members[r].pid, comm_->hier->comm->describe()));
            return true;
          }
        }
        break;
      }
      if (done) creq_ = nullptr;
      if (st != HMC_PLUGIN_SUCCESS) {
        abort(ccl_status(st), fmt::format("{}: {}: {}", what_, comm_->hier->comm->describe(),
                                          ccl_error_text(*comm_->hier->comm, st)));
        return true;
      }
      busy = true;
      ++next_;
    }
    if (next_ >= plan_.parts.size()) {
      end(HMC_SUCCESS, "");
      return true;
    }
    busy = true;
    hmc_status_t st = start(plan_.parts[next_]);
    if (st != HMC_SUCCESS) {
      abort(st, last_error());
      return true;
    }
  }
  if (now_ns() >= deadline_ns_) {
    abort(HMC_ERR_TIMEOUT, fmt::format("{}: part {} did not finish within the timeout", what_,
                                       next_ < plan_.parts.size() ? plan_.parts[next_].slot : 0));
    return true;
  }
  return busy;
}

void HierRun::abort(hmc_status_t status, const std::string& why) {
  if (ended_) return;
  // No rank may stay inside the library, nor wait on this one's messages.
  if (comm_->hier->comm) comm_->hier->comm->abort();
  creq_ = nullptr;  // aborting the communicator ends its requests
  if (exec_) {
    exec_->abort(status, why);
    exec_.reset();
    RequestTable::release(sub_);
    sub_ = nullptr;
  }
  if (comm_->broken.empty()) {
    comm_->broken = why;
    HMC_LOG_W("{}; the communicator is unusable from now on", why);
  }
  for (auto& peer : comm_->peers)
    if (peer && !peer->lost) services_.abandon_peer(*peer, why);
  set_error(status, why);
  end(status, why);
}

void HierRun::end(hmc_status_t status, std::string error) {
  ended_ = true;
  --comm_->running;
  req_->bytes = status == HMC_SUCCESS ? bytes_ : 0;
  req_->status = status;
  req_->error = std::move(error);
  req_->done.store(true, std::memory_order_release);
  transfers_.events().ring();
}

}  // namespace hmc::coll
