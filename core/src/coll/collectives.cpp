#include "coll/collectives.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "coll/bootstrap.h"
#include "device/registry.h"
#include "util/clock.h"
#include "util/handles.h"
#include "util/log.h"
#include "util/status.h"
#include "xfer/transfers.h"

namespace hmc::coll {

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The cores this process may run on.
int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace

Collectives::~Collectives() {
  shutdown();
}

std::shared_ptr<Communicator> Collectives::find(Communicator* comm) {
  for (auto& c : comms_)
    if (c.get() == comm) return c;
  return nullptr;
}

hmc_status_t Collectives::adopt(std::shared_ptr<Communicator> comm, Communicator** out) {
  comm->owner = s_.owner;
  comm->shape = shape_of(comm->members);
  comm->peers.resize(size_t(comm->size));
  int here = 0;
  for (const Member& m : comm->members) here += m.host_id == s_.self.host_id;
  comm->crowded = here > usable_cores();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comms_.push_back(comm);
  }
  Handles::add(comm.get(), HandleKind::Comm);
  *out = comm.get();
  return HMC_SUCCESS;
}

hmc_status_t Collectives::create(const Config& config, const hmc_comm_options_t* opts,
                                 Communicator** out) {
  JoinSettings join;
  hmc_status_t st = resolve_join(config, opts, s_.timeout_ms, &join);
  if (st != HMC_SUCCESS) return st;
  auto comm = std::make_shared<Communicator>();
  comm->rank = join.rank;
  comm->size = join.size;
  comm->connect_timeout_ms = join.timeout_ms;
  if ((st = rendezvous(join, s_.self, &comm->members, &comm->id)) != HMC_SUCCESS) return st;
  HMC_LOG_I("communicator {:016x}: rank {} of {} joined at {}", comm->id, comm->rank, comm->size,
            redact_rendezvous(join.rendezvous));
  return adopt(std::move(comm), out);
}

hmc_status_t Collectives::destroy(Communicator* comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(comms_.begin(), comms_.end(), [&](auto& c) { return c.get() == comm; });
  if (it == comms_.end())
    return fail(HMC_ERR_INVALID_HANDLE, "hmc_comm_destroy: not a live communicator");
  if (comm->running > 0)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_comm_destroy: {} collective{} still running on it: "
                "wait for them first",
                comm->running, comm->running > 1 ? "s" : "");
  Handles::remove(comm);
  comms_.erase(it);
  return HMC_SUCCESS;
}

hmc_status_t Collectives::split(Communicator* comm, int color, int key, Communicator** out) {
  // Every rank learns every rank's (color, key) by an all-gather on the parent.
  int64_t mine[2] = {color < 0 ? -1 : color, key};
  std::vector<int64_t> all(size_t(comm->size) * 2);
  CollArgs args;
  args.kind = CollKind::AllGather;
  args.dtype = HMC_DTYPE_I64;
  args.count = 2;
  Request* req = nullptr;
  hmc_status_t st = post_hmc(comm, args, mine, all.data(), 0, "hmc_comm_split", &req);
  if (st != HMC_SUCCESS) return st;
  if ((st = transfers_.wait(req, -1, nullptr)) != HMC_SUCCESS) return st;
  uint32_t nth;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    nth = comm->splits++;
  }
  if (color < 0) {
    *out = nullptr;
    return HMC_SUCCESS;
  }
  std::vector<int> ranks;
  for (int r = 0; r < comm->size; ++r)
    if (all[size_t(r) * 2] == color) ranks.push_back(r);
  std::stable_sort(ranks.begin(), ranks.end(),
                   [&](int a, int b) { return all[size_t(a) * 2 + 1] < all[size_t(b) * 2 + 1]; });
  auto child = std::make_shared<Communicator>();
  child->id = mix(comm->id ^ mix(nth) ^ mix(uint64_t(color) << 32));
  child->size = int(ranks.size());
  child->connect_timeout_ms = comm->connect_timeout_ms;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == comm->rank) child->rank = int(i);
    child->members.push_back(comm->members[size_t(ranks[i])]);
  }
  return adopt(std::move(child), out);
}

