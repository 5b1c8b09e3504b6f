// Communicators and collectives between forked processes on this host. Each rank is a child
// process with its own context (and its own emulated vendor, or host memory); its verdict comes
// back through its exit status, what failed through its stderr.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "coll_roles.h"
#include "hmc/hmc.h"
#include "hmc/hmc.hpp"

using namespace coll_roles;

namespace {

constexpr int kTimeoutMs = 8000;

struct Vendor {
  const char* name;
  const char* env;
  const char* lib;  // relative to FAKEGPU_DIR
};
const Vendor kVendors[] = {
    {"cuda", "HMC_CUDA_LIBRARY", "cuda/libcuda.so.1"},
    {"hip", "HMC_HIP_LIBRARY", "hip6/libamdhip64.so.6"},
    {"mlu", "HMC_MLU_LIBRARY", "mlu/libcnrt.so"},
    {"musa", "HMC_MUSA_LIBRARY", "musa/libmusart.so"},
};

// One rank's environment: hoststage only, and only its own memory's vendor plugin.
void set_rank_env(const std::string& mem, const std::string& path) {
  setenv("HMC_PLUGIN_PATH", HMC_TEST_PLUGIN_DIR, 1);
  setenv("HMC_NET_PLUGINS", "hoststage", 1);
  setenv("HMC_PATH", path.c_str(), 1);
  setenv("HMC_HOSTSTAGE_SHM", path == "hoststage/tcp" ? "0" : "1", 1);
  setenv("HMC_DEVICE_COPY_CALIBRATE", "0", 1);
  setenv("HMC_NET_CALIBRATE", "0", 1);
  setenv("HMC_TIMEOUT_MS", std::to_string(kTimeoutMs).c_str(), 1);
  setenv("HMC_LOG_LEVEL", getenv("COLL_TEST_LOG") ? getenv("COLL_TEST_LOG") : "error", 1);
  std::string vendor = mem.substr(0, mem.find(':'));
  // The SDK's device template, whose stand-in runtime offers the device reduce slot.
  if (vendor == "template") {
    setenv("HMC_PLUGIN_PATH",
           (std::string(HMC_TEST_PLUGIN_DIR) + ":" + HMC_TEMPLATE_DEVICE_PLUGIN).c_str(), 1);
    setenv("HMC_TEMPLATE_EMULATED_DEVICES", "1", 1);
    for (const auto& v : kVendors) unsetenv(v.env);
    setenv("HMC_DEVICE_PLUGINS", "template", 1);
    return;
  }
  // The vendor collective libraries only where a test asks for them (CclBackend.*).
  setenv("HMC_CCL_PLUGINS", "^nccl,^rccl,^mccl", 1);
  std::string plugins = "^cuda,^hip,^mlu,^musa";
  for (const auto& v : kVendors) {
    if (vendor == v.name) {
      plugins = v.name;
      setenv(v.env, (std::string(FAKEGPU_DIR) + "/" + v.lib).c_str(), 1);
    } else {
      unsetenv(v.env);
    }
  }
  setenv("HMC_DEVICE_PLUGINS", plugins.c_str(), 1);
}

// A free TCP port on loopback for the rendezvous (bound, read, closed: another process could
// take it in between, which the tests accept).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

struct Launch {
  Launch(std::vector<std::string> m) : mems(std::move(m)) {}
  std::vector<std::string> mems;  // per rank
  std::string path = "hoststage/shm";
  std::vector<int> ranks;  // the rank each process claims; empty: 0..n-1
  std::vector<int> sizes;  // the size each process claims; empty: mems.size()
  int join_timeout_ms = 10000;
  // Where rank, size and rendezvous come from: "options", or a launcher's variables ("torchrun",
  // "slurm", "ompi"; the last two with HMC_RENDEZVOUS, as they give no address), or "hmc".
  std::string from = "options";
  std::vector<std::pair<std::string, std::string>> env;  // set in every rank, last
  std::string rendezvous;                                // empty: tcp:// on a free port of loopback
  // Per process: the process whose end starts it (a newcomer replacing a member that left);
  // -1 or empty: started at once.
  std::vector<int> start_after;
};

// Runs one process per entry of l.mems; returns what each reported ("" for a pass) or, with
// `joined` false, the status hmc_comm_create ended with (role then gets no comm).
std::vector<std::string> run(const Launch& l, const Role& role) {
  int n = int(l.mems.size());
  int port = free_port();
  std::string rdv = l.rendezvous.empty() ? "tcp://127.0.0.1:" + std::to_string(port) : l.rendezvous;
  std::vector<pid_t> pids(size_t(n), -1);
  std::vector<int> pipes(size_t(n), -1);
  std::vector<std::string> out(static_cast<size_t>(n));
  std::vector<bool> ended(size_t(n), false);
  int left = n;
  auto spawn = [&](int i) {
    int fds[2];
    if (pipe(fds) != 0) {
      out[size_t(i)] = "pipe failed";
      ended[size_t(i)] = true;
      --left;
      return;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      // Keep nothing of the test's but this pipe: a pipe another of its threads has open at the
      // fork (a redis-cli's output, read to its end) must not stay open for the rank's lifetime.
      if (fds[1] > 3) close_range(3, unsigned(fds[1]) - 1, 0);
      close_range(unsigned(fds[1]) + 1, ~0U, 0);
      set_rank_env(l.mems[size_t(i)], l.path);
      setenv("COLL_TEST_PROCESS", std::to_string(i).c_str(), 1);
      for (const auto& [k, v] : l.env) setenv(k.c_str(), v.c_str(), 1);
      int rank = l.ranks.empty() ? i : l.ranks[size_t(i)];
      int size = l.sizes.empty() ? n : l.sizes[size_t(i)];
      auto report = [&](const std::string& s) {
        ssize_t w = write(fds[1], s.data(), s.size());
        (void)w;
        _exit(s.empty() ? 0 : 1);
      };
      std::string rs = std::to_string(rank), ss = std::to_string(size);
      // Before the context: it reads the HMC_ variables when it is created.
      if (l.from == "torchrun") {
        setenv("RANK", rs.c_str(), 1);
        setenv("WORLD_SIZE", ss.c_str(), 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      } else if (l.from != "options") {
        const char* rank_var = l.from == "slurm"  ? "SLURM_PROCID"
                               : l.from == "ompi" ? "OMPI_COMM_WORLD_RANK"
                                                  : "HMC_RANK";
        const char* size_var = l.from == "slurm"  ? "SLURM_NTASKS"
                               : l.from == "ompi" ? "OMPI_COMM_WORLD_SIZE"
                                                  : "HMC_WORLD_SIZE";
        setenv(rank_var, rs.c_str(), 1);
        setenv(size_var, ss.c_str(), 1);
        setenv("HMC_RENDEZVOUS", rdv.c_str(), 1);
      }
      hmc_context_t ctx;
      if (hmc_context_create(nullptr, &ctx) != HMC_SUCCESS)
        report("context: " + std::string(hmc_last_error()));
      hmc_comm_options_t o{};
      o.struct_size = sizeof o;
      o.rank = -1;
      o.size = 0;
      o.timeout_ms = l.join_timeout_ms;
      if (l.from == "options") {
        o.rank = rank;
        o.size = size;
        o.rendezvous = rdv.c_str();
      }
      hmc_comm_t comm = nullptr;
      hmc_status_t st = hmc_comm_create(ctx, &o, &comm);
      Rank r{ctx, comm, rank, size, l.mems[size_t(i)]};
      std::string verdict;
      if (st != HMC_SUCCESS) {
        verdict = "create: " + describe(st);
      } else {
        verdict = role(r);
        if (r.comm && hmc_comm_destroy(r.comm) != HMC_SUCCESS && verdict.empty())
          verdict = "destroy: " + std::string(hmc_last_error());
      }
      hmc_context_destroy(ctx);
      report(verdict);
    }
    close(fds[1]);
    pids[size_t(i)] = pid;
    pipes[size_t(i)] = fds[0];
  };
  auto after = [&](int i) { return l.start_after.empty() ? -1 : l.start_after[size_t(i)]; };
  for (int i = 0; i < n; ++i)
    if (after(i) < 0) spawn(i);
  auto t0 = std::chrono::steady_clock::now();
  for (; left > 0; usleep(10000)) {
    for (int i = 0; i < n; ++i) {
      if (ended[size_t(i)] || pids[size_t(i)] < 0) continue;
      int status = 0;
      pid_t r = waitpid(pids[size_t(i)], &status, WNOHANG);
      if (r != pids[size_t(i)]) {
        if (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(90)) continue;
        kill(pids[size_t(i)], SIGKILL);
        waitpid(pids[size_t(i)], &status, 0);
        out[size_t(i)] = "hung (killed after 90 s)";
      }
      ended[size_t(i)] = true;
      --left;
      char buf[4096];
      ssize_t got = read(pipes[size_t(i)], buf, sizeof buf);
      close(pipes[size_t(i)]);
      if (out[size_t(i)].empty()) {
        if (got > 0)
          out[size_t(i)].assign(buf, size_t(got));
        else if (WIFSIGNALED(status))
          out[size_t(i)] = "killed by signal " + std::to_string(WTERMSIG(status));
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
          out[size_t(i)] = "failed without a word";
      }
      for (int j = 0; j < n; ++j)
        if (after(j) == i) spawn(j);
    }
  }
  return out;
}

void expect_all_pass(const std::vector<std::string>& v) {
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], "") << "rank " << i;
}

std::vector<std::string> mems_of(int n, const std::vector<std::string>& cycle) {
  std::vector<std::string> m;
  for (int i = 0; i < n; ++i) m.push_back(cycle[size_t(i) % cycle.size()]);
  return m;
}

// Reductions into device memory in pieces of several staging chunks (the ranks run with
// HMC_STAGE_CHUNK=64K): all-reduce by ring and by doubling, int32 exact, float within rounding,
// int64 max; reduce-scatter of int32 and float.
std::string device_reductions_role(Rank& r) {
  for (size_t count : {size_t(5000), size_t(200003)}) {
    std::vector<int32_t> in(count), out;
    for (size_t i = 0; i < count; ++i) in[i] = ival(r.rank, i) * 7919;
    std::string e =
        all_reduce_from(r, r.mem, in, HMC_DTYPE_I32, HMC_OP_SUM, "all_reduce i32", &out);
    if (!e.empty()) return e;
    for (size_t i = 0; i < count; ++i) {
      int32_t want = 0;
      for (int k = 0; k < r.size; ++k) want += ival(k, i) * 7919;
      if (out[i] != want)
        return "all_reduce i32 count " + std::to_string(count) + " element " + std::to_string(i);
    }
    std::vector<float> fin(count), fout(count);
    for (size_t i = 0; i < count; ++i) fin[i] = fval(r.rank, i);
    Buf send(r.ctx, r.mem, count * 4);
    hmc_request_t req;
    if (!send.put(fin.data())) return "fill";
    e = wait(hmc_all_reduce(r.comm, send.get(), send.get(), count, HMC_DTYPE_F32, HMC_OP_SUM, &req),
             &req, "all_reduce f32 in place");
    if (!e.empty()) return e;
    if (!send.take(fout.data())) return "read back";
    for (size_t i = 0; i < count; ++i) {
      double want = 0;
      for (int k = 0; k < r.size; ++k) want += fval(k, i);
      if (std::fabs(fout[i] - want) > 1e-5 * std::fabs(want) + 1e-6)
        return "all_reduce f32 count " + std::to_string(count) + " element " + std::to_string(i);
    }
  }
  {
    const size_t count = 3001;
    std::vector<int64_t> in(count), out;
    for (size_t i = 0; i < count; ++i) in[i] = (int64_t(r.rank) - 2) * int64_t(i + 1) * 1000000007;
    std::string e =
        all_reduce_from(r, r.mem, in, HMC_DTYPE_I64, HMC_OP_MAX, "all_reduce i64 max", &out);
    if (!e.empty()) return e;
    for (size_t i = 0; i < count; ++i)
      if (out[i] != (int64_t(r.size - 1) - 2) * int64_t(i + 1) * 1000000007)
        return "all_reduce i64 max element " + std::to_string(i);
  }
  const size_t n = size_t(r.size), count = 50001;
  std::string e = reduce_scatter_i32(r, count, "reduce_scatter i32");
  if (!e.empty()) return e;
  std::vector<float> fin(count * n), fout(count);
  Buf send(r.ctx, r.mem, fin.size() * 4), recv(r.ctx, r.mem, count * 4);
  hmc_request_t req;
  for (size_t i = 0; i < fin.size(); ++i) fin[i] = fval(r.rank, i);
  send.put(fin.data());
  e = wait(
      hmc_reduce_scatter(r.comm, send.get(), recv.get(), count, HMC_DTYPE_F32, HMC_OP_SUM, &req),
      &req, "reduce_scatter f32");
  if (!e.empty()) return e;
  recv.take(fout.data());
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int k = 0; k < r.size; ++k) want += fval(k, size_t(r.rank) * count + i);
    if (std::fabs(fout[i] - want) > 1e-5 * std::fabs(want) + 1e-6)
      return "reduce_scatter f32 element " + std::to_string(i);
  }
  return "";
}

}  // namespace

