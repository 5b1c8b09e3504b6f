// Driver for the net plugin tests (tests/unit/net) and the hoststage benchmark: loads a net
// plugin from the build tree as the core's loader does (dlopen, then the hmc_net_plugin_v2
// entry), provides host services backed by a std::map, and runs the two sides of a connection in
// two processes (fork) that coordinate over a socketpair. No gtest dependency: helpers return
// statuses, strings and booleans.
#pragma once

#include <dirent.h>
#include <dlfcn.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "hmc/plugin/net.h"

namespace net_test {

using Cfg = std::map<std::string, std::string>;

inline uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t deadline_after(double timeout_s) {
  return mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
}

// ---------------------------------------------------------------------------------------------
// The plugin

// Where the build puts net plugin `name` ("hoststage" -> .../libhmc-net-hoststage.so).
inline std::string plugin_path(const std::string& name) {
  return std::string(HMC_TEST_PLUGIN_DIR) + "/libhmc-net-" + name + ".so";
}

// Plugins whose dependencies were not found at configure time are not built.
inline bool plugin_built(const std::string& name) {
  return ::access(plugin_path(name).c_str(), F_OK) == 0;
}

// The table of plugin `name`, loaded once per process and never unloaded (dlopen before fork is
// fine: it starts no thread). nullptr, with the reason in *err, when it does not load.
inline const hmc_net_plugin_v2_t* load_plugin(const std::string& name, std::string* err = nullptr) {
  struct Loaded {
    const hmc_net_plugin_v2_t* table = nullptr;
    std::string error;
  };
  static std::map<std::string, Loaded> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    Loaded l;
    std::string path = plugin_path(name);
    void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (dl == nullptr) {
      l.error = std::string("dlopen: ") + dlerror();
    } else {
      auto entry = reinterpret_cast<hmc_net_plugin_v2_entry_t>(dlsym(dl, HMC_NET_PLUGIN_ENTRY_V2));
      if (entry == nullptr)
        l.error = path + ": no " HMC_NET_PLUGIN_ENTRY_V2 " symbol";
      else
        l.table = entry();
    }
    it = cache.emplace(name, l).first;
  }
  if (err != nullptr) *err = it->second.error;
  return it->second.table;
}

// ---------------------------------------------------------------------------------------------
// Host services: configuration from a map, log to stderr at or below print_level, every message
// kept for the test to search.

// Tests r once: true when it has ended, its status then in *st and its length in *bytes (unless
// null).
inline bool request_ended(const hmc_net_plugin_v2_t* t, hmc_net_request_t* r, size_t* bytes,
                          hmc_plugin_status_t* st) {
  int done = 0;
  size_t n = 0;
  *st = t->test(r, &done, &n);
  if (done != 0 && bytes != nullptr) *bytes = n;
  return done != 0;
}

class Host {
 public:
  explicit Host(Cfg cfg, uint32_t timeout_ms = 5000, int print_level = HMC_LOG_WARN)
      : cfg_(std::move(cfg)), print_level_(print_level) {
    svc_.hdr = HMC_ABI_HEADER_INIT(hmc_host_services_t);
    svc_.core_abi_min = HMC_NET_ABI_VERSION;
    svc_.core_abi_max = HMC_NET_ABI_VERSION;
    svc_.host_ctx = this;
    svc_.log = &Host::log_cb;
    svc_.log_enabled = [](void*, int) { return 1; };
    svc_.config_get = &Host::config_cb;
    svc_.now_ns = [](void*) { return mono_ns(); };
    svc_.timeout_ms = timeout_ms;
  }
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  const hmc_host_services_t* services() const { return &svc_; }
  std::vector<std::string> logs() const {
    std::lock_guard<std::mutex> g(mu_);
    return logs_;
  }
  bool logged(const std::string& needle) const {
    for (const std::string& l : logs())
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
  std::string all_logs() const {
    std::string s;
    for (const std::string& l : logs()) s += l + "\n";
    return s;
  }

 private:
  static void log_cb(void* h, int level, const char* msg) {
    auto* self = static_cast<Host*>(h);
    if (level <= self->print_level_)
      std::fprintf(stderr, "[pid %d L%d] %s\n", getpid(), level, msg);
    std::lock_guard<std::mutex> g(self->mu_);
    self->logs_.push_back(msg);
  }
  static const char* config_cb(void* h, const char* name) {
    auto* self = static_cast<Host*>(h);
    auto it = self->cfg_.find(name);
    return it == self->cfg_.end() ? nullptr : it->second.c_str();
  }

  Cfg cfg_;
  int print_level_;
  hmc_host_services_t svc_{};
  mutable std::mutex mu_;
  std::vector<std::string> logs_;
};

// ---------------------------------------------------------------------------------------------
// One side of a connection: a context, an endpoint on device dev, and the control socket to the
// other side.

class Side {
 public:
  Side(const hmc_net_plugin_v2_t* t, Cfg cfg, int dev, int ctl, uint32_t timeout_ms = 5000)
      : host_(std::move(cfg), timeout_ms), dev_(dev), ctl_(ctl), t_(t) {}
  ~Side() { close(); }
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;

