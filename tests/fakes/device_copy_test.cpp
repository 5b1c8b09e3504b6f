// The core's copy engine and staging pool over the emulated runtimes: the four device plugins
// loaded together in one process (their fakes share libfakegpu.so, each vendor with its own
// emulator, so every plugin recognises only its own pointers), copies between every pair of
// memories checked byte for byte (device memory is read back through the engine: the host
// cannot touch it), ordering and completion of asynchronous copies, injected copy failures,
// lost devices, the pool's bound, and misuse.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "device/copy.h"
#include "device/copy_figures.h"
#include "device/registry.h"
#include "device/stage_pool.h"
#include "fake_runtimes.h"
#include "fakegpu.h"
#include "plugin/loader.h"
#include "util/config.h"
#include "util/status.h"

namespace {

using hmc::CopyEngine;
using hmc::CopyJob;
using hmc::DeviceRegistry;
using hmc::StagePool;
using hmc::plugin::Kind;

using hmc::fakes::kRuntimes;
using hmc::fakes::Runtime;

const char* const kFakeVars[] = {"FAKEGPU_DEVICES",
                                 "FAKEGPU_BANDWIDTH_MBPS",
                                 "FAKEGPU_CUDA_BANDWIDTH_MBPS",
                                 "FAKEGPU_CUDA_D2D_BANDWIDTH_MBPS",
                                 "FAKEGPU_HIP_BANDWIDTH_MBPS",
                                 "FAKEGPU_CUDA_FAIL_COPY_NTH",
                                 "FAKEGPU_HIP_FAIL_COPY_NTH",
                                 "FAKEGPU_CUDA_LOSE_DEVICE_AFTER",
                                 "FAKEGPU_HIP_LOSE_DEVICE_AFTER",
                                 "FAKEGPU_FAIL_COPY_NTH",
                                 "FAKEGPU_LOSE_DEVICE_AFTER"};

bool all_built() {
  for (const Runtime& r : kRuntimes) {
    std::string p = std::string(HMC_TEST_PLUGIN_DIR "/libhmc-device-") + r.name + ".so";
    if (access(p.c_str(), R_OK) != 0) return false;
  }
  return true;
}

constexpr size_t kChunk = 64 << 10;

// Sets (or clears, with nullptr) an emulator variable and makes every emulator re-read them.
void fake_env(const char* name, const char* value) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
  fakegpu_reset();
}

class DeviceCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!all_built()) GTEST_SKIP() << "the four device plugins are not all built";
    setenv("HMC_PLUGIN_PATH", HMC_TEST_PLUGIN_DIR, 1);
    unsetenv("HMC_DEVICE_PLUGINS");
    for (const char* v : kFakeVars) unsetenv(v);
    hmc::fakes::use_fake_runtimes();
    fakegpu_reset();
    ASSERT_NO_FATAL_FAILURE(hmc::fakes::load_device_registry(
        cfg_, loader_, registry_, hmc::fakes::staged_copy_settings(kChunk, 4)));
    for (const Runtime& r : kRuntimes)
      ASSERT_NE(registry_->find(std::string(r.name) + ":0"), nullptr) << r.name;
  }

  void TearDown() override {
    hmc::fakes::release_device_registry(loader_, registry_);
    for (const char* v : kFakeVars) unsetenv(v);
    fakegpu_reset();
  }

  void* alloc(const std::string& dev, size_t size) {
    void* p = nullptr;
    EXPECT_EQ(registry_->alloc(dev, size, &p), HMC_SUCCESS) << hmc::last_error();
    return p;
  }

  hmc::Config cfg_;
  std::unique_ptr<hmc::plugin::Loader> loader_;
  std::unique_ptr<DeviceRegistry> registry_;
};

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
  std::vector<unsigned char> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<unsigned char>(x >> 24);
  }
  return v;
}

// --- copy figures (device/copy_figures.h) -------------------------------------------------

