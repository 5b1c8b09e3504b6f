// xfer-list-bench: what a transfer list (hmc_xfer_prepare/post) costs against plain one-sided
// transfers on the same path, measured side by side in one run (issue: a KV transfer of a
// thousand blocks must not pay a request per block).
//
//   xfer-list-bench [--op get|put] [--blocks N] [--block-size S] [--reps R]
//                   [--mem DEV] [--peer-mem DEV]
//
// A child process registers N * S bytes (on --peer-mem) and the parent moves them (from or into
// --mem) as: one contiguous transfer; one list of N blocks of S bytes in a pair-swapped order (no
// two neighbours in the list are adjacent, so nothing merges); and, for the per-block CPU cost,
// a list of N blocks of 64 bytes against N separate 64-byte requests. Each case runs R times,
// interleaved; medians are printed. The path is hmc's choice (HMC_PATH, HMC_NET_PLUGINS).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <hmc/hmc.hpp>
#include <string>
#include <vector>

#include "tool_version.h"

namespace {

const char* kUsage =
    R"(usage: xfer-list-bench [--op get|put] [--blocks N] [--block-size S] [--reps R]
                       [--mem DEV] [--peer-mem DEV]

Compares a transfer list of N blocks with one contiguous transfer of the same bytes and with N
separate requests, on the path hmc chooses between this process and a child it starts.

  --op get|put     read the child's memory or write it              [get]
  --blocks N       blocks per list                                   [1024]
  --block-size S   bytes per block (K/M suffixes)                    [16K]
  --reps R         runs of each case (medians are printed)           [10]
  --mem DEV        this side's memory ("host", "cuda:0", ...)        [host]
  --peer-mem DEV   the child's memory                                [host]
  --help           this text
)";

constexpr uint64_t kTagDesc = 1, kTagDone = 2;
constexpr size_t kSmall = 64;

size_t parse_size(const std::string& s) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  std::string unit = end ? end : "";
  if (unit == "K" || unit == "k")
    v <<= 10;
  else if (unit == "M" || unit == "m")
    v <<= 20;
  else if (!unit.empty() || s.empty())
    throw std::runtime_error("bad size '" + s + "'");
  return static_cast<size_t>(v);
}

struct Options {
  bool put = false;
  size_t blocks = 1024, block = 16 << 10;
  int reps = 10;
  std::string mem = "host", peer_mem = "host";
};