  const hmc_net_plugin_v2_t* t() const { return t_; }
  hmc_net_ctx_t* ctx() const { return ctx_; }
  hmc_net_ep_t* ep() const { return ep_; }
  int dev() const { return dev_; }
  Host& host() { return host_; }
  int ctl() const { return ctl_; }
  // What init answered (SUCCESS before init ran).
  hmc_plugin_status_t init_status() const { return init_status_; }

  std::string init() {
    if (t_ == nullptr) return "plugin not loaded";
    init_status_ = t_->init(host_.services(), &ctx_);
    return init_status_ == HMC_PLUGIN_SUCCESS ? "" : "init failed: " + std::to_string(init_status_);
  }

  // Listener side: init, listen, send the handle over ctl, accept. Connector side: init, read
  // the handle, connect, wait for ep_ready. Returns "" or what went wrong.
  std::string setup(bool listener, double timeout_s = 10) {
    if (ctx_ == nullptr) {
      std::string e = init();
      if (!e.empty()) return e;
    }
    uint64_t deadline = deadline_after(timeout_s);
    hmc_plugin_status_t st;
    if (listener) {
      uint8_t handle[HMC_NET_HANDLE_MAX];
      size_t len = 0;
      st = t_->listen(ctx_, dev_, handle, &len, &listener_);
      if (st != HMC_PLUGIN_SUCCESS) return "listen failed: " + std::to_string(st);
      if (!ctl_send(handle, len)) return "ctl send failed";
      for (;;) {
        st = t_->accept(listener_, &ep_);
        if (st == HMC_PLUGIN_SUCCESS) break;
        if (st != HMC_PLUGIN_IN_PROGRESS) return "accept failed: " + std::to_string(st);
        if (mono_ns() > deadline) return "accept timed out";
      }
      t_->close_listener(listener_);
      listener_ = nullptr;
    } else {
      std::vector<uint8_t> handle;
      if (!ctl_recv(&handle, timeout_s)) return "ctl recv of the handle failed";
      st = t_->connect(ctx_, dev_, handle.data(), handle.size(), &ep_);
      if (st != HMC_PLUGIN_SUCCESS) return "connect failed: " + std::to_string(st);
    }
    for (;;) {
      st = t_->ep_ready(ep_);
      if (st == HMC_PLUGIN_SUCCESS) return "";
      if (st != HMC_PLUGIN_IN_PROGRESS) return "ep_ready failed: " + std::to_string(st);
      if (mono_ns() > deadline) return "ep_ready timed out";
    }
  }

  // Closes the endpoint now (pending requests are released by the plugin, never tested again).
  void close_ep() {
    if (ep_ != nullptr) t_->close_ep(ep_);
    ep_ = nullptr;
  }

  void close() {
    if (t_ == nullptr) return;
    if (ep_ != nullptr) t_->close_ep(ep_);
    if (listener_ != nullptr) t_->close_listener(listener_);
    if (ctx_ != nullptr) t_->finalize(ctx_);
    ep_ = nullptr;
    listener_ = nullptr;
    ctx_ = nullptr;
  }

  hmc_net_request_t* isend(const void* buf, size_t len, uint64_t tag) {
    hmc_net_request_t* r = nullptr;
    last_ = t_->isend(ep_, buf, len, nullptr, tag, &r);
    return last_ == HMC_PLUGIN_SUCCESS ? r : nullptr;
  }
  hmc_net_request_t* irecv(void* buf, size_t len, uint64_t tag) {
    hmc_net_request_t* r = nullptr;
    last_ = t_->irecv(ep_, buf, len, nullptr, tag, &r);
    return last_ == HMC_PLUGIN_SUCCESS ? r : nullptr;
  }
  // What the last isend/irecv answered.
  hmc_plugin_status_t last_post() const { return last_; }

