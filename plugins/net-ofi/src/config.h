// The plugin's deploy-time settings: one table (name, default, help) that the plugin table
// exports as config_vars, and one parser that validates every value read through the core's
// config_get (with the SDK's hmc/plugin/config.hpp). An invalid value fails init with
// HMC_PLUGIN_ERR_INVALID_ARGUMENT and a logged message naming the variable.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "hmc/plugin/common.h"
#include "log.h"

namespace hmc::ofi {

enum class HmemMode { kAuto, kOff, kOn };
enum class PutCompletion { kAuto, kDelivery, kRead };
enum class RndvMode { kAuto, kRead, kWrite };

struct Config {
  std::vector<std::string> providers;                   // HMC_OFI_PROVIDER; empty: automatic
  std::string domain;                                   // HMC_OFI_DOMAIN; empty: automatic
  HmemMode hmem = HmemMode::kAuto;                      // HMC_OFI_HMEM
  PutCompletion put_completion = PutCompletion::kAuto;  // HMC_OFI_PUT_COMPLETION
  size_t mr_cache = 64;                                 // HMC_OFI_MR_CACHE (entries; 0: no caching)
  size_t eager_limit = 8192;                            // HMC_OFI_EAGER_LIMIT (payload bytes)
  RndvMode rndv = RndvMode::kAuto;                      // HMC_OFI_RNDV
  bool write_chunk_auto = true;                         // HMC_OFI_WRITE_CHUNK=auto
  size_t write_chunk = 0;                               // ... else its size (0: whole)
  bool force_mr_local = false;                          // HMC_OFI_MR_LOCAL
  std::string listen_host = "127.0.0.1";                // HMC_LISTEN_HOST (the core's)
};

constexpr size_t kMaxEagerLimit = size_t{1} << 20;
constexpr size_t kMinWriteChunk = size_t{4} << 10;
constexpr size_t kMaxWriteChunk = size_t{1} << 30;
// HMC_OFI_WRITE_CHUNK=auto on the tcp provider. Measured with bench/ofi_rdm_pingpong.cpp on a
// loopback VM: 4 MiB ping-pong by one fi_write ran at 3.0-5.0 GB/s, by 512 KiB pieces at
// 6.6-12 GB/s (256K-768K alike; 1M was as slow as one write).
constexpr size_t kTcpWriteChunk = size_t{512} << 10;

// NULL-terminated table for hmc_net_plugin_v2_t.config_vars.
extern const hmc_config_var_t kConfigVars[];

// Reads and validates every variable. On failure logs an error naming the variable and returns
// HMC_PLUGIN_ERR_INVALID_ARGUMENT.
hmc_plugin_status_t load_config(const hmc_host_services_t* host, const Log& log, Config* out);

}  // namespace hmc::ofi
