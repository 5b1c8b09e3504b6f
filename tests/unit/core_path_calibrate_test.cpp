// Calibration of net devices that declare no figures: the settings, the on-disk cache and its
// invalidation, the measurement itself (net-hoststage over loopback), how results reach the
// capability record, and the record's wire format with and without the measured section.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "context/context.h"
#include "control/wire.h"
#include "hmc/plugin/net.h"
#include "net_record.h"
#include "path/calibrate.h"
#include "peer/messages.h"
#include "util/config.h"
#include "util/status.h"

using namespace hmc;

namespace {

// Sets environment variables for the scope of a test.
class Env {
 public:
  void set(const std::string& name, const std::string& value) {
    if (!saved_.count(name)) {
      const char* old = getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) {
    if (!saved_.count(name)) {
      const char* old = getenv(name.c_str());
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    unsetenv(name.c_str());
  }
  ~Env() {
    for (auto& [n, v] : saved_) {
      if (v)
        setenv(n.c_str(), v->c_str(), 1);
      else
        unsetenv(n.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// A fresh directory, removed with its files at the end.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/hmc-calib-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

Config loaded_config() {
  Config c;
  EXPECT_EQ(c.load_from_environment(), HMC_SUCCESS);
  return c;
}

const std::string kHoststage = std::string(HMC_TEST_PLUGIN_DIR) + "/libhmc-net-hoststage.so";

// A context with only net-hoststage (tcp and shm), no progress thread.
std::unique_ptr<Context> hoststage_context(Env& env) {
  env.set("HMC_PLUGIN_PATH", kHoststage);
  env.set("HMC_NET_PLUGINS", "hoststage");
  env.set("HMC_PROGRESS_THREAD", "0");
  std::unique_ptr<Context> ctx;
  EXPECT_EQ(Context::create(nullptr, &ctx), HMC_SUCCESS) << last_error();
  return ctx;
}

// Milliseconds from t0 to now.
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST(Calibration, SettingsFromTheEnvironment) {
  Env env;
  env.unset("HMC_NET_CALIBRATE");
  env.unset("HMC_NET_CALIBRATION_CACHE");
  env.set("XDG_CACHE_HOME", "/somewhere/cache");
  path::CalibrationSettings s = path::calibration_settings(loaded_config());
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.cache_path, "/somewhere/cache/hmc/net-calibration");
  env.unset("XDG_CACHE_HOME");
  env.set("HOME", "/home/someone");
  EXPECT_EQ(path::calibration_settings(loaded_config()).cache_path,
            "/home/someone/.cache/hmc/net-calibration");
  env.set("HMC_NET_CALIBRATION_CACHE", "/tmp/x/calib");
  EXPECT_EQ(path::calibration_settings(loaded_config()).cache_path, "/tmp/x/calib");
  env.set("HMC_NET_CALIBRATION_CACHE", "off");
  EXPECT_EQ(path::calibration_settings(loaded_config()).cache_path, "");
  env.set("HMC_NET_CALIBRATE", "0");
  EXPECT_FALSE(path::calibration_settings(loaded_config()).enabled);
  env.set("HMC_NET_CALIBRATE", "sometimes");  // invalid: context creation fails naming it
  Config bad;
  EXPECT_EQ(bad.load_from_environment(), HMC_ERR_CONFIG);
  EXPECT_NE(last_error().find("HMC_NET_CALIBRATE"), std::string::npos) << last_error();
}

TEST(Calibration, CacheStoresLooksUpAndAges) {
  TempDir dir;
  std::string file = dir.path() + "/sub/dir/calib";  // directories are created
  path::CalibrationCache cache(file);
  std::string k1(64, 'a'), k2(64, 'b');
  path::Measurement m{12345, 678}, got;
  EXPECT_FALSE(cache.lookup(k1, 1000, 100, &got));
  ASSERT_TRUE(cache.store(k1, "p/d1", m, 1000));
  ASSERT_TRUE(cache.store(k2, "p/d2", {1, 2}, 1001));
  ASSERT_TRUE(cache.lookup(k1, 1050, 100, &got));
  EXPECT_EQ(got.bandwidth_MBps, 12345u);
  EXPECT_EQ(got.latency_ns, 678u);
  EXPECT_FALSE(cache.lookup(k1, 1101, 100, &got));  // older than the maximum age
  EXPECT_FALSE(cache.lookup(k1, 800, 100, &got));   // from the future: the clock moved
  // Replacing keeps one line per key; the file is readable text with a header.
  ASSERT_TRUE(cache.store(k1, "p/d1", {999, 9}, 1100));
  ASSERT_TRUE(cache.lookup(k1, 1100, 100, &got));
  EXPECT_EQ(got.bandwidth_MBps, 999u);
  std::string text = read_all(file);
  EXPECT_EQ(text.rfind("# hmc net calibration cache", 0), 0u) << text;
  EXPECT_EQ(text.find(k1), text.rfind(k1)) << text;
  // Garbage lines are skipped, good ones still found.
  write_file(file, text + "garbage\n" + std::string(64, 'c') + " x y z\n" + std::string(64, 'd') +
                       " 0 5 1100 zero-bandwidth\n");
  EXPECT_TRUE(cache.lookup(k2, 1100, 1000, &got));
  EXPECT_FALSE(cache.lookup(std::string(64, 'd'), 1100, 1000, &got));
  // No path: nothing is read or written.
  path::CalibrationCache none("");
  EXPECT_FALSE(none.store(k1, "p/d1", m, 1000));
  EXPECT_FALSE(none.lookup(k1, 1000, 100, &got));
}

TEST(Calibration, CacheIsBoundedToTheNewestEntries) {
  TempDir dir;
  path::CalibrationCache cache(dir.path() + "/calib");
  for (size_t i = 0; i < path::kCacheMaxEntries + 10; ++i) {
    char key[65];
    std::snprintf(key, sizeof key, "%064zx", i);
    ASSERT_TRUE(cache.store(key, "p/d", {100 + i, 10}, 1000 + static_cast<int64_t>(i)));
  }
  path::Measurement got;
  char first[65], last[65];
  std::snprintf(first, sizeof first, "%064zx", size_t{0});
  std::snprintf(last, sizeof last, "%064zx", path::kCacheMaxEntries + 9);
  EXPECT_FALSE(cache.lookup(first, 2000, 10000, &got));
  ASSERT_TRUE(cache.lookup(last, 2000, 10000, &got));
  EXPECT_EQ(got.bandwidth_MBps, 100 + path::kCacheMaxEntries + 9);
}

TEST(Calibration, KeyChangesWithThePluginFileAndSettings) {
  TempDir dir;
  std::string so = dir.path() + "/libhmc-net-x.so";
  write_file(so, "version 1");
  std::string k = path::calibration_key("host", so, "x", "d", "A=1\n");
  ASSERT_EQ(k.size(), 64u);
  EXPECT_EQ(k, path::calibration_key("host", so, "x", "d", "A=1\n"));
  EXPECT_NE(k, path::calibration_key("other-host", so, "x", "d", "A=1\n"));
  EXPECT_NE(k, path::calibration_key("host", so, "x", "d2", "A=1\n"));
  EXPECT_NE(k, path::calibration_key("host", so, "x", "d", "A=2\n"));
  // A rebuilt plugin (new contents, size and time) is a new key.
  write_file(so, "version 2, longer");
  EXPECT_NE(k, path::calibration_key("host", so, "x", "d", "A=1\n"));
  // A plugin file that cannot be identified gives no key (never cached).
  EXPECT_EQ(path::calibration_key("host", dir.path() + "/missing.so", "x", "d", ""), "");
}

TEST(Calibration, ConfigTextHasThePluginsVariablesAndTransportLibraries) {
  Env env;
  env.set("UCX_TLS", "tcp");
  env.set("FI_PROVIDER", "tcp");
  Config c = loaded_config();
  ASSERT_EQ(c.declare({"HMC_X_MODE", ConfigType::String, "fast", "mode", "x"}), HMC_SUCCESS);
  std::string t = path::device_config_text(c, "x");
  EXPECT_NE(t.find("HMC_X_MODE=fast\n"), std::string::npos) << t;
  EXPECT_NE(t.find("UCX_TLS=tcp\n"), std::string::npos) << t;
  EXPECT_NE(t.find("FI_PROVIDER=tcp\n"), std::string::npos) << t;
  EXPECT_NE(t.find("HMC_LISTEN_HOST="), std::string::npos) << t;
  env.set("UCX_TLS", "posix");
  EXPECT_NE(path::device_config_text(c, "x"), t);
}

TEST(Calibration, UsefulOnlyWithSomethingToRank) {
  const uint32_t tagged = HMC_NET_FLAG_TAGGED;
  path::Capabilities caps;
  caps.net = {test::host_record("p", "a", tagged)};
  EXPECT_FALSE(path::calibration_useful(caps));  // one device: nothing to rank
  caps.net.push_back(test::host_record("p", "b", HMC_NET_FLAG_RMA));
  EXPECT_FALSE(path::calibration_useful(caps));  // the other cannot carry send/recv
  caps.net.push_back(test::host_record("p", "c", tagged));
  EXPECT_TRUE(path::calibration_useful(caps));
  for (auto& r : caps.net) {
    r.bandwidth_MBps = 100;
    r.latency_ns = 1000;
  }
  EXPECT_FALSE(path::calibration_useful(caps));  // everything declared
}

TEST(Calibration, MeasuresHoststageDevicesOverLoopbackWithinBudget) {
  Env env;
  auto ctx = hoststage_context(env);
  ASSERT_TRUE(ctx);
  auto devs = ctx->net_devices();
  ASSERT_EQ(devs.size(), 2u);  // tcp and shm
  for (NetDevice* d : devs) {
    path::Measurement m;
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(path::measure_device(*d, path::kDeviceBudgetMs, &m), HMC_SUCCESS)
        << d->key() << ": " << last_error();
    double ms = ms_since(t0);
    // The budget bounds every wait; one slow plugin call may overrun it a little on a busy host.
    EXPECT_LT(ms, 3.0 * path::kDeviceBudgetMs) << d->key();
    // Loopback on any machine that runs this: more than 10 MB/s, less than 10 ms one way.
    EXPECT_GT(m.bandwidth_MBps, 10u) << d->key();
    EXPECT_GT(m.latency_ns, 0u) << d->key();
    EXPECT_LT(m.latency_ns, 10000000u) << d->key();
  }
}

// The far end of a measurement lives in a second context of the plugin, made once per plugin
// (every device of the plugin shares it), as a peer process has a context of its own.
TEST(Calibration, FarEndIsASecondContextOfThePlugin) {
  Env env;
  auto ctx = hoststage_context(env);
  ASSERT_TRUE(ctx);
  auto devs = ctx->net_devices();
  ASSERT_EQ(devs.size(), 2u);
  path::FarContexts far;
  hmc_net_ctx_t* first = far.get(*devs[0]);
  ASSERT_NE(first, nullptr);
  EXPECT_NE(first, devs[0]->plugin->ctx());
  EXPECT_EQ(far.get(*devs[1]), first) << "one second context per plugin";
  for (NetDevice* d : devs) {
    path::Measurement m;
    ASSERT_EQ(path::measure_device(*d, path::kDeviceBudgetMs, &m, &far), HMC_SUCCESS)
        << d->key() << ": " << last_error();
    EXPECT_GT(m.bandwidth_MBps, 10u) << d->key();
  }
  // A plugin the core cannot make another context of (its host services unknown): none, and
  // the measurement runs within the device's own context.
  NetPlugin bare(devs[0]->plugin->table(), devs[0]->plugin->ctx(), "hoststage");
  NetDevice d = *devs[0];
  d.plugin = &bare;
  path::FarContexts none;
  EXPECT_EQ(none.get(d), nullptr);
  path::Measurement m;
  EXPECT_EQ(path::measure_device(d, path::kDeviceBudgetMs, &m, &none), HMC_SUCCESS) << last_error();
}

TEST(Calibration, TooSmallABudgetFailsNamingTheDevice) {
  Env env;
  auto ctx = hoststage_context(env);
  ASSERT_TRUE(ctx);
  NetDevice* tcp = nullptr;
  for (NetDevice* d : ctx->net_devices())
    if (d->name == "tcp") tcp = d;
  ASSERT_NE(tcp, nullptr);
  path::Measurement m{77, 77};
  hmc_status_t st = path::measure_device(*tcp, 0, &m);
  // A zero budget ends at the first deadline check (setup or transfers), never hangs.
  ASSERT_EQ(st, HMC_ERR_TIMEOUT) << last_error();
  EXPECT_NE(last_error().find("calibration of hoststage/tcp"), std::string::npos) << last_error();
  EXPECT_EQ(m.bandwidth_MBps, 77u);  // untouched on failure
}

namespace {
// Runs calibrate_capabilities on the context's record for hoststage, with a cache file.
path::Capabilities calibrate_hoststage(Context& ctx, const std::string& cache_file, bool enabled,
                                       const std::string& plugin_file = kHoststage) {
  path::Capabilities caps;
  caps.host_id = "this-host";
  std::vector<path::CalibrationTarget> targets;
  for (NetDevice* d : ctx.net_devices()) {
    caps.net.push_back(test::host_record("hoststage", d->name, d->props.flags));
    targets.push_back({d, plugin_file, "settings\n"});
  }
  path::CalibrationSettings s;
  s.enabled = enabled;
  s.cache_path = cache_file;
  path::calibrate_capabilities(s, targets, &caps);
  return caps;
}

// Figures no measurement gives (tcp 4242 MB/s, shm 5252 MB/s), stored for the plugin file so.
void store_sentinels(const std::string& cache_file, const std::string& so) {
  path::CalibrationCache cache(cache_file);
  int64_t now = time(nullptr);
  ASSERT_TRUE(cache.store(path::calibration_key("this-host", so, "hoststage", "tcp", "settings\n"),
                          "hoststage/tcp", {4242, 4343}, now));
  ASSERT_TRUE(cache.store(path::calibration_key("this-host", so, "hoststage", "shm", "settings\n"),
                          "hoststage/shm", {5252, 5353}, now));
}

// A copy of the hoststage plugin file in dir, standing for "the plugin" in cache keys so that a
// test can change it; empty when the copy failed.
std::string plugin_copy(const TempDir& dir) {
  std::string so = dir.path() + "/libhmc-net-hoststage.so";
  return std::system(("cp '" + kHoststage + "' '" + so + "'").c_str()) == 0 ? so : std::string();
}

// Takes the calibration lock of cache_file through a file description of its own, standing for
// another process (flock locks conflict between descriptions, even within one process).
int hold_cache_lock(const std::string& cache_file) {
  int fd = open((cache_file + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A hoststage context, and an empty directory for its calibration cache file.
struct CalibrationBench {
  Env env;
  std::unique_ptr<Context> ctx = hoststage_context(env);
  TempDir dir;
  std::string cache_file = dir.path() + "/calib";
};
}  // namespace

TEST(Calibration, OffLeavesTheRecordAlone) {
  CalibrationBench b;
  ASSERT_TRUE(b.ctx);
  path::reset_calibration_memory();
  path::Capabilities caps = calibrate_hoststage(*b.ctx, b.cache_file, false);
  ASSERT_EQ(caps.net.size(), 2u);
  for (const auto& r : caps.net) {
    EXPECT_EQ(r.measured_bandwidth_MBps, 0u);
    EXPECT_EQ(r.measured_latency_ns, 0u);
  }
  EXPECT_EQ(access(b.cache_file.c_str(), F_OK), -1);  // nothing written
}

TEST(Calibration, MeasuresOnceThenUsesMemoryAndCacheUntilThePluginChanges) {
  CalibrationBench b;
  ASSERT_TRUE(b.ctx);
  std::string so = plugin_copy(b.dir);
  ASSERT_FALSE(so.empty());

  path::reset_calibration_memory();
  path::Capabilities first = calibrate_hoststage(*b.ctx, b.cache_file, true, so);
  ASSERT_EQ(first.net.size(), 2u);
  for (const auto& r : first.net) {
    EXPECT_GT(r.measured_bandwidth_MBps, 0u) << r.key();
    EXPECT_GT(r.measured_latency_ns, 0u) << r.key();
  }
  // Cached: overwrite the cached figures with sentinels; a fresh process (memory reset) reads
  // them back instead of measuring.
  std::string key_tcp = path::calibration_key("this-host", so, "hoststage", "tcp", "settings\n");
  path::CalibrationCache cache(b.cache_file);
  path::Measurement got;
  ASSERT_TRUE(cache.lookup(key_tcp, time(nullptr), path::kCacheMaxAgeS, &got));
  store_sentinels(b.cache_file, so);
  // In the same process the first results are remembered: the cache is not even read.
  path::Capabilities again = calibrate_hoststage(*b.ctx, b.cache_file, true, so);
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(again.net[i].measured_bandwidth_MBps, first.net[i].measured_bandwidth_MBps);
  path::reset_calibration_memory();
  path::Capabilities cached = calibrate_hoststage(*b.ctx, b.cache_file, true, so);
  for (const auto& r : cached.net) {
    if (r.device == "tcp") {
      EXPECT_EQ(r.measured_bandwidth_MBps, 4242u);
    } else {
      EXPECT_EQ(r.measured_latency_ns, 5353u);
    }
  }
  // The plugin file changes (rebuilt): its entries no longer match; measured anew.
  {
    std::ofstream out(so, std::ios::app | std::ios::binary);
    out << "rebuilt";
  }
  path::reset_calibration_memory();
  path::Capabilities fresh = calibrate_hoststage(*b.ctx, b.cache_file, true, so);
  for (const auto& r : fresh.net) {
    EXPECT_GT(r.measured_bandwidth_MBps, 0u);
    EXPECT_NE(r.measured_bandwidth_MBps, r.device == "tcp" ? 4242u : 5252u) << r.key();
  }
  path::reset_calibration_memory();
}

// Another process measuring (it holds <cache>.lock) makes this one wait, then read what that
// one stored instead of measuring at the same time on the same cores.
TEST(Calibration, WaitsForAnotherProcessesCalibrationAndReadsItsFigures) {
  CalibrationBench b;
  ASSERT_TRUE(b.ctx);
  std::string so = plugin_copy(b.dir);
  ASSERT_FALSE(so.empty());
  int fd = hold_cache_lock(b.cache_file);
  ASSERT_GE(fd, 0);
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    store_sentinels(b.cache_file, so);
    flock(fd, LOCK_UN);
  });
  path::reset_calibration_memory();
  auto t0 = std::chrono::steady_clock::now();
  path::Capabilities caps = calibrate_hoststage(*b.ctx, b.cache_file, true, so);
  double ms = ms_since(t0);
  other.join();
  close(fd);
  EXPECT_GE(ms, 250.0) << "it did not wait for the lock";
  ASSERT_EQ(caps.net.size(), 2u);
  for (const auto& r : caps.net)
    EXPECT_EQ(r.measured_bandwidth_MBps, r.device == "tcp" ? 4242u : 5252u) << r.key();
  path::reset_calibration_memory();
}

// A lock never released (a process stuck mid-calibration) delays measuring by a bounded time
// only.
TEST(Calibration, AStuckLockHolderDelaysMeasuringBoundedly) {
  CalibrationBench b;
  ASSERT_TRUE(b.ctx);
  int fd = hold_cache_lock(b.cache_file);
  ASSERT_GE(fd, 0);
  path::reset_calibration_memory();
  auto t0 = std::chrono::steady_clock::now();
  path::Capabilities caps = calibrate_hoststage(*b.ctx, b.cache_file, true);
  double ms = ms_since(t0);
  close(fd);
  EXPECT_LT(ms, 10000.0);
  for (const auto& r : caps.net) EXPECT_GT(r.measured_bandwidth_MBps, 0u) << r.key();
  path::reset_calibration_memory();
}

// The measured figures travel in the capability record (peer_messages_test checks the rest).
TEST(Calibration, CapsCarryMeasuredFigures) {
  path::Capabilities caps;
  caps.host_id = "h";
  caps.hostname = "host";
  caps.pid = 7;
  caps.context_id = 9;
  caps.net.push_back(test::host_record("hoststage", "tcp", HMC_NET_FLAG_TAGGED));
  caps.net.push_back(test::host_record("hoststage", "shm", HMC_NET_FLAG_TAGGED));
  caps.net[0].measured_bandwidth_MBps = 1234;
  caps.net[0].measured_latency_ns = 5678;
  caps.net[1].mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST) | HMC_MEM_IFACE_BIT(40);
  caps.net[1].nic_guid = 0xfeedf00dull;
  caps.net[1].nic_port = 2;
  caps.stage_chunk = 1 << 20;
  caps.device_count = 2;
  caps.ipc_plugins = {"cuda", "hip"};
  caps.stage_first = 4097;
  caps.features = path::kFeatureSharedBounces;
  caps.copy = {{"cuda", 12000, 11000, 90000}, {"hip", 0, 0, 0}};
  control::Writer full;
  msg::encode_caps(caps, &full);
  path::Capabilities back;
  ASSERT_TRUE(msg::decode_caps(full.data().data(), full.size(), &back));
  ASSERT_EQ(back.copy.size(), 2u);
  EXPECT_EQ(back.copy[0].plugin, "cuda");
  EXPECT_EQ(back.copy[0].d2h_MBps, 12000u);
  EXPECT_EQ(back.copy[0].h2d_MBps, 11000u);
  EXPECT_EQ(back.copy[0].d2d_MBps, 90000u);
  EXPECT_EQ(back.copy[1].plugin, "hip");
  // Every interface (the first 32 ride in the record, the rest in the appended section) and
  // the NIC identity come back.
  EXPECT_EQ(back.net[1].mem_ifaces, caps.net[1].mem_ifaces);
  EXPECT_EQ(back.net[1].nic_guid, 0xfeedf00dull);
  EXPECT_EQ(back.net[1].nic_port, 2u);
  EXPECT_EQ(back.net[0].measured_bandwidth_MBps, 1234u);
  EXPECT_EQ(back.net[0].measured_latency_ns, 5678u);
  EXPECT_EQ(back.net[1].measured_bandwidth_MBps, 0u);  // not measured
}

TEST(Calibration, ConnectedPeersChooseFromMeasuredFigures) {
  Env env;
  TempDir dir;
  env.set("HMC_NET_CALIBRATION_CACHE", dir.path() + "/calib");
  env.unset("HMC_NET_CALIBRATE");
  env.unset("HMC_PATH");
  path::reset_calibration_memory();
  auto a = hoststage_context(env);
  auto b = hoststage_context(env);
  ASSERT_TRUE(a && b);
  auto addr = a->address();
  Address parsed;
  ASSERT_EQ(decode_address(addr.data(), addr.size(), &parsed), HMC_SUCCESS);
  std::shared_ptr<Peer> pa, pb;
  hmc_status_t sa = HMC_ERR_INTERNAL;
  std::string accept_error;
  std::thread t([&] {
    sa = a->accept(10000, &pa);
    if (sa != HMC_SUCCESS) accept_error = last_error();
  });
  hmc_status_t sb = b->connect(parsed, 10000, &pb);
  std::string connect_error = sb == HMC_SUCCESS ? "" : last_error();
  t.join();
  ASSERT_EQ(sa, HMC_SUCCESS) << accept_error;
  ASSERT_EQ(sb, HMC_SUCCESS) << connect_error;
  // Both sides agree, on figures measured on this host (shm's single copy beats loopback tcp).
  EXPECT_EQ(pa->choice.key(), pb->choice.key());
  EXPECT_EQ(pa->choice.key(), "hoststage/shm");
  EXPECT_EQ(pa->choice.basis, "measured") << pa->choice.reason;
  EXPECT_EQ(pb->choice.basis, "measured") << pb->choice.reason;
  EXPECT_DOUBLE_EQ(pa->choice.bandwidth_MBps, pb->choice.bandwidth_MBps);
  for (const auto& r : pa->remote.net) EXPECT_GT(r.measured_bandwidth_MBps, 0u) << r.key();
  // Both measured devices went to the cache.
  std::string text = read_all(dir.path() + "/calib");
  EXPECT_NE(text.find("hoststage/tcp"), std::string::npos) << text;
  EXPECT_NE(text.find("hoststage/shm"), std::string::npos) << text;
  path::reset_calibration_memory();
}