hmc_status_t Collectives::connect_peers(Communicator& comm, const Schedule& schedule,
                                        const char* what) {
  std::set<int> need;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& step : schedule.steps)
      for (const auto& a : step.actions)
        if (a.peer >= 0 && a.bytes > 0 && !comm.peers[size_t(a.peer)]) need.insert(a.peer);
  }
  if (need.empty()) return HMC_SUCCESS;
  // Of each pair, the context with the lower id connects, whichever communicator asks: then
  // two communicators never make two connections for one pair. Waiting for every lower one
  // before connecting to higher ones, in order, cannot deadlock (by induction on the order).
  std::vector<int> order(need.begin(), need.end());
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return comm.members[size_t(a)].context_id < comm.members[size_t(b)].context_id;
  });
  const int timeout_ms = comm.connect_timeout_ms > 0 ? comm.connect_timeout_ms : s_.timeout_ms;
  uint64_t deadline = deadline_after_ms(timeout_ms);
  for (int r : order) {
    const Member& m = comm.members[size_t(r)];
    std::shared_ptr<Peer> peer;
    hmc_status_t st = services_.group_peer(m, s_.self.context_id < m.context_id, deadline, &peer);
    if (st != HMC_SUCCESS)
      return fail(st, "{} (rank {} of {}): connecting rank {} (pid {}) within {} ms: {}", what,
                  comm.rank, comm.size, r, m.pid, timeout_ms, last_error());
    std::lock_guard<std::mutex> lock(mutex_);
    comm.peers[size_t(r)] = std::move(peer);
  }
  return HMC_SUCCESS;
}

hmc_status_t Collectives::post(Communicator* c, const CollArgs& args, const void* input,
                               void* output, uint64_t output_elements, const char* what,
                               Request** out) {
  if (s_.backend == Backend::Hmc)
    return post_hmc(c, args, input, output, output_elements, what, out);
  std::shared_ptr<Communicator> comm;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comm = find(c);
  }
  if (!comm) return fail(HMC_ERR_INVALID_HANDLE, "{}: not a live communicator", what);
  hmc_status_t hst;
  if (post_hier(comm, args, input, output, output_elements, what, out, &hst)) return hst;
  CclEligible use = ccl_eligible(*comm, args, input, output);
  if (use.plugin) {
    CclState& state = *comm->ccl;
    std::unique_lock<std::mutex> setup(state.setup);
    if (state.stage == CclStage::Untried) {  // the first collective that wants it makes it
      setup.unlock();
      ccl_setup(comm.get(), use, what);
      setup.lock();
    }
    if (state.stage == CclStage::Ready) {
      if (state.comm->device() == use.device) {
        setup.unlock();
        return post_ccl(comm, args, input, output, output_elements, what, out);
      }
      use.why = fmt::format("its vendor communicator is on device {}, the buffers on device {}",
                            state.comm->device(), use.device);
    } else {
      use.why = state.why_off;
    }
  }
  // What no vendor library takes stays on hmc's algorithms even when ccl is forced (a barrier,
  // host buffers: a tool's own bookkeeping, the set-up's broadcast).
  if (s_.backend == Backend::Ccl && !use.hmc_only)
    return fail(HMC_ERR_NOT_SUPPORTED,
                "{} (rank {} of {}): HMC_COLL_BACKEND=ccl, but no vendor library can run it: {}",
                what, comm->rank, comm->size, use.why);
  return post_hmc(c, args, input, output, output_elements, what, out);
}

