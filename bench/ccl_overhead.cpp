// ccl-overhead: the CPU cost hmc adds to a collective that runs in a vendor library, measured
// against the same library called directly (issue 30: at most 2 us per 8-byte all-reduce).
//
//   ccl-overhead [--ranks N] [--iters N] [--warmup N] [--rounds N] [--device D]
//                [--direct-wait yield|spin] [--format text|json] [--timeout S]
//
// N ranks run as processes of this host, started by this program. Each runs two modes on the
// same NCCL (HMC_NCCL_LIBRARY, else libnccl.so.2) and CUDA driver (HMC_NCCL_CUDA_LIBRARY, else
// libcuda.so.1), the ones the nccl ccl plugin opens:
//   direct  ncclCommInitRank with an id rank 0 made (handed over through shared memory by this
//           program), then ncclAllReduce of 8 bytes on a stream of its own, an event recorded
//           after it and queried until it passed: what the plugin does for one collective;
//   hmc     an hmc communicator of the same ranks with buffers from hmc_mem_alloc on the same
//           device, HMC_COLL_BACKEND=ccl (and HMC_PROGRESS_THREAD=0 unless set: all of hmc's
//           work on the calling thread), hmc_all_reduce and hmc_request_wait.
// Rounds alternate the modes (which goes first too); each round is a warm-up and then timed
// calls. Rank 0 reports each mode's time per call (min, median, p90 of every timed call), the
// post alone (the call before the wait: wall time, and the calling thread's CPU time, which a
// preemption does not inflate), the process's user and system CPU time per call (getrusage),
// and the differences hmc - direct.
#include <dlfcn.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/loopback_port.h"
#include "hmc/hmc.h"
#include "nccl_api.h"
#include "tool_version.h"

namespace {

using namespace hmc::vendor::nccl;
using namespace hmc::vendor::cudadrv;

const char* kUsage =
    R"(usage: ccl-overhead [--ranks N] [--iters N] [--warmup N] [--rounds N] [--device D]
                    [--direct-wait yield|spin] [--format text|json] [--timeout S]

Times 8-byte all-reduces through hmc (HMC_COLL_BACKEND=ccl, the nccl ccl plugin) against the
same NCCL called directly, N ranks as processes of this host, rounds alternating the two modes.
The library is HMC_NCCL_LIBRARY (else libnccl.so.2), its CUDA driver HMC_NCCL_CUDA_LIBRARY (else
libcuda.so.1), as the plugin opens them.

  --ranks N           ranks (processes)                                  [2]
  --iters N           timed calls per mode per round                     [2000]
  --warmup N          untimed calls before them, per mode per round      [200]
  --rounds N          rounds; each runs both modes                       [5]
  --device D          CUDA device of every rank; -1: rank % devices      [-1]
  --direct-wait W     how the direct mode waits for its event: yield (sched_yield between
                      queries, which lets an emulated library's stream thread run on a busy
                      host; on an idle core it returns at once) or spin      [yield]
  --format text|json  a table, or one JSON object                        [text]
  --timeout S         the whole run's bound; ranks still running are killed  [300]
  --help              this text
  --version           the version
)";

constexpr int kWaitMs = 20000;  // one collective's bound, in either mode
constexpr int kMaxRanks = 64;

struct Options {
  int ranks = 2;
  int iters = 2000;
  int warmup = 200;
  int rounds = 5;
  int device = -1;
  bool json = false;
  bool yield = true;  // --direct-wait yield
  int timeout_s = 300;
};

// Set up before the fork: rank 0 leaves NCCL's unique id here.
struct Shared {
  std::atomic<int> id_state;  // 0 not yet, 1 the id is there, 2 rank 0 failed
  char id[kUniqueIdBytes];
};