TEST_F(DeviceCopyTest, CopyFiguresFollowTheDevicesRates) {
  // The emulation never copies faster than it was told (its copy engine keeps a timeline), and
  // a busy machine only makes the measurement slower: bounded above tightly, below loosely.
  fake_env("FAKEGPU_CUDA_BANDWIDTH_MBPS", "200");
  fake_env("FAKEGPU_CUDA_D2D_BANDWIDTH_MBPS", "50");
  hmc::CopyFigures f = hmc::copy_figures(*registry_, *registry_->find("cuda:0"), 20000);
  EXPECT_EQ(f.basis, "measured");
  for (uint64_t v : {f.d2h_MBps, f.h2d_MBps}) {
    EXPECT_LE(v, 230u);
    EXPECT_GE(v, 50u);
  }
  EXPECT_LE(f.d2d_MBps, 58u);
  EXPECT_GE(f.d2d_MBps, 12u);
  // Nothing is left allocated or held: the pool's buffers are all back.
  EXPECT_EQ(registry_->stage_pool().in_use_bytes(), 0u);
}

TEST_F(DeviceCopyTest, CopyFiguresOfAFailingDeviceAreUnknownNotAnError) {
  fake_env("FAKEGPU_CUDA_FAIL_COPY_NTH", "3");
  hmc::CopyFigures f = hmc::copy_figures(*registry_, *registry_->find("cuda:0"), 20000);
  EXPECT_EQ(f.d2h_MBps, 0u);
  EXPECT_EQ(f.h2d_MBps, 0u);
  EXPECT_EQ(f.d2d_MBps, 0u);
  EXPECT_EQ(f.basis.rfind("not measured: a copy failed", 0), 0u) << f.basis;
  EXPECT_EQ(registry_->stage_pool().in_use_bytes(), 0u);
  // Host memory has no figures to measure.
  EXPECT_EQ(hmc::copy_figures(*registry_, *registry_->find("host"), 20000).basis, "");
}

// --- every pair of memories ---------------------------------------------------------------

TEST_F(DeviceCopyTest, EveryPairOfMemoriesEverySizeByteExact) {
  const std::vector<std::string> mems = {"host", "cuda:0", "cuda:1", "hip:0", "mlu:0", "musa:0"};
  const size_t sizes[] = {1, kChunk - 1, kChunk + 1, 3 * kChunk + 17};
  const size_t cap = 3 * kChunk + 17 + 64;
  std::vector<void*> bufs;
  for (const auto& m : mems) bufs.push_back(alloc(m, cap));
  std::vector<unsigned char> back(cap);
  unsigned seed = 0;
  for (size_t a = 0; a < mems.size(); ++a) {
    for (size_t b = 0; b < mems.size(); ++b) {
      if (a == b) continue;
      for (size_t n : sizes) {
        SCOPED_TRACE(mems[a] + " -> " + mems[b] + ", " + std::to_string(n) + " bytes");
        // Odd offsets inside the allocations: nothing relies on alignment.
        char* src = static_cast<char*>(bufs[a]) + 7;
        char* dst = static_cast<char*>(bufs[b]) + 3;
        auto data = pattern(n, ++seed);
        auto poison = std::vector<unsigned char>(cap, 0xA5);
        ASSERT_EQ(registry_->copy(bufs[b], poison.data(), cap), HMC_SUCCESS) << hmc::last_error();
        ASSERT_EQ(registry_->copy(src, data.data(), n), HMC_SUCCESS) << hmc::last_error();
        ASSERT_EQ(registry_->copy(dst, src, n), HMC_SUCCESS) << hmc::last_error();
        ASSERT_EQ(registry_->copy(back.data(), bufs[b], cap), HMC_SUCCESS) << hmc::last_error();
        EXPECT_EQ(memcmp(back.data() + 3, data.data(), n), 0);
        // Nothing around the destination range was written.
        EXPECT_EQ(back[2], 0xA5);
        EXPECT_EQ(back[3 + n], 0xA5);
      }
    }
  }
  // The staging buffers all came back.
  EXPECT_EQ(registry_->stage_pool().in_use_bytes(), 0u);
  for (void* p : bufs) EXPECT_EQ(registry_->free(p), HMC_SUCCESS);
}

