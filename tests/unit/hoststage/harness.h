// The hoststage benchmark's view of the net test driver (tests/unit/net/driver.h): the same
// Side and run_pair, bound to the hoststage plugin. Used by
// plugins/net-hoststage/bench/hoststage_bench.cpp. No gtest dependency.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "../net/driver.h"
#include "../net/pattern.h"

namespace hs_test {

using net_test::fill;
using net_test::first_mismatch;
using net_test::Host;
using net_test::mono_ns;
using net_test::PairResult;

// The hoststage plugin's table, loaded once per process.
inline const hmc_net_plugin_v2_t* plugin(std::string* err = nullptr) {
  return net_test::load_plugin("hoststage", err);
}

// One side of a connection (the benchmark's callbacks get it from run_pair).
using net_test::Side;

// net_test::run_pair over the hoststage plugin.
inline PairResult run_pair(const std::map<std::string, std::string>& cfg, int dev,
                           const std::function<void(Side&)>& parent,
                           const std::function<void(Side&)>& child,
                           const std::function<int()>& child_exit, double timeout_s = 60) {
  return net_test::run_pair(plugin(), cfg, dev, parent, child, child_exit, timeout_s);
}

}  // namespace hs_test
