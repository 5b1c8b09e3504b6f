// hmc-idle-peers: how much resident memory one context spends on N connected peers that do
// nothing (the cost a server with many idle clients pays). The parent reads its own VmRSS before
// creating its context, after, with N peers connected, and after one small message each way per
// peer (transports that allocate lazily show up there). The peers are N child processes, each
// with its own context; they exit when the parent closes the pipe that is their stdin (or dies).
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <hmc/hmc.hpp>
#include <string>
#include <vector>

#include "child_process.h"
#include "cli.h"
#include "options.h"
#include "report.h"
#include "wire.h"

namespace {

using hmc::tools::ChildProcess;
using hmc::tools::monotonic_seconds;
using hmc::tools::self_exe;

constexpr uint64_t kPingTag = 1;
constexpr uint64_t kPongTag = 2;
constexpr double kGoalMiBPerPeer = 1.0;  // under 64 MiB for 64 peers

const char* kAbout =
    "Resident memory of one hmc context connected to N idle peers. Starts N child processes, "
    "each with its own context connecting to this one, and reads VmRSS from /proc/self/status "
    "before the context, after it, with the N peers connected, and after one 8-byte message "
    "each way per peer. Goal: under 1 MiB per peer (64 MiB for 64 peers) on top of the "
    "context, excluding user buffers.";
const char* kFooter = "exit status: 0 measured (whatever the figure), 1 error, 2 bad arguments";

struct Args {
  int peers = 64;
  int timeout_ms = 30000;
  bool json = false;
  std::string child_addr_hex;  // hidden: run as a child
  long parent_pid = 0;         // hidden
};

void add_options(CLI::App& app, Args* a) {
  app.add_option("--peers", a->peers, "child processes to connect")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  hmc_tools::add_timeout(app, &a->timeout_ms, 1, INT32_MAX,
                         "bound of every wait (all connections, each message, exits)");
  app.add_flag("--json", a->json, "one JSON object on stdout instead of the table");
  // Internal: how the parent starts its children.
  app.add_option("--child", a->child_addr_hex)->group("");
  app.add_option("--parent-pid", a->parent_pid)->check(CLI::Range(1L, long(INT32_MAX)))->group("");
}

// A field of /proc/self/status in kB ("VmRSS"), or -1.
long status_kb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  std::string key = std::string(field) + ":";
  while (std::getline(f, line))
    if (line.compare(0, key.size(), key) == 0)
      return std::strtol(line.c_str() + key.size(), nullptr, 10);
  return -1;
}

int count_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n - 1;  // the directory stream itself
}

size_t wait_req(hmc::Request& r, int timeout_ms, const std::string& what) {
  size_t bytes = 0;
  hmc_status_t s = r.wait_status(timeout_ms, &bytes);
  if (s != HMC_SUCCESS) throw hmc::Error(s, what);
  return bytes;
}

