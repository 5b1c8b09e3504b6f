// hmc-soak: N worker processes on this host run every kind of hmc traffic at once, at random
// from a seed, every payload checked at its receiver, while the launcher injects faults (a
// worker killed or frozen, its fd or memlock limit cut, the Redis rendezvous restarted); the
// survivors form a new communicator and carry on. Progress once a second on stderr, a JSON
// summary at the end; the exit status says whether every assertion held
// (docs/tools.md#hmc-soak).
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "hmc/hmc.h"
#include "lines.h"
#include "loopback_port.h"
#include "pattern.h"
#include "worker.h"

using nlohmann::json;
using soak::mono_ns;

namespace {

const char* const kFaultKinds[] = {"kill",  "stop",   "fdlimit", "memlock",
                                   "redis", "plugin", "veth",    "netem"};

struct Options {
  int np = 4;
  double duration = 30;
  uint64_t seed = 0;
  uint64_t max_bytes = 64u << 20;
  std::vector<std::string> faults;
  double fault_every = 6;
  int timeout_ms = 2000;
  double epoch_seconds = 3;
  std::vector<std::string> vendors;  // NAME=LIBRARY
  std::string rendezvous = "tcp";
  std::string redis_server = "redis-server";
  std::string json_path;
  double rss_growth_pct = 10;
  double warmup = -1;
  bool quiet = false;
  uint64_t inject_corruption = 0;
  uint64_t plugin_errors = 200000;
  bool netns = false;
};

// Two "hosts" on this one: network namespaces joined by a veth pair, each worker in one of
// them with its own UTS namespace and hostname (hmc tells hosts by hostname and boot id), so
// that workers on different sides talk TCP over the veth, and the veth can be cut.
struct Netns {
  bool up = false;
  std::string why_not;  // when not up
  std::string ns[2], veth[2], addr[2];

  static int sh(const std::string& cmd) {
    int rc = system((cmd + " >/dev/null 2>&1").c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 1;
  }
  bool create() {
    if (geteuid() != 0) {
      why_not = "network namespaces need root";
      return false;
    }
    std::string tag = std::to_string(getpid() % 100000);
    int net = int(getpid() % 200) + 20;
    for (int i = 0; i < 2; ++i) {
      ns[i] = "hmcsoak-" + tag + (i ? "-b" : "-a");
      veth[i] = "hs" + tag + (i ? "b" : "a");
      addr[i] = "10.231." + std::to_string(net) + "." + std::to_string(i + 1);
    }
    if (sh("ip netns add " + ns[0]) != 0) {
      why_not = "ip netns add failed (no iproute2, or no network namespaces here)";
      return false;
    }
    up = true;  // from here on, destroy() removes what was made
    bool ok = sh("ip netns add " + ns[1]) == 0 &&
              sh("ip link add " + veth[0] + " type veth peer name " + veth[1]) == 0;
    for (int i = 0; ok && i < 2; ++i)
      ok = sh("ip link set " + veth[i] + " netns " + ns[i]) == 0 &&
           sh("ip -n " + ns[i] + " addr add " + addr[i] + "/24 dev " + veth[i]) == 0 &&
           sh("ip -n " + ns[i] + " link set lo up") == 0 &&
           sh("ip -n " + ns[i] + " link set " + veth[i] + " up") == 0;
    if (!ok) {
      why_not = "making the veth pair between the namespaces failed";
      destroy();
    }
    return ok;
  }
  void destroy() {
    if (!up) return;
    for (auto& n : ns) sh("ip netns del " + n);  // takes the veth pair with it
    up = false;
  }
  // In a child: move into side i (its network and a UTS namespace of its own).
  bool enter(int i) const {
    int fd = open(("/run/netns/" + ns[i]).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) return false;
    close(fd);
    if (unshare(CLONE_NEWUTS) != 0) return false;
    std::string host = ns[i];
    return sethostname(host.c_str(), host.size()) == 0;
  }
  bool link(bool on) const {
    return sh("ip -n " + ns[0] + " link set " + veth[0] + (on ? " up" : " down")) == 0;
  }
};

volatile sig_atomic_t g_signalled = 0;  // SIGINT or SIGTERM: clean up and go
void on_signal(int sig) {
  g_signalled = sig;
}

double secs(int64_t ns) {
  return double(ns) / 1e9;
}

struct Sample {
  double t;
  long rss_kb;
  int fds;
};

struct WorkerState {
  int id = 0;
  pid_t pid = -1;
  int cmd_fd = -1;
  std::unique_ptr<soak::LineReader> rd;
  bool hello = false, alive = true, stopped = false, killed = false, bye = false;
  bool in_epoch = false, running = false, done = false, injecting = false;
  int64_t spawned_ns = 0;
  std::string device, exit_text;
  json counters = json::object();
  std::vector<Sample> samples;
  int exit_status = -1;
};

struct ErrorSeen {
  int id;
  uint64_t epoch;
  int64_t t_ns;
  std::string status, text;
  bool aborted;
};

struct Fault {
  std::string kind;
  int victim = -1;
  pid_t victim_pid = -1;
  int64_t t_ns = 0, end_ns = 0;  // injected; its effect undone (SIGCONT, limit restored)
  uint64_t epoch = 0;
  std::vector<int> survivors;
  std::string note;
  bool undone = false;
  rlimit saved{};
};

struct EpochState {
  uint64_t number = 0;
  bool active = false;
  std::vector<int> members;
  int64_t start_ns = 0, running_ns = 0, end_ns = 0, deadline_ns = 0, abort_at_ns = 0;
  bool aborted = false, faulted = false, failed = false;
};

class Launcher {
 public:
  explicit Launcher(const Options& o) : o_(o), rng_(o.seed ^ 0xfa17) {}
  int run();

