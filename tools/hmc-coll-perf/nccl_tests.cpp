#include "nccl_tests.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.h"
#include "elements.h"
#include "hmc/hmc.h"
#include "ranks.h"

namespace coll_bench {

namespace {

// nccl-tests' options, with its defaults; the hmc-only ones last.
struct Options {
  int threads = 1, gpus = 1;
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  uint64_t min = 0, max = 0, step = 0, factor = 1;
  int iters = 20, agg_iters = 1, warmup = 5, parallel_init = 0, check = 1;
  std::string op = "sum", dtype = "float";
  int root = 0, blocking = 0, stream_null = 0, timeout_s = 0, cudagraph = 0, report_cputime = 0;
  int average = 1, run_cycles = 1;
  std::string output_file;
  std::string mem = "host";
  std::string mem_by_rank;
  int np = 0;
};

std::string time_text(double us) {
  char b[32];
  snprintf(b, sizeof b, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
  return b;
}

struct Totals {
  double busbw_sum = 0;
  int rows = 0;
  int failed_checks = 0;  // size and form whose check found wrong elements
};

class Bench {
 public:
  Bench(const char* program, const Options& o, Coll coll, Session& s, std::string mem)
      : program_(program), o_(o), coll_(coll), s_(s), mem_(std::move(mem)) {}

  // One datatype and reduction over every size, rows printed by rank 0. False on an hmc error
  // (printed).
  bool run(const Dtype& dt, const Redop& op, Totals* totals) {
    Case c;
    c.coll = coll_;
    c.dtype = dt;
    c.op = op.op;
    c.root = info(coll_).rooted ? o_.root : 0;
    c.timeout_ms = o_.timeout_s > 0 ? o_.timeout_s * 1000 : -1;
    Shape largest = shape_of(coll_, o_.max, dt.size, s_.size);
    Case in = c;
    in.in_place = true;
    Run out_of_place(s_.ctx, s_.comm, c, largest, mem_),
        in_place(s_.ctx, s_.comm, in, largest, mem_);
    if (!ok(out_of_place.allocate(), out_of_place, "allocating") ||
        !ok(in_place.allocate(), in_place, "allocating"))
      return false;
    // nccl-tests' warm-up: -w collectives at the largest size, then at the smallest.
    for (uint64_t bytes : {o_.max, o_.min}) {
      out_of_place.reshape(shape_of(coll_, bytes, dt.size, s_.size));
      for (int i = 0; i < o_.warmup; ++i)
        if (!ok(out_of_place.once(), out_of_place, "warming up")) return false;
    }
    const char* redop = info(coll_).reduces ? op.name : "none";
    int root = info(coll_).rooted ? o_.root : -1;
    for (uint64_t bytes = o_.min; bytes <= o_.max;) {
      Shape shape = shape_of(coll_, bytes, dt.size, s_.size);
      if (s_.rank == 0)
        printf("%12llu  %12llu  %8s  %6s  %6i", (unsigned long long)shape.bytes,
               (unsigned long long)shape.count, dt.name, redop, root);
      for (Run* r : {&out_of_place, &in_place}) {
        r->reshape(shape);
        if (!measure(*r, shape, totals)) return false;
      }
      if (s_.rank == 0) printf("\n");
      fflush(stdout);
      uint64_t next = o_.factor > 1 ? bytes * o_.factor : bytes + o_.step;
      if (next <= bytes) break;  // -f 1 with -i 0: one size
      bytes = next;
    }
    return true;
  }

 private:
  bool ok(hmc_status_t st, const Run& r, const char* what) {
    if (st == HMC_SUCCESS) return true;
    fprintf(stderr, "%s: rank %d: %s: %s: %s: %s\n", program_, s_.rank, what, r.failed_call(),
            hmc_status_string(st), hmc_last_error());
    return false;
  }
  hmc_status_t barrier() {
    hmc_request_t req;
    hmc_status_t st = hmc_barrier(s_.comm, &req);
    return st == HMC_SUCCESS ? hmc_request_wait(req, timeout_ms(), nullptr) : st;
  }
  int timeout_ms() const { return o_.timeout_s > 0 ? o_.timeout_s * 1000 : -1; }

  // One form of one size: a collective to line the ranks up, the timed iterations, then the
  // checks; prints time, algbw, busbw and #wrong on rank 0.
  bool measure(Run& r, const Shape& shape, Totals* totals) {
    hmc_status_t st;
    if (!ok(r.once(), r, "the first collective") || !ok(st = barrier(), r, "hmc_barrier"))
      return false;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) {
      if (!ok(r.once(), r, "timing")) return false;
      if (o_.blocking && !ok(barrier(), r, "hmc_barrier")) return false;
    }
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        std::max(1, o_.iters);
    Across how = o_.average == 0   ? Across::Rank0
                 : o_.average == 2 ? Across::Min
                 : o_.average == 3 ? Across::Max
                                   : Across::Avg;
    double t = us;
    if (!ok(time_across(s_.comm, us, how, timeout_ms(), &t), r, "timing across ranks"))
      return false;
    int64_t wrong = 0;
    for (int c = 0; c < o_.check && wrong == 0; ++c) {
      int64_t mine = 0;
      if (!ok(r.fill(), r, "filling for the check") || !ok(r.once(), r, "the check") ||
          !ok(r.count_wrong(&mine), r, "reading the result") ||
          !ok(sum_across(s_.comm, mine, timeout_ms(), &wrong), r, "counting wrong elements"))
        return false;
    }
    double algbw = t > 0 ? double(shape.bytes) / t / 1e3 : 0;  // bytes/us -> GB/s
    double busbw = algbw * bus_factor(coll_, s_.size);
    totals->busbw_sum += busbw;
    totals->rows++;
    if (wrong) totals->failed_checks++;
    if (s_.rank == 0) {
      char w[24] = "N/A";
      if (o_.check > 0) snprintf(w, sizeof w, "%lld", (long long)wrong);
      printf("  %7s  %6.2f  %6.2f  %5s", time_text(t).c_str(), algbw, busbw, w);
    }
    return true;
  }

  const char* program_;
  const Options& o_;
  Coll coll_;
  Session& s_;
  std::string mem_;
};

int rank_main(const Options& o, Coll coll, const char* program) {
  Session s;
  if (!s.open(program)) return 1;
  if (info(coll).rooted && (o.root < 0 || o.root >= s.size)) {
    fprintf(stderr, "%s: -r %d: the root must be a rank, 0 to %d\n", program, o.root, s.size - 1);
    return 2;
  }
  std::vector<std::string> mems;
  for (size_t p = 0; !o.mem_by_rank.empty() && p <= o.mem_by_rank.size();) {
    size_t c = o.mem_by_rank.find(',', p);
    if (c == std::string::npos) c = o.mem_by_rank.size();
    mems.push_back(o.mem_by_rank.substr(p, c - p));
    p = c + 1;
  }
  auto mem_of = [&](int rank) { return mems.empty() ? o.mem : mems[size_t(rank) % mems.size()]; };
  if (s.rank == 0) {
    printf(
        "# nThread %d nGpus %d minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d "
        "iters: %d agg iters: %d validation: %d graph: %d\n",
        o.threads, o.gpus, (unsigned long long)o.min, (unsigned long long)o.max,
        (unsigned long long)(o.factor > 1 ? o.factor : o.step), o.factor > 1 ? "factor" : "bytes",
        o.warmup, o.iters, o.agg_iters, o.check, o.cudagraph);
    if (o.blocking)
      printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
    printf("#\n# Using devices\n");
    for (int k = 0; k < s.size; ++k) {
      hmc_comm_member_info_t m{};
      m.struct_size = sizeof m;
      if (hmc_comm_member_info(s.comm, k, &m) == HMC_SUCCESS)
        printf("#  Rank %2d Group  0 Pid %6d on %10s device %s [%s] hmc %s\n", k, m.pid, m.hostname,
               mem_of(k).c_str(), m.vendor, hmc_version());
    }
    const char* time = o.report_cputime ? "cputime" : "time";
    printf(
        "#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place      "
        "    \n",
        "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
           "type", "redop", "root", time, "algbw", "busbw", "#wrong", time, "algbw", "busbw",
           "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
    fflush(stdout);
  }
  std::vector<const Dtype*> types;
  if (o.dtype == "all")
    for (const auto& d : dtypes()) types.push_back(&d);
  else
    types.push_back(find_dtype(o.dtype));
  std::vector<const Redop*> ops;
  if (o.op == "all" && info(coll).reduces)
    for (const auto& r : redops()) ops.push_back(&r);
  else
    ops.push_back(o.op == "all" ? &redops().front() : find_redop(o.op));
  Bench bench(program, o, coll, s, mem_of(s.rank));
  Totals totals;
  for (int cycle = 0; o.run_cycles == 0 || cycle < o.run_cycles; ++cycle)
    for (const Dtype* t : types)
      for (const Redop* r : ops)
        if (!bench.run(*t, *r, &totals)) return 1;
  double avg = totals.rows ? totals.busbw_sum / totals.rows : 0;
  const char* min_env = getenv("NCCL_TESTS_MIN_BW");
  double min_bw = min_env ? atof(min_env) : -1;
  bool bw_failed = min_bw >= 0 && avg < min_bw * 0.9;
  if (s.rank == 0) {
    printf("# Out of bounds values : %d %s\n", totals.failed_checks,
           totals.failed_checks ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g %s\n", avg, min_bw < 0 ? "" : bw_failed ? "FAILED" : "OK");
    printf("#\n");
    fflush(stdout);
  }
  return totals.failed_checks || bw_failed ? 1 : 0;
}

// A value nccl-tests takes that hmc cannot honour: refused, saying why, rather than ignored.
bool refuse(const char* program, bool bad, const std::string& why) {
  if (bad) fprintf(stderr, "%s: %s\n", program, why.c_str());
  return bad;
}

}  // namespace

int nccl_tests_main(Coll coll, const char* program, int argc, char** argv) {
  setlinebuf(stdout);
  Options o;
  std::string description = std::string("hmc's ") + info(coll).name +
                            " timed with nccl-tests' options and output (docs/tools.md)";
  CLI::App app{description, std::string("hmc_") + program};
  hmc_tools::add_version(app, std::string("hmc_") + program, hmc_version());
  app.add_option("-t,--nthreads", o.threads, "threads per process (hmc: 1)");
  app.add_option("-g,--ngpus", o.gpus, "devices per thread (hmc: 1, a rank per process)");
  // Sizes as nccl-tests' (8, 128M) and every tool's (tools/common/size.h).
  app.add_option("-b,--minbytes", o.min_bytes, "smallest size (K, M, G)")
      ->capture_default_str()
      ->check(hmc_tools::size_at_least(0));
  app.add_option("-e,--maxbytes", o.max_bytes, "largest size")
      ->capture_default_str()
      ->check(hmc_tools::size_at_least(0));
  app.add_option("-i,--stepbytes", o.step_bytes, "size increment when -f is 1")
      ->capture_default_str()
      ->check(hmc_tools::size_at_least(0));
  app.add_option("-f,--stepfactor", o.factor, "size factor between rows")->capture_default_str();
  app.add_option("-n,--iters", o.iters, "timed iterations")->capture_default_str();
  app.add_option("-m,--agg_iters", o.agg_iters, "aggregated iterations (hmc: 1)");
  app.add_option("-w,--warmup_iters", o.warmup, "warm-up iterations")->capture_default_str();
  app.add_option("-p,--parallel_init", o.parallel_init, "0/1 (no effect: one thread per rank)");
  app.add_option("-c,--check", o.check, "check iterations per size and form (0: none)")
      ->capture_default_str();
  app.add_option("-o,--op", o.op, "sum, prod, min, max, avg or all")->capture_default_str();
  app.add_option("-d,--datatype", o.dtype,
                 "float, double, half, bfloat16, int8, uint8, int32, int64 or all")
      ->capture_default_str();
  app.add_option("-r,--root", o.root, "root of a broadcast or reduce")->capture_default_str();
  app.add_option("-z,--blocking", o.blocking, "0/1: 1 adds a barrier after each collective");
  app.add_option("-y,--stream_null", o.stream_null, "0/1 (no effect: hmc has no streams)");
  app.add_option("-T,--timeout", o.timeout_s, "seconds any one wait may take (0: HMC_TIMEOUT_MS)");
  app.add_option("-G,--cudagraph", o.cudagraph, "graph launches (hmc: 0)");
  app.add_option("-C,--report_cputime", o.report_cputime, "0/1: label the time column cputime");
  app.add_option("-a,--average", o.average, "time across ranks: 0 rank 0, 1 mean, 2 min, 3 max")
      ->capture_default_str();
  app.add_option("-N,--run_cycles", o.run_cycles, "run everything N times (0: forever)")
      ->capture_default_str();
  app.add_option("-F,--output_file", o.output_file, "CSV file (hmc: not written; parse stdout)");
  app.add_option("--mem", o.mem, "every rank's buffers on this device (host, cuda:0, ...)")
      ->capture_default_str();
  app.add_option("--mem-by-rank", o.mem_by_rank, "rank i's buffers on the i-th of a comma list");
  app.add_option("--np", o.np, "start N local ranks (else: the launcher's, as hmc_comm_create)");
  if (int rc = hmc_tools::parse(app, argc, argv); rc >= 0) return rc;
  hmc_tools::parse_size(o.min_bytes, &o.min);  // checked by the parser
  hmc_tools::parse_size(o.max_bytes, &o.max);
  hmc_tools::parse_size(o.step_bytes, &o.step);
  if (refuse(program, o.min > o.max, "-b is larger than -e") ||
      refuse(program, o.threads != 1,
             "-t " + std::to_string(o.threads) +
                 ": hmc runs one rank per process; start more "
                 "processes (mpirun -np, --np)") ||
      refuse(program, o.gpus != 1,
             "-g " + std::to_string(o.gpus) +
                 ": hmc runs one rank per process, on one memory "
                 "(--mem); start a process per device") ||
      refuse(program, o.agg_iters != 1, "-m: hmc has no grouped collectives; -m 1 only") ||
      refuse(program, o.cudagraph != 0, "-G: hmc has no graph capture; -G 0 only") ||
      refuse(program, !o.output_file.empty(), "-F: no CSV file is written; read stdout") ||
      refuse(program,
             o.iters < 1 || o.warmup < 0 || o.check < 0 || o.run_cycles < 0 || o.timeout_s < 0 ||
                 o.average < 0 || o.average > 3,
             "-n must be at least 1; -w, -c, -N and -T at least 0; -a 0 to 3") ||
      refuse(program, o.np < 0 || o.np > 256, "--np 1 to 256"))
    return 2;
  if (o.op != "all" && !find_redop(o.op))
    return refuse(program, true,
                  "-o '" + o.op + "': hmc reduces with sum, prod, min, max, avg (or all)")
               ? 2
               : 0;
  if (o.dtype != "all" && !find_dtype(o.dtype))
    return refuse(program, true,
                  "-d '" + o.dtype +
                      "': hmc's datatypes are float, double, half, bfloat16, "
                      "int8, uint8, int32, int64 (or all)")
               ? 2
               : 0;
  return run_ranks(program, o.np, [&] { return rank_main(o, coll, program); });
}

}  // namespace coll_bench