CclEligible Collectives::ccl_eligible(const Communicator& comm, const CollArgs& args,
                                      const void* input, const void* output) {
  CclEligible e;
  if (s_.ccl.empty() && s_.backend != Backend::Ccl) {  // no pointer queries when nothing could
    e.why = "no ccl plugin serves a device here (hmc-info lists them)";
    return e;
  }
  bool reduces = false;
  switch (args.kind) {
    case CollKind::AllReduce:
    case CollKind::ReduceScatter: reduces = true; break;
    case CollKind::AllGather:
    case CollKind::Broadcast:
    case CollKind::AllToAll:
    case CollKind::AllToAllV: break;
    case CollKind::Barrier:
      e.hmc_only = true;
      e.why = "a barrier has no vendor-library call";
      return e;
    case CollKind::Reduce:
      // Not in the ccl plugin ABI. Decided on the input, which every rank has (the output is
      // the root's alone), so that the ranks agree: host memory stays on hmc's algorithms even
      // when ccl is forced, device memory is what a forced ccl refuses.
      e.hmc_only = !input || args.count == 0 || services_.host_memory(input);
      e.why =
          e.hmc_only ? "this rank's buffers are host memory" : "the ccl plugin ABI has no reduce";
      return e;
  }
  if (!input || !output || (args.kind != CollKind::AllToAllV && args.count == 0)) {
    e.hmc_only = true;
    e.why = "nothing to move";
    return e;
  }
  DeviceRegistry& devices = services_.device_registry();
  MemoryLocation in = devices.locate(input), out = devices.locate(output);
  if (in.device && out.device && in.device->is_host() && out.device->is_host()) {
    e.hmc_only = true;
    e.why = "this rank's buffers are host memory";
    return e;
  }
  if (s_.ccl.empty()) {
    e.why = "no ccl plugin serves a device here (hmc-info lists them)";
    return e;
  }
  const std::string& vendor = comm.members[0].vendor;
  for (const Member& m : comm.members)
    if (m.vendor != vendor) {
      e.why = fmt::format("its ranks are of several vendors ({} and {})", vendor, m.vendor);
      return e;
    }
  if (!in.device || !out.device || in.device->is_host() || out.device->is_host() ||
      in.device != out.device) {
    e.why = "this rank's buffers are not device memory of one device";
    return e;
  }
  for (const CclPlugin& p : s_.ccl) {
    if (p.vendor != vendor || in.device->plugin_name != vendor) continue;
    if (!(p.table->dtypes & HMC_CCL_BIT(args.dtype))) {
      e.why = fmt::format("{} does not handle dtype {}", p.name, int(args.dtype));
      continue;
    }
    if (reduces && !(p.table->ops & HMC_CCL_BIT(args.op))) {
      e.why = fmt::format("{} does not handle operation {}", p.name, int(args.op));
      continue;
    }
    e.plugin = &p;
    e.device = in.device->index;
    e.why.clear();
    return e;
  }
  if (e.why.empty())
    e.why = fmt::format("no ccl plugin serves {} memory (hmc-info lists them)", vendor);
  return e;
}

hmc_status_t Collectives::stream_gate(const CollArgs& args, const void* input, const void* output,
                                      const char* what, std::unique_ptr<StreamGate>* out) {
  if (!args.stream) return HMC_SUCCESS;
  DeviceRegistry& devices = services_.device_registry();
  const Device* device = nullptr;
  if (const void* p = output ? output : input) {
    device = devices.locate(p).device;
  } else {  // a barrier: this rank's first device
    for (const Device& d : devices.devices())
      if (!d.is_host() && d.plugin_name == s_.self.vendor) {
        device = &d;
        break;
      }
  }
  return StreamGate::make(device, args.stream, what, out);
}

hmc_status_t Collectives::run_hmc(Communicator* comm, const CollArgs& args, const void* input,
                                  void* output, const char* what) {
  Request* req = nullptr;
  hmc_status_t st = post_hmc(comm, args, input, output, 0, what, &req);
  if (st != HMC_SUCCESS) return st;
  return transfers_.wait(req, -1, nullptr);
}

