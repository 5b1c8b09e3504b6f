// Tests for plugins/net-ucx (a net plugin over UCX's UCP API), driven through its C ABI only:
// the plugin is dlopened from the build tree and each connection runs its two sides in two
// processes (fork before any thread; the child reports through its exit code), or in two
// contexts of one process where that is enough. Parameterised over the UCX transports that work
// on any Linux machine: "tcp" (loopback) and "posix,cma,self" (shared memory), passed to the
// plugin as HMC_UCX_TLS. A machine where UCX cannot create a worker skips them, saying why.
//
// The throwaway benchmarks at the end are DISABLED_ (never part of CTest); run them with
//   net_ucx_test --gtest_also_run_disabled_tests --gtest_filter='*Bench*'
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hmc/plugin/net.h"

namespace {

// ---------------------------------------------------------------------------------------------
// Harness: the plugin, host services, the two sides of a connection.

using Cfg = std::map<std::string, std::string>;

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string plugin_path() { return std::string(HMC_TEST_PLUGIN_DIR) + "/libhmc-net-ucx.so"; }

// The plugin is not built where UCX was not found at configure time: its tests skip, saying so.
// A plugin file that exists but does not load is a failure.
bool plugin_built() { return ::access(plugin_path().c_str(), F_OK) == 0; }
#define SKIP_WITHOUT_PLUGIN()                                                              \
  do {                                                                                     \
    if (!plugin_built())                                                                   \
      GTEST_SKIP() << plugin_path() << " was not built (UCX not found at configure time)"; \
  } while (0)

// The plugin table, loaded once per process (before any fork: no threads yet).
const hmc_net_plugin_v2_t* plugin(std::string* err = nullptr) {
  static const hmc_net_plugin_v2_t* table = nullptr;
  static std::string error;
  if (table == nullptr && error.empty()) {
    std::string path = plugin_path();
    void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (dl == nullptr) {
      error = std::string("dlopen: ") + dlerror();
    } else {
      auto entry = reinterpret_cast<hmc_net_plugin_v2_entry_t>(dlsym(dl, HMC_NET_PLUGIN_ENTRY_V2));
      if (entry == nullptr) error = "no hmc_net_plugin_v2 symbol";
      else table = entry();
    }
  }
  if (err != nullptr) *err = error;
  return table;
}
const hmc_net_plugin_v2_t* T() { return plugin(); }

// Host services: config from a map, log to stderr at or below print_level, every message kept.
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
  bool logged(const std::string& needle) const {
    std::lock_guard<std::mutex> g(mu_);
    for (const std::string& l : logs_)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
  std::string all_logs() const {
    std::lock_guard<std::mutex> g(mu_);
    std::string s;
    for (const std::string& l : logs_) s += l + "\n";
    return s;
  }

 private:
  static void log_cb(void* h, int level, const char* msg) {
    auto* self = static_cast<Host*>(h);
    if (level <= self->print_level_) std::fprintf(stderr, "[pid %d L%d] %s\n", getpid(), level, msg);
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

// Position-dependent pattern: byte i of a buffer filled with seed s depends on (s, i), so
// misplaced, shifted or stale bytes are detected.
uint64_t pattern_word(uint64_t seed, uint64_t word) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + word * 0xbf58476d1ce4e5b9ull + 1;
  z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
  return z ^ (z >> 29);
}
void fill(void* buf, size_t len, uint64_t seed, size_t offset = 0) {
  auto* p = static_cast<uint8_t*>(buf);
  for (size_t i = 0; i < len; ++i) {
    size_t pos = offset + i;
    p[i] = static_cast<uint8_t>(pattern_word(seed, pos / 8) >> (8 * (pos % 8)));
  }
}
// Index of the first byte that differs from the pattern, or -1.
long long first_mismatch(const void* buf, size_t len, uint64_t seed, size_t offset = 0) {
  const auto* p = static_cast<const uint8_t*>(buf);
  for (size_t i = 0; i < len; ++i) {
    size_t pos = offset + i;
    if (p[i] != static_cast<uint8_t>(pattern_word(seed, pos / 8) >> (8 * (pos % 8))))
      return static_cast<long long>(i);
  }
  return -1;
}

// One side of a connection: a context, an endpoint, and the control socket to the other side.
class Side {
 public:
  Side(const Cfg& cfg, int ctl, uint32_t timeout_ms = 5000) : host_(cfg, timeout_ms), ctl_(ctl) {}
  ~Side() { close(); }
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;

  hmc_net_ctx_t* ctx() const { return ctx_; }
  hmc_net_ep_t* ep() const { return ep_; }
  Host& host() { return host_; }

  std::string init() {
    if (T() == nullptr) return "plugin not loaded";
    hmc_plugin_status_t st = T()->init(host_.services(), &ctx_);
    return st == HMC_PLUGIN_SUCCESS ? "" : "init failed: " + std::to_string(st);
  }
  // Listener: listen, send the handle over ctl, accept. Connector: read the handle, connect,
  // wait for ep_ready. Returns "" or what went wrong.
  std::string setup(bool listener, double timeout_s = 10) {
    if (ctx_ == nullptr) {
      std::string e = init();
      if (!e.empty()) return e;
    }
    uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
    hmc_plugin_status_t st;
    if (listener) {
      uint8_t handle[HMC_NET_HANDLE_MAX];
      size_t len = 0;
      hmc_net_listener_t* l = nullptr;
      st = T()->listen(ctx_, 0, handle, &len, &l);
      if (st != HMC_PLUGIN_SUCCESS) return "listen failed: " + std::to_string(st);
      if (!ctl_send(handle, len)) return "ctl send failed";
      for (;;) {
        st = T()->accept(l, &ep_);
        if (st == HMC_PLUGIN_SUCCESS) break;
        if (st != HMC_PLUGIN_IN_PROGRESS) return "accept failed: " + std::to_string(st);
        if (mono_ns() > deadline) return "accept timed out";
      }
      T()->close_listener(l);
    } else {
      std::vector<uint8_t> handle;
      if (!ctl_recv(&handle, timeout_s)) return "ctl recv of the handle failed";
      st = T()->connect(ctx_, 0, handle.data(), handle.size(), &ep_);
      if (st != HMC_PLUGIN_SUCCESS) return "connect failed: " + std::to_string(st);
    }
    for (;;) {
      st = T()->ep_ready(ep_);
      if (st == HMC_PLUGIN_SUCCESS) return "";
      if (st != HMC_PLUGIN_IN_PROGRESS) return "ep_ready failed: " + std::to_string(st);
      if (mono_ns() > deadline) return "ep_ready timed out";
    }
  }

  void close_ep() {
    if (ep_ != nullptr) T()->close_ep(ep_);
    ep_ = nullptr;
  }
  void close() {
    close_ep();
    if (ctx_ != nullptr) T()->finalize(ctx_);
    ctx_ = nullptr;
  }

  hmc_net_request_t* isend(const void* buf, size_t len, uint64_t tag) {
    hmc_net_request_t* r = nullptr;
    last_ = T()->isend(ep_, buf, len, nullptr, tag, &r);
    return last_ == HMC_PLUGIN_SUCCESS ? r : nullptr;
  }
  hmc_net_request_t* irecv(void* buf, size_t len, uint64_t tag) {
    hmc_net_request_t* r = nullptr;
    last_ = T()->irecv(ep_, buf, len, nullptr, tag, &r);
    return last_ == HMC_PLUGIN_SUCCESS ? r : nullptr;
  }
  hmc_plugin_status_t last_post() const { return last_; }

  // Benchmarks spin; tests spin a little, then arm and sleep on wait_fd as the core does (this
  // exercises arm/wait_fd everywhere and leaves the CPU to the peer on a busy machine). A lost
  // wake-up costs at most 20 ms, not a hang; the wake-up test checks them strictly.
  void set_spin_only(bool on) { spin_only_ = on; }
  void idle(int* spins, int extra_fd = -1) {
    if (spin_only_ || ++*spins < 200) return;
    *spins = 0;
    if (T()->arm(ctx_) != HMC_PLUGIN_SUCCESS) return;
    int fd = -1;
    T()->wait_fd(ctx_, &fd);
    pollfd p[2] = {{fd, POLLIN, 0}, {extra_fd, POLLIN, 0}};
    ::poll(p, extra_fd >= 0 ? 2 : 1, 20);
  }

  // Tests r until it ends (returns its status) or the timeout passes (IN_PROGRESS; r pending).
  hmc_plugin_status_t wait(hmc_net_request_t* r, size_t* bytes = nullptr, double timeout_s = 30) {
    if (r == nullptr) return last_;
    uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
    int spins = 0;
    for (unsigned polls = 0;; ++polls) {
      int done = 0;
      size_t b = 0;
      hmc_plugin_status_t st = T()->test(r, &done, &b);
      if (done) {
        if (bytes != nullptr) *bytes = b;
        return st;
      }
      if ((polls & 255) == 0 && mono_ns() > deadline) return HMC_PLUGIN_IN_PROGRESS;
      idle(&spins);
    }
  }
  // Waits for all; statuses in the same order (IN_PROGRESS for those still pending at the
  // timeout).
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
        hmc_plugin_status_t s = T()->test(reqs[i], &d, &b);
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
  bool await(double timeout_s = 30) {
    std::vector<uint8_t> b;
    return ctl_recv(&b, timeout_s) && b.size() == 1;
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
    uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
    int spins = 0;
    while (len > 0) {
      if (ctx_ != nullptr) T()->progress(ctx_);
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
  int ctl_;
  hmc_net_ctx_t* ctx_ = nullptr;
  hmc_net_ep_t* ep_ = nullptr;
  hmc_plugin_status_t last_ = HMC_PLUGIN_SUCCESS;
  bool spin_only_ = false;
};

int child_exit() { return ::testing::Test::HasFailure() ? 1 : 0; }

// Waits (bounded) for the process behind fd's other end to close it, then reaps pid. Kills it
// after timeout_s. Returns the raw waitpid status; *timed_out says whether it had to be killed.
int reap(pid_t pid, int fd, double timeout_s, bool* timed_out) {
  uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
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
      if (::recv(fd, buf, sizeof(buf), 0) <= 0) break;
    }
  }
  ::close(fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

// Forks; the child connects and runs `child`, exiting with child_exit() (100: setup failed);
// the parent listens and runs `parent`.
struct PairResult {
  std::string parent_setup_error;
  int child_status = -1;
  bool child_timed_out = false;
};

PairResult run_pair(const Cfg& cfg, const std::function<void(Side&)>& parent,
                    const std::function<void(Side&)>& child, double timeout_s = 60) {
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
      Side s(cfg, sv[1]);
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
    Side s(cfg, sv[0]);
    res.parent_setup_error = s.setup(true);
    if (res.parent_setup_error.empty()) parent(s);
  }
  res.child_status = reap(pid, sv[0], timeout_s, &res.child_timed_out);
  return res;
}

// ---------------------------------------------------------------------------------------------
// Variants

struct Variant {
  std::string name;
  std::string tls;
  std::string error_mode;  // HMC_UCX_ERROR_MODE ("" = default: auto)
};
void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

Cfg cfg_of(const Variant& v, Cfg extra = {}) {
  extra["HMC_UCX_TLS"] = v.tls;
  if (v.tls == "tcp") extra["HMC_UCX_NET_DEVICES"] = "lo";  // loopback only, whatever UCX finds
  if (!v.error_mode.empty()) extra["HMC_UCX_ERROR_MODE"] = v.error_mode;
  return extra;
}

// Why UCX cannot run with these transports here ("" when it can): the tests then skip.
std::string unusable(const Variant& v) {
  std::string err;
  if (plugin(&err) == nullptr) return err;
  Host host(cfg_of(v), 5000, 0);
  hmc_net_ctx_t* c = nullptr;
  hmc_plugin_status_t st = T()->init(host.services(), &c);
  if (st == HMC_PLUGIN_SUCCESS) {
    T()->finalize(c);
    return "";
  }
  return "UCX cannot create a worker with UCX_TLS=" + v.tls + " here (init: " +
         std::to_string(st) + "): " + host.all_logs();
}

std::string variant_name(const ::testing::TestParamInfo<Variant>& info) { return info.param.name; }

// The default error mode (auto: none for tcp, peer with shared memory). Forcing none on shared
// memory is only done by the benchmarks: UCX 1.13 then aborts the process when a shared-memory
// peer dies during a cma transfer.
const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {{"tcp", "tcp", ""}, {"shm", "posix,cma,self", ""}};
  return v;
}

class UcxPair : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_PLUGIN();
    std::string why = unusable(GetParam());
    if (!why.empty()) GTEST_SKIP() << why;
  }
  Cfg cfg(Cfg extra = {}) const { return cfg_of(GetParam(), std::move(extra)); }

