// The SDK's C++ helpers for plugins (sdk/include/hmc/plugin/*.hpp): status names, the C
// boundary (guarded, check_host_services), the net table adaptor and typed configuration
// reading. They are compiled into plugins, so they are tested here as a plugin uses them,
// against host services of a test's own (and, for the adaptor, a plugin of the test's own).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "hmc/plugin/boundary.hpp"
#include "hmc/plugin/config.hpp"
#include "hmc/plugin/log.hpp"
#include "hmc/plugin/net.h"
#include "hmc/plugin/net_adaptor.hpp"
#include "hmc/plugin/status.hpp"

namespace {

using namespace hmc::plugin;

// Host services over a map of variables, remembering what was logged.
class Host {
 public:
  explicit Host(std::map<std::string, std::string> vars = {}) : vars_(std::move(vars)) {
    svc_.hdr = HMC_ABI_HEADER_INIT(hmc_host_services_t);
    svc_.core_abi_min = HMC_NET_ABI_VERSION;
    svc_.core_abi_max = HMC_NET_ABI_VERSION;
    svc_.host_ctx = this;
    svc_.log = [](void* h, int, const char* m) { static_cast<Host*>(h)->logged_.push_back(m); };
    svc_.log_enabled = [](void*, int) { return 1; };
    svc_.config_get = [](void* h, const char* name) -> const char* {
      auto& vars = static_cast<Host*>(h)->vars_;
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
    svc_.now_ns = [](void*) -> uint64_t { return 1; };
    svc_.timeout_ms = 1000;
  }
  hmc_host_services_t* services() { return &svc_; }
  const std::vector<std::string>& logged() const { return logged_; }
  std::string last() const { return logged_.empty() ? "" : logged_.back(); }

 private:
  std::map<std::string, std::string> vars_;
  hmc_host_services_t svc_{};
  std::vector<std::string> logged_;
};

TEST(SdkStatus, NamesEveryCode) {
  EXPECT_STREQ(status_name(HMC_PLUGIN_SUCCESS), "SUCCESS");
  EXPECT_STREQ(status_name(HMC_PLUGIN_IN_PROGRESS), "IN_PROGRESS");
  EXPECT_STREQ(status_name(HMC_PLUGIN_ERR_NOT_SUPPORTED), "NOT_SUPPORTED");
  EXPECT_STREQ(status_name(HMC_PLUGIN_ERR_PEER_LOST), "PEER_LOST");
  EXPECT_STREQ(status_name(HMC_PLUGIN_ERR_SYSTEM), "SYSTEM");
  for (int st = HMC_PLUGIN_ERR_SYSTEM; st <= HMC_PLUGIN_IN_PROGRESS; ++st)
    EXPECT_STRNE(status_name(st), "UNKNOWN") << st;
  EXPECT_STREQ(status_name(-99), "UNKNOWN");
  static_assert(status_name(HMC_PLUGIN_ERR_REMOTE)[0] == 'R', "usable in constant expressions");
}

TEST(SdkBoundary, GuardedTurnsExceptionsIntoStatuses) {
  EXPECT_EQ(guarded([] { return HMC_PLUGIN_ERR_REMOTE; }), HMC_PLUGIN_ERR_REMOTE);
  EXPECT_EQ(guarded([]() -> hmc_plugin_status_t { throw std::bad_alloc(); }),
            HMC_PLUGIN_ERR_NO_MEMORY);
  EXPECT_EQ(guarded([]() -> hmc_plugin_status_t { throw std::runtime_error("x"); }),
            HMC_PLUGIN_ERR_INTERNAL);
  EXPECT_EQ(guarded([]() -> hmc_plugin_status_t { throw 7; }), HMC_PLUGIN_ERR_INTERNAL);
}

TEST(SdkBoundary, ChecksHostServices) {
  Host good;
  EXPECT_EQ(check_host_services(good.services(), HMC_NET_ABI_VERSION), HMC_PLUGIN_SUCCESS);
  EXPECT_TRUE(good.logged().empty());
  EXPECT_EQ(check_host_services(nullptr, HMC_NET_ABI_VERSION), HMC_PLUGIN_ERR_INVALID_ARGUMENT);

  // A core whose services end before timeout_ms: refused, and said so through its log.
  Host shorter;
  shorter.services()->hdr.struct_size = offsetof(hmc_host_services_t, timeout_ms);
  EXPECT_EQ(check_host_services(shorter.services(), HMC_NET_ABI_VERSION),
            HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(shorter.last().find("host services are"), std::string::npos) << shorter.last();

  Host no_clock;
  no_clock.services()->now_ns = nullptr;
  EXPECT_EQ(check_host_services(no_clock.services(), HMC_NET_ABI_VERSION),
            HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_NE(no_clock.last().find("now_ns"), std::string::npos) << no_clock.last();

  // No log at all: refused without a message (there is nowhere to write it).
  Host no_log;
  no_log.services()->log = nullptr;
  EXPECT_EQ(check_host_services(no_log.services(), HMC_NET_ABI_VERSION),
            HMC_PLUGIN_ERR_INVALID_ARGUMENT);

  Host newer;
  newer.services()->core_abi_min = 3;
  newer.services()->core_abi_max = 4;
  EXPECT_EQ(check_host_services(newer.services(), HMC_NET_ABI_VERSION), HMC_PLUGIN_ERR_VERSION);
  EXPECT_NE(newer.last().find("3 to 4, not this plugin's 2"), std::string::npos) << newer.last();
}

// --- the net adaptor (net_adaptor.hpp): a plugin of test types, counting what reaches it ------

struct FakeEp;
struct FakeCtx {
  const hmc_host_services_t* host = nullptr;
  Log log{};
  int calls = 0;      // plugin functions that ran
  bool fail = false;  // the plugin's functions fail with CANCELLED after making their object
  static int live;
  FakeCtx() { ++live; }
  ~FakeCtx() { --live; }
  static hmc_plugin_status_t create(const hmc_host_services_t* host, FakeCtx** out) {
    auto* c = new FakeCtx;
    c->host = host;
    c->log = Log(host);
    *out = c;
    return HMC_PLUGIN_SUCCESS;
  }
  int device_count() const { return 2; }
  bool valid_device(int dev) const { return dev == 0 || dev == 1; }
};
int FakeCtx::live = 0;
struct FakeEp {
  FakeCtx* ctx;
  hmc_plugin_status_t ready_status() const { return HMC_PLUGIN_IN_PROGRESS; }
};
struct FakeListener {
  FakeCtx* ctx;
  hmc_plugin_status_t accept(FakeEp** out) {
    ++ctx->calls;
    *out = new FakeEp{ctx};
    return HMC_PLUGIN_SUCCESS;
  }
};
struct FakeReq {
  FakeEp* ep;
  bool done = false;
  hmc_plugin_status_t result = HMC_PLUGIN_SUCCESS;
  size_t bytes = 0;
};
struct FakeMr {};
struct FakeKey {};

// Tagged messages only (no registration, no one-sided slots); isend throws for a tag of 1 and
// 2, and a "handle" decodes when its first byte is 'H'.
struct Fake : NetPlugin<FakeCtx, FakeEp, FakeListener, FakeReq, FakeMr, FakeKey> {
  using Handle = int;
  static bool decode_handle(const uint8_t* p, size_t n, Handle* h, std::string* why) {
    if (n == 0 || p[0] != 'H') {
      *why = "not an H";
      return false;
    }
    *h = static_cast<int>(n);
    return true;
  }
  static const Log& log(FakeCtx& c) { return c.log; }
  static void device_props(FakeCtx& c, int dev, hmc_net_device_props_t* props) {
    ++c.calls;
    props->name = dev == 0 ? "zero" : "one";
  }
  static hmc_plugin_status_t listen(FakeCtx& c, int, void*, size_t* len, FakeListener** out) {
    ++c.calls;
    *len = 0;
    *out = new FakeListener{&c};
    return HMC_PLUGIN_SUCCESS;
  }
  static hmc_plugin_status_t connect(FakeCtx& c, int, const Handle& h, FakeEp** out) {
    ++c.calls;
    if (h != 3) return HMC_PLUGIN_ERR_PEER_LOST;
    *out = new FakeEp{&c};
    return HMC_PLUGIN_SUCCESS;
  }
  static hmc_plugin_status_t test(FakeReq& r, int* done, size_t* bytes) {
    ++r.ep->ctx->calls;
    return report_test(r, done, bytes, [&] { delete &r; });
  }
  static hmc_plugin_status_t isend(FakeEp& e, const void*, size_t len, FakeMr*, uint64_t tag,
                                   FakeReq** out) {
    ++e.ctx->calls;
    if (tag == 1) throw std::bad_alloc();
    if (tag == 2) throw std::runtime_error("x");
    std::unique_ptr<FakeReq> r(new FakeReq{&e});
    r->done = true;
    r->result = tag == 3 ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS;
    r->bytes = len;
    *out = r.get();
    // A failure with *out set (and the request freed): the adaptor must not hand it on.
    if (e.ctx->fail) return HMC_PLUGIN_ERR_CANCELLED;
    r.release();
    return HMC_PLUGIN_SUCCESS;
  }
  static void progress(FakeCtx& c) { ++c.calls; }
};

// With one-sided slots: only the vectored put, to see the iov checks.
struct FakeRma : Fake {
  static hmc_plugin_status_t iput_v(FakeEp& e, const hmc_net_iov_t*, size_t, FakeKey&,
                                    FakeReq** out) {
    ++e.ctx->calls;
    *out = new FakeReq{&e};
    return HMC_PLUGIN_SUCCESS;
  }
};

constexpr hmc_config_var_t kFakeVars[] = {{nullptr, nullptr, nullptr}};
constexpr hmc_net_plugin_v2_t kFake = net_table<Fake>("fake", "9.9", kFakeVars);
constexpr hmc_net_plugin_v2_t kFakeRma = net_table<FakeRma>("fakerma", "1", nullptr);

TEST(SdkNetAdaptor, FillsTheTableAndOnlyTheSlotsThePluginDefines) {
  EXPECT_EQ(kFake.hdr.struct_size, sizeof(hmc_net_plugin_v2_t));
  EXPECT_EQ(kFake.hdr.abi_version, HMC_NET_ABI_VERSION);
  EXPECT_STREQ(kFake.name, "fake");
  EXPECT_STREQ(kFake.version, "9.9");
  EXPECT_EQ(kFake.config_vars, kFakeVars);
  EXPECT_NE(kFake.init, nullptr);
  EXPECT_NE(kFake.finalize, nullptr);
  EXPECT_NE(kFake.test, nullptr);
  EXPECT_NE(kFake.isend, nullptr);
  EXPECT_NE(kFake.progress, nullptr);
  EXPECT_EQ(kFake.irecv, nullptr);
  EXPECT_EQ(kFake.reg_mr, nullptr);
  EXPECT_EQ(kFake.iput, nullptr);
  EXPECT_EQ(kFake.iput_v, nullptr);
  EXPECT_EQ(kFake.cancel, nullptr);
  EXPECT_EQ(kFake.wait_fd, nullptr);
  EXPECT_EQ(kFake.arm, nullptr);
  EXPECT_EQ(kFake.connect_hello, nullptr);
  EXPECT_EQ(kFake.iflush, nullptr);
  EXPECT_EQ(kFake.notify_poll, nullptr);
  EXPECT_NE(kFakeRma.iput_v, nullptr);
  EXPECT_EQ(kFakeRma.iget_v, nullptr);
  EXPECT_EQ(kFakeRma.config_vars, nullptr);
}

TEST(SdkNetAdaptor, ChecksHostServicesAndArgumentsBeforeThePlugin) {
  Host newer;
  newer.services()->core_abi_min = 3;
  newer.services()->core_abi_max = 4;
  hmc_net_ctx_t* ctx = nullptr;
  EXPECT_EQ(kFake.init(newer.services(), &ctx), HMC_PLUGIN_ERR_VERSION);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(newer.last().find("not this plugin's 2"), std::string::npos) << newer.last();
  Host host;
  EXPECT_EQ(kFake.init(host.services(), nullptr), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(kFake.init(host.services(), &ctx), HMC_PLUGIN_SUCCESS);
  ASSERT_NE(ctx, nullptr);
  auto& c = *reinterpret_cast<FakeCtx*>(ctx);
  EXPECT_EQ(c.host, host.services());

  int count = 0;
  EXPECT_EQ(kFake.device_count(ctx, &count), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(count, 2);
  EXPECT_EQ(kFake.device_count(ctx, nullptr), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  hmc_net_device_props_t props{};
  props.hdr = HMC_ABI_HEADER_INIT(hmc_net_device_props_t);
  EXPECT_EQ(kFake.device_props(ctx, 2, &props), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kFake.device_props(ctx, -1, &props), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kFake.device_props(nullptr, 0, &props), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  hmc_net_device_props_t headless{};
  headless.hdr.struct_size = 4;
  EXPECT_EQ(kFake.device_props(ctx, 0, &headless), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(c.calls, 0) << "a refused call reached the plugin";
  EXPECT_EQ(kFake.device_props(ctx, 1, &props), HMC_PLUGIN_SUCCESS);
  EXPECT_STREQ(props.name, "one");

  // listen and accept through the defaults; the listener's delete is the default close.
  uint8_t handle[HMC_NET_HANDLE_MAX];
  size_t handle_len = 99;
  hmc_net_listener_t* l = nullptr;
  EXPECT_EQ(kFake.listen(ctx, 0, handle, nullptr, &l), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kFake.listen(ctx, 5, handle, &handle_len, &l), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(kFake.listen(ctx, 0, handle, &handle_len, &l), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(handle_len, 0u);
  hmc_net_ep_t* accepted = nullptr;
  EXPECT_EQ(kFake.accept(l, nullptr), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(kFake.accept(l, &accepted), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(kFake.ep_ready(accepted), HMC_PLUGIN_IN_PROGRESS);
  EXPECT_EQ(kFake.close_listener(l), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(kFake.close_listener(nullptr), HMC_PLUGIN_ERR_INVALID_ARGUMENT);

  // connect: the adaptor decodes the handle and says why it cannot, through the host's log.
  hmc_net_ep_t* ep = nullptr;
  const int before = c.calls;
  EXPECT_EQ(kFake.connect(ctx, 0, "xyz", 3, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(host.last(), "connect: invalid connection handle: not an H");
  EXPECT_EQ(c.calls, before);
  EXPECT_EQ(kFake.connect(ctx, 0, "Hx", 2, &ep), HMC_PLUGIN_ERR_PEER_LOST);
  EXPECT_EQ(ep, nullptr) << "the out-pointer is written on success only";
  ASSERT_EQ(kFake.connect(ctx, 1, "Hxy", 3, &ep), HMC_PLUGIN_SUCCESS);
  ASSERT_NE(ep, nullptr);

  // isend: buffer checks, exceptions, the out-pointer on failure, and test's report.
  hmc_net_request_t* req = nullptr;
  const int sent_before = c.calls;
  EXPECT_EQ(kFake.isend(ep, nullptr, 4, nullptr, 0, &req), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kFake.isend(ep, "abcd", 4, nullptr, 0, nullptr), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kFake.isend(nullptr, "abcd", 4, nullptr, 0, &req), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(c.calls, sent_before);
  EXPECT_EQ(kFake.isend(ep, "abcd", 4, nullptr, 1, &req), HMC_PLUGIN_ERR_NO_MEMORY);
  EXPECT_EQ(kFake.isend(ep, "abcd", 4, nullptr, 2, &req), HMC_PLUGIN_ERR_INTERNAL);
  EXPECT_EQ(req, nullptr);
  ASSERT_EQ(kFake.isend(ep, nullptr, 0, nullptr, 3, &req), HMC_PLUGIN_SUCCESS);
  int done = 0;
  size_t bytes = 7;
  EXPECT_EQ(kFake.test(req, nullptr, &bytes), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kFake.test(req, &done, &bytes), HMC_PLUGIN_ERR_TRUNCATED);
  EXPECT_EQ(done, 1);
  EXPECT_EQ(bytes, 0u);
  req = nullptr;
  ASSERT_EQ(kFake.isend(ep, "abcd", 4, nullptr, 0, &req), HMC_PLUGIN_SUCCESS);
  reinterpret_cast<FakeReq*>(req)->done = false;
  EXPECT_EQ(kFake.test(req, &done, nullptr), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(done, 0);
  reinterpret_cast<FakeReq*>(req)->done = true;
  EXPECT_EQ(kFake.test(req, &done, nullptr), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(done, 1);
  c.fail = true;
  hmc_net_request_t* failed = nullptr;
  EXPECT_EQ(kFake.isend(ep, "abcd", 4, nullptr, 0, &failed), HMC_PLUGIN_ERR_CANCELLED);
  EXPECT_EQ(failed, nullptr);
  c.fail = false;

  // The vectored put: every piece checked before the plugin sees the list.
  FakeKey key;
  auto* k = reinterpret_cast<hmc_net_rkey_t*>(&key);
  char buf[8] = {};
  hmc_net_iov_t iov[2] = {{buf, 8, nullptr, 0}, {nullptr, 1, nullptr, 0}};
  const int vec_before = c.calls;
  EXPECT_EQ(kFakeRma.iput_v(ep, iov, 2, k, &req), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kFakeRma.iput_v(ep, nullptr, 1, k, &req), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kFakeRma.iput_v(ep, iov, 1, nullptr, &req), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(c.calls, vec_before);
  iov[1].len = 0;
  ASSERT_EQ(kFakeRma.iput_v(ep, iov, 2, k, &req), HMC_PLUGIN_SUCCESS);
  delete reinterpret_cast<FakeReq*>(req);

  EXPECT_EQ(kFake.progress(ctx), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(kFake.progress(nullptr), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kFake.close_ep(ep), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(kFake.close_ep(accepted), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(kFake.close_ep(nullptr), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(FakeCtx::live, 1);
  EXPECT_EQ(kFake.finalize(ctx), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(FakeCtx::live, 0);
  EXPECT_EQ(kFake.finalize(nullptr), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
}

TEST(SdkConfig, ParsesValues) {
  bool b = false;
  for (const char* t : {"1", "y", "YES", "on", "True"}) {
    b = false;
    EXPECT_TRUE(parse_bool(t, &b) && b) << t;
  }
  for (const char* f : {"0", "n", "no", "OFF", "false"}) {
    b = true;
    EXPECT_TRUE(parse_bool(f, &b) && !b) << f;
  }
  EXPECT_FALSE(parse_bool("maybe", &b));
  EXPECT_FALSE(parse_bool("", &b));

  long long i = 0;
  EXPECT_TRUE(parse_int("42", 0, 64, &i));
  EXPECT_EQ(i, 42);
  EXPECT_TRUE(parse_int("-5", -10, 10, &i));
  EXPECT_EQ(i, -5);
  for (const char* bad : {"", "-", "65", "2x", "+3", " 3", "99999999999999999999"})
    EXPECT_FALSE(parse_int(bad, 0, 64, &i)) << bad;

  size_t s = 0;
  EXPECT_TRUE(parse_size("123", &s));
  EXPECT_EQ(s, 123u);
  EXPECT_TRUE(parse_size("64k", &s));
  EXPECT_EQ(s, size_t{64} << 10);
  EXPECT_TRUE(parse_size("4M", &s));
  EXPECT_EQ(s, size_t{4} << 20);
  EXPECT_TRUE(parse_size("1G", &s));
  EXPECT_EQ(s, size_t{1} << 30);
  for (const char* bad : {"", "K", "-1", "4Q", "1.5M", "64KiB", "99999999999999999999G"})
    EXPECT_FALSE(parse_size(bad, &s)) << bad;

  std::vector<std::string> list;
  EXPECT_TRUE(parse_list(" eth0 , eth1,lo", &list));
  EXPECT_EQ(list, (std::vector<std::string>{"eth0", "eth1", "lo"}));
  for (const char* bad : {"", "a,,b", "a,", ",a", " , "})
    EXPECT_FALSE(parse_list(bad, &list)) << bad;

  EXPECT_EQ(format_size(65536), "64K");
  EXPECT_EQ(format_size(size_t{1} << 30), "1G");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_size(0), "0");
}

TEST(SdkConfig, ReaderKeepsDefaultsAndNamesTheVariable) {
  Host host({{"HMC_T_STREAMS", " 4 "}, {"HMC_T_BLANK", "  "}, {"HMC_T_MODE", "PEER"}});
  Log log(host.services());
  ConfigReader r(host.services(), log);
  int streams = 2, unset = 9, blank = 7;
  EXPECT_TRUE(r.read_int("HMC_T_STREAMS", 1, 64, &streams));
  EXPECT_EQ(streams, 4);
  EXPECT_TRUE(r.read_int("HMC_T_UNSET", 1, 64, &unset));
  EXPECT_EQ(unset, 9);
  EXPECT_TRUE(r.read_int("HMC_T_BLANK", 1, 64, &blank));
  EXPECT_EQ(blank, 7);
  int mode = 0;
  EXPECT_TRUE(r.read_choice("HMC_T_MODE", {"auto", "peer", "none"}, &mode));
  EXPECT_EQ(mode, 1);
  EXPECT_TRUE(host.logged().empty());
}

TEST(SdkConfig, ReaderRefusesInvalidValuesWithAMessage) {
  Host host({{"HMC_T_STREAMS", "65"},
             {"HMC_T_SHM", "maybe"},
             {"HMC_T_CHUNK", "1"},
             {"HMC_T_LIMIT", "2M"},
             {"HMC_T_IFNAMES", "a,,b"},
             {"HMC_T_MODE", "sometimes"}});
  Log log(host.services());
  ConfigReader r(host.services(), log);
  int streams = 2;
  EXPECT_FALSE(r.read_int("HMC_T_STREAMS", 1, 64, &streams));
  EXPECT_EQ(streams, 2);
  EXPECT_EQ(host.last(), "invalid HMC_T_STREAMS=\"65\": expected an integer from 1 to 64");
  bool shm = true;
  EXPECT_FALSE(r.read_bool("HMC_T_SHM", &shm));
  EXPECT_EQ(host.last(),
            "invalid HMC_T_SHM=\"maybe\": expected a boolean (1/0, yes/no, on/off, true/false)");
  size_t chunk = 0;
  EXPECT_FALSE(r.read_size("HMC_T_CHUNK", 4 << 10, size_t{1} << 30, &chunk));
  EXPECT_EQ(host.last(), "invalid HMC_T_CHUNK=\"1\": expected a size from 4K to 1G");
  EXPECT_FALSE(r.read_size("HMC_T_LIMIT", 0, size_t{1} << 20, &chunk, "a size up to 1M (\"8K\")"));
  EXPECT_EQ(host.last(), "invalid HMC_T_LIMIT=\"2M\": expected a size up to 1M (\"8K\")");
  std::vector<std::string> names;
  EXPECT_FALSE(r.read_list("HMC_T_IFNAMES", 16, &names));
  EXPECT_EQ(host.last(),
            "invalid HMC_T_IFNAMES=\"a,,b\": expected a comma-separated list of up to 16 items");
  int mode = 0;
  EXPECT_FALSE(r.read_choice("HMC_T_MODE", {"auto", "peer", "none"}, &mode));
  EXPECT_EQ(host.last(), "invalid HMC_T_MODE=\"sometimes\": expected auto, peer or none");
  EXPECT_EQ(host.logged().size(), 6u);
}

}  // namespace
