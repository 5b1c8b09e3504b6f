// The C++ wrapper from an installed hmc (tests/install/app_out_of_tree.sh): prints
// "cxx version V, N devices" through hmc.hpp; exit status 1 when the wrapper throws.
#include <cstdio>
#include <hmc/hmc.hpp>

int main() {
  try {
    hmc::Context ctx;
    std::printf("cxx version %s, %zu devices\n", hmc::version().c_str(), ctx.devices().size());
    return 0;
  } catch (const hmc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
