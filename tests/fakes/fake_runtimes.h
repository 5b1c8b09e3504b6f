// The runtimes the fakes of tests/fakes stand in for, as the device-plugin tests point the
// plugins at them: the plugin's name, the variable naming the runtime library it opens, and
// the fake's library below FAKEGPU_DIR.
#pragma once

#include <cstdlib>
#include <string>

#include "device/registry.h"

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

}  // namespace hmc::fakes
