// Test harness for the hoststage net plugin: loads the plugin, provides host services backed by
// a std::map, and runs the two sides of a connection in two processes (fork) that coordinate
// over a socketpair. Used by tests/unit/net_hoststage_test.cpp and the hoststage benchmark.
// No gtest dependency: helpers return statuses and booleans.
#pragma once

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
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

namespace hs_test {

inline uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The plugin table, loaded once per process (dlopen before fork is fine: no threads).
inline const hmc_net_plugin_v2_t* plugin(std::string* err = nullptr) {
  static const hmc_net_plugin_v2_t* table = nullptr;
  static std::string error;
  if (table == nullptr && error.empty()) {
    std::string path = std::string(HMC_TEST_PLUGIN_DIR) + "/libhmc-net-hoststage.so";
    void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (dl == nullptr) {
      error = std::string("dlopen: ") + dlerror();
    } else {
      auto entry = reinterpret_cast<hmc_net_plugin_v2_entry_t>(dlsym(dl, HMC_NET_PLUGIN_ENTRY_V2));
      if (entry == nullptr)
        error = "no hmc_net_plugin_v2 symbol";
      else
        table = entry();
    }
  }
  if (err != nullptr) *err = error;
  return table;
}

// Host services: config from a map, log to stderr at or below `print_level`, every message kept.
class Host {
 public:
  explicit Host(std::map<std::string, std::string> cfg, uint32_t timeout_ms = 5000,
                int print_level = HMC_LOG_WARN)
      : cfg_(std::move(cfg)), print_level_(print_level) {
    svc_.hdr = HMC_ABI_HEADER_INIT(hmc_host_services_t);
    svc_.core_abi_min = HMC_NET_ABI_VERSION;
    svc_.core_abi_max = HMC_NET_ABI_VERSION;
    svc_.host_ctx = this;
    svc_.log = &Host::log_cb;
    svc_.log_enabled = &Host::log_enabled_cb;
    svc_.config_get = &Host::config_cb;
    svc_.now_ns = &Host::now_cb;
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

 private:
  static void log_cb(void* h, int level, const char* msg) {
    auto* self = static_cast<Host*>(h);
    if (level <= self->print_level_)
      std::fprintf(stderr, "[pid %d L%d] %s\n", getpid(), level, msg);
    std::lock_guard<std::mutex> g(self->mu_);
    self->logs_.push_back(msg);
  }
  static int log_enabled_cb(void*, int) { return 1; }
  static const char* config_cb(void* h, const char* name) {
    auto* self = static_cast<Host*>(h);
    auto it = self->cfg_.find(name);
    return it == self->cfg_.end() ? nullptr : it->second.c_str();
  }
  static uint64_t now_cb(void*) { return mono_ns(); }

  std::map<std::string, std::string> cfg_;
  int print_level_;
  hmc_host_services_t svc_{};
  mutable std::mutex mu_;
  std::vector<std::string> logs_;
};

// Position-dependent pattern: byte i of a buffer filled with seed s is a function of (s, i), so
// misplaced, shifted or stale bytes are detected. Fills and checks 8 bytes at a time.
inline uint64_t pattern_word(uint64_t seed, uint64_t word) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + word * 0xbf58476d1ce4e5b9ull + 1;
  z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
  return z ^ (z >> 29);
}
inline void fill(void* buf, size_t len, uint64_t seed, size_t offset = 0) {
  auto* p = static_cast<uint8_t*>(buf);
  for (size_t i = 0; i < len;) {
    size_t pos = offset + i;
    if (pos % 8 == 0 && len - i >= 8) {
      uint64_t w = pattern_word(seed, pos / 8);
      std::memcpy(p + i, &w, 8);
      i += 8;
    } else {
      uint64_t w = pattern_word(seed, pos / 8);
      p[i] = static_cast<uint8_t>(w >> (8 * (pos % 8)));
      ++i;
    }
  }
}
// Index of the first byte that differs from the pattern, or -1.
inline long long first_mismatch(const void* buf, size_t len, uint64_t seed, size_t offset = 0) {
  const auto* p = static_cast<const uint8_t*>(buf);
  for (size_t i = 0; i < len;) {
    size_t pos = offset + i;
    uint64_t w = pattern_word(seed, pos / 8);
    if (pos % 8 == 0 && len - i >= 8) {
      if (std::memcmp(p + i, &w, 8) != 0) {
        for (size_t k = 0; k < 8; ++k)
          if (p[i + k] != static_cast<uint8_t>(w >> (8 * k))) return static_cast<long long>(i + k);
      }
      i += 8;
    } else {
      if (p[i] != static_cast<uint8_t>(w >> (8 * (pos % 8)))) return static_cast<long long>(i);
      ++i;
    }
  }
  return -1;
}

// One side of a connection: a context, an endpoint, and the control socket to the other side.
class Side {
 public:
  Side(std::map<std::string, std::string> cfg, int dev, int ctl, uint32_t timeout_ms = 5000)
      : host_(std::move(cfg), timeout_ms), dev_(dev), ctl_(ctl), t_(plugin()) {}
  ~Side() { close(); }
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;

  const hmc_net_plugin_v2_t* t() const { return t_; }
  hmc_net_ctx_t* ctx() const { return ctx_; }
  hmc_net_ep_t* ep() const { return ep_; }
  Host& host() { return host_; }
  int ctl() const { return ctl_; }
  int dev() const { return dev_; }