TEST(Coll, TwoRanksHost) {
  expect_all_pass(run({mems_of(2, {"host"})}, everything_role));
}

TEST(Coll, ThreeRanksOverTcp) {
  Launch l{mems_of(3, {"host"})};
  l.path = "hoststage/tcp";
  expect_all_pass(run(l, everything_role));
}

TEST(Coll, FiveRanksHost) {
  expect_all_pass(run({mems_of(5, {"host"})}, everything_role));
}

// Every rank knows every rank's host and vendor.
std::string shape_role(Rank& r) {
  for (int k = 0; k < r.size; ++k) {
    hmc_comm_member_info_t m{};
    m.struct_size = sizeof m;
    hmc_status_t st = hmc_comm_member_info(r.comm, k, &m);
    if (st != HMC_SUCCESS) return "member_info: " + describe(st);
    const char* want[] = {"cuda", "hip", "host", "mlu", "musa"};
    if (m.host != 0 || std::string(m.vendor) != want[k % 5])
      return "rank " + std::to_string(k) + " is on host " + std::to_string(m.host) + " with " +
             m.vendor;
  }
  hmc_comm_member_info_t m{};
  m.struct_size = sizeof m;
  if (hmc_comm_member_info(r.comm, r.size, &m) != HMC_ERR_INVALID_ARGUMENT)
    return "rank out of range accepted";
  return everything_role(r);
}

TEST(Coll, MixedVendors) {
  expect_all_pass(run({mems_of(5, {"cuda:0", "hip:0", "host", "mlu:0", "musa:0"})}, shape_role));
}

TEST(Coll, EightRanksAllReduceAndAllToAllV) {
  expect_all_pass(run({mems_of(8, {"host", "cuda:0"})}, [](Rank& r) {
    std::string e = all_reduce_role(r);
    return e.empty() ? all_to_allv_role(r) : e;
  }));
}

// Each forced algorithm's all-reduce (in place too, up to 160 KB: above the shared memory's
// single-copy threshold, so that a receiver reads the sender's buffer while the step runs):
// the executor reduces a step's messages as they arrive, which must wait while a send of the
// step still reads the bytes it changes (recursive doubling sends and reduces one buffer).
// Then all-reduces and reduce-scatters of messages long enough to go in pieces (a step's only
// transfer with a peer: pieces of coll/executor.h's piece_bytes, each reduced on arrival).
static std::string pieces_role(Rank& r) {
  std::string e = all_reduce_role(r);
  if (!e.empty()) return e;
  const size_t count = 300001;  // 1.2 MB of int32: five pieces
  for (bool in_place : {false, true}) {
    std::vector<int32_t> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = ival(r.rank, i);
    hmc_request_t req;
    std::memcpy(out.data(), in.data(), count * 4);
    e = wait(hmc_all_reduce(r.comm, in_place ? out.data() : in.data(), out.data(), count,
                            HMC_DTYPE_I32, HMC_OP_SUM, &req),
             &req, "all_reduce in pieces");
    if (!e.empty()) return e;
    for (size_t i = 0; i < count; ++i) {
      int32_t want = 0;
      for (int k = 0; k < r.size; ++k) want += ival(k, i);
      if (out[i] != want) return "all_reduce in pieces: element " + std::to_string(i) + " off";
    }
  }
  std::vector<int32_t> in(count * size_t(r.size)), out(count);
  for (size_t i = 0; i < in.size(); ++i) in[i] = ival(r.rank, i);
  hmc_request_t req;
  e = wait(
      hmc_reduce_scatter(r.comm, in.data(), out.data(), count, HMC_DTYPE_I32, HMC_OP_SUM, &req),
      &req, "reduce_scatter in pieces");
  if (!e.empty()) return e;
  for (size_t i = 0; i < count; ++i) {
    int32_t want = 0;
    for (int k = 0; k < r.size; ++k) want += ival(k, size_t(r.rank) * count + i);
    if (out[i] != want) return "reduce_scatter in pieces: element " + std::to_string(i) + " off";
  }
  return "";
}

// Every form of the reduce, forced, with 4 ranks (the ring's and the direct form's blocks) and
// 3 (a tree with a rank that only sends, blocks of unequal sizes).
TEST(Coll, ReduceEveryForm) {
  for (int n : {3, 4}) {
    for (const char* algo : {"tree", "direct", "ring"}) {
      Launch l{mems_of(n, {"host"})};
      l.env = {{"HMC_COLL_ALGO", algo}};
      SCOPED_TRACE(std::string(algo) + " " + std::to_string(n) + " ranks");
      expect_all_pass(run(l, reduce_role));
    }
  }
}

TEST(Coll, ForcedAlgorithmsReduceAsMessagesArrive) {
  for (const char* algo : {"recursive_doubling", "direct", "ring"}) {
    Launch l{mems_of(4, {"host"})};
    l.env = {{"HMC_COLL_ALGO", algo}};
    SCOPED_TRACE(algo);
    expect_all_pass(run(l, pieces_role));
  }
}

// Every rank on an emulated vendor without a device reduction: staged through pinned buffers,
// several chunks per reduction.
TEST(Coll, DeviceReductionsStaged) {
  Launch l{{"cuda:0", "hip:0", "mlu:0", "musa:0"}};
  l.env = {{"HMC_STAGE_CHUNK", "64K"}};
  expect_all_pass(run(l, device_reductions_role));
}

// Ranks on the SDK device template reduce on their device through its reduce slot; the host
// rank and the cuda rank alongside them reduce on the host and staged.
TEST(Coll, DeviceReductionsOnThePluginsReduceSlot) {
  if (access(HMC_TEMPLATE_DEVICE_PLUGIN, F_OK) != 0)
    GTEST_SKIP() << HMC_TEMPLATE_DEVICE_PLUGIN << " was not built";
  Launch l{{"template:0", "template:0", "host", "cuda:0"}};
  l.env = {{"HMC_STAGE_CHUNK", "64K"}};
  expect_all_pass(run(l, device_reductions_role));
}

TEST(Coll, SingleRank) {
  expect_all_pass(run({mems_of(1, {"host"})}, everything_role));
}

TEST(Coll, LaunchersVariables) {
  for (const char* from : {"torchrun", "slurm", "ompi", "hmc"}) {
    Launch l{mems_of(3, {"host"})};
    l.from = from;
    auto out = run(l, [](Rank& r) {
      int rank = -1, size = -1;
      hmc_comm_rank(r.comm, &rank);
      hmc_comm_size(r.comm, &size);
      if (rank != r.rank || size != 3) return std::string("rank or size not the launcher's");
      return all_to_allv_role(r);
    });
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], "") << from << " rank " << i;
  }
}

TEST(Coll, Split) {
  expect_all_pass(run({mems_of(5, {"host"})}, [](Rank& r) {
    hmc_comm_t sub = nullptr;
    // Even ranks in one group ordered backwards, odd ones in another, rank 4 in none.
    int color = r.rank == 4 ? HMC_COMM_SPLIT_NONE : r.rank % 2;
    hmc_status_t st = hmc_comm_split(r.comm, color, -r.rank, &sub);
    if (st != HMC_SUCCESS) return "split: " + describe(st);
    if (r.rank == 4) return sub ? std::string("rank 4 got a communicator") : std::string();
    int rank = -1, size = -1;
    hmc_comm_rank(sub, &rank);
    hmc_comm_size(sub, &size);
    if (size != 2 || rank != 1 - r.rank / 2)
      return "split rank " + std::to_string(rank) + " size " + std::to_string(size);
    int64_t mine = r.rank, sum = 0;
    hmc_request_t req;
    std::string e = wait(hmc_all_reduce(sub, &mine, &sum, 1, HMC_DTYPE_I64, HMC_OP_SUM, &req), &req,
                         "all_reduce on the split");
    if (e.empty() && sum != (r.rank % 2 ? 1 + 3 : 0 + 2)) e = "split sum " + std::to_string(sum);
    hmc_comm_destroy(sub);
    return e;
  }));
}

TEST(Coll, RankNeverJoins) {
  Launch l{mems_of(2, {"host"})};
  l.sizes = {3, 3};
  l.join_timeout_ms = 1500;
  auto out = run(l, [](Rank&) { return std::string(); });
  for (auto& s : out) {
    EXPECT_NE(s.find("HMC_ERR_TIMEOUT"), std::string::npos) << s;
    EXPECT_NE(s.find("rank 2 of 3 did not join"), std::string::npos) << s;
  }
}

TEST(Coll, RankClaimedTwice) {
  Launch l{mems_of(3, {"host"})};
  l.ranks = {0, 1, 1};
  l.join_timeout_ms = 1500;
  auto out = run(l, [](Rank&) { return std::string(); });
  int twice = 0;
  for (auto& s : out) twice += s.find("is claimed twice") != std::string::npos;
  EXPECT_EQ(twice, 1) << out[0] << " | " << out[1] << " | " << out[2];
}

TEST(Coll, SizesDisagree) {
  Launch l{mems_of(2, {"host"})};
  l.sizes = {2, 3};
  l.join_timeout_ms = 3000;
  auto out = run(l, [](Rank&) { return std::string(); });
  for (auto& s : out)
    EXPECT_NE(s.find("HMC_ERR_PROTOCOL: hmc_comm_create: the size disagrees"), std::string::npos)
        << s;
}

TEST(Coll, StoreUnreachable) {
  Launch l{mems_of(1, {"host"})};
  l.ranks = {1};
  l.sizes = {2};
  l.join_timeout_ms = 500;
  auto out = run(l, [](Rank&) { return std::string(); });
  EXPECT_NE(out[0].find("HMC_ERR_SYSTEM"), std::string::npos) << out[0];
  EXPECT_NE(out[0].find("could not be reached"), std::string::npos) << out[0];
}

// Rank 2 dies after the barrier that connected every pair; the others' all-reduce ends with
// HMC_ERR_PEER_LOST well within HMC_TIMEOUT_MS, and no rank hangs.
TEST(Coll, RankKilledMidCollective) {
  auto out = run({mems_of(4, {"host"})}, [](Rank& r) {
    hmc_request_t req;
    std::string e = wait(hmc_barrier(r.comm, &req), &req, "barrier");
    if (!e.empty()) return e;
    if (r.rank == 2) {
      // Late enough that the others have seen the barrier end (a rank that dies at once can
      // take messages of the barrier with it), early enough to be mid-all-reduce for them.
      usleep(1000000);
      raise(SIGKILL);
    }
    std::vector<int32_t> v(100000, 1);
    auto t0 = std::chrono::steady_clock::now();
    hmc_status_t st =
        hmc_all_reduce(r.comm, v.data(), v.data(), v.size(), HMC_DTYPE_I32, HMC_OP_SUM, &req);
    if (st == HMC_SUCCESS) st = hmc_request_wait(req, 3 * kTimeoutMs, nullptr);
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    if (st != HMC_ERR_PEER_LOST) return "all_reduce ended with " + describe(st);
    if (ms > kTimeoutMs) return "the loss took " + std::to_string(ms) + " ms";
    // The communicator is unusable now, and says so.
    st = hmc_barrier(r.comm, &req);
    if (st != HMC_ERR_PEER_LOST) return "barrier after the loss: " + describe(st);
    return std::string();
  });
  for (int i = 0; i < 4; ++i) {
    if (i == 2)
      EXPECT_EQ(out[size_t(i)], "killed by signal 9");
    else
      EXPECT_EQ(out[size_t(i)], "") << "rank " << i;
  }
}

