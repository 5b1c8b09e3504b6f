// The libFuzzer entry of a fuzz target (built with -DHMC_BUILD_FUZZERS=ON under clang). Run:
//   build-fuzz/tests/<name>_fuzz -max_total_time=300 tests/fuzz/<name>/corpus
// or every target in turn with tests/fuzz/run.
#include <cstddef>
#include <cstdint>

#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hmc::fuzz::fuzz_one(data, size);
  return 0;
}
