/*
 * hmc-pingpong-trace: an LD_PRELOAD probe for small-message ping-pongs over UCX's tcp transport
 * (hmc-perf --test lat, ucx-tag-stream --pingpong, ucx_perftest -t tag_lat). It answers where a
 * process spends the time between a message arriving and its answer leaving, without a PMU:
 *
 *   turnaround   from the return of recv() that brought a small message (under 200 bytes) to
 *                the entry of the next send() of a small message: the process's own work on
 *                the critical path of a round trip (UCX's receive, the library's completion,
 *                the application, the library's send).
 *   splits       the same interval cut at the return of ucp_worker_progress() and the entry of
 *                ucp_tag_send_nbx() (and, in hmc, at the return of hmc_request_wait() and the
 *                entry of hmc_send()), averaged.
 *   polls        epoll_wait() calls inside turnarounds (an extra one costs a system call on the
 *                critical path), and the time between an empty epoll_wait() and the next one
 *                (the user-space cost of one idle turn of the wait loop).
 *
 * Each process prints its figures to stderr every PINGPONG_TRACE_EVERY turnarounds (default 10000:
 * a child that ends with _exit() still reports). With PINGPONG_TRACE_DIR set, it also writes the
 * TSC value of every small send and receive to PINGPONG_TRACE_DIR/trace.<pid> when it reports;
 * bench/pingpong_trace_pair.py pairs two such files into the delivery time (one side's send()
 * to the other side's recv() return) and turnaround per side.
 *
 * Timestamps come from the TSC, calibrated against CLOCK_MONOTONIC when the probe loads (a few
 * nanoseconds per stamp; each stamp still adds to what it measures, the same for every program
 * traced). Single-threaded ping-pongs only: the probe keeps one state per process.
 *
 *   LD_PRELOAD=build/lib/hmc-pingpong-trace.so build/bin/hmc-perf --loopback --test lat ...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SMALL 200        /* bytes: what counts as a ping-pong message */
#define MAX_EVENTS 65536 /* sends and receives kept for PINGPONG_TRACE_DIR, per kind */

static double g_ns_per_tick = 1.0;

static inline uint64_t ticks(void) {
  unsigned lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return ((uint64_t)hi << 32) | lo;
}

static uint64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

__attribute__((constructor)) static void calibrate(void) {
  uint64_t n0 = mono_ns(), t0 = ticks();
  struct timespec d = {0, 20 * 1000 * 1000};
  nanosleep(&d, NULL);
  uint64_t n1 = mono_ns(), t1 = ticks();
  if (t1 > t0) g_ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
}

static void* next_symbol(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == NULL && strncmp(name, "ucp_", 4) == 0) {
    /* A library that dlopens UCX with RTLD_LOCAL (hmc's net-ucx plugin): not in the global
     * scope, but loaded by the time its functions are called. */
    void* h = dlopen("libucp.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (h != NULL) f = dlsym(h, name);
  }
  if (f == NULL) {
    fprintf(stderr, "hmc-pingpong-trace: %s not found\n", name);
    abort();
  }
  return f;
}

/* One turnaround in progress: stamps taken since the recv() that started it (0: not seen). */
static struct {
  int armed;
  uint64_t rx, progress, ucp_send, wait_ret, hmc_send;
  int polls;
} cur;

static uint64_t every = 10000;
static uint64_t n_turn;
static uint64_t* turns; /* ticks, for the median */
static size_t turns_cap;
static double sum_turn, sum_progress, sum_ucp_send, sum_tail, n_split;
static double sum_wait, sum_app, sum_hmc_send, n_hmc;
static uint64_t n_polls_between;
static uint64_t last_empty_exit, sum_gap, n_gap;
static uint64_t tr_send[MAX_EVENTS], tr_recv[MAX_EVENTS];
static size_t n_send, n_recv;

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static void write_trace(void) {
  const char* dir = getenv("PINGPONG_TRACE_DIR");
  if (dir == NULL || *dir == 0) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/trace.%d", dir, (int)getpid());
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "hmc-pingpong-trace: cannot write %s\n", path);
    return;
  }
  /* Raw TSC values: each process calibrates its own factor, and the products would differ by
   * more than a round trip at today's TSC values; the pairing uses one factor for both. */
  fprintf(f, "K %.9f\n", g_ns_per_tick);
  for (size_t i = 0; i < n_send; ++i) fprintf(f, "S %llu\n", (unsigned long long)tr_send[i]);
  for (size_t i = 0; i < n_recv; ++i) fprintf(f, "R %llu\n", (unsigned long long)tr_recv[i]);
  fclose(f);
}

static void report(void) {
  if (n_turn == 0) return;
  size_t n = n_turn < turns_cap ? n_turn : turns_cap;
  uint64_t* sorted = malloc(n * sizeof *sorted);
  if (sorted == NULL) return;
  memcpy(sorted, turns, n * sizeof *sorted);
  qsort(sorted, n, sizeof *sorted, cmp_u64);
  double k = g_ns_per_tick;
  fprintf(stderr,
          "[pingpong-trace %d] %llu turnarounds: median %.0f ns, mean %.0f ns, p10 %.0f, p90 %.0f; "
          "epoll_wait per turnaround %.2f; idle turn in user space %.0f ns\n",
          (int)getpid(), (unsigned long long)n_turn, sorted[n / 2] * k, sum_turn / n_turn * k,
          sorted[n / 10] * k, sorted[n * 9 / 10] * k, (double)n_polls_between / n_turn,
          n_gap ? (double)sum_gap / n_gap * k : 0.0);
  if (n_split > 0)
    fprintf(
        stderr,
        "[pingpong-trace %d]   recv -> ucp_worker_progress returns %.0f ns, -> ucp_tag_send_nbx "
        "%.0f ns, -> send %.0f ns (mean of %.0f)\n",
        (int)getpid(), sum_progress / n_split * k, sum_ucp_send / n_split * k,
        sum_tail / n_split * k, n_split);
  if (n_hmc > 0)
    fprintf(stderr,
            "[pingpong-trace %d]   recv -> hmc_request_wait returns %.0f ns, -> hmc_send %.0f ns "
            "(application), -> send %.0f ns (mean of %.0f)\n",
            (int)getpid(), sum_wait / n_hmc * k, sum_app / n_hmc * k, sum_hmc_send / n_hmc * k,
            n_hmc);
  free(sorted);
  write_trace();
}