// A collective that timed out in hmc_request_wait (its peer is late) is cancelled: it ends at
// once with HMC_ERR_CANCELLED and nothing of it touches its buffer afterwards (the buffer is
// unmapped: a late write would kill the rank); the communicator then refuses later collectives
// by name, the late rank's collective ends with HMC_ERR_PEER_LOST, and both exit cleanly.
TEST(Coll, TimedOutCollectiveCancelled) {
  auto out = run({mems_of(2, {"host"})}, [](Rank& r) -> std::string {
    hmc_request_t req;
    std::string e = wait(hmc_barrier(r.comm, &req), &req, "barrier");  // every pair connected
    if (!e.empty()) return e;
    const size_t n = 1 << 18;  // 1 MiB of floats: several steps, several pieces each
    if (r.rank == 1) {
      usleep(1500000);
      std::vector<float> v(n, 1.0f);
      hmc_status_t st =
          hmc_all_reduce(r.comm, v.data(), v.data(), n, HMC_DTYPE_F32, HMC_OP_SUM, &req);
      if (st == HMC_SUCCESS) st = hmc_request_wait(req, kTimeoutMs, nullptr);
      if (st != HMC_ERR_PEER_LOST) return "the late rank's all_reduce ended with " + describe(st);
      return std::string();
    }
    void* mem = mmap(nullptr, n * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return std::string("mmap failed");
    float* v = static_cast<float*>(mem);
    for (size_t i = 0; i < n; ++i) v[i] = 2.0f;
    hmc_status_t st = hmc_all_reduce(r.comm, v, v, n, HMC_DTYPE_F32, HMC_OP_SUM, &req);
    if (st != HMC_SUCCESS) return "all_reduce: " + describe(st);
    if ((st = hmc_request_wait(req, 300, nullptr)) != HMC_ERR_TIMEOUT)
      return "the wait ended with " + describe(st) + " before the late rank came";
    if ((st = hmc_request_cancel(req)) != HMC_SUCCESS) return "cancel: " + describe(st);
    auto t0 = std::chrono::steady_clock::now();
    if ((st = hmc_request_wait(req, kTimeoutMs, nullptr)) != HMC_ERR_CANCELLED)
      return "the wait after cancel ended with " + describe(st);
    if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(500))
      return std::string("the cancelled collective took more than 500 ms to end");
    if (munmap(mem, n * 4) != 0) return std::string("munmap failed");
    usleep(2500000);  // the late rank arrives and sends meanwhile: nothing may land in `mem`
    std::vector<float> w(16, 1.0f);
    st = hmc_all_reduce(r.comm, w.data(), w.data(), w.size(), HMC_DTYPE_F32, HMC_OP_SUM, &req);
    if (st != HMC_ERR_PEER_LOST) return "all_reduce after the cancel: " + describe(st);
    if (std::string(hmc_last_error()).find("cancelled by hmc_request_cancel") == std::string::npos)
      return "the refusal does not name the cancel: " + std::string(hmc_last_error());
    return std::string();
  });
  expect_all_pass(out);
}

// A rank that comes to its first collective late, within the communicator's timeout but after
// HMC_TIMEOUT_MS: the others' first collective, which connects the pairs, waits for it as long
// as the communicator's timeout says.
TEST(Coll, LateFirstCollectiveWithinTheCommunicatorsTimeout) {
  Launch l{mems_of(2, {"host"})};
  l.join_timeout_ms = 6000;
  l.env = {{"HMC_TIMEOUT_MS", "1000"}};
  expect_all_pass(run(l, [](Rank& r) -> std::string {
    if (r.rank == 1) usleep(2500000);
    std::vector<int32_t> v(1000, r.rank + 1);
    hmc_request_t req;
    hmc_status_t st =
        hmc_all_reduce(r.comm, v.data(), v.data(), v.size(), HMC_DTYPE_I32, HMC_OP_SUM, &req);
    if (st == HMC_SUCCESS) st = hmc_request_wait(req, 6000, nullptr);
    if (st != HMC_SUCCESS) return "all_reduce: " + describe(st);
    for (int32_t x : v)
      if (x != 3) return "all_reduce gave " + std::to_string(x);
    return std::string();
  }));
}

TEST(Coll, ArgumentErrors) {
  expect_all_pass(run({mems_of(1, {"host"})}, [](Rank& r) -> std::string {
    int32_t a[8] = {0}, b[8] = {0};
    hmc_request_t req;
    auto expect = [](hmc_status_t st, hmc_status_t want, const char* what) {
      return st == want ? std::string() : std::string(what) + ": " + describe(st);
    };
    std::string e;
    if (e.empty())
      e = expect(hmc_all_reduce(r.comm, a, b, 8, hmc_dtype_t(99), HMC_OP_SUM, &req),
                 HMC_ERR_INVALID_ARGUMENT, "bad dtype");
    if (e.empty())
      e = expect(hmc_all_reduce(r.comm, a, b, 8, HMC_DTYPE_I32, hmc_reduce_op_t(42), &req),
                 HMC_ERR_INVALID_ARGUMENT, "bad op");
    if (e.empty())
      e = expect(hmc_all_reduce(r.comm, a, b, 8, HMC_DTYPE_F32, HMC_OP_BXOR, &req),
                 HMC_ERR_INVALID_ARGUMENT, "bxor of float32");
    if (e.empty() && std::string(hmc_last_error()).find("integer") == std::string::npos)
      e = std::string("bxor of float32 refused without saying why: ") + hmc_last_error();
    if (e.empty())
      e = expect(hmc_reduce_scatter(r.comm, a, b, 4, HMC_DTYPE_F16, HMC_OP_BAND, &req),
                 HMC_ERR_INVALID_ARGUMENT, "band of float16");
    if (e.empty())
      e = expect(hmc_all_reduce(r.comm, nullptr, b, 8, HMC_DTYPE_I32, HMC_OP_SUM, &req),
                 HMC_ERR_INVALID_ARGUMENT, "NULL send");
    if (e.empty())
      e = expect(hmc_all_reduce(r.comm, a, a + 1, 4, HMC_DTYPE_I32, HMC_OP_SUM, &req),
                 HMC_ERR_INVALID_ARGUMENT, "overlap");
    if (e.empty())
      e = expect(hmc_all_to_all(r.comm, a, a, 2, HMC_DTYPE_I32, &req), HMC_ERR_INVALID_ARGUMENT,
                 "all_to_all in place");
    if (e.empty())
      e = expect(hmc_broadcast(r.comm, a, 8, HMC_DTYPE_I32, 1, &req), HMC_ERR_INVALID_ARGUMENT,
                 "root");
    if (e.empty())
      e = expect(hmc_reduce(r.comm, a, b, 8, HMC_DTYPE_I32, HMC_OP_SUM, -1, &req),
                 HMC_ERR_INVALID_ARGUMENT, "reduce root");
    if (e.empty())
      e = expect(hmc_reduce(r.comm, a, nullptr, 8, HMC_DTYPE_I32, HMC_OP_SUM, 0, &req),
                 HMC_ERR_INVALID_ARGUMENT, "reduce without recv on the root");
    if (e.empty())
      e = expect(hmc_reduce(r.comm, a, a + 2, 4, HMC_DTYPE_I32, HMC_OP_SUM, 0, &req),
                 HMC_ERR_INVALID_ARGUMENT, "reduce overlap");
    if (e.empty())
      e = expect(
          hmc_all_to_allv(r.comm, a, nullptr, nullptr, b, nullptr, nullptr, HMC_DTYPE_I32, &req),
          HMC_ERR_INVALID_ARGUMENT, "NULL counts");
    if (e.empty()) e = expect(hmc_barrier(nullptr, &req), HMC_ERR_INVALID_ARGUMENT, "NULL comm");
    if (e.empty())
      e = expect(hmc_barrier(reinterpret_cast<hmc_comm_t>(a), &req), HMC_ERR_INVALID_HANDLE,
                 "foreign comm");
    hmc_comm_options_t o{};
    o.struct_size = sizeof o;
    o.rank = 0;
    o.size = 1;
    hmc_comm_t c;
#ifdef HMC_TEST_HAVE_HIREDIS
    o.rendezvous = "redis://127.0.0.1:65536/x";
    if (e.empty())
      e = expect(hmc_comm_create(r.ctx, &o, &c), HMC_ERR_INVALID_ARGUMENT, "redis port");
#else
    o.rendezvous = "redis://127.0.0.1:6379/x";
    if (e.empty()) e = expect(hmc_comm_create(r.ctx, &o, &c), HMC_ERR_NOT_SUPPORTED, "redis");
#endif
    o.rendezvous = "udp://x:1";
    if (e.empty()) e = expect(hmc_comm_create(r.ctx, &o, &c), HMC_ERR_INVALID_ARGUMENT, "scheme");
    o.rendezvous = "tcp://127.0.0.1:1";
    o.rank = 3;
    o.size = 2;
    if (e.empty())
      e = expect(hmc_comm_create(r.ctx, &o, &c), HMC_ERR_INVALID_ARGUMENT, "rank out of range");
    // A collective in flight keeps the communicator from being destroyed; a rank alone ends
    // its collectives at once, so the check is that a good call still works after the errors.
    if (e.empty())
      e = wait(hmc_all_reduce(r.comm, a, b, 8, HMC_DTYPE_I32, HMC_OP_SUM, &req), &req,
               "all_reduce");
    return e;
  }));
}

// The C++ wrapper: a split, an all-reduce and a reduce through hmc::Comm (RAII, exceptions).
TEST(Coll, CxxWrapper) {
  expect_all_pass(run({mems_of(3, {"host"})}, [](Rank& r) -> std::string {
    try {
      hmc::Comm world(r.comm);
      hmc::Comm pair = world.split(r.rank < 2 ? 0 : HMC_COMM_SPLIT_NONE, 0);
      std::string e;
      if (pair) {
        int32_t v = r.rank + 1, sum = 0;
        pair.all_reduce(&v, &sum, 1, HMC_DTYPE_I32, HMC_OP_SUM).wait();
        if (sum != 3 || pair.size() != 2) e = "sum " + std::to_string(sum);
      }
      int32_t mine = r.rank + 1, total = 0;
      world.reduce(&mine, r.rank == 2 ? &total : nullptr, 1, HMC_DTYPE_I32, HMC_OP_SUM, 2).wait();
      if (e.empty() && r.rank == 2 && total != 6) e = "reduce gave " + std::to_string(total);
      world.barrier().wait();
      r.comm = nullptr;  // the wrapper destroys it
      return e;
    } catch (const hmc::Error& ex) {
      return ex.what();
    }
  }));
}

// The application accepts its own peers in a thread while collectives connect: connections for
// collectives never come out of hmc_accept (the application's accept files them for the
// communicator), and the application's own peers do.
TEST(Coll, ApplicationAcceptsAlongside) {
  expect_all_pass(run({mems_of(2, {"host"})}, [](Rank& r) -> std::string {
    hmc_peer_t accepted = nullptr;
    hmc_status_t accept_st = HMC_ERR_INTERNAL;
    std::thread acceptor([&] { accept_st = hmc_accept(r.ctx, 15000, &accepted); });
    std::string e;
    std::vector<uint8_t> mine(HMC_ADDRESS_MAX, 0), all(2 * HMC_ADDRESS_MAX);
    size_t len = mine.size();
    hmc_request_t req;
    if (hmc_address(r.ctx, mine.data(), &len) != HMC_SUCCESS) e = "address";
    if (e.empty())
      e = wait(hmc_all_gather(r.comm, mine.data(), all.data(), HMC_ADDRESS_MAX, HMC_DTYPE_U8, &req),
               &req, "all_gather of addresses");
    int32_t v = 1, sum = 0;
    if (e.empty())
      e = wait(hmc_all_reduce(r.comm, &v, &sum, 1, HMC_DTYPE_I32, HMC_OP_SUM, &req), &req,
               "all_reduce");
    if (e.empty() && sum != 2) e = "sum";
    hmc_peer_t mine_out = nullptr;
    const uint8_t* other = all.data() + size_t(1 - r.rank) * HMC_ADDRESS_MAX;
    if (e.empty() && hmc_connect(r.ctx, other, HMC_ADDRESS_MAX, 10000, &mine_out) != HMC_SUCCESS)
      e = std::string("connect: ") + hmc_last_error();
    acceptor.join();
    if (e.empty() && accept_st != HMC_SUCCESS) e = "accept: " + describe(accept_st);
    if (e.empty()) {
      // The accepted peer is the other rank's hmc_connect: a message crosses on it.
      int32_t out = 40 + r.rank, in = 0;
      hmc_request_t s, q;
      if (hmc_send(mine_out, &out, 4, 7, &s) != HMC_SUCCESS ||
          hmc_recv(accepted, &in, 4, 7, &q) != HMC_SUCCESS ||
          hmc_request_wait(s, 10000, nullptr) != HMC_SUCCESS ||
          hmc_request_wait(q, 10000, nullptr) != HMC_SUCCESS)
        e = std::string("message on the application's peers: ") + hmc_last_error();
      else if (in != 41 - r.rank)
        e = "got " + std::to_string(in);
    }
    return e;
  }));
}

