#include <cstdio>
#include <cstdlib>

#include "fuzz_target.h"

namespace hmc::fuzz {

void check_failed(const char* what, const char* file, int line) {
  fprintf(stderr, "fuzz check failed at %s:%d: %s\n", file, line, what);
  abort();
}

}  // namespace hmc::fuzz
