// The gtest side of the net plugin suite: fixtures, child processes, scenario helpers.
#include "suite.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace net_test {

void PrintTo(const NetConfig& c, std::ostream* os) {
  *os << c.name;
}

std::string config_name(const ::testing::TestParamInfo<NetConfig>& info) {
  return info.param.name;
}

const char* gap_text(Gap g) {
  switch (g) {
    case kNoGap: return "no gap";
    case kPeerCloseUnseen: return "a peer's close_ep is not seen";
    case kStaleKeysAccepted: return "the key of a deregistered region is not refused";
    case kTimerWaitFd: return "wait_fd is a timer while work is in flight";
    case kTruncatedDataUnset: return "a truncated receive's buffer holds no defined bytes";
    case kSendsWaitForPeer: return "eager sends complete only once the peer progresses";
    case kNoEmptyRegions: return "registering zero bytes is refused";
    case kReadyAfterLoss: return "ep_ready answers SUCCESS after the peer was lost";
    case kArrivedDroppedOnLoss:
      return "known defect: messages that arrived before the peer was lost are dropped";
    case kStuckReadOnDeath:
      return "known defect: a receive reading from a peer that dies never ends";
    case kConnectTimesOut: return "a connect to a closed listener fails only at the timeout";
  }
  return "?";
}

std::vector<NetConfig> net_configs_of(const std::string& plugin, bool variants) {
  std::vector<NetConfig> out;
  for (const NetConfig& c : net_configs())
    if (c.plugin == plugin && (variants || !c.variant)) out.push_back(c);
  return out;
}

std::vector<NetConfig> net_base_configs() {
  std::vector<NetConfig> out;
  for (const NetConfig& c : net_configs())
    if (!c.variant) out.push_back(c);
  return out;
}

std::vector<NetConfig> net_plugin_firsts() {
  std::vector<NetConfig> out;
  for (const NetConfig& c : net_configs())
    if (std::none_of(out.begin(), out.end(),
                     [&](const NetConfig& o) { return o.plugin == c.plugin; }))
      out.push_back(c);
  return out;
}

std::string plugin_name(const ::testing::TestParamInfo<NetConfig>& info) {
  return info.param.plugin;
}

std::vector<NetConfig> net_configs_with_huge() {
  std::vector<NetConfig> out;
  for (const NetConfig& c : net_configs())
    if (c.huge != 0) out.push_back(c);
  return out;
}

void require_plugin(const std::string& name, const hmc_net_plugin_v2_t** out) {
  if (!plugin_built(name))
    GTEST_SKIP() << plugin_path(name) << " was not built (its dependencies were not found at "
                 << "configure time, or it was turned off)";
  std::string err;
  *out = load_plugin(name, &err);
  ASSERT_NE(*out, nullptr) << "cannot load the " << name << " plugin: " << err;
}

// ---------------------------------------------------------------------------------------------
// Child processes

namespace {
int g_skip_fd = -1;  // in a child of in_child: where skip_child writes its reason
constexpr int kSkipExit = 77;
}  // namespace

void skip_child(const std::string& why) {
  if (g_skip_fd >= 0) {
    size_t off = 0;
    while (off < why.size()) {
      ssize_t n = ::write(g_skip_fd, why.data() + off, why.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(kSkipExit);
}

bool refuse_syscalls(const std::vector<long>& nrs, std::string* why) {
  // Load the call's number; for each refused one, return EPERM on a match; allow the rest. The
  // architecture is not checked: the test processes make only native calls.
  std::vector<sock_filter> prog;
  prog.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  for (long nr : nrs) {
    prog.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1));
    prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)));
  }
  prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  sock_fprog fp{static_cast<unsigned short>(prog.size()), prog.data()};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp, 0, 0) != 0) {
    *why = std::string("installing a seccomp filter: ") + std::strerror(errno);
    return false;
  }
  return true;
}

