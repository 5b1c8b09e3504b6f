// hmc-coll-perf: times hmc's collectives over a range of sizes, shaped like nccl-tests so that
// its readers can read it (docs/tools.md#hmc-coll-perf). Ranks come from the launchers'
// variables (mpirun, srun, torchrun) or from --np N, which starts N local ranks itself.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "hmc/hmc.h"

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

struct Dtype {
  const char* name;
  hmc_dtype_t t;
  size_t size;
};
const Dtype kDtypes[] = {{"float", HMC_DTYPE_F32, 4}, {"double", HMC_DTYPE_F64, 8},
                         {"half", HMC_DTYPE_F16, 2},  {"bfloat16", HMC_DTYPE_BF16, 2},
                         {"int8", HMC_DTYPE_I8, 1},   {"uint8", HMC_DTYPE_U8, 1},
                         {"int32", HMC_DTYPE_I32, 4}, {"int64", HMC_DTYPE_I64, 8}};
struct Redop {
  const char* name;
  hmc_reduce_op_t op;
};
const Redop kRedops[] = {{"sum", HMC_OP_SUM},
                         {"prod", HMC_OP_PROD},
                         {"min", HMC_OP_MIN},
                         {"max", HMC_OP_MAX},
                         {"avg", HMC_OP_AVG}};
const char* kOps[] = {"all_reduce",  "all_gather",     "all_to_all",
                      "all_to_allv", "reduce_scatter", "broadcast"};

int usage_error(const std::string& what) {
  fprintf(stderr, "hmc-coll-perf: %s\n%s", what.c_str(), kUsage);
  return 2;
}

// Small integers, exact in every datatype (half and bfloat16 included) and in their sums over a
// few ranks: the check can then compare exactly.
double value(int rank, uint64_t i) {
  return double((rank + 1) * int(1 + i % 3));
}

void store(void* p, uint64_t i, double v, hmc_dtype_t t) {
  switch (t) {
    case HMC_DTYPE_F32: static_cast<float*>(p)[i] = float(v); break;
    case HMC_DTYPE_F64: static_cast<double*>(p)[i] = v; break;
    case HMC_DTYPE_I8: static_cast<int8_t*>(p)[i] = int8_t(v); break;
    case HMC_DTYPE_U8: static_cast<uint8_t*>(p)[i] = uint8_t(v); break;
    case HMC_DTYPE_I32: static_cast<int32_t*>(p)[i] = int32_t(v); break;
    case HMC_DTYPE_I64: static_cast<int64_t*>(p)[i] = int64_t(v); break;
    case HMC_DTYPE_BF16: {
      float f = float(v);
      uint32_t b;
      memcpy(&b, &f, 4);
      static_cast<uint16_t*>(p)[i] = uint16_t(b >> 16);  // exact for these small integers
      break;
    }
    case HMC_DTYPE_F16: {
      // Non-negative integers below 2048 are exact in binary16.
      uint32_t n = uint32_t(v);
      uint16_t h = 0;
      if (n) {
        int e = 31 - __builtin_clz(n);
        h = uint16_t((e + 15) << 10 | ((n - (1u << e)) << (10 - e)));
      }
      static_cast<uint16_t*>(p)[i] = h;
      break;
    }
  }
}

double load(const void* p, uint64_t i, hmc_dtype_t t) {
  switch (t) {
    case HMC_DTYPE_F32: return static_cast<const float*>(p)[i];
    case HMC_DTYPE_F64: return static_cast<const double*>(p)[i];
    case HMC_DTYPE_I8: return static_cast<const int8_t*>(p)[i];
    case HMC_DTYPE_U8: return static_cast<const uint8_t*>(p)[i];
    case HMC_DTYPE_I32: return static_cast<const int32_t*>(p)[i];
    case HMC_DTYPE_I64: return double(static_cast<const int64_t*>(p)[i]);
    case HMC_DTYPE_BF16: {
      uint32_t b = uint32_t(static_cast<const uint16_t*>(p)[i]) << 16;
      float f;
      memcpy(&f, &b, 4);
      return f;
    }
    case HMC_DTYPE_F16: {
      uint16_t h = static_cast<const uint16_t*>(p)[i];
      int e = (h >> 10) & 31;
      double m = h & 1023;
      return e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    }
  }
  return 0;
}

