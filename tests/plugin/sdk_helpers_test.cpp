// The SDK's C++ helpers for plugins (sdk/include/hmc/plugin/*.hpp): status names, the C
// boundary (guarded, check_host_services) and typed configuration reading. They are compiled
// into plugins, so they are tested here as a plugin uses them, against host services of a test's
// own.
#include <gtest/gtest.h>

#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "hmc/plugin/boundary.hpp"
#include "hmc/plugin/config.hpp"
#include "hmc/plugin/net.h"
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