  // Waiting style: spin on test/progress only (benchmarks), or spin a little and then sleep on
  // wait_fd after arm, as the core does (tests: this also exercises arm/wait_fd everywhere and
  // leaves the CPU to the peer process on a busy machine).
  void set_spin_only(bool on) { spin_only_ = on; }

  // Called in wait loops: after enough fruitless spins, arms and sleeps on wait_fd (and
  // extra_fd, when >= 0) for at most 20 ms. A lost wake-up therefore costs time, not a hang; the
  // wake-up tests check them strictly. Without arm/wait_fd it yields.
  void idle(int* spins, int extra_fd = -1) {
    if (spin_only_ || ++*spins < 200) return;
    *spins = 0;
    int fd = -1;
    if (t_->arm == nullptr || t_->wait_fd == nullptr || t_->arm(ctx_) != HMC_PLUGIN_SUCCESS ||
        t_->wait_fd(ctx_, &fd) != HMC_PLUGIN_SUCCESS) {
      sched_yield();
      return;
    }
    pollfd p[2] = {{fd, POLLIN, 0}, {extra_fd, POLLIN, 0}};
    ::poll(p, extra_fd >= 0 ? 2 : 1, 20);
  }

  // Tests r until it ends (returns its status) or the timeout passes (returns IN_PROGRESS and
  // leaves r pending). A failed post (r == nullptr) returns what the post answered.
  hmc_plugin_status_t wait(hmc_net_request_t* r, size_t* bytes = nullptr, double timeout_s = 30) {
    if (r == nullptr) return last_ != HMC_PLUGIN_SUCCESS ? last_ : HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    uint64_t deadline = deadline_after(timeout_s);
    int spins = 0;
    for (unsigned polls = 0;; ++polls) {
      hmc_plugin_status_t st;
      if (request_ended(t_, r, bytes, &st)) return st;
      if ((polls & 63) == 0 && mono_ns() > deadline) return HMC_PLUGIN_IN_PROGRESS;
      idle(&spins);
    }
  }
  // Waits for all; statuses in the same order. Requests still pending at the timeout report
  // IN_PROGRESS (and stay pending).
  std::vector<hmc_plugin_status_t> wait_all(const std::vector<hmc_net_request_t*>& reqs,
                                            std::vector<size_t>* bytes = nullptr,
                                            double timeout_s = 30) {
    std::vector<hmc_plugin_status_t> st(reqs.size(), HMC_PLUGIN_IN_PROGRESS);
    std::vector<bool> done(reqs.size(), false);
    if (bytes != nullptr) bytes->assign(reqs.size(), 0);
    size_t left = reqs.size();
    uint64_t deadline = deadline_after(timeout_s);
    int spins = 0;
    while (left > 0 && mono_ns() < deadline) {
      size_t before = left;
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (done[i]) continue;
        int d = 0;
        size_t b = 0;
        hmc_plugin_status_t s = t_->test(reqs[i], &d, &b);
        if (d) {
          done[i] = true;
          st[i] = s;
          if (bytes != nullptr) (*bytes)[i] = b;
          --left;
        }
      }
      if (left == before) idle(&spins);
    }
    return st;
  }

  // Control channel: length-prefixed blobs; waiting keeps the plugin progressing.
  bool ctl_send(const void* data, size_t len) {
    uint32_t n = static_cast<uint32_t>(len);
    return write_all(&n, 4) && write_all(data, len);
  }
  bool ctl_recv(std::vector<uint8_t>* out, double timeout_s = 30) {
    uint32_t n = 0;
    if (!read_all(&n, 4, timeout_s)) return false;
    out->resize(n);
    return read_all(out->data(), n, timeout_s);
  }
  bool signal(uint8_t v = 1) { return ctl_send(&v, 1); }
  bool await(uint8_t* v = nullptr, double timeout_s = 30) {
    std::vector<uint8_t> b;
    if (!ctl_recv(&b, timeout_s) || b.size() != 1) return false;
    if (v != nullptr) *v = b[0];
    return true;
  }
  template <typename V>
  bool send_value(const V& v) {
    return ctl_send(&v, sizeof(v));
  }
  template <typename V>
  bool recv_value(V* v, double timeout_s = 30) {
    std::vector<uint8_t> b;
    if (!ctl_recv(&b, timeout_s) || b.size() != sizeof(V)) return false;
    std::memcpy(v, b.data(), sizeof(V));
    return true;
  }

