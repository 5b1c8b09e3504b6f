// The 1 GiB transfers, each way, byte-exact, over the reference paths (10-15 s each on 2 cores,
// mostly memory traffic of the test itself: running them over all six paths doubled the
// integration run; the other paths get 64 MiB in SendRecv.SizesBothDirections). In the default
// run (label `slow` besides `integration`, so that `ctest -LE slow` can leave them out);
// skipped under AddressSanitizer, where they would take minutes and gigabytes of shadow memory.
#include "fixture.h"

namespace hmc_test {
namespace {

class Large : public LoopbackTest {};
HMC_INSTANTIATE_OVER_REFERENCE_PATHS(Large);

TEST_P(Large, OneGiBBothDirectionsByteExact) {
  if (HMC_TEST_ASAN) GTEST_SKIP() << "1 GiB transfers are skipped under AddressSanitizer";
  ASSERT_NO_FATAL_FAILURE(open());
  Child c;
  ASSERT_NO_FATAL_FAILURE(start(&c, scenario::kEchoSizes, {"sizes=" + std::to_string(kGiB)}));
  // Buffers from hmc_mem_alloc(ctx, "host"), the allocator applications are meant to use.
  ASSERT_NO_FATAL_FAILURE(echo_sizes(&c, {kGiB}, true));
  expect_exit_ok(&c);
}

}  // namespace
}  // namespace hmc_test
