// Tests for plugins/net-ofi (the libfabric net plugin), driven through its C ABI only: the
// plugin is dlopened from the build tree and each connection runs its two sides in two
// processes (fork before any thread; the child reports through its exit code), or in two
// contexts of one process where that is enough. Parameterised over the libfabric providers that
// work without special hardware: tcp (on loopback) and shm. A provider that libfabric does not
// offer here is skipped with the plugin's reason.
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "hmc/plugin/net.h"

namespace {

using Cfg = std::map<std::string, std::string>;

// ---------------------------------------------------------------------------------------------
// Harness

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string plugin_path() {
  return std::string(HMC_TEST_PLUGIN_DIR) + "/libhmc-net-ofi.so";
}

// The plugin is built only with HMC_BUILD_PLUGIN_OFI=ON and libfabric found at configure time;
// a plugin file that exists but does not load is a failure.
bool plugin_built() {
  return ::access(plugin_path().c_str(), F_OK) == 0;
}

// The plugin table, loaded once per process (before any fork; dlopen starts no thread).
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
      if (entry == nullptr)
        error = "no hmc_net_plugin_v2 symbol";
      else
        table = entry();
    }
  }
  if (err != nullptr) *err = error;
  return table;
}
const hmc_net_plugin_v2_t* T() {
  return plugin();
}

// First statement of every test: skips when the plugin was not built, fails when it does not
// load.
#define REQUIRE_PLUGIN()                                                                  \
  do {                                                                                    \
    if (!plugin_built())                                                                  \
      GTEST_SKIP() << plugin_path() << " was not built (HMC_BUILD_PLUGIN_OFI=OFF, or no " \
                   << "libfabric at configure time)";                                     \
    std::string load_error_;                                                              \
    ASSERT_NE(plugin(&load_error_), nullptr) << load_error_;                              \
  } while (0)

// Host services: config from a map, every message kept, printed to stderr at or below
// print_level.
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

// Position-dependent pattern: byte i of a buffer filled with seed s depends on (s, i), so
// shifted, misplaced or stale bytes are found.
uint64_t pattern_word(uint64_t seed, uint64_t word) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + word * 0xbf58476d1ce4e5b9ull + 1;
  z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
  return z ^ (z >> 29);
}
void fill(void* buf, size_t len, uint64_t seed, size_t offset = 0) {
  auto* p = static_cast<uint8_t*>(buf);
  for (size_t i = 0; i < len;) {
    size_t pos = offset + i;
    uint64_t w = pattern_word(seed, pos / 8);
    for (size_t k = pos % 8; k < 8 && i < len; ++k, ++i) p[i] = static_cast<uint8_t>(w >> (8 * k));
  }
}
// Index of the first byte that differs from the pattern, or -1.
long long first_mismatch(const void* buf, size_t len, uint64_t seed, size_t offset = 0) {
  const auto* p = static_cast<const uint8_t*>(buf);
  for (size_t i = 0; i < len;) {
    size_t pos = offset + i;
    uint64_t w = pattern_word(seed, pos / 8);
    for (size_t k = pos % 8; k < 8 && i < len; ++k, ++i)
      if (p[i] != static_cast<uint8_t>(w >> (8 * k))) return static_cast<long long>(i);
  }
  return -1;
}

struct InitProbe {
  int status = HMC_PLUGIN_ERR_INTERNAL;
  std::string logs;
};