void Collectives::ccl_setup(Communicator* comm, const CclEligible& use, const char* what) {
  CclState& state = *comm->ccl;
  std::lock_guard<std::mutex> setup(state.setup);
  if (state.stage != CclStage::Untried) return;
  const CclPlugin& p = *use.plugin;
  state.plugin = &p;
  // Rank 0's id goes to every rank by hmc's own broadcast, with its status in front: a rank 0
  // that could not make one tells the others so, rather than leaving them waiting.
  struct IdMessage {
    int32_t status;
    uint32_t len;
    uint8_t id[HMC_CCL_UNIQUE_ID_MAX];
  } msg{};
  std::string why;
  if (comm->rank == 0) {
    size_t len = sizeof msg.id;
    msg.status = p.table->unique_id(p.ctx, msg.id, &len);
    msg.len = uint32_t(len);
  }
  CollArgs bcast;
  bcast.kind = CollKind::Broadcast;
  bcast.dtype = HMC_DTYPE_U8;
  bcast.count = sizeof msg;
  bcast.root = 0;
  bcast.in_place = true;
  hmc_status_t st = run_hmc(comm, bcast, &msg, &msg, "ccl set-up: broadcast of the unique id");
  hmc_ccl_comm_t* made = nullptr;
  if (st != HMC_SUCCESS) {
    why = "the unique id could not be distributed: " + last_error();
  } else if (msg.status != HMC_PLUGIN_SUCCESS || msg.len == 0 || msg.len > sizeof msg.id) {
    why = fmt::format("rank 0's {} gave no unique id (status {})", p.name, msg.status);
  } else {
    int cst =
        p.table->comm_create(p.ctx, msg.id, msg.len, comm->size, comm->rank, use.device, &made);
    if (cst != HMC_PLUGIN_SUCCESS) {
      made = nullptr;
      why = fmt::format("{} comm_create (rank {} of {}, device {}) failed: plugin status {}",
                        p.name, comm->rank, comm->size, use.device, cst);
    }
  }
  // Every rank must have its vendor communicator, or none uses it.
  if (st == HMC_SUCCESS) {
    int32_t ok = made != nullptr, all = 0;
    CollArgs agree;
    agree.kind = CollKind::AllReduce;
    agree.dtype = HMC_DTYPE_I32;
    agree.op = HMC_OP_MIN;
    agree.count = 1;
    hmc_status_t ast = run_hmc(comm, agree, &ok, &all, "ccl set-up: agreement");
    if (ast != HMC_SUCCESS)
      why = "the ranks could not agree on the vendor communicator: " + last_error();
    else if (!all && why.empty())
      why = fmt::format("{} could not make its communicator on another rank", p.name);
  }
  if (why.empty()) {
    state.comm = std::make_unique<CclComm>(p, made, use.device);
    state.stage = CclStage::Ready;
    HMC_LOG_I("communicator {:016x}: rank {} of {} runs its collectives through {} on device {}",
              comm->id, comm->rank, comm->size, state.comm->describe(), use.device);
    return;
  }
  if (made) {
    p.table->comm_abort(made);
    p.table->comm_destroy(made);
  }
  state.stage = CclStage::Off;
  state.why_off = fmt::format("the ccl plugin '{}' is not used: {}", p.name, why);
  HMC_LOG_W(
      "communicator {:016x} (rank {} of {}), {}: {}; its collectives run on hmc's own "
      "algorithms",
      comm->id, comm->rank, comm->size, what, state.why_off);
}