// The child: connect, answer one ping, then wait for the parent to close our stdin.
int run_child(const Args& a) {
  if (!hmc::tools::die_with_parent(a.parent_pid)) return 1;
  std::vector<uint8_t> addr;
  if (!hmc::perf::from_hex(a.child_addr_hex, &addr)) {
    std::fprintf(stderr, "hmc-idle-peers (child): bad --child address\n");
    return 1;
  }
  try {
    hmc::Context ctx;
    hmc::Peer peer = ctx.connect(addr, a.timeout_ms);
    uint64_t v = 0;
    auto r = peer.recv(&v, sizeof v, kPingTag);
    wait_req(r, a.timeout_ms, "waiting for the ping");
    auto s = peer.send(&v, sizeof v, kPongTag);
    wait_req(s, a.timeout_ms, "sending the pong");
    // Told to exit: EOF on stdin. Bounded like every wait (the parent's deadline plus slack).
    pollfd p{0, POLLIN, 0};
    int rc = poll(&p, 1, a.timeout_ms * 2);
    if (rc == 0) {
      std::fprintf(stderr, "hmc-idle-peers (child %d): parent never said to exit\n", getpid());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hmc-idle-peers (child %d): %s\n", getpid(), e.what());
    return 1;
  }
}

double mib(long kb) {
  return static_cast<double>(kb) / 1024.0;
}

int run_parent(const Args& a) {
  signal(SIGPIPE, SIG_IGN);
  long rss_before = status_kb("VmRSS");
  hmc::Context ctx;
  long rss_context = status_kb("VmRSS");
  long vm_context = status_kb("VmSize");
  auto addr = ctx.address();

  // Children read the pipe's read end as stdin; the write end is close-on-exec so that only the
  // parent holds it, and closing it (or dying) tells every child to exit.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe2: ") + strerror(errno));
  struct Fd {  // closes on every way out
    int fd;
    ~Fd() { reset(); }
    void reset() {
      if (fd >= 0) close(fd);
      fd = -1;
    }
  };
  std::vector<ChildProcess> children;
  Fd read_end{fds[0]};
  Fd write_end{fds[1]};  // destroyed before `children`: they are told to exit, then reaped
  std::vector<hmc::Peer> peers;

  double deadline = monotonic_seconds() + a.timeout_ms / 1000.0;
  std::vector<std::string> args = {self_exe(),
                                   "--child",
                                   hmc::perf::to_hex(addr),
                                   "--parent-pid",
                                   std::to_string(getpid()),
                                   "--timeout",
                                   std::to_string(a.timeout_ms)};
  for (int i = 0; i < a.peers; ++i) children.push_back(ChildProcess::spawn(args, read_end.fd));
  read_end.reset();

  while (static_cast<int>(peers.size()) < a.peers) {
    hmc_peer_t p = nullptr;
    // The whole remaining time in one call: it returns as soon as a peer finished connecting.
    int left_ms = static_cast<int>((deadline - monotonic_seconds()) * 1000);
    hmc_status_t s = hmc_accept(ctx.get(), std::max(left_ms, 1), &p);
    if (s == HMC_SUCCESS) {
      peers.emplace_back(p);
      continue;
    }
    if (s != HMC_ERR_TIMEOUT) throw hmc::Error(s, "hmc_accept");
    for (auto& c : children)
      if (c.exited())
        throw std::runtime_error("child " + std::to_string(c.pid()) + " " + c.describe_exit() +
                                 " before all peers connected");
    if (monotonic_seconds() > deadline)
      throw std::runtime_error("only " + std::to_string(peers.size()) + " of " +
                               std::to_string(a.peers) + " peers connected within " +
                               std::to_string(a.timeout_ms) + " ms");
  }
  long rss_idle = status_kb("VmRSS");
  int fds_idle = count_fds();
  long threads_idle = status_kb("Threads");

  // One message each way per peer.
  std::vector<uint64_t> pings(peers.size()), pongs(peers.size());
  std::vector<hmc::Request> reqs;
  for (size_t i = 0; i < peers.size(); ++i) {
    pings[i] = i;
    reqs.push_back(peers[i].recv(&pongs[i], sizeof(uint64_t), kPongTag));
    reqs.push_back(peers[i].send(&pings[i], sizeof(uint64_t), kPingTag));
  }
  for (auto& r : reqs) wait_req(r, a.timeout_ms, "exchanging one message with each peer");
  for (size_t i = 0; i < peers.size(); ++i)
    if (pongs[i] != i)
      throw std::runtime_error("peer " + std::to_string(i) + " answered a wrong value");
  long rss_used = status_kb("VmRSS");
  long hwm = status_kb("VmHWM");
  std::string path = peers.empty() ? "" : peers[0].info().path;

  long vm_used = status_kb("VmSize");
  long shm_used = status_kb("RssShmem");
  write_end.reset();  // tells the children to exit
  int failed = 0;
  for (auto& c : children) {
    double left = deadline - monotonic_seconds();
    int wait_ms = std::max(1000, static_cast<int>(left * 1000));
    if (!c.wait_for(wait_ms) || c.exit_code() != 0) ++failed;
  }
  peers.clear();

  double per_peer_idle = mib(rss_idle - rss_context) / a.peers;
  double per_peer_used = mib(rss_used - rss_context) / a.peers;
  bool pass = per_peer_used < kGoalMiBPerPeer;
  if (a.json) {
    hmc_tools::Json j;
    j["peers"] = a.peers;
    j["path"] = hmc_tools::or_null(path);
    j["rss_before_MiB"] = hmc_tools::json_number(mib(rss_before), 2);
    j["rss_context_MiB"] = hmc_tools::json_number(mib(rss_context), 2);
    j["rss_idle_MiB"] = hmc_tools::json_number(mib(rss_idle), 2);
    j["rss_after_message_MiB"] = hmc_tools::json_number(mib(rss_used), 2);
    j["hwm_MiB"] = hmc_tools::json_number(mib(hwm), 2);
    j["per_peer_idle_MiB"] = std::round(per_peer_idle * 1e4) / 1e4;  // may be negative
    j["per_peer_after_message_MiB"] = std::round(per_peer_used * 1e4) / 1e4;
    j["rss_shmem_MiB"] = hmc_tools::json_number(mib(shm_used), 2);
    j["virtual_growth_MiB"] = std::round(mib(vm_used - vm_context) * 100) / 100;
    j["threads"] = threads_idle;
    j["fds"] = fds_idle;
    j["goal_MiB_per_peer"] = kGoalMiBPerPeer;
    j["pass"] = pass;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("hmc-idle-peers: %d peers, path %s\n", a.peers, path.c_str());
    std::printf("  %-34s %9.2f MiB\n", "rss before the context", mib(rss_before));
    std::printf("  %-34s %9.2f MiB  (+%.2f)\n", "rss with the context", mib(rss_context),
                mib(rss_context - rss_before));
    std::printf("  %-34s %9.2f MiB  (+%.2f total, %.3f per peer)\n", "rss with the peers idle",
                mib(rss_idle), mib(rss_idle - rss_context), per_peer_idle);
    std::printf("  %-34s %9.2f MiB  (+%.2f total, %.3f per peer)\n",
                "rss after one message per peer", mib(rss_used), mib(rss_used - rss_context),
                per_peer_used);
    std::printf("  %-34s %9.2f MiB\n", "peak rss (VmHWM)", mib(hwm));
    std::printf("  %-34s %9.2f MiB  (of the rss after the messages)\n", "shared memory resident",
                mib(shm_used));
    std::printf("  %-34s %9.2f MiB  (mapped, mostly not resident)\n",
                "virtual growth beyond the context", mib(vm_used - vm_context));
    std::printf("  %-34s %9ld\n", "threads with the peers idle", threads_idle);
    std::printf("  %-34s %9d\n", "open fds with the peers idle", fds_idle);
    std::printf("  goal: under %.2f MiB per peer beyond the context: %s\n", kGoalMiBPerPeer,
                pass ? "PASS" : "FAIL");
  }
  if (failed > 0) {
    std::fprintf(stderr, "hmc-idle-peers: %d children did not exit cleanly\n", failed);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app(kAbout, "hmc-idle-peers");
  hmc_tools::add_version(app, "hmc-idle-peers", hmc_version());
  add_options(app, &a);
  app.footer(kFooter);
  if (int rc = hmc_tools::parse(app, argc, argv); rc >= 0) return rc;
  if (!a.child_addr_hex.empty()) return run_child(a);
  try {
    return run_parent(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hmc-idle-peers: error: %s\n", e.what());
    return 1;
  }
}