 public:
  // Runs parent (listener) and child (connector) in two processes. killed_by: the signal the
  // child is meant to die of (0: it must exit cleanly).
  void run(const std::function<void(Side&)>& parent, const std::function<void(Side&)>& child,
           double timeout_s = 60, int killed_by = 0) {
    PairResult r = run_pair(cfg(), parent, child, timeout_s);
    ASSERT_EQ(r.parent_setup_error, "");
    ASSERT_FALSE(r.child_timed_out) << "the child did not finish within " << timeout_s << " s";
    if (killed_by != 0) {
      ASSERT_TRUE(WIFSIGNALED(r.child_status) && WTERMSIG(r.child_status) == killed_by)
          << "the child should have died of signal " << killed_by << " (its output is above)";
      return;
    }
    ASSERT_TRUE(WIFEXITED(r.child_status)) << "the child died of signal "
                                           << WTERMSIG(r.child_status);
    EXPECT_EQ(WEXITSTATUS(r.child_status), 0) << "the child failed (its output is above)";
  }
};

// ---------------------------------------------------------------------------------------------
// Two-sided messages

// Posts receives for sizes[i] under tag base+i, signals the peer, checks pattern seed+i.
void receive_sizes(Side& s, const std::vector<size_t>& sizes, uint64_t tag_base, uint64_t seed) {
  std::vector<std::vector<uint8_t>> bufs(sizes.size());
  std::vector<hmc_net_request_t*> reqs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    bufs[i].assign(std::max<size_t>(sizes[i], 1), 0xee);
    hmc_net_request_t* r = s.irecv(sizes[i] ? bufs[i].data() : nullptr, sizes[i], tag_base + i);
    ASSERT_NE(r, nullptr) << "irecv of " << sizes[i] << " bytes: " << s.last_post();
    reqs.push_back(r);
  }
  ASSERT_TRUE(s.signal());
  std::vector<size_t> bytes;
  auto st = s.wait_all(reqs, &bytes);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS) << "receive of " << sizes[i] << " bytes";
    EXPECT_EQ(bytes[i], sizes[i]);
    EXPECT_EQ(first_mismatch(bufs[i].data(), sizes[i], seed + i), -1)
        << "receive of " << sizes[i] << " bytes: data differs";
  }
}

void send_sizes(Side& s, const std::vector<size_t>& sizes, uint64_t tag_base, uint64_t seed) {
  std::vector<std::vector<uint8_t>> bufs(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    bufs[i].resize(std::max<size_t>(sizes[i], 1));
    fill(bufs[i].data(), sizes[i], seed + i);
  }
  ASSERT_TRUE(s.await());  // the peer posted its receives
  std::vector<hmc_net_request_t*> reqs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    hmc_net_request_t* r = s.isend(sizes[i] ? bufs[i].data() : nullptr, sizes[i], tag_base + i);
    ASSERT_NE(r, nullptr) << "isend of " << sizes[i] << " bytes: " << s.last_post();
    reqs.push_back(r);
  }
  std::vector<size_t> bytes;
  auto st = s.wait_all(reqs, &bytes);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS) << "send of " << sizes[i] << " bytes";
    EXPECT_EQ(bytes[i], sizes[i]);
  }
}

TEST_P(UcxPair, SendRecvSizesBothDirections) {
  const std::vector<size_t> sizes = {0, 1, 8, 64u << 10, (4u << 20) + 3};
  run(
      [&](Side& s) {
        receive_sizes(s, sizes, 100, 1000);
        send_sizes(s, sizes, 200, 2000);
      },
      [&](Side& s) {
        send_sizes(s, sizes, 100, 1000);
        receive_sizes(s, sizes, 200, 2000);
      });
}