// Ranks calling different collectives of the same shape (with 2 ranks an all-gather and an
// all-to-all each exchange one block in one step) never take each other's messages: both wait,
// and the receive buffers stay untouched.
TEST(Coll, DifferentCollectivesDoNotMatch) {
  expect_all_pass(run({mems_of(2, {"host"})}, [](Rank& r) -> std::string {
    int32_t send[8] = {1, 2, 3, 4, 5, 6, 7, 8}, recv[8] = {0};
    int32_t own[4] = {9, 9, 9, 9};
    hmc_request_t req;
    hmc_status_t st = r.rank == 0 ? hmc_all_gather(r.comm, own, recv, 4, HMC_DTYPE_I32, &req)
                                  : hmc_all_to_all(r.comm, send, recv, 4, HMC_DTYPE_I32, &req);
    if (st != HMC_SUCCESS) return "post: " + describe(st);
    st = hmc_request_wait(req, 1000, nullptr);
    if (st != HMC_ERR_TIMEOUT) return "wait ended with " + describe(st);
    const int32_t* other = recv + (r.rank == 0 ? 4 : 0);
    for (int i = 0; i < 4; ++i)
      if (other[i] != 0) return "the other rank's block was written";
    // Still running: the communicator cannot be destroyed; the context's end cancels it.
    if (hmc_comm_destroy(r.comm) != HMC_ERR_INVALID_ARGUMENT) return "destroyed while running";
    r.comm = nullptr;
    // The other rank may still be checking: its collective would end when this one leaves.
    usleep(1500000);
    return std::string();
  }));
}

// The other net plugins' paths, where they were built: {name, HMC_PATH, plugin, variables}.
struct OtherPath {
  const char* name;
  const char* path;
  const char* plugin;
  std::vector<std::pair<std::string, std::string>> env;
};
class CollPaths : public testing::TestWithParam<OtherPath> {};

TEST_P(CollPaths, ThreeRanksMixedMemory) {
  const OtherPath& p = GetParam();
  std::string file = std::string(HMC_TEST_PLUGIN_DIR) + "/libhmc-net-" + p.plugin + ".so";
  if (access(file.c_str(), F_OK) != 0)
    GTEST_SKIP() << "net plugin " << p.plugin << " was not built";
  Launch l{mems_of(3, {"host", "cuda:0", "hip:0"})};
  l.path = p.path;
  l.env = p.env;
  l.env.push_back({"HMC_NET_PLUGINS", p.plugin});
  expect_all_pass(run(l, everything_role));
}

INSTANTIATE_TEST_SUITE_P(
    Paths, CollPaths,
    testing::Values(OtherPath{"ucx_tcp",
                              "ucx/ucx",
                              "ucx",
                              {{"HMC_UCX_TLS", "tcp"}, {"HMC_UCX_NET_DEVICES", "lo"}}},
                    OtherPath{"ucx_shm", "ucx/ucx", "ucx", {{"HMC_UCX_TLS", "posix,cma,self"}}},
                    OtherPath{"ofi_tcp", "ofi/tcp", "ofi", {{"HMC_OFI_PROVIDER", "tcp"}}},
                    OtherPath{"ofi_shm", "ofi/shm", "ofi", {{"HMC_OFI_PROVIDER", "shm"}}}),
    [](const testing::TestParamInfo<OtherPath>& i) { return std::string(i.param.name); });

// Ranks that disagree on the count: the sizes on the wire show it, and the collective ends with
// HMC_ERR_PROTOCOL saying so (on the rank that sees it first; the other may see the first one
// give up, HMC_ERR_PEER_LOST), never with data.
TEST(Coll, CountsDisagree) {
  auto out = run({mems_of(2, {"host"})}, [](Rank& r) -> std::string {
    std::vector<int32_t> send(20, 1), recv(20, 0);
    size_t count = r.rank == 0 ? 10 : 20;
    hmc_request_t req;
    hmc_status_t st =
        hmc_all_reduce(r.comm, send.data(), recv.data(), count, HMC_DTYPE_I32, HMC_OP_SUM, &req);
    if (st == HMC_SUCCESS) st = hmc_request_wait(req, 10000, nullptr);
    std::string verdict = describe(st);
    // Give the other rank time to see the sizes itself before this one leaves.
    usleep(500000);
    return verdict;
  });
  int protocol = 0;
  for (auto& s : out) {
    bool disagree = s.find("HMC_ERR_PROTOCOL") == 0 &&
                    s.find("counts (or collectives) disagree") != std::string::npos;
    protocol += disagree;
    EXPECT_TRUE(disagree || s.find("HMC_ERR_PEER_LOST") == 0) << s;
  }
  EXPECT_GE(protocol, 1);
}

// ---- The Redis rendezvous, against a real redis-server of the test's own on loopback ----

namespace {

bool on_path(const char* program) {
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    std::string file = dirs.substr(at, end - at) + "/" + program;
    if (access(file.c_str(), X_OK) == 0) return true;
    at = end + 1;
  }
  return false;
}

// A redis-server on 127.0.0.1 on a free port, without persistence, killed when this goes (and
// when the test process dies, through PR_SET_PDEATHSIG).
class RedisServer {
 public:
  ~RedisServer() { kill_now(); }
  // "" once it answers, else why not.
  std::string start() {
    port_ = free_port();
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      std::string port = std::to_string(port_);
      execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", "/tmp", static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 500; ++i) {
      if (cli("PING") == "PONG") return "";
      usleep(10000);
    }
    return "redis-server did not answer on port " + std::to_string(port_) + " within 5 s";
  }
  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  std::string url(const std::string& prefix) const {
    return "redis://127.0.0.1:" + std::to_string(port_) + "/" + prefix;
  }
  // redis-cli's answer, its lines joined by spaces.
  std::string cli(const std::string& args) const {
    std::string cmd = "redis-cli -p " + std::to_string(port_) + " " + args + " 2>/dev/null";
    FILE* f = popen(cmd.c_str(), "r");
    if (!f) return "";
    std::string out;
    char buf[512];
    while (fgets(buf, sizeof buf, f)) out += buf;
    pclose(f);
    for (auto& c : out)
      if (c == '\n') c = ' ';
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  }
  // The keys under a prefix, sorted, space-separated.
  std::string keys(const std::string& prefix) const {
    std::string out = cli("--scan --pattern '" + prefix + "/*'");
    std::vector<std::string> v;
    for (size_t at = 0; at < out.size();) {
      size_t end = out.find(' ', at);
      if (end == std::string::npos) end = out.size();
      v.push_back(out.substr(at, end - at));
      at = end + 1;
    }
    std::sort(v.begin(), v.end());
    std::string s;
    for (auto& k : v) s += (s.empty() ? "" : " ") + k;
    return s;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// Every Redis test's prefix: its own name and this process's id.
std::string test_prefix() {
  return std::string("hmc-test/") + testing::UnitTest::GetInstance()->current_test_info()->name() +
         "-" + std::to_string(getpid());
}

}  // namespace

class Redis : public testing::Test {
 protected:
  void SetUp() override {
#ifndef HMC_TEST_HAVE_HIREDIS
    GTEST_SKIP() << "hmc was built without hiredis (Debian: libhiredis-dev): no Redis rendezvous";
#endif
    if (!on_path("redis-server") || !on_path("redis-cli"))
      GTEST_SKIP() << "redis-server or redis-cli is not installed (Debian: redis-server): the "
                      "Redis rendezvous is tested against a real server";
    std::string why = server.start();
    ASSERT_EQ(why, "");
    prefix = test_prefix();
  }
  RedisServer server;
  std::string prefix;
};

// Four ranks on mixed memory: every collective, and a split; nothing of the generation is left
// under the prefix but its counter.
TEST_F(Redis, EveryCollectiveAndSplit) {
  Launch l{mems_of(4, {"host", "cuda:0"})};
  l.rendezvous = server.url(prefix);
  expect_all_pass(run(l, [](Rank& r) {
    std::string e = everything_role(r);
    if (!e.empty()) return e;
    hmc_comm_t sub = nullptr;
    hmc_status_t st = hmc_comm_split(r.comm, r.rank % 2, r.rank, &sub);
    if (st != HMC_SUCCESS) return "split: " + describe(st);
    int64_t mine = r.rank, sum = 0;
    hmc_request_t req;
    e = wait(hmc_all_reduce(sub, &mine, &sum, 1, HMC_DTYPE_I64, HMC_OP_SUM, &req), &req,
             "all_reduce on the split");
    if (e.empty() && sum != (r.rank % 2 ? 1 + 3 : 0 + 2)) e = "split sum " + std::to_string(sum);
    hmc_comm_destroy(sub);
    return e;
  }));
  EXPECT_EQ(server.keys(prefix), prefix + "/epoch");
}

// HMC_RANK, HMC_WORLD_SIZE and HMC_RENDEZVOUS=redis://...
TEST_F(Redis, FromVariables) {
  Launch l{mems_of(2, {"host"})};
  l.from = "hmc";
  l.rendezvous = server.url(prefix);
  expect_all_pass(run(l, all_to_allv_role));
}