uint64_t clock_ns(clockid_t id) {
  timespec t;
  clock_gettime(id, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}
uint64_t now_ns() {
  return clock_ns(CLOCK_MONOTONIC);
}
// This thread's CPU time: it stands still while the thread is not running, so a call's figure
// does not grow when the scheduler runs something else in the middle of it.
uint64_t thread_cpu_ns() {
  return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

// One call: from its start to the end of its wait, the post alone (the call before the wait),
// and the CPU time this thread spent in the post.
struct Sample {
  uint64_t total_ns, post_ns, post_cpu_ns;
};

double tv_us(const timeval& t) {
  return double(t.tv_sec) * 1e6 + double(t.tv_usec);
}

struct Cpu {
  double user_us = 0, sys_us = 0;
};

Cpu cpu_now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {tv_us(u.ru_utime), tv_us(u.ru_stime)};
}

[[noreturn]] void die(int rank, const std::string& what) {
  std::fprintf(stderr, "ccl-overhead: rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  _exit(1);
}

// ---- the library, called directly --------------------------------------------------------------

using CUdeviceptr = unsigned long long;
using PFN_cuMemAlloc = CUresult (*)(CUdeviceptr* ptr, size_t size);
using PFN_cuMemFree = CUresult (*)(CUdeviceptr ptr);
using PFN_cuMemcpyHtoD = CUresult (*)(CUdeviceptr dst, const void* src, size_t size);
using PFN_cuMemcpyDtoH = CUresult (*)(void* dst, CUdeviceptr src, size_t size);

// Value-initialised (Direct d{}): every call and handle starts null.
struct Direct {
  int rank;
  std::string nccl_name, cuda_name, version;
  void* nccl_lib;
  void* cuda_lib;
  PFN_ncclGetVersion get_version;
  PFN_ncclGetUniqueId get_unique_id;
  PFN_ncclCommInitRank comm_init_rank;
  PFN_ncclCommDestroy comm_destroy;
  PFN_ncclAllReduce all_reduce;
  PFN_ncclGetErrorString error_string;
  PFN_ncclGetLastError last_error;  // optional (NCCL 2.13 on)
  PFN_cuInit init;
  PFN_cuDeviceGetCount device_count;
  PFN_cuDeviceGet device_get;
  PFN_cuDevicePrimaryCtxRetain primary_retain;
  PFN_cuDevicePrimaryCtxRelease primary_release;
  PFN_cuCtxSetCurrent ctx_set;
  PFN_cuStreamCreate stream_create;
  PFN_cuStreamDestroy stream_destroy;
  PFN_cuEventCreate event_create;
  PFN_cuEventRecord event_record;
  PFN_cuEventQuery event_query;
  PFN_cuEventDestroy event_destroy;
  PFN_cuMemAlloc mem_alloc;
  PFN_cuMemFree mem_free;
  PFN_cuMemcpyHtoD copy_in;
  PFN_cuMemcpyDtoH copy_out;

  int device;
  CUcontext ctx;
  CUstream stream;
  CUevent event;
  CUevent mark;  // the benchmark's own, recorded after a collective of either mode
  CUdeviceptr send, recv;
  ncclComm_t comm;

  template <typename Fn>
  void resolve(void* lib, const std::string& lib_name, const char* name, Fn* out) {
    *out = reinterpret_cast<Fn>(dlsym(lib, name));
    if (!*out) die(rank, lib_name + " lacks " + name);
  }

  void cuda_check(CUresult r, const char* call) {
    if (r != CUDA_SUCCESS) die(rank, std::string(call) + ": CUDA error " + std::to_string(r));
  }

  void nccl_check(ncclResult_t r, const char* call) {
    if (r == ncclSuccess) return;
    std::string e = std::string(call) + ": " + error_string(r);
    const char* last = last_error ? last_error(comm) : nullptr;
    if (last && *last) e += std::string(" (") + last + ")";
    die(rank, e);
  }

  void open() {
    const char* n = std::getenv("HMC_NCCL_LIBRARY");
    const char* c = std::getenv("HMC_NCCL_CUDA_LIBRARY");
    nccl_name = n && *n ? n : "libnccl.so.2";
    cuda_name = c && *c ? c : "libcuda.so.1";
    if (!(nccl_lib = dlopen(nccl_name.c_str(), RTLD_NOW | RTLD_LOCAL)))
      die(rank, nccl_name + " (HMC_NCCL_LIBRARY) cannot be opened: " + dlerror());
    if (!(cuda_lib = dlopen(cuda_name.c_str(), RTLD_NOW | RTLD_LOCAL)))
      die(rank, cuda_name + " (HMC_NCCL_CUDA_LIBRARY) cannot be opened: " + dlerror());
    resolve(nccl_lib, nccl_name, "ncclGetVersion", &get_version);
    resolve(nccl_lib, nccl_name, "ncclGetUniqueId", &get_unique_id);
    resolve(nccl_lib, nccl_name, "ncclCommInitRank", &comm_init_rank);
    resolve(nccl_lib, nccl_name, "ncclCommDestroy", &comm_destroy);
    resolve(nccl_lib, nccl_name, "ncclAllReduce", &all_reduce);
    resolve(nccl_lib, nccl_name, "ncclGetErrorString", &error_string);
    last_error = reinterpret_cast<PFN_ncclGetLastError>(dlsym(nccl_lib, "ncclGetLastError"));
    resolve(cuda_lib, cuda_name, "cuInit", &init);
    resolve(cuda_lib, cuda_name, "cuDeviceGetCount", &device_count);
    resolve(cuda_lib, cuda_name, "cuDeviceGet", &device_get);
    resolve(cuda_lib, cuda_name, "cuDevicePrimaryCtxRetain", &primary_retain);
    resolve(cuda_lib, cuda_name, "cuDevicePrimaryCtxRelease_v2", &primary_release);
    resolve(cuda_lib, cuda_name, "cuCtxSetCurrent", &ctx_set);
    resolve(cuda_lib, cuda_name, "cuStreamCreate", &stream_create);
    resolve(cuda_lib, cuda_name, "cuStreamDestroy_v2", &stream_destroy);
    resolve(cuda_lib, cuda_name, "cuEventCreate", &event_create);
    resolve(cuda_lib, cuda_name, "cuEventRecord", &event_record);
    resolve(cuda_lib, cuda_name, "cuEventQuery", &event_query);
    resolve(cuda_lib, cuda_name, "cuEventDestroy_v2", &event_destroy);
    resolve(cuda_lib, cuda_name, "cuMemAlloc_v2", &mem_alloc);
    resolve(cuda_lib, cuda_name, "cuMemFree_v2", &mem_free);
    resolve(cuda_lib, cuda_name, "cuMemcpyHtoD_v2", &copy_in);
    resolve(cuda_lib, cuda_name, "cuMemcpyDtoH_v2", &copy_out);
    int code = 0, major = 0, minor = 0, patch = 0;
    nccl_check(get_version(&code), "ncclGetVersion");
    decode_version(code, &major, &minor, &patch);
    version = nccl_name + ", NCCL " + std::to_string(major) + "." + std::to_string(minor) + "." +
              std::to_string(patch);
  }

  // The device (chosen, or rank % devices), its primary context current, a stream, an event and
  // the two 8-byte buffers.
  void start(int chosen) {
    cuda_check(init(0), "cuInit");
    int count = 0;
    cuda_check(device_count(&count), "cuDeviceGetCount");
    if (count <= 0) die(rank, cuda_name + " reports no CUDA device");
    device = chosen >= 0 ? chosen : rank % count;
    if (device >= count)
      die(rank, "--device " + std::to_string(device) + ", but there are " + std::to_string(count) +
                    " devices");
    CUdevice dev = 0;
    cuda_check(device_get(&dev, device), "cuDeviceGet");
    cuda_check(primary_retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    cuda_check(ctx_set(ctx), "cuCtxSetCurrent");
    cuda_check(stream_create(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    cuda_check(event_create(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    cuda_check(event_create(&mark, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    cuda_check(mem_alloc(&send, 8), "cuMemAlloc");
    cuda_check(mem_alloc(&recv, 8), "cuMemAlloc");
  }

  // ncclCommInitRank on rank 0's id, which rank 0 makes and leaves in `shared`.
  void join(int nranks, Shared* shared, uint64_t deadline_ns) {
    ncclUniqueId id;
    if (rank == 0) {
      ncclResult_t r = get_unique_id(&id);
      if (r != ncclSuccess) {
        shared->id_state.store(2, std::memory_order_release);
        nccl_check(r, "ncclGetUniqueId");
      }
      std::memcpy(shared->id, id.internal, kUniqueIdBytes);
      shared->id_state.store(1, std::memory_order_release);
    } else {
      int s;
      while ((s = shared->id_state.load(std::memory_order_acquire)) == 0) {
        if (now_ns() > deadline_ns) die(rank, "rank 0 made no NCCL unique id in time");
        usleep(1000);
      }
      if (s != 1) die(rank, "rank 0 could not make an NCCL unique id");
      std::memcpy(id.internal, shared->id, kUniqueIdBytes);
    }
    nccl_check(comm_init_rank(&comm, nranks, id, rank), "ncclCommInitRank");
  }

  void fill(int64_t v) { cuda_check(copy_in(send, &v, 8), "cuMemcpyHtoD"); }
  int64_t result() {
    int64_t v = 0;
    cuda_check(copy_out(&v, recv, 8), "cuMemcpyDtoH");
    return v;
  }

  // One all-reduce and its wait; the post is the call and the event's record. `yield`: give the
  // core away between queries (an emulated library's stream needs a CPU thread to progress).
  Sample once(bool yield) {
    uint64_t c0 = thread_cpu_ns(), t0 = now_ns();
    ncclResult_t r = all_reduce(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv),
                                1, ncclInt64, ncclSum, comm, stream);
    if (r != ncclSuccess) nccl_check(r, "ncclAllReduce");
    cuda_check(event_record(event, stream), "cuEventRecord");
    uint64_t t1 = now_ns(), c1 = thread_cpu_ns();
    for (uint32_t polls = 1;; ++polls) {
      CUresult q = event_query(event);
      if (q == CUDA_SUCCESS) break;
      if (q != CUDA_ERROR_NOT_READY) cuda_check(q, "cuEventQuery");
      if (yield) sched_yield();
      if ((polls & 1023) == 0 && now_ns() - t1 > uint64_t(kWaitMs) * 1000000)
        die(rank, "ncclAllReduce did not end within " + std::to_string(kWaitMs) + " ms");
    }
    return {now_ns() - t0, t1 - t0, c1 - c0};
  }

  // Waits, outside the measured part, until the work on the stream so far has ended: the mark
  // is recorded after it and queried with sleeps in between, so that the wait takes no core
  // from the library's own threads.
  void settle() {
    cuda_check(event_record(mark, stream), "cuEventRecord");
    const uint64_t until = now_ns() + uint64_t(kWaitMs) * 1000000;
    for (CUresult q; (q = event_query(mark)) != CUDA_SUCCESS; usleep(20)) {
      if (q != CUDA_ERROR_NOT_READY) cuda_check(q, "cuEventQuery");
      if (now_ns() > until)
        die(rank, "the stream did not drain within " + std::to_string(kWaitMs) + " ms");
    }
  }

  // The CPU cost of one all-reduce: this thread's CPU time in the post and in the query that
  // finds it ended, the wait for its end (settle) left out.
  uint64_t cost_once() {
    uint64_t c0 = thread_cpu_ns();
    ncclResult_t r = all_reduce(reinterpret_cast<const void*>(send), reinterpret_cast<void*>(recv),
                                1, ncclInt64, ncclSum, comm, stream);
    if (r != ncclSuccess) nccl_check(r, "ncclAllReduce");
    cuda_check(event_record(event, stream), "cuEventRecord");
    uint64_t c1 = thread_cpu_ns();
    settle();
    uint64_t c2 = thread_cpu_ns();
    cuda_check(event_query(event), "cuEventQuery");
    return c1 - c0 + thread_cpu_ns() - c2;
  }

  void stop() {
    if (comm) comm_destroy(comm);
    if (send) mem_free(send);
    if (recv) mem_free(recv);
    if (event) event_destroy(event);
    if (mark) event_destroy(mark);
    if (stream) stream_destroy(stream);
    if (ctx) primary_release(device);
  }
};

// ---- the same through hmc ----------------------------------------------------------------------

struct Through {
  int rank = 0;
  hmc_context_t ctx = nullptr;
  hmc_comm_t comm = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  std::string backend;
  bool progress_thread = false;

  void check(hmc_status_t st, const char* call) {
    if (st != HMC_SUCCESS)
      die(rank, std::string(call) + ": " + hmc_status_string(st) + ": " + hmc_last_error());
  }

  void start(int nranks, const std::string& rendezvous, int device) {
    // Every device-memory collective through the library, or a failure: never hmc's own paths.
    setenv("HMC_COLL_BACKEND", "ccl", 1);
    // All of hmc's work on the calling thread, where its CPU time is counted (the progress
    // thread would otherwise end a drained collective behind the cost figure's back), unless
    // the environment says otherwise.
    setenv("HMC_PROGRESS_THREAD", "0", 0);
    progress_thread = std::string(getenv("HMC_PROGRESS_THREAD")) != "0";
    check(hmc_context_create(nullptr, &ctx), "hmc_context_create");
    hmc_comm_options_t o{};
    o.struct_size = sizeof o;
    o.rank = rank;
    o.size = nranks;
    o.rendezvous = rendezvous.c_str();
    o.timeout_ms = kWaitMs;
    check(hmc_comm_create(ctx, &o, &comm), "hmc_comm_create");
    std::string dev = "cuda:" + std::to_string(device);
    check(hmc_mem_alloc(ctx, dev.c_str(), 8, &send), "hmc_mem_alloc");
    check(hmc_mem_alloc(ctx, dev.c_str(), 8, &recv), "hmc_mem_alloc");
  }

  void fill(int64_t v) { check(hmc_mem_copy(ctx, send, &v, 8), "hmc_mem_copy"); }
  int64_t result() {
    int64_t v = 0;
    check(hmc_mem_copy(ctx, &v, recv, 8), "hmc_mem_copy");
    return v;
  }

  Sample once(bool) {
    uint64_t c0 = thread_cpu_ns(), t0 = now_ns();
    hmc_request_t req = nullptr;
    check(hmc_all_reduce(comm, send, recv, 1, HMC_DTYPE_I64, HMC_OP_SUM, &req), "hmc_all_reduce");
    uint64_t t1 = now_ns(), c1 = thread_cpu_ns();
    check(hmc_request_wait(req, kWaitMs, nullptr), "hmc_request_wait");
    return {now_ns() - t0, t1 - t0, c1 - c0};
  }

  // The same for hmc: the all-reduce posted on the direct mode's stream, so that its mark tells
  // when the collective has ended; hmc_request_wait then only has to see it.
  uint64_t cost_once(Direct& d) {
    uint64_t c0 = thread_cpu_ns();
    hmc_request_t req = nullptr;
    check(hmc_all_reduce_on_stream(comm, send, recv, 1, HMC_DTYPE_I64, HMC_OP_SUM, d.stream, &req),
          "hmc_all_reduce_on_stream");
    uint64_t c1 = thread_cpu_ns();
    d.settle();
    uint64_t c2 = thread_cpu_ns();
    check(hmc_request_wait(req, kWaitMs, nullptr), "hmc_request_wait");
    return c1 - c0 + thread_cpu_ns() - c2;
  }

  // What ran the latest collective: "ccl nccl (libnccl.so.2, NCCL 2.28.9)".
  void note_backend() {
    char buf[256];
    check(hmc_comm_last_backend(comm, buf, sizeof buf), "hmc_comm_last_backend");
    backend = buf;
    if (backend.rfind("ccl ", 0) != 0)
      die(rank, "the all-reduce ran on '" + backend + "', not in the vendor library");
  }

  void stop() {
    if (send) hmc_mem_free(ctx, send);
    if (recv) hmc_mem_free(ctx, recv);
    if (comm) hmc_comm_destroy(comm);
    if (ctx) hmc_context_destroy(ctx);
  }
};

// ---- measuring ---------------------------------------------------------------------------------

struct Mode {
  const char* name = "";
  std::vector<uint64_t> total_ns, post_ns, post_cpu_ns, cost_ns;
  Cpu cost_cpu;  // the process's, over the cost rounds
  std::vector<double> round_median_us;
  Cpu cpu;
  long calls = 0;
};

double percentile_us(std::vector<uint64_t> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = size_t(p * double(v.size() - 1) + 0.5);
  return double(v[std::min(i, v.size() - 1)]) / 1e3;
}

// One round of one mode: warm-up, then timed calls, then the result checked.
template <typename Side>
void run_round(Side& side, Mode& m, const Options& o, int round, int rank, int nranks) {
  const int64_t mine = int64_t(rank + 1) * (round + 1);
  const int64_t want = int64_t(nranks) * (nranks + 1) / 2 * (round + 1);
  side.fill(mine);
  for (int i = 0; i < o.warmup; ++i) side.once(o.yield);
  std::vector<Sample> samples(size_t(o.iters));
  Cpu c0 = cpu_now();
  for (Sample& x : samples) x = side.once(o.yield);
  Cpu c1 = cpu_now();
  std::vector<uint64_t> times;
  for (const Sample& x : samples) {
    times.push_back(x.total_ns);
    m.post_ns.push_back(x.post_ns);
    m.post_cpu_ns.push_back(x.post_cpu_ns);
  }
  m.cpu.user_us += c1.user_us - c0.user_us;
  m.cpu.sys_us += c1.sys_us - c0.sys_us;
  m.calls += o.iters;
  m.total_ns.insert(m.total_ns.end(), times.begin(), times.end());
  m.round_median_us.push_back(percentile_us(times, 0.5));
  int64_t got = side.result();
  if (got != want)
    die(rank, std::string(m.name) + " round " + std::to_string(round) + ": the all-reduce gave " +
                  std::to_string(got) + ", not " + std::to_string(want));
}

// One round of the CPU cost of one mode: warm-up, then timed calls, each drained before its
// completion is asked for (cost_once).
template <typename Cost>
void cost_round(Cost cost, Mode& m, const Options& o) {
  for (int i = 0; i < o.warmup; ++i) cost();
  Cpu c0 = cpu_now();
  for (int i = 0; i < o.iters; ++i) m.cost_ns.push_back(cost());
  Cpu c1 = cpu_now();
  m.cost_cpu.user_us += c1.user_us - c0.user_us;
  m.cost_cpu.sys_us += c1.sys_us - c0.sys_us;
}

struct Figures {
  double min, median, p90, post_median, post_cpu_median, user, sys;
  double cost_min, cost_median, cost_p90, cost_process;  // CPU per call, drained first
};

Figures figures_of(const Mode& m) {
  return {percentile_us(m.total_ns, 0.0),
          percentile_us(m.total_ns, 0.5),
          percentile_us(m.total_ns, 0.9),
          percentile_us(m.post_ns, 0.5),
          percentile_us(m.post_cpu_ns, 0.5),
          m.cpu.user_us / double(m.calls),
          m.cpu.sys_us / double(m.calls),
          percentile_us(m.cost_ns, 0.0),
          percentile_us(m.cost_ns, 0.5),
          percentile_us(m.cost_ns, 0.9),
          (m.cost_cpu.user_us + m.cost_cpu.sys_us) / double(m.cost_ns.size())};
}

// The median over rounds of (hmc's round median - direct's): drift between rounds cancels.
double paired_difference(const Mode& direct, const Mode& hmc) {
  std::vector<double> d;
  for (size_t r = 0; r < direct.round_median_us.size(); ++r)
    d.push_back(hmc.round_median_us[r] - direct.round_median_us[r]);
  std::sort(d.begin(), d.end());
  size_t n = d.size();
  return n % 2 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2;
}

void report(const Options& o, const Direct& direct, const Through& through, const Mode& dm,
            const Mode& hm) {
  Figures d = figures_of(dm), h = figures_of(hm);
  double paired = paired_difference(dm, hm);
  if (o.json) {
    using hmc_tools::Json;
    auto us = [](double v) { return std::round(v * 1000) / 1000; };  // to the nanosecond
    auto mode = [&](const Figures& f) {
      Json m;
      m["min_us"] = us(f.min);
      m["median_us"] = us(f.median);
      m["p90_us"] = us(f.p90);
      m["post_median_us"] = us(f.post_median);
      m["post_cpu_median_us"] = us(f.post_cpu_median);
      m["user_us_per_call"] = us(f.user);
      m["sys_us_per_call"] = us(f.sys);
      m["cpu"] = {{"min_us", us(f.cost_min)},
                  {"median_us", us(f.cost_median)},
                  {"p90_us", us(f.cost_p90)},
                  {"process_us", us(f.cost_process)}};
      return m;
    };
    Json j;
    j["tool"] = "ccl-overhead";
    j["version"] = hmc_version();
    j["ranks"] = o.ranks;
    j["bytes"] = 8;
    j["rounds"] = o.rounds;
    j["iters"] = o.iters;
    j["warmup"] = o.warmup;
    j["direct_wait"] = o.yield ? "yield" : "spin";
    j["library"] = direct.version;
    j["backend"] = through.backend;
    j["progress_thread"] = through.progress_thread;
    j["direct"] = mode(d);
    j["hmc"] = mode(h);
    j["difference_us"] = {{"median", us(h.median - d.median)},
                          {"paired_median", us(paired)},
                          {"p90", us(h.p90 - d.p90)},
                          {"post_median", us(h.post_median - d.post_median)},
                          {"post_cpu_median", us(h.post_cpu_median - d.post_cpu_median)},
                          {"cpu_per_call", us((h.user + h.sys) - (d.user + d.sys))},
                          {"cpu_median", us(h.cost_median - d.cost_median)},
                          {"cpu_process", us(h.cost_process - d.cost_process)}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf(
      "# ccl-overhead: %d ranks, 8-byte int64 sum all-reduce, %d rounds x %d calls per mode "
      "(after %d warm-up), direct waits by %s, rank 0's figures\n",
      o.ranks, o.rounds, o.iters, o.warmup,
      o.yield ? "cuEventQuery + sched_yield" : "cuEventQuery");
  std::printf("# direct: %s; hmc: %s, progress thread %s\n", direct.version.c_str(),
              through.backend.c_str(), through.progress_thread ? "on" : "off");
  std::printf(
      "# time per call, us: min, median, p90 of post + wait; post: median of the call alone "
      "(wall, and this thread's CPU); user, sys: the process's CPU time\n");
  std::printf("%-11s %9s %9s %9s %9s %9s %9s %9s\n", "mode", "min", "median", "p90", "post",
              "post_cpu", "user", "sys");
  auto row = [](const char* name, const Figures& f) {
    std::printf("%-11s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", name, f.min, f.median, f.p90,
                f.post_median, f.post_cpu_median, f.user, f.sys);
  };
  row("direct", d);
  row("hmc", h);
  row("hmc-direct",
      {h.min - d.min, h.median - d.median, h.p90 - d.p90, h.post_median - d.post_median,
       h.post_cpu_median - d.post_cpu_median, h.user - d.user, h.sys - d.sys, 0, 0, 0, 0});
  std::printf("# hmc - direct, median over rounds of the rounds' median difference: %.2f us\n",
              paired);
  std::printf(
      "# CPU cost per call, us: this thread's CPU time in the post and in the wait that finds "
      "the collective ended (drained first, out of the count); process: user + sys per call\n");
  std::printf("%-11s %9s %9s %9s %9s\n", "mode", "min", "median", "p90", "process");
  auto cost_row = [](const char* name, double a, double b, double c, double e) {
    std::printf("%-11s %9.2f %9.2f %9.2f %9.2f\n", name, a, b, c, e);
  };
  cost_row("direct", d.cost_min, d.cost_median, d.cost_p90, d.cost_process);
  cost_row("hmc", h.cost_min, h.cost_median, h.cost_p90, h.cost_process);
  cost_row("hmc-direct", h.cost_min - d.cost_min, h.cost_median - d.cost_median,
           h.cost_p90 - d.cost_p90, h.cost_process - d.cost_process);
}

int rank_main(int rank, const Options& o, Shared* shared, const std::string& rendezvous) {
  const uint64_t deadline = now_ns() + uint64_t(o.timeout_s) * 1000000000ull;
  Direct direct{};
  direct.rank = rank;
  direct.open();
  direct.start(o.device);
  direct.join(o.ranks, shared, deadline);
  Through through;
  through.rank = rank;
  through.start(o.ranks, rendezvous, direct.device);
  Mode dm, hm;
  dm.name = "direct";
  hm.name = "hmc";
  auto direct_cost = [&] { return direct.cost_once(); };
  auto hmc_cost = [&] { return through.cost_once(direct); };
  for (int r = 0; r < o.rounds; ++r) {
    if (r % 2 == 0) {
      run_round(direct, dm, o, r, rank, o.ranks);
      run_round(through, hm, o, r, rank, o.ranks);
      cost_round(direct_cost, dm, o);
      cost_round(hmc_cost, hm, o);
    } else {
      run_round(through, hm, o, r, rank, o.ranks);
      run_round(direct, dm, o, r, rank, o.ranks);
      cost_round(hmc_cost, hm, o);
      cost_round(direct_cost, dm, o);
    }
  }
  through.note_backend();
  if (rank == 0) report(o, direct, through, dm, hm);
  std::fflush(stdout);
  through.stop();
  direct.stop();
  return 0;
}

bool parse_int(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) return false;
  *out = int(v);
  return true;
}

// 0: parsed; 1: --help printed; 2: a usage error (said).
int parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 1;
    }
    std::string value;
    size_t eq = a.find('=');
    if (eq != std::string::npos && a.rfind("--", 0) == 0) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[i + 1];
      if (a.rfind("--", 0) == 0) ++i;
    }
    struct IntOpt {
      const char* name;
      int* field;
      int lo, hi;
    } ints[] = {{"--ranks", &o->ranks, 1, kMaxRanks},   {"--iters", &o->iters, 1, 100000000},
                {"--warmup", &o->warmup, 0, 100000000}, {"--rounds", &o->rounds, 1, 1000},
                {"--device", &o->device, -1, 1023},     {"--timeout", &o->timeout_s, 1, 86400}};
    bool known = false;
    for (const IntOpt& opt : ints) {
      if (a != opt.name) continue;
      known = true;
      if (!parse_int(value.c_str(), opt.lo, opt.hi, opt.field)) {
        std::fprintf(stderr, "ccl-overhead: %s wants an integer from %d to %d, not '%s'\n",
                     opt.name, opt.lo, opt.hi, value.c_str());
        return 2;
      }
    }
    if (known) continue;
    if (a == "--direct-wait") {
      if (value != "spin" && value != "yield") {
        std::fprintf(stderr, "ccl-overhead: --direct-wait is spin or yield, not '%s'\n",
                     value.c_str());
        return 2;
      }
      o->yield = value == "yield";
      continue;
    }
    if (a == "--format") {
      if (value != "text" && value != "json") {
        std::fprintf(stderr, "ccl-overhead: --format is text or json, not '%s'\n", value.c_str());
        return 2;
      }
      o->json = value == "json";
      continue;
    }
    std::fprintf(stderr, "ccl-overhead: unknown argument '%s' (--help lists them)\n", argv[i]);
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (hmc_tools::version_asked(argc, argv)) return hmc_tools::print_version("ccl-overhead");
  Options o;
  if (int p = parse(argc, argv, &o); p != 0) return p == 1 ? 0 : 2;
  const int port = hmc_tools::free_loopback_port();
  if (port == 0) {
    std::fprintf(stderr, "ccl-overhead: no free TCP port on loopback: %s\n", strerror(errno));
    return 1;
  }
  const std::string rendezvous = "tcp://127.0.0.1:" + std::to_string(port);
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::fprintf(stderr, "ccl-overhead: mmap: %s\n", strerror(errno));
    return 1;
  }
  auto* shared = new (mem) Shared;
  shared->id_state.store(0);
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int r = 0; r < o.ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "ccl-overhead: fork: %s\n", strerror(errno));
      for (pid_t p : pids) kill(p, SIGKILL);
      return 1;
    }
    if (pid == 0) _exit(rank_main(r, o, shared, rendezvous));
    pids.push_back(pid);
  }
  // Every rank's end, within the bound; a rank that failed or hangs ends the others.
  const uint64_t deadline = now_ns() + uint64_t(o.timeout_s) * 1000000000ull + 5000000000ull;
  int failed = 0, left = o.ranks;
  std::vector<bool> ended(size_t(o.ranks), false);
  while (left > 0) {
    for (int r = 0; r < o.ranks; ++r) {
      if (ended[size_t(r)]) continue;
      int status = 0;
      if (waitpid(pids[size_t(r)], &status, WNOHANG) != pids[size_t(r)]) continue;
      ended[size_t(r)] = true;
      --left;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
      if (WIFSIGNALED(status) && !failed)
        std::fprintf(stderr, "ccl-overhead: rank %d was killed by signal %d\n", r,
                     WTERMSIG(status));
      if (!failed++)
        for (int k = 0; k < o.ranks; ++k)
          if (!ended[size_t(k)]) kill(pids[size_t(k)], SIGTERM);
    }
    if (left > 0 && now_ns() > deadline) {
      std::fprintf(stderr, "ccl-overhead: ranks still running after %d s; killed\n", o.timeout_s);
      for (int k = 0; k < o.ranks; ++k)
        if (!ended[size_t(k)]) kill(pids[size_t(k)], SIGKILL);
      for (int k = 0; k < o.ranks; ++k)
        if (!ended[size_t(k)]) waitpid(pids[size_t(k)], nullptr, 0);
      return 1;
    }
    if (left > 0) usleep(2000);
  }
  return failed ? 1 : 0;
}