// Whether init succeeds with cfg, found in a throwaway child so that this process has not
// initialised libfabric (and started none of its threads) before the tests fork.
InitProbe probe_init(const Cfg& cfg) {
  static std::map<Cfg, InitProbe> memo;
  auto it = memo.find(cfg);
  if (it != memo.end()) return it->second;
  InitProbe res;
  int p[2];
  if (::pipe(p) != 0) return res;
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    Host h(cfg, 5000, 0);
    hmc_net_ctx_t* c = nullptr;
    int st = T()->init(h.services(), &c);
    if (st == HMC_PLUGIN_SUCCESS) T()->finalize(c);
    std::string msg = std::to_string(st) + "\n" + h.all_logs();
    size_t off = 0;
    while (off < msg.size()) {
      ssize_t n = ::write(p[1], msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(p[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  int wst = 0;
  ::waitpid(pid, &wst, 0);
  size_t nl = out.find('\n');
  if (nl != std::string::npos) {
    res.status = std::atoi(out.substr(0, nl).c_str());
    res.logs = out.substr(nl + 1);
  } else {
    res.logs = "the probe child died (status " + std::to_string(wst) + ")";
  }
  memo[cfg] = res;
  return res;
}

// One side of a connection: a context, an endpoint on device 0, and the control socket to the
// other side.
class Side {
 public:
  Side(Cfg cfg, int ctl, uint32_t timeout_ms = 5000)
      : host_(std::move(cfg), timeout_ms), ctl_(ctl) {}
  ~Side() { close(); }
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;

  hmc_net_ctx_t* ctx() const { return ctx_; }
  hmc_net_ep_t* ep() const { return ep_; }
  Host& host() { return host_; }

  // Listener side: init, listen, send the handle over ctl, accept. Connector side: init, read
  // the handle, connect, wait for ep_ready. Returns "" or what went wrong.
  std::string setup(bool listener, double timeout_s = 10) {
    int st = T()->init(host_.services(), &ctx_);
    if (st != HMC_PLUGIN_SUCCESS) return "init failed: " + std::to_string(st);
    uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
    if (listener) {
      uint8_t handle[HMC_NET_HANDLE_MAX];
      size_t len = 0;
      st = T()->listen(ctx_, 0, handle, &len, &listener_);
      if (st != HMC_PLUGIN_SUCCESS) return "listen failed: " + std::to_string(st);
      if (!ctl_send(handle, len)) return "ctl send failed";
      for (;;) {
        st = T()->accept(listener_, &ep_);
        if (st == HMC_PLUGIN_SUCCESS) break;
        if (st != HMC_PLUGIN_IN_PROGRESS) return "accept failed: " + std::to_string(st);
        if (mono_ns() > deadline) return "accept timed out";
      }
      T()->close_listener(listener_);
      listener_ = nullptr;
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
    if (ep_ != nullptr) T()->close_ep(ep_);
    if (listener_ != nullptr) T()->close_listener(listener_);
    if (ctx_ != nullptr) T()->finalize(ctx_);
    ep_ = nullptr;
    listener_ = nullptr;
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
  int last_post() const { return last_; }

  // After enough fruitless spins: arm, then sleep on wait_fd (and extra_fd) for at most 20 ms,
  // as the core does. A lost wake-up costs time here, not a hang; the wake-up test is strict.
  void idle(int* spins, int extra_fd = -1) {
    if (++*spins < 200) return;
    *spins = 0;
    int fd = -1;
    if (T()->wait_fd(ctx_, &fd) != HMC_PLUGIN_SUCCESS || T()->arm(ctx_) != HMC_PLUGIN_SUCCESS) {
      sched_yield();
      return;
    }
    pollfd p[2] = {{fd, POLLIN, 0}, {extra_fd, POLLIN, 0}};
    ::poll(p, extra_fd >= 0 ? 2 : 1, 20);
  }

  // Tests r until it ends (its status) or the timeout passes (IN_PROGRESS, r left pending).
  int wait(hmc_net_request_t* r, size_t* bytes = nullptr, double timeout_s = 30) {
    uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
    int spins = 0;
    for (unsigned polls = 0;; ++polls) {
      int done = 0;
      size_t b = 0;
      int st = T()->test(r, &done, &b);
      if (done) {
        if (bytes != nullptr) *bytes = b;
        return st;
      }
      if ((polls & 63) == 0 && mono_ns() > deadline) return HMC_PLUGIN_IN_PROGRESS;
      idle(&spins);
    }
  }
  std::vector<int> wait_all(const std::vector<hmc_net_request_t*>& reqs,
                            std::vector<size_t>* bytes = nullptr, double timeout_s = 30) {
    std::vector<int> st(reqs.size(), HMC_PLUGIN_IN_PROGRESS);
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
        int s = T()->test(reqs[i], &d, &b);
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
  hmc_net_listener_t* listener_ = nullptr;
  hmc_net_ep_t* ep_ = nullptr;
  int last_ = HMC_PLUGIN_SUCCESS;
};

// Waits (bounded) until fd reports EOF: the process at the other end of the socket is gone.
bool await_eof(int fd, double timeout_s) {
  uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
  while (mono_ns() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) {
      char b[256];
      ssize_t n = ::recv(fd, b, sizeof(b), 0);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return true;
    }
  }
  return false;
}

int child_exit() {
  return ::testing::Test::HasFailure() ? 1 : 0;
}

// A child killed on purpose leaves its shm provider region in /dev/shm (the plugin names it
// "hmc-<pid>-<random>"): removes it, so that test runs do not fill the tmpfs.
void remove_shm_regions_of(pid_t pid) {
  std::string prefix = "hmc-" + std::to_string(pid) + "-";
  DIR* d = ::opendir("/dev/shm");
  if (!d) return;
  while (dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
      ::unlink(("/dev/shm/" + std::string(e->d_name)).c_str());
  ::closedir(d);
}

struct PairResult {
  std::string parent_setup_error;
  int child_status = -1;  // raw waitpid status
  bool child_timed_out = false;
};

// Forks; the child is the connector and runs `child`, the parent the listener and runs
// `parent`. The child exits 0 when it saw no failure, 100 when its setup failed.
PairResult run_pair(const Cfg& cfg, const std::function<void(Side&)>& parent,
                    const std::function<void(Side&)>& child, double timeout_s,
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
      Side s(cfg, sv[1], host_timeout_ms);
      std::string err = s.setup(false);
      if (err.empty()) {
        child(s);
        code = child_exit();
      } else {
        std::fprintf(stderr, "child setup: %s\n", err.c_str());
      }
    }
    std::fflush(stderr);
    ::_exit(code);
  }
  ::close(sv[1]);
  {
    Side s(cfg, sv[0], host_timeout_ms);
    res.parent_setup_error = s.setup(true);
    if (res.parent_setup_error.empty()) parent(s);
  }
  if (!await_eof(sv[0], timeout_s)) {
    ::kill(pid, SIGKILL);
    res.child_timed_out = true;
  }
  ::close(sv[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  res.child_status = status;
  remove_shm_regions_of(pid);
  return res;
}

// ---------------------------------------------------------------------------------------------
// Variants

struct Variant {
  std::string name;
  std::string provider;
  Cfg cfg;
};

void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.name;
}
std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  return info.param.name;
}

Variant make_variant(const std::string& name, const std::string& provider, Cfg extra = {}) {
  Variant v{name, provider, {{"HMC_OFI_PROVIDER", provider}}};
  for (auto& kv : extra) v.cfg[kv.first] = kv.second;
  return v;
}

// Skips when libfabric does not offer the provider here (init answers NO_DEVICE, found in a
// child process); fails when init fails otherwise.
void require_provider(const Cfg& cfg, const std::string& provider) {
  REQUIRE_PLUGIN();
  InitProbe p = probe_init(cfg);
  if (p.status == HMC_PLUGIN_ERR_NO_DEVICE)
    GTEST_SKIP() << "libfabric provider '" << provider << "' is not usable here: " << p.logs;
  ASSERT_EQ(p.status, HMC_PLUGIN_SUCCESS) << "init failed: " << p.logs;
}

class OfiPair : public ::testing::TestWithParam<Variant> {
 protected:
  // Both sides initialise after the fork; a provider missing here shows as NO_DEVICE there,
  // and run() turns it into a skip (no separate probe: initialising libfabric costs ~0.5 s).
  void SetUp() override { REQUIRE_PLUGIN(); }

  // Runs parent (listener) and child (connector) in two processes. killed_by: the signal the
  // child is meant to die of (0: it must exit cleanly).
  void run(const std::function<void(Side&)>& parent, const std::function<void(Side&)>& child,
           double timeout_s = 40, int killed_by = 0, uint32_t host_timeout_ms = 5000) {
    PairResult r = run_pair(GetParam().cfg, parent, child, timeout_s, host_timeout_ms);
    if (r.parent_setup_error == "init failed: " + std::to_string(HMC_PLUGIN_ERR_NO_DEVICE))
      GTEST_SKIP() << "libfabric provider '" << GetParam().provider << "' is not usable here "
                   << "(init: NO_DEVICE; the reason is in the plugin's log above)";
    ASSERT_EQ(r.parent_setup_error, "");
    ASSERT_FALSE(r.child_timed_out) << "the child side did not finish within " << timeout_s << " s";
    if (killed_by != 0) {
      ASSERT_TRUE(WIFSIGNALED(r.child_status) && WTERMSIG(r.child_status) == killed_by)
          << "the child side should have died of signal " << killed_by << " (its output is above)";
      return;
    }
    ASSERT_TRUE(WIFEXITED(r.child_status))
        << "the child side died of signal " << WTERMSIG(r.child_status);
    EXPECT_EQ(WEXITSTATUS(r.child_status), 0) << "the child side failed (its output is above)";
  }
};

// ---------------------------------------------------------------------------------------------
// Two-sided

// Posts receives for sizes[i] under tag base+i, signals the peer, checks pattern seed+i.
void receive_sizes(Side& s, const std::vector<size_t>& sizes, uint64_t tag_base, uint64_t seed) {
  std::vector<std::vector<uint8_t>> bufs(sizes.size());
  std::vector<hmc_net_request_t*> reqs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    bufs[i].assign(std::max<size_t>(sizes[i], 1) + 16, 0xee);
    hmc_net_request_t* r = s.irecv(bufs[i].data(), sizes[i], tag_base + i);
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
    EXPECT_EQ(bufs[i][sizes[i]], 0xee) << "receive of " << sizes[i] << " wrote past its length";
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
    hmc_net_request_t* r = s.isend(bufs[i].data(), sizes[i], tag_base + i);
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

const std::vector<size_t> kSizes = {0, 1, 8, 64, 65, 4096, 4097, 64u << 10, (4u << 20) + 3};

TEST_P(OfiPair, SendRecvSizesBothDirections) {
  run(
      [&](Side& s) {
        receive_sizes(s, kSizes, 100, 1000);
        send_sizes(s, kSizes, 200, 2000);
      },
      [&](Side& s) {
        send_sizes(s, kSizes, 100, 1000);
        receive_sizes(s, kSizes, 200, 2000);
      });
}

// Same-tag messages match receives in send order, for small and large messages, whether the
// receives were posted first or the messages arrived first; distinct tags match by tag.
TEST_P(OfiPair, TagOrdering) {
  constexpr int kN = 20;
  constexpr uint64_t kTagA = 5, kTagB = 6, kMarker = 7;
  auto size_of = [](int k) -> size_t { return k % 2 ? (1u << 20) + k : 16u + k; };
  run(
      [&](Side& s) {
        // Phase 1: receives posted first.
        std::vector<std::vector<uint8_t>> bufs(kN, std::vector<uint8_t>((1u << 20) + 64));
        std::vector<hmc_net_request_t*> reqs;
        for (int k = 0; k < kN; ++k) reqs.push_back(s.irecv(bufs[k].data(), bufs[k].size(), kTagA));
        for (auto* r : reqs) ASSERT_NE(r, nullptr);
        ASSERT_TRUE(s.signal());
        std::vector<size_t> bytes;
        auto st = s.wait_all(reqs, &bytes);
        for (int k = 0; k < kN; ++k) {
          EXPECT_EQ(st[k], HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(bytes[k], size_of(k)) << "receive " << k << " got another message";
          EXPECT_EQ(first_mismatch(bufs[k].data(), size_of(k), 500 + k), -1) << "message " << k;
        }
        // Phase 2: the messages arrive first; the marker, sent after them, says they are here.
        std::vector<uint8_t> marker(8);
        ASSERT_EQ(s.wait(s.irecv(marker.data(), 8, kMarker)), HMC_PLUGIN_SUCCESS);
        reqs.clear();
        for (int k = 0; k < kN; ++k) reqs.push_back(s.irecv(bufs[k].data(), bufs[k].size(), kTagB));
        st = s.wait_all(reqs, &bytes);
        for (int k = 0; k < kN; ++k) {
          EXPECT_EQ(st[k], HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(bytes[k], size_of(k)) << "unexpected receive " << k << " got another message";
          EXPECT_EQ(first_mismatch(bufs[k].data(), size_of(k), 700 + k), -1) << "message " << k;
        }
        // Phase 3: receives for tags 30..21 posted in reverse; the peer sends 21..30.
        std::vector<std::vector<uint8_t>> r3(10, std::vector<uint8_t>(4096));
        reqs.clear();
        for (int t = 30; t >= 21; --t) reqs.push_back(s.irecv(r3[30 - t].data(), 4096, t));
        ASSERT_TRUE(s.signal());
        st = s.wait_all(reqs, &bytes);
        for (int t = 30; t >= 21; --t) {
          size_t i = static_cast<size_t>(30 - t);
          EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(bytes[i], static_cast<size_t>(100 + t)) << "tag " << t;
          EXPECT_EQ(first_mismatch(r3[i].data(), 100 + t, 900 + t), -1) << "tag " << t;
        }
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> a(kN), b(kN);
        for (int k = 0; k < kN; ++k) {
          a[k].resize(size_of(k));
          fill(a[k].data(), a[k].size(), 500 + k);
          b[k].resize(size_of(k));
          fill(b[k].data(), b[k].size(), 700 + k);
        }
        ASSERT_TRUE(s.await());
        std::vector<hmc_net_request_t*> reqs;
        for (int k = 0; k < kN; ++k) reqs.push_back(s.isend(a[k].data(), a[k].size(), kTagA));
        for (int k = 0; k < kN; ++k) reqs.push_back(s.isend(b[k].data(), b[k].size(), kTagB));
        uint8_t marker[8] = {};
        reqs.push_back(s.isend(marker, 8, kMarker));
        for (auto* r : reqs) ASSERT_NE(r, nullptr);
        for (int st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        std::vector<std::vector<uint8_t>> b3(31);
        ASSERT_TRUE(s.await());
        reqs.clear();
        for (int t = 21; t <= 30; ++t) {
          b3[t].resize(100 + t);
          fill(b3[t].data(), b3[t].size(), 900 + t);
          reqs.push_back(s.isend(b3[t].data(), b3[t].size(), t));
        }
        for (int st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.await());
      });
}

// Messages sent before any receive was posted (small ones buffered by the provider, large ones
// waiting in rendezvous) reach the receives posted later intact.
TEST_P(OfiPair, UnexpectedMessages) {
  constexpr size_t kSmall = 1000, kLarge = (4u << 20) + 3;
  run(
      [&](Side& s) {
        std::vector<uint8_t> marker(8), small(kSmall), large(kLarge + 100, 0xcd);
        ASSERT_EQ(s.wait(s.irecv(marker.data(), 8, 12)), HMC_PLUGIN_SUCCESS);
        size_t b1 = 0, b2 = 0;
        hmc_net_request_t* rl = s.irecv(large.data(), large.size(), 11);
        hmc_net_request_t* rs = s.irecv(small.data(), small.size(), 10);
        ASSERT_NE(rl, nullptr);
        ASSERT_NE(rs, nullptr);
        EXPECT_EQ(s.wait(rs, &b1), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(s.wait(rl, &b2), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(b1, kSmall);
        EXPECT_EQ(b2, kLarge);
        EXPECT_EQ(first_mismatch(small.data(), kSmall, 10), -1);
        EXPECT_EQ(first_mismatch(large.data(), kLarge, 11), -1);
        EXPECT_EQ(large[kLarge], 0xcd);
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        std::vector<uint8_t> small(kSmall), large(kLarge), marker(8);
        fill(small.data(), kSmall, 10);
        fill(large.data(), kLarge, 11);
        std::vector<hmc_net_request_t*> reqs = {s.isend(small.data(), kSmall, 10),
                                                s.isend(large.data(), kLarge, 11),
                                                s.isend(marker.data(), 8, 12)};
        for (auto* r : reqs) ASSERT_NE(r, nullptr);
        for (int st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.await());
      });
}

// A receive buffer smaller than the message ends the receive with TRUNCATED; nothing past the
// buffer is written, the send succeeds, and later messages arrive intact.
TEST_P(OfiPair, Truncation) {
  struct Case {
    uint64_t tag;
    size_t msg;
    size_t buf;
  };
  const std::vector<Case> posted = {
      {1, 100, 50}, {2, 1u << 20, 1000}, {3, 64u << 10, 0}, {4, 5, 5}};
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
          const bool trunc = c.msg > c.buf;
          EXPECT_EQ(st[i], trunc ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS)
              << "tag " << c.tag;
          EXPECT_EQ(bytes[i], c.msg) << "tag " << c.tag << ": a truncated receive reports "
                                     << "the length that was sent";
          if (!trunc) {
            EXPECT_EQ(first_mismatch(bufs[i].data(), c.msg, 300 + c.tag), -1);
          }
          for (size_t k = c.buf; k < bufs[i].size(); ++k)
            ASSERT_EQ(bufs[i][k], 0xab) << "tag " << c.tag << " wrote past its buffer at " << k;
        }
        std::vector<uint8_t> marker(8);
        ASSERT_EQ(s.wait(s.irecv(marker.data(), 8, 8)), HMC_PLUGIN_SUCCESS);
        for (const Case& c : late) {
          std::vector<uint8_t> b(c.buf + 16, 0xab);
          size_t n = 0;
          EXPECT_EQ(s.wait(s.irecv(b.data(), c.buf, c.tag), &n), HMC_PLUGIN_ERR_TRUNCATED);
          EXPECT_EQ(n, c.msg) << "tag " << c.tag;
          for (size_t k = c.buf; k < b.size(); ++k) ASSERT_EQ(b[k], 0xab) << "tag " << c.tag;
        }
        // The connection is still in sync.
        std::vector<uint8_t> after(300000);
        size_t n = 0;
        EXPECT_EQ(s.wait(s.irecv(after.data(), after.size(), 10), &n), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(n, after.size());
        EXPECT_EQ(first_mismatch(after.data(), after.size(), 310), -1);
        ASSERT_TRUE(s.signal());
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
        send(10, 300000);
        auto st = s.wait_all(reqs);
        for (size_t i = 0; i < st.size(); ++i) EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS) << "send " << i;
        ASSERT_TRUE(s.await());
      });
}

TEST_P(OfiPair, CancelUnmatchedReceive) {
  run(
      [&](Side& s) {
        std::vector<uint8_t> b1(64), b3(64);
        hmc_net_request_t* r1 = s.irecv(b1.data(), 64, 77);
        ASSERT_NE(r1, nullptr);
        ASSERT_EQ(T()->cancel(r1), HMC_PLUGIN_SUCCESS);
        size_t n = 99;
        EXPECT_EQ(s.wait(r1, &n, 5), HMC_PLUGIN_ERR_CANCELLED);
        EXPECT_EQ(n, 0u);
        // A message with the cancelled tag goes to the next receive, not the cancelled one.
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
        EXPECT_EQ(b1, std::vector<uint8_t>(64, 0)) << "the cancelled receive's buffer was written";
        // Sends cannot be cancelled: they end normally.
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
TEST_P(OfiPair, ManyRequestsInFlight) {
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
      ASSERT_NE(reqs.back(), nullptr) << s.last_post();
    }
    ASSERT_TRUE(s.signal());
    ASSERT_TRUE(s.await());
    for (int i = 0; i < kN; ++i) {
      sb[i].resize(std::max<size_t>(size_of(i), 1));
      fill(sb[i].data(), size_of(i), my_seed + i);
      reqs.push_back(s.isend(sb[i].data(), size_of(i), static_cast<uint64_t>(i)));
      ASSERT_NE(reqs.back(), nullptr) << s.last_post();
    }
    std::vector<size_t> bytes;
    auto st = s.wait_all(reqs, &bytes);
    for (size_t j = 0; j < reqs.size(); ++j)
      EXPECT_EQ(st[j], HMC_PLUGIN_SUCCESS) << "request " << j;
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
// One-sided

void send_region(Side& s, uint64_t base, const std::vector<uint8_t>& rkey) {
  ASSERT_TRUE(s.send_value(base));
  ASSERT_TRUE(s.ctl_send(rkey.data(), rkey.size()));
}

struct RemoteRegion {
  uint64_t base = 0;
  std::vector<uint8_t> rkey;
};

RemoteRegion recv_region(Side& s) {
  RemoteRegion r;
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

int put(Side& s, const void* buf, size_t len, uint64_t addr, hmc_net_rkey_t* k) {
  hmc_net_request_t* r = nullptr;
  int st = T()->iput(s.ep(), buf, len, nullptr, addr, k, &r);
  return st != HMC_PLUGIN_SUCCESS ? st : s.wait(r);
}

int get(Side& s, void* buf, size_t len, uint64_t addr, hmc_net_rkey_t* k) {
  hmc_net_request_t* r = nullptr;
  int st = T()->iget(s.ep(), buf, len, nullptr, addr, k, &r);
  return st != HMC_PLUGIN_SUCCESS ? st : s.wait(r);
}

constexpr uint32_t kRemoteRw = HMC_NET_ACCESS_REMOTE_READ | HMC_NET_ACCESS_REMOTE_WRITE;

// Puts land byte-exact and are in place when they complete (the owner checks right after the
// initiator's signal, without a round trip of its own); gets read them back.
TEST_P(OfiPair, PutGetByteExact) {
  constexpr size_t kRegion = 10u << 20;
  constexpr size_t kOffA = 5, kLenA = 100;
  constexpr size_t kOffB = (1u << 20) + 1, kLenB = (4u << 20) + 3;
  constexpr size_t kOffC = 9u << 20, kLenC = 4096;
  run(
      [&](Side& s) {
        std::vector<uint8_t> region(kRegion);
        fill(region.data(), kRegion, 7);
        std::vector<uint8_t> rkey;
        hmc_net_mr_t* mr = reg(s, region.data(), kRegion, HMC_NET_ACCESS_LOCAL | kRemoteRw, &rkey);
        ASSERT_NE(mr, nullptr);
        send_region(s, reinterpret_cast<uintptr_t>(region.data()), rkey);
        ASSERT_TRUE(s.await());  // the peer's puts completed
        const uint8_t* p = region.data();
        EXPECT_EQ(first_mismatch(p, kOffA, 7), -1);
        EXPECT_EQ(first_mismatch(p + kOffA, kLenA, 8), -1) << "put A is not in place";
        EXPECT_EQ(first_mismatch(p + kOffA + kLenA, kOffB - kOffA - kLenA, 7, kOffA + kLenA), -1);
        EXPECT_EQ(first_mismatch(p + kOffB, kLenB, 9), -1) << "put B is not in place";
        EXPECT_EQ(first_mismatch(p + kOffB + kLenB, kRegion - kOffB - kLenB, 7, kOffB + kLenB), -1);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());  // the peer's gets are done
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
        hmc_net_request_t *ra = nullptr, *rb = nullptr, *r0 = nullptr;
        ASSERT_EQ(T()->iput(s.ep(), a.data(), kLenA, nullptr, rr.base + kOffA, k, &ra),
                  HMC_PLUGIN_SUCCESS);
        ASSERT_EQ(T()->iput(s.ep(), b.data(), kLenB, nullptr, rr.base + kOffB, k, &rb),
                  HMC_PLUGIN_SUCCESS);
        ASSERT_EQ(T()->iput(s.ep(), a.data(), 0, nullptr, rr.base + kRegion, k, &r0),
                  HMC_PLUGIN_SUCCESS);
        std::vector<size_t> bytes;
        auto st = s.wait_all({ra, rb, r0}, &bytes);
        EXPECT_EQ(st[0], HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(st[1], HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(st[2], HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(bytes[1], kLenB);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
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

// Out-of-range addresses and accesses the owner did not grant end with REMOTE before anything
// is posted (tcp and shm do not check bounds at the target: shm would write past the region,
// tcp would drop the connection), the owner's memory is untouched, and the connection works on.
TEST_P(OfiPair, RemoteAccessRefusedByTheInitiator) {
  constexpr size_t kArena = 1u << 20, kReg = 128u << 10;
  constexpr size_t kRw = 128u << 10, kRo = 384u << 10, kWo = 640u << 10;
  constexpr size_t kOkOff = 100, kOkLen = 5000;
  run(
      [&](Side& s) {
        std::vector<uint8_t> arena(kArena);
        fill(arena.data(), kArena, 20);
        uint8_t* a = arena.data();
        std::vector<uint8_t> k_rw, k_ro, k_wo;
        hmc_net_mr_t* m_rw = reg(s, a + kRw, kReg, kRemoteRw, &k_rw);
        hmc_net_mr_t* m_ro = reg(s, a + kRo, kReg, HMC_NET_ACCESS_REMOTE_READ, &k_ro);
        hmc_net_mr_t* m_wo = reg(s, a + kWo, kReg, HMC_NET_ACCESS_REMOTE_WRITE, &k_wo);
        send_region(s, reinterpret_cast<uintptr_t>(a + kRw), k_rw);
        send_region(s, reinterpret_cast<uintptr_t>(a + kRo), k_ro);
        send_region(s, reinterpret_cast<uintptr_t>(a + kWo), k_wo);
        ASSERT_TRUE(s.await());
        // Everything is as filled, except the two puts that were allowed.
        EXPECT_EQ(first_mismatch(a, kRw + kOkOff, 20), -1);
        EXPECT_EQ(first_mismatch(a + kRw + kOkOff, kOkLen, 22), -1);
        EXPECT_EQ(first_mismatch(a + kRw + kOkOff + kOkLen, kWo - kRw - kOkOff - kOkLen, 20,
                                 kRw + kOkOff + kOkLen),
                  -1);
        EXPECT_EQ(first_mismatch(a + kWo, 1000, 21), -1);
        EXPECT_EQ(first_mismatch(a + kWo + 1000, kArena - kWo - 1000, 20, kWo + 1000), -1);
        for (hmc_net_mr_t* m : {m_rw, m_ro, m_wo})
          EXPECT_EQ(T()->dereg_mr(s.ctx(), m), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        RemoteRegion rw = recv_region(s), ro = recv_region(s), wo = recv_region(s);
        hmc_net_rkey_t* k_rw = unpack(s, rw.rkey);
        hmc_net_rkey_t* k_ro = unpack(s, ro.rkey);
        hmc_net_rkey_t* k_wo = unpack(s, wo.rkey);
        ASSERT_TRUE(k_rw && k_ro && k_wo);
        std::vector<uint8_t> src(256u << 10), dst(256u << 10);
        fill(src.data(), src.size(), 99);
        struct Bad {
          const char* what;
          uint64_t addr;
          size_t len;
        };
        const std::vector<Bad> bad = {
            {"before the region", rw.base - 1, 10},
            {"past the end", rw.base + kReg - 5, 10},
            {"large, past the end", rw.base + kReg - 5, 200u << 10},
            {"large, before the region", rw.base - 64, 200u << 10},
            {"starts after the end", rw.base + kReg + 1, 0},
            {"address wraps around", UINT64_MAX - 4, 10},
        };
        for (const Bad& b : bad) {
          EXPECT_EQ(put(s, src.data(), b.len, b.addr, k_rw), HMC_PLUGIN_ERR_REMOTE)
              << "put " << b.what;
          EXPECT_EQ(get(s, dst.data(), b.len, b.addr, k_rw), HMC_PLUGIN_ERR_REMOTE)
              << "get " << b.what;
        }
        // Access: no puts into read-only memory, no gets from write-only memory.
        EXPECT_EQ(put(s, src.data(), 10, ro.base, k_ro), HMC_PLUGIN_ERR_REMOTE);
        EXPECT_EQ(put(s, src.data(), 100000, ro.base, k_ro), HMC_PLUGIN_ERR_REMOTE);
        EXPECT_EQ(get(s, dst.data(), 10, wo.base, k_wo), HMC_PLUGIN_ERR_REMOTE);
        // A malformed key is refused at unpack.
        hmc_net_rkey_t* junk = nullptr;
        std::vector<uint8_t> forged = rw.rkey;
        forged[0] ^= 0xff;
        EXPECT_EQ(T()->rkey_unpack(s.ep(), forged.data(), forged.size(), &junk),
                  HMC_PLUGIN_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(T()->rkey_unpack(s.ep(), rw.rkey.data(), 7, &junk),
                  HMC_PLUGIN_ERR_INVALID_ARGUMENT);
        // What the owner granted works, on the same connection, afterwards.
        EXPECT_EQ(get(s, dst.data(), 5000, ro.base + 8, k_ro), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(dst.data(), 5000, 20, kRo + 8), -1);
        std::vector<uint8_t> w(1000);
        fill(w.data(), w.size(), 21);
        EXPECT_EQ(put(s, w.data(), w.size(), wo.base, k_wo), HMC_PLUGIN_SUCCESS);
        std::vector<uint8_t> ok(kOkLen);
        fill(ok.data(), kOkLen, 22);
        EXPECT_EQ(put(s, ok.data(), kOkLen, rw.base + kOkOff, k_rw), HMC_PLUGIN_SUCCESS);
        for (hmc_net_rkey_t* k : {k_rw, k_ro, k_wo})
          EXPECT_EQ(T()->rkey_release(k), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      });
}

// ---------------------------------------------------------------------------------------------
// Peer death

// The child dies (SIGKILL) with a receive of the parent pending on it. RDM has no connection
// to watch: tcp refuses every later post towards the dead peer (-FI_EAGAIN), shm delivers into
// its queue and nobody answers. Either way the plugin notices within the host's timeout (2.5 s
// here): the send ends with PEER_LOST, so does the pending receive, later posts fail with it,
// and close_ep returns at once, releasing what is left.
TEST_P(OfiPair, PeerKilled) {
  run(
      [&](Side& s) {
        std::vector<uint8_t> small(64), out(256u << 10);
        hmc_net_request_t* r_never = s.irecv(small.data(), small.size(), 2);
        ASSERT_NE(r_never, nullptr);
        ASSERT_TRUE(s.signal());
        std::vector<uint8_t> ignored;
        ASSERT_FALSE(s.ctl_recv(&ignored, 10)) << "the child did not die";
        uint64_t t0 = mono_ns();
        hmc_net_request_t* r = nullptr;
        int st = T()->isend(s.ep(), out.data(), out.size(), nullptr, 3, &r);
        if (st == HMC_PLUGIN_SUCCESS) st = s.wait(r, nullptr, 8);
        double secs = static_cast<double>(mono_ns() - t0) / 1e9;
        std::printf("[ info ] %s: the send to the dead peer ended with %d after %.3f s\n",
                    GetParam().name.c_str(), st, secs);
        EXPECT_EQ(st, HMC_PLUGIN_ERR_PEER_LOST);
        EXPECT_LT(secs, 5.5);
        // The lost peer's pending receive ended with it; later posts fail.
        EXPECT_EQ(s.wait(r_never, nullptr, 2), HMC_PLUGIN_ERR_PEER_LOST);
        EXPECT_EQ(T()->irecv(s.ep(), small.data(), small.size(), nullptr, 4, &r),
                  HMC_PLUGIN_ERR_PEER_LOST);
        EXPECT_EQ(T()->isend(s.ep(), small.data(), small.size(), nullptr, 4, &r),
                  HMC_PLUGIN_ERR_PEER_LOST);
        EXPECT_TRUE(s.host().logged("peer lost")) << s.host().all_logs();
        uint64_t c0 = mono_ns();
        s.close_ep();
        EXPECT_LT(mono_ns() - c0, 1000000000ull) << "close_ep blocked";
      },
      [&](Side& s) {
        ASSERT_TRUE(s.await());
        if (::testing::Test::HasFailure()) _exit(1);
        raise(SIGKILL);
      },
      30, SIGKILL, 2500);
}

// The core closes the endpoint of a dead peer before the plugin noticed (its control channel
// saw the process go): close_ep returns at once and releases the pending requests.
TEST_P(OfiPair, CloseAfterPeerDeath) {
  run(
      [&](Side& s) {
        std::vector<uint8_t> small(64), out(256u << 10);
        ASSERT_NE(s.irecv(small.data(), small.size(), 2), nullptr);
        ASSERT_TRUE(s.signal());
        std::vector<uint8_t> ignored;
        ASSERT_FALSE(s.ctl_recv(&ignored, 10)) << "the child did not die";
        // Posts may already fail with PEER_LOST (tcp may have seen the connection break).
        for (size_t n : {out.size(), small.size()}) {
          hmc_net_request_t* r = s.isend(out.data(), n, 3);
          EXPECT_TRUE(r != nullptr || s.last_post() == HMC_PLUGIN_ERR_PEER_LOST) << s.last_post();
        }
        uint64_t c0 = mono_ns();
        s.close_ep();
        EXPECT_LT(mono_ns() - c0, 1000000000ull) << "close_ep blocked";
        EXPECT_TRUE(s.host().logged("endpoint closed: ")) << s.host().all_logs();
        // The context goes on: it can listen for the next peer.
        uint8_t handle[HMC_NET_HANDLE_MAX];
        size_t len = 0;
        hmc_net_listener_t* l = nullptr;
        EXPECT_EQ(T()->listen(s.ctx(), 0, handle, &len, &l), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(T()->close_listener(l), HMC_PLUGIN_SUCCESS);
      },
      [&](Side& s) {
        ASSERT_TRUE(s.await());
        if (::testing::Test::HasFailure()) _exit(1);
        raise(SIGKILL);
      },
      30, SIGKILL);
}

// close_ep with a receive and a send pending returns at once; the context stays usable and
// finalize releases the rest.
TEST_P(OfiPair, CloseWithPendingRequests) {
  run(
      [&](Side& s) {
        std::vector<uint8_t> b(64), out(1u << 20);
        ASSERT_NE(s.irecv(b.data(), b.size(), 1), nullptr);
        ASSERT_NE(s.isend(out.data(), out.size(), 2), nullptr);  // the peer never receives it
        ASSERT_TRUE(s.await());
        uint64_t t0 = mono_ns();
        s.close_ep();
        EXPECT_LT(mono_ns() - t0, 1000000000ull) << "close_ep blocked";
        // A new listener on the same context still works (the harness is done with it).
        uint8_t handle[HMC_NET_HANDLE_MAX];
        size_t len = 0;
        hmc_net_listener_t* l = nullptr;
        EXPECT_EQ(T()->listen(s.ctx(), 0, handle, &len, &l), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(T()->close_listener(l), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      });
}

// ---------------------------------------------------------------------------------------------
// Two peers on one context

// The parent accepts two children on one context; both send with the same tags. Each endpoint
// gets only its own peer's messages, in both directions.
TEST_P(OfiPair, TwoPeersDoNotCrossMatch) {
  const Cfg cfg = GetParam().cfg;
  ASSERT_NO_FATAL_FAILURE(require_provider(cfg, GetParam().provider));
  if (IsSkipped()) return;
  constexpr int kTags = 4;
  constexpr size_t kLen = 70000;
  int sv[2][2];
  for (auto& p : sv) ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p), 0);
  pid_t pids[2];
  std::fflush(stdout);
  std::fflush(stderr);
  for (int c = 0; c < 2; ++c) {
    pids[c] = ::fork();
    if (pids[c] == 0) {
      ::close(sv[0][0]);
      ::close(sv[1][0]);
      int code = 100;
      {
        Side s(cfg, sv[c][1]);
        std::string err = s.setup(false);
        if (err.empty()) {
          // Sends tags 0..3 with this child's seeds, then receives the parent's.
          std::vector<std::vector<uint8_t>> out(kTags, std::vector<uint8_t>(kLen)), in = out;
          std::vector<hmc_net_request_t*> reqs;
          for (int t = 0; t < kTags; ++t) {
            fill(out[t].data(), kLen, 1000 * (c + 1) + t);
            reqs.push_back(s.irecv(in[t].data(), kLen, t));
          }
          for (int t = 0; t < kTags; ++t) reqs.push_back(s.isend(out[t].data(), kLen, t));
          for (auto* r : reqs) EXPECT_NE(r, nullptr);
          for (int st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
          for (int t = 0; t < kTags; ++t)
            EXPECT_EQ(first_mismatch(in[t].data(), kLen, 5000 * (c + 1) + t), -1)
                << "child " << c << " got another peer's message on tag " << t;
          EXPECT_TRUE(s.await());
          code = child_exit();
        } else {
          std::fprintf(stderr, "child %d setup: %s\n", c, err.c_str());
        }
      }
      std::fflush(stderr);
      ::_exit(code);
    }
    ::close(sv[c][1]);
  }
  {
    Host host(cfg);
    hmc_net_ctx_t* ctx = nullptr;
    ASSERT_EQ(T()->init(host.services(), &ctx), HMC_PLUGIN_SUCCESS);
    hmc_net_listener_t* l[2] = {};
    hmc_net_ep_t* ep[2] = {};
    for (int c = 0; c < 2; ++c) {
      uint8_t handle[HMC_NET_HANDLE_MAX];
      size_t len = 0;
      ASSERT_EQ(T()->listen(ctx, 0, handle, &len, &l[c]), HMC_PLUGIN_SUCCESS);
      uint32_t n = static_cast<uint32_t>(len);
      ASSERT_EQ(::send(sv[c][0], &n, 4, MSG_NOSIGNAL), 4);
      ASSERT_EQ(::send(sv[c][0], handle, len, MSG_NOSIGNAL), static_cast<ssize_t>(len));
    }
    uint64_t deadline = mono_ns() + 10000000000ull;
    while ((!ep[0] || !ep[1]) && mono_ns() < deadline)
      for (int c = 0; c < 2; ++c)
        if (!ep[c]) {
          int st = T()->accept(l[c], &ep[c]);
          ASSERT_TRUE(st == HMC_PLUGIN_SUCCESS || st == HMC_PLUGIN_IN_PROGRESS) << st;
        }
    ASSERT_TRUE(ep[0] && ep[1]) << "accept timed out";
    // Receives on endpoint 1 first, so a message of peer 0 would match them if peers crossed.
    std::vector<std::vector<uint8_t>> in[2], out[2];
    std::vector<hmc_net_request_t*> reqs;
    for (int c : {1, 0}) {
      in[c].assign(kTags, std::vector<uint8_t>(kLen));
      out[c].assign(kTags, std::vector<uint8_t>(kLen));
      for (int t = 0; t < kTags; ++t) {
        hmc_net_request_t* r = nullptr;
        ASSERT_EQ(T()->irecv(ep[c], in[c][t].data(), kLen, nullptr, t, &r), HMC_PLUGIN_SUCCESS);
        reqs.push_back(r);
        fill(out[c][t].data(), kLen, 5000 * (c + 1) + t);
        ASSERT_EQ(T()->isend(ep[c], out[c][t].data(), kLen, nullptr, t, &r), HMC_PLUGIN_SUCCESS);
        reqs.push_back(r);
      }
    }
    std::vector<bool> done(reqs.size(), false);
    size_t left = reqs.size();
    while (left > 0 && mono_ns() < deadline + 20000000000ull) {
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (done[i]) continue;
        int d = 0;
        int st = T()->test(reqs[i], &d, nullptr);
        if (d) {
          EXPECT_EQ(st, HMC_PLUGIN_SUCCESS) << "request " << i;
          done[i] = true;
          --left;
        }
      }
    }
    EXPECT_EQ(left, 0u) << "requests still pending";
    for (int c = 0; c < 2; ++c)
      for (int t = 0; t < kTags; ++t)
        EXPECT_EQ(first_mismatch(in[c][t].data(), kLen, 1000 * (c + 1) + t), -1)
            << "endpoint " << c << " got another peer's message on tag " << t;
    for (int c = 0; c < 2; ++c) {
      uint32_t one = 1;
      uint8_t v = 1;
      ::send(sv[c][0], &one, 4, MSG_NOSIGNAL);
      ::send(sv[c][0], &v, 1, MSG_NOSIGNAL);
    }
    for (int c = 0; c < 2; ++c) EXPECT_TRUE(await_eof(sv[c][0], 20));
    for (int c = 0; c < 2; ++c) {
      T()->close_ep(ep[c]);
      T()->close_listener(l[c]);
    }
    EXPECT_EQ(T()->finalize(ctx), HMC_PLUGIN_SUCCESS);
  }
  for (int c = 0; c < 2; ++c) {
    ::close(sv[c][0]);
    int status = 0;
    ::waitpid(pids[c], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << c << " failed";
  }
}

INSTANTIATE_TEST_SUITE_P(Providers, OfiPair,
                         ::testing::Values(make_variant("tcp", "tcp"), make_variant("shm", "shm")),
                         variant_name);

// The same data paths with the plugin's other modes: local descriptors from its registration
// cache (with a cache of 2 entries, so it evicts), puts completed by a trailing read, messages
// moved by the receiver's read on tcp (where the default is the sender's write; shm has no
// FI_ORDER_SAW and always reads), and the sender's write cut into pieces of other sizes.
class OfiPairModes : public OfiPair {};

TEST_P(OfiPairModes, SendRecvSizes) {
  run([&](Side& s) { receive_sizes(s, kSizes, 100, 1000); },
      [&](Side& s) { send_sizes(s, kSizes, 100, 1000); });
}

TEST_P(OfiPairModes, PutThenGet) {
  constexpr size_t kRegion = 6u << 20, kOff = 3, kLen = (4u << 20) + 3;
  run(
      [&](Side& s) {
        std::vector<uint8_t> region(kRegion, 0x11), rkey;
        hmc_net_mr_t* mr = reg(s, region.data(), kRegion, kRemoteRw, &rkey);
        send_region(s, reinterpret_cast<uintptr_t>(region.data()), rkey);
        ASSERT_TRUE(s.await());
        EXPECT_EQ(first_mismatch(region.data() + kOff, kLen, 42), -1) << "the put is not in place";
        EXPECT_EQ(region[kOff - 1], 0x11);
        EXPECT_EQ(region[kOff + kLen], 0x11);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
        EXPECT_EQ(T()->dereg_mr(s.ctx(), mr), HMC_PLUGIN_SUCCESS);
      },
      [&](Side& s) {
        RemoteRegion rr = recv_region(s);
        hmc_net_rkey_t* k = unpack(s, rr.rkey);
        ASSERT_NE(k, nullptr);
        std::vector<uint8_t> src(kLen), back(kLen);
        fill(src.data(), kLen, 42);
        // Several puts of the same buffer in flight: each must complete only once in place.
        for (int i = 0; i < 3; ++i)
          EXPECT_EQ(put(s, src.data(), kLen, rr.base + kOff, k), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
        EXPECT_EQ(get(s, back.data(), kLen, rr.base + kOff, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(back.data(), kLen, 42), -1);
        EXPECT_EQ(T()->rkey_release(k), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
      });
}

// Rendezvous messages cut short by small receives, then one that fits: the connection stays in
// step whichever way the data moves.
TEST_P(OfiPairModes, TruncatedRendezvous) {
  constexpr size_t kBig = (1u << 20) + 5;
  run(
      [&](Side& s) {
        std::vector<uint8_t> a(1000 + 16, 0xab), b(16, 0xab), c(kBig);
        hmc_net_request_t* ra = s.irecv(a.data(), 1000, 1);
        hmc_net_request_t* rb = s.irecv(b.data(), 0, 2);
        hmc_net_request_t* rc = s.irecv(c.data(), kBig, 3);
        ASSERT_TRUE(ra && rb && rc);
        ASSERT_TRUE(s.signal());
        std::vector<size_t> bytes;
        auto st = s.wait_all({ra, rb, rc}, &bytes);
        EXPECT_EQ(st[0], HMC_PLUGIN_ERR_TRUNCATED);
        EXPECT_EQ(bytes[0], kBig) << "a truncated receive reports the length that was sent";
        EXPECT_EQ(first_mismatch(a.data(), 1000, 1), -1) << "the buffer holds the message's start";
        EXPECT_EQ(a[1000], 0xab);
        EXPECT_EQ(st[1], HMC_PLUGIN_ERR_TRUNCATED);
        EXPECT_EQ(bytes[1], kBig);
        EXPECT_EQ(b[0], 0xab);
        EXPECT_EQ(st[2], HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(bytes[2], kBig);
        EXPECT_EQ(first_mismatch(c.data(), kBig, 3), -1);
        ASSERT_TRUE(s.await());
      },
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> m(3, std::vector<uint8_t>(kBig));
        for (int i = 0; i < 3; ++i) fill(m[i].data(), kBig, i + 1);
        ASSERT_TRUE(s.await());
        std::vector<hmc_net_request_t*> reqs;
        for (int i = 0; i < 3; ++i) reqs.push_back(s.isend(m[i].data(), kBig, i + 1));
        for (auto* r : reqs) ASSERT_NE(r, nullptr);
        for (int st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
      });
}

INSTANTIATE_TEST_SUITE_P(
    Modes, OfiPairModes,
    ::testing::Values(
        make_variant("tcp_mr_local", "tcp", {{"HMC_OFI_MR_LOCAL", "1"}, {"HMC_OFI_MR_CACHE", "2"}}),
        make_variant("shm_mr_local", "shm", {{"HMC_OFI_MR_LOCAL", "1"}, {"HMC_OFI_MR_CACHE", "0"}}),
        make_variant("tcp_put_read", "tcp", {{"HMC_OFI_PUT_COMPLETION", "read"}}),
        make_variant("tcp_rndv_read", "tcp", {{"HMC_OFI_RNDV", "read"}}),
        // The write rendezvous in many pieces (4 KiB: sizes are not multiples of it), and in
        // one write (tcp's default is 512 KiB pieces).
        make_variant("tcp_write_chunk_4k", "tcp", {{"HMC_OFI_WRITE_CHUNK", "4K"}}),
        make_variant("tcp_write_whole", "tcp", {{"HMC_OFI_WRITE_CHUNK", "0"}}),
        make_variant("shm_put_read", "shm", {{"HMC_OFI_PUT_COMPLETION", "read"}})),
    variant_name);

// ---------------------------------------------------------------------------------------------
// Single-process tests: two contexts driven alternately by one thread.

struct LocalPair {
  explicit LocalPair(const Cfg& cfg, uint32_t timeout_ms = 5000)
      : ha(cfg, timeout_ms), hb(cfg, timeout_ms) {}
  ~LocalPair() {
    for (auto* e : eps) T()->close_ep(e);
    if (a) T()->finalize(a);
    if (b) T()->finalize(b);
  }
  // Both contexts; skips the test when the provider is not usable here.
  void init() {
    int st = T()->init(ha.services(), &a);
    if (st == HMC_PLUGIN_ERR_NO_DEVICE)
      GTEST_SKIP() << "provider not usable here: " << ha.all_logs();
    ASSERT_EQ(st, HMC_PLUGIN_SUCCESS) << ha.all_logs();
    ASSERT_EQ(T()->init(hb.services(), &b), HMC_PLUGIN_SUCCESS) << hb.all_logs();
  }
  // A new connection: listens on a, connects from b. Returns {a's endpoint, b's endpoint}.
  std::pair<hmc_net_ep_t*, hmc_net_ep_t*> connect() {
    uint8_t handle[HMC_NET_HANDLE_MAX];
    size_t len = 0;
    hmc_net_listener_t* l = nullptr;
    hmc_net_ep_t *ea = nullptr, *eb = nullptr;
    EXPECT_EQ(T()->listen(a, 0, handle, &len, &l), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(T()->connect(b, 0, handle, len, &eb), HMC_PLUGIN_SUCCESS);
    uint64_t deadline = mono_ns() + 10000000000ull;
    int sa = HMC_PLUGIN_IN_PROGRESS, sb = HMC_PLUGIN_IN_PROGRESS;
    while ((sa != HMC_PLUGIN_SUCCESS || sb != HMC_PLUGIN_SUCCESS) && mono_ns() < deadline) {
      if (sa == HMC_PLUGIN_IN_PROGRESS) sa = T()->accept(l, &ea);
      if (sb == HMC_PLUGIN_IN_PROGRESS) sb = T()->ep_ready(eb);
    }
    EXPECT_EQ(sa, HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(sb, HMC_PLUGIN_SUCCESS);
    T()->close_listener(l);
    if (ea) eps.push_back(ea);
    if (eb) eps.push_back(eb);
    return {ea, eb};
  }
  int wait(hmc_net_request_t* r, size_t* bytes = nullptr, double timeout_s = 10) {
    uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
    while (mono_ns() < deadline) {
      int done = 0;
      size_t n = 0;
      int st = T()->test(r, &done, &n);
      if (done) {
        if (bytes) *bytes = n;
        return st;
      }
      T()->progress(a);
      T()->progress(b);
    }
    return HMC_PLUGIN_IN_PROGRESS;
  }
  void forget(hmc_net_ep_t* e) { eps.erase(std::remove(eps.begin(), eps.end(), e), eps.end()); }

  Host ha, hb;
  hmc_net_ctx_t *a = nullptr, *b = nullptr;
  std::vector<hmc_net_ep_t*> eps;
};

class OfiLocal : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override { REQUIRE_PLUGIN(); }
};

// Two connections between the same two contexts share one remote address: their receive
// slots keep them apart.
TEST_P(OfiLocal, TwoConnectionsBetweenTheSameContexts) {
  LocalPair p(GetParam().cfg);
  p.init();
  if (HasFatalFailure() || IsSkipped()) return;
  auto c1 = p.connect();
  auto c2 = p.connect();
  ASSERT_TRUE(c1.first && c1.second && c2.first && c2.second);
  std::vector<uint8_t> in1(1000), in2(1000), out1(1000), out2(1000);
  fill(out1.data(), 1000, 1);
  fill(out2.data(), 1000, 2);
  hmc_net_request_t *r2 = nullptr, *r1 = nullptr, *s1 = nullptr, *s2 = nullptr;
  // The second connection's receive is posted first: with crossed peers it would take message 1.
  ASSERT_EQ(T()->irecv(c2.first, in2.data(), 1000, nullptr, 9, &r2), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->irecv(c1.first, in1.data(), 1000, nullptr, 9, &r1), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->isend(c1.second, out1.data(), 1000, nullptr, 9, &s1), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(p.wait(s1), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(p.wait(r1), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->isend(c2.second, out2.data(), 1000, nullptr, 9, &s2), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(p.wait(s2), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(p.wait(r2), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(in1, out1);
  EXPECT_EQ(in2, out2);
  // Closing one connection leaves the other working.
  T()->close_ep(c1.first);
  T()->close_ep(c1.second);
  p.forget(c1.first);
  p.forget(c1.second);
  ASSERT_EQ(T()->irecv(c2.second, in1.data(), 1000, nullptr, 3, &r1), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->isend(c2.first, out1.data(), 1000, nullptr, 3, &s1), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(p.wait(s1), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(p.wait(r1), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(in1, out1);
}

bool readable_within(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

// Arms until the context agrees that sleeping is safe (a few progress calls at most).
int arm_until_idle(hmc_net_ctx_t* c) {
  int st = HMC_PLUGIN_IN_PROGRESS;
  for (int i = 0; i < 1000 && st == HMC_PLUGIN_IN_PROGRESS; ++i) {
    st = T()->arm(c);
    if (st == HMC_PLUGIN_IN_PROGRESS) T()->progress(c);
  }
  return st;
}

// wait_fd + arm: an idle armed context's fd stays quiet; a message from the peer makes it
// readable. (shm has no completion-queue wait object: while it has work in flight, the fd is
// a 1 ms poll timer, so there the fd only has to become readable.)
TEST_P(OfiLocal, ArmAndWaitFd) {
  LocalPair p(GetParam().cfg);
  p.init();
  if (HasFatalFailure() || IsSkipped()) return;
  auto c = p.connect();
  ASSERT_TRUE(c.first && c.second);
  int fd = -1;
  ASSERT_EQ(T()->wait_fd(p.a, &fd), HMC_PLUGIN_SUCCESS);
  ASSERT_GE(fd, 0);
  // Nothing pending at all: quiet for every provider.
  for (int i = 0; i < 100; ++i) T()->progress(p.a);
  ASSERT_EQ(arm_until_idle(p.a), HMC_PLUGIN_SUCCESS);
  EXPECT_FALSE(readable_within(fd, 20)) << "an idle, armed context must not look busy";
  T()->progress(p.a);
  std::vector<uint8_t> rbuf(8), sbuf(8);
  fill(sbuf.data(), 8, 5);
  hmc_net_request_t* r = nullptr;
  ASSERT_EQ(T()->irecv(c.first, rbuf.data(), 8, nullptr, 1, &r), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(arm_until_idle(p.a), HMC_PLUGIN_SUCCESS);
  if (GetParam().provider == "tcp") {
    EXPECT_FALSE(readable_within(fd, 0)) << "a receive waiting for a message must not look busy";
  }
  hmc_net_request_t* s = nullptr;
  ASSERT_EQ(T()->isend(c.second, sbuf.data(), 8, nullptr, 1, &s), HMC_PLUGIN_SUCCESS);
  int done = 0;
  uint64_t deadline = mono_ns() + 5000000000ull;
  while (!done && mono_ns() < deadline) ASSERT_EQ(T()->test(s, &done, nullptr), HMC_PLUGIN_SUCCESS);
  ASSERT_TRUE(done);
  EXPECT_TRUE(readable_within(fd, 5000)) << "the message did not wake the sleeping side";
  EXPECT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(rbuf, sbuf);
}

// A handle whose listener is gone: the hello reaches the endpoint but nobody answers, so
// ep_ready fails within the host's timeout, and posts on the endpoint fail.
TEST_P(OfiLocal, ListenerGoneTimesOut) {
  LocalPair p(GetParam().cfg, 300);
  p.init();
  if (HasFatalFailure() || IsSkipped()) return;
  uint8_t handle[HMC_NET_HANDLE_MAX];
  size_t len = 0;
  hmc_net_listener_t* l = nullptr;
  ASSERT_EQ(T()->listen(p.a, 0, handle, &len, &l), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->close_listener(l), HMC_PLUGIN_SUCCESS);
  hmc_net_ep_t* ep = nullptr;
  ASSERT_EQ(T()->connect(p.b, 0, handle, len, &ep), HMC_PLUGIN_SUCCESS);
  uint64_t t0 = mono_ns();
  int st = HMC_PLUGIN_IN_PROGRESS;
  while (st == HMC_PLUGIN_IN_PROGRESS && mono_ns() - t0 < 5000000000ull) {
    st = T()->ep_ready(ep);
    T()->progress(p.a);
  }
  double ms = static_cast<double>(mono_ns() - t0) / 1e6;
  EXPECT_EQ(st, HMC_PLUGIN_ERR_PEER_LOST);
  EXPECT_GE(ms, 250);
  EXPECT_LT(ms, 2000);
  EXPECT_TRUE(p.hb.logged("did not answer")) << p.hb.all_logs();
  hmc_net_request_t* r = nullptr;
  uint8_t b[4];
  EXPECT_EQ(T()->isend(ep, b, 4, nullptr, 1, &r), HMC_PLUGIN_ERR_PEER_LOST);
  EXPECT_EQ(T()->close_ep(ep), HMC_PLUGIN_SUCCESS);
}

TEST_P(OfiLocal, HandlesAndTagsAreChecked) {
  LocalPair p(GetParam().cfg);
  p.init();
  if (HasFatalFailure() || IsSkipped()) return;
  uint8_t handle[HMC_NET_HANDLE_MAX];
  size_t len = 0;
  hmc_net_listener_t* l = nullptr;
  ASSERT_EQ(T()->listen(p.a, 0, handle, &len, &l), HMC_PLUGIN_SUCCESS);
  EXPECT_LE(len, HMC_NET_HANDLE_MAX);
  hmc_net_ep_t* ep = nullptr;
  EXPECT_EQ(T()->connect(p.b, 0, handle, 3, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  std::vector<uint8_t> v(handle, handle + len);
  v[4] = 99;  // protocol version
  EXPECT_EQ(T()->connect(p.b, 0, v.data(), v.size(), &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(p.hb.logged("protocol version"));
  v.assign(handle, handle + len);
  v[16] ^= 0x20;  // the device name's first letter
  EXPECT_EQ(T()->connect(p.b, 0, v.data(), v.size(), &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(p.hb.logged("the handle is for device"));
  EXPECT_EQ(T()->connect(p.b, 7, handle, len, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ep, nullptr);
  T()->close_listener(l);
  // Tags: the top four bits belong to the plugin.
  auto c = p.connect();
  ASSERT_TRUE(c.first && c.second);
  hmc_net_request_t* r = nullptr;
  uint8_t b[4] = {};
  EXPECT_EQ(T()->isend(c.second, b, 4, nullptr, uint64_t{1} << 60, &r),
            HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(T()->irecv(c.first, b, 4, nullptr, ~uint64_t{0}, &r), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);
  // One peer per listener: a second accept after handing out the endpoint is an error.
  ASSERT_EQ(T()->listen(p.a, 0, handle, &len, &l), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->connect(p.b, 0, handle, len, &ep), HMC_PLUGIN_SUCCESS);
  p.eps.push_back(ep);
  hmc_net_ep_t* ea = nullptr;
  uint64_t deadline = mono_ns() + 5000000000ull;
  int st = HMC_PLUGIN_IN_PROGRESS;
  while (st == HMC_PLUGIN_IN_PROGRESS && mono_ns() < deadline) {
    st = T()->accept(l, &ea);
    T()->ep_ready(ep);
  }
  ASSERT_EQ(st, HMC_PLUGIN_SUCCESS);
  p.eps.push_back(ea);
  hmc_net_ep_t* again = nullptr;
  EXPECT_EQ(T()->accept(l, &again), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  T()->close_listener(l);
}

INSTANTIATE_TEST_SUITE_P(Providers, OfiLocal,
                         ::testing::Values(make_variant("tcp", "tcp"), make_variant("shm", "shm")),
                         variant_name);

// ---------------------------------------------------------------------------------------------
// Configuration and properties (each in a child process where init runs, see probe_init)

// Runs body in a child process and expects it to exit cleanly; gtest failures in the child are
// printed there and make it exit 1.
void in_child(const std::function<void()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid == 0) {
    body();
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child failed (output above)";
}

TEST(OfiConfig, InvalidValuesFailInitNamingTheVariable) {
  REQUIRE_PLUGIN();
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"HMC_OFI_PROVIDER", "tcp,,shm"},  {"HMC_OFI_PROVIDER", "t c p"},
      {"HMC_OFI_DOMAIN", "eth0;rm"},     {"HMC_OFI_HMEM", "maybe"},
      {"HMC_OFI_PUT_COMPLETION", "now"}, {"HMC_OFI_MR_CACHE", "-1"},
      {"HMC_OFI_RNDV", "push"},          {"HMC_OFI_EAGER_LIMIT", "2M"},
      {"HMC_OFI_EAGER_LIMIT", "-5"},     {"HMC_OFI_MR_CACHE", "12x"},
      {"HMC_OFI_MR_LOCAL", "2"},         {"HMC_OFI_WRITE_CHUNK", "1K"},
      {"HMC_OFI_WRITE_CHUNK", "2G"},     {"HMC_OFI_WRITE_CHUNK", "big"},
  };
  in_child([&] {
    for (const auto& kv : bad) {
      SCOPED_TRACE(kv.first + "=" + kv.second);
      Host host(Cfg{{kv.first, kv.second}}, 5000, HMC_LOG_ERROR - 1);
      hmc_net_ctx_t* c = nullptr;
      EXPECT_EQ(T()->init(host.services(), &c), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
      EXPECT_EQ(c, nullptr);
      EXPECT_TRUE(host.logged(kv.first)) << "no log message names " << kv.first;
    }
  });
}

TEST(OfiConfig, UnknownProviderMeansNoDevice) {
  REQUIRE_PLUGIN();
  in_child([&] {
    Host host(Cfg{{"HMC_OFI_PROVIDER", "nosuchprovider"}}, 5000, HMC_LOG_ERROR);
    hmc_net_ctx_t* c = nullptr;
    EXPECT_EQ(T()->init(host.services(), &c), HMC_PLUGIN_ERR_NO_DEVICE);
    EXPECT_TRUE(host.logged("nosuchprovider")) << host.all_logs();
    // A domain the provider does not have is named in the reason.
    Host h2(Cfg{{"HMC_OFI_PROVIDER", "tcp"}, {"HMC_OFI_DOMAIN", "hmcnosuchif0"}}, 5000,
            HMC_LOG_ERROR);
    EXPECT_EQ(T()->init(h2.services(), &c), HMC_PLUGIN_ERR_NO_DEVICE);
    EXPECT_TRUE(h2.logged("hmcnosuchif0")) << h2.all_logs();
  });
}

TEST(OfiConfig, DeclaresEveryVariableItReads) {
  REQUIRE_PLUGIN();
  std::vector<std::string> declared;
  for (const hmc_config_var_t* v = T()->config_vars; v != nullptr && v->name != nullptr; ++v) {
    declared.push_back(v->name);
    EXPECT_NE(v->default_value, nullptr);
    EXPECT_NE(v->help, nullptr);
  }
  in_child([&] {
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
    int st = T()->init(&svc, &c);
    EXPECT_TRUE(st == HMC_PLUGIN_SUCCESS || st == HMC_PLUGIN_ERR_NO_DEVICE);
    EXPECT_FALSE(rec.asked.empty());
    for (const std::string& name : rec.asked)
      EXPECT_NE(std::find(declared.begin(), declared.end(), name), declared.end())
          << name << " is read but not declared in config_vars";
    if (c) T()->finalize(c);
  });
}

// The automatic choice on this machine, device properties, and the tcp device staying on
// loopback by default.
TEST(OfiProps, DevicesAndProperties) {
  REQUIRE_PLUGIN();
  const hmc_net_plugin_v2_t* t = T();
  EXPECT_EQ(t->hdr.abi_version, HMC_NET_ABI_VERSION);
  EXPECT_EQ(t->hdr.struct_size, sizeof(hmc_net_plugin_v2_t));
  EXPECT_STREQ(t->name, "ofi");
  if (probe_init(Cfg{}).status == HMC_PLUGIN_ERR_NO_DEVICE)
    GTEST_SKIP() << "libfabric offers no provider here: " << probe_init(Cfg{}).logs;
  in_child([&] {
    Host host(Cfg{}, 5000, HMC_LOG_WARN);
    hmc_net_ctx_t* c = nullptr;
    ASSERT_EQ(t->init(host.services(), &c), HMC_PLUGIN_SUCCESS);
    int n = 0;
    ASSERT_EQ(t->device_count(c, &n), HMC_PLUGIN_SUCCESS);
    ASSERT_GE(n, 1);
    bool saw_tcp = false;
    for (int d = 0; d < n; ++d) {
      hmc_net_device_props_t p{};
      p.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
      ASSERT_EQ(t->device_props(c, d, &p), HMC_PLUGIN_SUCCESS);
      ASSERT_NE(p.name, nullptr);
      std::string name = p.name;
      std::printf("[ info ] device %d: %s flags 0x%x mem_ifaces 0x%llx max_inflight %u\n", d,
                  p.name, p.flags, static_cast<unsigned long long>(p.mem_ifaces), p.max_inflight);
      EXPECT_TRUE(p.flags & HMC_NET_FLAG_TAGGED);
      EXPECT_TRUE(p.mem_ifaces & HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST));
      EXPECT_FALSE(p.flags & HMC_NET_FLAG_NEEDS_REG) << "local registration is the plugin's job";
      if (name == "shm") {
        EXPECT_TRUE(p.flags & HMC_NET_FLAG_SAME_HOST);
      }
      if (name == "tcp") {
        saw_tcp = true;
        EXPECT_EQ(d, 0) << "libfabric's first network provider comes first";
        EXPECT_TRUE(p.flags & HMC_NET_FLAG_RMA);
        EXPECT_FALSE(p.flags & HMC_NET_FLAG_SAME_HOST);
        // The handle carries the endpoint's address: 127.0.0.1 (HMC_LISTEN_HOST's default).
        uint8_t handle[HMC_NET_HANDLE_MAX];
        size_t len = 0;
        hmc_net_listener_t* l = nullptr;
        ASSERT_EQ(t->listen(c, d, handle, &len, &l), HMC_PLUGIN_SUCCESS);
        const size_t addr_off = 16 + handle[5];
        ASSERT_GE(len, addr_off + sizeof(sockaddr_in));
        sockaddr_in sin{};
        std::memcpy(&sin, handle + addr_off, sizeof(sin));
        EXPECT_EQ(sin.sin_family, AF_INET);
        EXPECT_EQ(ntohl(sin.sin_addr.s_addr), 0x7f000001u) << "tcp is not on loopback";
        t->close_listener(l);
      }
    }
    EXPECT_TRUE(saw_tcp) << "the automatic choice on this machine should include tcp";
    hmc_net_device_props_t p{};
    p.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
    EXPECT_EQ(t->device_props(c, n, &p), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    // A caller compiled against a shorter struct only gets the fields that fit.
    struct Short {
      hmc_abi_header_t hdr;
      const char* name;
    };
    struct Guarded {
      Short s;
      uint64_t canary;
    } g{};
    g.s.hdr.struct_size = sizeof(Short);
    g.s.hdr.abi_version = 1;
    g.canary = 0x1122334455667788ull;
    ASSERT_EQ(t->device_props(c, 0, reinterpret_cast<hmc_net_device_props_t*>(&g.s)),
              HMC_PLUGIN_SUCCESS);
    EXPECT_NE(g.s.name, nullptr);
    EXPECT_EQ(g.canary, 0x1122334455667788ull);
    EXPECT_EQ(t->finalize(c), HMC_PLUGIN_SUCCESS);
  });
}

}  // namespace
