// Plugin loader: discovery, validation with specific reasons, selection, shadowing, host services.
// The plugins come from tests/plugin/test_plugin.c, built with toggles into HMC_TP_ROOT/<dir>/.
#include "plugin/loader.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "load_plugins.h"
#include "plugin/discover.h"
#include "plugin/select.h"
#include "util/config.h"
#include "util/log.h"

extern char** environ;

namespace hmc::plugin {
namespace {

std::string real(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}

const std::string kRoot = HMC_TP_ROOT;
const std::string kMixed = kRoot + "/mixed";
const std::string kOrder = kRoot + "/order";
const std::string kShadow = kRoot + "/shadow";
const std::string kExtra = kRoot + "/extra";
const std::string kCcl = kRoot + "/ccl";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Each test starts from an environment without HMC_ variables, logs at info level into a file of
// its own (to check the summary), and loads through a Loader that searches only HMC_PLUGIN_PATH.
class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> names;
    for (char** e = environ; e && *e; ++e)
      if (strncmp(*e, "HMC_", 4) == 0) names.emplace_back(*e, strchr(*e, '=') - *e);
    for (const auto& n : names) unsetenv(n.c_str());
    char dir[] = "/tmp/hmc-loader-test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    tmp_ = dir;
    log_path_ = tmp_ + "/log";
    std::string err;
    ASSERT_TRUE(log::configure(HMC_LOG_INFO, log_path_, &err)) << err;
  }
  void TearDown() override {
    loader_.reset();  // finalizes while the probe files still exist
    std::string err;
    log::configure(HMC_LOG_WARN, tmp_ + "/log.after", &err);
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);
  }

  Loader& load(bool default_dirs = false) {
    return hmc::test::load_plugins(cfg_, loader_, default_dirs);
  }

  // Loads the ordering tree (alpha, beta, gamma) with HMC_NET_PLUGINS=net_plugins.
  Loader& load_order(const char* net_plugins) {
    setenv("HMC_PLUGIN_PATH", kOrder.c_str(), 1);
    setenv("HMC_NET_PLUGINS", net_plugins, 1);
    return load();
  }

  const Record& record(const std::string& name) {
    for (const auto& r : loader_->records())
      if (r->name == name) return *r;
    ADD_FAILURE() << "no record named " << name;
    static Record none;
    return none;
  }

  std::vector<std::string> loaded_names(Kind kind) {
    std::vector<std::string> out;
    for (Record* r : loader_->loaded(kind)) out.push_back(r->name);
    return out;
  }

  std::string log_text() { return read_file(log_path_); }
  std::string probe_path() { return tmp_ + "/probe"; }

  std::string tmp_;
  std::string log_path_;
  Config cfg_;
  std::unique_ptr<Loader> loader_;
};

// ---- one broken plugin at a time, among the others of mixed/ ---------------------------------

struct BrokenCase {
  const char* name;  // record name
  Kind kind;
  State state;
  std::string reason;  // exact expected reason
};

std::string too_small(size_t have, size_t need) {
  return "table too small: " + std::to_string(have) + " bytes, need at least " +
         std::to_string(need);
}