__attribute__((constructor)) static void setup(void) {
  const char* e = getenv("PINGPONG_TRACE_EVERY");
  if (e != NULL && atoll(e) > 0) every = (uint64_t)atoll(e);
  turns_cap = every < 1000000 ? (size_t)every : 1000000;
  turns = calloc(turns_cap, sizeof *turns);
}

static void end_turnaround(uint64_t now) {
  uint64_t t = now - cur.rx;
  if (turns != NULL) turns[n_turn % turns_cap] = t;
  ++n_turn;
  sum_turn += (double)t;
  n_polls_between += (uint64_t)cur.polls;
  if (cur.progress && cur.ucp_send && cur.ucp_send >= cur.progress) {
    sum_progress += (double)(cur.progress - cur.rx);
    sum_ucp_send += (double)(cur.ucp_send - cur.progress);
    sum_tail += (double)(now - cur.ucp_send);
    n_split += 1;
  }
  if (cur.wait_ret && cur.hmc_send && cur.hmc_send >= cur.wait_ret) {
    sum_wait += (double)(cur.wait_ret - cur.rx);
    sum_app += (double)(cur.hmc_send - cur.wait_ret);
    sum_hmc_send += (double)(now - cur.hmc_send);
    n_hmc += 1;
  }
  memset(&cur, 0, sizeof cur);
  if (n_turn % every == 0) report();
}

ssize_t recv(int fd, void* buf, size_t len, int flags) {
  static ssize_t (*real)(int, void*, size_t, int);
  if (real == NULL) real = (ssize_t(*)(int, void*, size_t, int))next_symbol("recv");
  ssize_t r = real(fd, buf, len, flags);
  if (r > 0 && r < SMALL) {
    memset(&cur, 0, sizeof cur);
    cur.armed = 1;
    cur.rx = ticks();
    if (n_recv < MAX_EVENTS) tr_recv[n_recv++] = cur.rx;
  }
  return r;
}

ssize_t send(int fd, const void* buf, size_t len, int flags) {
  static ssize_t (*real)(int, const void*, size_t, int);
  if (real == NULL) real = (ssize_t(*)(int, const void*, size_t, int))next_symbol("send");
  if (len < SMALL) {
    uint64_t now = ticks();
    if (n_send < MAX_EVENTS) tr_send[n_send++] = now;
    if (cur.armed) end_turnaround(now);
  }
  return real(fd, buf, len, flags);
}

int epoll_wait(int epfd, struct epoll_event* ev, int max, int timeout) {
  static int (*real)(int, struct epoll_event*, int, int);
  if (real == NULL) real = (int (*)(int, struct epoll_event*, int, int))next_symbol("epoll_wait");
  uint64_t t0 = ticks();
  if (timeout == 0 && last_empty_exit != 0) {
    sum_gap += t0 - last_empty_exit;
    ++n_gap;
  }
  int r = real(epfd, ev, max, timeout);
  last_empty_exit = (timeout == 0 && r == 0) ? ticks() : 0;
  if (cur.armed) ++cur.polls;
  return r;
}

unsigned ucp_worker_progress(void* worker) {
  static unsigned (*real)(void*);
  if (real == NULL) real = (unsigned (*)(void*))next_symbol("ucp_worker_progress");
  unsigned r = real(worker);
  if (cur.armed && cur.progress == 0) cur.progress = ticks();
  return r;
}

void* ucp_tag_send_nbx(void* ep, const void* buf, size_t count, uint64_t tag, const void* param) {
  static void* (*real)(void*, const void*, size_t, uint64_t, const void*);
  if (real == NULL)
    real = (void* (*)(void*, const void*, size_t, uint64_t, const void*))next_symbol(
        "ucp_tag_send_nbx");
  if (cur.armed && cur.ucp_send == 0) cur.ucp_send = ticks();
  return real(ep, buf, count, tag, param);
}

/* hmc's C API (hmc_status_t is an int-sized enum; requests and peers are pointers). */
int hmc_request_wait(void* req, int timeout_ms, size_t* bytes) {
  static int (*real)(void*, int, size_t*);
  if (real == NULL) real = (int (*)(void*, int, size_t*))next_symbol("hmc_request_wait");
  int r = real(req, timeout_ms, bytes);
  if (cur.armed && cur.wait_ret == 0) cur.wait_ret = ticks();
  return r;
}

int hmc_send(void* peer, const void* buf, size_t size, uint64_t tag, void** req) {
  static int (*real)(void*, const void*, size_t, uint64_t, void**);
  if (real == NULL)
    real = (int (*)(void*, const void*, size_t, uint64_t, void**))next_symbol("hmc_send");
  if (cur.armed && cur.wait_ret != 0 && cur.hmc_send == 0) cur.hmc_send = ticks();
  return real(peer, buf, size, tag, req);
}