// A rank that never comes: every rank names it, within the timeout; the failed generation's
// keys all expire; the next group under the prefix does not see them.
TEST_F(Redis, RankNeverJoinsThenAGroupForms) {
  Launch l{mems_of(2, {"host"})};
  l.sizes = {3, 3};
  l.join_timeout_ms = 1500;
  l.rendezvous = server.url(prefix);
  auto t0 = std::chrono::steady_clock::now();
  auto out = run(l, [](Rank&) { return std::string(); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(6));
  for (auto& s : out) {
    EXPECT_NE(s.find("HMC_ERR_TIMEOUT"), std::string::npos) << s;
    EXPECT_NE(s.find("rank 2 of 3 did not join"), std::string::npos) << s;
  }
  std::string keys = server.keys(prefix);
  EXPECT_NE(keys.find(prefix + "/gen/1/failed"), std::string::npos) << keys;
  for (size_t at = 0; at < keys.size();) {
    size_t end = keys.find(' ', at);
    if (end == std::string::npos) end = keys.size();
    std::string k = keys.substr(at, end - at);
    long ttl = atol(server.cli("PTTL '" + k + "'").c_str());
    EXPECT_GT(ttl, 0) << k << " does not expire";
    at = end + 1;
  }
  Launch again{mems_of(3, {"host"})};
  again.rendezvous = server.url(prefix);
  expect_all_pass(run(again, all_to_allv_role));
}

TEST_F(Redis, RankClaimedTwice) {
  Launch l{mems_of(3, {"host"})};
  l.ranks = {0, 1, 1};
  l.join_timeout_ms = 1500;
  l.rendezvous = server.url(prefix);
  auto out = run(l, [](Rank&) { return std::string(); });
  int twice = 0;
  for (auto& s : out) twice += s.find("is claimed twice") != std::string::npos;
  EXPECT_EQ(twice, 1) << out[0] << " | " << out[1] << " | " << out[2];
}

TEST_F(Redis, SizesDisagree) {
  Launch l{mems_of(2, {"host"})};
  l.sizes = {2, 3};
  l.join_timeout_ms = 3000;
  l.rendezvous = server.url(prefix);
  auto out = run(l, [](Rank&) { return std::string(); });
  for (auto& s : out)
    EXPECT_NE(s.find("HMC_ERR_PROTOCOL: hmc_comm_create: the size disagrees"), std::string::npos)
        << s;
}

TEST_F(Redis, ServerUnreachable) {
  server.kill_now();
  Launch l{mems_of(1, {"host"})};
  l.ranks = {1};
  l.sizes = {2};
  l.join_timeout_ms = 500;
  l.rendezvous = server.url(prefix);
  auto out = run(l, [](Rank&) { return std::string(); });
  EXPECT_NE(out[0].find("HMC_ERR_SYSTEM"), std::string::npos) << out[0];
  EXPECT_NE(out[0].find("could not be reached"), std::string::npos) << out[0];
}

// The server dies while two of three ranks wait for the third: both say so at once, naming the
// missing rank, long before their timeout.
TEST_F(Redis, ServerKilledMidRendezvous) {
  Launch l{mems_of(2, {"host"})};
  l.sizes = {3, 3};
  l.join_timeout_ms = 20000;
  l.rendezvous = server.url(prefix);
  std::thread killer([&] {
    // Once both ranks are in: their records are there.
    for (int i = 0; i < 1000; ++i) {
      std::string keys = server.keys(prefix);
      if (keys.find("/gen/1/info/0") != std::string::npos &&
          keys.find("/gen/1/info/1") != std::string::npos)
        break;
      usleep(10000);
    }
    // Rank 0 reads the records every 5 ms: let it have read rank 1's.
    usleep(100000);
    server.kill_now();
  });
  auto t0 = std::chrono::steady_clock::now();
  auto out = run(l, [](Rank&) { return std::string(); });
  killer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  for (auto& s : out) {
    EXPECT_NE(s.find("HMC_ERR_SYSTEM"), std::string::npos) << s;
    EXPECT_NE(s.find("rank 2 of 3 had not joined when the store failed"), std::string::npos) << s;
  }
}

// Churn in a pool: three members make a communicator, member 2 leaves, a new process takes
// its rank, and the pool makes a new communicator under the same prefix: every collective
// works on it, with the newcomer (not the member that left) as rank 2.
TEST_F(Redis, MemberLeavesAnotherJoins) {
  Launch l{mems_of(4, {"host", "hip:0", "host", "cuda:0"})};
  l.ranks = {0, 1, 2, 2};
  l.sizes = {3, 3, 3, 3};
  l.start_after = {-1, -1, -1, 2};
  l.join_timeout_ms = 20000;
  std::string url = server.url(prefix);
  l.rendezvous = url;
  expect_all_pass(run(l, [&](Rank& r) -> std::string {
    std::string process = getenv("COLL_TEST_PROCESS");
    if (process == "3") return everything_role(r);
    int32_t one = 1, sum = 0;
    hmc_request_t req;
    std::string e = wait(hmc_all_reduce(r.comm, &one, &sum, 1, HMC_DTYPE_I32, HMC_OP_SUM, &req),
                         &req, "all_reduce of the first group");
    if (e.empty() && sum != 3) e = "first group's sum " + std::to_string(sum);
    if (!e.empty() || r.rank == 2) return e;  // member 2 leaves
    hmc_comm_member_info_t left{};
    left.struct_size = sizeof left;
    hmc_comm_member_info(r.comm, 2, &left);
    hmc_comm_destroy(r.comm);
    r.comm = nullptr;
    hmc_comm_options_t o{};
    o.struct_size = sizeof o;
    o.rank = r.rank;
    o.size = 3;
    o.rendezvous = url.c_str();
    o.timeout_ms = 20000;
    hmc_status_t st = hmc_comm_create(r.ctx, &o, &r.comm);
    if (st != HMC_SUCCESS) return "the second group: " + describe(st);
    hmc_comm_member_info_t joined{};
    joined.struct_size = sizeof joined;
    hmc_comm_member_info(r.comm, 2, &joined);
    if (joined.pid == left.pid)
      return std::string("rank 2 of the second group is the one that left");
    return everything_role(r);
  }));
  EXPECT_EQ(server.keys(prefix), prefix + "/epoch");
  EXPECT_EQ(server.cli("GET '" + prefix + "/epoch'"), "2");
}

// Another rank 0 holds the prefix's open generation (a group forming under the same prefix):
// a second rank 0 is refused, naming the holder.
TEST_F(Redis, RankZeroClaimedTwice) {
  server.cli(
      "EVAL \"return redis.call('SET', KEYS[1], '7\\n2\\ncontext 00 (pid 1 on elsewhere)', "
      "'PX', 60000)\" 1 '" +
      prefix + "/open'");
  Launch l{mems_of(1, {"host"})};
  l.sizes = {2};
  l.join_timeout_ms = 1500;
  l.rendezvous = server.url(prefix);
  auto out = run(l, [](Rank&) { return std::string(); });
  EXPECT_NE(out[0].find("HMC_ERR_INVALID_ARGUMENT"), std::string::npos) << out[0];
  EXPECT_NE(out[0].find("is claimed twice: by context 00 (pid 1 on elsewhere) (generation 7)"),
            std::string::npos)
      << out[0];
}

// The generation of a rank 0 that died is still open when the ranks come: rank 1 joins it, the
// new rank 0 opens the next once the dead one's record expired, and rank 1 moves there.
TEST_F(Redis, DeadRankZerosGenerationGivenUp) {
  server.cli("SET '" + prefix + "/epoch' 7");
  server.cli(
      "EVAL \"return redis.call('SET', KEYS[1], '7\\n2\\ncontext 00 (pid 1 on a host "
      "that died)', 'PX', 1500)\" 1 '" +
      prefix + "/open'");
  Launch l{mems_of(2, {"host"})};
  l.join_timeout_ms = 10000;
  l.rendezvous = server.url(prefix);
  expect_all_pass(run(l, all_to_allv_role));
  EXPECT_EQ(server.keys(prefix), prefix + "/epoch");
  EXPECT_EQ(server.cli("GET '" + prefix + "/epoch'"), "8");
}

// A server with a password: the ranks that give it meet; one that gives a wrong one is told
// the server refused it, and the password is in no message.
TEST_F(Redis, Password) {
  server.cli("CONFIG SET requirepass s3cret");
  std::string url = server.url(prefix);
  Launch l{mems_of(2, {"host"})};
  l.rendezvous = "redis://:s3cret@" + url.substr(strlen("redis://"));
  expect_all_pass(run(l, all_to_allv_role));
  Launch wrong{mems_of(1, {"host"})};
  wrong.sizes = {2};
  wrong.join_timeout_ms = 500;
  wrong.rendezvous = "redis://:not-it@" + url.substr(strlen("redis://"));
  auto out = run(wrong, [](Rank&) { return std::string(); });
  EXPECT_NE(out[0].find("HMC_ERR_SYSTEM"), std::string::npos) << out[0];
  EXPECT_NE(out[0].find("refused AUTH"), std::string::npos) << out[0];
  EXPECT_EQ(out[0].find("not-it"), std::string::npos) << out[0];
}

// ---- collectives through a vendor library: the nccl ccl plugin over the emulated NCCL --------

namespace {

// Each rank's environment for one ccl plugin over tests/fakes: the emulated NCCL, built under
// the vendor library's name, over the emulated runtime that vendor's device plugin uses (both
// paths below FAKEGPU_DIR), and the backend.
std::vector<std::pair<std::string, std::string>> ccl_env(const std::string& plugin,
                                                         const char* library,
                                                         const std::string& runtime,
                                                         const char* runtime_library,
                                                         const char* backend) {
  std::string var = "HMC_" + plugin + "_";
  std::transform(var.begin(), var.end(), var.begin(), ::toupper);
  return {{"HMC_CCL_PLUGINS", plugin},
          {var + "LIBRARY", std::string(FAKEGPU_DIR) + "/" + library},
          {var + runtime + "_LIBRARY", std::string(FAKEGPU_DIR) + "/" + runtime_library},
          {"HMC_COLL_BACKEND", backend},
          {"FAKENCCL_TIMEOUT_MS", "6000"}};
}

std::vector<std::pair<std::string, std::string>> nccl_env(const char* backend) {
  return ccl_env("nccl", "nccl/libnccl.so.2", "CUDA", "cuda/libcuda.so.1", backend);
}

std::vector<std::pair<std::string, std::string>> rccl_env(const char* backend) {
  return ccl_env("rccl", "rccl/librccl.so.1", "HIP", "hip6/libamdhip64.so.6", backend);
}

std::vector<std::pair<std::string, std::string>> cncl_env(const char* backend) {
  return ccl_env("cncl", "cncl/libcncl.so", "CNRT", "mlu/libcnrt.so", backend);
}

std::vector<std::pair<std::string, std::string>> mccl_env(const char* backend) {
  return ccl_env("mccl", "mccl/libmccl.so", "MUSA", "musa/libmusart.so", backend);
}

// Small integers, exact in every dtype below (also f16 and bf16, also summed over 4 ranks).
int small(int rank, size_t i) {
  return int((size_t(rank) * 3 + i % 5) % 9) + 1;
}

// The bytes of value v as dtype (v a small integer, or a sum or extreme of them).
void encode(hmc_dtype_t t, long v, uint8_t* out) {
  switch (t) {
    case HMC_DTYPE_F32: {
      float f = float(v);
      memcpy(out, &f, 4);
      return;
    }
    case HMC_DTYPE_F64: {
      double d = double(v);
      memcpy(out, &d, 8);
      return;
    }
    case HMC_DTYPE_BF16: {
      float f = float(v);
      uint32_t x;
      memcpy(&x, &f, 4);
      uint16_t b = uint16_t(x >> 16);  // exact: small integers need 8 bits of mantissa
      memcpy(out, &b, 2);
      return;
    }
    case HMC_DTYPE_F16: {
      // Exact for integers below 2048: 1.m x 2^e with a 10-bit mantissa.
      uint16_t h = 0;
      if (v != 0) {
        int e = 0;
        while ((1L << (e + 1)) <= v) ++e;
        h = uint16_t((e + 15) << 10 | ((v << 10 >> e) & 0x3ff));
      }
      memcpy(out, &h, 2);
      return;
    }
    case HMC_DTYPE_I8:
    case HMC_DTYPE_U8: out[0] = uint8_t(v); return;
    case HMC_DTYPE_I32: {
      int32_t x = int32_t(v);
      memcpy(out, &x, 4);
      return;
    }
    case HMC_DTYPE_I64: {
      int64_t x = v;
      memcpy(out, &x, 8);
      return;
    }
  }
}

size_t esize(hmc_dtype_t t) {
  switch (t) {
    case HMC_DTYPE_F16:
    case HMC_DTYPE_BF16: return 2;
    case HMC_DTYPE_I8:
    case HMC_DTYPE_U8: return 1;
    case HMC_DTYPE_F32:
    case HMC_DTYPE_I32: return 4;
    default: return 8;
  }
}

// Element j of rank r's input, in `count`-element blocks: small(r, j).
std::vector<uint8_t> values(hmc_dtype_t t, int rank, size_t n) {
  std::vector<uint8_t> v(n * esize(t));
  for (size_t i = 0; i < n; ++i) encode(t, small(rank, i), v.data() + i * esize(t));
  return v;
}

long reduce_ref(hmc_reduce_op_t op, int size, size_t i) {
  long acc = small(0, i);
  for (int k = 1; k < size; ++k) {
    long x = small(k, i);
    acc = op == HMC_OP_MAX ? std::max(acc, x) : op == HMC_OP_MIN ? std::min(acc, x) : acc + x;
  }
  return op == HMC_OP_AVG ? acc / size : acc;
}

std::string first_difference(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                             size_t es, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i]) return what + ": element " + std::to_string(i / es) + " differs";
  return "";
}