std::vector<BrokenCase> broken_cases() {
  const size_t net_need = offsetof(hmc_net_plugin_v2_t, test) + sizeof(void*);
  const size_t dev_need = offsetof(hmc_device_plugin_v1_t, event_query) + sizeof(void*);
  return {
      {"garbage", Kind::Net, State::Broken, "not a shared object (no ELF header)"},
      {"noentry", Kind::Net, State::Broken, "missing entry symbol hmc_net_plugin_v2"},
      {"wrongkind", Kind::Net, State::Broken,
       "missing entry symbol hmc_net_plugin_v2 (it exports hmc_device_plugin_v1: name the file "
       "libhmc-device-wrongkind.so)"},
      {"elsewhere", Kind::Net, State::Broken,
       "entry symbol hmc_net_plugin_v2 resolves to " + real(kExtra + "/libtp_entry_helper.so") +
           ", not to the plugin itself"},
      {"entrynull", Kind::Net, State::Broken, "entry hmc_net_plugin_v2() returned NULL"},
      {"abi3", Kind::Net, State::Broken, "incompatible ABI version 3 (core accepts 2..2)"},
      {"abi0", Kind::Net, State::Broken, "incompatible ABI version 0 (core accepts 2..2)"},
      {"netabi1", Kind::Net, State::Broken,
       "it exports hmc_net_plugin_v1 (net ABI 1); this core loads net ABI 2 (hmc_net_plugin_v2): "
       "rebuild the plugin against this SDK, whose net.h says what changed"},
      {"short", Kind::Net, State::Broken,
       too_small(offsetof(hmc_net_plugin_v2_t, listen), net_need)},
      {"devshort", Kind::Device, State::Broken,
       too_small(offsetof(hmc_device_plugin_v1_t, mem_alloc), dev_need)},
      {"nullaccept", Kind::Net, State::Broken, "required slot 'accept' is NULL"},
      {"badname", Kind::Net, State::Broken,
       "invalid name 'Bad-Name' (must be 1 to 64 characters of [a-z0-9_])"},
      {"emptyname", Kind::Net, State::Broken, "name is NULL or empty"},
      {"mismatch", Kind::Net, State::Broken,
       "the table's name 'other' does not match the file name libhmc-net-mismatch.so (expected "
       "'mismatch')"},
      {"initfail", Kind::Net, State::Broken,
       "init failed: internal error (-10): cannot open /dev/hmc-test0: Permission denied"},
      {"nodevice", Kind::Net, State::NoDevice, "no device: no test NIC on this host"},
      {"rmanoiput", Kind::Net, State::Broken,
       "slot 'iput' is NULL but device 0 (fake0) sets HMC_NET_FLAG_RMA"},
      {"rmahost", Kind::Net, State::Broken,
       "device 0 (fake0) declares host memory in rma_mem_ifaces (0x1): host memory belongs in "
       "mem_ifaces"},
      {"badvar", Kind::Net, State::Broken,
       "config_vars[0] is named 'TP_BADVAR_OPTION', which does not start with HMC_"},
  };
}

// Names the case in test listings (ctest names show the parameter).
void PrintTo(const BrokenCase& c, std::ostream* os) {
  *os << c.name;
}

class BrokenPluginTest : public LoaderTest, public ::testing::WithParamInterface<BrokenCase> {};

TEST_P(BrokenPluginTest, IsSkippedWithItsReasonWhileGoodOnesLoad) {
  const BrokenCase& c = GetParam();
  setenv("HMC_PLUGIN_PATH", kMixed.c_str(), 1);
  Loader& l = load();

  const Record& r = record(c.name);
  EXPECT_EQ(r.kind, c.kind);
  EXPECT_EQ(r.state, c.state) << state_name(r.state) << ": " << r.reason;
  EXPECT_FALSE(r.loaded);
  EXPECT_EQ(r.reason, c.reason);
  EXPECT_EQ(r.net, nullptr);
  EXPECT_EQ(r.device, nullptr);
  EXPECT_EQ(r.path.rfind(real(kMixed) + "/", 0), 0u) << r.path;

  // The good plugins beside it are unaffected.
  EXPECT_EQ(loaded_names(Kind::Net), (std::vector<std::string>{"goodnet", "minimal"}));
  EXPECT_EQ(loaded_names(Kind::Device), (std::vector<std::string>{"gooddev"}));
  (void)l;

  // Broken is a warning; no device is information, not an error.
  std::string log = log_text();
  std::string kind = kind_name(c.kind);
  std::string line_start = (c.state == State::Broken ? "WARN  " : "INFO  ") + kind + " plugin '" +
                           c.name + "' " + (c.state == State::Broken ? "skipped: " : "not used: ") +
                           c.reason;
  EXPECT_NE(log.find(line_start), std::string::npos) << "expected '" << line_start << "' in\n"
                                                     << log;
}

INSTANTIATE_TEST_SUITE_P(Mixed, BrokenPluginTest, ::testing::ValuesIn(broken_cases()),
                         [](const ::testing::TestParamInfo<BrokenCase>& info) {
                           return std::string(info.param.name);
                         });

TEST_F(LoaderTest, BrokenAbiVersionIsRecorded) {
  setenv("HMC_PLUGIN_PATH", (kMixed + "/libhmc-net-abi3.so").c_str(), 1);
  load();
  ASSERT_EQ(loader_->records().size(), 1u);
  EXPECT_EQ(record("abi3").abi_version, 3u);
}

