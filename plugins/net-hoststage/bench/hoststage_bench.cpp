// Throwaway-style benchmark for the hoststage plugin (not a test; not in CTest):
//   hoststage-bench <tcp|shm> lat [size=8] [iters=20000]
//   hoststage-bench <tcp|shm> bw  [size=4194304] [iters=300] [window=16]
// Two processes (fork) on this host. HMC_* variables in the environment are passed to the
// plugin as its configuration (e.g. HMC_HOSTSTAGE_STREAMS=4). Prints one line:
//   "<dev> lat <size> <usec one-way>"  or  "<dev> bw <size> <MB/s>"   (MB = 10^6 bytes)
// Latency is half the ping-pong round trip, as ucx_perftest tag_lat reports it (average over
// the measured iterations, plus the median, after iters/2 warm-up iterations).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "hoststage/harness.h"

extern char** environ;

namespace {

using hs_test::mono_ns;
using hs_test::Side;

bool wait_ok(Side& s, hmc_net_request_t* r) {
  hmc_plugin_status_t st = s.wait(r, nullptr, 60);
  if (st != HMC_PLUGIN_SUCCESS) std::fprintf(stderr, "request ended with %d\n", st);
  return st == HMC_PLUGIN_SUCCESS;
}

double g_median_usec = 0;

// Returns the average one-way microseconds (initiator) or -1; the median goes to g_median_usec.
double latency(Side& s, bool initiator, size_t size, int iters) {
  s.set_spin_only(true);
  std::vector<uint8_t> sbuf(size + 1, 1), rbuf(size + 1);
  const int warmup = iters / 2 + 100;
  std::vector<uint64_t> rtt;
  rtt.reserve(static_cast<size_t>(iters));
  if (!s.signal() || !s.await()) return -1;
  uint64_t t0 = 0;
  hmc_net_request_t* r = s.irecv(rbuf.data(), size, initiator ? 1 : 0);
  for (int i = 0; i < warmup + iters; ++i) {
    if (i == warmup) t0 = mono_ns();
    if (initiator) {
      uint64_t a = mono_ns();
      if (!wait_ok(s, s.isend(sbuf.data(), size, 0))) return -1;
      if (!wait_ok(s, r)) return -1;
      if (i >= warmup) rtt.push_back(mono_ns() - a);
      r = s.irecv(rbuf.data(), size, 1);
    } else {
      if (!wait_ok(s, r)) return -1;
      r = s.irecv(rbuf.data(), size, 0);
      if (!wait_ok(s, s.isend(sbuf.data(), size, 1))) return -1;
    }
  }
  double total = static_cast<double>(mono_ns() - t0);
  if (!rtt.empty()) {
    std::sort(rtt.begin(), rtt.end());
    g_median_usec = static_cast<double>(rtt[rtt.size() / 2]) / 2e3;
  }
  s.t()->cancel(r);
  s.wait(r, nullptr, 1);
  return total / 1e3 / (2.0 * iters);
}

// Returns MB/s at the sender, or -1.
double bandwidth(Side& s, bool sender, size_t size, int iters, int window) {
  s.set_spin_only(true);
  std::vector<uint8_t> buf(size);
  std::memset(buf.data(), 7, size);  // touch the pages
  if (!s.signal() || !s.await()) return -1;
  const int warmup = iters / 10 + 2;
  double result = 0;
  for (int phase = 0; phase < 2; ++phase) {
    int n = phase == 0 ? warmup : iters;
    uint64_t t0 = mono_ns();
    std::vector<hmc_net_request_t*> inflight;
    int posted = 0, done = 0;
    while (done < n) {
      while (posted < n && static_cast<int>(inflight.size()) < window) {
        hmc_net_request_t* r = sender ? s.isend(buf.data(), size, 5) : s.irecv(buf.data(), size, 5);
        if (r == nullptr) return -1;
        inflight.push_back(r);
        ++posted;
      }
      for (size_t i = 0; i < inflight.size();) {
        int d = 0;
        hmc_plugin_status_t st = s.t()->test(inflight[i], &d, nullptr);
        if (d) {
          if (st != HMC_PLUGIN_SUCCESS) return -1;
          inflight.erase(inflight.begin() + static_cast<long>(i));
          ++done;
        } else {
          ++i;
        }
      }
    }
    // The receiver acknowledges the last byte so the sender's clock covers delivery.
    uint8_t ack = 0;
    if (sender) {
      if (!wait_ok(s, s.irecv(&ack, 1, 6))) return -1;
    } else {
      if (!wait_ok(s, s.isend(&ack, 1, 6))) return -1;
    }
    double secs = static_cast<double>(mono_ns() - t0) / 1e9;
    result = static_cast<double>(size) * n / secs / 1e6;
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <tcp|shm> <lat|bw> [size] [iters] [window]\n", argv[0]);
    return 2;
  }
  int dev = std::strcmp(argv[1], "shm") == 0 ? 1 : 0;
  bool lat = std::strcmp(argv[2], "lat") == 0;
  size_t size = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : (lat ? 8 : 4u << 20);
  int iters = argc > 4 ? std::atoi(argv[4]) : (lat ? 20000 : 300);
  int window = argc > 5 ? std::atoi(argv[5]) : 16;
  std::map<std::string, std::string> cfg;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (kv.rfind("HMC_", 0) == 0 && eq != std::string::npos)
      cfg[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  double child_result = 0;
  double parent_result = 0;
  hs_test::PairResult r = hs_test::run_pair(
      cfg, dev,
      [&](Side& s) {
        parent_result =
            lat ? latency(s, true, size, iters) : bandwidth(s, true, size, iters, window);
      },
      [&](Side& s) {
        child_result =
            lat ? latency(s, false, size, iters) : bandwidth(s, false, size, iters, window);
      },
      [&] { return child_result < 0 ? 1 : 0; }, 300);
  if (!r.parent_setup_error.empty() || r.child_status != 0 || parent_result < 0) {
    std::fprintf(stderr, "benchmark failed: %s (child status %d)\n", r.parent_setup_error.c_str(),
                 r.child_status);
    return 1;
  }
  if (lat)
    std::printf("%s lat %zu %.3f usec (average; median %.3f)\n", dev ? "shm" : "tcp", size,
                parent_result, g_median_usec);
  else
    std::printf("%s bw %zu %.3f MB/s\n", dev ? "shm" : "tcp", size, parent_result);
  return 0;
}