// Messages with the same tag match receives in send order, small and large mixed, whether the
// receive was posted before or after the message arrived; receives for other tags posted in
// reverse order still get their own message.
TEST_P(UcxPair, SameTagFifoAndOutOfOrderTags) {
  constexpr int kN = 30;
  constexpr uint64_t kTagA = 5, kTagB = 6;
  auto size_of = [](int k) -> size_t {
    return k % 3 == 0 ? (256u << 10) + k : (k % 3 == 1 ? 16u + k : 8192u);
  };
  const size_t cap = 512u << 10;
  run(
      [&](Side& s) {
        // Phase 1: B receives posted first; the A messages arrive unexpected meanwhile.
        std::vector<std::vector<uint8_t>> bufs(kN);
        std::vector<hmc_net_request_t*> b_reqs, a_reqs;
        for (int k = 1; k < kN; k += 2) {
          bufs[k].resize(cap);
          b_reqs.push_back(s.irecv(bufs[k].data(), cap, kTagB));
          ASSERT_NE(b_reqs.back(), nullptr);
        }
        ASSERT_TRUE(s.signal());
        std::vector<size_t> bytes;
        auto st = s.wait_all(b_reqs, &bytes);
        for (size_t j = 0; j < b_reqs.size(); ++j) {
          int k = static_cast<int>(2 * j + 1);
          EXPECT_EQ(st[j], HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(bytes[j], size_of(k)) << "B receive " << j << " got the wrong message";
          EXPECT_EQ(first_mismatch(bufs[k].data(), size_of(k), 500 + k), -1) << "message " << k;
        }
        for (int k = 0; k < kN; k += 2) {
          bufs[k].resize(cap);
          a_reqs.push_back(s.irecv(bufs[k].data(), cap, kTagA));
          ASSERT_NE(a_reqs.back(), nullptr);
        }
        st = s.wait_all(a_reqs, &bytes);
        for (size_t j = 0; j < a_reqs.size(); ++j) {
          int k = static_cast<int>(2 * j);
          EXPECT_EQ(st[j], HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(bytes[j], size_of(k)) << "A receive " << j << " got the wrong message";
          EXPECT_EQ(first_mismatch(bufs[k].data(), size_of(k), 500 + k), -1) << "message " << k;
        }
        // Phase 2: receives for tags 30..21 posted in reverse; the peer sends 21..30.
        std::vector<std::vector<uint8_t>> r2(10, std::vector<uint8_t>(cap));
        std::vector<hmc_net_request_t*> reqs2;
        for (int t = 30; t >= 21; --t) reqs2.push_back(s.irecv(r2[30 - t].data(), cap, t));
        ASSERT_TRUE(s.signal());
        st = s.wait_all(reqs2, &bytes);
        for (int t = 30; t >= 21; --t) {
          size_t i = static_cast<size_t>(30 - t);
          size_t want = t % 2 ? (300u << 10) : 100u;
          EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(bytes[i], want) << "tag " << t;
          EXPECT_EQ(first_mismatch(r2[i].data(), want, 900 + t), -1) << "tag " << t;
        }
      },
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs(kN);
        std::vector<hmc_net_request_t*> reqs;
        ASSERT_TRUE(s.await());
        for (int k = 0; k < kN; ++k) {
          bufs[k].resize(size_of(k));
          fill(bufs[k].data(), size_of(k), 500 + k);
          reqs.push_back(s.isend(bufs[k].data(), size_of(k), k % 2 ? kTagB : kTagA));
          ASSERT_NE(reqs.back(), nullptr);
        }
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        std::vector<std::vector<uint8_t>> b2(31);
        std::vector<hmc_net_request_t*> reqs2;
        ASSERT_TRUE(s.await());
        for (int t = 21; t <= 30; ++t) {
          size_t n = t % 2 ? (300u << 10) : 100u;
          b2[t].resize(n);
          fill(b2[t].data(), n, 900 + t);
          reqs2.push_back(s.isend(b2[t].data(), n, t));
        }
        for (auto st : s.wait_all(reqs2)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
      });
}

// Tags at and above 2^47 (which travel hashed, see plugins/net-ucx/src/tags.h) and tags that
// differ only in their top bits still match exactly.
TEST_P(UcxPair, WideTagsMatchExactly) {
  const std::vector<uint64_t> tags = {1ull << 47,         (1ull << 47) + 1, (1ull << 60) - 1,
                                      ~0ull,              (1ull << 63) | 5, 5,
                                      (1ull << 48) | 5,   (1ull << 62) | 5};
  run(
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs(tags.size(), std::vector<uint8_t>(128));
        std::vector<hmc_net_request_t*> reqs;
        for (size_t i = tags.size(); i-- > 0;) reqs.push_back(s.irecv(bufs[i].data(), 128, tags[i]));
        ASSERT_TRUE(s.signal());
        std::vector<size_t> bytes;
        auto st = s.wait_all(reqs, &bytes);
        for (size_t j = 0; j < reqs.size(); ++j) {
          size_t i = tags.size() - 1 - j;
          EXPECT_EQ(st[j], HMC_PLUGIN_SUCCESS) << "tag " << tags[i];
          EXPECT_EQ(bytes[j], 64 + i) << "tag " << tags[i];
          EXPECT_EQ(first_mismatch(bufs[i].data(), 64 + i, 40 + i), -1) << "tag " << tags[i];
        }
      },
      [&](Side& s) {
        ASSERT_TRUE(s.await());
        std::vector<std::vector<uint8_t>> bufs(tags.size());
        std::vector<hmc_net_request_t*> reqs;
        for (size_t i = 0; i < tags.size(); ++i) {
          bufs[i].resize(64 + i);
          fill(bufs[i].data(), 64 + i, 40 + i);
          reqs.push_back(s.isend(bufs[i].data(), 64 + i, tags[i]));
        }
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
      });
}

// Messages sent before any receive was posted (small and large) reach the receives posted later.
TEST_P(UcxPair, UnexpectedMessages) {
  const size_t small = 1000, big = (2u << 20) + 5;
  run(
      [&](Side& s) {
        std::vector<uint8_t> marker(8), sb(small), lb(big + 1);
        // The marker is sent last, and UCX delivers one sender's messages in order: once it is
        // here, the other two were received as unexpected messages (or announced, if large).
        ASSERT_EQ(s.wait(s.irecv(marker.data(), marker.size(), 12)), HMC_PLUGIN_SUCCESS);
        size_t b1 = 0, b2 = 0;
        hmc_net_request_t* rl = s.irecv(lb.data(), lb.size(), 11);
        hmc_net_request_t* rs = s.irecv(sb.data(), sb.size(), 10);
        ASSERT_NE(rl, nullptr);
        ASSERT_NE(rs, nullptr);
        EXPECT_EQ(s.wait(rs, &b1), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(s.wait(rl, &b2), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(b1, small);
        EXPECT_EQ(b2, big);
        EXPECT_EQ(first_mismatch(sb.data(), small, 10), -1);
        EXPECT_EQ(first_mismatch(lb.data(), big, 11), -1);
        EXPECT_EQ(first_mismatch(marker.data(), 8, 12), -1);
      },
      [&](Side& s) {
        std::vector<uint8_t> sb(small), lb(big), marker(8);
        fill(sb.data(), small, 10);
        fill(lb.data(), big, 11);
        fill(marker.data(), 8, 12);
        std::vector<hmc_net_request_t*> reqs = {s.isend(sb.data(), small, 10),
                                                s.isend(lb.data(), big, 11),
                                                s.isend(marker.data(), 8, 12)};
        for (auto* r : reqs) ASSERT_NE(r, nullptr);
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
      });
}

// A receive buffer smaller than the message ends the receive with TRUNCATED without writing past
// the buffer, the send succeeds, and later messages still arrive intact.
TEST_P(UcxPair, Truncation) {
  struct Case {
    uint64_t tag;
    size_t msg;
    size_t buf;
  };
  const std::vector<Case> posted = {{1, 100, 50}, {2, 1u << 20, 1000}, {3, 300u << 10, 0},
                                    {4, 5, 5}};
  const std::vector<Case> late = {{7, 200, 10}, {9, 1u << 20, 10}};  // unexpected, then truncated
  run(
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs;
        std::vector<hmc_net_request_t*> reqs;
        for (const Case& c : posted) {
          bufs.emplace_back(c.buf + 64, 0xab);
          reqs.push_back(s.irecv(bufs.back().data(), c.buf, c.tag));
          ASSERT_NE(reqs.back(), nullptr);
        }
        ASSERT_TRUE(s.signal());
        std::vector<size_t> bytes;
        auto st = s.wait_all(reqs, &bytes);
        for (size_t i = 0; i < posted.size(); ++i) {
          const Case& c = posted[i];
          bool trunc = c.msg > c.buf;
          EXPECT_EQ(st[i], trunc ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS) << "tag " << c.tag;
          EXPECT_EQ(bytes[i], c.msg) << "tag " << c.tag << ": a truncated receive reports "
                                     << "the length that was sent";
          for (size_t k = c.buf; k < bufs[i].size(); ++k)
            ASSERT_EQ(bufs[i][k], 0xab) << "tag " << c.tag << " wrote past its buffer at " << k;
        }
        std::vector<uint8_t> marker(8);
        ASSERT_EQ(s.wait(s.irecv(marker.data(), 8, 8)), HMC_PLUGIN_SUCCESS);
        for (const Case& c : late) {
          std::vector<uint8_t> b(c.buf + 16, 0xab);
          EXPECT_EQ(s.wait(s.irecv(b.data(), c.buf, c.tag)), HMC_PLUGIN_ERR_TRUNCATED)
              << "tag " << c.tag;
          for (size_t k = c.buf; k < b.size(); ++k)
            ASSERT_EQ(b[k], 0xab) << "tag " << c.tag << " wrote past its buffer at " << k;
        }
        // The connection is still in sync.
        std::vector<uint8_t> after(3u << 20);
        size_t n = 0;
        EXPECT_EQ(s.wait(s.irecv(after.data(), after.size(), 10), &n), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(n, after.size());
        EXPECT_EQ(first_mismatch(after.data(), after.size(), 310), -1);
      },
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs;
        std::vector<hmc_net_request_t*> reqs;
        bufs.reserve(16);
        auto send = [&](uint64_t tag, size_t n) {
          bufs.emplace_back(std::max<size_t>(n, 1));
          fill(bufs.back().data(), n, 300 + tag);
          reqs.push_back(s.isend(bufs.back().data(), n, tag));
          ASSERT_NE(reqs.back(), nullptr);
        };
        ASSERT_TRUE(s.await());
        for (const Case& c : posted) send(c.tag, c.msg);
        for (const Case& c : late) send(c.tag, c.msg);
        send(8, 8);
        send(10, 3u << 20);
        auto st = s.wait_all(reqs);
        for (size_t i = 0; i < st.size(); ++i) EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS) << "send " << i;
      });
}

// An unmatched receive can be cancelled (it ends CANCELLED and takes no message); sends cannot.
TEST_P(UcxPair, CancelUnmatchedReceive) {
  run(
      [&](Side& s) {
        std::vector<uint8_t> b1(64), b3(64);
        hmc_net_request_t* r1 = s.irecv(b1.data(), 64, 77);
        ASSERT_NE(r1, nullptr);
        ASSERT_EQ(T()->cancel(r1), HMC_PLUGIN_SUCCESS);
        size_t n = 99;
        EXPECT_EQ(s.wait(r1, &n), HMC_PLUGIN_ERR_CANCELLED);
        EXPECT_EQ(n, 0u);
        // The message with the cancelled tag goes to the next receive.
        hmc_net_request_t* r3 = s.irecv(b3.data(), 64, 77);
        ASSERT_NE(r3, nullptr);
        std::vector<uint8_t> big(1u << 20);
        fill(big.data(), big.size(), 79);
        hmc_net_request_t* snd = s.isend(big.data(), big.size(), 79);
        ASSERT_NE(snd, nullptr);
        ASSERT_TRUE(s.signal());
        EXPECT_EQ(s.wait(r3, &n), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(n, 64u);
        EXPECT_EQ(first_mismatch(b3.data(), 64, 77), -1);
        EXPECT_EQ(T()->cancel(snd), HMC_PLUGIN_ERR_NOT_SUPPORTED);
        EXPECT_EQ(s.wait(snd), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.await());
      },
      [&](Side& s) {
        std::vector<uint8_t> m(64), big(1u << 20);
        fill(m.data(), 64, 77);
        ASSERT_TRUE(s.await());
        EXPECT_EQ(s.wait(s.isend(m.data(), 64, 77)), HMC_PLUGIN_SUCCESS);
        size_t n = 0;
        EXPECT_EQ(s.wait(s.irecv(big.data(), big.size(), 79), &n), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(n, big.size());
        EXPECT_EQ(first_mismatch(big.data(), big.size(), 79), -1);
        ASSERT_TRUE(s.signal());
      });
}

// 256 sends and 256 receives in flight in each direction at once, mixed sizes, receives posted
// in reverse tag order.
TEST_P(UcxPair, ManyRequestsInFlight) {
  constexpr int kN = 256;
  auto size_of = [](int i) -> size_t {
    return i % 17 == 0 ? 0 : (static_cast<size_t>(i) * 7919) % (200u << 10);
  };
  auto both = [&](Side& s, uint64_t my_seed, uint64_t peer_seed) {
    std::vector<std::vector<uint8_t>> rb(kN), sb(kN);
    std::vector<hmc_net_request_t*> reqs;
    for (int i = kN - 1; i >= 0; --i) {
      rb[i].resize(std::max<size_t>(size_of(i), 1));
      reqs.push_back(s.irecv(rb[i].data(), size_of(i), static_cast<uint64_t>(i)));
      ASSERT_NE(reqs.back(), nullptr);
    }
    ASSERT_TRUE(s.signal());
    ASSERT_TRUE(s.await());
    for (int i = 0; i < kN; ++i) {
      sb[i].resize(std::max<size_t>(size_of(i), 1));
      fill(sb[i].data(), size_of(i), my_seed + i);
      reqs.push_back(s.isend(sb[i].data(), size_of(i), static_cast<uint64_t>(i)));
      ASSERT_NE(reqs.back(), nullptr);
    }
    std::vector<size_t> bytes;
    auto st = s.wait_all(reqs, &bytes);
    for (size_t j = 0; j < reqs.size(); ++j) EXPECT_EQ(st[j], HMC_PLUGIN_SUCCESS) << "request " << j;
    for (int i = 0; i < kN; ++i) {
      EXPECT_EQ(bytes[kN - 1 - i], size_of(i));
      EXPECT_EQ(first_mismatch(rb[i].data(), size_of(i), peer_seed + i), -1) << "message " << i;
    }
    ASSERT_TRUE(s.signal());
    ASSERT_TRUE(s.await());
  };
  run([&](Side& s) { both(s, 10000, 20000); }, [&](Side& s) { both(s, 20000, 10000); });
}

// ---------------------------------------------------------------------------------------------
// One-sided operations

struct RemoteRegion {
  uint64_t base;
  std::vector<uint8_t> rkey;
};

void send_region(Side& s, uint64_t base, const std::vector<uint8_t>& rkey) {
  ASSERT_TRUE(s.send_value(base));
  ASSERT_TRUE(s.ctl_send(rkey.data(), rkey.size()));
}

RemoteRegion recv_region(Side& s) {
  RemoteRegion r{};
  EXPECT_TRUE(s.recv_value(&r.base));
  EXPECT_TRUE(s.ctl_recv(&r.rkey));
  return r;
}

hmc_net_mr_t* reg(Side& s, void* addr, size_t len, uint32_t access, std::vector<uint8_t>* rkey) {
  hmc_net_mem_desc_t d{};
  d.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_mem_desc_t);
  d.addr = addr;
  d.len = len;
  d.iface = HMC_MEM_IFACE_HOST;
  d.access = access;
  d.dmabuf_fd = -1;
  d.device_ordinal = -1;
  hmc_net_mr_t* mr = nullptr;
  rkey->assign(HMC_NET_RKEY_MAX, 0);
  size_t n = 0;
  EXPECT_EQ(T()->reg_mr(s.ctx(), 0, &d, &mr, rkey->data(), &n), HMC_PLUGIN_SUCCESS);
  EXPECT_GT(n, 0u);
  EXPECT_LE(n, HMC_NET_RKEY_MAX);
  rkey->resize(n);
  return mr;
}

hmc_net_rkey_t* unpack(Side& s, const std::vector<uint8_t>& packed) {
  hmc_net_rkey_t* k = nullptr;
  EXPECT_EQ(T()->rkey_unpack(s.ep(), packed.data(), packed.size(), &k), HMC_PLUGIN_SUCCESS);
  return k;
}

hmc_plugin_status_t put(Side& s, const void* buf, size_t len, uint64_t addr, hmc_net_rkey_t* k) {
  hmc_net_request_t* r = nullptr;
  hmc_plugin_status_t st = T()->iput(s.ep(), buf, len, nullptr, addr, k, &r);
  return st != HMC_PLUGIN_SUCCESS ? st : s.wait(r);
}

hmc_plugin_status_t get(Side& s, void* buf, size_t len, uint64_t addr, hmc_net_rkey_t* k) {
  hmc_net_request_t* r = nullptr;
  hmc_plugin_status_t st = T()->iget(s.ep(), buf, len, nullptr, addr, k, &r);
  return st != HMC_PLUGIN_SUCCESS ? st : s.wait(r);
}

// Completed puts are in place at the target when they complete (checked by the owner right
// after the initiator's signal, without any further progress on the owner's side for shm).
TEST_P(UcxPair, PutGetByteExact) {
  constexpr size_t kRegion = 16u << 20;
  constexpr size_t kOffA = 5, kLenA = 100;
  constexpr size_t kOffB = (1u << 20) + 1, kLenB = (8u << 20) + 3;
  constexpr size_t kOffC = 12u << 20, kLenC = 4096;
  run(
      [&](Side& s) {
        std::vector<uint8_t> region(kRegion);
        fill(region.data(), kRegion, 7);
        std::vector<uint8_t> rkey;
        hmc_net_mr_t* mr = reg(s, region.data(), kRegion,
                               HMC_NET_ACCESS_LOCAL | HMC_NET_ACCESS_REMOTE_READ |
                                   HMC_NET_ACCESS_REMOTE_WRITE,
                               &rkey);
        ASSERT_NE(mr, nullptr);
        send_region(s, reinterpret_cast<uintptr_t>(region.data()), rkey);
        ASSERT_TRUE(s.await());  // the peer's puts and gets are done
        const uint8_t* p = region.data();
        EXPECT_EQ(first_mismatch(p, kOffA, 7), -1);
        EXPECT_EQ(first_mismatch(p + kOffA, kLenA, 8), -1);
        EXPECT_EQ(first_mismatch(p + kOffA + kLenA, kOffB - kOffA - kLenA, 7, kOffA + kLenA), -1);
        EXPECT_EQ(first_mismatch(p + kOffB, kLenB, 9), -1);
        EXPECT_EQ(first_mismatch(p + kOffB + kLenB, kRegion - kOffB - kLenB, 7, kOffB + kLenB), -1);
        EXPECT_EQ(T()->dereg_mr(s.ctx(), mr), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        RemoteRegion rr = recv_region(s);
        hmc_net_rkey_t* k = unpack(s, rr.rkey);
        ASSERT_NE(k, nullptr);
        std::vector<uint8_t> a(kLenA), b(kLenB), c(kLenC);
        fill(a.data(), kLenA, 8);
        fill(b.data(), kLenB, 9);
        // Several in flight at once, plus a zero-length put.
        hmc_net_request_t *ra = nullptr, *rb = nullptr, *r0 = nullptr;
        ASSERT_EQ(T()->iput(s.ep(), a.data(), kLenA, nullptr, rr.base + kOffA, k, &ra),
                  HMC_PLUGIN_SUCCESS);
        ASSERT_EQ(T()->iput(s.ep(), b.data(), kLenB, nullptr, rr.base + kOffB, k, &rb),
                  HMC_PLUGIN_SUCCESS);
        ASSERT_EQ(T()->iput(s.ep(), a.data(), 0, nullptr, rr.base, k, &r0), HMC_PLUGIN_SUCCESS);
        std::vector<size_t> bytes;
        auto st = s.wait_all({ra, rb, r0}, &bytes);
        EXPECT_EQ(st[0], HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(st[1], HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(st[2], HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(bytes[1], kLenB);
        // Read everything back.
        std::fill(a.begin(), a.end(), 0);
        std::fill(b.begin(), b.end(), 0);
        EXPECT_EQ(get(s, a.data(), kLenA, rr.base + kOffA, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(get(s, b.data(), kLenB, rr.base + kOffB, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(get(s, c.data(), kLenC, rr.base + kOffC, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(get(s, c.data(), 0, rr.base + kRegion, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(a.data(), kLenA, 8), -1);
        EXPECT_EQ(first_mismatch(b.data(), kLenB, 9), -1);
        EXPECT_EQ(first_mismatch(c.data(), kLenC, 7, kOffC), -1);
        EXPECT_EQ(T()->rkey_release(k), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      });
}

// Accesses outside the registered region, accesses the registration did not grant, and keys that
// fail their check end with REMOTE, and the owner's memory is not touched. (With these
// transports UCX itself would write anywhere: the plugin refuses them at the initiator from the
// region packed in the key. A deregistered region's key is NOT refused here: see the README.)
TEST_P(UcxPair, RemoteAccessChecks) {
  constexpr size_t kArena = 2048u << 10, kReg = 256u << 10;
  constexpr size_t kRw = 256u << 10, kRo = 768u << 10, kWo = 1280u << 10;
  const size_t put_ok_off = 100, put_ok_len = 100000;
  constexpr size_t kWoLen = 1000;
  run(
      [&](Side& s) {
        std::vector<uint8_t> arena(kArena);
        fill(arena.data(), kArena, 20);
        uint8_t* a = arena.data();
        std::vector<uint8_t> k_rw, k_ro, k_wo;
        uint32_t rw = HMC_NET_ACCESS_REMOTE_READ | HMC_NET_ACCESS_REMOTE_WRITE;
        hmc_net_mr_t* m_rw = reg(s, a + kRw, kReg, rw, &k_rw);
        hmc_net_mr_t* m_ro = reg(s, a + kRo, kReg, HMC_NET_ACCESS_REMOTE_READ, &k_ro);
        hmc_net_mr_t* m_wo = reg(s, a + kWo, kReg, HMC_NET_ACCESS_REMOTE_WRITE, &k_wo);
        send_region(s, reinterpret_cast<uintptr_t>(a + kRw), k_rw);
        send_region(s, reinterpret_cast<uintptr_t>(a + kRo), k_ro);
        send_region(s, reinterpret_cast<uintptr_t>(a + kWo), k_wo);
        ASSERT_TRUE(s.await());
        auto expect_seed = [&](size_t from, size_t to, uint64_t seed, size_t pat_off) {
          EXPECT_EQ(first_mismatch(a + from, to - from, seed, pat_off), -1)
              << "arena bytes [" << from << ", " << to << ")";
        };
        expect_seed(0, kRw + put_ok_off, 20, 0);
        expect_seed(kRw + put_ok_off, kRw + put_ok_off + put_ok_len, 22, 0);
        expect_seed(kRw + put_ok_off + put_ok_len, kWo, 20, kRw + put_ok_off + put_ok_len);
        expect_seed(kWo, kWo + kWoLen, 21, 0);
        expect_seed(kWo + kWoLen, kArena, 20, kWo + kWoLen);
        for (hmc_net_mr_t* m : {m_rw, m_ro, m_wo}) EXPECT_EQ(T()->dereg_mr(s.ctx(), m), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(T()->dereg_mr(s.ctx(), m_rw), HMC_PLUGIN_ERR_INVALID_ARGUMENT) << "twice";
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        RemoteRegion rw = recv_region(s), ro = recv_region(s), wo = recv_region(s);
        hmc_net_rkey_t* k_rw = unpack(s, rw.rkey);
        hmc_net_rkey_t* k_ro = unpack(s, ro.rkey);
        hmc_net_rkey_t* k_wo = unpack(s, wo.rkey);
        std::vector<uint8_t> forged = rw.rkey;
        forged[20] ^= 0x01;  // the region's length: claims more than was registered
        hmc_net_rkey_t* k_forged = unpack(s, forged);
        std::vector<uint8_t> corrupt = rw.rkey;
        corrupt.back() ^= 0x5a;  // UCX's part of the key
        hmc_net_rkey_t* k_corrupt = unpack(s, corrupt);
        ASSERT_TRUE(k_rw && k_ro && k_wo && k_forged && k_corrupt);
        // Not a key of this plugin at all.
        hmc_net_rkey_t* k_junk = nullptr;
        std::vector<uint8_t> junk(40, 0x33);
        EXPECT_EQ(T()->rkey_unpack(s.ep(), junk.data(), junk.size(), &k_junk),
                  HMC_PLUGIN_ERR_INVALID_ARGUMENT);

        std::vector<uint8_t> src(600000), dst(600000);
        fill(src.data(), src.size(), 99);
        const size_t small = 10, large = 100000;
        struct Bad {
          const char* what;
          uint64_t addr;
          size_t len;
          hmc_net_rkey_t* key;
        };
        const std::vector<Bad> bad = {
            {"before the region", rw.base - 1, small, k_rw},
            {"past the end", rw.base + kReg - 5, small, k_rw},
            {"large, past the end", rw.base + kReg - 5, large, k_rw},
            {"large, before the region", rw.base - 64, large, k_rw},
            {"larger than the region", rw.base, kReg + 1, k_rw},
            {"address wraps around", UINT64_MAX - 4, small, k_rw},
            {"forged length", rw.base + kReg, small, k_forged},
            {"forged length, in range", rw.base, small, k_forged},
            {"corrupt UCX key", rw.base, small, k_corrupt},
            {"corrupt key, zero length", rw.base, 0, k_corrupt},
        };
        for (const Bad& b : bad) {
          EXPECT_EQ(put(s, src.data(), b.len, b.addr, b.key), HMC_PLUGIN_ERR_REMOTE) << "put " << b.what;
          EXPECT_EQ(get(s, dst.data(), b.len, b.addr, b.key), HMC_PLUGIN_ERR_REMOTE) << "get " << b.what;
        }
        EXPECT_EQ(put(s, src.data(), small, ro.base, k_ro), HMC_PLUGIN_ERR_REMOTE);
        EXPECT_EQ(put(s, src.data(), large, ro.base, k_ro), HMC_PLUGIN_ERR_REMOTE);
        EXPECT_EQ(get(s, dst.data(), small, wo.base, k_wo), HMC_PLUGIN_ERR_REMOTE);
        EXPECT_EQ(get(s, dst.data(), large, wo.base, k_wo), HMC_PLUGIN_ERR_REMOTE);
        // What the flags allow works, up to the last byte of a region.
        EXPECT_EQ(get(s, dst.data(), large, ro.base + 8, k_ro), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(dst.data(), large, 20, kRo + 8), -1);
        EXPECT_EQ(get(s, dst.data(), 16, ro.base + kReg - 16, k_ro), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(dst.data(), 16, 20, kRo + kReg - 16), -1);
        std::vector<uint8_t> w(kWoLen);
        fill(w.data(), kWoLen, 21);
        EXPECT_EQ(put(s, w.data(), kWoLen, wo.base, k_wo), HMC_PLUGIN_SUCCESS);
        std::vector<uint8_t> ok(put_ok_len);
        fill(ok.data(), put_ok_len, 22);
        EXPECT_EQ(put(s, ok.data(), put_ok_len, rw.base + put_ok_off, k_rw), HMC_PLUGIN_SUCCESS);
        for (hmc_net_rkey_t* k : {k_rw, k_ro, k_wo, k_forged, k_corrupt})
          EXPECT_EQ(T()->rkey_release(k), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      });
}

// ---------------------------------------------------------------------------------------------
// Peer death and close

// The peer is SIGKILLed while sending a large message: every pending request ends with PEER_LOST
// within a few seconds, and later posts fail with it.
TEST_P(UcxPair, PeerKilledMidTransfer) {
  constexpr size_t kBig = 256u << 20;
  run(
      [&](Side& s) {
        void* big = mmap(nullptr, kBig, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(big, MAP_FAILED);
        std::vector<uint8_t> small(64), out(1u << 20);
        hmc_net_request_t* r_big = s.irecv(big, kBig, 1);
        hmc_net_request_t* r_never = s.irecv(small.data(), small.size(), 2);
        hmc_net_request_t* s_never = s.isend(out.data(), out.size(), 3);  // never received
        ASSERT_TRUE(r_big && r_never && s_never);
        ASSERT_TRUE(s.signal());
        uint64_t t0 = mono_ns();
        auto st = s.wait_all({r_big, r_never, s_never}, nullptr, 10);
        double secs = static_cast<double>(mono_ns() - t0) / 1e9;
        EXPECT_EQ(st[0], HMC_PLUGIN_ERR_PEER_LOST) << "the large receive";
        EXPECT_EQ(st[1], HMC_PLUGIN_ERR_PEER_LOST) << "the unmatched receive";
        EXPECT_EQ(st[2], HMC_PLUGIN_ERR_PEER_LOST) << "the unmatched send";
        EXPECT_LT(secs, 5.0) << "peer death noticed only after " << secs << " s";
        hmc_net_request_t* r = nullptr;
        hmc_plugin_status_t post = T()->isend(s.ep(), small.data(), small.size(), nullptr, 4, &r);
        if (post == HMC_PLUGIN_SUCCESS) post = s.wait(r);
        EXPECT_EQ(post, HMC_PLUGIN_ERR_PEER_LOST);
        EXPECT_EQ(T()->ep_ready(s.ep()), HMC_PLUGIN_ERR_PEER_LOST);
        munmap(big, kBig);
      },
      [&](Side& s) {
        void* big = mmap(nullptr, kBig, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(big, MAP_FAILED);
        ASSERT_TRUE(s.await());
        hmc_net_request_t* r = s.isend(big, kBig, 1);
        ASSERT_NE(r, nullptr);
        for (int i = 0; i < 20; ++i) T()->progress(s.ctx());
        if (::testing::Test::HasFailure()) _exit(1);
        raise(SIGKILL);
      },
      30, SIGKILL);
}

// close_ep with requests pending returns at once; the peer's pending requests end PEER_LOST.
TEST_P(UcxPair, CloseWithPendingRequests) {
  run(
      [&](Side& s) {
        std::vector<uint8_t> b(64), out(1u << 20);
        ASSERT_NE(s.irecv(b.data(), b.size(), 1), nullptr);
        ASSERT_NE(s.isend(out.data(), out.size(), 2), nullptr);
        ASSERT_TRUE(s.await());
        uint64_t t0 = mono_ns();
        s.close_ep();
        EXPECT_LT(mono_ns() - t0, 500000000ull) << "close_ep blocked";
        ASSERT_TRUE(s.await());
      },
      [&](Side& s) {
        std::vector<uint8_t> b(64);
        hmc_net_request_t* r = s.irecv(b.data(), b.size(), 7);
        ASSERT_NE(r, nullptr);
        ASSERT_TRUE(s.signal());
        uint64_t t0 = mono_ns();
        EXPECT_EQ(s.wait(r, nullptr, 10), HMC_PLUGIN_ERR_PEER_LOST);
        EXPECT_LT(mono_ns() - t0, 5000000000ull);
        ASSERT_TRUE(s.signal());
      });
}

// What a peer sent before it went away (closed its endpoint, or died) stays receivable: receives
// posted afterwards that match it complete normally; one that matches nothing fails PEER_LOST.
void arrived_then_break(UcxPair* t, bool kill_child) {
  const std::vector<size_t> sizes = {0, 8, 1000, 4000};  // eager on both transports
  t->run(
      [&](Side& s) {
        // The child's sends completed and it closed (or died) before these receives exist.
        if (kill_child) {
          std::vector<uint8_t> ignored;
          ASSERT_TRUE(s.await());
          EXPECT_FALSE(s.ctl_recv(&ignored, 10)) << "the child should be gone";
        } else {
          ASSERT_TRUE(s.await());
        }
        for (size_t i = sizes.size(); i-- > 0;) {
          std::vector<uint8_t> b(sizes[i] + 8, 0xee);
          size_t n = 99;
          EXPECT_EQ(s.wait(s.irecv(b.data(), sizes[i], i + 1), &n, 10), HMC_PLUGIN_SUCCESS)
              << "message " << i << " sent before the break";
          EXPECT_EQ(n, sizes[i]);
          EXPECT_EQ(first_mismatch(b.data(), sizes[i], 60 + i), -1) << "message " << i;
        }
        std::vector<uint8_t> b(16);
        uint64_t t0 = mono_ns();
        EXPECT_EQ(s.wait(s.irecv(b.data(), b.size(), 99), nullptr, 10), HMC_PLUGIN_ERR_PEER_LOST);
        EXPECT_LT(mono_ns() - t0, 5000000000ull);
        EXPECT_EQ(s.wait(s.isend(b.data(), b.size(), 5), nullptr, 10), HMC_PLUGIN_ERR_PEER_LOST);
        if (!kill_child) {
          ASSERT_TRUE(s.signal());
        }
      },
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs(sizes.size());
        std::vector<hmc_net_request_t*> reqs;
        for (size_t i = 0; i < sizes.size(); ++i) {
          bufs[i].resize(std::max<size_t>(sizes[i], 1));
          fill(bufs[i].data(), sizes[i], 60 + i);
          reqs.push_back(s.isend(bufs[i].data(), sizes[i], i + 1));
        }
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        if (kill_child) {
          if (::testing::Test::HasFailure()) _exit(1);
          s.signal();
          raise(SIGKILL);
        }
        s.close_ep();
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      },
      30, kill_child ? SIGKILL : 0);
}

TEST_P(UcxPair, ArrivedMessagesStayReceivableAfterPeerClosed) { arrived_then_break(this, false); }
TEST_P(UcxPair, ArrivedMessagesStayReceivableAfterPeerDied) { arrived_then_break(this, true); }

// Two connectors on one listening context: each endpoint's receives match only its own peer's
// messages, with the same tags in flight on both.
TEST_P(UcxPair, TwoPeersOnOneContextDoNotCrossMatch) {
  constexpr int kPeers = 2;
  constexpr uint64_t kTag = 42;
  const size_t small = 100, large = 1u << 20;
  int sv[kPeers][2];
  pid_t pids[kPeers];
  for (int i = 0; i < kPeers; ++i) {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[i]), 0);
    std::fflush(stdout);
    std::fflush(stderr);
    pids[i] = ::fork();
    if (pids[i] == 0) {
      for (int j = 0; j <= i; ++j) ::close(sv[j][0]);
      int code = 100;
      {
        Side s(cfg(), sv[i][1]);
        std::string err = s.setup(false);
        if (err.empty()) {
          // Both sizes on the shared tag, then receive the parent's answer on it.
          [&] {
            std::vector<uint8_t> a(small), b(large), in(large);
            fill(a.data(), small, 1000 + i);
            fill(b.data(), large, 2000 + i);
            ASSERT_TRUE(s.await());
            auto st = s.wait_all({s.isend(a.data(), small, kTag), s.isend(b.data(), large, kTag)});
            EXPECT_EQ(st[0], HMC_PLUGIN_SUCCESS);
            EXPECT_EQ(st[1], HMC_PLUGIN_SUCCESS);
            size_t n = 0;
            EXPECT_EQ(s.wait(s.irecv(in.data(), large, kTag), &n), HMC_PLUGIN_SUCCESS);
            EXPECT_EQ(n, large);
            EXPECT_EQ(first_mismatch(in.data(), large, 3000 + i), -1) << "peer " << i;
            EXPECT_TRUE(s.signal());
            EXPECT_TRUE(s.await());
          }();
          code = child_exit();
        } else {
          std::fprintf(stderr, "child %d setup: %s\n", i, err.c_str());
        }
      }
      std::fflush(stderr);
      ::_exit(code);
    }
    ::close(sv[i][1]);
  }
  {
    // One context, two listeners, two endpoints.
    Host host(cfg());
    hmc_net_ctx_t* c = nullptr;
    ASSERT_EQ(T()->init(host.services(), &c), HMC_PLUGIN_SUCCESS);
    std::vector<std::unique_ptr<Side>> ctl;
    hmc_net_ep_t* eps[kPeers] = {};
    hmc_net_listener_t* ls[kPeers] = {};
    for (int i = 0; i < kPeers; ++i) {
      ctl.emplace_back(new Side(cfg(), sv[i][0]));  // only its control channel is used
      uint8_t handle[HMC_NET_HANDLE_MAX];
      size_t len = 0;
      ASSERT_EQ(T()->listen(c, 0, handle, &len, &ls[i]), HMC_PLUGIN_SUCCESS);
      ASSERT_TRUE(ctl[i]->ctl_send(handle, len));
    }
    uint64_t deadline = mono_ns() + 10000000000ull;
    int accepted = 0;
    while (accepted < kPeers && mono_ns() < deadline) {
      for (int i = 0; i < kPeers; ++i) {
        if (eps[i] != nullptr) continue;
        hmc_plugin_status_t st = T()->accept(ls[i], &eps[i]);
        if (st == HMC_PLUGIN_SUCCESS) ++accepted;
        else ASSERT_EQ(st, HMC_PLUGIN_IN_PROGRESS);
      }
    }
    ASSERT_EQ(accepted, kPeers);
    for (auto* l : ls) T()->close_listener(l);
    // Receives posted on both endpoints before and after the messages arrive.
    std::vector<std::vector<uint8_t>> sbuf(kPeers, std::vector<uint8_t>(large + 8)),
        lbuf(kPeers, std::vector<uint8_t>(large + 8));
    std::vector<hmc_net_request_t*> first;
    for (int i = 0; i < kPeers; ++i) {
      hmc_net_request_t* r = nullptr;
      ASSERT_EQ(T()->irecv(eps[i], sbuf[i].data(), sbuf[i].size(), nullptr, kTag, &r),
                HMC_PLUGIN_SUCCESS);
      first.push_back(r);
    }
    for (auto& s : ctl) ASSERT_TRUE(s->signal());
    // Drive the shared context through the first Side's helpers (ctx() is null there, so
    // wait on the raw table).
    auto wait_raw = [&](hmc_net_request_t* r, size_t* n) {
      uint64_t end = mono_ns() + 20000000000ull;
      for (;;) {
        int done = 0;
        hmc_plugin_status_t st = T()->test(r, &done, n);
        if (done) return st;
        if (mono_ns() > end) return HMC_PLUGIN_IN_PROGRESS;
      }
    };
    for (int i = 0; i < kPeers; ++i) {
      size_t n = 0;
      EXPECT_EQ(wait_raw(first[i], &n), HMC_PLUGIN_SUCCESS);
      EXPECT_EQ(n, small) << "endpoint " << i;
      EXPECT_EQ(first_mismatch(sbuf[i].data(), small, 1000 + i), -1) << "endpoint " << i
                                                                    << " got another peer's message";
    }
    for (int i = kPeers - 1; i >= 0; --i) {
      hmc_net_request_t* r = nullptr;
      ASSERT_EQ(T()->irecv(eps[i], lbuf[i].data(), lbuf[i].size(), nullptr, kTag, &r),
                HMC_PLUGIN_SUCCESS);
      size_t n = 0;
      EXPECT_EQ(wait_raw(r, &n), HMC_PLUGIN_SUCCESS);
      EXPECT_EQ(n, large);
      EXPECT_EQ(first_mismatch(lbuf[i].data(), large, 2000 + i), -1) << "endpoint " << i
                                                                    << " got another peer's message";
    }
    std::vector<std::vector<uint8_t>> out(kPeers, std::vector<uint8_t>(large));
    for (int i = 0; i < kPeers; ++i) {
      fill(out[i].data(), large, 3000 + i);
      hmc_net_request_t* r = nullptr;
      ASSERT_EQ(T()->isend(eps[i], out[i].data(), large, nullptr, kTag, &r), HMC_PLUGIN_SUCCESS);
      EXPECT_EQ(wait_raw(r, nullptr), HMC_PLUGIN_SUCCESS);
    }
    // The children confirm, and stay until both endpoints are closed here.
    for (int i = 0; i < kPeers; ++i) {
      uint64_t end = mono_ns() + 20000000000ull;
      bool got = false;
      while (!got && mono_ns() < end) {
        T()->progress(c);
        pollfd p{sv[i][0], POLLIN, 0};
        if (::poll(&p, 1, 1) > 0) got = ctl[i]->await(1);
      }
      EXPECT_TRUE(got) << "peer " << i << " did not confirm";
    }
    for (auto* e : eps) T()->close_ep(e);
    for (auto& s : ctl) s->signal();
    EXPECT_EQ(T()->finalize(c), HMC_PLUGIN_SUCCESS);
  }
  for (int i = 0; i < kPeers; ++i) {
    bool timed_out = false;
    int status = reap(pids[i], sv[i][0], 30, &timed_out);
    EXPECT_FALSE(timed_out);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "peer " << i << " failed";
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxPair, ::testing::ValuesIn(variants()), variant_name);

// ---------------------------------------------------------------------------------------------
// Two contexts in one process

class UcxLocal : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_PLUGIN();
    std::string why = unusable(GetParam());
    if (!why.empty()) GTEST_SKIP() << why;
  }
  Cfg cfg() const { return cfg_of(GetParam()); }
};

// Connects b to a in one thread, driving both sides.
struct LocalPair {
  explicit LocalPair(const Cfg& cfg, uint32_t timeout_ms = 5000)
      : ha(cfg, timeout_ms), hb(cfg, timeout_ms) {}
  ~LocalPair() {
    if (ea) T()->close_ep(ea);
    if (eb) T()->close_ep(eb);
    if (l) T()->close_listener(l);
    if (a) T()->finalize(a);
    if (b) T()->finalize(b);
  }
  void init() {
    ASSERT_EQ(T()->init(ha.services(), &a), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(T()->init(hb.services(), &b), HMC_PLUGIN_SUCCESS);
  }
  void connect() {
    ASSERT_NO_FATAL_FAILURE(init());
    ASSERT_EQ(T()->listen(a, 0, handle, &handle_len, &l), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(T()->connect(b, 0, handle, handle_len, &eb), HMC_PLUGIN_SUCCESS);
    ASSERT_NO_FATAL_FAILURE(finish_connect());
  }
  // Listens on a, and connects from b with a handle whose nonce is not the listener's.
  void connect_with_wrong_nonce(hmc_net_ep_t** bad) {
    ASSERT_NO_FATAL_FAILURE(init());
    ASSERT_EQ(T()->listen(a, 0, handle, &handle_len, &l), HMC_PLUGIN_SUCCESS);
    std::vector<uint8_t> forged(handle, handle + handle_len);
    forged[8] ^= 0xff;  // nonce bytes 8..15
    ASSERT_EQ(T()->connect(b, 0, forged.data(), forged.size(), bad), HMC_PLUGIN_SUCCESS);
  }
  void finish_connect() {
    hmc_plugin_status_t sa = HMC_PLUGIN_IN_PROGRESS, sb = HMC_PLUGIN_IN_PROGRESS;
    uint64_t deadline = mono_ns() + 10000000000ull;
    while ((sa != HMC_PLUGIN_SUCCESS || sb != HMC_PLUGIN_SUCCESS) && mono_ns() < deadline) {
      // Both contexts keep progressing (tcp: the listener's answer leaves once its connection
      // to the connector is acknowledged).
      if (sa != HMC_PLUGIN_SUCCESS) sa = T()->accept(l, &ea);
      else T()->progress(a);
      if (sb != HMC_PLUGIN_SUCCESS) sb = T()->ep_ready(eb);
      else T()->progress(b);
      ASSERT_TRUE(sa == HMC_PLUGIN_SUCCESS || sa == HMC_PLUGIN_IN_PROGRESS) << sa;
      ASSERT_TRUE(sb == HMC_PLUGIN_SUCCESS || sb == HMC_PLUGIN_IN_PROGRESS) << sb;
    }
    ASSERT_EQ(sa, HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(sb, HMC_PLUGIN_SUCCESS);
  }
  // Tests r, progressing both contexts.
  hmc_plugin_status_t wait(hmc_net_request_t* r, size_t* bytes = nullptr) {
    uint64_t deadline = mono_ns() + 20000000000ull;
    for (;;) {
      int done = 0;
      hmc_plugin_status_t st = T()->test(r, &done, bytes);
      if (done) return st;
      T()->progress(a);
      T()->progress(b);
      if (mono_ns() > deadline) return HMC_PLUGIN_IN_PROGRESS;
    }
  }
  Host ha, hb;
  hmc_net_ctx_t *a = nullptr, *b = nullptr;
  hmc_net_listener_t* l = nullptr;
  hmc_net_ep_t *ea = nullptr, *eb = nullptr;
  uint8_t handle[HMC_NET_HANDLE_MAX];
  size_t handle_len = 0;
};

bool readable_within(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

// Arms until the context agrees that sleeping is safe (a few progress calls at most).
hmc_plugin_status_t arm_until_idle(hmc_net_ctx_t* c) {
  hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
  for (int i = 0; i < 1000 && st == HMC_PLUGIN_IN_PROGRESS; ++i) {
    st = T()->arm(c);
    if (st == HMC_PLUGIN_IN_PROGRESS) T()->progress(c);
  }
  return st;
}

// wait_fd + arm: an idle armed context's fd stays quiet; a message from the peer wakes it.
TEST_P(UcxLocal, ArmAndWaitFdWakeUp) {
  LocalPair p(cfg());
  ASSERT_NO_FATAL_FAILURE(p.connect());
  int fd_a = -1;
  ASSERT_EQ(T()->wait_fd(p.a, &fd_a), HMC_PLUGIN_SUCCESS);
  ASSERT_GE(fd_a, 0);
  std::vector<uint8_t> rbuf(8), sbuf(8);
  fill(sbuf.data(), 8, 5);
  hmc_net_request_t* r = nullptr;
  ASSERT_EQ(T()->irecv(p.ea, rbuf.data(), 8, nullptr, 1, &r), HMC_PLUGIN_SUCCESS);
  // Let connection setup traffic settle on both sides first.
  for (int i = 0; i < 100; ++i) {
    T()->progress(p.a);
    T()->progress(p.b);
  }
  ASSERT_EQ(arm_until_idle(p.a), HMC_PLUGIN_SUCCESS);
  EXPECT_FALSE(readable_within(fd_a, 0)) << "an idle, armed context must not look busy";
  hmc_net_request_t* s = nullptr;
  ASSERT_EQ(T()->isend(p.eb, sbuf.data(), 8, nullptr, 1, &s), HMC_PLUGIN_SUCCESS);
  int done = 0;
  for (int i = 0; i < 100000 && !done; ++i) ASSERT_EQ(T()->test(s, &done, nullptr), HMC_PLUGIN_SUCCESS);
  ASSERT_TRUE(done);
  EXPECT_TRUE(readable_within(fd_a, 5000)) << "the message did not wake the sleeping side";
  // Arming again must not let the message sleep: either arm says there is work, or the fd stays
  // readable (tcp: the socket's data keeps UCX's level-triggered event set awake).
  hmc_plugin_status_t again = T()->arm(p.a);
  EXPECT_TRUE(again == HMC_PLUGIN_IN_PROGRESS ||
              (again == HMC_PLUGIN_SUCCESS && readable_within(fd_a, 0)))
      << "arm lets a waiting message sleep (arm said " << again << ")";
  EXPECT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(first_mismatch(rbuf.data(), 8, 5), -1);
}

// A connector presenting the wrong nonce is ignored (and times out), the listener still accepts
// the right peer afterwards, and accept after the endpoint was handed out is an error.
TEST_P(UcxLocal, WrongNonceIgnoredThenRightPeerAccepted) {
  LocalPair p(cfg(), 300);
  hmc_net_ep_t* bad = nullptr;
  ASSERT_NO_FATAL_FAILURE(p.connect_with_wrong_nonce(&bad));
  hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
  uint64_t t0 = mono_ns();
  while (st == HMC_PLUGIN_IN_PROGRESS && mono_ns() - t0 < 5000000000ull) {
    EXPECT_EQ(T()->accept(p.l, &p.ea), HMC_PLUGIN_IN_PROGRESS);
    st = T()->ep_ready(bad);
  }
  double ms = static_cast<double>(mono_ns() - t0) / 1e6;
  EXPECT_EQ(st, HMC_PLUGIN_ERR_PEER_LOST);
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 2000);
  EXPECT_TRUE(p.ha.logged("wrong connection nonce"));
  EXPECT_TRUE(p.hb.logged("no answer from the listener"));
  hmc_net_request_t* r = nullptr;
  uint8_t x4[4];
  EXPECT_EQ(T()->isend(bad, x4, 4, nullptr, 1, &r), HMC_PLUGIN_ERR_PEER_LOST);
  T()->close_ep(bad);
  ASSERT_EQ(T()->connect(p.b, 0, p.handle, p.handle_len, &p.eb), HMC_PLUGIN_SUCCESS);
  ASSERT_NO_FATAL_FAILURE(p.finish_connect());
  std::vector<uint8_t> x(100), y(100);
  fill(x.data(), 100, 3);
  hmc_net_request_t *rr = nullptr, *ss = nullptr;
  ASSERT_EQ(T()->irecv(p.ea, y.data(), 100, nullptr, 1, &rr), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->isend(p.eb, x.data(), 100, nullptr, 1, &ss), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(p.wait(ss), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(p.wait(rr), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(x, y);
  hmc_net_ep_t* again = nullptr;
  EXPECT_EQ(T()->accept(p.l, &again), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
}

// The connector's hello carried outside UCX (connect_hello/accept_hello, as the core does over
// its control plane): the listener makes its endpoint from it, the connection completes and
// carries data, the connector's hello is handed over once, and the listener refuses a hello
// with the wrong nonce, garbage, and a second hello once it made its endpoint.
TEST_P(UcxLocal, HelloCarriedOutsideUcx) {
  LocalPair p(cfg());
  ASSERT_NO_FATAL_FAILURE(p.init());
  ASSERT_TRUE(HMC_ABI_HAS_FIELD(T(), hmc_net_plugin_v2_t, accept_hello));
  ASSERT_NE(T()->connect_hello, nullptr);
  ASSERT_NE(T()->accept_hello, nullptr);
  ASSERT_EQ(T()->listen(p.a, 0, p.handle, &p.handle_len, &p.l), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->connect(p.b, 0, p.handle, p.handle_len, &p.eb), HMC_PLUGIN_SUCCESS);
  std::vector<uint8_t> hello(HMC_NET_HELLO_MAX);
  size_t len = 4;  // too small a buffer: refused, the hello stays with the endpoint
  EXPECT_EQ(T()->connect_hello(p.eb, hello.data(), &len), HMC_PLUGIN_ERR_NO_MEMORY);
  len = hello.size();
  ASSERT_EQ(T()->connect_hello(p.eb, hello.data(), &len), HMC_PLUGIN_SUCCESS);
  ASSERT_GT(len, 16u);
  hello.resize(len);
  size_t again = HMC_NET_HELLO_MAX;
  std::vector<uint8_t> second(again);
  EXPECT_EQ(T()->connect_hello(p.eb, second.data(), &again), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(again, 0u) << "the hello is handed over once";
  // Nothing reaches the listener over UCX: accept stays in progress however long both run.
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(T()->accept(p.l, &p.ea), HMC_PLUGIN_IN_PROGRESS);
    EXPECT_EQ(T()->ep_ready(p.eb), HMC_PLUGIN_IN_PROGRESS);
  }
  uint8_t junk[3] = {1, 2, 3};
  EXPECT_EQ(T()->accept_hello(p.l, junk, sizeof junk), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(p.ha.logged("invalid hello"));
  ASSERT_EQ(T()->accept_hello(p.l, hello.data(), hello.size()), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(T()->accept_hello(p.l, hello.data(), hello.size()), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  ASSERT_NO_FATAL_FAILURE(p.finish_connect());
  std::vector<uint8_t> x(1000), y(1000);
  fill(x.data(), x.size(), 9);
  hmc_net_request_t *rr = nullptr, *ss = nullptr;
  ASSERT_EQ(T()->irecv(p.ea, y.data(), y.size(), nullptr, 2, &rr), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->isend(p.eb, x.data(), x.size(), nullptr, 2, &ss), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(p.wait(ss), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(p.wait(rr), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(x, y);
}

// A hello whose nonce is not the listener's is refused and leaves the listener waiting.
TEST_P(UcxLocal, CarriedHelloWithTheWrongNonceIsRefused) {
  LocalPair p(cfg(), 300);
  hmc_net_ep_t* bad = nullptr;
  ASSERT_NO_FATAL_FAILURE(p.connect_with_wrong_nonce(&bad));
  std::vector<uint8_t> hello(HMC_NET_HELLO_MAX);
  size_t len = hello.size();
  ASSERT_EQ(T()->connect_hello(bad, hello.data(), &len), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(T()->accept_hello(p.l, hello.data(), len), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(p.ha.logged("wrong connection nonce"));
  EXPECT_EQ(T()->accept(p.l, &p.ea), HMC_PLUGIN_IN_PROGRESS);
  T()->close_ep(bad);
}

// A handle whose listener was closed: nobody answers, ep_ready fails within the host timeout.
// Malformed handles are invalid arguments.
TEST_P(UcxLocal, ClosedListenerAndMalformedHandles) {
  LocalPair p(cfg(), 300);
  ASSERT_NO_FATAL_FAILURE(p.init());
  ASSERT_EQ(T()->listen(p.a, 0, p.handle, &p.handle_len, &p.l), HMC_PLUGIN_SUCCESS);
  EXPECT_LE(p.handle_len, HMC_NET_HANDLE_MAX);
  ASSERT_EQ(T()->close_listener(p.l), HMC_PLUGIN_SUCCESS);
  p.l = nullptr;
  ASSERT_EQ(T()->connect(p.b, 0, p.handle, p.handle_len, &p.eb), HMC_PLUGIN_SUCCESS);
  hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
  uint64_t t0 = mono_ns();
  while (st == HMC_PLUGIN_IN_PROGRESS && mono_ns() - t0 < 5000000000ull) {
    T()->progress(p.a);
    st = T()->ep_ready(p.eb);
  }
  EXPECT_EQ(st, HMC_PLUGIN_ERR_PEER_LOST);
  EXPECT_LT(mono_ns() - t0, 2000000000ull);
  hmc_net_ep_t* ep = nullptr;
  EXPECT_EQ(T()->connect(p.b, 0, p.handle, 3, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(T()->connect(p.b, 1, p.handle, p.handle_len, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  std::vector<uint8_t> v(p.handle, p.handle + p.handle_len);
  v[4] = 99;  // protocol version
  EXPECT_EQ(T()->connect(p.b, 0, v.data(), v.size(), &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(p.hb.logged("protocol version"));
  v = std::vector<uint8_t>(p.handle, p.handle + p.handle_len - 1);  // cut short
  EXPECT_EQ(T()->connect(p.b, 0, v.data(), v.size(), &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ep, nullptr);
}

// One-sided operations between two contexts of one process, with the owner never progressing:
// completion of a put means the data is in place.
TEST_P(UcxLocal, PutCompletionMeansDataInPlace) {
  LocalPair p(cfg());
  ASSERT_NO_FATAL_FAILURE(p.connect());
  std::vector<uint8_t> region(1u << 20, 0);
  std::vector<uint8_t> rkey;
  hmc_net_mem_desc_t d{};
  d.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_mem_desc_t);
  d.addr = region.data();
  d.len = region.size();
  d.iface = HMC_MEM_IFACE_HOST;
  d.access = HMC_NET_ACCESS_REMOTE_READ | HMC_NET_ACCESS_REMOTE_WRITE;
  d.dmabuf_fd = -1;
  d.device_ordinal = -1;
  hmc_net_mr_t* mr = nullptr;
  rkey.resize(HMC_NET_RKEY_MAX);
  size_t n = 0;
  ASSERT_EQ(T()->reg_mr(p.a, 0, &d, &mr, rkey.data(), &n), HMC_PLUGIN_SUCCESS);
  hmc_net_rkey_t* k = nullptr;
  ASSERT_EQ(T()->rkey_unpack(p.eb, rkey.data(), n, &k), HMC_PLUGIN_SUCCESS);
  std::vector<uint8_t> src(region.size());
  fill(src.data(), src.size(), 77);
  for (size_t len : {size_t{8}, size_t{5000}, region.size()}) {
    hmc_net_request_t* r = nullptr;
    ASSERT_EQ(T()->iput(p.eb, src.data(), len, nullptr, reinterpret_cast<uintptr_t>(region.data()),
                        k, &r),
              HMC_PLUGIN_SUCCESS);
    // Only b progresses (a's side is served by a's worker when the transport needs it, so
    // progress a too, but check the bytes right at completion).
    EXPECT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS) << len;
    EXPECT_EQ(first_mismatch(region.data(), len, 77), -1) << "put of " << len << " bytes";
  }
  // A zero-length region registers and yields a usable key for zero-length accesses.
  d.len = 0;
  hmc_net_mr_t* mr0 = nullptr;
  std::vector<uint8_t> rkey0(HMC_NET_RKEY_MAX);
  size_t n0 = 0;
  ASSERT_EQ(T()->reg_mr(p.a, 0, &d, &mr0, rkey0.data(), &n0), HMC_PLUGIN_SUCCESS);
  hmc_net_rkey_t* k0 = nullptr;
  ASSERT_EQ(T()->rkey_unpack(p.eb, rkey0.data(), n0, &k0), HMC_PLUGIN_SUCCESS);
  hmc_net_request_t* r = nullptr;
  ASSERT_EQ(T()->iget(p.eb, src.data(), 0, nullptr, reinterpret_cast<uintptr_t>(region.data()), k0, &r),
            HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->iget(p.eb, src.data(), 1, nullptr, reinterpret_cast<uintptr_t>(region.data()), k0, &r),
            HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(p.wait(r), HMC_PLUGIN_ERR_REMOTE);
  // A key is bound to the endpoint it was unpacked on.
  ASSERT_EQ(T()->iget(p.ea, src.data(), 8, nullptr, reinterpret_cast<uintptr_t>(region.data()), k, &r),
            HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(T()->rkey_release(k0), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(T()->rkey_release(k), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(T()->dereg_mr(p.a, mr0), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(T()->dereg_mr(p.a, mr), HMC_PLUGIN_SUCCESS);
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxLocal, ::testing::ValuesIn(variants()), variant_name);

// ---------------------------------------------------------------------------------------------
// Configuration and properties

TEST(UcxConfig, InvalidValuesFailInitNamingTheVariable) {
  SKIP_WITHOUT_PLUGIN();
  std::string err;
  ASSERT_NE(plugin(&err), nullptr) << err;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"HMC_UCX_TLS", "tcp;rm -rf"}, {"HMC_UCX_TLS", "tcp,,self"}, {"HMC_UCX_TLS", "^"},
      {"HMC_UCX_NET_DEVICES", "lo eth0"}, {"HMC_UCX_WAKEUP", "maybe"},
      {"HMC_UCX_ERROR_MODE", "sometimes"},
  };
  for (const auto& kv : bad) {
    SCOPED_TRACE(kv.first + "=" + kv.second);
    Host host(Cfg{{kv.first, kv.second}}, 5000, 0);
    hmc_net_ctx_t* c = nullptr;
    EXPECT_EQ(T()->init(host.services(), &c), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(c, nullptr);
    EXPECT_TRUE(host.logged(kv.first)) << "no log message names " << kv.first;
  }
}

// Transports UCX does not have leave the plugin with nothing to drive: NO_DEVICE, with a reason.
TEST(UcxConfig, UnknownTransportsMeanNoDevice) {
  SKIP_WITHOUT_PLUGIN();
  std::string err;
  ASSERT_NE(plugin(&err), nullptr) << err;
  Host host(Cfg{{"HMC_UCX_TLS", "hmc_no_such_transport"}}, 5000, 0);
  hmc_net_ctx_t* c = nullptr;
  hmc_plugin_status_t st = T()->init(host.services(), &c);
  EXPECT_EQ(st, HMC_PLUGIN_ERR_NO_DEVICE) << host.all_logs();
  if (st == HMC_PLUGIN_SUCCESS) T()->finalize(c);
  EXPECT_TRUE(host.logged("not used")) << host.all_logs();
}

TEST(UcxConfig, DeclaresEveryVariableItReads) {
  SKIP_WITHOUT_PLUGIN();
  std::string err;
  ASSERT_NE(plugin(&err), nullptr) << err;
  std::vector<std::string> declared;
  for (const hmc_config_var_t* v = T()->config_vars; v != nullptr && v->name != nullptr; ++v) {
    declared.push_back(v->name);
    EXPECT_NE(v->default_value, nullptr);
    EXPECT_NE(v->help, nullptr);
  }
  struct Recorder {
    std::vector<std::string> asked;
  } rec;
  Host host(Cfg{});
  hmc_host_services_t svc = *host.services();
  svc.host_ctx = &rec;
  svc.log = [](void*, int, const char*) {};
  svc.log_enabled = [](void*, int) { return 0; };
  svc.config_get = [](void* h, const char* name) -> const char* {
    static_cast<Recorder*>(h)->asked.push_back(name);
    return nullptr;
  };
  hmc_net_ctx_t* c = nullptr;
  hmc_plugin_status_t st = T()->init(&svc, &c);
  if (st == HMC_PLUGIN_ERR_NO_DEVICE) GTEST_SKIP() << "UCX cannot create a worker here";
  ASSERT_EQ(st, HMC_PLUGIN_SUCCESS);
  ASSERT_FALSE(rec.asked.empty());
  for (const std::string& name : rec.asked)
    EXPECT_NE(std::find(declared.begin(), declared.end(), name), declared.end())
        << name << " is read but not declared in config_vars";
  EXPECT_EQ(T()->finalize(c), HMC_PLUGIN_SUCCESS);
}

TEST(UcxProps, DevicesAndProperties) {
  SKIP_WITHOUT_PLUGIN();
  std::string err;
  ASSERT_NE(plugin(&err), nullptr) << err;
  const hmc_net_plugin_v2_t* t = T();
  EXPECT_EQ(t->hdr.abi_version, HMC_NET_ABI_VERSION);
  EXPECT_EQ(t->hdr.struct_size, sizeof(hmc_net_plugin_v2_t));
  EXPECT_STREQ(t->name, "ucx");
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    std::string why = unusable(v);
    if (!why.empty()) {
      std::fprintf(stderr, "skipped: %s\n", why.c_str());
      continue;
    }
    Host host(cfg_of(v), 5000, HMC_LOG_INFO);
    hmc_net_ctx_t* c = nullptr;
    ASSERT_EQ(t->init(host.services(), &c), HMC_PLUGIN_SUCCESS);
    EXPECT_TRUE(host.logged("ready: transports")) << host.all_logs();
    int n = 0;
    ASSERT_EQ(t->device_count(c, &n), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(n, 1);
    hmc_net_device_props_t p{};
    p.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
    ASSERT_EQ(t->device_props(c, 0, &p), HMC_PLUGIN_SUCCESS);
    EXPECT_STREQ(p.name, "ucx");
    uint32_t want = HMC_NET_FLAG_RMA | HMC_NET_FLAG_TAGGED |
                    (v.tls == "posix,cma,self" ? HMC_NET_FLAG_SAME_HOST : 0u);
    EXPECT_EQ(p.flags, want);
    EXPECT_TRUE(p.mem_ifaces & HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST));
    EXPECT_FALSE(p.flags & HMC_NET_FLAG_DMABUF);
    EXPECT_EQ(p.max_msg_size, 0u);
    EXPECT_EQ(t->device_props(c, 1, &p), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    // A caller compiled against a shorter struct only gets the fields that fit.
    struct Short {
      hmc_abi_header_t hdr;
      const char* name;
    };
    struct Guarded {
      Short s;
      uint64_t canary;
    } g{{{static_cast<uint32_t>(sizeof(Short)), 1}, nullptr}, 0x1122334455667788ull};
    ASSERT_EQ(t->device_props(c, 0, reinterpret_cast<hmc_net_device_props_t*>(&g.s)),
              HMC_PLUGIN_SUCCESS);
    EXPECT_STREQ(g.s.name, "ucx");
    EXPECT_EQ(g.canary, 0x1122334455667788ull);
    // Memory the plugin cannot access directly is refused, not mis-registered.
    hmc_net_mem_desc_t d{};
    d.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_mem_desc_t);
    uint8_t buf[64];
    d.addr = buf;
    d.len = sizeof(buf);
    d.iface = HMC_MEM_IFACE_CUDA;
    d.dmabuf_fd = 0;  // a dma-buf: this UCX registers none
    d.device_ordinal = -1;
    hmc_net_mr_t* mr = nullptr;
    uint8_t rkey[HMC_NET_RKEY_MAX];
    size_t rlen = 0;
    EXPECT_EQ(t->reg_mr(c, 0, &d, &mr, rkey, &rlen), HMC_PLUGIN_ERR_NOT_SUPPORTED);
    if (!(p.mem_ifaces & HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA))) {
      d.dmabuf_fd = -1;
      EXPECT_EQ(t->reg_mr(c, 0, &d, &mr, rkey, &rlen), HMC_PLUGIN_ERR_NOT_SUPPORTED);
    }
    EXPECT_EQ(t->finalize(c), HMC_PLUGIN_SUCCESS);
  }
}

// ---------------------------------------------------------------------------------------------
// Benchmarks (DISABLED_: run by hand, see the top of the file). They print one line per figure;
// compare with `bash /work/shared/bench/peers.sh` on the same machine and UCX_TLS.

// The benchmarks also pass HMC_UCX_WAKEUP and HMC_UCX_ERROR_MODE from the environment, to
// compare settings.
Cfg bench_cfg(const Variant& v) {
  Cfg c = cfg_of(v);
  for (const char* name : {"HMC_UCX_WAKEUP", "HMC_UCX_ERROR_MODE"})
    if (const char* w = getenv(name)) c[name] = w;
  return c;
}

// Keeps `window` operations in flight: posts until the window is full, then waits for the
// oldest and posts the next (as ucx_perftest's tag_bw does, so the pipe never drains mid-run).
template <typename Post>
void sliding_window(Side& s, int iters, int window, Post post) {
  std::vector<hmc_net_request_t*> ring(window, nullptr);
  for (int i = 0; i < iters + window; ++i) {
    hmc_net_request_t*& slot = ring[i % window];
    if (slot != nullptr) {
      ASSERT_EQ(s.wait(slot), HMC_PLUGIN_SUCCESS);
      slot = nullptr;
    }
    if (i < iters) {
      slot = post();
      ASSERT_NE(slot, nullptr);
    }
  }
}

void bench_bw(const Variant& v, size_t size, int iters, int window) {
  run_pair(
      bench_cfg(v),
      [&](Side& s) {
        s.set_spin_only(true);
        std::vector<uint8_t> buf(size);
        uint8_t ack = 0;
        for (int round = 0; round < 2; ++round) {  // round 0 warms up
          ASSERT_TRUE(s.signal());
          sliding_window(s, iters, window, [&] { return s.irecv(buf.data(), size, 1); });
          ASSERT_EQ(s.wait(s.isend(&ack, 1, 2)), HMC_PLUGIN_SUCCESS);
        }
      },
      [&](Side& s) {
        s.set_spin_only(true);
        std::vector<uint8_t> buf(size, 1);
        uint8_t ack = 0;
        for (int round = 0; round < 2; ++round) {
          ASSERT_TRUE(s.await());
          uint64_t t0 = mono_ns();
          sliding_window(s, iters, window, [&] { return s.isend(buf.data(), size, 1); });
          ASSERT_EQ(s.wait(s.irecv(&ack, 1, 2)), HMC_PLUGIN_SUCCESS);
          double secs = static_cast<double>(mono_ns() - t0) / 1e9;
          if (round == 1)
            std::printf("net-ucx.%s.tag_bw size %zu window %d: %.1f MB/s\n", v.name.c_str(), size,
                        window, static_cast<double>(size) * iters / secs / 1e6);
        }
      },
      300);
}

void bench_lat(const Variant& v, size_t size, int iters) {
  run_pair(
      bench_cfg(v),
      [&](Side& s) {
        s.set_spin_only(true);
        std::vector<uint8_t> buf(size);
        for (int i = 0; i < iters + iters / 10; ++i) {
          ASSERT_EQ(s.wait(s.irecv(buf.data(), size, 1)), HMC_PLUGIN_SUCCESS);
          ASSERT_EQ(s.wait(s.isend(buf.data(), size, 1)), HMC_PLUGIN_SUCCESS);
        }
      },
      [&](Side& s) {
        s.set_spin_only(true);
        std::vector<uint8_t> buf(size);
        uint64_t t0 = 0;
        for (int i = 0; i < iters + iters / 10; ++i) {
          if (i == iters / 10) t0 = mono_ns();
          hmc_net_request_t* r = s.irecv(buf.data(), size, 1);
          ASSERT_EQ(s.wait(s.isend(buf.data(), size, 1)), HMC_PLUGIN_SUCCESS);
          ASSERT_EQ(s.wait(r), HMC_PLUGIN_SUCCESS);
        }
        double us = static_cast<double>(mono_ns() - t0) / 1e3 / iters / 2;
        std::printf("net-ucx.%s.tag_lat size %zu: %.3f us (one way, half round trip)\n",
                    v.name.c_str(), size, us);
      },
      300);
}

// Two contexts in one process, one thread: the CPU cost per message of the plugin (plus UCX)
// without the scheduling noise of two processes on a busy machine. Compare with the same loop
// over raw UCP calls (plugins/net-ucx/README.md, "Performance").
TEST(UcxBench, DISABLED_InProcessPingPong) {
  for (const Variant& v : variants()) {
    if (!unusable(v).empty()) continue;
    LocalPair p(bench_cfg(v));
    ASSERT_NO_FATAL_FAILURE(p.connect());
    uint8_t buf[8] = {};
    auto one = [&](hmc_net_ep_t* from, hmc_net_ctx_t* from_ctx, hmc_net_ep_t* to) {
      hmc_net_request_t *r = nullptr, *s = nullptr;
      T()->irecv(to, buf, 8, nullptr, 1, &r);
      T()->isend(from, buf, 8, nullptr, 1, &s);
      int rd = 0, sd = 0;
      while (!rd || !sd) {
        if (!rd) T()->test(r, &rd, nullptr);
        if (!sd) T()->test(s, &sd, nullptr);
        else T()->progress(from_ctx);
      }
    };
    for (int i = 0; i < 2000; ++i) {
      one(p.eb, p.b, p.ea);
      one(p.ea, p.a, p.eb);
    }
    double best = 1e9;
    for (int rep = 0; rep < 7; ++rep) {
      const int n = 20000;
      uint64_t t0 = mono_ns();
      for (int i = 0; i < n; ++i) {
        one(p.eb, p.b, p.ea);
        one(p.ea, p.a, p.eb);
      }
      best = std::min(best, static_cast<double>(mono_ns() - t0) / 1e3 / (2.0 * n));
    }
    std::printf("net-ucx in-process %s: %.3f us per message (best of 7)\n", v.name.c_str(), best);
  }
}

TEST(UcxBench, DISABLED_TagBandwidth4MiB) {
  for (const Variant& v : variants())
    if (unusable(v).empty()) bench_bw(v, 4u << 20, 300, 16);
}

TEST(UcxBench, DISABLED_TagLatency8B) {
  for (const Variant& v : variants())
    if (unusable(v).empty()) bench_lat(v, 8, 20000);
}

}  // namespace