TEST_F(LoaderTest, GoodPluginsLoadWithTheirDetails) {
  setenv("HMC_PLUGIN_PATH", kMixed.c_str(), 1);
  load();
  const Record& net = record("goodnet");
  EXPECT_EQ(net.state, State::Loaded);
  EXPECT_TRUE(net.loaded);
  EXPECT_EQ(net.kind, Kind::Net);
  EXPECT_EQ(net.abi_version, HMC_NET_ABI_VERSION);
  EXPECT_EQ(net.version, "test");
  EXPECT_EQ(net.device_count, 1);
  EXPECT_EQ(net.reason, "");
  EXPECT_EQ(net.path, real(kMixed + "/libhmc-net-goodnet.so"));
  EXPECT_EQ(net.origin, "HMC_PLUGIN_PATH");
  ASSERT_NE(net.net, nullptr);
  EXPECT_NE(net.net_ctx, nullptr);
  EXPECT_STREQ(net.net->name, "goodnet");

  const Record& dev = record("gooddev");
  EXPECT_TRUE(dev.loaded);
  EXPECT_EQ(dev.kind, Kind::Device);
  EXPECT_EQ(dev.vendor, "hmc tests");
  EXPECT_EQ(dev.device_count, 0);
  EXPECT_EQ(dev.reason, "0 devices: no fake accelerator (test plugin)");
  ASSERT_NE(dev.device, nullptr);
  EXPECT_NE(dev.device_ctx, nullptr);

  std::string log = log_text();
  EXPECT_NE(
      log.find("INFO  net plugin 'goodnet' loaded from " + net.path + " (version test, 1 device)"),
      std::string::npos)
      << log;
  EXPECT_NE(
      log.find("plugins in use, in order of preference: device: gooddev; net: goodnet, minimal"),
      std::string::npos)
      << log;
}

TEST_F(LoaderTest, TableIsZeroExtendedToTheCoreSize) {
  // minimal's table ends after its last required slot, though its static storage holds more
  // slots: the core must not see them.
  setenv("HMC_PLUGIN_PATH", (kMixed + "/libhmc-net-minimal.so").c_str(), 1);
  load();
  const Record& r = record("minimal");
  ASSERT_TRUE(r.loaded) << r.reason;
  EXPECT_EQ(r.table_size, offsetof(hmc_net_plugin_v2_t, reg_mr));
  EXPECT_EQ(r.net->hdr.struct_size, sizeof(hmc_net_plugin_v2_t));
  EXPECT_NE(r.net->test, nullptr);
  EXPECT_EQ(r.net->reg_mr, nullptr);
  EXPECT_EQ(r.net->isend, nullptr);
  EXPECT_EQ(r.net->iput, nullptr);

  const Record* full = nullptr;
  loader_.reset();
  setenv("HMC_PLUGIN_PATH", (kMixed + "/libhmc-net-goodnet.so").c_str(), 1);
  load();
  full = &record("goodnet");
  ASSERT_TRUE(full->loaded);
  EXPECT_NE(full->net->isend, nullptr);
  EXPECT_EQ(full->net->cancel, nullptr);
}

TEST_F(LoaderTest, SingleFilesInThePath) {
  std::string path = kMixed + "/libhmc-net-nullaccept.so:" + kMixed + "/libhmc-device-gooddev.so";
  setenv("HMC_PLUGIN_PATH", path.c_str(), 1);
  load();
  ASSERT_EQ(loader_->records().size(), 2u);
  EXPECT_EQ(loader_->records()[0]->name, "nullaccept");
  EXPECT_EQ(loader_->records()[0]->reason, "required slot 'accept' is NULL");
  EXPECT_EQ(loader_->records()[1]->name, "gooddev");
  EXPECT_TRUE(loader_->records()[1]->loaded);
}

TEST_F(LoaderTest, UnconventionalFileNameTakesKindAndNameFromTheTable) {
  setenv("HMC_PLUGIN_PATH", (kExtra + "/custom-net-plugin.so").c_str(), 1);
  load();
  ASSERT_EQ(loader_->records().size(), 1u);
  const Record& r = *loader_->records()[0];
  EXPECT_EQ(r.kind, Kind::Net);
  EXPECT_EQ(r.name, "custom");
  EXPECT_TRUE(r.loaded) << r.reason;
}

TEST_F(LoaderTest, UnconventionalFileExcludedIsNotInitialised) {
  setenv("HMC_PLUGIN_PATH", (kExtra + "/custom-net-plugin.so").c_str(), 1);
  setenv("HMC_NET_PLUGINS", "^custom", 1);
  setenv("HMC_TP_CUSTOM_PROBE_FILE", probe_path().c_str(), 1);
  load();
  const Record& r = record("custom");
  EXPECT_EQ(r.state, State::NotSelected);
  EXPECT_EQ(r.reason, "excluded by HMC_NET_PLUGINS");
  EXPECT_FALSE(exists(probe_path())) << "init ran for an excluded plugin";
}

