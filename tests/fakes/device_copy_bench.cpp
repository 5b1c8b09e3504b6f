// Times hmc_mem_copy's body (DeviceRegistry::copy, which the API calls after its argument
// checks) over the emulated runtimes: a cross-vendor copy (through the staging pipeline) against
// the single stages it is made of. Built on the core's internals rather than libhmc.so so that
// HMC_STAGE_CHUNK / HMC_STAGE_DEPTH / HMC_STAGE_POOL_BYTES apply (read here as the context is to
// read them). Not a test (it asserts no timing); run by hand, for instance
//   FAKEGPU_BANDWIDTH_MBPS=2000 build/tests/fakes/fakegpu_copy_bench [MiB] [rounds]
// It sets HMC_PLUGIN_PATH and HMC_CUDA_LIBRARY / HMC_HIP_LIBRARY to the build tree's plugins and
// fakes unless they are set.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device/registry.h"
#include "plugin/loader.h"
#include "util/config.h"
#include "util/status.h"

namespace {

double best_ms(hmc::DeviceRegistry& reg, void* dst, const void* src, size_t n, int rounds) {
  double best = 1e30;
  for (int i = 0; i < rounds; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    hmc_status_t st = reg.copy(dst, src, n);
    auto t1 = std::chrono::steady_clock::now();
    if (st != HMC_SUCCESS) {
      std::fprintf(stderr, "copy: %d: %s\n", static_cast<int>(st), hmc::last_error().c_str());
      std::exit(1);
    }
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  if (mib == 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: %s [MiB (64)] [rounds (3)]\n", argv[0]);
    return 2;
  }
  setenv("HMC_PLUGIN_PATH", HMC_TEST_PLUGIN_DIR, 0);
  setenv("HMC_CUDA_LIBRARY", FAKEGPU_DIR "/cuda/libcuda.so.1", 0);
  setenv("HMC_HIP_LIBRARY", FAKEGPU_DIR "/hip7/libamdhip64.so.7", 0);
  // What the context does at creation: configuration, plugins, devices, copy settings.
  hmc::Config cfg;
  hmc::CopySettings settings;
  if (cfg.load_from_environment() != HMC_SUCCESS ||
      hmc::CopySettings::from_config(cfg, 30000, &settings) != HMC_SUCCESS) {
    std::fprintf(stderr, "%s\n", hmc::last_error().c_str());
    return 1;
  }
  hmc::plugin::Loader loader;
  loader.load(cfg);
  hmc::DeviceRegistry reg;
  for (hmc::plugin::Record* r : loader.loaded(hmc::plugin::Kind::Device))
    reg.add_plugin(r->device, r->device_ctx);
  reg.set_copy_settings(settings);
  const size_t n = mib << 20;
  void *host = nullptr, *cuda = nullptr, *hip = nullptr;
  if (reg.alloc("host", n, &host) != HMC_SUCCESS || reg.alloc("cuda:0", n, &cuda) != HMC_SUCCESS ||
      reg.alloc("hip:0", n, &hip) != HMC_SUCCESS) {
    std::fprintf(stderr, "alloc: %s\n", hmc::last_error().c_str());
    return 1;
  }
  std::memset(host, 0x5a, n);
  const char* bw = std::getenv("FAKEGPU_BANDWIDTH_MBPS");
  std::printf("%zu MiB, best of %d, FAKEGPU_BANDWIDTH_MBPS=%s, chunk %zu KiB, depth %d\n", mib,
              rounds, bw ? bw : "(unlimited)", settings.stage_chunk >> 10, settings.stage_depth);
  double h2c = best_ms(reg, cuda, host, n, rounds);
  double c2h = best_ms(reg, host, cuda, n, rounds);
  double h2h = best_ms(reg, hip, host, n, rounds);
  double c2x = best_ms(reg, hip, cuda, n, rounds);
  auto mbps = [&](double ms) { return static_cast<double>(n) / 1e6 / (ms / 1e3); };
  std::printf("%-34s %9.2f ms %9.0f MB/s\n", "host -> cuda:0 (one stage)", h2c, mbps(h2c));
  std::printf("%-34s %9.2f ms %9.0f MB/s\n", "cuda:0 -> host (one stage)", c2h, mbps(c2h));
  std::printf("%-34s %9.2f ms %9.0f MB/s\n", "host -> hip:0 (one stage)", h2h, mbps(h2h));
  std::printf("%-34s %9.2f ms %9.0f MB/s\n", "cuda:0 -> hip:0 (staged pipeline)", c2x, mbps(c2x));
  std::printf("pipeline / slower stage = %.2f (1.00 ideal, 2.00 no overlap)\n",
              c2x / std::max(c2h, h2h));
  reg.release_all();  // before the loader finalizes the plugins
  return 0;
}
