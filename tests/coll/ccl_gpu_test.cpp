// The nccl ccl plugin on real hardware: the installed CUDA driver (libcuda.so.1) and NCCL
// (libnccl.so.2, or HMC_NCCL_LIBRARY), one rank per GPU (NCCL refuses two ranks of one
// communicator on one GPU), alone and with host ranks beside them; every collective checked
// against a host reference (exact but for float sums), and hmc_comm_last_backend showing that
// the GPU ranks' part went through NCCL. Labelled `gpu`; each test skips, saying why, on a
// machine without a GPU or without the library.
//
// CUDA does not survive fork(): the test process never loads it. The probe for GPUs and the
// ranks are forked processes, each loading the driver for itself.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "coll_roles.h"
#include "hmc/hmc.h"

namespace {

using coll_roles::Rank;
using coll_roles::Role;

constexpr int kMaxGpus = 8;
constexpr int kRunSeconds = 240;  // every rank's end, or they are killed

uint64_t now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec);
}

// Everything the other end writes into fd until it closes it; fd is closed.
std::string drain(int fd) {
  std::string out;
  char buf[1024];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  close(fd);
  return out;
}

// Runs fn in a forked process and returns what it wrote to the pipe it is given, or why the
// process failed.
template <typename Fn>
std::string in_child(Fn fn) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string said = fn();
    ssize_t w = write(fds[1], said.data(), said.size());
    (void)w;
    _exit(0);
  }
  close(fds[1]);
  std::string out = drain(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "the probe process failed (status " + std::to_string(status) + ")";
  return out;
}

// The GPUs of this machine, or 0 with *why saying why there are none to test with.
int gpus_here(std::string* why) {
  std::string said = in_child([]() -> std::string {
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cuda) return std::string("0 no CUDA driver: ") + dlerror();
    using Init = int (*)(unsigned);
    using Count = int (*)(int*);
    auto init = reinterpret_cast<Init>(dlsym(cuda, "cuInit"));
    auto count = reinterpret_cast<Count>(dlsym(cuda, "cuDeviceGetCount"));
    int n = 0;
    if (!init || !count) return "0 libcuda.so.1 lacks cuInit or cuDeviceGetCount";
    if (int r = init(0); r != 0) return "0 cuInit failed: CUDA error " + std::to_string(r);
    if (count(&n) != 0 || n <= 0) return "0 the CUDA driver reports no GPU";
    const char* lib = getenv("HMC_NCCL_LIBRARY");
    std::string name = lib && *lib ? lib : "libnccl.so.2";
    void* nccl = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!nccl) return "0 no NCCL: " + name + ": " + dlerror();
    if (!dlsym(nccl, "ncclCommInitRank")) return "0 " + name + " lacks ncclCommInitRank";
    return std::to_string(n) + " GPUs";
  });
  int n = atoi(said.c_str());
  if (n <= 0) *why = said.substr(said.find(' ') + 1);
  return n;
}

// The rendezvous: rank 0 hosts the store on a loopback port the kernel found free (bound, read
// and closed: another process could take it in between, which the tests accept).
std::string loopback_rendezvous() {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const bool got = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0 &&
                   getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (fd >= 0) close(fd);
  return got ? "tcp://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) : "tcp://127.0.0.1:29500";
}