TEST_F(LoaderTest, UnconventionalFileWithoutEntry) {
  // A file of any name given explicitly is probed like the others; its name is its file name.
  std::string text = tmp_ + "/probe";
  std::ofstream(text) << "not elf\n";
  setenv("HMC_PLUGIN_PATH", text.c_str(), 1);
  load();
  ASSERT_EQ(loader_->records().size(), 1u);
  EXPECT_EQ(loader_->records()[0]->kind, Kind::Unknown);
  EXPECT_EQ(loader_->records()[0]->name, "probe");
  EXPECT_EQ(loader_->records()[0]->reason, "not a shared object (no ELF header)");
}

TEST_F(LoaderTest, UnconventionalFileWhoseEntryIsInADependency) {
  // A link of another name makes the "elsewhere" plugin unconventional: its kind comes from the
  // entry symbol, which its helper library defines.
  std::string link = tmp_ + "/odd.so";
  ASSERT_EQ(symlink((kMixed + "/libhmc-net-elsewhere.so").c_str(), link.c_str()), 0);
  setenv("HMC_PLUGIN_PATH", link.c_str(), 1);
  load();
  ASSERT_EQ(loader_->records().size(), 1u);
  const Record& r = *loader_->records()[0];
  EXPECT_EQ(r.kind, Kind::Net);
  EXPECT_EQ(r.path, real(kMixed + "/libhmc-net-elsewhere.so"));
  EXPECT_EQ(r.reason, "entry symbol hmc_net_plugin_v2 resolves to " +
                          real(kExtra + "/libtp_entry_helper.so") + ", not to the plugin itself");
}

// ---- host services -----------------------------------------------------------------------------