// Every collective the ccl ABI has a call for, on device memory, checked against the host
// reference byte for byte: all-reduce (sum out of place and in place, max, min; average of
// int32), all-gather, reduce-scatter (sum), broadcast from the last rank, all-to-all, in
// several dtypes and an odd count.
// with_avg false: a library without the average (CNCL) leaves it out.
std::string every_collective(Rank& r, const std::vector<size_t>& counts, bool with_avg = true) {
  const hmc_dtype_t dtypes[] = {HMC_DTYPE_F32, HMC_DTYPE_F16, HMC_DTYPE_BF16,
                                HMC_DTYPE_I32, HMC_DTYPE_I64, HMC_DTYPE_U8};
  const int n = r.size;
  for (size_t count : counts) {
    for (hmc_dtype_t t : dtypes) {
      const size_t es = esize(t), bytes = count * es;
      std::string tag = " dtype " + std::to_string(int(t)) + " count " + std::to_string(count);
      hmc_request_t req;
      std::vector<uint8_t> got(bytes * size_t(n)), want;
      // All-reduce.
      for (hmc_reduce_op_t op : {HMC_OP_SUM, HMC_OP_MAX, HMC_OP_MIN, HMC_OP_AVG}) {
        if (op == HMC_OP_AVG && (t != HMC_DTYPE_I32 || !with_avg)) continue;
        for (bool in_place : {false, true}) {
          if (in_place && op != HMC_OP_SUM) continue;
          Buf send(r.ctx, r.mem, bytes), recv(r.ctx, r.mem, bytes);
          Buf& target = in_place ? send : recv;
          if (!send.put(values(t, r.rank, count).data())) return "fill";
          std::string e = wait(hmc_all_reduce(r.comm, send.get(), target.get(), count, t, op, &req),
                               &req, "all_reduce");
          if (!e.empty()) return e + tag;
          got.resize(bytes);
          if (!target.take(got.data())) return "read back";
          want.assign(bytes, 0);
          for (size_t i = 0; i < count; ++i) encode(t, reduce_ref(op, n, i), &want[i * es]);
          e = first_difference(
              got, want, es,
              "all_reduce op " + std::to_string(int(op)) + (in_place ? " in place" : "") + tag);
          if (!e.empty()) return e;
        }
      }
      // All-gather.
      {
        Buf send(r.ctx, r.mem, bytes), recv(r.ctx, r.mem, bytes * size_t(n));
        if (!send.put(values(t, r.rank, count).data())) return "fill";
        std::string e = wait(hmc_all_gather(r.comm, send.get(), recv.get(), count, t, &req), &req,
                             "all_gather");
        if (!e.empty()) return e + tag;
        got.resize(bytes * size_t(n));
        if (!recv.take(got.data())) return "read back";
        want.clear();
        for (int k = 0; k < n; ++k) {
          auto v = values(t, k, count);
          want.insert(want.end(), v.begin(), v.end());
        }
        if (!(e = first_difference(got, want, es, "all_gather" + tag)).empty()) return e;
      }
      // Reduce-scatter: rank r's input element j is small(r, j) over n * count elements.
      {
        Buf send(r.ctx, r.mem, bytes * size_t(n)), recv(r.ctx, r.mem, bytes);
        if (!send.put(values(t, r.rank, count * size_t(n)).data())) return "fill";
        std::string e =
            wait(hmc_reduce_scatter(r.comm, send.get(), recv.get(), count, t, HMC_OP_SUM, &req),
                 &req, "reduce_scatter");
        if (!e.empty()) return e + tag;
        got.resize(bytes);
        if (!recv.take(got.data())) return "read back";
        want.assign(bytes, 0);
        for (size_t i = 0; i < count; ++i)
          encode(t, reduce_ref(HMC_OP_SUM, n, size_t(r.rank) * count + i), &want[i * es]);
        if (!(e = first_difference(got, want, es, "reduce_scatter" + tag)).empty()) return e;
      }
      // Broadcast from the last rank.
      {
        Buf buf(r.ctx, r.mem, bytes);
        if (!buf.put(values(t, r.rank, count).data())) return "fill";
        std::string e =
            wait(hmc_broadcast(r.comm, buf.get(), count, t, n - 1, &req), &req, "broadcast");
        if (!e.empty()) return e + tag;
        got.resize(bytes);
        if (!buf.take(got.data())) return "read back";
        if (!(e = first_difference(got, values(t, n - 1, count), es, "broadcast" + tag)).empty())
          return e;
      }
      // All-to-all: block j of rank r's input is values(r) at j * count.., and lands as block r
      // of rank j's output.
      {
        Buf send(r.ctx, r.mem, bytes * size_t(n)), recv(r.ctx, r.mem, bytes * size_t(n));
        if (!send.put(values(t, r.rank, count * size_t(n)).data())) return "fill";
        std::string e = wait(hmc_all_to_all(r.comm, send.get(), recv.get(), count, t, &req), &req,
                             "all_to_all");
        if (!e.empty()) return e + tag;
        got.resize(bytes * size_t(n));
        if (!recv.take(got.data())) return "read back";
        want.clear();
        for (int k = 0; k < n; ++k) {
          auto v = values(t, k, count * size_t(n));
          want.insert(want.end(), v.begin() + long(size_t(r.rank) * bytes),
                      v.begin() + long(size_t(r.rank + 1) * bytes));
        }
        if (!(e = first_difference(got, want, es, "all_to_all" + tag)).empty()) return e;
      }
    }
  }
  return "";
}

std::string ccl_collectives_role(Rank& r) {
  return every_collective(r, {1, 1001});
}

// All-to-all-v with uneven counts (zeros among them) and a barrier, exact, in two dtypes.
std::string all_to_allv_and_barrier(Rank& r) {
  const int n = r.size;
  auto count = [](int from, int to) { return size_t((from + 2 * to) % 4); };
  for (hmc_dtype_t t : {HMC_DTYPE_I32, HMC_DTYPE_BF16}) {
    const size_t es = esize(t);
    // Rank `from`'s input: its blocks for ranks 0..n-1 in order, element k being small(from, k).
    auto displ = [&](int from, int to) {
      size_t d = 0;
      for (int j = 0; j < to; ++j) d += count(from, j);
      return d;
    };
    AllToAllvLayout lay = all_to_allv_layout(r.rank, n, count);
    Buf send(r.ctx, r.mem, lay.st * es), recv(r.ctx, r.mem, lay.rt * es);
    if (!send.put(values(t, r.rank, lay.st).data())) return "fill";
    hmc_request_t req;
    std::string e = wait(hmc_all_to_allv(r.comm, send.get(), lay.sc.data(), lay.sd.data(),
                                         recv.get(), lay.rc.data(), lay.rd.data(), t, &req),
                         &req, "all_to_allv");
    if (!e.empty()) return e;
    std::vector<uint8_t> got(lay.rt * es), want;
    if (!recv.take(got.data())) return "read back";
    for (int j = 0; j < n; ++j) {
      auto v = values(t, j, displ(j, n));
      size_t from = displ(j, r.rank) * es;
      want.insert(want.end(), v.begin() + long(from),
                  v.begin() + long(from + lay.rc[size_t(j)] * es));
    }
    if (!(e = first_difference(got, want, es, "all_to_allv dtype " + std::to_string(int(t))))
             .empty())
      return e;
  }
  hmc_request_t req;
  return wait(hmc_barrier(r.comm, &req), &req, "barrier");
}

// One all-reduce of int32 on device memory, checked; the status of a failure in *failed.
std::string one_all_reduce(Rank& r, size_t count, hmc_status_t* failed = nullptr) {
  Buf send(r.ctx, r.mem, count * 4), recv(r.ctx, r.mem, count * 4);
  if (!send.put(values(HMC_DTYPE_I32, r.rank, count).data())) return "fill";
  hmc_request_t req;
  hmc_status_t st =
      hmc_all_reduce(r.comm, send.get(), recv.get(), count, HMC_DTYPE_I32, HMC_OP_SUM, &req);
  if (st == HMC_SUCCESS) st = hmc_request_wait(req, 20000, nullptr);
  if (st != HMC_SUCCESS) {
    if (failed) *failed = st;
    return "all_reduce: " + describe(st);
  }
  std::vector<uint8_t> got(count * 4), want(count * 4);
  if (!recv.take(got.data())) return "read back";
  for (size_t i = 0; i < count; ++i)
    encode(HMC_DTYPE_I32, reduce_ref(HMC_OP_SUM, r.size, i), &want[i * 4]);
  return first_difference(got, want, 4, "all_reduce");
}

// A 1001-element all-reduce refused with HMC_ERR_NOT_SUPPORTED, its message holding every one
// of `words`.
std::string all_reduce_refused(Rank& r, const std::vector<std::string>& words = {}) {
  hmc_status_t st = HMC_SUCCESS;
  std::string e = one_all_reduce(r, 1001, &st);
  if (st != HMC_ERR_NOT_SUPPORTED) return "expected HMC_ERR_NOT_SUPPORTED, got: " + e;
  for (const std::string& w : words)
    if (e.find(w) == std::string::npos) return "message: " + e;
  return std::string();
}

// A 78-element all-reduce that fails (a failure the library was told to inject), its message
// holding every one of `words`.
std::string all_reduce_fails_naming(Rank& r, const std::vector<std::string>& words) {
  hmc_status_t st = HMC_SUCCESS;
  std::string e = one_all_reduce(r, 78, &st);
  if (st == HMC_SUCCESS) return std::string("the all-reduce did not fail");
  for (const std::string& w : words)
    if (e.find(w) == std::string::npos) return "message: " + e;
  return std::string();
}

}  // namespace

TEST(CclBackend, TwoCudaRanksEveryCollective) {
  Launch l{mems_of(2, {"cuda:0", "cuda:1"})};
  l.env = nccl_env("ccl");  // a collective that did not go through NCCL would fail
  expect_all_pass(run(l, ccl_collectives_role));
}

TEST(CclBackend, FourCudaRanksEveryCollective) {
  Launch l{mems_of(4, {"cuda:0", "cuda:1"})};
  l.env = nccl_env("ccl");
  expect_all_pass(run(l, ccl_collectives_role));
}

// The rccl plugin (the same source over HIP) over the emulated RCCL.
TEST(CclBackend, TwoHipRanksEveryCollective) {
  Launch l{mems_of(2, {"hip:0", "hip:1"})};
  l.env = rccl_env("ccl");  // a collective that did not go through RCCL would fail
  expect_all_pass(run(l, ccl_collectives_role));
}

// No RCCL: the rccl plugin serves nothing and hmc runs the hip ranks' collectives; forced ccl
// is refused before anything is posted.
TEST(CclBackend, WithoutRcclHmcRunsThem) {
  Launch l{mems_of(2, {"hip:0"})};
  l.env = rccl_env("auto");
  l.env.push_back({"HMC_RCCL_LIBRARY", "/nonexistent/librccl.so.1"});
  expect_all_pass(run(l, [](Rank& r) { return one_all_reduce(r, 1001); }));
  l.env.back() = {"HMC_COLL_BACKEND", "ccl"};
  l.env.push_back({"HMC_RCCL_LIBRARY", "/nonexistent/librccl.so.1"});
  expect_all_pass(run(
      l, [](Rank& r) { return all_reduce_refused(r, {"no ccl plugin serves a device here"}); }));
}

// 2 cuda + 2 hip ranks with both plugins loaded in every process (the two emulated libraries
// export the same nccl* names): auto, every collective exact.
TEST(CclBackend, CudaAndHipRanksBothLibraries) {
  Launch l{mems_of(4, {"cuda:0", "hip:0", "cuda:1", "hip:1"})};
  l.env = nccl_env("auto");
  for (auto& kv : rccl_env("auto"))
    if (kv.first.rfind("HMC_RCCL_", 0) == 0) l.env.push_back(kv);
  l.env.push_back({"HMC_CCL_PLUGINS", "nccl,rccl"});
  expect_all_pass(run(l, ccl_collectives_role));
}

// An RCCL failure ends the request naming the rccl plugin, RCCL and the call.
TEST(CclBackend, RcclFailureEndsTheRequest) {
  Launch l{mems_of(2, {"hip:0"})};
  l.env = rccl_env("ccl");
  l.env.push_back({"FAKENCCL_FAIL_OP_NTH", "1"});
  expect_all_pass(run(l, [](Rank& r) {
    return all_reduce_fails_naming(r, {"rccl (", "RCCL", "ncclAllReduce", "injected failure"});
  }));
}

// The mccl plugin (the same source, MCCL's names, over MUSA) over the emulated MCCL.
TEST(CclBackend, ThreeMusaRanksEveryCollective) {
  Launch l{mems_of(3, {"musa:0", "musa:1"})};
  l.env = mccl_env("ccl");  // a collective that did not go through MCCL would fail
  expect_all_pass(run(l, ccl_collectives_role));
}

// An MCCL failure names the mccl plugin, MCCL and the call in MCCL's spelling.
TEST(CclBackend, McclFailureEndsTheRequest) {
  Launch l{mems_of(2, {"musa:0"})};
  l.env = mccl_env("ccl");
  l.env.push_back({"FAKENCCL_FAIL_OP_NTH", "1"});
  expect_all_pass(run(l, [](Rank& r) {
    return all_reduce_fails_naming(r, {"mccl (", "MCCL", "mcclAllReduce", "injected failure"});
  }));
}

// The cncl plugin (its own source, CNCL's API over CNRT) over the emulated CNCL: every
// collective but the average, which CNCL lacks.
TEST(CclBackend, ThreeMluRanksEveryCollective) {
  Launch l{mems_of(3, {"mlu:0", "mlu:1"})};
  l.env = cncl_env("ccl");  // a collective that did not go through CNCL would fail
  expect_all_pass(run(l, [](Rank& r) { return every_collective(r, {1, 1001}, false); }));
}

