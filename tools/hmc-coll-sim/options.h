// hmc-coll-sim command line: nccl-tests' shape (-b -e -f -d -o) over a described cluster.
// Pure code, so that tests/unit/tools_coll_sim_test.cpp can include it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../common/cli.h"
#include "../common/size.h"
#include "coll/algorithms.h"
#include "hmc/hmc.h"

namespace hmc::coll_sim {

enum class Format { Table, Json };

struct Datatype {
  const char* name;  // nccl-tests' names
  hmc_dtype_t dtype;
  size_t size;
};
inline const std::vector<Datatype>& datatypes() {
  static const std::vector<Datatype> list = {
      {"float", HMC_DTYPE_F32, 4},     {"double", HMC_DTYPE_F64, 8}, {"half", HMC_DTYPE_F16, 2},
      {"bfloat16", HMC_DTYPE_BF16, 2}, {"int8", HMC_DTYPE_I8, 1},    {"uint8", HMC_DTYPE_U8, 1},
      {"int32", HMC_DTYPE_I32, 4},     {"int64", HMC_DTYPE_I64, 8},
  };
  return list;
}

struct Collective {
  const char* name;
  coll::CollKind kind;
};
inline const std::vector<Collective>& collectives() {
  static const std::vector<Collective> list = {
      {"all_reduce", coll::CollKind::AllReduce},
      {"all_gather", coll::CollKind::AllGather},
      {"reduce_scatter", coll::CollKind::ReduceScatter},
      {"all_to_all", coll::CollKind::AllToAll},
      {"all_to_allv", coll::CollKind::AllToAllV},
      {"broadcast", coll::CollKind::Broadcast},
      {"reduce", coll::CollKind::Reduce},
  };
  return list;
}

inline const std::vector<std::pair<const char*, hmc_reduce_op_t>>& reduce_ops() {
  static const std::vector<std::pair<const char*, hmc_reduce_op_t>> list = {
      {"sum", HMC_OP_SUM}, {"prod", HMC_OP_PROD}, {"min", HMC_OP_MIN},
      {"max", HMC_OP_MAX}, {"avg", HMC_OP_AVG},
  };
  return list;
}

struct Options {
  bool help = false;
  std::string version;   // --version: the version line to print
  std::string topology;  // a file
  std::string cluster;   // a generator spec
  Collective collective = collectives()[0];
  Datatype datatype = datatypes()[0];
  hmc_reduce_op_t op = HMC_OP_SUM;
  const char* op_name = "sum";
  std::string algo = "auto";
  bool ccl = false;               // --backend ccl: the vendor libraries (coll/ccl_schedules.h)
  std::string ccl_algo = "auto";  // their algorithm within a group
  bool ccl_per_host = false;      // --ccl-groups host: a group per vendor per host
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 128ull << 20;
  int64_t factor = 2;
  int64_t root = 0;
  Format format = Format::Table;
};

inline std::string usage() {
  return R"(usage: hmc-coll-sim (--topology FILE | --cluster SPEC) [options]

Predicts a collective's time on a described cluster by simulating the schedules of hmc's
algorithms (docs/collectives-simulation.md). Columns as nccl-tests: size is the buffer nccl-tests
names for the collective, algbw = size / time, busbw = algbw x the collective's factor.

  --topology FILE       the cluster, a JSON file (bench/coll-sim/mixed-2x8.json)
  --cluster SPEC        a regular cluster, e.g.
                        hosts=128,gpus_per_host=8,vendors=cuda:4+hip:4,nic_gbps=400
  -o, --collective NAME all_reduce|all_gather|reduce_scatter|all_to_all|all_to_allv|
                        broadcast|reduce                                   [all_reduce]
  -b, --minbytes SIZE   smallest size, K/M/G suffixes (powers of 1024)            [8]
  -e, --maxbytes SIZE   largest size                                           [128M]
  -f, --stepfactor N    multiply the size by N from one row to the next           [2]
  -d, --datatype NAME   float|double|half|bfloat16|int8|uint8|int32|int64      [float]
  --redop NAME          sum|prod|min|max|avg                                     [sum]
  -r, --root N          broadcast's and reduce's root                             [0]
  --algo NAME           the algorithm (HMC_COLL_ALGO's names), auto: by size and shape
                                                                                [auto]
  --backend hmc|ccl     hmc: hmc's own algorithms on its paths; ccl: the vendor libraries
                        (one vendor: its library's algorithm; several: reduce-scatter in
                        each vendor group, all-reduce of the shards across the groups
                        between counterpart ranks on hmc's paths, all-gather within)  [hmc]
  --ccl-algo NAME       ring|tree|direct|auto, the library's algorithm within a group
                        (auto: the faster of ring and tree, as NCCL's tuner picks; direct:
                        the emulated NCCL's; the hierarchical form's reduce-scatter and
                        all-gather are rings)                                      [auto]
  --ccl-groups vendor|host  vendor: a group is every rank of one vendor, the library
                        spanning hosts; host: one group per vendor per host, hmc's paths
                        across hosts too                                        [vendor]
  --format table|json   json: one object per size per line                     [table]
  -h, --help            this text

exit status: 0 success, 1 a schedule the simulator rejects, 2 bad arguments or topology
)";
}

// Parses argv into *o with CLI11 (tools/common/cli.h: --opt=value, -b8, ...). On failure returns
// false with *err naming the bad argument. --help sets o->help (the caller prints usage()),
// --version o->version (with the line of `version`).
inline bool parse_args(int argc, const char* const* argv, Options* o, std::string* err,
                       const std::string& version = "") {
  CLI::App app("hmc-coll-sim", "hmc-coll-sim");
  if (!version.empty()) hmc_tools::add_version(app, "hmc-coll-sim", version);
  auto one_of = [](auto list, auto name_of, auto take, const std::string& wants) {
    return CLI::Validator(
        [=](std::string& v) -> std::string {
          for (const auto& x : list())
            if (v == name_of(x)) {
              take(x);
              return "";
            }
          return "wants " + wants + ", got '" + v + "'";
        },
        "NAME");
  };
  std::string collective, datatype, redop, format;
  app.add_option("--topology", o->topology);
  app.add_option("--cluster", o->cluster);
  app.add_option("-o,--collective", collective)
      ->check(one_of(
          collectives, [](const Collective& c) { return std::string(c.name); },
          [o](const Collective& c) { o->collective = c; },
          "all_reduce, all_gather, reduce_scatter, all_to_all, all_to_allv, broadcast or "
          "reduce"));
  app.add_option("-d,--datatype", datatype)
      ->check(one_of(
          datatypes, [](const Datatype& d) { return std::string(d.name); },
          [o](const Datatype& d) { o->datatype = d; },
          "float, double, half, bfloat16, int8, uint8, int32 or int64"));
  app.add_option("--redop", redop)
      ->check(one_of(
          reduce_ops, [](const auto& r) { return std::string(r.first); },
          [o](const auto& r) {
            o->op = r.second;
            o->op_name = r.first;
          },
          "sum, prod, min, max or avg"));
  app.add_option("-b,--minbytes", o->min_bytes)->transform(hmc_tools::size_at_least(1));
  app.add_option("-e,--maxbytes", o->max_bytes)->transform(hmc_tools::size_at_least(1));
  app.add_option("-f,--stepfactor", o->factor)->check(hmc_tools::whole_in(2, 1 << 20, "a factor"));
  app.add_option("-r,--root", o->root)->check(hmc_tools::whole_in(0, 1 << 20, "a rank number"));
  app.add_option("--algo", o->algo);
  std::string backend, ccl_groups;
  app.add_option("--backend", backend)->check(hmc_tools::one_of({"hmc", "ccl"}));
  app.add_option("--ccl-algo", o->ccl_algo)
      ->check(hmc_tools::one_of({"ring", "tree", "direct", "auto"}));
  app.add_option("--ccl-groups", ccl_groups)->check(hmc_tools::one_of({"vendor", "host"}));
  app.add_option("--format", format)->check(hmc_tools::one_of({"table", "json"}));
  switch (hmc_tools::parse_quietly(app, argc, argv, err)) {
    case hmc_tools::Parsed::Help: o->help = true; return true;
    case hmc_tools::Parsed::Version: o->version = *err; return true;
    case hmc_tools::Parsed::Bad: return false;
    case hmc_tools::Parsed::Run: break;
  }
  o->ccl = backend == "ccl";
  o->ccl_per_host = ccl_groups == "host";
  if (format == "json") o->format = Format::Json;
  if (o->topology.empty() == o->cluster.empty()) {
    *err = "give the cluster: --topology FILE or --cluster SPEC (one of them)";
    return false;
  }
  if (o->ccl && o->algo != "auto") {
    *err = "--algo names hmc's algorithms; with --backend ccl the library's is --ccl-algo";
    return false;
  }
  if (!o->ccl && (o->ccl_algo != "auto" || o->ccl_per_host)) {
    *err = "--ccl-algo and --ccl-groups want --backend ccl";
    return false;
  }
  if (o->min_bytes > o->max_bytes) {
    *err = "-b " + hmc_tools::size_text(o->min_bytes) + " is larger than -e " +
           hmc_tools::size_text(o->max_bytes);
    return false;
  }
  return true;
}

// The sizes of the rows: min, min x factor, ... up to max.
inline std::vector<uint64_t> row_sizes(const Options& o) {
  std::vector<uint64_t> out;
  for (uint64_t s = o.min_bytes; s <= o.max_bytes; s *= static_cast<uint64_t>(o.factor)) {
    out.push_back(s);
    if (s > o.max_bytes / static_cast<uint64_t>(o.factor)) break;
  }
  return out;
}

}  // namespace hmc::coll_sim