TEST_F(DeviceCopyTest, LargeCrossVendorCopyThroughASmallPoolWithManyThreads) {
  // Four threads, each cuda -> hip of 40 chunks, through a pool of 16 chunks (depth 4 each) and
  // then of 2 (threads wait for buffers in turn).
  for (size_t pool_chunks : {16u, 2u}) {
    SCOPED_TRACE(std::to_string(pool_chunks) + "-chunk pool");
    if (pool_chunks == 2) {  // a fresh engine and pool with the new bound
      registry_->release_all();
      hmc::CopySettings s = registry_->copy_settings();
      s.stage_pool_bytes = pool_chunks * kChunk;
      registry_ = std::make_unique<DeviceRegistry>();
      for (hmc::plugin::Record* r : loader_->loaded(Kind::Device))
        registry_->add_plugin(r->device, r->device_ctx);
      registry_->set_copy_settings(s);
    }
    const size_t n = 40 * kChunk + 5;
    std::vector<std::thread> threads;
    std::atomic<int> good{0};
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        void* s = nullptr;
        void* d = nullptr;
        if (registry_->alloc(t % 2 ? "cuda:1" : "cuda:0", n, &s) != HMC_SUCCESS) return;
        if (registry_->alloc(t % 2 ? "hip:1" : "hip:0", n, &d) != HMC_SUCCESS) return;
        auto data = pattern(n, 100 + t);
        std::vector<unsigned char> back(n);
        if (registry_->copy(s, data.data(), n) == HMC_SUCCESS &&
            registry_->copy(d, s, n) == HMC_SUCCESS &&
            registry_->copy(back.data(), d, n) == HMC_SUCCESS && back == data)
          ++good;
        registry_->free(s);
        registry_->free(d);
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(good.load(), 4);
    EXPECT_EQ(registry_->stage_pool().in_use_bytes(), 0u);
    EXPECT_LE(registry_->stage_pool().mapped_bytes(), pool_chunks * kChunk);
  }
}

TEST_F(DeviceCopyTest, StreamsAndEventsAreReusedNotCreatedPerCopy) {
  void* d = alloc("cuda:0", kChunk);
  void* h = alloc("hip:0", kChunk);
  std::vector<unsigned char> buf(kChunk, 1);
  CopyEngine& engine = registry_->copy_engine();
  for (int i = 0; i < 3; ++i) {  // warm: every lane of both devices used once
    ASSERT_EQ(registry_->copy(d, buf.data(), kChunk), HMC_SUCCESS);
    ASSERT_EQ(registry_->copy(h, d, kChunk), HMC_SUCCESS);
    ASSERT_EQ(registry_->copy(buf.data(), h, kChunk), HMC_SUCCESS);
  }
  size_t streams = engine.streams_created(), events = engine.events_created();
  EXPECT_GT(streams, 0u);
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(registry_->copy(d, buf.data(), kChunk), HMC_SUCCESS);
    ASSERT_EQ(registry_->copy(h, d, kChunk), HMC_SUCCESS);
    ASSERT_EQ(registry_->copy(buf.data(), h, kChunk), HMC_SUCCESS);
  }
  EXPECT_EQ(engine.streams_created(), streams);
  EXPECT_EQ(engine.events_created(), events);
}

// --- asynchronous jobs ---------------------------------------------------------------------

TEST_F(DeviceCopyTest, CopiesInDifferentDirectionsOverlapAndOneDirectionKeepsOrder) {
  // 20 MB/s: the 8 MiB copy takes about 420 ms, a 4 KiB one 0.2 ms.
  fake_env("FAKEGPU_CUDA_BANDWIDTH_MBPS", "20");
  const size_t big = 8 << 20, small = 4096;
  void* dev = alloc("cuda:0", big);
  std::vector<unsigned char> host_big(big), host_small(small, 7), host_small2(small);
  CopyEngine& engine = registry_->copy_engine();

  // A long device-to-host copy, then a short host-to-device one: the second does not queue
  // behind the first (another stream), so it ends while the first is still running.
  CopyJob slow, quick;
  ASSERT_EQ(engine.start(host_big.data(), dev, big, &slow), HMC_SUCCESS) << hmc::last_error();
  ASSERT_EQ(engine.start(static_cast<char*>(dev) + big - small, host_small.data(), small, &quick),
            HMC_SUCCESS);
  EXPECT_TRUE(slow.active());
  EXPECT_EQ(quick.wait(10000), HMC_SUCCESS) << hmc::last_error();
  EXPECT_FALSE(quick.active());
  EXPECT_EQ(slow.poll(), HMC_IN_PROGRESS);

  // In one direction on one device, copies end in the order they started: once a later short
  // device-to-host copy is done, the long one before it is done as well.
  CopyJob after;
  ASSERT_EQ(engine.start(host_small2.data(), static_cast<char*>(dev) + big - small, small, &after),
            HMC_SUCCESS);
  EXPECT_EQ(after.wait(10000), HMC_SUCCESS) << hmc::last_error();
  EXPECT_EQ(slow.poll(), HMC_SUCCESS);
  EXPECT_FALSE(slow.active());
  EXPECT_EQ(slow.poll(), HMC_SUCCESS);  // a finished job keeps answering its result
  EXPECT_EQ(host_small2, host_small);   // the quick copy landed before the later read
}