bool Collectives::post_hier(const std::shared_ptr<Communicator>& comm, const CollArgs& args,
                            const void* input, void* output, uint64_t output_elements,
                            const char* what, Request** out, hmc_status_t* st) {
  const auto& vendors = comm->shape.vendor_of_rank;
  bool mixed = false;
  for (const std::string& v : vendors) mixed |= v != vendors[0];
  // A reduce runs on the flat algorithms: the hierarchy has no reduce (its groups' libraries
  // have none through the ccl plugin ABI).
  if (!mixed || comm->size < 2 || args.kind == CollKind::Reduce) return false;
  HierState& h = *comm->hier;
  // The first collective with data sets the groups up; one without data (a barrier, a count of
  // 0: the same on every rank) waits for it on hmc's flat algorithms.
  const bool data =
      args.kind == CollKind::AllToAllV || (args.kind != CollKind::Barrier && args.count > 0);
  {
    std::unique_lock<std::mutex> setup(h.setup);
    if (h.stage == HierStage::Untried) {
      if (!data) return false;
      setup.unlock();
      hier_setup(comm.get(), input, output, what);
      setup.lock();
    }
    if (h.stage != HierStage::Ready) {
      if (s_.backend == Backend::Ccl && data && !services_.host_memory(output ? output : input)) {
        *st = fail(HMC_ERR_NOT_SUPPORTED,
                   "{} (rank {} of {}): HMC_COLL_BACKEND=ccl, but no vendor library can run any "
                   "of its groups' parts: {}",
                   what, comm->rank, comm->size, h.why_off);
        return true;
      }
      return false;
    }
  }
  if (!data && args.kind != CollKind::Barrier) return false;  // nothing to move: flat, at once
  const int group = h.groups.group_of[size_t(comm->rank)];
  bool library = false;
  if (h.served[size_t(group)] && args.kind != CollKind::Barrier) {
    const hmc_ccl_plugin_v1_t* t = h.plugin->table;
    bool reduces = args.kind == CollKind::AllReduce || args.kind == CollKind::ReduceScatter;
    uint32_t op = args.op == HMC_OP_AVG ? HMC_OP_SUM : args.op;
    library = (t->dtypes & HMC_CCL_BIT(args.dtype)) && (!reduces || (t->ops & HMC_CCL_BIT(op)));
  }
  // Host buffers keep the group's parts on hmc's paths, as on a communicator of one vendor
  // (the ranks of a group agree: all host memory, or all device memory).
  if (library && (!input || services_.host_memory(input)) &&
      (!output || services_.host_memory(output)))
    library = false;
  if (library) {
    // The group's vendor communicator lives on one device: the buffers must be its memory (the
    // other ranks of the group are already bound to the library for this collective).
    DeviceRegistry& devices = services_.device_registry();
    for (const void* p : {input, static_cast<const void*>(output)}) {
      if (!p) continue;
      MemoryLocation loc = devices.locate(p);
      if (!loc.device || loc.device->is_host() || loc.device->plugin_name != h.plugin->vendor ||
          loc.device->index != h.comm->device()) {
        std::string why = fmt::format(
            "{} (rank {} of {}): its vendor group runs this collective in {} on {} device {}, "
            "but this rank's buffer {} is {} memory",
            what, comm->rank, comm->size, h.comm->describe(), h.plugin->vendor, h.comm->device(), p,
            loc.device ? loc.device->name : "unknown");
        std::lock_guard<std::mutex> lock(mutex_);
        h.comm->abort();
        if (comm->broken.empty()) comm->broken = why;
        for (auto& peer : comm->peers)
          if (peer && !peer->lost) services_.abandon_peer(*peer, why);
        *st = fail(HMC_ERR_INVALID_ARGUMENT, "{}", why);
        return true;
      }
    }
  }
  // The reduce-scatter's whole reduction needs room in this rank's memory.
  std::vector<uint8_t> host_scratch;
  void* device_scratch = nullptr;
  void* scratch = nullptr;
  if (uint64_t n = hier_scratch_elements(args, comm->size)) {
    size_t bytes = n * dtype_size(args.dtype);
    MemoryLocation loc = services_.device_registry().locate(input);
    if (!loc.device || loc.device->is_host()) {
      host_scratch.resize(bytes);
      scratch = host_scratch.data();
    } else {
      *st = services_.device_registry().alloc(loc.device->name, bytes, &device_scratch);
      if (*st != HMC_SUCCESS) {
        *st = fail(*st, "{} (rank {} of {}): {} bytes of scratch on {}: {}", what, comm->rank,
                   comm->size, bytes, loc.device->name, last_error());
        return true;
      }
      scratch = device_scratch;
    }
  }
  std::unique_ptr<StreamGate> gate;
  if ((*st = stream_gate(args, input, output, what, &gate)) != HMC_SUCCESS) {
    if (device_scratch) services_.device_registry().free(device_scratch);
    return true;
  }
  HierPlan plan = hier_plan(args, comm->shape, h.groups, comm->rank, library, s_.forced, input,
                            output, scratch);
  for (const HierPart& p : plan.parts) {
    if (p.via != HierPart::Via::Hmc) continue;
    if ((*st = connect_peers(*comm, p.schedule, what)) != HMC_SUCCESS) {
      if (device_scratch) services_.device_registry().free(device_scratch);
      return true;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!comm->broken.empty()) {
    if (device_scratch) services_.device_registry().free(device_scratch);
    *st = fail(HMC_ERR_PEER_LOST,
               "{}: the communicator is unusable since a collective on it failed: {}", what,
               comm->broken);
    return true;
  }
  uint32_t seq = comm->next_seq;
  comm->next_seq += plan.slots;
  comm->last_backend = "hierarchical: " + h.summary;
  comm->backend_kind.store("hierarchical", std::memory_order_relaxed);
  // Its parts end by the plugins' own progress (the library's, hmc's paths'): a wait services
  // the control plane on its interval, not on every turn (as for hmc's own collectives).
  Request* req = RequestTable::acquire(s_.owner);
  req->op = Op::Coll;
  uint64_t bytes = output_elements * dtype_size(args.dtype);
  std::string name = fmt::format("{} ({} bytes out, hierarchical: {}; rank {} of {})", what, bytes,
                                 h.summary, comm->rank, comm->size);
  HMC_LOG_D("communicator {:016x}: {}, {} parts here", comm->id, name, plan.parts.size());
  ++comm->running;
  auto run = std::make_unique<HierRun>(
      transfers_, services_, comm, std::move(plan), seq, req, std::move(name), bytes, s_.timeout_ms,
      std::move(host_scratch), device_scratch, args.stream, std::move(gate));
  run->advance();
  if (!run->ended()) {
    hier_running_.push_back(std::move(run));
    count_active();
  }
  *out = req;
  *st = HMC_SUCCESS;
  return true;
}

void Collectives::hier_setup(Communicator* comm, const void* input, const void* output,
                             const char* what) {
  HierState& h = *comm->hier;
  std::lock_guard<std::mutex> setup(h.setup);
  if (h.stage != HierStage::Untried) return;
  h.groups = vendor_groups(comm->members);
  const int group = h.groups.group_of[size_t(comm->rank)];
  const int local = h.groups.local_of[size_t(comm->rank)];
  const int gsize = h.groups.size_of(group);
  // What this rank offers: the ccl plugin of its vendor, when its buffers are that vendor's
  // device memory (the device the vendor communicator is made on), and, on its group's first
  // rank, the unique id. Every rank learns every rank's offer by one hmc all-gather: the ids
  // travel over the communicator, no other rendezvous.
  struct Offer {
    int32_t wants;
    int32_t device;
    char plugin[24];
    int32_t id_status;
    uint32_t id_len;
    uint8_t id[HMC_CCL_UNIQUE_ID_MAX];
  } mine{};
  const CclPlugin* plugin = nullptr;
  if (s_.backend != Backend::Hmc) {
    MemoryLocation loc = services_.device_registry().locate(output ? output : input);
    for (const CclPlugin& p : s_.ccl) {
      if (p.vendor != comm->members[size_t(comm->rank)].vendor) continue;
      if (!loc.device || loc.device->is_host() || loc.device->plugin_name != p.vendor) break;
      plugin = &p;
      mine.wants = 1;
      mine.device = loc.device->index;
      snprintf(mine.plugin, sizeof mine.plugin, "%s", p.name.c_str());
      if (local == 0) {
        size_t len = sizeof mine.id;
        mine.id_status = p.table->unique_id(p.ctx, mine.id, &len);
        mine.id_len = uint32_t(len);
      }
      break;
    }
  }
  std::vector<Offer> offers(size_t(comm->size));
  CollArgs gather;
  gather.kind = CollKind::AllGather;
  gather.dtype = HMC_DTYPE_U8;
  gather.count = sizeof(Offer);
  std::string why;
  if (run_hmc(comm, gather, &mine, offers.data(), "hierarchical set-up: the groups' offers") !=
      HMC_SUCCESS)
    why = "the offers could not be exchanged: " + last_error();
  // A group is a candidate when each of its ranks offers the same plugin and its first rank an id.
  std::vector<uint8_t> candidate(h.groups.members.size(), 0);
  for (size_t g = 0; why.empty() && g < h.groups.members.size(); ++g) {
    const Offer& lead = offers[size_t(h.groups.members[g][0])];
    bool ok = lead.id_status == HMC_PLUGIN_SUCCESS && lead.id_len > 0 &&
              lead.id_len <= HMC_CCL_UNIQUE_ID_MAX;
    for (int r : h.groups.members[g]) {
      const Offer& o = offers[size_t(r)];
      ok = ok && o.wants && strncmp(o.plugin, lead.plugin, sizeof o.plugin) == 0;
    }
    candidate[g] = ok;
  }
  hmc_ccl_comm_t* made = nullptr;
  std::string mine_why;
  if (why.empty() && candidate[size_t(group)] && plugin) {
    const Offer& lead = offers[size_t(h.groups.members[size_t(group)][0])];
    int cst = plugin->table->comm_create(plugin->ctx, lead.id, lead.id_len, gsize, local,
                                         mine.device, &made);
    if (cst != HMC_PLUGIN_SUCCESS) {
      made = nullptr;
      mine_why = fmt::format(
          "{} comm_create (rank {} of {} of the {} group, device {}) failed: "
          "plugin status {}",
          plugin->name, local, gsize, comm->members[size_t(comm->rank)].vendor, mine.device, cst);
      HMC_LOG_W("communicator {:016x} (rank {} of {}): {}", comm->id, comm->rank, comm->size,
                mine_why);
    }
  }
  // Which groups made their vendor communicator on every rank.
  std::vector<int32_t> made_all(size_t(comm->size), 0);
  if (why.empty()) {
    int32_t ok = made != nullptr;
    CollArgs agree;
    agree.kind = CollKind::AllGather;
    agree.dtype = HMC_DTYPE_I32;
    agree.count = 1;
    if (run_hmc(comm, agree, &ok, made_all.data(), "hierarchical set-up: agreement") != HMC_SUCCESS)
      why = "the ranks could not agree on the vendor communicators: " + last_error();
  }
  h.served.assign(h.groups.members.size(), 0);
  bool any = false;
  std::string summary;
  for (size_t g = 0; why.empty() && g < h.groups.members.size(); ++g) {
    bool ok = candidate[g];
    for (int r : h.groups.members[g]) ok = ok && made_all[size_t(r)];
    h.served[g] = ok;
    any |= ok;
    const Offer& lead = offers[size_t(h.groups.members[g][0])];
    summary += fmt::format("{}{} x{} ({})", summary.empty() ? "" : ", ", h.groups.vendor[g],
                           h.groups.members[g].size(), ok ? lead.plugin : "hmc");
  }
  if (why.empty() && any) {
    if (h.served[size_t(group)]) {
      h.plugin = plugin;
      h.comm = std::make_unique<CclComm>(*plugin, made, mine.device);
      made = nullptr;
    }
    h.summary = summary;
    h.stage = HierStage::Ready;
    HMC_LOG_I("communicator {:016x}: rank {} of {} runs its collectives hierarchically: {}",
              comm->id, comm->rank, comm->size, summary);
  }
  if (made) {
    plugin->table->comm_abort(made);
    plugin->table->comm_destroy(made);
  }
  if (h.stage == HierStage::Ready) return;
  if (why.empty())
    why = mine_why.empty() ? "no vendor group of it has a ccl plugin serving all its ranks"
                           : mine_why;
  h.stage = HierStage::Off;
  h.why_off = "no hierarchical form: " + why;
  HMC_LOG_I(
      "communicator {:016x} (rank {} of {}), {}: {}; its collectives run on hmc's flat "
      "algorithms",
      comm->id, comm->rank, comm->size, what, h.why_off);
}

std::string Collectives::last_backend(Communicator* c) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::shared_ptr<Communicator> comm = find(c);
  return comm ? comm->last_backend : std::string();
}

