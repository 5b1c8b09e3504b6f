// hmc-perf results: statistics over per-iteration latencies and the two output formats (a
// ucx_perftest-like table, or one JSON object per size per line). Pure code.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/json.h"
#include "options.h"

namespace hmc::perf {

struct Result {
  Test test = Test::Bw;
  Op op = Op::Send;
  uint64_t size = 0;
  int64_t iters = 0;
  int64_t window = 1;
  double bw_MBps = 0;  // 10^6 bytes/s
  double lat_us_avg =
      0;  // lat: one way (half a round trip; get: the whole get); bw: time per message
  double lat_us_p50 = -1;  // < 0: not measured (bw)
  double lat_us_p99 = -1;
  double lat_us_p999 = -1;
  double lat_us_max = -1;
  std::string path;
  std::string device_ipc;     // device plugins whose memory crosses by device IPC ("" for none)
  std::string device_memory;  // how device memory in regions moves (hmc_peer_info)
  // Messages of this size (warm-up included) whose device memory went by device IPC, through
  // shared bounces, and transfers staged through bounce buffers at all; puts and gets that moved
  // device memory with no bounce buffer (hmc_peer_info deltas).
  uint64_t ipc_messages = 0;
  uint64_t shared_messages = 0;
  uint64_t staged_transfers = 0;
  uint64_t direct_transfers = 0;
  std::string mem;
  std::string peer_mem;
  bool check = false;
};

// Nearest-rank percentile (q in [0,1]) of unsorted samples; -1 for none.
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  k = std::clamp<size_t>(k, 1, v.size()) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

using hmc_tools::json_number;

// One line of JSON (nlohmann-json); unknown figures and names are null.
inline std::string to_json(const Result& r) {
  hmc_tools::Json j;
  j["test"] = to_string(r.test);
  j["op"] = to_string(r.op);
  j["size"] = r.size;
  j["iters"] = r.iters;
  j["window"] = r.window;
  j["bw_MBps"] = json_number(r.bw_MBps, 2);
  j["lat_us_avg"] = json_number(r.lat_us_avg, 3);
  j["lat_us_p50"] = json_number(r.lat_us_p50, 3);
  j["lat_us_p99"] = json_number(r.lat_us_p99, 3);
  j["lat_us_p999"] = json_number(r.lat_us_p999, 3);
  j["lat_us_max"] = json_number(r.lat_us_max, 3);
  j["path"] = hmc_tools::or_null(r.path);
  j["device_ipc"] = r.device_ipc;  // "" says: none (it is known)
  j["ipc_messages"] = r.ipc_messages;
  j["shared_messages"] = r.shared_messages;
  j["staged_transfers"] = r.staged_transfers;
  j["direct_transfers"] = r.direct_transfers;
  j["device_memory"] = r.device_memory;  // "": neither side has device memory
  j["mem"] = hmc_tools::or_null(r.mem);
  j["peer_mem"] = hmc_tools::or_null(r.peer_mem);
  j["check"] = r.check;
  return j.dump(-1, ' ', false, hmc_tools::Json::error_handler_t::replace);
}

inline std::string table_header() {
  char b[256];
  std::snprintf(b, sizeof b, "%12s %10s %6s %12s %12s %12s %12s  %s\n", "size", "iters", "window",
                "bw MB/s", "lat avg us", "lat p50 us", "lat p99 us", "path");
  return std::string("#") + (b + 1);
}

inline std::string table_cell(double v, int decimals) {
  if (v < 0 || !std::isfinite(v)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

inline std::string table_row(const Result& r) {
  char b[512];
  std::snprintf(b, sizeof b, "%12s %10lld %6lld %12s %12s %12s %12s  %s\n",
                size_text(r.size).c_str(), static_cast<long long>(r.iters),
                static_cast<long long>(r.window), table_cell(r.bw_MBps, 2).c_str(),
                table_cell(r.lat_us_avg, 3).c_str(), table_cell(r.lat_us_p50, 3).c_str(),
                table_cell(r.lat_us_p99, 3).c_str(), r.path.c_str());
  return b;
}

}  // namespace hmc::perf
