// A test helper over core/src/coll/topology.h: a topology from JSON text that the test expects
// to parse (a failure is a test failure, with the parser's message).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "coll/topology.h"
#include "util/status.h"

namespace hmc::coll::test {

inline Topology parse(const std::string& json) {
  Topology t;
  EXPECT_EQ(parse_topology(json, "test.json", &t), HMC_SUCCESS) << last_error();
  return t;
}

}  // namespace hmc::coll::test