double seconds(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The child: registers the area, hands its descriptor over, waits for the parent to finish.
int run_target(const Options& o, int pipe_fd) {
  hmc::Context ctx;
  size_t area = o.blocks * o.block;
  hmc::Memory mem = ctx.alloc(o.peer_mem, area);
  hmc::Region region =
      ctx.register_memory(mem.data(), area, HMC_ACCESS_REMOTE_READ | HMC_ACCESS_REMOTE_WRITE);
  std::vector<uint8_t> addr = ctx.address();
  uint32_t n = static_cast<uint32_t>(addr.size());
  if (write(pipe_fd, &n, sizeof n) != sizeof n || write(pipe_fd, addr.data(), n) != ssize_t(n))
    return 1;
  close(pipe_fd);
  hmc::Peer peer = ctx.accept(30000);
  std::vector<uint8_t> desc = region.pack();
  peer.send(desc.data(), desc.size(), kTagDesc).wait();
  uint64_t done = 0;
  peer.recv(&done, sizeof done, kTagDone).wait(600000);
  return 0;
}

// Blocks of `size` bytes `stride` apart, listed pair-swapped (1, 0, 3, 2, ...): positions are
// kept, but no two list neighbours are adjacent.
std::vector<hmc_xfer_desc_t> swapped_blocks(size_t n, size_t size, size_t stride) {
  std::vector<hmc_xfer_desc_t> v;
  for (size_t i = 0; i < n; ++i) {
    size_t b = (i % 2 == 0) ? std::min(i + 1, n - 1) : i - 1;
    if (i + 1 == n && n % 2 == 1) b = i;
    v.push_back({b * stride, b * stride, size});
  }
  return v;
}

int run(const Options& o) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    try {
      _exit(run_target(o, fds[1]));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "xfer-list-bench (child): %s\n", e.what());
      _exit(1);
    }
  }
  close(fds[1]);
  uint32_t n = 0;
  std::vector<uint8_t> addr;
  if (read(fds[0], &n, sizeof n) == sizeof n && n <= HMC_ADDRESS_MAX) {
    addr.resize(n);
    if (read(fds[0], addr.data(), n) != ssize_t(n)) addr.clear();
  }
  close(fds[0]);
  if (addr.empty()) throw std::runtime_error("the child did not start (its message is above)");

  const size_t area = o.blocks * o.block;
  int status = 0;
  {
    hmc::Context ctx;
    hmc::Peer peer = ctx.connect(addr, 30000);
    std::vector<uint8_t> desc(4096);
    desc.resize(peer.recv(desc.data(), desc.size(), kTagDesc).wait(30000));
    hmc::Remote remote = peer.import_remote(desc.data(), desc.size());
    hmc::Memory mem = ctx.alloc(o.mem, area);
    hmc::Region local = ctx.register_memory(mem.data(), area, 0);
    auto* base = static_cast<uint8_t*>(mem.data());
    const hmc_xfer_op_t op = o.put ? HMC_XFER_WRITE : HMC_XFER_READ;

    hmc::XferList whole(local, remote, op, {{0, 0, area}});
    hmc::XferList blocks(local, remote, op, swapped_blocks(o.blocks, o.block, o.block));
    hmc::XferList small(local, remote, op, swapped_blocks(o.blocks, kSmall, o.block));
    auto one = [&](uint64_t off, size_t size) {
      return o.put ? peer.put(base + off, size, remote, off)
                   : peer.get(base + off, size, remote, off);
    };
    std::vector<double> t_plain, t_whole, t_blocks, t_small, t_separate;
    std::vector<hmc::Request> reqs(o.blocks);
    std::fprintf(stderr, "xfer-list-bench: path %s, %d runs of each case\n", peer.info().path,
                 o.reps);
    for (int r = 0; r <= o.reps; ++r) {  // run 0 warms up and is not counted
      double a = seconds([&] { one(0, area).wait(); });
      double b = seconds([&] { whole.post().wait(); });
      double c = seconds([&] { blocks.post().wait(); });
      double d = seconds([&] { small.post().wait(); });
      double e = seconds([&] {
        for (size_t i = 0; i < o.blocks; ++i) reqs[i] = one(i * o.block, kSmall);
        for (auto& q : reqs) q.wait();
      });
      if (r == 0) continue;
      t_plain.push_back(a);
      t_whole.push_back(b);
      t_blocks.push_back(c);
      t_small.push_back(d);
      t_separate.push_back(e);
    }
    auto gbps = [&](double s) { return double(area) / s / 1e9; };
    const char* verb = o.put ? "put" : "get";
    std::printf(
        "# xfer-list-bench: op %s, %zu blocks of %zu B (%zu B), mem %s <- peer %s, path %s\n", verb,
        o.blocks, o.block, area, o.mem.c_str(), o.peer_mem.c_str(), peer.info().path);
    std::printf("%-44s %12s %10s\n", "case (median of runs)", "time (us)", "GB/s");
    std::printf("%-44s %12.1f %10.3f\n",
                (std::string("one hmc_") + verb + " of the whole area").c_str(),
                median(t_plain) * 1e6, gbps(median(t_plain)));
    std::printf("%-44s %12.1f %10.3f\n", "list of 1 range (the whole area)", median(t_whole) * 1e6,
                gbps(median(t_whole)));
    std::printf("%-44s %12.1f %10.3f\n", "list of N blocks, pair-swapped", median(t_blocks) * 1e6,
                gbps(median(t_blocks)));
    std::printf("ratio list of N blocks / one hmc_%s: %.3f (bandwidth)\n", verb,
                median(t_plain) / median(t_blocks));
    std::printf("per block, N blocks of %zu B: list %.0f ns, separate requests %.0f ns\n", kSmall,
                median(t_small) * 1e9 / double(o.blocks),
                median(t_separate) * 1e9 / double(o.blocks));
    uint64_t done = 1;
    peer.send(&done, sizeof done, kTagDone).wait();
  }
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (hmc_tools::version_asked(argc, argv))
    return hmc_tools::print_version("xfer-list-bench", hmc_version());
  Options o;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
        return argv[++i];
      };
      if (a == "--help" || a == "-h") {
        std::fputs(kUsage, stdout);
        return 0;
      } else if (a == "--op") {
        std::string v = value();
        if (v != "get" && v != "put") throw std::runtime_error("--op wants get or put");
        o.put = v == "put";
      } else if (a == "--blocks") {
        o.blocks = parse_size(value());
      } else if (a == "--block-size") {
        o.block = parse_size(value());
      } else if (a == "--reps") {
        o.reps = std::atoi(value().c_str());
      } else if (a == "--mem") {
        o.mem = value();
      } else if (a == "--peer-mem") {
        o.peer_mem = value();
      } else {
        throw std::runtime_error("unknown argument '" + a + "'");
      }
    }
    if (o.blocks < 1 || o.block < kSmall || o.reps < 1)
      throw std::runtime_error("--blocks and --reps must be at least 1, --block-size at least 64");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xfer-list-bench: %s\n\n%s", e.what(), kUsage);
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xfer-list-bench: %s\n", e.what());
    return 1;
  }
}
