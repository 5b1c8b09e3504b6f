// libFuzzer target for the control plane's parsers (built with -DHMC_BUILD_FUZZERS=ON under
// clang). Run:  build/tests/control_fuzz -max_total_time=300 tests/fuzz/corpus
#include <cstddef>
#include <cstdint>

#include "control_fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hmc::control::fuzz_one(data, size);
  return 0;
}
