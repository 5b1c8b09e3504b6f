// The runtimes the fakes of tests/fakes stand in for, as the device-plugin tests point the
// plugins at them: the plugin's name, the variable naming the runtime library it opens, and
// the fake's library below FAKEGPU_DIR.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "../plugin/load_plugins.h"
#include "device/registry.h"
#include "plugin/loader.h"
#include "util/config.h"

namespace hmc::fakes {

struct Runtime {
  const char* name;
  const char* var;
  const char* fake;
};
inline constexpr Runtime kRuntimes[] = {{"cuda", "HMC_CUDA_LIBRARY", "cuda/libcuda.so.1"},
                                        {"hip", "HMC_HIP_LIBRARY", "hip7/libamdhip64.so.7"},
                                        {"mlu", "HMC_MLU_LIBRARY", "mlu/libcnrt.so"},
                                        {"musa", "HMC_MUSA_LIBRARY", "musa/libmusart.so"}};

// Points every runtime's variable at its fake (unset them with unset_fake_runtimes).
inline void use_fake_runtimes() {
  for (const Runtime& r : kRuntimes)
    setenv(r.var, (std::string(FAKEGPU_DIR "/") + r.fake).c_str(), 1);
}
inline void unset_fake_runtimes() {
  for (const Runtime& r : kRuntimes) unsetenv(r.var);
}

// Staging settings for the staged-copy tests: chunks of `chunk`, `depth` in flight, a pool of
// 16 chunks, a 20 s bound.
inline CopySettings staged_copy_settings(size_t chunk, int depth) {
  CopySettings s;
  s.stage_chunk = chunk;
  s.stage_depth = depth;
  s.stage_pool_bytes = 16 * chunk;
  s.timeout_ms = 20000;
  return s;
}

// The device plugins the environment names, loaded into *loader (not from the default
// directories), and a fresh *registry over their devices with staging `settings`: what the
// staged-copy tests run on. Fatal to the test when loading fails.
inline void load_device_registry(Config& cfg, std::unique_ptr<plugin::Loader>& loader,
                                 std::unique_ptr<DeviceRegistry>& registry,
                                 const CopySettings& settings) {
  test::load_plugins(cfg, loader);
  ASSERT_FALSE(testing::Test::HasFailure()) << "loading the device plugins";
  registry = std::make_unique<DeviceRegistry>();
  for (plugin::Record* r : loader->loaded(plugin::Kind::Device))
    registry->add_plugin(r->device, r->device_ctx);
  registry->set_copy_settings(settings);
}

// Undoes load_device_registry, use_fake_runtimes and HMC_PLUGIN_PATH.
inline void release_device_registry(std::unique_ptr<plugin::Loader>& loader,
                                    std::unique_ptr<DeviceRegistry>& registry) {
  if (registry) registry->release_all();
  registry.reset();
  loader.reset();
  unset_fake_runtimes();
  unsetenv("HMC_PLUGIN_PATH");
}

}  // namespace hmc::fakes
