// The device plugins as an application gets them: found in lib/hmc by the core's loader
// (HMC_PLUGIN_PATH), configured through HMC_<VENDOR>_LIBRARY pointing at the emulated runtimes,
// and their devices added to the core's device registry.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "../plugin/load_plugins.h"
#include "device/registry.h"
#include "fake_runtimes.h"
#include "plugin/loader.h"
#include "util/config.h"

namespace {

using hmc::plugin::Kind;
using hmc::plugin::Loader;
using hmc::plugin::State;

using hmc::fakes::kRuntimes;
using hmc::fakes::Runtime;

bool built(const char* name) {
  std::string p = std::string(HMC_TEST_PLUGIN_DIR "/libhmc-device-") + name + ".so";
  return access(p.c_str(), R_OK) == 0;
}

class DeviceLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("HMC_PLUGIN_PATH", HMC_TEST_PLUGIN_DIR, 1);
    unsetenv("HMC_DEVICE_PLUGINS");
    unsetenv("FAKEGPU_DEVICES");
    hmc::fakes::use_fake_runtimes();
  }
  void TearDown() override {
    hmc::fakes::unset_fake_runtimes();
    unsetenv("HMC_PLUGIN_PATH");
  }

  Loader& load() { return hmc::test::load_plugins(cfg_, loader_); }

  hmc::Config cfg_;
  std::unique_ptr<Loader> loader_;
};

TEST_F(DeviceLoaderTest, EveryDevicePluginLoadsOverItsEmulatedRuntime) {
  Loader& loader = load();
  int checked = 0;
  hmc::DeviceRegistry registry;
  for (const Runtime& c : kRuntimes) {
    if (!built(c.name)) continue;
    SCOPED_TRACE(c.name);
    const hmc::plugin::Record* r = loader.find(Kind::Device, c.name);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->state, State::Loaded) << r->reason;
    EXPECT_TRUE(r->loaded);
    EXPECT_EQ(r->device_count, 2) << r->reason;
    EXPECT_EQ(r->reason, "");
    EXPECT_EQ(r->version, "0.1.0");
    ASSERT_NE(r->device, nullptr);
    // Its declared variable is known to the configuration (no "unknown variable" warning).
    bool declared = false;
    for (const auto& var : cfg_.declared()) declared |= var.name == c.var;
    EXPECT_TRUE(declared) << c.var;

    registry.add_plugin(r->device, r->device_ctx);
    std::string dev1 = std::string(c.name) + ":1";
    ASSERT_NE(registry.find(dev1), nullptr);
    void* p = nullptr;
    ASSERT_EQ(registry.alloc(dev1, 1 << 16, &p), HMC_SUCCESS);
    EXPECT_EQ(registry.locate(p).device, registry.find(dev1));
    EXPECT_EQ(registry.free(p), HMC_SUCCESS);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no device plugin was built";
}

TEST_F(DeviceLoaderTest, MissingRuntimeLoadsWithNoDevicesAndSaysWhy) {
  if (!built("cuda")) GTEST_SKIP() << "the cuda plugin was not built";
  setenv("HMC_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  Loader& loader = load();
  const hmc::plugin::Record* r = loader.find(Kind::Device, "cuda");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->state, State::Loaded);
  EXPECT_EQ(r->device_count, 0);
  EXPECT_EQ(r->reason,
            "0 devices: /nonexistent/libcuda.so.1: cannot open shared object file: No such file or "
            "directory");
}

}  // namespace
