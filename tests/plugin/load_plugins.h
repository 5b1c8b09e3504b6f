// A loader over the plugins that the environment names, as the loader tests make it.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "plugin/loader.h"
#include "util/config.h"
#include "util/status.h"

namespace hmc::test {

// Reads *cfg from the environment and replaces *loader with one that has loaded what it names,
// from the default directories too only when default_dirs; each step that fails, fails the test
// (not fatally: the loader is made either way).
inline plugin::Loader& load_plugins(Config& cfg, std::unique_ptr<plugin::Loader>& loader,
                                    bool default_dirs = false) {
  EXPECT_EQ(cfg.load_from_environment(), HMC_SUCCESS) << last_error();
  plugin::LoaderOptions opts;
  opts.search_default_dirs = default_dirs;
  loader = std::make_unique<plugin::Loader>(opts);
  EXPECT_EQ(loader->load(cfg), HMC_SUCCESS) << last_error();
  return *loader;
}

}  // namespace hmc::test