  // Listener side: init, listen, send the handle over ctl, accept. Connector side: init, read
  // the handle, connect, wait for ep_ready. Returns "" or what went wrong.
  std::string setup(bool listener, double timeout_s = 10) {
    if (t_ == nullptr) return "plugin not loaded";
    hmc_plugin_status_t st = t_->init(host_.services(), &ctx_);
    if (st != HMC_PLUGIN_SUCCESS) return "init failed: " + std::to_string(st);
    uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
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
  hmc_plugin_status_t last_post() const { return last_; }

  // Waiting style: spin on test/progress only (benchmarks), or spin a little and then sleep on
  // wait_fd after arm, as the core does (tests: this also exercises arm/wait_fd everywhere and
  // leaves the CPU to the peer process on a busy machine).
  void set_spin_only(bool on) { spin_only_ = on; }

  // Called in wait loops: after enough fruitless spins, arms and sleeps on wait_fd (and
  // extra_fd, when >= 0) for at most 20 ms. A lost wake-up therefore costs time, not a hang; the
  // wake-up test checks them strictly.
  void idle(int* spins, int extra_fd = -1) {
    if (spin_only_ || ++*spins < 200) return;
    *spins = 0;
    if (t_->arm(ctx_) != HMC_PLUGIN_SUCCESS) return;
    int fd = -1;
    t_->wait_fd(ctx_, &fd);
    pollfd p[2] = {{fd, POLLIN, 0}, {extra_fd, POLLIN, 0}};
    ::poll(p, extra_fd >= 0 ? 2 : 1, 20);
  }

  // Tests r until it ends (returns its status) or the timeout passes (returns IN_PROGRESS and
  // leaves r pending).
  hmc_plugin_status_t wait(hmc_net_request_t* r, size_t* bytes = nullptr, double timeout_s = 30) {
    if (r == nullptr)  // the post failed: report why instead of waiting on nothing
      return last_ != HMC_PLUGIN_SUCCESS ? last_ : HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
    int spins = 0;
    unsigned polls = 0;
    for (;;) {
      int done = 0;
      size_t b = 0;
      hmc_plugin_status_t st = t_->test(r, &done, &b);
      if (done) {
        if (bytes != nullptr) *bytes = b;
        return st;
      }
      if ((++polls & 255) == 0 && mono_ns() > deadline) return HMC_PLUGIN_IN_PROGRESS;
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
    uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
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
  template <typename T>
  bool send_value(const T& v) {
    return ctl_send(&v, sizeof(v));
  }
  template <typename T>
  bool recv_value(T* v, double timeout_s = 30) {
    std::vector<uint8_t> b;
    if (!ctl_recv(&b, timeout_s) || b.size() != sizeof(T)) return false;
    std::memcpy(v, b.data(), sizeof(T));
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
    uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
    int spins = 0;
    while (len > 0) {
      if (ctx_ != nullptr) t_->progress(ctx_);
      pollfd pfd{ctl_, POLLIN, 0};
      int timeout_ms = ctx_ != nullptr ? 0 : 10;
      if (::poll(&pfd, 1, timeout_ms) > 0) {
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
  hmc_plugin_status_t last_ = HMC_PLUGIN_SUCCESS;
  bool spin_only_ = std::getenv("HS_TEST_SPIN") != nullptr;
};

// Forks; the child runs `child(side)` as the connector and exits with `child_exit()` (0 = ok);
// the parent runs `parent(side)` as the listener. Returns the child's exit status as waitpid
// reports it, or -1 when it had to be killed after timeout_s. setup errors are reported through
// *parent_err / the child's exit code 100.
struct PairResult {
  std::string parent_setup_error;
  int child_status = -1;  // raw waitpid status
  bool child_timed_out = false;
};

inline PairResult run_pair(const std::map<std::string, std::string>& cfg, int dev,
                           const std::function<void(Side&)>& parent,
                           const std::function<void(Side&)>& child,
                           const std::function<int()>& child_exit, double timeout_s = 60) {
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
      Side s(cfg, dev, sv[1]);
      std::string err = s.setup(false);
      if (err.empty()) {
        child(s);
        code = child_exit();
      } else {
        std::fprintf(stderr, "child setup: %s\n", err.c_str());
      }
    }
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(code);
  }
  ::close(sv[1]);
  {
    Side s(cfg, dev, sv[0]);
    res.parent_setup_error = s.setup(true);
    if (res.parent_setup_error.empty()) parent(s);
  }
  // The child's end of the socketpair closes when it exits: wait for that, bounded.
  uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
  for (;;) {
    pollfd pfd{sv[0], POLLIN, 0};
    int64_t left_ms = static_cast<int64_t>(deadline - mono_ns()) / 1000000;
    if (mono_ns() >= deadline) {
      ::kill(pid, SIGKILL);
      res.child_timed_out = true;
      break;
    }
    if (::poll(&pfd, 1, static_cast<int>(left_ms)) > 0) {
      char buf[256];
      if (::recv(sv[0], buf, sizeof(buf), 0) <= 0) break;
    }
  }
  ::close(sv[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  res.child_status = status;
  return res;
}

}  // namespace hs_test
