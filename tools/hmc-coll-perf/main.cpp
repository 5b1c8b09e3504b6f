// hmc-coll-perf: times hmc's collectives over a range of sizes, shaped like nccl-tests so that
// its readers can read it (docs/tools.md#hmc-coll-perf). Ranks come from the launchers'
// variables (mpirun, srun, torchrun) or from --np N, which starts N local ranks itself.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collective.h"
#include "elements.h"
#include "hmc/hmc.h"
#include "ranks.h"
#include "tool_version.h"

namespace {

const char* kUsage =
    "usage: hmc-coll-perf [options]\n"
    "  -b, --minbytes SIZE     smallest size (default 8)\n"
    "  -e, --maxbytes SIZE     largest size (default 32M); sizes take K, M, G\n"
    "  -f, --stepfactor N      multiply the size by N between rows (default 2)\n"
    "  -o, --op NAME           all_reduce (default), all_gather, all_to_all, all_to_allv,\n"
    "                          reduce_scatter, broadcast\n"
    "  -d, --datatype NAME     float (default), double, half, bfloat16, int8, uint8, int32, int64\n"
    "  -r, --redop NAME        sum (default), prod, min, max, avg\n"
    "  -n, --iters N           timed iterations per size (default 20)\n"
    "  -w, --warmup_iters N    untimed iterations first (default 5)\n"
    "  -c, --check             check every size's result against a host reference (#wrong)\n"
    "      --mem DEVICE        every rank's buffers on DEVICE (cuda:0, hip:0, ...; default host)\n"
    "      --mem-by-rank LIST  rank i's buffers on the i-th of a comma-separated list\n"
    "      --np N              start N local ranks (otherwise: HMC_RANK/HMC_WORLD_SIZE/\n"
    "                          HMC_RENDEZVOUS, or mpirun's, srun's or torchrun's variables)\n"
    "      --json              one JSON object per size instead of the table\n"
    "  -h, --help              this text\n"
    "HMC_COLL_ALGO forces an algorithm (docs/collectives.md).\n"
    "time: the slowest rank's average per iteration; algbw = size / time; busbw = algbw x\n"
    "2(n-1)/n (all_reduce), (n-1)/n (all_gather, reduce_scatter, all_to_all(v)), 1 (broadcast),\n"
    "as nccl-tests define them. size is the largest buffer of a rank (nccl-tests' convention).\n";

struct Options {
  uint64_t min_bytes = 8, max_bytes = 32u << 20, factor = 2;
  std::string op = "all_reduce", dtype = "float", redop = "sum";
  int iters = 20, warmup = 5, np = 0;
  bool check = false, json = false;
  std::string mem = "host";
  std::vector<std::string> mem_by_rank;
};

bool parse_size(const char* s, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) return false;
  std::string suf(end);
  uint64_t m = suf.empty()                ? 1
               : suf == "K" || suf == "k" ? 1u << 10
               : suf == "M" || suf == "m" ? 1u << 20
               : suf == "G" || suf == "g" ? 1u << 30
                                          : 0;
  if (!m) return false;
  *out = v * m;
  return true;
}

