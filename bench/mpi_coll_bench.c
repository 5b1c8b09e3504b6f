/* mpi-coll-bench: MPI's collectives timed exactly as hmc-coll-perf times hmc's (same options,
 * sizes, iteration scheme and figures), so that bench/coll_compare.sh can put the two side by
 * side. Run it under mpirun; every rank is one MPI process.
 *
 * size: the largest buffer of a rank (nccl-tests' convention): all_reduce and broadcast the
 * whole buffer; all_gather, all_to_all and reduce_scatter n blocks of size / n. time: the
 * slowest rank's average over the timed iterations, which follow the warm-up ones back to back
 * with no barrier between them (as in hmc-coll-perf). algbw = size / time; busbw = algbw times
 * 2(n-1)/n (all_reduce), (n-1)/n (all_gather, reduce_scatter, all_to_all), 1 (broadcast). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* kUsage =
    "usage: mpirun -np N mpi-coll-bench [options]\n"
    "  -b, --minbytes SIZE     smallest size (default 8)\n"
    "  -e, --maxbytes SIZE     largest size (default 32M); sizes take K, M, G\n"
    "  -f, --stepfactor N      multiply the size by N between rows (default 2)\n"
    "  -o, --op NAME           all_reduce (default), all_gather, all_to_all, reduce_scatter,\n"
    "                          broadcast\n"
    "  -d, --datatype NAME     float (default), double, int8, uint8, int32, int64\n"
    "  -r, --redop NAME        sum (default), prod, min, max\n"
    "  -n, --iters N           timed iterations per size (default 20)\n"
    "  -w, --warmup_iters N    untimed iterations first (default 5)\n"
    "      --json              one JSON object per size instead of the table\n"
    "  -h, --help              this text\n"
    "Figures as hmc-coll-perf's (nccl-tests' algbw and busbw).\n";

struct named_type {
  const char* name;
  MPI_Datatype t;
  size_t size;
};

static int parse_size(const char* s, uint64_t* out) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return 0;
  uint64_t m = 0;
  if (!*end)
    m = 1;
  else if (!strcmp(end, "K") || !strcmp(end, "k"))
    m = 1u << 10;
  else if (!strcmp(end, "M") || !strcmp(end, "m"))
    m = 1u << 20;
  else if (!strcmp(end, "G") || !strcmp(end, "g"))
    m = 1u << 30;
  if (!m) return 0;
  *out = v * m;
  return 1;
}

static int run(const char* op, void* send, void* recv, uint64_t count, MPI_Datatype t,
               MPI_Op redop) {
  int c = (int)count;
  if (!strcmp(op, "all_reduce")) return MPI_Allreduce(send, recv, c, t, redop, MPI_COMM_WORLD);
  if (!strcmp(op, "all_gather")) return MPI_Allgather(send, c, t, recv, c, t, MPI_COMM_WORLD);
  if (!strcmp(op, "all_to_all")) return MPI_Alltoall(send, c, t, recv, c, t, MPI_COMM_WORLD);
  if (!strcmp(op, "reduce_scatter"))
    return MPI_Reduce_scatter_block(send, recv, c, t, redop, MPI_COMM_WORLD);
  return MPI_Bcast(recv, c, t, 0, MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  uint64_t min_bytes = 8, max_bytes = 32u << 20, factor = 2;
  const char *op = "all_reduce", *dtype = "float", *redop_name = "sum";
  int iters = 20, warmup = 5, json = 0;
  static const char* ops[] = {"all_reduce", "all_gather", "all_to_all", "reduce_scatter",
                              "broadcast"};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(kUsage, stdout);
      return 0;
    } else if (!strcmp(a, "--json")) {
      json = 1;
      continue;
    } else if (!v) {
      bad = 1;
    } else if (!strcmp(a, "-b") || !strcmp(a, "--minbytes")) {
      bad = !parse_size(v, &min_bytes);
    } else if (!strcmp(a, "-e") || !strcmp(a, "--maxbytes")) {
      bad = !parse_size(v, &max_bytes);
    } else if (!strcmp(a, "-f") || !strcmp(a, "--stepfactor")) {
      bad = !parse_size(v, &factor) || factor < 1;
    } else if (!strcmp(a, "-o") || !strcmp(a, "--op")) {
      op = v;
      bad = 1;
      for (size_t k = 0; k < sizeof ops / sizeof *ops; ++k)
        if (!strcmp(op, ops[k])) bad = 0;
    } else if (!strcmp(a, "-d") || !strcmp(a, "--datatype")) {
      dtype = v;
    } else if (!strcmp(a, "-r") || !strcmp(a, "--redop")) {
      redop_name = v;
    } else if (!strcmp(a, "-n") || !strcmp(a, "--iters")) {
      bad = (iters = atoi(v)) < 1;
    } else if (!strcmp(a, "-w") || !strcmp(a, "--warmup_iters")) {
      bad = (warmup = atoi(v)) < 0;
    } else {
      bad = 1;
    }
    if (bad) {
      fprintf(stderr, "mpi-coll-bench: bad or unknown option '%s'\n%s", a, kUsage);
      return 2;
    }
    ++i;
  }
  const struct named_type types[] = {{"float", MPI_FLOAT, 4},   {"double", MPI_DOUBLE, 8},
                                     {"int8", MPI_INT8_T, 1},   {"uint8", MPI_UINT8_T, 1},
                                     {"int32", MPI_INT32_T, 4}, {"int64", MPI_INT64_T, 8}};
  const struct named_type* type = NULL;
  for (size_t k = 0; k < sizeof types / sizeof *types; ++k)
    if (!strcmp(dtype, types[k].name)) type = &types[k];
  MPI_Op redop = MPI_OP_NULL;
  if (!strcmp(redop_name, "sum"))
    redop = MPI_SUM;
  else if (!strcmp(redop_name, "prod"))
    redop = MPI_PROD;
  else if (!strcmp(redop_name, "min"))
    redop = MPI_MIN;
  else if (!strcmp(redop_name, "max"))
    redop = MPI_MAX;
  if (!type || redop == MPI_OP_NULL || min_bytes > max_bytes ||
      (factor == 1 && min_bytes != max_bytes)) {
    fprintf(stderr, "mpi-coll-bench: bad datatype, reduction or sizes\n%s", kUsage);
    return 2;
  }

  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int reduces = !strcmp(op, "all_reduce") || !strcmp(op, "reduce_scatter");
  int blocks =
      !strcmp(op, "all_gather") || !strcmp(op, "all_to_all") || !strcmp(op, "reduce_scatter");
  double busf = !strcmp(op, "all_reduce")  ? 2.0 * (n - 1) / n
                : !strcmp(op, "broadcast") ? 1.0
                                           : (double)(n - 1) / n;
  if (rank == 0 && !json) {
    printf("# mpi-coll-bench: %s, %d ranks, %s\n#\n", op, n, dtype);
    printf("#%11s %12s %8s %6s %6s %10s %8s %8s\n", "size", "count", "type", "redop", "root",
           "time", "algbw", "busbw");
    printf("#%11s %12s %8s %6s %6s %10s %8s %8s\n", "(B)", "(elements)", "", "", "", "(us)",
           "(GB/s)", "(GB/s)");
  }
  int rc = 0;
  for (uint64_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
    uint64_t count = bytes / type->size / (blocks ? (uint64_t)n : 1);
    uint64_t total = count * (blocks ? (uint64_t)n : 1);
    uint64_t send_elems = !strcmp(op, "all_gather") ? count : total;
    uint64_t recv_elems = !strcmp(op, "reduce_scatter") ? count : total;
    char* send = malloc(send_elems * type->size + 1);
    char* recv = malloc(recv_elems * type->size + 1);
    if (!send || !recv) {
      fprintf(stderr, "mpi-coll-bench: rank %d: out of memory at %llu bytes\n", rank,
              (unsigned long long)bytes);
      rc = 1;
      break;
    }
    /* Small integers, as hmc-coll-perf's, so that no reduction meets a denormal or a NaN. */
    for (uint64_t i = 0; i < send_elems * type->size; ++i) send[i] = (char)(1 + i % 3);
    memset(recv, 0, recv_elems * type->size);
    int err = MPI_SUCCESS;
    for (int i = 0; i < warmup && err == MPI_SUCCESS; ++i)
      err = run(op, send, recv, count, type->t, redop);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters && err == MPI_SUCCESS; ++i)
      err = run(op, send, recv, count, type->t, redop);
    double us = (MPI_Wtime() - t0) * 1e6 / iters, slowest = us;
    free(send);
    free(recv);
    if (err != MPI_SUCCESS) {
      fprintf(stderr, "mpi-coll-bench: rank %d: %s of %llu bytes failed (%d)\n", rank, op,
              (unsigned long long)bytes, err);
      rc = 1;
      break;
    }
    MPI_Allreduce(&us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double algbw = slowest > 0 ? (double)bytes / slowest / 1e3 : 0; /* bytes/us -> GB/s */
    if (rank == 0) {
      const char* red = reduces ? redop_name : "none";
      if (json)
        printf(
            "{\"op\":\"%s\",\"ranks\":%d,\"size\":%llu,\"count\":%llu,\"type\":\"%s\","
            "\"redop\":\"%s\",\"time_us\":%.2f,\"algbw_GBps\":%.3f,\"busbw_GBps\":%.3f}\n",
            op, n, (unsigned long long)bytes, (unsigned long long)count, dtype, red, slowest, algbw,
            algbw * busf);
      else
        printf(" %11llu %12llu %8s %6s %6s %10.2f %8.3f %8.3f\n", (unsigned long long)bytes,
               (unsigned long long)count, dtype, red, !strcmp(op, "broadcast") ? "0" : "-1",
               slowest, algbw, algbw * busf);
      fflush(stdout);
    }
    if (factor < 2) break;
  }
  MPI_Finalize();
  return rc;
}
