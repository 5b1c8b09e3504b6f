// One of the nccl-tests-named programs; HMC_NCCL_COLL and HMC_NCCL_PROGRAM say which
// (tools/hmc-coll-perf/CMakeLists.txt builds each from this file).
#include "nccl_tests.h"

int main(int argc, char** argv) {
  return coll_bench::nccl_tests_main(coll_bench::Coll::HMC_NCCL_COLL, HMC_NCCL_PROGRAM, argc, argv);
}