int usage_error(const std::string& what) {
  fprintf(stderr, "hmc-coll-perf: %s\n%s", what.c_str(), kUsage);
  return 2;
}

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
        printf(
            "{\"op\":\"%s\",\"ranks\":%d,\"size\":%llu,\"count\":%llu,\"type\":\"%s\","
            "\"redop\":\"%s\",\"time_us\":%.2f,\"algbw_GBps\":%.3f,\"busbw_GBps\":%.3f,"
            "\"wrong\":%lld}\n",
            o.op.c_str(), n, (unsigned long long)bytes, (unsigned long long)shape.count,
            o.dtype.c_str(), red, slowest, algbw, algbw * factor, (long long)wrong);
      } else {
        char w[24] = "N/A";
        if (wrong >= 0) snprintf(w, sizeof w, "%lld", (long long)wrong);
        printf(" %11llu %12llu %8s %6s %6s %10.2f %8.3f %8.3f %7s\n", (unsigned long long)bytes,
               (unsigned long long)shape.count, o.dtype.c_str(), red,
               c.coll == Coll::Broadcast ? "0" : "-1", slowest, algbw, algbw * factor, w);
      }
      fflush(stdout);
    }
    if (o.factor < 2 && bytes == o.max_bytes) break;
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (hmc_tools::version_asked(argc, argv))
    return hmc_tools::print_version("hmc-coll-perf", hmc_version());
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    // --name=value, as the other tools take it: the value is the option's next argument.
    std::string attached;
    bool has_attached = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      attached = a.substr(a.find('=') + 1);
      a = a.substr(0, a.find('='));
      has_attached = true;
    }
    auto next = [&]() -> const char* {
      if (has_attached) {
        has_attached = false;
        return attached.c_str();
      }
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    auto num = [&](int* out) {
      const char* v = next();
      return v && (*out = atoi(v)) >= 0;
    };
    const char* v = nullptr;
    if (a == "-h" || a == "--help") {
      fputs(kUsage, stdout);
      return 0;
    } else if (a == "-b" || a == "--minbytes") {
      if (!(v = next()) || !parse_size(v, &o.min_bytes)) return usage_error("bad -b");
    } else if (a == "-e" || a == "--maxbytes") {
      if (!(v = next()) || !parse_size(v, &o.max_bytes)) return usage_error("bad -e");
    } else if (a == "-f" || a == "--stepfactor") {
      if (!(v = next()) || !parse_size(v, &o.factor) || o.factor < 1) return usage_error("bad -f");
    } else if (a == "-o" || a == "--op") {
      if (!(v = next())) return usage_error("-o needs a name");
      o.op = v;
      if (!coll_bench::find_coll(o.op)) return usage_error("unknown operation '" + o.op + "'");
    } else if (a == "-d" || a == "--datatype") {
      if (!(v = next())) return usage_error("-d needs a name");
      o.dtype = v;
      if (!coll_bench::find_dtype(o.dtype))
        return usage_error("unknown datatype '" + o.dtype + "'");
    } else if (a == "-r" || a == "--redop") {
      if (!(v = next())) return usage_error("-r needs a name");
      o.redop = v;
      if (!coll_bench::find_redop(o.redop))
        return usage_error("unknown reduction '" + o.redop + "'");
    } else if (a == "-n" || a == "--iters") {
      if (!num(&o.iters) || o.iters < 1) return usage_error("bad -n");
    } else if (a == "-w" || a == "--warmup_iters") {
      if (!num(&o.warmup)) return usage_error("bad -w");
    } else if (a == "-c" || a == "--check") {
      if (has_attached) return usage_error(a + " takes no value");
      o.check = true;
    } else if (a == "--json") {
      if (has_attached) return usage_error(a + " takes no value");
      o.json = true;
    } else if (a == "--np") {
      if (!num(&o.np) || o.np < 1 || o.np > 256) return usage_error("bad --np (1 to 256)");
    } else if (a == "--mem") {
      if (!(v = next())) return usage_error("--mem needs a device");
      o.mem = v;
    } else if (a == "--mem-by-rank") {
      if (!(v = next())) return usage_error("--mem-by-rank needs a list");
      std::string list = v;
      for (size_t p = 0; p <= list.size();) {
        size_t c = list.find(',', p);
        if (c == std::string::npos) c = list.size();
        o.mem_by_rank.push_back(list.substr(p, c - p));
        p = c + 1;
      }
    } else {
      return usage_error("unknown option '" + a + "'");
    }
  }
  if (o.min_bytes > o.max_bytes) return usage_error("-b is larger than -e");
  if (o.factor < 2 && o.min_bytes != o.max_bytes && o.factor == 1)
    return usage_error("-f 1 needs -b equal to -e");
  return coll_bench::run_ranks("hmc-coll-perf", o.np, [&] { return rank_main(o); });
}