double reduce_ref(hmc_reduce_op_t op, int n, uint64_t i) {
  double acc = value(0, i);
  for (int r = 1; r < n; ++r) {
    double v = value(r, i);
    if (op == HMC_OP_SUM || op == HMC_OP_AVG)
      acc += v;
    else if (op == HMC_OP_PROD)
      acc *= v;
    else if (op == HMC_OP_MIN)
      acc = std::min(acc, v);
    else
      acc = std::max(acc, v);
  }
  return op == HMC_OP_AVG ? std::trunc(acc / n) : acc;
}

// One rank's buffer in its memory, filled and read through host copies.
struct Buffer {
  hmc_context_t ctx = nullptr;
  void* p = nullptr;
  std::vector<uint8_t> host;
  bool device = false;
  hmc_status_t make(hmc_context_t c, const std::string& mem, size_t bytes) {
    ctx = c;
    if (mem == "host") {
      host.resize(std::max<size_t>(bytes, 1));
      p = host.data();
      return HMC_SUCCESS;
    }
    device = true;
    return hmc_mem_alloc(ctx, mem.c_str(), std::max<size_t>(bytes, 1), &p);
  }
  ~Buffer() {
    if (device && p) hmc_mem_free(ctx, p);
  }
};

struct Run {
  hmc_comm_t comm;
  int rank, size;
  const Options& o;
  hmc_dtype_t dt;
  size_t es;
  hmc_reduce_op_t redop;
};

// Posts one collective of `bytes` (the rank's largest buffer).
hmc_status_t post(const Run& r, uint64_t count, const std::vector<size_t>& counts,
                  const std::vector<size_t>& displs, void* send, void* recv, hmc_request_t* req) {
  const std::string& op = r.o.op;
  if (op == "all_reduce") return hmc_all_reduce(r.comm, send, recv, count, r.dt, r.redop, req);
  if (op == "all_gather") return hmc_all_gather(r.comm, send, recv, count, r.dt, req);
  if (op == "all_to_all") return hmc_all_to_all(r.comm, send, recv, count, r.dt, req);
  if (op == "all_to_allv")
    return hmc_all_to_allv(r.comm, send, counts.data(), displs.data(), recv, counts.data(),
                           displs.data(), r.dt, req);
  if (op == "reduce_scatter")
    return hmc_reduce_scatter(r.comm, send, recv, count, r.dt, r.redop, req);
  return hmc_broadcast(r.comm, recv, count, r.dt, 0, req);
}

hmc_status_t run_one(const Run& r, hmc_request_t* req_storage, uint64_t count,
                     const std::vector<size_t>& counts, const std::vector<size_t>& displs,
                     void* send, void* recv) {
  hmc_status_t st = post(r, count, counts, displs, send, recv, req_storage);
  if (st != HMC_SUCCESS) return st;
  return hmc_request_wait(*req_storage, -1, nullptr);
}