// One process per entry of mems ("cuda:<i>" or "host"), joined in one communicator, each running
// role; returns each rank's verdict ("" for a pass).
std::vector<std::string> run_ranks(const std::vector<std::string>& mems, const Role& role) {
  const int n = int(mems.size());
  const std::string rdv = loopback_rendezvous();
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (int i = 0; i < n; ++i) {
    int fds[2];
    if (pipe(fds) != 0) return {"pipe failed"};
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const bool gpu = mems[size_t(i)] != "host";
      setenv("HMC_PLUGIN_PATH", HMC_TEST_PLUGIN_DIR, 1);
      setenv("HMC_NET_PLUGINS", "hoststage", 1);
      setenv("HMC_DEVICE_PLUGINS", gpu ? "cuda" : "^cuda,^hip,^mlu,^musa", 1);
      setenv("HMC_CCL_PLUGINS", "nccl", 1);
      // A GPU rank's collective that did not go through NCCL fails.
      setenv("HMC_COLL_BACKEND", "ccl", 1);
      setenv("HMC_DEVICE_COPY_CALIBRATE", "0", 1);
      setenv("HMC_NET_CALIBRATE", "0", 1);
      setenv("HMC_TIMEOUT_MS", "60000", 1);
      if (!getenv("HMC_LOG_LEVEL")) setenv("HMC_LOG_LEVEL", "warn", 1);
      std::string verdict;
      hmc_context_t ctx = nullptr;
      hmc_comm_t comm = nullptr;
      hmc_comm_options_t o{};
      o.struct_size = sizeof o;
      o.rank = i;
      o.size = n;
      o.rendezvous = rdv.c_str();
      o.timeout_ms = 60000;
      if (hmc_context_create(nullptr, &ctx) != HMC_SUCCESS) {
        verdict = std::string("context: ") + hmc_last_error();
      } else if (hmc_status_t st = hmc_comm_create(ctx, &o, &comm); st != HMC_SUCCESS) {
        verdict = "create: " + coll_roles::describe(st);
      } else {
        Rank r{ctx, comm, i, n, mems[size_t(i)]};
        verdict = role(r);
        if (hmc_comm_destroy(comm) != HMC_SUCCESS && verdict.empty())
          verdict = std::string("destroy: ") + hmc_last_error();
      }
      if (ctx) hmc_context_destroy(ctx);
      ssize_t w = write(fds[1], verdict.data(), verdict.size());
      (void)w;
      fflush(stdout);
      _exit(verdict.empty() ? 0 : 1);
    }
    close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fds[0]);
  }
  std::vector<std::string> out(static_cast<size_t>(n));
  const uint64_t deadline = now_s() + kRunSeconds;
  for (int i = 0; i < n; ++i) {
    int status = 0;
    while (waitpid(pids[size_t(i)], &status, WNOHANG) != pids[size_t(i)]) {
      if (now_s() > deadline) {
        for (int k = i; k < n; ++k) kill(pids[size_t(k)], SIGKILL);
        waitpid(pids[size_t(i)], &status, 0);
        out[size_t(i)] = "hung (killed after " + std::to_string(kRunSeconds) + " s)";
        break;
      }
      usleep(20000);
    }
    std::string said = drain(pipes[size_t(i)]);  // the rank has ended: its pipe is closed
    if (!out[size_t(i)].empty()) continue;
    out[size_t(i)] = said;
    if (said.empty() && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
      out[size_t(i)] = "failed without a word (status " + std::to_string(status) + ")";
  }
  return out;
}

// Every collective on the rank's own memory, then what ran the latest one: *want must be in it,
// and on a GPU rank "nccl" too.
Role checked_role(const std::string& want) {
  return [want](Rank& r) {
    std::string e = coll_roles::everything_role_on(r, false);
    if (!e.empty()) return e;
    char used[256] = "";
    if (hmc_comm_last_backend(r.comm, used, sizeof used) != HMC_SUCCESS)
      return std::string("hmc_comm_last_backend: ") + hmc_last_error();
    std::string b = used;
    if (b.find(want) == std::string::npos ||
        (r.mem != "host" && b.find("nccl") == std::string::npos))
      return "hmc_comm_last_backend: '" + b + "', wanted '" + want + "' through nccl";
    printf("rank %d (%s): %s\n", r.rank, r.mem.c_str(), used);
    return std::string();
  };
}

std::vector<std::string> gpu_ranks(int gpus) {
  std::vector<std::string> mems;
  for (int g = 0; g < std::min(gpus, kMaxGpus); ++g) mems.push_back("cuda:" + std::to_string(g));
  return mems;
}

void expect_all_pass(const std::vector<std::string>& v) {
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], "") << "rank " << i;
}

// One rank per GPU: a communicator of one vendor, every collective in NCCL.
TEST(CclGpu, OneRankPerGpuThroughNccl) {
  std::string why;
  int gpus = gpus_here(&why);
  if (gpus == 0) GTEST_SKIP() << why;
  expect_all_pass(run_ranks(gpu_ranks(gpus), checked_role("ccl nccl (")));
}

// The GPU ranks with two host ranks among them: the hierarchical forms, the GPU group's parts
// in NCCL and the host group's on hmc's paths.
TEST(CclGpu, GpuRanksWithHostRanks) {
  std::string why;
  int gpus = gpus_here(&why);
  if (gpus == 0) GTEST_SKIP() << why;
  std::vector<std::string> mems = gpu_ranks(gpus);
  mems.insert(mems.begin() + 1, "host");
  mems.push_back("host");
  const std::string group = "cuda x" + std::to_string(std::min(gpus, kMaxGpus)) + " (nccl)";
  expect_all_pass(run_ranks(mems, checked_role(group)));
}

}  // namespace