// A CNCL failure ends the request naming the cncl plugin, CNCL, the call and CNCL's words.
TEST(CclBackend, CnclFailureEndsTheRequest) {
  Launch l{mems_of(2, {"mlu:0"})};
  l.env = cncl_env("ccl");
  l.env.push_back({"FAKENCCL_FAIL_OP_NTH", "1"});
  expect_all_pass(run(l, [](Rank& r) {
    return all_reduce_fails_naming(r, {"cncl (", "CNCL", "cnclAllReduce", "asynchronous error"});
  }));
}

// What CNCL lacks is refused by name when CNCL is forced: the average.
TEST(CclBackend, CnclRefusesTheAverage) {
  Launch l{mems_of(2, {"mlu:0"})};
  l.env = cncl_env("ccl");
  expect_all_pass(run(l, [](Rank& r) {
    Buf send(r.ctx, r.mem, 4 * 16), recv(r.ctx, r.mem, 4 * 16);
    hmc_request_t req;
    hmc_status_t st =
        hmc_all_reduce(r.comm, send.get(), recv.get(), 16, HMC_DTYPE_I32, HMC_OP_AVG, &req);
    if (st == HMC_SUCCESS) st = hmc_request_wait(req, 20000, nullptr);
    std::string e = describe(st);
    if (st != HMC_ERR_NOT_SUPPORTED) return "expected HMC_ERR_NOT_SUPPORTED, got: " + e;
    if (e.find("cncl does not handle operation 4") == std::string::npos) return "message: " + e;
    return std::string();
  }));
}

// A reduce, which the ccl plugin ABI lacks: on device memory it runs on hmc's algorithms under
// auto (checked at the root, rank 1), and a forced ccl refuses it on every rank alike (the
// others pass no recv); on host memory it runs even when ccl is forced.
TEST(CclBackend, ReduceRunsOnHmc) {
  auto role = [](bool forced) {
    return [forced](Rank& r) -> std::string {
      for (const std::string& mem : {r.mem, std::string("host")}) {
        const size_t count = 3001;
        Buf send(r.ctx, mem, count * 4), recv(r.ctx, mem, count * 4);
        if (!send.put(values(HMC_DTYPE_I32, r.rank, count).data())) return "fill";
        hmc_request_t req;
        hmc_status_t st = hmc_reduce(r.comm, send.get(), r.rank == 1 ? recv.get() : nullptr, count,
                                     HMC_DTYPE_I32, HMC_OP_SUM, 1, &req);
        if (st == HMC_SUCCESS) st = hmc_request_wait(req, 20000, nullptr);
        if (forced && mem != "host") {
          if (st != HMC_ERR_NOT_SUPPORTED) return "forced ccl: " + describe(st);
          if (std::string(hmc_last_error()).find("no reduce") == std::string::npos)
            return "message: " + describe(st);
          continue;
        }
        if (st != HMC_SUCCESS) return mem + ": reduce: " + describe(st);
        char used[256];
        hmc_comm_last_backend(r.comm, used, sizeof used);
        if (std::string(used).rfind("hmc ", 0) != 0) return mem + ": ran on '" + used + "'";
        if (r.rank != 1) continue;
        std::vector<uint8_t> got(count * 4), want(count * 4);
        if (!recv.take(got.data())) return "read back";
        for (size_t i = 0; i < count; ++i)
          encode(HMC_DTYPE_I32, reduce_ref(HMC_OP_SUM, r.size, i), &want[i * 4]);
        std::string e = first_difference(got, want, 4, "reduce");
        if (!e.empty()) return mem + ": " + e;
      }
      return std::string();
    };
  };
  Launch l{mems_of(3, {"cuda:0", "cuda:1"})};
  l.env = nccl_env("auto");
  expect_all_pass(run(l, role(false)));
  l.env = nccl_env("ccl");
  expect_all_pass(run(l, role(true)));
}

// A library that exports NCCL's names, not MCCL's, is not taken for MCCL: the plugin serves
// nothing, says what is missing, and hmc runs the musa ranks' collectives.
TEST(CclBackend, NcclNamesAreNotMccl) {
  Launch l{mems_of(2, {"musa:0"})};
  l.env = mccl_env("auto");
  l.env.push_back({"HMC_MCCL_LIBRARY", std::string(FAKEGPU_DIR) + "/nccl/libnccl.so.2"});
  expect_all_pass(run(l, [](Rank& r) { return one_all_reduce(r, 1001); }));
  l.env.push_back({"HMC_COLL_BACKEND", "ccl"});
  expect_all_pass(run(l, [](Rank& r) { return all_reduce_refused(r); }));
}

// Host buffers on the same communicator stay on hmc's algorithms under auto.
TEST(CclBackend, AutoKeepsHostBuffersOnHmc) {
  Launch l{mems_of(2, {"cuda:0"})};
  l.env = nccl_env("auto");
  expect_all_pass(run(l, [](Rank& r) {
    char used[256];
    if (hmc_comm_last_backend(r.comm, used, sizeof used) != HMC_SUCCESS || used[0] != '\0')
      return std::string("before any collective: '") + used + "'";
    std::string e = one_all_reduce(r, 333);  // through NCCL
    if (!e.empty()) return e;
    hmc_comm_last_backend(r.comm, used, sizeof used);
    if (std::string(used).rfind("ccl nccl (", 0) != 0) return std::string("ccl: '") + used + "'";
    Rank host = r;
    host.mem = "host";
    if (!(e = one_all_reduce(host, 333)).empty()) return e;
    hmc_comm_last_backend(r.comm, used, sizeof used);
    if (std::string(used).rfind("hmc ", 0) != 0) return std::string("hmc: '") + used + "'";
    char tiny[4];  // truncated, terminated
    if (hmc_comm_last_backend(r.comm, tiny, sizeof tiny) != HMC_SUCCESS ||
        std::string(tiny) != "hmc")
      return std::string("truncated: '") + tiny + "'";
    if (hmc_comm_last_backend(r.comm, tiny, 0) != HMC_ERR_INVALID_ARGUMENT)
      return std::string("len 0 accepted");
    return std::string();
  }));
}

// No library: the plugin loads, serves nothing, and the collectives run on hmc's algorithms;
// forcing ccl then fails before anything is posted, saying why.
TEST(CclBackend, WithoutTheLibraryHmcRunsThem) {
  Launch l{mems_of(2, {"cuda:0"})};
  l.env = nccl_env("auto");
  l.env.push_back({"HMC_NCCL_LIBRARY", "/nonexistent/libnccl.so.2"});
  expect_all_pass(run(l, [](Rank& r) { return one_all_reduce(r, 1001); }));
  l.env.back() = {"HMC_COLL_BACKEND", "ccl"};
  l.env.push_back({"HMC_NCCL_LIBRARY", "/nonexistent/libnccl.so.2"});
  expect_all_pass(run(
      l, [](Rank& r) { return all_reduce_refused(r, {"no ccl plugin serves a device here"}); }));
}

// The vendor communicator cannot be made: the communicator stays on hmc's algorithms (and says
// why when ccl is forced).
TEST(CclBackend, CommCreateFailsHmcRunsThem) {
  Launch l{mems_of(2, {"cuda:0"})};
  l.env = nccl_env("auto");
  l.env.push_back({"FAKENCCL_FAIL_INIT", "1"});
  expect_all_pass(run(l, [](Rank& r) {
    for (int i = 0; i < 2; ++i) {  // the second one does not try again
      std::string e = one_all_reduce(r, 1001);
      if (!e.empty()) return e;
    }
    return std::string();
  }));
  l.env[3] = {"HMC_COLL_BACKEND", "ccl"};
  expect_all_pass(run(l, [](Rank& r) {
    return all_reduce_refused(r, {"the ccl plugin 'nccl' is not used", "comm_create"});
  }));
}

// An asynchronous failure inside the library ends the request with an hmc error naming the
// library and carrying its message, on every rank; the communicator is unusable afterwards.
TEST(CclBackend, LibraryFailureEndsTheRequest) {
  Launch l{mems_of(2, {"cuda:0"})};
  l.env = nccl_env("ccl");
  l.env.push_back({"FAKENCCL_FAIL_OP_NTH", "2"});
  expect_all_pass(run(l, [](Rank& r) {
    std::string e = one_all_reduce(r, 77);
    if (!e.empty()) return "first: " + e;
    hmc_status_t st = HMC_SUCCESS;
    e = one_all_reduce(r, 77, &st);
    if (st == HMC_SUCCESS) return std::string("the second all-reduce did not fail");
    if (e.find("nccl (") == std::string::npos || e.find("ncclAllReduce") == std::string::npos ||
        e.find("injected failure") == std::string::npos)
      return "message: " + e;
    st = HMC_SUCCESS;
    e = one_all_reduce(r, 77, &st);
    if (st != HMC_ERR_PEER_LOST) return "after the failure: " + e;
    return std::string();
  }));
}

// A rank killed while the others are inside the library: hmc sees it lost, aborts the vendor
// communicator (the emulated NCCL's own wait would last 20 s), and the others' requests end
// with HMC_ERR_PEER_LOST at once.
// A collective waiting inside the vendor library for a late rank is cancelled: it ends at once,
// the vendor communicator aborted, and the communicator refuses later collectives by name.
TEST(CclBackend, CollectiveCancelledInsideTheLibrary) {
  Launch l{mems_of(2, {"cuda:0"})};
  l.env = nccl_env("ccl");
  l.env.back() = {"FAKENCCL_TIMEOUT_MS", "20000"};
  auto out = run(l, [](Rank& r) -> std::string {
    std::string e = one_all_reduce(r, 1001);  // the vendor communicator is made
    if (!e.empty()) return "first: " + e;
    if (r.rank == 1) {
      usleep(1500000);  // rank 0 cancels meanwhile
      hmc_status_t st = HMC_SUCCESS;
      e = one_all_reduce(r, 1001, &st);
      if (st == HMC_SUCCESS) return std::string("the late all_reduce succeeded alone");
      return std::string();
    }
    Buf send(r.ctx, r.mem, 4004), recv(r.ctx, r.mem, 4004);
    hmc_request_t req;
    hmc_status_t st =
        hmc_all_reduce(r.comm, send.get(), recv.get(), 1001, HMC_DTYPE_I32, HMC_OP_SUM, &req);
    if (st != HMC_SUCCESS) return "all_reduce: " + describe(st);
    if ((st = hmc_request_wait(req, 300, nullptr)) != HMC_ERR_TIMEOUT)
      return "the wait ended with " + describe(st) + " before the late rank came";
    if ((st = hmc_request_cancel(req)) != HMC_SUCCESS) return "cancel: " + describe(st);
    if ((st = hmc_request_wait(req, 2000, nullptr)) != HMC_ERR_CANCELLED)
      return "the wait after cancel ended with " + describe(st);
    hmc_status_t later = HMC_SUCCESS;
    e = one_all_reduce(r, 16, &later);
    if (later == HMC_SUCCESS) return std::string("an all_reduce after the cancel succeeded");
    if (e.find("cancelled by hmc_request_cancel") == std::string::npos)
      return "the refusal does not name the cancel: " + e;
    return std::string();
  });
  expect_all_pass(out);
}

TEST(CclBackend, RankKilledInsideTheLibrary) {
  Launch l{mems_of(3, {"cuda:0"})};
  l.env = nccl_env("ccl");
  l.env.back() = {"FAKENCCL_TIMEOUT_MS", "20000"};
  auto out = run(l, [](Rank& r) {
    std::string e = one_all_reduce(r, 1001);  // the vendor communicator is made
    if (!e.empty()) return "first: " + e;
    if (r.rank == 1) {
      usleep(300000);  // the others are waiting in the library by now
      raise(SIGKILL);
    }
    auto t0 = std::chrono::steady_clock::now();
    hmc_status_t st = HMC_SUCCESS;
    e = one_all_reduce(r, 1001, &st);
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    if (st != HMC_ERR_PEER_LOST) return "expected HMC_ERR_PEER_LOST, got: " + e;
    // A rank connected to the lost one says so; one that is not hears of the abort.
    if ((e.find("was lost") == std::string::npos && e.find("aborted") == std::string::npos) ||
        e.find("nccl") == std::string::npos)
      return "message: " + e;
    if (ms > 5000) return "the loss took " + std::to_string(ms) + " ms";
    return std::string();
  });
  for (int i = 0; i < 3; ++i) {
    if (i == 1)
      EXPECT_EQ(out[size_t(i)], "killed by signal 9");
    else
      EXPECT_EQ(out[size_t(i)], "") << "rank " << i;
  }
}