TEST_F(LoaderTest, InitReceivesWorkingHostServices) {
  setenv("HMC_PLUGIN_PATH", (kMixed + "/libhmc-net-goodnet.so").c_str(), 1);
  setenv("HMC_TP_GOODNET_PROBE_FILE", probe_path().c_str(), 1);
  setenv("HMC_TP_GOODNET_OPTION", "hello", 1);
  setenv("HMC_TIMEOUT_MS", "1234", 1);
  load();
  ASSERT_TRUE(record("goodnet").loaded);
  std::string probe = read_file(probe_path());
  EXPECT_NE(probe.find("name=goodnet\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("option=hello\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("timeout_ms=1234\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("abi=2..2\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("hdr_size=" + std::to_string(sizeof(hmc_host_services_t)) + "\n"),
            std::string::npos)
      << probe;
  EXPECT_NE(probe.find("clock=ok\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("log_enabled_error=1\n"), std::string::npos) << probe;
  EXPECT_EQ(probe.find("finalize"), std::string::npos);
  // The plugin's log line carries its prefix.
  EXPECT_NE(log_text().find("INFO  [net/goodnet] initialised (option=hello)"), std::string::npos)
      << log_text();

  loader_->finalize_all();
  probe = read_file(probe_path());
  EXPECT_NE(probe.find("finalize\n"), std::string::npos) << probe;
  const Record& r = record("goodnet");
  EXPECT_TRUE(r.finalized);
  EXPECT_EQ(r.net, nullptr);
  EXPECT_EQ(r.net_ctx, nullptr);
  EXPECT_TRUE(loader_->loaded(Kind::Net).empty());

  // Idempotent: a second call (and the destructor) do not finalize again.
  loader_->finalize_all();
  loader_.reset();
  probe = read_file(probe_path());
  EXPECT_EQ(probe.find("finalize"), probe.rfind("finalize")) << probe;
}

TEST_F(LoaderTest, UnsetOptionReadsAsNull) {
  setenv("HMC_PLUGIN_PATH", (kMixed + "/libhmc-net-goodnet.so").c_str(), 1);
  setenv("HMC_TP_GOODNET_PROBE_FILE", probe_path().c_str(), 1);
  load();
  EXPECT_NE(read_file(probe_path()).find("option=(null)\n"), std::string::npos);
}

TEST_F(LoaderTest, FailedPostInitCheckFinalizesThePlugin) {
  setenv("HMC_PLUGIN_PATH", (kMixed + "/libhmc-net-rmanoiput.so").c_str(), 1);
  setenv("HMC_TP_RMANOIPUT_PROBE_FILE", probe_path().c_str(), 1);
  load();
  EXPECT_FALSE(record("rmanoiput").loaded);
  std::string probe = read_file(probe_path());
  EXPECT_NE(probe.find("option="), std::string::npos) << probe;
  EXPECT_NE(probe.find("finalize\n"), std::string::npos) << probe;
}

TEST_F(LoaderTest, ConfigVarsAreDeclaredWithThePluginAsOwner) {
  setenv("HMC_PLUGIN_PATH", kMixed.c_str(), 1);
  setenv("HMC_TP_GOODNET_OPTION", "x", 1);
  load();
  const ConfigVar* var = nullptr;
  for (const auto& v : cfg_.declared())
    if (v.name == "HMC_TP_GOODNET_OPTION") var = &v;
  ASSERT_NE(var, nullptr);
  EXPECT_EQ(var->owner, "goodnet");
  EXPECT_EQ(var->type, ConfigType::String);
  EXPECT_EQ(var->default_value, "dflt");
  EXPECT_EQ(var->help, "test only: an option init reads and reports");
  EXPECT_EQ(cfg_.get("HMC_TP_GOODNET_OPTION"), "x");
  // Variables of plugins that were not initialised because their table was bad are not declared.
  for (const auto& v : cfg_.declared()) EXPECT_NE(v.name, "HMC_TP_NULLACCEPT_OPTION");
  // Declared means known: no misspelling warning for it.
  cfg_.warn_unknown();
  EXPECT_EQ(log_text().find("HMC_TP_GOODNET_OPTION is not an hmc setting"), std::string::npos);
}

TEST_F(LoaderTest, ReadingAnUndeclaredVariableWarnsOnce) {
  setenv("HMC_PLUGIN_PATH", (kMixed + "/libhmc-net-goodnet.so").c_str(), 1);
  setenv("HMC_TP_GOODNET_OPTION", "read-undeclared", 1);
  load();
  std::string log = log_text();
  std::string warning = "[net/goodnet] reads HMC_TP_GOODNET_UNDECLARED, which it does not declare";
  EXPECT_NE(log.find(warning), std::string::npos) << log;
  EXPECT_EQ(log.find(warning), log.rfind(warning));
}

TEST_F(LoaderTest, ReasonCaptureDoesNotDependOnTheLogLevel) {
  // At the default level (warn) the no-device reason logged at info is still captured.
  std::string err;
  ASSERT_TRUE(log::configure(HMC_LOG_WARN, log_path_, &err));
  setenv("HMC_PLUGIN_PATH", (kMixed + "/libhmc-net-nodevice.so").c_str(), 1);
  load();
  EXPECT_EQ(record("nodevice").reason, "no device: no test NIC on this host");
  EXPECT_EQ(log_text().find("no test NIC"), std::string::npos) << "info text written at warn level";
}

// ---- selection -------------------------------------------------------------------------------

TEST_F(LoaderTest, UnsetSelectionUsesAllInSearchOrder) {
  setenv("HMC_PLUGIN_PATH", kOrder.c_str(), 1);
  load();
  EXPECT_EQ(loaded_names(Kind::Net), (std::vector<std::string>{"alpha", "beta", "gamma"}));
}

TEST_F(LoaderTest, ListedNamesAreTheOnlyOnesAndGiveTheOrder) {
  setenv("HMC_PLUGIN_PATH", kOrder.c_str(), 1);
  setenv("HMC_NET_PLUGINS", "gamma, alpha", 1);
  setenv("HMC_TP_BETA_PROBE_FILE", probe_path().c_str(), 1);
  load();
  EXPECT_EQ(loaded_names(Kind::Net), (std::vector<std::string>{"gamma", "alpha"}));
  EXPECT_EQ(record("beta").state, State::NotSelected);
  EXPECT_EQ(record("beta").reason, "not listed in HMC_NET_PLUGINS");
  EXPECT_FALSE(exists(probe_path())) << "beta was initialised";
  EXPECT_NE(log_text().find("INFO  net plugin 'beta' not used: not listed in HMC_NET_PLUGINS"),
            std::string::npos);
  EXPECT_NE(log_text().find("net: gamma, alpha"), std::string::npos);
}

TEST_F(LoaderTest, CaretExcludes) {
  load_order("^beta");
  EXPECT_EQ(loaded_names(Kind::Net), (std::vector<std::string>{"alpha", "gamma"}));
  EXPECT_EQ(record("beta").reason, "excluded by HMC_NET_PLUGINS");
}

TEST_F(LoaderTest, ExclusionWinsOverListing) {
  load_order("alpha,beta,^alpha");
  EXPECT_EQ(loaded_names(Kind::Net), (std::vector<std::string>{"beta"}));
  EXPECT_EQ(record("alpha").reason, "excluded by HMC_NET_PLUGINS");
  EXPECT_EQ(record("gamma").reason, "not listed in HMC_NET_PLUGINS");
}

TEST_F(LoaderTest, UnknownNameIsWarnedAboutWithTheNamesFound) {
  load_order("gamma,alpah");
  EXPECT_EQ(loaded_names(Kind::Net), (std::vector<std::string>{"gamma"}));
  std::string want =
      "WARN  HMC_NET_PLUGINS names 'alpah', but no net plugin of that name was found (found: "
      "alpha, "
      "beta, gamma)";
  EXPECT_NE(log_text().find(want), std::string::npos) << log_text();
}

TEST_F(LoaderTest, UnknownNameWithNothingFound) {
  setenv("HMC_PLUGIN_PATH", kOrder.c_str(), 1);
  setenv("HMC_DEVICE_PLUGINS", "cuda", 1);
  load();
  std::string want = "WARN  HMC_DEVICE_PLUGINS names 'cuda', but no device plugin was found at all";
  EXPECT_NE(log_text().find(want), std::string::npos) << log_text();
  EXPECT_EQ(loaded_names(Kind::Net).size(), 3u) << "device selection must not touch net plugins";
}

TEST_F(LoaderTest, KindsAreSelectedIndependently) {
  setenv("HMC_PLUGIN_PATH", kMixed.c_str(), 1);
  setenv("HMC_DEVICE_PLUGINS", "^gooddev,^devshort", 1);
  setenv("HMC_NET_PLUGINS", "goodnet", 1);
  load();
  EXPECT_TRUE(loaded_names(Kind::Device).empty());
  EXPECT_EQ(record("gooddev").reason, "excluded by HMC_DEVICE_PLUGINS");
  EXPECT_EQ(loaded_names(Kind::Net), (std::vector<std::string>{"goodnet"}));
  // Not listed, so never validated: a broken plugin that is not selected gives no warning.
  EXPECT_EQ(record("nullaccept").reason, "not listed in HMC_NET_PLUGINS");
  EXPECT_EQ(log_text().find("WARN "), std::string::npos) << log_text();
}

// Excluded plugins with conventional names are never mapped. Checked in a fresh process (the
// threadsafe death-test style re-executes the binary), since other tests of this process may
// have loaded the same files.
TEST_F(LoaderTest, ExcludedPluginsAreNeverOpened) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string beta = real(kOrder + "/libhmc-net-beta.so");
  EXPECT_EXIT(
      {
        setenv("HMC_PLUGIN_PATH", kOrder.c_str(), 1);
        setenv("HMC_NET_PLUGINS", "^beta", 1);
        Config cfg;
        cfg.load_from_environment();
        LoaderOptions opts;
        opts.search_default_dirs = false;
        Loader l(opts);
        l.load(cfg);
        bool alpha_open =
            dlopen(real(kOrder + "/libhmc-net-alpha.so").c_str(), RTLD_NOW | RTLD_NOLOAD);
        bool beta_open = dlopen(beta.c_str(), RTLD_NOW | RTLD_NOLOAD);
        l.finalize_all();
        _exit(alpha_open && !beta_open ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// ---- search order ----------------------------------------------------------------------------

TEST_F(LoaderTest, FirstFoundWinsAndLaterOnesAreShadowed) {
  setenv("HMC_PLUGIN_PATH", (kShadow + ":" + kMixed).c_str(), 1);
  load();
  std::vector<const Record*> goodnets;
  for (const auto& r : loader_->records())
    if (r->name == "goodnet") goodnets.push_back(r.get());
  ASSERT_EQ(goodnets.size(), 2u);
  EXPECT_TRUE(goodnets[0]->loaded);
  EXPECT_EQ(goodnets[0]->version, "shadow");
  EXPECT_EQ(goodnets[1]->state, State::Shadowed);
  EXPECT_EQ(goodnets[1]->reason, "shadowed by " + real(kShadow + "/libhmc-net-goodnet.so"));
  EXPECT_EQ(loader_->find(Kind::Net, "goodnet"), goodnets[0]);

  loader_.reset();
  setenv("HMC_PLUGIN_PATH", (kMixed + ":" + kShadow).c_str(), 1);
  load();
  EXPECT_EQ(loader_->find(Kind::Net, "goodnet")->version, "test");
}

TEST_F(LoaderTest, SameFileReachedTwiceIsListedOnce) {
  setenv("HMC_PLUGIN_PATH", (kOrder + ":" + kOrder + "/libhmc-net-beta.so:" + kOrder).c_str(), 1);
  load();
  EXPECT_EQ(loader_->records().size(), 3u);
}

TEST_F(LoaderTest, DirectoriesAreScannedInNameOrder) {
  setenv("HMC_PLUGIN_PATH", kMixed.c_str(), 1);
  load();
  std::vector<std::string> paths;
  for (const auto& r : loader_->records()) paths.push_back(r->path);
  EXPECT_TRUE(std::is_sorted(paths.begin(), paths.end()));
  // Only plugin-named files are taken: the helper library in extra/ is not.
  loader_.reset();
  setenv("HMC_PLUGIN_PATH", kExtra.c_str(), 1);
  load();
  EXPECT_TRUE(loader_->records().empty());
}

TEST_F(LoaderTest, MissingPathEntryIsWarnedAbout) {
  setenv("HMC_PLUGIN_PATH", "/nonexistent/hmc-plugins", 1);
  load();
  EXPECT_TRUE(loader_->records().empty());
  std::string log = log_text();
  EXPECT_NE(log.find("WARN  HMC_PLUGIN_PATH entry '/nonexistent/hmc-plugins' does not exist"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("plugins: none found"), std::string::npos) << log;
}

TEST_F(LoaderTest, DefaultDirectoryIsBesideTheCore) {
  // This executable links the core statically and lives in build/tests: the default directory is
  // build/tests/../lib/hmc, where in-tree plugins are built, when it exists.
  EXPECT_EQ(core_object_path(), real("/proc/self/exe"));
  std::vector<std::string> dirs = default_plugin_dirs();
  std::string intree = real(HMC_TEST_PLUGIN_DIR);
  if (intree.empty()) {
    EXPECT_TRUE(dirs.empty());
  } else {
    ASSERT_EQ(dirs.size(), 1u);
    EXPECT_EQ(dirs[0], intree);
  }
  Loader& l = load(/*default_dirs=*/true);
  for (const auto& r : l.records()) {
    EXPECT_EQ(r->path.rfind(intree + "/", 0), 0u) << r->path;
    EXPECT_EQ(r->origin, "default directory");
  }
  EXPECT_EQ(l.searched(), dirs);
}

TEST_F(LoaderTest, LoadTwiceFails) {
  setenv("HMC_PLUGIN_PATH", kOrder.c_str(), 1);
  load();
  EXPECT_EQ(loader_->load(cfg_), HMC_ERR_INTERNAL);
  EXPECT_EQ(loaded_names(Kind::Net).size(), 3u);
}

// ---- pieces ----------------------------------------------------------------------------------

TEST(PluginFileName, Convention) {
  Kind kind;
  std::string name;
  ASSERT_TRUE(parse_plugin_file_name("libhmc-net-hoststage.so", &kind, &name));
  EXPECT_EQ(kind, Kind::Net);
  EXPECT_EQ(name, "hoststage");
  ASSERT_TRUE(parse_plugin_file_name("libhmc-device-cuda.so", &kind, &name));
  EXPECT_EQ(kind, Kind::Device);
  EXPECT_EQ(name, "cuda");
  EXPECT_FALSE(parse_plugin_file_name("libhmc-net-.so", &kind, &name));
  EXPECT_FALSE(parse_plugin_file_name("libhmc-net-ucx.so.1", &kind, &name));
  EXPECT_FALSE(parse_plugin_file_name("libhmc.so", &kind, &name));
  EXPECT_FALSE(parse_plugin_file_name("libhmc-gpu-cuda.so", &kind, &name));
}

TEST(Selection, Semantics) {
  Selection all("HMC_NET_PLUGINS", {});
  EXPECT_FALSE(all.restrictive());
  EXPECT_EQ(all.judge("x"), Selection::Verdict::Use);
  EXPECT_EQ(all.rank("x"), -1);

  Selection s("HMC_NET_PLUGINS", {"ucx", "^ofi", "hoststage", "ucx", "", "^"});
  EXPECT_TRUE(s.restrictive());
  EXPECT_EQ(s.order(), (std::vector<std::string>{"ucx", "hoststage"}));
  EXPECT_EQ(s.excluded(), (std::vector<std::string>{"ofi"}));
  EXPECT_EQ(s.judge("ucx"), Selection::Verdict::Use);
  EXPECT_EQ(s.judge("ofi"), Selection::Verdict::Excluded);
  EXPECT_EQ(s.judge("ibverbs"), Selection::Verdict::NotListed);
  EXPECT_EQ(s.rank("hoststage"), 1);
  EXPECT_EQ(s.unknown_names({"ucx", "ibverbs"}), (std::vector<std::string>{"hoststage", "ofi"}));

  Selection only_excl("HMC_DEVICE_PLUGINS", {"^cuda"});
  EXPECT_FALSE(only_excl.restrictive());
  EXPECT_EQ(only_excl.judge("hip"), Selection::Verdict::Use);
  EXPECT_EQ(only_excl.judge("cuda"), Selection::Verdict::Excluded);
}

}  // namespace
// ---- ccl plugins: the third kind, its checks and its selection ------------------------------

TEST_F(LoaderTest, CclPluginsAreCheckedAndLoaded) {
  setenv("HMC_PLUGIN_PATH", kCcl.c_str(), 1);
  load();
  const Record& good = record("goodccl");
  EXPECT_EQ(good.kind, Kind::Ccl);
  EXPECT_EQ(good.state, State::Loaded) << good.reason;
  EXPECT_EQ(good.device_count, 2);
  EXPECT_EQ(good.library, "libtestccl.so.1, TestCCL 1.2.3");
  EXPECT_EQ(good.reason, "libtestccl.so.1, TestCCL 1.2.3, 2 devices served");
  ASSERT_NE(good.ccl, nullptr);
  EXPECT_EQ(good.ccl->mem_iface, uint32_t(HMC_MEM_IFACE_CUDA));
  // Valid without its library: loaded, serving nothing, saying why.
  const Record& nolib = record("cclnolib");
  EXPECT_EQ(nolib.state, State::Loaded);
  EXPECT_EQ(nolib.device_count, 0);
  EXPECT_EQ(nolib.reason, "0 devices: libtestccl.so.1 not found");
  const size_t need = offsetof(hmc_ccl_plugin_v1_t, test) + sizeof(void*);
  struct {
    const char* name;
    std::string reason;
  } broken[] = {
      {"cclshort", too_small(offsetof(hmc_ccl_plugin_v1_t, all_reduce), need)},
      {"cclnulltest", "required slot 'test' is NULL"},
      {"cclhost", "mem_iface 0 is not a device memory interface (1..63)"},
      {"ccldtypes", "dtypes 0x100 is empty or names unknown dtypes (known: 0xff)"},
      {"cclabi2", "incompatible ABI version 2 (core accepts 1..1)"},
      {"cclwrong",
       "missing entry symbol hmc_ccl_plugin_v1 (it exports hmc_net_plugin_v2: name the file "
       "libhmc-net-cclwrong.so)"},
  };
  for (const auto& b : broken) {
    const Record& r = record(b.name);
    EXPECT_EQ(r.kind, Kind::Ccl) << b.name;
    EXPECT_EQ(r.state, State::Broken) << b.name;
    EXPECT_EQ(r.reason, b.reason) << b.name;
  }
  EXPECT_EQ(loaded_names(Kind::Ccl), (std::vector<std::string>{"cclnolib", "goodccl"}));
  EXPECT_NE(log_text().find("ccl: cclnolib, goodccl"), std::string::npos) << log_text();
}

TEST_F(LoaderTest, CclSelectionHasTheSameGrammar) {
  setenv("HMC_PLUGIN_PATH", kCcl.c_str(), 1);
  setenv("HMC_CCL_PLUGINS", "goodccl,^cclnolib", 1);
  setenv("HMC_TP_CCLNOLIB_PROBE_FILE", probe_path().c_str(), 1);
  load();
  EXPECT_EQ(loaded_names(Kind::Ccl), (std::vector<std::string>{"goodccl"}));
  EXPECT_EQ(record("cclnolib").reason, "excluded by HMC_CCL_PLUGINS");
  EXPECT_EQ(record("cclshort").reason, "not listed in HMC_CCL_PLUGINS");
  EXPECT_FALSE(exists(probe_path())) << "an excluded plugin was initialised";
}

}  // namespace hmc::plugin