void in_child(const std::function<void()>& body) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    g_skip_fd = p[1];
    body();
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  ::close(p[1]);
  std::string why;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(p[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    why.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  remove_shm_regions_of(pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == kSkipExit) GTEST_SKIP() << why;
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child failed (its output is above)";
}

// ---------------------------------------------------------------------------------------------
// NetTest

void NetTest::SetUp() {
  require_plugin(GetParam().plugin, &t_);
}

void NetTest::require_no(Gap g) {
  if (GetParam().lacks(g))
    GTEST_SKIP() << GetParam().name << ": " << gap_text(g) << " (" << GetParam().gaps_doc << ")";
}

void NetTest::run(const std::function<void(Side&)>& parent, const std::function<void(Side&)>& child,
                  double timeout_s, int killed_by, uint32_t host_timeout_ms) {
  const std::vector<long>& refused = GetParam().refused_syscalls;
  auto pair = [&] {
    PairResult r = run_pair(
        t_, GetParam().cfg, GetParam().dev, parent, child,
        [] { return ::testing::Test::HasFailure() ? 1 : 0; }, timeout_s, host_timeout_ms);
    if (r.parent_init == HMC_PLUGIN_ERR_NO_DEVICE) {
      std::string why = "the " + GetParam().plugin + " plugin has no device here with " +
                        GetParam().name + "'s settings (init: NO_DEVICE; the reason is in its " +
                        "log above)";
      if (!refused.empty()) skip_child(why);
      GTEST_SKIP() << why;
    }
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
  };
  if (refused.empty()) {
    pair();
    return;
  }
  // The refusal cannot be undone: both sides run below a child of the test process.
  in_child([&] {
    std::string why;
    if (!refuse_syscalls(refused, &why)) skip_child(why);
    pair();
  });
}

// ---------------------------------------------------------------------------------------------
// LocalPair

LocalPair::~LocalPair() {
  for (hmc_net_ep_t* e : more) t->close_ep(e);
  if (ea != nullptr) t->close_ep(ea);
  if (eb != nullptr) t->close_ep(eb);
  if (l != nullptr) t->close_listener(l);
  if (a != nullptr) t->finalize(a);
  if (b != nullptr) t->finalize(b);
}

void LocalPair::init() {
  hmc_plugin_status_t st = t->init(ha.services(), &a);
  if (st == HMC_PLUGIN_ERR_NO_DEVICE)
    skip_child("the plugin has no device here with these settings: " + ha.all_logs());
  ASSERT_EQ(st, HMC_PLUGIN_SUCCESS) << ha.all_logs();
  ASSERT_EQ(t->init(hb.services(), &b), HMC_PLUGIN_SUCCESS) << hb.all_logs();
}

void LocalPair::connect() {
  ASSERT_NO_FATAL_FAILURE(listen());
  ASSERT_NO_FATAL_FAILURE(connect_to_listener());
}

void LocalPair::listen() {
  ASSERT_NO_FATAL_FAILURE(init());
  ASSERT_EQ(t->listen(a, dev, handle, &handle_len, &l), HMC_PLUGIN_SUCCESS);
}

void LocalPair::expect_version_refused(size_t at) {
  ASSERT_LT(at, handle_len);
  std::vector<uint8_t> v(handle, handle + handle_len);
  v[at] = 99;
  hmc_net_ep_t* ep = nullptr;
  EXPECT_EQ(t->connect(b, dev, v.data(), v.size(), &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ep, nullptr);
  EXPECT_TRUE(hb.logged("protocol version"));
}

void LocalPair::connect_to_listener() {
  ASSERT_EQ(t->connect(b, dev, handle, handle_len, &eb), HMC_PLUGIN_SUCCESS);
  ASSERT_NO_FATAL_FAILURE(finish_connect());
}

void LocalPair::connect_forged(size_t at, hmc_net_ep_t** ep) {
  ASSERT_NO_FATAL_FAILURE(listen());
  ASSERT_LT(at, handle_len);
  std::vector<uint8_t> forged(handle, handle + handle_len);
  forged[at] ^= 0xff;
  ASSERT_EQ(t->connect(b, dev, forged.data(), forged.size(), ep), HMC_PLUGIN_SUCCESS);
}

hmc_plugin_status_t LocalPair::await_refusal(hmc_net_ep_t* ep, double timeout_s) {
  hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
  const uint64_t deadline = deadline_after(timeout_s);
  while (st == HMC_PLUGIN_IN_PROGRESS && mono_ns() < deadline) {
    EXPECT_EQ(t->accept(l, &ea), HMC_PLUGIN_IN_PROGRESS);
    st = t->ep_ready(ep);
  }
  return st;
}

void LocalPair::expect_one_working_connection() {
  ASSERT_NO_FATAL_FAILURE(connect_to_listener());
  ASSERT_NO_FATAL_FAILURE(expect_delivery(eb, ea, 100, 1, 3));
  hmc_net_ep_t* again = nullptr;
  EXPECT_EQ(t->accept(l, &again), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
}

void LocalPair::expect_send_lost(hmc_net_ep_t* ep) {
  hmc_net_request_t* r = nullptr;
  uint8_t x4[4] = {};
  EXPECT_EQ(t->isend(ep, x4, 4, nullptr, 1, &r), HMC_PLUGIN_ERR_PEER_LOST);
}

void LocalPair::expect_delivery(hmc_net_ep_t* from, hmc_net_ep_t* to, size_t size, uint64_t tag,
                                uint64_t seed) {
  std::vector<uint8_t> out(size), in(size);
  fill(out.data(), size, seed);
  hmc_net_request_t *r = nullptr, *s = nullptr;
  ASSERT_EQ(t->irecv(to, in.data(), size, nullptr, tag, &r), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(t->isend(from, out.data(), size, nullptr, tag, &s), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(wait(s), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(wait(r), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(in, out);
}

void LocalPair::finish_connect() {
  hmc_plugin_status_t sa = HMC_PLUGIN_IN_PROGRESS, sb = HMC_PLUGIN_IN_PROGRESS;
  uint64_t deadline = deadline_after(10);
  while ((sa != HMC_PLUGIN_SUCCESS || sb != HMC_PLUGIN_SUCCESS) && mono_ns() < deadline) {
    if (sa != HMC_PLUGIN_SUCCESS)
      sa = t->accept(l, &ea);
    else
      t->progress(a);
    if (sb != HMC_PLUGIN_SUCCESS)
      sb = t->ep_ready(eb);
    else
      t->progress(b);
    ASSERT_TRUE(sa == HMC_PLUGIN_SUCCESS || sa == HMC_PLUGIN_IN_PROGRESS) << sa;
    ASSERT_TRUE(sb == HMC_PLUGIN_SUCCESS || sb == HMC_PLUGIN_IN_PROGRESS) << sb;
  }
  ASSERT_EQ(sa, HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(sb, HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(t->ep_ready(ea), HMC_PLUGIN_SUCCESS);
}

std::pair<hmc_net_ep_t*, hmc_net_ep_t*> LocalPair::connect_another() {
  uint8_t h[HMC_NET_HANDLE_MAX];
  size_t len = 0;
  hmc_net_listener_t* lst = nullptr;
  hmc_net_ep_t *x = nullptr, *y = nullptr;
  EXPECT_EQ(t->listen(a, dev, h, &len, &lst), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t->connect(b, dev, h, len, &y), HMC_PLUGIN_SUCCESS);
  uint64_t deadline = deadline_after(10);
  hmc_plugin_status_t sa = HMC_PLUGIN_IN_PROGRESS, sb = HMC_PLUGIN_IN_PROGRESS;
  while ((sa != HMC_PLUGIN_SUCCESS || sb != HMC_PLUGIN_SUCCESS) && mono_ns() < deadline) {
    if (sa == HMC_PLUGIN_IN_PROGRESS) sa = t->accept(lst, &x);
    if (sb == HMC_PLUGIN_IN_PROGRESS) sb = t->ep_ready(y);
  }
  EXPECT_EQ(sa, HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(sb, HMC_PLUGIN_SUCCESS);
  t->close_listener(lst);
  if (x != nullptr) more.push_back(x);
  if (y != nullptr) more.push_back(y);
  return {x, y};
}

void LocalPair::forget(hmc_net_ep_t* e) {
  more.erase(std::remove(more.begin(), more.end(), e), more.end());
}

hmc_plugin_status_t LocalPair::wait(hmc_net_request_t* r, size_t* bytes, double timeout_s) {
  uint64_t deadline = deadline_after(timeout_s);
  while (mono_ns() < deadline) {
    hmc_plugin_status_t st;
    if (request_ended(t, r, bytes, &st)) return st;
    t->progress(a);
    t->progress(b);
  }
  return HMC_PLUGIN_IN_PROGRESS;
}

void NetLocal::local(const std::function<void(LocalPair&)>& body, uint32_t timeout_ms) {
  in_child([&] {
    std::string why;
    if (!config().refused_syscalls.empty() && !refuse_syscalls(config().refused_syscalls, &why))
      skip_child(why);
    LocalPair p(t(), cfg(), dev(), timeout_ms);
    body(p);
  });
}

void expect_short_device_props(const hmc_net_plugin_v2_t* t, hmc_net_ctx_t* c, uint32_t abi_version,
                               const char* name) {
  struct Short {
    hmc_abi_header_t hdr;
    const char* name;
  };
  struct Guarded {
    Short s;
    uint64_t canary;
  } g{};
  g.s.hdr.struct_size = sizeof(Short);
  g.s.hdr.abi_version = abi_version;
  g.canary = 0x1122334455667788ull;
  ASSERT_EQ(t->device_props(c, 0, reinterpret_cast<hmc_net_device_props_t*>(&g.s)),
            HMC_PLUGIN_SUCCESS);
  EXPECT_STREQ(g.s.name, name);
  EXPECT_EQ(g.canary, 0x1122334455667788ull);
}

bool readable_within(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

void PrintTo(const RefusedSettings& r, std::ostream* os) {
  *os << r.plugin << ": " << r.bad.size() << " settings";
}

void expect_settings_refused(const hmc_net_plugin_v2_t* t, const std::vector<Setting>& bad,
                             int print_level) {
  for (const Setting& kv : bad) {
    SCOPED_TRACE(kv.first + "=" + kv.second);
    Host host(Cfg{{kv.first, kv.second}}, 5000, print_level);
    hmc_net_ctx_t* c = nullptr;
    EXPECT_EQ(t->init(host.services(), &c), HMC_PLUGIN_ERR_CONFIG);
    EXPECT_EQ(c, nullptr);
    EXPECT_TRUE(host.logged(kv.first)) << "no log message names " << kv.first;
  }
}

hmc_plugin_status_t arm_until_idle(const hmc_net_plugin_v2_t* t, hmc_net_ctx_t* c) {
  hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
  for (int i = 0; i < 1000 && st == HMC_PLUGIN_IN_PROGRESS; ++i) {
    st = t->arm(c);
    if (st == HMC_PLUGIN_IN_PROGRESS) t->progress(c);
  }
  return st;
}

// ---------------------------------------------------------------------------------------------
// Scenario helpers

void receive_sizes(Side& s, const std::vector<size_t>& sizes, uint64_t tag_base, uint64_t seed) {
  constexpr size_t kGuard = 16;
  std::vector<std::vector<uint8_t>> bufs(sizes.size());
  std::vector<hmc_net_request_t*> reqs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    bufs[i].assign(sizes[i] + kGuard, 0xee);
    // A zero-byte receive passes no buffer at all.
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
    for (size_t k = sizes[i]; k < bufs[i].size(); ++k)
      ASSERT_EQ(bufs[i][k], 0xee) << "receive of " << sizes[i] << " wrote past its length";
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

void send_region(Side& s, uint64_t base, const std::vector<uint8_t>& rkey) {
  ASSERT_TRUE(s.send_value(base));
  ASSERT_TRUE(s.ctl_send(rkey.data(), rkey.size()));
}

RemoteRegion recv_region(Side& s) {
  RemoteRegion r;
  EXPECT_TRUE(s.recv_value(&r.base));
  EXPECT_TRUE(s.ctl_recv(&r.rkey));
  return r;
}

hmc_net_rkey_t* recv_key(Side& s, RemoteRegion* rr) {
  *rr = recv_region(s);
  return unpack(s, rr->rkey);
}

void withdraw_region(Side& s, hmc_net_mr_t* mr) {
  EXPECT_EQ(deregister_memory(s.t(), s.ctx(), s.dev(), mr), HMC_PLUGIN_SUCCESS);
  ASSERT_TRUE(s.signal());
}

hmc_net_mr_t* reg(const hmc_net_plugin_v2_t* t, hmc_net_ctx_t* ctx, int dev, void* addr, size_t len,
                  uint32_t access, std::vector<uint8_t>* rkey) {
  hmc_net_mr_t* mr = nullptr;
  EXPECT_EQ(register_memory(t, ctx, dev, MemKind::kHost, addr, len, access, &mr, rkey),
            HMC_PLUGIN_SUCCESS);
  EXPECT_GT(rkey->size(), 0u);
  EXPECT_LE(rkey->size(), HMC_NET_RKEY_MAX);
  return mr;
}

hmc_net_mr_t* reg(Side& s, void* addr, size_t len, uint32_t access, std::vector<uint8_t>* rkey) {
  return reg(s.t(), s.ctx(), s.dev(), addr, len, access, rkey);
}

hmc_net_rkey_t* unpack(Side& s, const std::vector<uint8_t>& packed) {
  hmc_net_rkey_t* k = nullptr;
  EXPECT_EQ(s.t()->rkey_unpack(s.ep(), packed.data(), packed.size(), &k), HMC_PLUGIN_SUCCESS);
  return k;
}

hmc_plugin_status_t put(Side& s, const void* buf, size_t len, uint64_t addr, hmc_net_rkey_t* k) {
  hmc_net_request_t* r = nullptr;
  hmc_plugin_status_t st = s.t()->iput(s.ep(), buf, len, nullptr, addr, k, &r);
  return st != HMC_PLUGIN_SUCCESS ? st : s.wait(r);
}

hmc_plugin_status_t get(Side& s, void* buf, size_t len, uint64_t addr, hmc_net_rkey_t* k) {
  hmc_net_request_t* r = nullptr;
  hmc_plugin_status_t st = s.t()->iget(s.ep(), buf, len, nullptr, addr, k, &r);
  return st != HMC_PLUGIN_SUCCESS ? st : s.wait(r);
}

}  // namespace net_test
