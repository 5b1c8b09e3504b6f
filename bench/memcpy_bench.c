/* memcpy-bench: one core's memcpy of one buffer size, the single-copy limit a transfer within a
 * host is measured against (bench/coll_compare.sh puts hoststage shared memory beside it).
 *
 *   memcpy-bench [--size N] [--rounds R] [--json]
 *
 * Copies N bytes (K/M/G suffixes; default 4M) between two buffers touched beforehand, as many
 * times as take about 50 ms per round, R rounds (default 5); prints the median round's rate and
 * the best, in GB/s (10^9 bytes per second). Exit status 0, 2 for bad arguments. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int parse_size(const char* s, uint64_t* out) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return 0;
  uint64_t m = 1;
  if (*end == 'K' || *end == 'k')
    m = 1ull << 10;
  else if (*end == 'M' || *end == 'm')
    m = 1ull << 20;
  else if (*end == 'G' || *end == 'g')
    m = 1ull << 30;
  else if (*end != '\0')
    return 0;
  if (*end != '\0' && end[1] != '\0') return 0;
  *out = (uint64_t)v * m;
  return *out > 0;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  uint64_t size = 4u << 20;
  int rounds = 5, json = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--size") && i + 1 < argc) {
      if (!parse_size(argv[++i], &size)) {
        fprintf(stderr, "memcpy-bench: bad --size '%s'\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
      rounds = atoi(argv[++i]);
      if (rounds < 1 || rounds > 1000) {
        fprintf(stderr, "memcpy-bench: --rounds 1 to 1000\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf(
          "usage: memcpy-bench [--size N] [--rounds R] [--json]\n"
          "one core's memcpy rate of N bytes (default 4M), median and best of R rounds (5)\n");
      return 0;
    } else if (!strcmp(argv[i], "--version")) {
      printf("memcpy-bench %s\n", HMC_TOOLS_VERSION);
      return 0;
    } else {
      fprintf(stderr, "memcpy-bench: unknown argument '%s' (see --help)\n", argv[i]);
      return 2;
    }
  }
  char* src = malloc(size);
  char* dst = malloc(size);
  if (!src || !dst) {
    fprintf(stderr, "memcpy-bench: cannot allocate 2 x %llu bytes\n", (unsigned long long)size);
    return 2;
  }
  memset(src, 1, size);
  memset(dst, 2, size);
  double t0 = now_s();
  memcpy(dst, src, size);
  double one = now_s() - t0;
  long iters = one > 0 ? (long)(0.05 / one) : 1000;
  if (iters < 1) iters = 1;
  if (iters > 100000) iters = 100000;
  double* rate = malloc(sizeof(double) * (size_t)rounds);
  for (int r = 0; r < rounds; ++r) {
    t0 = now_s();
    for (long k = 0; k < iters; ++k) {
      memcpy(dst, src, size);
      __asm__ __volatile__("" : : "r"(dst) : "memory"); /* keep every copy */
    }
    rate[r] = (double)size * (double)iters / (now_s() - t0) / 1e9;
  }
  qsort(rate, (size_t)rounds, sizeof(double), cmp);
  double median = rate[rounds / 2], best = rate[rounds - 1];
  if (json)
    printf("{\"size\":%llu,\"GBps\":%.3f,\"best_GBps\":%.3f,\"rounds\":%d}\n",
           (unsigned long long)size, median, best, rounds);
  else
    printf("memcpy of %llu bytes: %.3f GB/s (median of %d rounds), best %.3f GB/s\n",
           (unsigned long long)size, median, rounds, best);
  free(rate);
  free(src);
  free(dst);
  return 0;
}