TEST_F(DeviceCopyTest, JobDroppedWhileActiveIsWaitedForAndItsEventReused) {
  fake_env("FAKEGPU_CUDA_BANDWIDTH_MBPS", "50");  // 4 MiB: about 84 ms
  const size_t n = 4 << 20;
  void* dev = alloc("cuda:0", n);
  auto data = pattern(n, 9);
  std::vector<unsigned char> back(n);
  CopyEngine& engine = registry_->copy_engine();
  ASSERT_EQ(registry_->copy(dev, data.data(), n), HMC_SUCCESS);
  size_t events = engine.events_created();
  {
    CopyJob job;
    ASSERT_EQ(engine.start(back.data(), dev, n, &job), HMC_SUCCESS);
    EXPECT_TRUE(job.active());
  }  // dropped active: the destructor waits for it (bounded), so the data has landed
  EXPECT_EQ(back, data);
  CopyJob again;
  ASSERT_EQ(engine.start(back.data(), dev, 16, &again), HMC_SUCCESS);
  EXPECT_EQ(again.wait(10000), HMC_SUCCESS);
  EXPECT_EQ(engine.events_created(), events);  // the dropped job's event went back to the pool

  // A moved job carries the copy; the moved-from one is inactive.
  CopyJob a;
  ASSERT_EQ(engine.start(back.data(), dev, 16, &a), HMC_SUCCESS);
  CopyJob b(std::move(a));
  EXPECT_FALSE(a.active());
  EXPECT_EQ(b.wait(10000), HMC_SUCCESS);
}