// ---- hierarchical collectives of mixed communicators: each vendor group in its library --------

namespace {

// Both emulated libraries, forced: a cuda or hip rank whose collective found no vendor library
// for its group would fail (HMC_COLL_BACKEND=ccl).
std::vector<std::pair<std::string, std::string>> mixed_env(const char* backend) {
  auto env = nccl_env(backend);
  for (auto& kv : rccl_env(backend))
    if (kv.first.rfind("HMC_RCCL_", 0) == 0) env.push_back(kv);
  env.push_back({"HMC_CCL_PLUGINS", "nccl,rccl"});
  return env;
}

// Every collective in every dtype, counts that divide the groups' sizes and counts that do not.
std::string mixed_role(Rank& r) {
  std::string e = every_collective(r, {1, 7, 1002});
  if (!e.empty()) return e;
  if (!(e = all_to_allv_and_barrier(r)).empty()) return e;
  Rank host = r;  // host buffers on every rank: the groups' parts on hmc's paths
  host.mem = "host";
  return one_all_reduce(host, 1001);
}

}  // namespace

// 2 cuda + 2 hip + 1 host ranks on one host: NCCL within the cuda ranks, RCCL within the hip ones,
// hmc's paths across the groups and for the host rank; every collective exact.
TEST(CclHier, TwoCudaTwoHipOneHost) {
  Launch l{{"cuda:0", "hip:0", "host", "cuda:1", "hip:1"}};
  l.env = mixed_env("ccl");
  expect_all_pass(run(l, [](Rank& r) {
    std::string e = mixed_role(r);
    char used[256] = "";
    hmc_comm_last_backend(r.comm, used, sizeof used);
    if (e.empty() && std::string(used).find("hierarchical: ") == std::string::npos)
      e = std::string("hmc_comm_last_backend: '") + used + "'";
    return e;
  }));
}

// Groups of unequal sizes: the hip rank stands in for all three cuda ranks on the rails.
TEST(CclHier, ThreeCudaOneHip) {
  Launch l{{"cuda:0", "cuda:1", "hip:0", "cuda:0"}};
  l.env = mixed_env("ccl");
  expect_all_pass(run(l, mixed_role));
}

// Only one group has its library (no RCCL): the hip ranks run their group's parts on hmc's paths.
TEST(CclHier, OneGroupWithoutItsLibrary) {
  Launch l{{"cuda:0", "hip:0", "cuda:1", "hip:1"}};
  l.env = mixed_env("auto");
  l.env.push_back({"HMC_RCCL_LIBRARY", "/nonexistent/librccl.so.1"});
  expect_all_pass(run(l, [](Rank& r) { return every_collective(r, {1002}); }));
}

// Three groups of three sizes: hip's rank 0 and the host rank stand in on several rails.
TEST(CclHier, ThreeCudaTwoHipOneHost) {
  Launch l{{"cuda:0", "hip:0", "cuda:1", "host", "hip:1", "cuda:0"}};
  l.env = mixed_env("ccl");
  expect_all_pass(run(l, mixed_role));
}

// HMC_COLL_BACKEND=hmc keeps a mixed communicator on the flat algorithms: a library that fails
// its first call is never called.
TEST(CclHier, HmcBackendStaysFlat) {
  Launch l{{"cuda:0", "hip:0", "host", "cuda:1"}};
  l.env = mixed_env("hmc");
  l.env.push_back({"FAKENCCL_FAIL_OP_NTH", "1"});
  expect_all_pass(run(l, [](Rank& r) { return every_collective(r, {7}); }));
}

// A one-rank vendor group (cuda) and a host group of two running its parts on hmc's paths.
TEST(CclHier, OneCudaTwoHipTwoHost) {
  Launch l{{"hip:0", "host", "cuda:0", "hip:1", "host"}};
  l.env = mixed_env("ccl");
  expect_all_pass(run(l, mixed_role));
}

// A library's failure inside a group's part ends the collective on every rank: the device ranks
// name their library and its message, the host rank hears of the loss.
TEST(CclHier, LibraryFailureEndsEveryRank) {
  Launch l{{"cuda:0", "hip:0", "host", "cuda:1", "hip:1"}};
  l.env = mixed_env("ccl");
  l.env.push_back({"FAKENCCL_FAIL_OP_NTH", "1"});
  expect_all_pass(run(l, [](Rank& r) {
    hmc_status_t st = HMC_SUCCESS;
    std::string e = one_all_reduce(r, 1002, &st);
    if (st == HMC_SUCCESS) return std::string("the all-reduce did not fail");
    if (r.mem == "host") {
      if (st != HMC_ERR_PEER_LOST) return "host rank: " + e;
      return std::string();
    }
    const char* lib = r.mem.rfind("cuda", 0) == 0 ? "nccl (" : "rccl (";
    if (e.find(lib) == std::string::npos ||
        (e.find("injected failure") == std::string::npos && e.find("aborted") == std::string::npos))
      return "message: " + e;
    return std::string();
  }));
}

// A rank killed while the others are inside the hierarchical all-reduce: every survivor's
// request fails with an error within the timeout, and the vendor communicators are aborted (the
// emulated libraries' own wait, 20 s, would outlast it).
TEST(CclHier, RankKilledMidCollective) {
  Launch l{{"cuda:0", "hip:0", "host", "cuda:1", "hip:1"}};
  l.env = mixed_env("ccl");
  for (auto& kv : l.env)
    if (kv.first == "FAKENCCL_TIMEOUT_MS") kv.second = "20000";
  auto out = run(l, [](Rank& r) {
    std::string e = one_all_reduce(r, 1001);  // the groups are set up
    if (!e.empty()) return "first: " + e;
    if (r.rank == 3) {
      usleep(300000);  // the others are waiting by now
      raise(SIGKILL);
    }
    auto t0 = std::chrono::steady_clock::now();
    hmc_status_t st = HMC_SUCCESS;
    e = one_all_reduce(r, 1001, &st);
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    if (st != HMC_ERR_PEER_LOST && st != HMC_ERR_TIMEOUT)
      return "expected HMC_ERR_PEER_LOST or HMC_ERR_TIMEOUT, got: " + e;
    if (e.find("hierarchical") == std::string::npos) return "message: " + e;
    if (ms > kTimeoutMs + 1500) return "the loss took " + std::to_string(ms) + " ms";
    return std::string();
  });
  for (int i = 0; i < 5; ++i) {
    if (i == 3)
      EXPECT_EQ(out[size_t(i)], "killed by signal 9");
    else
      EXPECT_EQ(out[size_t(i)], "") << "rank " << i;
  }
}

// ---- stream order: collectives given the application's stream ---------------------------------

namespace {

// The application's side of the emulated CUDA driver: the library the cuda device plugin opened
// (the same emulator), a stream of the rank's device, and an asynchronous upload on it.
struct AppCuda {
  using Init = int (*)(unsigned);
  using DeviceGet = int (*)(int*, int);
  using Retain = int (*)(void**, int);
  using SetCurrent = int (*)(void*);
  using StreamCreate = int (*)(void**, unsigned);
  using StreamDestroy = int (*)(void*);
  using StreamSync = int (*)(void*);
  using Upload = int (*)(uintptr_t, const void*, size_t, void*);
  void* lib = nullptr;
  void* stream = nullptr;
  StreamDestroy destroy = nullptr;
  StreamSync sync = nullptr;
  Upload upload = nullptr;
  std::string open(const std::string& mem) {
    lib = dlopen((std::string(FAKEGPU_DIR) + "/cuda/libcuda.so.1").c_str(), RTLD_NOW);
    if (!lib) return "dlopen libcuda";
    auto init = reinterpret_cast<Init>(dlsym(lib, "cuInit"));
    auto get = reinterpret_cast<DeviceGet>(dlsym(lib, "cuDeviceGet"));
    auto retain = reinterpret_cast<Retain>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
    auto current = reinterpret_cast<SetCurrent>(dlsym(lib, "cuCtxSetCurrent"));
    auto create = reinterpret_cast<StreamCreate>(dlsym(lib, "cuStreamCreate"));
    destroy = reinterpret_cast<StreamDestroy>(dlsym(lib, "cuStreamDestroy_v2"));
    sync = reinterpret_cast<StreamSync>(dlsym(lib, "cuStreamSynchronize"));
    upload = reinterpret_cast<Upload>(dlsym(lib, "cuMemcpyHtoDAsync_v2"));
    if (!init || !get || !retain || !current || !create || !destroy || !sync || !upload)
      return "libcuda symbols";
    int dev = 0, ordinal = std::atoi(mem.substr(mem.find(':') + 1).c_str());
    void* ctx = nullptr;
    if (init(0) || get(&dev, ordinal) || retain(&ctx, dev) || current(ctx) || create(&stream, 0))
      return "a CUDA stream";
    return "";
  }
  ~AppCuda() {
    if (stream) destroy(stream);
  }
};

// The input uploaded asynchronously on the application's stream (slowed to about 40 ms by
// FAKEGPU_BANDWIDTH_MBPS), the collective posted at once on that stream: it must see the
// upload. Then the same without a stream, and the refusals.
std::string stream_role(Rank& r) {
  // A host rank of a mixed communicator passes no stream, and is refused one.
  const bool host = r.mem == "host";
  AppCuda cu;
  std::string e = host ? "" : cu.open(r.mem);
  if (!e.empty()) return e;
  const size_t count = 1 << 18;  // 1 MiB of int32
  for (int round = 0; round < 2; ++round) {
    auto in = values(HMC_DTYPE_I32, r.rank + round, count);
    Buf send(r.ctx, r.mem, count * 4), recv(r.ctx, r.mem, count * 4);
    if (host ? !send.put(in.data())
             : cu.upload(reinterpret_cast<uintptr_t>(send.get()), in.data(), in.size(), cu.stream))
      return "upload";
    hmc_request_t req;
    e = wait(hmc_all_reduce_on_stream(r.comm, send.get(), recv.get(), count, HMC_DTYPE_I32,
                                      HMC_OP_SUM, host ? nullptr : cu.stream, &req),
             &req, "all_reduce_on_stream");
    if (!e.empty()) return e;
    if (!host && cu.sync(cu.stream)) return "stream synchronize";
    std::vector<uint8_t> got(count * 4), want(count * 4);
    if (!recv.take(got.data())) return "read back";
    for (size_t i = 0; i < count; ++i) {
      long v = 0;
      for (int k = 0; k < r.size; ++k) v += small(k + round, i);
      encode(HMC_DTYPE_I32, v, &want[i * 4]);
    }
    e = first_difference(got, want, 4, "all_reduce_on_stream round " + std::to_string(round));
    if (!e.empty()) return e;
  }
  if (host) {
    Buf b(r.ctx, r.mem, 64);
    hmc_request_t req;
    hmc_status_t st = hmc_all_reduce_on_stream(r.comm, b.get(), b.get(), 16, HMC_DTYPE_I32,
                                               HMC_OP_SUM, reinterpret_cast<void*>(1), &req);
    if (st != HMC_ERR_INVALID_ARGUMENT) return "a stream with host buffers: " + describe(st);
  }
  if (!(e = one_all_reduce(r, 1 << 18)).empty()) return "without a stream: " + e;
  return "";
}

std::vector<std::pair<std::string, std::string>> slow_uploads(
    std::vector<std::pair<std::string, std::string>> env) {
  env.push_back({"FAKEGPU_BANDWIDTH_MBPS", "25"});
  env.push_back({"FAKEGPU_D2D_BANDWIDTH_MBPS", "0"});
  return env;
}

}  // namespace

// Through NCCL: the collective is enqueued on the application's stream.
TEST(CollStream, ThroughTheLibrary) {
  Launch l{{"cuda:0", "cuda:1"}};
  l.env = slow_uploads(nccl_env("ccl"));
  expect_all_pass(run(l, stream_role));
}

// On hmc's own paths: the collective waits for the stream's earlier work before it starts.
TEST(CollStream, OnHmcsPaths) {
  Launch l{{"cuda:0", "cuda:1"}};
  l.env = slow_uploads(nccl_env("hmc"));
  expect_all_pass(run(l, stream_role));
}

// Hierarchical: the cuda group's part in NCCL on the stream, the host rank without one.
TEST(CollStream, Hierarchical) {
  Launch l{{"cuda:0", "host", "cuda:1"}};
  l.env = slow_uploads(mixed_env("auto"));
  expect_all_pass(run(l, stream_role));
}
