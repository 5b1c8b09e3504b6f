// The configuration table: parsing, validation messages naming the variable, misspellings.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <utility>

#include "util/config.h"
#include "util/status.h"

using namespace hmc;

namespace {
struct EnvGuard {
  std::vector<std::string> names;
  void set(const std::string& n, const std::string& v) {
    setenv(n.c_str(), v.c_str(), 1);
    names.push_back(n);
  }
  ~EnvGuard() {
    for (auto& n : names) unsetenv(n.c_str());
  }
};
}  // namespace

TEST(Config, ParseSize) {
  uint64_t v = 0;
  const std::pair<const char*, uint64_t> good[] = {
      {"123", 123u}, {"4K", 4096u}, {"3M", 3u << 20}, {"1G", 1u << 30}};
  for (const auto& [text, want] : good) {
    EXPECT_TRUE(parse_size(text, &v)) << text;
    EXPECT_EQ(v, want) << text;
  }
  EXPECT_FALSE(parse_size("", &v));
  EXPECT_FALSE(parse_size("-1", &v));
  EXPECT_FALSE(parse_size("12Q", &v));
  EXPECT_FALSE(parse_size("99999999999999999999", &v));
  EXPECT_FALSE(parse_size("17179869184G", &v));  // overflows 64 bits
}

TEST(Config, DefaultsAndValues) {
  EnvGuard env;
  env.set("HMC_TIMEOUT_MS", "1234");
  Config cfg;
  ASSERT_EQ(cfg.load_from_environment(), HMC_SUCCESS);
  EXPECT_EQ(cfg.get_int("HMC_TIMEOUT_MS"), 1234);
  EXPECT_EQ(cfg.get("HMC_LOG_LEVEL"), "warn");
  EXPECT_TRUE(cfg.get_bool("HMC_PROGRESS_THREAD"));
  EXPECT_FALSE(cfg.raw("HMC_LOG_LEVEL").has_value());
}

TEST(Config, InvalidValueNamesTheVariable) {
  EnvGuard env;
  env.set("HMC_TIMEOUT_MS", "abc");
  Config cfg;
  EXPECT_EQ(cfg.load_from_environment(), HMC_ERR_CONFIG);
  EXPECT_NE(last_error().find("HMC_TIMEOUT_MS"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("abc"), std::string::npos) << last_error();
}

// A variable whose documented default is negative (HMC_RANK=-1: "the launcher's") takes that
// value when set; other negative values stay invalid, as do negative values of the others.
TEST(Config, NegativeDefaultIsAccepted) {
  {
    EnvGuard env;
    env.set("HMC_RANK", "-1");
    Config cfg;
    ASSERT_EQ(cfg.load_from_environment(), HMC_SUCCESS) << last_error();
    EXPECT_EQ(cfg.get_int("HMC_RANK"), -1);
  }
  const struct {
    const char* var;
    const char* value;
    const char* error;
  } refused[] = {{"HMC_RANK", "-2", "a non-negative integer, or -1"},
                 {"HMC_TIMEOUT_MS", "-1", "expected a non-negative integer"}};
  for (const auto& r : refused) {
    EnvGuard env;
    env.set(r.var, r.value);
    Config cfg;
    EXPECT_EQ(cfg.load_from_environment(), HMC_ERR_CONFIG) << r.var;
    EXPECT_NE(last_error().find(r.error), std::string::npos) << last_error();
  }
}

TEST(Config, InvalidBoolAndLevel) {
  {
    EnvGuard env;
    env.set("HMC_PROGRESS_THREAD", "maybe");
    Config cfg;
    EXPECT_EQ(cfg.load_from_environment(), HMC_ERR_CONFIG);
    EXPECT_NE(last_error().find("HMC_PROGRESS_THREAD"), std::string::npos);
  }
  {
    EnvGuard env;
    env.set("HMC_LOG_LEVEL", "loud");
    Config cfg;
    EXPECT_EQ(cfg.load_from_environment(), HMC_ERR_CONFIG);
    EXPECT_NE(last_error().find("HMC_LOG_LEVEL"), std::string::npos);
  }
}

TEST(Config, ListsSplitAndTrim) {
  EnvGuard env;
  env.set("HMC_NET_PLUGINS", " ucx, ^ofi ,,hoststage ");
  Config cfg;
  ASSERT_EQ(cfg.load_from_environment(), HMC_SUCCESS);
  auto l = cfg.get_list("HMC_NET_PLUGINS");
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0], "ucx");
  EXPECT_EQ(l[1], "^ofi");
  EXPECT_EQ(l[2], "hoststage");
}

TEST(Config, PluginDeclaredVariablesAreKnown) {
  EnvGuard env;
  env.set("HMC_HOSTSTAGE_STREAMS", "4");
  Config cfg;
  ASSERT_EQ(cfg.load_from_environment(), HMC_SUCCESS);
  ASSERT_EQ(cfg.declare({"HMC_HOSTSTAGE_STREAMS", ConfigType::Int, "2", "streams", "hoststage"}),
            HMC_SUCCESS);
  EXPECT_EQ(cfg.get_int("HMC_HOSTSTAGE_STREAMS"), 4);
  EXPECT_STREQ(cfg.c_str("HMC_HOSTSTAGE_STREAMS"), "4");
  EXPECT_EQ(cfg.c_str("HMC_HOSTSTAGE_IFNAMES"), nullptr);
}