 private:
  void spawn();
  void handle(WorkerState& w, const json& m);
  void reap();
  void sample(double t);
  void progress(double t);
  void manage_epoch(int64_t now);
  void maybe_fault(int64_t now);
  void undo_faults(int64_t now);
  bool start_redis();
  void stop_redis();
  WorkerState* find(int id) {
    for (auto& w : workers_)
      if (w->id == id) return w.get();
    return nullptr;
  }
  json summary(double elapsed, int* failures);
  uint64_t total(const char* field) {
    uint64_t s = 0;
    for (auto& w : workers_) s += w->counters.value(field, uint64_t(0));
    return s;
  }

  Options o_;
  soak::Rng rng_;
  std::vector<std::unique_ptr<WorkerState>> workers_;
  int next_id_ = 0;
  EpochState ep_;
  std::vector<EpochState> epochs_;
  std::vector<ErrorSeen> errors_;
  std::vector<Fault> faults_;
  std::map<std::string, std::string> skipped_;  // fault kind -> why it cannot run here
  std::vector<std::string> kinds_;              // those that can
  int64_t start_ns_ = 0, next_fault_ns_ = 0;
  uint64_t launcher_hangs_ = 0, crashes_ = 0;
  std::vector<std::string> crash_notes_, fatal_notes_;
  pid_t redis_pid_ = -1;
  int redis_port_ = 0;
  bool ending_ = false;
  std::map<int, std::string> addrs_;
  std::vector<std::string> round_;  // the scheduled fault kinds still to come this round
  Netns netns_;
  std::map<int, int> side_;  // worker id -> its namespace (with --netns)
};

void Launcher::spawn() {
  int cmd[2], rep[2];
  if (pipe2(cmd, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) {
    fatal_notes_.push_back(std::string("pipe: ") + strerror(errno));
    return;
  }
  auto w = std::make_unique<WorkerState>();
  w->id = next_id_++;
  // Worker i's device: the i-th of host (none) and the --vendor list, round robin.
  std::string vendor, lib;
  size_t slot = size_t(w->id) % (o_.vendors.size() + 1);
  if (slot > 0) {
    const std::string& v = o_.vendors[slot - 1];
    vendor = v.substr(0, v.find('='));
    lib = v.substr(v.find('=') + 1);
    w->device = vendor + ":0";
  }
  soak::WorkerSetup setup;
  setup.id = w->id;
  setup.cmd_fd = cmd[0];
  setup.rep_fd = rep[1];
  setup.seed = o_.seed;
  setup.max_size = o_.max_bytes;
  setup.timeout_ms = o_.timeout_ms;
  setup.hang_ms = 2 * o_.timeout_ms + 2000;
  setup.device = w->device;
  setup.inject_corruption = o_.inject_corruption;
  // The plugin fault: one worker at a time runs with hoststage's error injection.
  if (std::find(kinds_.begin(), kinds_.end(), "plugin") != kinds_.end()) {
    bool someone = false;
    for (auto& x : workers_) someone = someone || (x->alive && x->injecting);
    w->injecting = setup.injecting = !someone;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    fatal_notes_.push_back(std::string("fork: ") + strerror(errno));
    return;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (netns_.up) {
      if (!netns_.enter(w->id % 2)) _exit(4);
      setenv("HMC_LISTEN_HOST", netns_.addr[w->id % 2].c_str(), 1);
    }
    // Nothing of the launcher's but its two pipe ends (a redis-server's, the other workers').
    for (int fd = 3; fd < 1024; ++fd)
      if (fd != cmd[0] && fd != rep[1]) close(fd);
    setenv("HMC_TIMEOUT_MS", std::to_string(o_.timeout_ms).c_str(), 1);
    if (setup.injecting)
      setenv("HMC_HOSTSTAGE_INJECT_ERRORS", std::to_string(o_.plugin_errors).c_str(), 1);
    else
      unsetenv("HMC_HOSTSTAGE_INJECT_ERRORS");
    if (!getenv("HMC_LOG_LEVEL")) setenv("HMC_LOG_LEVEL", "error", 1);
    if (!o_.vendors.empty()) {
      static const char* kVars[][2] = {{"cuda", "HMC_CUDA_LIBRARY"},
                                       {"hip", "HMC_HIP_LIBRARY"},
                                       {"mlu", "HMC_MLU_LIBRARY"},
                                       {"musa", "HMC_MUSA_LIBRARY"}};
      std::string plugins;
      for (auto& v : kVars) {
        if (vendor == v[0]) {
          setenv(v[1], lib.c_str(), 1);
          plugins = v[0];
        }
      }
      setenv("HMC_DEVICE_PLUGINS", plugins.empty() ? "^cuda,^hip,^mlu,^musa" : plugins.c_str(), 1);
    }
    _exit(soak::worker_main(setup));
  }
  close(cmd[0]);
  close(rep[1]);
  fcntl(rep[0], F_SETFL, fcntl(rep[0], F_GETFL) | O_NONBLOCK);
  w->pid = pid;
  if (netns_.up) side_[w->id] = w->id % 2;
  w->cmd_fd = cmd[1];
  w->rd = std::make_unique<soak::LineReader>(rep[0]);
  w->spawned_ns = mono_ns();
  workers_.push_back(std::move(w));
}

void Launcher::handle(WorkerState& w, const json& m) {
  std::string type = m.value("type", "");
  if (type == "hello") {
    w.hello = true;
    addrs_[w.id] = m.value("addr", "");
  } else if (type == "running") {
    if (m.value("epoch", uint64_t(0)) == ep_.number) w.running = true;
  } else if (type == "error") {
    ErrorSeen e{w.id,
                m.value("epoch", uint64_t(0)),
                m.value("t_ns", int64_t(0)),
                m.value("status", ""),
                m.value("error", ""),
                m.value("aborted", false)};
    errors_.push_back(e);
    if (m.value("injected", false) && ep_.active && e.epoch == ep_.number && !ep_.faulted) {
      // An error the plugin injected: a fault, at the time the victim saw it.
      Fault f;
      f.kind = "plugin";
      f.victim = w.id;
      f.t_ns = f.end_ns = e.t_ns;
      f.epoch = e.epoch;
      f.note = "HMC_HOSTSTAGE_INJECT_ERRORS=" + std::to_string(o_.plugin_errors) + ": " + e.text;
      for (int id : ep_.members)
        if (id != w.id) f.survivors.push_back(id);
      f.undone = true;
      ep_.faulted = true;
      faults_.push_back(f);
    }
    if (ep_.active && e.epoch == ep_.number) {
      ep_.failed = true;
      // The others get a second more than the library's timeout to see their own error.
      if (!ep_.abort_at_ns) ep_.abort_at_ns = mono_ns() + int64_t(o_.timeout_ms + 1000) * 1000000;
    }
  } else if (type == "stats" || type == "epoch_done" || type == "bye") {
    if (m.contains("counters")) w.counters = m["counters"];
    if (type == "epoch_done" && m.value("epoch", uint64_t(0)) == ep_.number) w.done = true;
    if (type == "bye") w.bye = true;
  } else if (type == "fatal") {
    fatal_notes_.push_back("worker " + std::to_string(w.id) + ": " + m.value("error", ""));
  }
}

void Launcher::reap() {
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    if (pid == redis_pid_) {
      redis_pid_ = -1;
      continue;
    }
    for (auto& w : workers_) {
      if (w->pid != pid) continue;
      w->alive = false;
      w->exit_status = status;
      bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0 && w->bye;
      if (WIFSIGNALED(status))
        w->exit_text = std::string("killed by signal ") + strsignal(WTERMSIG(status));
      else
        w->exit_text = "exited with status " + std::to_string(WEXITSTATUS(status));
      if (!w->killed && !clean) {
        ++crashes_;
        crash_notes_.push_back("worker " + std::to_string(w->id) + " (pid " + std::to_string(pid) +
                               "): " + w->exit_text);
        fprintf(stderr, "hmc-soak: worker %d (pid %d) %s\n", w->id, int(pid), w->exit_text.c_str());
      }
      // Keep N workers: a replacement joins the next epoch.
      if (!ending_) spawn();
      break;
    }
  }
}

long read_rss_kb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

int count_fds(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

void Launcher::sample(double t) {
  for (auto& w : workers_) {
    if (!w->alive || !w->hello) continue;
    long rss = read_rss_kb(w->pid);
    int fds = count_fds(w->pid);
    if (rss >= 0) w->samples.push_back({t, rss, fds});
  }
}

void Launcher::progress(double t) {
  if (o_.quiet) return;
  int alive = 0;
  for (auto& w : workers_) alive += w->alive;
  fprintf(stderr,
          "hmc-soak: %5.1fs/%.0fs epoch %llu workers %d posted %llu ended %llu verified %.1f MB "
          "corrupted %llu lost %llu hangs %llu faults %zu\n",
          t, o_.duration, (unsigned long long)ep_.number, alive,
          (unsigned long long)total("posted"), (unsigned long long)total("ended"),
          double(total("bytes_verified")) / 1e6, (unsigned long long)total("corrupted"),
          (unsigned long long)total("lost"), (unsigned long long)(total("hangs") + launcher_hangs_),
          faults_.size());
}

void Launcher::manage_epoch(int64_t now) {
  if (ep_.active) {
    bool all_done = true;
    for (int id : ep_.members) {
      WorkerState* w = find(id);
      if (w && w->alive && !w->done) all_done = false;
    }
    if (all_done) {
      ep_.active = false;
      ep_.end_ns = now;
      // An epoch with the injecting worker that failed with no other fault: an injected error
      // whose first sign was another (a post inside hmc's progress failed: the connection
      // broke), at the epoch's first error.
      int injector = -1;
      for (int id : ep_.members)
        if (WorkerState* w = find(id); w && w->injecting) injector = id;
      const ErrorSeen* first = nullptr;
      for (auto& er : errors_)
        if (er.epoch == ep_.number && !er.aborted && (!first || er.t_ns < first->t_ns)) first = &er;
      if (injector >= 0 && first && !ep_.faulted) {
        Fault f;
        f.kind = "plugin";
        f.victim = injector;
        f.t_ns = f.end_ns = first->t_ns;
        f.epoch = ep_.number;
        f.note = "HMC_HOSTSTAGE_INJECT_ERRORS=" + std::to_string(o_.plugin_errors) + " on worker " +
                 std::to_string(injector) + ", which took part; the epoch's first error: worker " +
                 std::to_string(first->id) + ": " + first->text;
        for (int id : ep_.members)
          if (id != injector) f.survivors.push_back(id);
        f.undone = true;
        ep_.faulted = true;
        // In time order with the others (the per-fault windows end at the next one).
        auto at = std::upper_bound(faults_.begin(), faults_.end(), f.t_ns,
                                   [](int64_t t, const Fault& x) { return t < x.t_ns; });
        faults_.insert(at, f);
      }
      for (int id : ep_.members)
        if (WorkerState* w = find(id)) w->in_epoch = w->running = w->done = false;
      epochs_.push_back(ep_);
      return;
    }
    if (ep_.abort_at_ns && !ep_.aborted && now >= ep_.abort_at_ns) {
      ep_.aborted = true;
      for (int id : ep_.members) {
        WorkerState* w = find(id);
        if (w && w->alive && !w->done)
          soak::write_line(w->cmd_fd, {{"type", "abort"}, {"epoch", ep_.number}});
      }
    }
    if (now >= ep_.deadline_ns) {
      // A worker that never finished its epoch: a hang the launcher saw; it goes.
      for (int id : ep_.members) {
        WorkerState* w = find(id);
        if (w && w->alive && !w->done && !w->stopped) {
          ++launcher_hangs_;
          fprintf(stderr, "hmc-soak: worker %d did not end epoch %llu in time: killed\n", w->id,
                  (unsigned long long)ep_.number);
          w->killed = true;
          kill(w->pid, SIGKILL);
          w->done = true;
        }
      }
    }
    return;
  }
  if (ending_ || now - start_ns_ >= int64_t(o_.duration * 1e9)) return;
  std::vector<int> members;
  for (auto& w : workers_)
    if (w->alive && w->hello && !w->stopped && !w->in_epoch) members.push_back(w->id);
  // Every live worker that finished its hello takes part; wait for the newcomers a moment.
  for (auto& w : workers_)
    if (w->alive && !w->hello && now - w->spawned_ns < 20000000000LL) return;
  if (members.empty()) return;
  ep_ = EpochState{};
  ep_.number = epochs_.size() + 1;
  ep_.active = true;
  ep_.members = members;
  ep_.start_ns = now;
  int64_t hang_ns = int64_t(2 * o_.timeout_ms + 2000) * 1000000;
  ep_.deadline_ns = now + int64_t(o_.epoch_seconds * 1e9) + 6 * hang_ns + 30000000000LL;
  std::string redis_host = netns_.up ? netns_.addr[0] : "127.0.0.1";
  std::string store_host = netns_.up ? netns_.addr[side_[members[0]]] : "127.0.0.1";
  std::string rdv =
      o_.rendezvous == "redis"
          ? "redis://" + redis_host + ":" + std::to_string(redis_port_) + "/soak-" +
                std::to_string(o_.seed) + "-" + std::to_string(ep_.number)
          : "tcp://" + store_host + ":" + std::to_string(hmc_tools::free_loopback_port());
  json cmd = {{"type", "epoch"},
              {"epoch", ep_.number},
              {"seed", soak::mix(o_.seed, ep_.number)},
              {"rendezvous", rdv},
              {"seconds", o_.epoch_seconds}};
  json m = json::array();
  for (int id : members) m.push_back({{"id", id}, {"addr", addrs_[id]}});
  cmd["members"] = m;
  for (size_t r = 0; r < members.size(); ++r) {
    WorkerState* w = find(members[r]);
    cmd["rank"] = int(r);
    w->in_epoch = true;
    w->running = w->done = false;
    soak::write_line(w->cmd_fd, cmd);
  }
}

bool Launcher::start_redis() {
  if (!redis_port_) redis_port_ = hmc_tools::free_loopback_port();
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 1);
    dup2(devnull, 2);
    std::string port = std::to_string(redis_port_);
    std::string bind = "127.0.0.1";
    if (netns_.up) {  // on the first "host", reached over the veth from the second
      if (!netns_.enter(0)) _exit(126);
      bind = netns_.addr[0];
    }
    execlp(o_.redis_server.c_str(), o_.redis_server.c_str(), "--port", port.c_str(), "--bind",
           bind.c_str(), "--protected-mode", "no", "--save", "", "--appendonly", "no",
           (char*)nullptr);
    _exit(127);
  }
  redis_pid_ = pid;
  if (netns_.up) {  // in the namespace: ready once ip netns exec sees it listening (at most 5 s)
    for (int i = 0; i < 50; ++i) {
      if (Netns::sh("ip netns exec " + netns_.ns[0] + " sh -c 'exec 3<>/dev/tcp/" + netns_.addr[0] +
                    "/" + std::to_string(redis_port_) + "' 2>/dev/null") == 0 ||
          Netns::sh("ip netns exec " + netns_.ns[0] +
                    " ss -ltn | grep -q :" + std::to_string(redis_port_)) == 0)
        return true;
      usleep(100000);
    }
    return false;
  }
  // Ready once it accepts connections (at most 5 s).
  for (int i = 0; i < 100; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(redis_port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (ok) return true;
    usleep(50000);
  }
  return false;
}

void Launcher::stop_redis() {
  if (redis_pid_ <= 0) return;
  kill(redis_pid_, SIGKILL);
  waitpid(redis_pid_, nullptr, 0);
  redis_pid_ = -1;
}

void Launcher::undo_faults(int64_t now) {
  for (auto& f : faults_) {
    if (f.undone || now < f.end_ns) continue;
    f.undone = true;
    WorkerState* w = find(f.victim);
    if (f.kind == "stop") {
      if (w && w->alive) kill(w->pid, SIGCONT);
      if (w) w->stopped = false;
    } else if (f.kind == "fdlimit" || f.kind == "memlock") {
      if (w && w->alive)
        prlimit(w->pid, f.kind == "fdlimit" ? RLIMIT_NOFILE : RLIMIT_MEMLOCK, &f.saved, nullptr);
    } else if (f.kind == "veth") {
      if (!netns_.link(true)) fatal_notes_.push_back("the veth did not come up again");
    } else if (f.kind == "redis") {
      if (!start_redis()) fatal_notes_.push_back("redis-server did not start again");
    }
  }
}

void Launcher::maybe_fault(int64_t now) {
  if (kinds_.empty() || ending_ || now < next_fault_ns_ || !ep_.active || ep_.faulted) return;
  if (now - start_ns_ > int64_t((o_.duration - 1) * 1e9)) return;
  // Only while every member runs the epoch's traffic, a moment after it began.
  for (int id : ep_.members) {
    WorkerState* w = find(id);
    if (!w || !w->alive || !w->running) return;
  }
  if (!ep_.running_ns) ep_.running_ns = now;
  if (now - ep_.running_ns < 300000000) return;
  if (ep_.failed) return;
  Fault f;
  std::vector<std::string> scheduled;
  for (auto& k : kinds_)
    if (k != "plugin") scheduled.push_back(k);
  if (scheduled.empty()) return;
  // Each kind in turn, in an order shuffled from the seed every round: every kind comes.
  if (round_.empty()) {
    round_ = scheduled;
    for (size_t i = round_.size(); i > 1; --i) std::swap(round_[i - 1], round_[rng_.below(i)]);
  }
  f.kind = round_.back();
  round_.pop_back();
  f.t_ns = mono_ns();
  f.end_ns = f.t_ns;
  f.epoch = ep_.number;
  f.victim = ep_.members[size_t(rng_.below(ep_.members.size()))];
  WorkerState* v = find(f.victim);
  f.victim_pid = v->pid;
  int64_t hold = int64_t(o_.epoch_seconds * 1e9) + int64_t(o_.timeout_ms) * 2000000;
  if (f.kind == "kill") {
    v->killed = true;
    kill(v->pid, SIGKILL);
  } else if (f.kind == "stop") {
    v->stopped = true;
    kill(v->pid, SIGSTOP);
    f.end_ns = f.t_ns + int64_t(o_.timeout_ms + 1500) * 1000000;
  } else if (f.kind == "fdlimit") {
    // Room for no new descriptor: its next connection, shared-memory segment or accept fails.
    prlimit(v->pid, RLIMIT_NOFILE, nullptr, &f.saved);
    int open_now = count_fds(v->pid);
    rlimit lim = f.saved;
    lim.rlim_cur = rlim_t(std::max(open_now, 3));
    if (prlimit(v->pid, RLIMIT_NOFILE, &lim, nullptr) != 0)
      f.note = std::string("prlimit: ") + strerror(errno);
    else
      f.note = "RLIMIT_NOFILE " + std::to_string(open_now) + " (descriptors open then)";
    f.end_ns = f.t_ns + hold;
  } else if (f.kind == "memlock") {
    prlimit(v->pid, RLIMIT_MEMLOCK, nullptr, &f.saved);
    rlimit lim = f.saved;
    lim.rlim_cur = 0;
    if (prlimit(v->pid, RLIMIT_MEMLOCK, &lim, nullptr) != 0)
      f.note = std::string("prlimit: ") + strerror(errno);
    else
      f.note = "RLIMIT_MEMLOCK 0";
    f.end_ns = f.t_ns + hold;
  } else if (f.kind == "veth") {
    f.victim = -1;  // no worker: the link between the two namespaces
    f.note = netns_.link(false) ? "veth " + netns_.veth[0] + " down" : "ip link set down failed";
    f.end_ns = f.t_ns + int64_t(o_.timeout_ms + 1500) * 1000000;
  } else if (f.kind == "redis") {
    f.victim = -1;  // no worker: the rendezvous server
    stop_redis();
    // Down across the next communicator's creation, which must fail, then the one after works.
    f.end_ns = f.t_ns + int64_t(o_.epoch_seconds * 1e9) + 1000000000;
    f.note = "redis-server killed (SIGKILL), restarted on the same port " +
             std::to_string(o_.epoch_seconds + 1) + " s later";
  }
  for (int id : ep_.members)
    if (id != f.victim) f.survivors.push_back(id);
  ep_.faulted = true;
  if (!o_.quiet)
    fprintf(stderr, "hmc-soak: fault %s on worker %d in epoch %llu\n", f.kind.c_str(), f.victim,
            (unsigned long long)ep_.number);
  faults_.push_back(f);
  double gap = o_.fault_every * (0.5 + double(rng_.below(1000)) / 1000.0);
  next_fault_ns_ = now + int64_t(gap * 1e9);
}

int Launcher::run() {
  if (o_.netns && !netns_.create())
    fprintf(stderr, "hmc-soak: --netns: %s; every worker runs in this network namespace\n",
            netns_.why_not.c_str());
  if (netns_.up)
    fprintf(stderr, "hmc-soak: workers on two namespaces, %s (%s) and %s (%s), joined by a veth\n",
            netns_.ns[0].c_str(), netns_.addr[0].c_str(), netns_.ns[1].c_str(),
            netns_.addr[1].c_str());
  // Which of the asked faults this host can do; the others are skipped, saying why.
  for (const auto& k : o_.faults) {
    if (k == "netem") {
      skipped_[k] =
          system("modprobe -n -q sch_netem 2>/dev/null") == 0
              ? "not done by hmc-soak yet (needs a link between network namespaces; see veth)"
              : "tc netem is not in this host's kernel (modprobe -n sch_netem fails)";
    } else if (k == "veth" && !netns_.up) {
      skipped_[k] = o_.netns ? "no network namespaces: " + netns_.why_not
                             : "needs --netns (workers on two namespaces joined by a veth)";
    } else if (k == "redis" && o_.rendezvous != "redis") {
      skipped_[k] = "needs --rendezvous redis";
    } else {
      kinds_.push_back(k);
    }
  }
  for (auto& s : skipped_)
    fprintf(stderr, "hmc-soak: fault %s skipped: %s\n", s.first.c_str(), s.second.c_str());
  if (o_.rendezvous == "redis" && !start_redis()) {
    fprintf(stderr, "hmc-soak: %s did not start (--redis-server)\n", o_.redis_server.c_str());
    return 2;
  }
  fprintf(stderr,
          "hmc-soak: seed %llu (--seed %llu replays it), %d workers, %.0f s, sizes 1 B .. %zu B\n",
          (unsigned long long)o_.seed, (unsigned long long)o_.seed, o_.np, o_.duration,
          o_.max_bytes);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  start_ns_ = mono_ns();
  next_fault_ns_ = start_ns_ + int64_t(std::min(o_.fault_every, o_.duration / 4) * 1e9);
  for (int i = 0; i < o_.np; ++i) spawn();
  int64_t last_tick = start_ns_;
  int64_t end_ns = start_ns_ + int64_t(o_.duration * 1e9);
  int64_t quit_deadline = 0;
  for (;;) {
    std::vector<pollfd> pf;
    std::vector<WorkerState*> who;
    for (auto& w : workers_) {
      if (w->rd && w->rd->fd() >= 0) {
        pf.push_back({w->rd->fd(), POLLIN, 0});
        who.push_back(w.get());
      }
    }
    poll(pf.data(), pf.size(), 50);
    for (size_t i = 0; i < pf.size(); ++i) {
      if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      WorkerState* w = who[i];
      bool open = w->rd->pump();
      json m;
      while (w->rd->take(&m)) handle(*w, m);
      if (!open) {
        close(w->rd->fd());
        w->rd.reset();
        close(w->cmd_fd);
        w->cmd_fd = -1;
      }
    }
    reap();
    if (g_signalled) {
      // Interrupted: the workers, the Redis server and the namespaces go; no summary.
      for (auto& w : workers_)
        if (w->alive) kill(w->pid, SIGKILL);
      stop_redis();
      netns_.destroy();
      fprintf(stderr, "hmc-soak: interrupted by %s (seed %llu)\n", strsignal(g_signalled),
              (unsigned long long)o_.seed);
      return 130;
    }
    int64_t now = mono_ns();
    undo_faults(now);
    maybe_fault(now);
    manage_epoch(now);
    if (now - last_tick >= 1000000000) {
      last_tick = now;
      sample(secs(now - start_ns_));
      progress(secs(now - start_ns_));
    }
    if (!ending_ && now >= end_ns && !ep_.active) {
      bool pending = false;
      for (auto& f : faults_) pending = pending || !f.undone;
      if (!pending) {
        ending_ = true;
        quit_deadline = now + 20000000000LL;
        for (auto& w : workers_)
          if (w->alive && w->cmd_fd >= 0) soak::write_line(w->cmd_fd, {{"type", "quit"}});
      }
    }
    if (ending_) {
      bool any = false;
      for (auto& w : workers_) any = any || w->alive;
      if (!any) break;
      if (now >= quit_deadline) {
        for (auto& w : workers_) {
          if (!w->alive) continue;
          ++launcher_hangs_;
          fprintf(stderr, "hmc-soak: worker %d did not quit in 20 s: killed\n", w->id);
          w->killed = true;
          kill(w->pid, SIGKILL);
        }
        quit_deadline = now + 5000000000LL;
      }
    }
  }
  stop_redis();
  netns_.destroy();
  int failures = 0;
  json j = summary(secs(mono_ns() - start_ns_), &failures);
  std::string text = j.dump(2) + "\n";
  if (o_.json_path.empty() || o_.json_path == "-") {
    fputs(text.c_str(), stdout);
  } else {
    std::ofstream f(o_.json_path);
    f << text;
    if (!f) {
      fprintf(stderr, "hmc-soak: cannot write %s\n", o_.json_path.c_str());
      return 2;
    }
  }
  fprintf(stderr, "hmc-soak: %s (seed %llu)\n", failures ? "FAILED" : "passed",
          (unsigned long long)o_.seed);
  return failures ? 1 : 0;
}

json Launcher::summary(double elapsed, int* failures) {
  json j;
  j["seed"] = o_.seed;
  j["duration_s"] = elapsed;
  j["workers"] = o_.np;
  j["max_size"] = o_.max_bytes;
  j["timeout_ms"] = o_.timeout_ms;
  j["hang_bound_ms"] = 2 * o_.timeout_ms + 2000;
  j["first_error_bound_ms"] = o_.timeout_ms + 1000;
  uint64_t posted = 0, ended = 0, survivors_posted = 0, survivors_ended = 0;
  json ops = json::object();
  for (auto& w : workers_) {
    posted += w->counters.value("posted", uint64_t(0));
    ended += w->counters.value("ended", uint64_t(0));
    if (w->bye) {
      survivors_posted += w->counters.value("posted", uint64_t(0));
      survivors_ended += w->counters.value("ended", uint64_t(0));
    }
    if (w->counters.contains("ops"))
      for (auto& [k, v] : w->counters["ops"].items())
        ops[k] = ops.value(k, uint64_t(0)) + v.get<uint64_t>();
  }
  j["requests_posted"] = posted;
  j["requests_ended"] = ended;
  j["requests_not_ended"] = survivors_posted - survivors_ended + total("not_ended");
  j["bytes_moved"] = total("bytes_moved");
  j["bytes_verified"] = total("bytes_verified");
  j["payloads_verified"] = total("verified");
  j["corrupted"] = total("corrupted");
  j["lost"] = total("lost");
  j["hangs"] = total("hangs") + launcher_hangs_;
  j["errors"] = total("errors");
  j["stale_notifications"] = total("stale_notifications");
  j["comms_created"] = total("comms_created");
  j["comms_split"] = total("comms_split");
  j["steps"] = ops;
  j["crashes"] = crashes_;
  j["crash_notes"] = crash_notes_;
  j["fatal"] = fatal_notes_;
  uint64_t ok_epochs = 0, unexplained = 0;
  json unexplained_list = json::array();
  for (auto& e : epochs_) {
    bool failed = false;
    std::string why;
    for (auto& er : errors_)
      if (er.epoch == e.number && !er.aborted) {
        failed = true;
        if (why.empty()) why = "worker " + std::to_string(er.id) + ": " + er.text;
      }
    if (!failed && !e.failed) {
      ++ok_epochs;
      continue;
    }
    // Explained by a fault injected in it, or one whose effect lasted into it.
    bool explained = false;
    int64_t hang_ns = int64_t(2 * o_.timeout_ms + 2000) * 1000000;
    for (auto& f : faults_)
      if (f.t_ns <= e.end_ns && f.end_ns + hang_ns >= e.start_ns) explained = true;
    if (!explained) {
      ++unexplained;
      unexplained_list.push_back({{"epoch", e.number}, {"error", why}});
    }
  }
  j["epochs"] = epochs_.size();
  j["epochs_ok"] = ok_epochs;
  j["epochs_failed_unexplained"] = unexplained;
  j["unexplained"] = unexplained_list;
  // Per fault: each survivor's (and the victim's) first error after it, and how long after: in
  // the fault's epoch, or for the faults whose effect lasts (a limit, the Redis server) in an
  // epoch that began before the effect was undone.
  uint64_t over_bound = 0;
  json fl = json::array();
  std::map<std::string, uint64_t> by_kind;
  auto epoch_start = [&](uint64_t n) -> int64_t {
    for (auto& e : epochs_)
      if (e.number == n) return e.start_ns;
    return 0;
  };
  for (size_t fi = 0; fi < faults_.size(); ++fi) {
    const Fault& f = faults_[fi];
    ++by_kind[f.kind];
    // Errors after the next fault are that one's.
    int64_t next_t = fi + 1 < faults_.size() ? faults_[fi + 1].t_ns : INT64_MAX;
    auto first_of = [&](int id) -> const ErrorSeen* {
      const ErrorSeen* first = nullptr;
      for (auto& er : errors_) {
        if (er.id != id || er.t_ns < f.t_ns - 1000000000LL || er.t_ns >= next_t) continue;
        bool in = er.epoch == f.epoch ||
                  (er.epoch > f.epoch && epoch_start(er.epoch) <= f.end_ns && f.end_ns > f.t_ns);
        if (in && (!first || er.t_ns < first->t_ns)) first = &er;
      }
      return first;
    };
    auto describe = [&](int id, bool survivor) {
      json s = {{"id", id}};
      const ErrorSeen* first = first_of(id);
      if (!first) {
        s["first_error_ms"] = nullptr;
        return s;
      }
      double ms = double(first->t_ns - f.t_ns) / 1e6;
      s["first_error_ms"] = ms;
      s["epoch"] = first->epoch;
      s["status"] = first->status;
      s["via_abort"] = first->aborted;
      s["error"] = first->text;
      // Secondary: the error names another worker's process than the victim's (that survivor
      // gave up first and closed its connections), not the victim's loss itself.
      bool secondary = false;
      if (f.victim_pid > 0 && first->text.find("pid ") != std::string::npos) {
        std::string v = "pid " + std::to_string(f.victim_pid);
        size_t at = first->text.find(v);
        secondary = at == std::string::npos ||
                    std::isdigit(static_cast<unsigned char>(first->text[at + v.size()]));
      }
      s["secondary"] = secondary;
      bool must = survivor && (f.kind == "kill" || f.kind == "stop");
      if (must && !first->aborted && !secondary && ms > o_.timeout_ms + 1000) {
        ++over_bound;
        s["over_bound"] = true;
      }
      return s;
    };
    json sv = json::array();
    for (int id : f.survivors) sv.push_back(describe(id, true));
    json one = {{"kind", f.kind},
                {"victim", f.victim},
                {"epoch", f.epoch},
                {"at_s", secs(f.t_ns - start_ns_)},
                {"effect_s", secs(f.end_ns - f.t_ns)},
                {"note", f.note},
                {"survivors", sv}};
    if (f.victim >= 0 && f.kind != "kill") one["victim_error"] = describe(f.victim, false);
    fl.push_back(one);
  }
  j["faults"] = fl;
  json seen = json::array();
  for (auto& er : errors_) {
    if (seen.size() >= 500) break;
    seen.push_back({{"id", er.id},
                    {"epoch", er.epoch},
                    {"at_s", secs(er.t_ns - start_ns_)},
                    {"status", er.status},
                    {"via_abort", er.aborted},
                    {"error", er.text}});
  }
  j["errors_seen"] = seen;  // each worker's first error of each epoch (the first 500)
  j["faults_by_kind"] = by_kind;
  j["faults_skipped"] = skipped_;
  j["first_error_over_bound"] = over_bound;
  // Resident memory and descriptors of each worker, sampled once a second.
  double warm = o_.warmup >= 0 ? o_.warmup : std::min(60.0, o_.duration / 3);
  uint64_t rss_over = 0;
  json procs = json::array();
  for (auto& w : workers_) {
    if (w->samples.empty()) continue;
    json p = {{"id", w->id},
              {"pid", w->pid},
              {"device", w->device},
              {"exit", w->exit_text},
              {"samples", w->samples.size()}};
    // Levels, not single samples (the heap breathes with the sizes in flight): the median of
    // the 10 samples after the warm-up, and of the last 10.
    auto median = [](std::vector<long> v) {
      std::sort(v.begin(), v.end());
      return v.empty() ? -1L : v[v.size() / 2];
    };
    std::vector<long> warm_win, end_win;
    long rss_max = 0;
    int fd_min = 1 << 30, fd_max = 0, fd_warm = -1;
    size_t first_warm = w->samples.size();
    for (size_t i = 0; i < w->samples.size(); ++i) {
      const Sample& s = w->samples[i];
      fd_min = std::min(fd_min, s.fds);
      fd_max = std::max(fd_max, s.fds);
      double age = s.t - secs(w->spawned_ns - start_ns_);
      if (age >= warm && first_warm == w->samples.size()) {
        first_warm = i;
        fd_warm = s.fds;
      }
      if (first_warm < w->samples.size()) {
        rss_max = std::max(rss_max, s.rss_kb);
        if (warm_win.size() < 10) warm_win.push_back(s.rss_kb);
      }
    }
    for (size_t i = w->samples.size() >= 10 ? w->samples.size() - 10 : 0; i < w->samples.size();
         ++i)
      if (i >= first_warm) end_win.push_back(w->samples[i].rss_kb);
    long rss_warm = median(warm_win), rss_end = median(end_win);
    json series = json::array();  // one sample in ten: how it went over the run
    for (size_t i = 0; i < w->samples.size(); i += 10) series.push_back(w->samples[i].rss_kb);
    p["rss_kb_every_10s"] = series;
    p["rss_kb_first"] = w->samples.front().rss_kb;
    p["rss_kb_last"] = w->samples.back().rss_kb;
    p["fds_min"] = fd_min;
    p["fds_max"] = fd_max;
    p["fds_last"] = w->samples.back().fds;
    // Long-lived: 10 samples after its warm-up and 10 more after those.
    bool long_lived = w->samples.size() >= first_warm + 20;
    p["long_lived"] = long_lived;
    if (rss_warm > 0) {
      p["rss_kb_warm"] = rss_warm;
      p["rss_kb_end"] = rss_end;
      p["rss_kb_max_after_warm"] = rss_max;
      p["fds_warm"] = fd_warm;
      double growth = 100.0 * double(rss_end - rss_warm) / double(rss_warm);
      p["rss_growth_pct"] = growth;
      if (long_lived && growth > o_.rss_growth_pct) {
        ++rss_over;
        p["rss_over_bound"] = true;
      }
    }
    procs.push_back(p);
  }
  j["warmup_s"] = warm;
  j["rss_growth_bound_pct"] = o_.rss_growth_pct;
  j["rss_over_bound"] = rss_over;
  j["processes"] = procs;
  std::vector<std::string> why;
  if (j["corrupted"].get<uint64_t>()) why.push_back("corrupted payloads");
  if (j["lost"].get<uint64_t>()) why.push_back("lost requests");
  if (j["hangs"].get<uint64_t>()) why.push_back("hangs");
  if (j["requests_not_ended"].get<uint64_t>()) why.push_back("requests that never ended");
  if (crashes_) why.push_back("workers that died on their own");
  if (!fatal_notes_.empty()) why.push_back("fatal errors");
  if (unexplained) why.push_back("epochs that failed with no fault");
  if (over_bound) why.push_back("fault-to-error times over the bound");
  if (rss_over) why.push_back("resident memory growth over the bound");
  if (!ok_epochs) why.push_back("no epoch ended without error");
  j["failures"] = why;
  j["passed"] = why.empty();
  *failures = int(why.size());
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "hmc-soak: N worker processes run every kind of hmc traffic at once (tagged send/recv, "
      "put/get with and without notifications, transfer lists, every collective on "
      "communicators created, split and destroyed), every payload checked with XXH3 at its "
      "receiver, while faults are injected; the survivors form a new communicator and carry on. "
      "Progress once a second on stderr, a JSON summary on stdout (or --json FILE); exit status "
      "0 when nothing was corrupted, lost or hung and every bound held, 1 otherwise, 2 for bad "
      "options.",
      "hmc-soak"};
  hmc_tools::add_version(app, "hmc-soak", hmc_version());
  app.add_option("--np", o.np, "worker processes (default 4)")->check(CLI::Range(1, 64));
  app.add_option("--duration", o.duration, "seconds of traffic (default 30)")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--seed", o.seed, "the run's seed (default: from the clock; printed)");
  app.add_option("--max-size", o.max_bytes,
                 "largest payload, 64 bytes or more; K, M, G suffixes (default 64M)")
      ->transform(hmc_tools::size_at_least(64));
  app.add_option("--faults", o.faults,
                 "faults to inject, comma-separated: kill, stop, fdlimit, memlock, redis, plugin, "
                 "veth (netem: skipped, saying why)")
      ->delimiter(',')
      ->check(
          CLI::IsMember(std::vector<std::string>(std::begin(kFaultKinds), std::end(kFaultKinds))));
  app.add_option("--fault-every", o.fault_every,
                 "mean seconds between faults, at random from the seed (default 6)")
      ->check(CLI::Range(0.5, 3600.0));
  hmc_tools::add_timeout(app, &o.timeout_ms, 200, 600000,
                         "the workers' bound of a single wait (their HMC_TIMEOUT_MS)");
  app.add_option("--epoch-seconds", o.epoch_seconds,
                 "seconds of one communicator's traffic before it is destroyed and another made "
                 "(default 3)")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--vendor", o.vendors,
                 "NAME=LIBRARY: an emulated or real device runtime (cuda, hip, mlu, musa); worker "
                 "i uses host memory and the device of the i-th of host and these, round robin")
      ->check([](const std::string& v) -> std::string {
        std::string name = v.substr(0, v.find('='));
        if (v.find('=') == std::string::npos || v.size() == name.size() + 1)
          return "expected NAME=LIBRARY";
        if (name != "cuda" && name != "hip" && name != "mlu" && name != "musa")
          return "unknown vendor " + name + " (cuda, hip, mlu, musa)";
        return "";
      });
  app.add_option("--rendezvous", o.rendezvous,
                 "tcp (the TCP store of rank 0, default) or redis (a redis-server it starts)")
      ->check(CLI::IsMember({"tcp", "redis"}));
  app.add_option("--redis-server", o.redis_server, "the redis-server to run (default from PATH)");
  app.add_option("--json", o.json_path, "write the summary there instead of stdout");
  app.add_option(
      "--rss-growth", o.rss_growth_pct,
      "percent a long-lived worker's resident memory may grow after warm-up (default 10)");
  app.add_option("--warmup", o.warmup, "seconds of warm-up (default: duration / 3, at most 60)");
  app.add_flag("-q,--quiet", o.quiet, "no progress lines");
  app.add_flag("--netns", o.netns,
               "workers on two network namespaces (each with its own hostname) joined by a veth "
               "pair, made and removed by hmc-soak (needs root and ip); implied by the veth fault");
  app.add_option("--plugin-errors", o.plugin_errors,
                 "the plugin fault: one worker at a time runs with HMC_HOSTSTAGE_INJECT_ERRORS=N "
                 "(one in N of its posted transfers fails; default 200000)")
      ->check(CLI::Range(uint64_t(1), uint64_t(1000000000)));
  app.add_option("--inject-corruption", o.inject_corruption,
                 "flip a byte of every N-th payload before it is checked: a test of hmc-soak "
                 "itself, which must then fail");
  if (int rc = hmc_tools::parse(app, argc, argv); rc >= 0) return rc;
  for (auto& f : o.faults) {
    if (f == "redis") o.rendezvous = "redis";
    if (f == "veth") o.netns = true;
  }
  if (!o.seed) o.seed = uint64_t(mono_ns()) ^ (uint64_t(getpid()) << 32);
  Launcher l(o);
  return l.run();
}
