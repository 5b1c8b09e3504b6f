// Built by out_of_tree.sh against an installed hmc (its include/ only): the SDK's C++ helpers
// for plugins compile on their own, with warnings as errors, and work. Exit status 0 when they
// do.
#include <hmc/plugin/net.h>

#include <cstdio>
#include <hmc/plugin/boundary.hpp>
#include <hmc/plugin/config.hpp>
#include <hmc/plugin/log.hpp>
#include <hmc/plugin/net_adaptor.hpp>
#include <hmc/plugin/status.hpp>
#include <stdexcept>
#include <string>

int main() {
  using namespace hmc::plugin;
  size_t size = 0;
  bool on = false;
  const bool good =
      parse_size("64K", &size) && size == 65536 && parse_bool("on", &on) && on &&
      guarded([]() -> hmc_plugin_status_t { throw std::runtime_error("x"); }) ==
          HMC_PLUGIN_ERR_INTERNAL &&
      check_host_services(nullptr, HMC_NET_ABI_VERSION) == HMC_PLUGIN_ERR_INVALID_ARGUMENT &&
      std::string(status_name(HMC_PLUGIN_ERR_TRUNCATED)) == "TRUNCATED";
  std::printf("%s\n", good ? "PASS" : "FAIL");
  return good ? 0 : 1;
}
