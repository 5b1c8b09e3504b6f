// hmc-coll-perf: times hmc's collectives over a range of sizes, shaped like nccl-tests so that
// its readers can read it (docs/tools.md#hmc-coll-perf). Ranks come from the launchers'
// variables (mpirun, srun, torchrun) or from --np N, which starts N local ranks itself.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.h"
#include "collective.h"
#include "elements.h"
#include "hmc/hmc.h"
#include "json.h"
#include "ranks.h"

namespace {

const char* kFooter =
    "HMC_COLL_ALGO forces an algorithm (docs/collectives.md).\n"
    "time: the slowest rank's average per iteration; algbw = size / time; busbw = algbw x\n"
    "2(n-1)/n (all_reduce), (n-1)/n (all_gather, reduce_scatter, all_to_all(v)), 1 (broadcast,\n"
    "reduce), as nccl-tests define them. size is the largest buffer of a rank (nccl-tests' "
    "convention).\n"
    "exit status: 0 success, 1 an hmc error or a wrong result, 2 bad arguments";

struct Options {
  uint64_t min_bytes = 8, max_bytes = 32u << 20, factor = 2;
  std::string op = "all_reduce", dtype = "float", redop = "sum";
  int iters = 20, warmup = 5, np = 0;
  bool check = false, json = false;
  std::string mem = "host";
  std::vector<std::string> mem_by_rank;
};

int rank_main(const Options& o) {
  using namespace coll_bench;
  Session s;
  if (!s.open("hmc-coll-perf")) return 1;
  int rank = s.rank, n = s.size;
  Case c;
  c.coll = find_coll(o.op)->coll;
  c.dtype = *find_dtype(o.dtype);
  c.op = find_redop(o.redop)->op;
  std::string mem =
      o.mem_by_rank.empty() ? o.mem : o.mem_by_rank[size_t(rank) % o.mem_by_rank.size()];
  bool reduces = info(c.coll).reduces;
  double factor = bus_factor(c.coll, n);
  if (rank == 0 && !o.json) {
    printf("# hmc-coll-perf: %s, %d ranks, %s, memory %s%s\n", o.op.c_str(), n, o.dtype.c_str(),
           o.mem_by_rank.empty() ? o.mem.c_str() : "by rank",
           getenv("HMC_COLL_ALGO")
               ? (std::string(", HMC_COLL_ALGO=") + getenv("HMC_COLL_ALGO")).c_str()
               : "");
    for (int k = 0; k < n; ++k) {
      hmc_comm_member_info_t m{};
      m.struct_size = sizeof m;
      if (hmc_comm_member_info(s.comm, k, &m) == HMC_SUCCESS)
        printf("#  rank %3d: host %d (%s), pid %d, %s, memory %s\n", k, m.host, m.hostname, m.pid,
               m.vendor,
               o.mem_by_rank.empty() ? o.mem.c_str()
                                     : o.mem_by_rank[size_t(k) % o.mem_by_rank.size()].c_str());
    }
    printf("#\n");
    printf("#%11s %12s %8s %6s %6s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "root",
           "time", "algbw", "busbw", "#wrong");
    printf("#%11s %12s %8s %6s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "", "(us)",
           "(GB/s)", "(GB/s)", "");
  }
  int rc = 0;
  std::string last_backend;
  for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    Shape shape = shape_of(c.coll, bytes, c.dtype.size, n);
    Run run(s.ctx, s.comm, c, shape, mem);
    hmc_status_t st = run.allocate();
    if (st != HMC_SUCCESS) {
      fprintf(stderr, "hmc-coll-perf: rank %d: allocating on %s: %s\n", rank, mem.c_str(),
              hmc_last_error());
      rc = 1;
      break;
    }
    for (int i = 0; i < o.warmup && st == HMC_SUCCESS; ++i) st = run.once();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters && st == HMC_SUCCESS; ++i) st = run.once();
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        std::max(1, o.iters);
    if (st != HMC_SUCCESS) {
      fprintf(stderr, "hmc-coll-perf: rank %d: %s of %llu bytes: %s: %s: %s\n", rank, o.op.c_str(),
              (unsigned long long)bytes, run.failed_call(), hmc_status_string(st),
              hmc_last_error());
      rc = 1;
      break;
    }
    // How the timed collective ran (the time exchange below is a collective of its own).
    char backend[256] = "";
    hmc_comm_last_backend(s.comm, backend, sizeof backend);
    // The slowest rank's time is the collective's.
    double slowest = us;
    st = time_across(s.comm, us, Across::Max, -1, &slowest);
    int64_t wrong = -1;
    if (o.check && st == HMC_SUCCESS) {
      int64_t bad = 0;
      if ((st = run.fill()) == HMC_SUCCESS && (st = run.once()) == HMC_SUCCESS &&
          (st = run.count_wrong(&bad)) == HMC_SUCCESS)
        st = sum_across(s.comm, bad, -1, &wrong);
      if (wrong) rc = 1;
    }
    if (st != HMC_SUCCESS) {
      fprintf(stderr, "hmc-coll-perf: rank %d: %s\n", rank, hmc_last_error());
      rc = 1;
      break;
    }
    double algbw = slowest > 0 ? double(bytes) / slowest / 1e3 : 0;  // bytes/us -> GB/s
    if (rank == 0) {
      const char* red = reduces ? o.redop.c_str() : "none";
      if (o.json) {
        hmc_tools::Json j;
        j["op"] = o.op;
        j["ranks"] = n;
        j["size"] = bytes;
        j["count"] = shape.count;
        j["type"] = o.dtype;
        j["redop"] = red;
        j["time_us"] = std::round(slowest * 100) / 100;
        j["algbw_GBps"] = std::round(algbw * 1000) / 1000;
        j["busbw_GBps"] = std::round(algbw * factor * 1000) / 1000;
        j["wrong"] = wrong >= 0 ? hmc_tools::Json(wrong) : hmc_tools::Json(nullptr);  // unchecked
        j["backend"] = backend;
        printf("%s\n", j.dump().c_str());
      } else {
        if (last_backend != backend) {  // a comment line, as nccl-tests' readers skip them
          printf("# backend: %s\n", backend);
          last_backend = backend;
        }
        char w[24] = "N/A";
        if (wrong >= 0) snprintf(w, sizeof w, "%lld", (long long)wrong);
        printf(" %11llu %12llu %8s %6s %6s %10.2f %8.3f %8.3f %7s\n", (unsigned long long)bytes,
               (unsigned long long)shape.count, o.dtype.c_str(), red,
               info(c.coll).rooted ? "0" : "-1", slowest, algbw, algbw * factor, w);
      }
      fflush(stdout);
    }
    if (o.factor < 2 && bytes == o.max_bytes) break;
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  using coll_bench::find_coll;
  Options o;
  CLI::App app("Times hmc's collectives over a range of sizes, shaped like nccl-tests.",
               "hmc-coll-perf");
  hmc_tools::add_version(app, "hmc-coll-perf", hmc_version());
  // Sizes of tools/common/size.h (8, 64K, 128M); 0 is no size (it would never grow).
  app.add_option("-b,--minbytes", o.min_bytes, "smallest size (default 8)")
      ->transform(hmc_tools::size_at_least(1));
  app.add_option("-e,--maxbytes", o.max_bytes, "largest size (default 32M)")
      ->transform(hmc_tools::size_at_least(1));
  app.add_option("-f,--stepfactor", o.factor, "multiply the size by N between rows (default 2)")
      ->check(CLI::PositiveNumber);
  app.add_option("-o,--op", o.op,
                 "all_reduce (default), all_gather, all_to_all, all_to_allv, reduce_scatter, "
                 "broadcast, reduce")
      ->check(CLI::Validator(
          [](std::string& v) { return find_coll(v) ? "" : "unknown operation '" + v + "'"; },
          "NAME"));
  app.add_option("-d,--datatype", o.dtype,
                 "float (default), double, half, bfloat16, int8, uint8, int32, int64")
      ->check(CLI::Validator(
          [](std::string& v) {
            return coll_bench::find_dtype(v) ? "" : "unknown datatype '" + v + "'";
          },
          "NAME"));
  app.add_option("-r,--redop", o.redop, "sum (default), prod, min, max, avg")
      ->check(CLI::Validator(
          [](std::string& v) {
            return coll_bench::find_redop(v) ? "" : "unknown reduction '" + v + "'";
          },
          "NAME"));
  app.add_option("-n,--iters", o.iters, "timed iterations per size (default 20)")
      ->check(CLI::PositiveNumber);
  app.add_option("-w,--warmup_iters", o.warmup, "untimed iterations first (default 5)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("-c,--check", o.check,
               "check every size's result against a host reference (#wrong)");
  app.add_option("--mem", o.mem,
                 "every rank's buffers on DEVICE (cuda:0, hip:0, ...; default host)");
  app.add_option("--mem-by-rank", o.mem_by_rank,
                 "rank i's buffers on the i-th of a comma-separated list")
      ->delimiter(',');
  app.add_option("--np", o.np,
                 "start N local ranks (otherwise: HMC_RANK/HMC_WORLD_SIZE/HMC_RENDEZVOUS, or "
                 "mpirun's, srun's or torchrun's variables)")
      ->check(CLI::Range(1, 256));
  app.add_flag("--json", o.json, "one JSON object per size instead of the table");
  app.footer(kFooter);
  if (int rc = hmc_tools::parse(app, argc, argv); rc >= 0) return rc;
  auto usage_error = [](const char* what) {
    fprintf(stderr, "hmc-coll-perf: %s\n", what);
    return 2;
  };
  if (o.min_bytes > o.max_bytes) return usage_error("-b is larger than -e");
  if (o.factor == 1 && o.min_bytes != o.max_bytes) return usage_error("-f 1 needs -b equal to -e");
  return coll_bench::run_ranks("hmc-coll-perf", o.np, [&] { return rank_main(o); });
}
