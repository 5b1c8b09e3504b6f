// --version for the programs of bench/ that parse their own arguments: prints "<tool> (hmc)
// <version>" and exits 0, as the tools' CLI11 parsers do (tools/common/cli.h add_version). The
// version is the library's: hmc_version() for those that link libhmc.so (what they run with), the
// build's HMC_TOOLS_VERSION (the project's, which hmc_version() of that build returns) for the
// ones that link the core statically.
#pragma once

#include <cstdio>
#include <cstring>

namespace hmc_tools {

// Whether --version is among the arguments.
inline bool version_asked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--version") == 0) return true;
  return false;
}

inline int print_version(const char* tool, const char* version = HMC_TOOLS_VERSION) {
  std::printf("%s (hmc) %s\n", tool, version);
  return 0;
}

}  // namespace hmc_tools
