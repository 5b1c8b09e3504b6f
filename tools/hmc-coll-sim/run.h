// hmc-coll-sim's run: per size, every rank's schedule from the algorithms, one simulation, one
// row (nccl-tests' columns, or a JSON object). The algorithms are passed in, so that the tests
// drive it with schedules of their own. Pure code apart from the clock.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <exception>
#include <ostream>
#include <string>
#include <vector>

#include "../common/json.h"
#include "coll/ccl_schedules.h"
#include "coll/simulate.h"
#include "coll/topology.h"
#include "options.h"
#include "util/status.h"

namespace hmc::coll_sim {

// Where the schedules come from: the library's algorithms (main.cpp) or a test's.
struct AlgorithmSource {
  bool (*parse)(const std::string& name, coll::Algorithm* out);
  coll::Schedule (*make)(const coll::CollArgs& args, const coll::GroupShape& shape, int rank,
                         coll::Algorithm algo);
};

struct Row {
  uint64_t size = 0;   // nccl-tests' size: the bytes algbw divides by the time
  uint64_t count = 0;  // CollArgs::count
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  std::string algorithm;
  coll::SimResult sim;
  double build_seconds = 0;  // how long making every rank's schedule took
  double sim_seconds = 0;    // how long the simulation took
};

// CollArgs::count for a row of `size` bytes, as nccl-tests divides its size: per rank (or per
// peer for all-to-all) for the collectives that split the buffer among ranks. At least 1.
inline uint64_t count_for(coll::CollKind kind, uint64_t size, size_t elem, int n) {
  uint64_t per = elem;
  if (kind != coll::CollKind::AllReduce && kind != coll::CollKind::Broadcast &&
      kind != coll::CollKind::Reduce)
    per *= static_cast<uint64_t>(n);
  return size / per ? size / per : 1;
}

inline coll::CollArgs args_for(const Options& o, uint64_t count, int n) {
  coll::CollArgs a;
  a.kind = o.collective.kind;
  a.dtype = o.datatype.dtype;
  a.op = o.op;
  a.count = count;
  a.root = static_cast<int>(o.root);
  if (a.kind == coll::CollKind::AllToAllV) {
    for (int p = 0; p < n; ++p) {
      a.send_counts.push_back(count);
      a.recv_counts.push_back(count);
      a.send_displs.push_back(count * static_cast<uint64_t>(p));
      a.recv_displs.push_back(count * static_cast<uint64_t>(p));
    }
  }
  return a;
}

// Simulates one size. False with *err when the algorithms fail or the simulator rejects their
// schedules.
inline bool simulate_row(const Options& o, const AlgorithmSource& algos, coll::Algorithm algo,
                         const coll::Topology& topo, const coll::GroupShape& shape, uint64_t size,
                         Row* row, std::string* err) {
  const int n = topo.size();
  row->count = count_for(o.collective.kind, size, o.datatype.size, n);
  row->size = coll::algbw_bytes(o.collective.kind, row->count, o.datatype.size, n);
  coll::CollArgs args = args_for(o, row->count, n);
  auto begin = std::chrono::steady_clock::now();
  std::vector<coll::Schedule> schedules;
  schedules.reserve(n);
  if (o.ccl) {
    coll::CclAlgo lib = coll::CclAlgo::Auto;
    coll::parse_ccl_algo(o.ccl_algo, &lib);
    coll::TopologyGroups vg = coll::topology_groups(topo, o.ccl_per_host);
    // Auto: the faster of the library's ring and tree, as its tuner chooses (the tree is an
    // all-reduce of one vendor group only).
    bool both = lib == coll::CclAlgo::Auto && vg.groups.size() == 1 &&
                o.collective.kind == coll::CollKind::AllReduce;
    for (coll::CclAlgo pick :
         {both || lib == coll::CclAlgo::Auto ? coll::CclAlgo::Ring : lib, coll::CclAlgo::Tree}) {
      std::vector<coll::Schedule> made;
      made.reserve(n);
      for (int r = 0; r < n; ++r) {
        coll::Schedule s;
        if (coll::make_ccl_schedule(args, topo, vg, r, pick, &s) != HMC_SUCCESS) {
          *err = fmt::format("{} of {} bytes through the vendor libraries: {}", o.collective.name,
                             size, last_error());
          return false;
        }
        made.push_back(std::move(s));
      }
      if (schedules.empty()) {
        schedules = std::move(made);
      } else {
        coll::SimResult a, b;
        if (coll::simulate(schedules, topo, &a) == HMC_SUCCESS &&
            coll::simulate(made, topo, &b) == HMC_SUCCESS && b.time_us < a.time_us)
          schedules = std::move(made);
      }
      if (!both) break;
    }
  } else {
    try {
      for (int r = 0; r < n; ++r) schedules.push_back(algos.make(args, shape, r, algo));
    } catch (const std::exception& e) {
      *err = fmt::format("the algorithms failed for {} of {} bytes: {}", o.collective.name, size,
                         e.what());
      return false;
    }
  }
  auto built = std::chrono::steady_clock::now();
  row->build_seconds = std::chrono::duration<double>(built - begin).count();
  if (coll::simulate(schedules, topo, &row->sim) != HMC_SUCCESS) {
    *err = fmt::format("{} of {} bytes, algorithm {}: {}", o.collective.name, row->size,
                       schedules.empty() ? "" : schedules[0].algorithm, last_error());
    return false;
  }
  row->sim_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - built).count();
  row->time_us = row->sim.time_us;
  row->algbw_GBps = row->time_us > 0 ? static_cast<double>(row->size) / row->time_us / 1e3 : 0;
  row->busbw_GBps = row->algbw_GBps * coll::busbw_factor(o.collective.kind, n);
  row->algorithm = schedules[0].algorithm;
  return true;
}