int rank_main(const Options& o, int np_rank) {
  (void)np_rank;
  hmc_context_t ctx;
  hmc_status_t st = hmc_context_create(nullptr, &ctx);
  if (st != HMC_SUCCESS) {
    fprintf(stderr, "hmc-coll-perf: hmc_context_create: %s\n", hmc_last_error());
    return 1;
  }
  hmc_comm_t comm;
  if ((st = hmc_comm_create(ctx, nullptr, &comm)) != HMC_SUCCESS) {
    fprintf(stderr, "hmc-coll-perf: hmc_comm_create: %s: %s\n", hmc_status_string(st),
            hmc_last_error());
    hmc_context_destroy(ctx);
    return 1;
  }
  int rank = 0, n = 1;
  hmc_comm_rank(comm, &rank);
  hmc_comm_size(comm, &n);
  Run r{comm, rank, n, o, HMC_DTYPE_F32, 4, HMC_OP_SUM};
  for (const auto& d : kDtypes)
    if (o.dtype == d.name) r.dt = d.t, r.es = d.size;
  for (const auto& x : kRedops)
    if (o.redop == x.name) r.redop = x.op;
  std::string mem =
      o.mem_by_rank.empty() ? o.mem : o.mem_by_rank[size_t(rank) % o.mem_by_rank.size()];
  bool reduces = o.op == "all_reduce" || o.op == "reduce_scatter";
  double factor = o.op == "all_reduce"  ? 2.0 * (n - 1) / n
                  : o.op == "broadcast" ? 1.0
                                        : double(n - 1) / n;
  if (rank == 0 && !o.json) {
    printf("# hmc-coll-perf: %s, %d ranks, %s, memory %s%s\n", o.op.c_str(), n, o.dtype.c_str(),
           o.mem_by_rank.empty() ? o.mem.c_str() : "by rank",
           getenv("HMC_COLL_ALGO")
               ? (std::string(", HMC_COLL_ALGO=") + getenv("HMC_COLL_ALGO")).c_str()
               : "");
    for (int k = 0; k < n; ++k) {
      hmc_comm_member_info_t m{};
      m.struct_size = sizeof m;
      if (hmc_comm_member_info(comm, k, &m) == HMC_SUCCESS)
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
    // nccl-tests' sizes: the largest buffer of a rank; per-rank blocks where there are n.
    bool blocks = o.op == "all_gather" || o.op == "all_to_all" || o.op == "all_to_allv" ||
                  o.op == "reduce_scatter";
    uint64_t count = bytes / r.es / (blocks ? uint64_t(n) : 1);
    uint64_t total = count * (blocks ? uint64_t(n) : 1);
    uint64_t send_elems = o.op == "all_gather" ? count : total;
    uint64_t recv_elems = o.op == "reduce_scatter" ? count : total;
    std::vector<size_t> counts(static_cast<size_t>(n), count), displs(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) displs[size_t(p)] = size_t(p) * count;
    Buffer send, recv;
    if ((st = send.make(ctx, mem, send_elems * r.es)) != HMC_SUCCESS ||
        (st = recv.make(ctx, mem, recv_elems * r.es)) != HMC_SUCCESS) {
      fprintf(stderr, "hmc-coll-perf: rank %d: allocating on %s: %s\n", rank, mem.c_str(),
              hmc_last_error());
      rc = 1;
      break;
    }
    std::vector<uint8_t> h(std::max(send_elems, recv_elems) * r.es + 1);
    for (uint64_t i = 0; i < send_elems; ++i) store(h.data(), i, value(rank, i), r.dt);
    if (send_elems) hmc_mem_copy(ctx, send.p, h.data(), send_elems * r.es);
    hmc_request_t req;
    for (int i = 0; i < o.warmup && st == HMC_SUCCESS; ++i)
      st = run_one(r, &req, count, counts, displs, send.p, recv.p);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.iters && st == HMC_SUCCESS; ++i)
      st = run_one(r, &req, count, counts, displs, send.p, recv.p);
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        std::max(1, o.iters);
    if (st != HMC_SUCCESS) {
      fprintf(stderr, "hmc-coll-perf: rank %d: %s of %llu bytes: %s: %s\n", rank, o.op.c_str(),
              (unsigned long long)bytes, hmc_status_string(st), hmc_last_error());
      rc = 1;
      break;
    }
    // The slowest rank's time is the collective's.
    double slowest = us;
    if ((st = hmc_all_reduce(comm, &us, &slowest, 1, HMC_DTYPE_F64, HMC_OP_MAX, &req)) ==
        HMC_SUCCESS)
      st = hmc_request_wait(req, -1, nullptr);
    int64_t wrong = -1;
    if (o.check && st == HMC_SUCCESS) {
      // Broadcast: the root's data over every other rank's.
      if (o.op == "broadcast" && rank == 0)
        for (uint64_t i = 0; i < recv_elems; ++i) store(h.data(), i, value(0, i), r.dt);
      if (o.op == "broadcast") {
        if (rank != 0) memset(h.data(), 0, recv_elems * r.es);
        if (recv_elems) hmc_mem_copy(ctx, recv.p, h.data(), recv_elems * r.es);
      }
      st = run_one(r, &req, count, counts, displs, send.p, recv.p);
      if (recv_elems) hmc_mem_copy(ctx, h.data(), recv.p, recv_elems * r.es);
      int64_t bad = 0;
      for (uint64_t i = 0; i < recv_elems; ++i) {
        double want;
        if (o.op == "all_reduce")
          want = reduce_ref(r.redop, n, i);
        else if (o.op == "reduce_scatter")
          want = reduce_ref(r.redop, n, uint64_t(rank) * count + i);
        else if (o.op == "all_gather")
          want = value(int(i / std::max<uint64_t>(count, 1)), i % std::max<uint64_t>(count, 1));
        else if (o.op == "broadcast")
          want = value(0, i);
        else
          want = value(int(i / std::max<uint64_t>(count, 1)),
                       uint64_t(rank) * count + i % std::max<uint64_t>(count, 1));
        bad += load(h.data(), i, r.dt) != want;
      }
      int64_t total_bad = 0;
      if (st == HMC_SUCCESS && (st = hmc_all_reduce(comm, &bad, &total_bad, 1, HMC_DTYPE_I64,
                                                    HMC_OP_SUM, &req)) == HMC_SUCCESS)
        st = hmc_request_wait(req, -1, nullptr);
      wrong = total_bad;
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
            o.op.c_str(), n, (unsigned long long)bytes, (unsigned long long)count, o.dtype.c_str(),
            red, slowest, algbw, algbw * factor, (long long)wrong);
      } else {
        char w[24] = "N/A";
        if (wrong >= 0) snprintf(w, sizeof w, "%lld", (long long)wrong);
        printf(" %11llu %12llu %8s %6s %6s %10.2f %8.3f %8.3f %7s\n", (unsigned long long)bytes,
               (unsigned long long)count, o.dtype.c_str(), red, o.op == "broadcast" ? "0" : "-1",
               slowest, algbw, algbw * factor, w);
      }
      fflush(stdout);
    }
    if (o.factor < 2 && bytes == o.max_bytes) break;
  }
  hmc_comm_destroy(comm);
  hmc_context_destroy(ctx);
  return rc;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
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
      if (std::find_if(std::begin(kOps), std::end(kOps),
                       [&](const char* x) { return o.op == x; }) == std::end(kOps))
        return usage_error("unknown operation '" + o.op + "'");
    } else if (a == "-d" || a == "--datatype") {
      if (!(v = next())) return usage_error("-d needs a name");
      o.dtype = v;
      if (std::none_of(std::begin(kDtypes), std::end(kDtypes),
                       [&](const Dtype& d) { return o.dtype == d.name; }))
        return usage_error("unknown datatype '" + o.dtype + "'");
    } else if (a == "-r" || a == "--redop") {
      if (!(v = next())) return usage_error("-r needs a name");
      o.redop = v;
      if (std::none_of(std::begin(kRedops), std::end(kRedops),
                       [&](const Redop& d) { return o.redop == d.name; }))
        return usage_error("unknown reduction '" + o.redop + "'");
    } else if (a == "-n" || a == "--iters") {
      if (!num(&o.iters) || o.iters < 1) return usage_error("bad -n");
    } else if (a == "-w" || a == "--warmup_iters") {
      if (!num(&o.warmup)) return usage_error("bad -w");
    } else if (a == "-c" || a == "--check") {
      o.check = true;
    } else if (a == "--json") {
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
  if (o.np == 0) return rank_main(o, -1);

  // --np: N local ranks, meeting at a loopback rendezvous this process picks.
  std::string rdv = "tcp://127.0.0.1:" + std::to_string(free_port());
  std::vector<pid_t> pids;
  for (int r = 0; r < o.np; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("hmc-coll-perf: fork");
      return 1;
    }
    if (pid == 0) {
      setenv("HMC_RANK", std::to_string(r).c_str(), 1);
      setenv("HMC_WORLD_SIZE", std::to_string(o.np).c_str(), 1);
      setenv("HMC_RENDEZVOUS", rdv.c_str(), 1);
      _exit(rank_main(o, r));
    }
    pids.push_back(pid);
  }
  int rc = 0;
  for (pid_t p : pids) {
    int status = 0;
    while (waitpid(p, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}