hmc_status_t Collectives::post_ccl(const std::shared_ptr<Communicator>& comm, const CollArgs& args,
                                   const void* input, void* output, uint64_t output_elements,
                                   const char* what, Request** out) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!comm->broken.empty())
    return fail(HMC_ERR_PEER_LOST,
                "{}: the communicator is unusable since a collective on it failed: {}", what,
                comm->broken);
  CclComm& ccl = *comm->ccl->comm;
  hmc_ccl_request_t* creq = nullptr;
  hmc_status_t st = ccl_post(ccl, *comm, args, input, output, what, &creq);
  if (st != HMC_SUCCESS) return st;
  ++comm->next_seq;  // the hmc tags stay in step with ranks that count every collective
  comm->last_backend = ccl.backend();  // same length each time: no allocation
  comm->backend_kind.store("ccl", std::memory_order_relaxed);
  // It ends by the plugin's test, which the progress pass drives: a wait services the control
  // plane on its interval (a lost rank is seen there), not with a system call per peer per turn.
  Request* req = RequestTable::acquire(s_.owner);
  req->op = Op::Coll;
  uint64_t bytes = output_elements * dtype_size(args.dtype);
  HMC_LOG_D("communicator {:016x}: {} ({} bytes out, {}, rank {} of {})", comm->id, what, bytes,
            ccl.describe(), comm->rank, comm->size);
  ++comm->running;
  // Not tested here: a collective just handed to the library has not ended; the next progress
  // pass (the wait's first turn) asks.
  ccl_running_.push_back(
      std::make_unique<CclRun>(transfers_, comm, ccl, creq, req, what, bytes, s_.timeout_ms));
  count_active();
  *out = req;
  return HMC_SUCCESS;
}

