#include "coll/collectives.h"

#include <sched.h>

#include <algorithm>
#include <set>

#include "coll/bootstrap.h"
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
  hmc_status_t st = post(comm, args, mine, all.data(), 0, "hmc_comm_split", &req);
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
  Request* req = RequestTable::acquire(s_.owner);
  req->op = Op::Coll;
  std::string name = fmt::format("{} ({} bytes out, {}, rank {} of {})", what,
                                 output_elements * dtype_size(args.dtype), schedule.algorithm,
                                 comm->rank, comm->size);
  HMC_LOG_D("communicator {:016x}: {}, {} steps", comm->id, name, schedule.steps.size());
  Execution::Buffers buffers{input, output, output_elements};
  auto exec = std::make_unique<Execution>(transfers_, services_, comm, std::move(schedule), args,
                                          buffers, seq, req, std::move(name));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++comm->running;
    exec->advance();  // the first step goes out now, not at the next pass
    if (!exec->ended()) {
      running_.push_back(std::move(exec));
      active_.store(int(running_.size()), std::memory_order_release);
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
  active_.store(int(running_.size()), std::memory_order_release);
  lock.unlock();
  // With more ranks than cores, a rank polling for its peers holds a core one of them needs to
  // send what it waits for: a wait would last the scheduler's time slice (milliseconds) where
  // the transfer takes microseconds. Open MPI yields likewise when oversubscribed.
  if (!busy && crowded) sched_yield();
  return busy;
}

hmc_status_t Collectives::cancel(Request* req) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& e : running_) {
    if (!e->ends(req)) continue;
    if (e->ended()) break;
    e->abort(HMC_ERR_CANCELLED, fmt::format("{}: cancelled by hmc_request_cancel", e->what()));
    e = std::move(running_.back());
    running_.pop_back();
    active_.store(int(running_.size()), std::memory_order_release);
    return HMC_SUCCESS;
  }
  return fail(HMC_ERR_NOT_SUPPORTED, "hmc_request_cancel: the collective has already ended");
}

void Collectives::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& e : running_) e->abort(HMC_ERR_CANCELLED, "the context was destroyed");
  running_.clear();
  active_.store(0);
  for (auto& c : comms_) Handles::remove(c.get());
  comms_.clear();
}

}  // namespace hmc::coll