TEST_F(DeviceCopyTest, StartRefusesWhatIsNotOneDirectDeviceCopy) {
  void* c = alloc("cuda:0", 4096);
  void* h = alloc("hip:0", 4096);
  std::vector<char> host(4096), host2(4096);
  CopyEngine& engine = registry_->copy_engine();
  CopyJob job;
  EXPECT_EQ(engine.start(host.data(), host2.data(), 16, &job), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(hmc::last_error().find("host -> host"), std::string::npos) << hmc::last_error();
  EXPECT_EQ(engine.start(h, c, 16, &job), HMC_ERR_NOT_SUPPORTED);
  EXPECT_NE(hmc::last_error().find("different device plugins"), std::string::npos)
      << hmc::last_error();
  EXPECT_EQ(engine.start(c, host.data(), 4097, &job), HMC_ERR_OUT_OF_BOUNDS);
  EXPECT_NE(hmc::last_error().find("cuda:0"), std::string::npos) << hmc::last_error();
  EXPECT_FALSE(job.active());
  ASSERT_EQ(engine.start(c, host.data(), 16, &job), HMC_SUCCESS);
  EXPECT_EQ(engine.start(c, host.data(), 16, &job), HMC_ERR_INVALID_ARGUMENT);  // still active
  EXPECT_EQ(job.wait(10000), HMC_SUCCESS);
}

// --- failures ------------------------------------------------------------------------------

TEST_F(DeviceCopyTest, InjectedCopyFailureIsAnErrorAndTheNextCopyWorks) {
  const size_t n = 3 * kChunk + 17;
  void* c = alloc("cuda:0", n);
  void* h = alloc("hip:0", n);
  auto data = pattern(n, 3);
  ASSERT_EQ(registry_->copy(c, data.data(), n), HMC_SUCCESS);
  // The second host-to-device copy on hip fails: the cross-vendor copy reports it.
  fake_env("FAKEGPU_HIP_FAIL_COPY_NTH", "2");
  hmc_status_t st = registry_->copy(h, c, n);
  EXPECT_NE(st, HMC_SUCCESS);
  EXPECT_NE(st, HMC_IN_PROGRESS);
  EXPECT_NE(hmc::last_error().find("hip:0"), std::string::npos) << hmc::last_error();
  // A direct copy failing on cuda.
  fake_env("FAKEGPU_HIP_FAIL_COPY_NTH", nullptr);
  fake_env("FAKEGPU_CUDA_FAIL_COPY_NTH", "1");
  std::vector<unsigned char> back(n);
  st = registry_->copy(back.data(), c, n);
  EXPECT_NE(st, HMC_SUCCESS);
  EXPECT_NE(hmc::last_error().find("cuda:0 -> host"), std::string::npos) << hmc::last_error();
  // Injection over: everything works again, and no staging buffer leaked.
  fake_env("FAKEGPU_CUDA_FAIL_COPY_NTH", nullptr);
  ASSERT_EQ(registry_->copy(h, c, n), HMC_SUCCESS) << hmc::last_error();
  ASSERT_EQ(registry_->copy(back.data(), h, n), HMC_SUCCESS) << hmc::last_error();
  EXPECT_EQ(back, data);
  EXPECT_EQ(registry_->stage_pool().in_use_bytes(), 0u);
}

TEST_F(DeviceCopyTest, LostDeviceEndsCopiesWithAnErrorNotAHang) {
  fake_env("FAKEGPU_CUDA_BANDWIDTH_MBPS", "20");
  const size_t n = 4 << 20;  // about 210 ms at 20 MB/s
  void* c = alloc("cuda:0", n);
  std::vector<unsigned char> host(n, 1);
  CopyEngine& engine = registry_->copy_engine();
  ASSERT_EQ(registry_->copy(c, host.data(), 16), HMC_SUCCESS);  // the stream exists
  // Two more operations (the copy and its event record), then the devices are gone.
  fake_env("FAKEGPU_CUDA_LOSE_DEVICE_AFTER", "2");
  CopyJob job;
  ASSERT_EQ(engine.start(c, host.data(), n, &job), HMC_SUCCESS) << hmc::last_error();
  void* more = nullptr;
  EXPECT_NE(registry_->alloc("cuda:1", 4096, &more), HMC_SUCCESS);  // the operation that loses them
  hmc_status_t st = job.wait(10000);
  EXPECT_NE(st, HMC_SUCCESS);
  EXPECT_NE(st, HMC_ERR_TIMEOUT);
  EXPECT_NE(hmc::last_error().find("host -> cuda:0"), std::string::npos) << hmc::last_error();
  // Later copies on the lost device fail at once, direct or staged.
  EXPECT_NE(registry_->copy(host.data(), c, n), HMC_SUCCESS);
  void* h = alloc("hip:0", n);
  EXPECT_NE(registry_->copy(h, c, n), HMC_SUCCESS);
  fake_env("FAKEGPU_CUDA_LOSE_DEVICE_AFTER", nullptr);
}

TEST_F(DeviceCopyTest, CrossVendorCopyTimesOutAndItsBuffersComeBack) {
  fake_env("FAKEGPU_CUDA_BANDWIDTH_MBPS", "20");  // 16 chunks: about 52 ms
  hmc::CopySettings s = registry_->copy_settings();
  const size_t n = 16 * kChunk;
  void* c = alloc("cuda:0", n);
  void* h = alloc("hip:0", n);
  CopyEngine& engine = registry_->copy_engine();
  EXPECT_EQ(engine.copy(h, c, n, 5), HMC_ERR_TIMEOUT);
  EXPECT_NE(hmc::last_error().find("did not finish in time"), std::string::npos)
      << hmc::last_error();
  // The chunks still moving are parked with their buffers; later copies reap them.
  fake_env("FAKEGPU_CUDA_BANDWIDTH_MBPS", nullptr);
  std::vector<unsigned char> tiny(1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (registry_->stage_pool().in_use_bytes() != 0 && std::chrono::steady_clock::now() < deadline)
    ASSERT_EQ(engine.copy(tiny.data(), c, 1, s.timeout_ms), HMC_SUCCESS);
  EXPECT_EQ(registry_->stage_pool().in_use_bytes(), 0u);
}

// --- misuse --------------------------------------------------------------------------------

TEST_F(DeviceCopyTest, WrongSizeAndFreedPointerAreClearErrors) {
  void* c = alloc("cuda:0", 4096);
  std::vector<char> host(8192);
  EXPECT_EQ(registry_->copy(host.data(), c, 4097), HMC_ERR_OUT_OF_BOUNDS);
  EXPECT_NE(hmc::last_error().find("overrun its allocation (4096 bytes"), std::string::npos)
      << hmc::last_error();
  EXPECT_EQ(registry_->copy(static_cast<char*>(c) + 4000, host.data(), 97), HMC_ERR_OUT_OF_BOUNDS);
  ASSERT_EQ(registry_->free(c), HMC_SUCCESS);
  // Another thread of this process may be handed the hole at once (the sanitizers' allocator,
  // the runtime's workers): the address is then someone's memory again, not a freed device
  // pointer, and there is nothing to check here. The fake unmaps what it frees (msync: ENOMEM).
  if (msync(c, 4096, MS_ASYNC) == 0)
    GTEST_SKIP() << "the freed range was mapped again by another allocation before the check";
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(registry_->copy(host.data(), c, 16), HMC_ERR_INVALID_HANDLE);
  EXPECT_NE(hmc::last_error().find("cuda:0 memory"), std::string::npos) << hmc::last_error();
  EXPECT_NE(hmc::last_error().find("hmc_mem_free already released"), std::string::npos);
  EXPECT_EQ(registry_->copy(static_cast<char*>(c) + 8, host.data(), 16), HMC_ERR_INVALID_HANDLE);
  // Device memory allocated again at that address (mmap usually hands the hole out again) is
  // ordinary device memory: the record of the free is forgotten.
  void* again = alloc("cuda:0", 4096);
  if (again == c) {
    EXPECT_EQ(registry_->copy(host.data(), c, 16), HMC_SUCCESS) << hmc::last_error();
  }
  EXPECT_EQ(registry_->copy(host.data(), again, 16), HMC_SUCCESS) << hmc::last_error();
  registry_->free(again);
}

// --- the staging pool ------------------------------------------------------------------------

TEST_F(DeviceCopyTest, StagePoolIsBoundedReusedAndPinnedForEveryPluginThatCan) {
  StagePool pool(*registry_, kChunk, 4 * kChunk + 100);  // rounds down to 4 buffers
  EXPECT_EQ(pool.chunk(), kChunk);
  EXPECT_EQ(pool.capacity_bytes(), 4 * kChunk);
  EXPECT_EQ(pool.mapped_bytes(), 0u);  // lazily
  std::vector<void*> got;
  for (int i = 0; i < 4; ++i) {
    void* b = pool.take();
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 4096, 0u);
    memset(b, i, kChunk);  // host memory, the whole chunk
    got.push_back(b);
  }
  EXPECT_EQ(pool.in_use_bytes(), 4 * kChunk);
  EXPECT_EQ(pool.take(), nullptr);  // the bound
  pool.give(got[2]);
  EXPECT_EQ(pool.in_use_bytes(), 3 * kChunk);
  void* b = pool.take();
  EXPECT_EQ(b, got[2]);
  EXPECT_EQ(pool.take(), nullptr);
  int dummy = 0;
  pool.give(&dummy);  // refused (logged), changes nothing
  EXPECT_EQ(pool.in_use_bytes(), 4 * kChunk);

  // Pinned for the plugins with host_register (cuda, hip, musa here): they see host memory of
  // theirs. The copy engine locates it as host memory either way.
  int pinned = 0;
  for (hmc::plugin::Record* r : loader_->loaded(Kind::Device)) {
    hmc_device_ptr_info_t info{};
    info.hdr = HMC_ABI_HEADER_INIT(hmc_device_ptr_info_t);
    ASSERT_EQ(r->device->ptr_query(r->device_ctx, got[1], &info), HMC_PLUGIN_SUCCESS);
    if (info.owned) {
      EXPECT_EQ(info.is_host, 1) << r->name;
      ++pinned;
    }
  }
  EXPECT_GE(pinned, 2);
  EXPECT_EQ(registry_->locate(got[1]).device, registry_->find("host"));
  EXPECT_NE(pool.pinned_by().find("cuda"), std::string::npos) << pool.pinned_by();
  EXPECT_NE(pool.pinned_by().find("hip"), std::string::npos) << pool.pinned_by();
  for (void* p : got) pool.give(p);
  EXPECT_EQ(pool.in_use_bytes(), 0u);
}

TEST_F(DeviceCopyTest, StagePoolSharedByManyThreadsNeverExceedsItsBound) {
  StagePool pool(*registry_, kChunk, 8 * kChunk);
  std::atomic<int> held{0}, most{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        void* a = pool.take();
        void* b = pool.take();
        int now = held += (a != nullptr) + (b != nullptr);
        int m = most.load();
        while (now > m && !most.compare_exchange_weak(m, now)) {
        }
        if (a) memset(a, 1, 64);
        if (!a && !b) ++failures;
        held -= (a != nullptr) + (b != nullptr);
        if (a) pool.give(a);
        if (b) pool.give(b);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(most.load(), 8);
  EXPECT_EQ(pool.in_use_bytes(), 0u);
  EXPECT_LE(pool.mapped_bytes(), 8 * kChunk);
}

// --- configuration ---------------------------------------------------------------------------

TEST(CopySettingsTest, DefaultsAndRangeChecksNameTheVariable) {
  for (const char* v : {"HMC_STAGE_CHUNK", "HMC_STAGE_DEPTH", "HMC_STAGE_POOL_BYTES"}) unsetenv(v);
  hmc::Config cfg;
  ASSERT_EQ(cfg.load_from_environment(), HMC_SUCCESS);
  hmc::CopySettings s;
  ASSERT_EQ(hmc::CopySettings::from_config(cfg, 1234, &s), HMC_SUCCESS);
  EXPECT_EQ(s.stage_chunk, 2u << 20);
  EXPECT_EQ(s.stage_depth, 4);
  EXPECT_EQ(s.stage_pool_bytes, 64u << 20);
  EXPECT_EQ(s.timeout_ms, 1234);

  struct Bad {
    const char* var;
    const char* value;
    bool parse;  // refused by the config table already (load_from_environment)
  };
  const Bad bad[] = {{"HMC_STAGE_CHUNK", "lots", true},     {"HMC_STAGE_CHUNK", "100", false},
                     {"HMC_STAGE_CHUNK", "2G", false},      {"HMC_STAGE_DEPTH", "0", false},
                     {"HMC_STAGE_DEPTH", "-3", true},       {"HMC_STAGE_DEPTH", "65", false},
                     {"HMC_STAGE_POOL_BYTES", "1M", false}, {"HMC_STAGE_POOL_BYTES", "x", true}};
  for (const Bad& b : bad) {
    SCOPED_TRACE(std::string(b.var) + "=" + b.value);
    setenv(b.var, b.value, 1);
    hmc::Config c;
    hmc_status_t st = c.load_from_environment();
    if (st == HMC_SUCCESS) st = hmc::CopySettings::from_config(c, 1000, &s);
    EXPECT_EQ(st, HMC_ERR_CONFIG);
    EXPECT_NE(hmc::last_error().find(b.var), std::string::npos) << hmc::last_error();
    unsetenv(b.var);
  }
  setenv("HMC_STAGE_CHUNK", "256K", 1);
  setenv("HMC_STAGE_DEPTH", "8", 1);
  setenv("HMC_STAGE_POOL_BYTES", "2M", 1);
  ASSERT_EQ(cfg.load_from_environment(), HMC_SUCCESS);
  ASSERT_EQ(hmc::CopySettings::from_config(cfg, 1000, &s), HMC_SUCCESS);
  EXPECT_EQ(s.stage_chunk, 256u << 10);
  EXPECT_EQ(s.stage_depth, 8);
  EXPECT_EQ(s.stage_pool_bytes, 2u << 20);
  for (const char* v : {"HMC_STAGE_CHUNK", "HMC_STAGE_DEPTH", "HMC_STAGE_POOL_BYTES"}) unsetenv(v);
}

}  // namespace