hmc_status_t Collectives::post_hmc(Communicator* c, const CollArgs& args, const void* input,
                                   void* output, uint64_t output_elements, const char* what,
                                   Request** out) {
  std::shared_ptr<Communicator> comm;
  uint32_t seq;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comm = find(c);
    if (!comm) return fail(HMC_ERR_INVALID_HANDLE, "{}: not a live communicator", what);
    if (!comm->broken.empty())
      return fail(HMC_ERR_PEER_LOST,
                  "{}: the communicator is unusable since a collective on it "
                  "failed: {}",
                  what, comm->broken);
    seq = comm->next_seq++;
  }
  Schedule schedule = make_schedule(args, comm->shape, comm->rank, s_.forced);
  if (schedule.steps.size() >= (1u << kTagStepBits))
    return fail(HMC_ERR_NOT_SUPPORTED, "{}: {} steps are more than collectives can tag", what,
                schedule.steps.size());
  hmc_status_t st = connect_peers(*comm, schedule, what);
  if (st != HMC_SUCCESS) return st;
  std::unique_ptr<StreamGate> gate;
  if ((st = stream_gate(args, input, output, what, &gate)) != HMC_SUCCESS) return st;
  Request* req = RequestTable::acquire(s_.owner);
  req->op = Op::Coll;
  std::string name = fmt::format("{} ({} bytes out, {}, rank {} of {})", what,
                                 output_elements * dtype_size(args.dtype), schedule.algorithm,
                                 comm->rank, comm->size);
  HMC_LOG_D("communicator {:016x}: {}, {} steps", comm->id, name, schedule.steps.size());
  Execution::Buffers buffers{input, output, output_elements};
  const std::string exec_algorithm = schedule.algorithm;
  auto exec = std::make_unique<Execution>(transfers_, services_, comm, std::move(schedule), args,
                                          buffers, seq, req, std::move(name));
  exec->set_gate(std::move(gate));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comm->last_backend = "hmc " + exec_algorithm;
    comm->backend_kind.store("hmc", std::memory_order_relaxed);
    ++comm->running;
    exec->advance();  // the first step goes out now, not at the next pass
    if (!exec->ended()) {
      running_.push_back(std::move(exec));
      count_active();
    }
  }
  *out = req;
  return HMC_SUCCESS;
}