 private:
  bool write_all(const void* data, size_t len) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (len > 0) {
      ssize_t n = ::send(ctl_, p, len, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n;
      len -= static_cast<size_t>(n);
    }
    return true;
  }
  bool read_all(void* data, size_t len, double timeout_s) {
    auto* p = static_cast<uint8_t*>(data);
    uint64_t deadline = deadline_after(timeout_s);
    int spins = 0;
    while (len > 0) {
      if (ctx_ != nullptr && t_->progress != nullptr) t_->progress(ctx_);
      pollfd pfd{ctl_, POLLIN, 0};
      if (::poll(&pfd, 1, ctx_ != nullptr ? 0 : 10) > 0) {
        ssize_t n = ::recv(ctl_, p, len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        len -= static_cast<size_t>(n);
        continue;
      }
      if (mono_ns() > deadline) return false;
      if (ctx_ != nullptr) idle(&spins, ctl_);
    }
    return true;
  }

  Host host_;
  int dev_;
  int ctl_;
  const hmc_net_plugin_v2_t* t_;
  hmc_net_ctx_t* ctx_ = nullptr;
  hmc_net_listener_t* listener_ = nullptr;
  hmc_net_ep_t* ep_ = nullptr;
  hmc_plugin_status_t init_status_ = HMC_PLUGIN_SUCCESS;
  hmc_plugin_status_t last_ = HMC_PLUGIN_SUCCESS;
  bool spin_only_ = std::getenv("HS_TEST_SPIN") != nullptr;
};

// ---------------------------------------------------------------------------------------------
// Processes

// Waits (bounded) until the process at the other end of fd closed it, closes fd and reaps pid;
// kills it first when timeout_s passes (*timed_out). Returns the raw waitpid status.
inline int reap(pid_t pid, int fd, double timeout_s, bool* timed_out) {
  uint64_t deadline = deadline_after(timeout_s);
  *timed_out = false;
  for (;;) {
    if (mono_ns() >= deadline) {
      ::kill(pid, SIGKILL);
      *timed_out = true;
      break;
    }
    pollfd pfd{fd, POLLIN, 0};
    int left_ms = static_cast<int>((deadline - mono_ns()) / 1000000) + 1;
    if (::poll(&pfd, 1, left_ms) > 0) {
      char buf[256];
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
    }
  }
  ::close(fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// A process killed on purpose leaves the shared-memory regions it created behind; plugins name
// them "hmc-<pid>-..." in /dev/shm. Removes those of pid, so that test runs do not fill the tmpfs.
inline void remove_shm_regions_of(pid_t pid) {
  std::string prefix = "hmc-" + std::to_string(pid) + "-";
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
      ::unlink(("/dev/shm/" + std::string(e->d_name)).c_str());
  ::closedir(d);
}

struct PairResult {
  std::string parent_setup_error;
  hmc_plugin_status_t parent_init = HMC_PLUGIN_SUCCESS;  // what the parent's init answered
  int child_status = -1;                                 // raw waitpid status
  bool child_timed_out = false;
};

// Forks; the child runs `child(side)` as the connector and exits with `child_exit()` (0 = ok;
// 100 when its setup failed); the parent runs `parent(side)` as the listener. The child is
// killed when it has not finished timeout_s after the parent's side did. Both sides' host
// services report host_timeout_ms.
inline PairResult run_pair(const hmc_net_plugin_v2_t* t, const Cfg& cfg, int dev,
                           const std::function<void(Side&)>& parent,
                           const std::function<void(Side&)>& child,
                           const std::function<int()>& child_exit, double timeout_s = 60,
                           uint32_t host_timeout_ms = 5000) {
  PairResult res;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    res.parent_setup_error = "socketpair failed";
    return res;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(sv[0]);
    int code = 100;
    {
      Side s(t, cfg, dev, sv[1], host_timeout_ms);
      std::string err = s.setup(false);
      if (err.empty()) {
        child(s);
        code = child_exit();
      } else if (s.init_status() != HMC_PLUGIN_ERR_NO_DEVICE) {
        std::fprintf(stderr, "child setup: %s\n", err.c_str());
      }
    }
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(code);
  }
  ::close(sv[1]);
  {
    Side s(t, cfg, dev, sv[0], host_timeout_ms);
    res.parent_setup_error = s.setup(true);
    res.parent_init = s.init_status();
    if (res.parent_setup_error.empty()) parent(s);
  }
  // Without a parent, the child waiting for the handle would wait for its whole timeout.
  if (!res.parent_setup_error.empty()) ::shutdown(sv[0], SHUT_RDWR);
  res.child_status = reap(pid, sv[0], timeout_s, &res.child_timed_out);
  remove_shm_regions_of(pid);
  return res;
}

}  // namespace net_test
