// The nccl-tests front end: all_reduce_perf's command line and output for hmc's collectives
// (docs/tools.md#nccl-tests-command-lines). Each hmc_<name>_perf program is this with its
// collective.
#pragma once

#include "collective.h"

namespace coll_bench {

// program: the name nccl-tests gives the binary ("all_reduce_perf"); returns the exit status.
int nccl_tests_main(Coll coll, const char* program, int argc, char** argv);

}  // namespace coll_bench