bool Collectives::progress() {
  if (active_.load(std::memory_order_acquire) == 0) return false;
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // another thread is at it
  bool busy = false, crowded = false;
  for (size_t i = 0; i < running_.size();) {
    busy |= running_[i]->advance();
    crowded |= running_[i]->comm().crowded;
    if (running_[i]->ended()) {
      running_[i] = std::move(running_.back());
      running_.pop_back();
    } else {
      ++i;
    }
  }
  for (size_t i = 0; i < ccl_running_.size();) {
    busy |= ccl_running_[i]->advance();
    if (ccl_running_[i]->ended()) {
      ccl_running_[i] = std::move(ccl_running_.back());
      ccl_running_.pop_back();
    } else {
      ++i;
    }
  }
  for (size_t i = 0; i < hier_running_.size();) {
    busy |= hier_running_[i]->advance();
    crowded |= hier_running_[i]->comm().crowded;
    if (hier_running_[i]->ended()) {
      hier_running_[i] = std::move(hier_running_.back());
      hier_running_.pop_back();
    } else {
      ++i;
    }
  }
  count_active();
  lock.unlock();
  // With more ranks than cores, a rank polling for its peers holds a core one of them needs to
  // send what it waits for: a wait would last the scheduler's time slice (milliseconds) where
  // the transfer takes microseconds. Open MPI yields likewise when oversubscribed.
  if (!busy && crowded) sched_yield();
  return busy;
}

namespace {

// Cancels the run of `runs` (executions or ccl runs) that ends req: true when there was one.
template <typename Runs>
bool cancel_in(Runs& runs, Request* req) {
  for (auto& run : runs) {
    if (!run->ends(req) || run->ended()) continue;
    run->abort(HMC_ERR_CANCELLED, fmt::format("{}: cancelled by hmc_request_cancel", run->what()));
    run = std::move(runs.back());
    runs.pop_back();
    return true;
  }
  return false;
}

}  // namespace

hmc_status_t Collectives::cancel(Request* req) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!cancel_in(running_, req) && !cancel_in(ccl_running_, req) && !cancel_in(hier_running_, req))
    return fail(HMC_ERR_NOT_SUPPORTED, "hmc_request_cancel: the collective has already ended");
  count_active();
  return HMC_SUCCESS;
}

void Collectives::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& e : running_) e->abort(HMC_ERR_CANCELLED, "the context was destroyed");
  running_.clear();
  for (auto& r : ccl_running_) r->abort(HMC_ERR_CANCELLED, "the context was destroyed");
  ccl_running_.clear();
  for (auto& r : hier_running_) r->abort(HMC_ERR_CANCELLED, "the context was destroyed");
  hier_running_.clear();
  active_.store(0);
  for (auto& c : comms_) Handles::remove(c.get());
  comms_.clear();
}

}  // namespace hmc::coll