inline std::string table_header(const Options& o, const coll::Topology& topo) {
  std::string s = fmt::format("# hmc-coll-sim: {} on {}\n", o.collective.name, topo.summary());
  s += fmt::format(
      "# datatype {}, redop {}, root {}, {} (predicted, not measured; bottleneck: "
      "the resource whose bytes take longest at full rate)\n",
      o.datatype.name, o.op_name, o.root,
      o.ccl ? fmt::format("backend ccl, groups by {}, library algorithm {}",
                          o.ccl_per_host ? "vendor and host" : "vendor", o.ccl_algo)
            : "algorithm " + o.algo);
  s += fmt::format("#{:>11} {:>12} {:>9} {:>6} {:>5} {:>11} {:>8} {:>8}  {}\n", "size", "count",
                   "type", "redop", "root", "time", "algbw", "busbw", "algorithm     bottleneck");
  s += fmt::format("#{:>11} {:>12} {:>9} {:>6} {:>5} {:>11} {:>8} {:>8}\n", "(B)", "(elements)", "",
                   "", "", "(us)", "(GB/s)", "(GB/s)");
  return s;
}

inline std::string table_row(const Options& o, const Row& r) {
  return fmt::format("{:>12} {:>12} {:>9} {:>6} {:>5} {:>11.2f} {:>8.2f} {:>8.2f}  {:<13} {}\n",
                     r.size, r.count, o.datatype.name, o.op_name, o.root, r.time_us, r.algbw_GBps,
                     r.busbw_GBps, r.algorithm, r.sim.bottleneck);
}

inline std::string json_row(const Options& o, const coll::Topology& topo, const Row& r) {
  hmc_tools::Json j;
  j["collective"] = o.collective.name;
  j["ranks"] = topo.size();
  j["hosts"] = topo.hosts.size();
  j["size"] = r.size;
  j["count"] = r.count;
  j["type"] = o.datatype.name;
  j["redop"] = o.op_name;
  j["root"] = o.root;
  j["algorithm"] = r.algorithm;
  j["time_us"] = hmc_tools::json_number(r.time_us, 3);
  j["algbw_GBps"] = hmc_tools::json_number(r.algbw_GBps, 3);
  j["busbw_GBps"] = hmc_tools::json_number(r.busbw_GBps, 3);
  j["transfers"] = r.sim.transfers;
  j["bottleneck"] = hmc_tools::or_null(r.sim.bottleneck);
  j["bottleneck_us"] = hmc_tools::json_number(r.sim.bottleneck_us, 3);
  j["build_seconds"] = hmc_tools::json_number(r.build_seconds, 3);
  j["sim_seconds"] = hmc_tools::json_number(r.sim_seconds, 3);
  return j.dump(-1, ' ', false, hmc_tools::Json::error_handler_t::replace) + "\n";
}

// The whole run; returns the exit status (0, 1: a failed simulation, 2: bad arguments or
// topology). Rows go to `out` as they are made, errors to `err`.
inline int run(const Options& o, const AlgorithmSource& algos, std::ostream& out,
               std::ostream& err) {
  coll::Topology topo;
  hmc_status_t st = o.topology.empty() ? coll::generate_topology(o.cluster, &topo)
                                       : coll::load_topology(o.topology, &topo);
  if (st != HMC_SUCCESS) {
    err << "hmc-coll-sim: " << last_error() << "\n";
    return 2;
  }
  coll::Algorithm algo;
  if (!algos.parse(o.algo, &algo)) {
    err << "hmc-coll-sim: unknown algorithm '" << o.algo << "'\n";
    return 2;
  }
  if (o.root >= topo.size()) {
    err << "hmc-coll-sim: root " << o.root << " is not a rank of the " << topo.size()
        << "-rank cluster\n";
    return 2;
  }
  coll::GroupShape shape = topo.shape();
  if (o.format == Format::Table) out << table_header(o, topo) << std::flush;
  uint64_t last_size = 0;
  for (uint64_t size : row_sizes(o)) {
    Row row;
    std::string why;
    if (!simulate_row(o, algos, algo, topo, shape, size, &row, &why)) {
      err << "hmc-coll-sim: " << why << "\n";
      return 1;
    }
    // Sizes below one element per rank all round up to the same row: print it once.
    if (row.size == last_size) continue;
    last_size = row.size;
    out << (o.format == Format::Table ? table_row(o, row) : json_row(o, topo, row)) << std::flush;
  }
  return 0;
}

}  // namespace hmc::coll_sim
