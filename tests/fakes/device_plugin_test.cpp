// The four device plugins, each against its emulated vendor runtime (tests/fakes), loaded directly
// through their C table with a minimal host (plugin_host.h). Every test runs for cuda, hip, mlu
// and musa; a few at the end pin down vendor-specific behaviour (HIP 5/6, the CUDA context).
//
// The emulated runtimes are configured through FAKEGPU_* variables (tests/fakes/core/fakegpu.h),
// re-read by fakegpu_reset() before each plugin starts.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "fakegpu.h"
#include "plugin_host.h"

extern char** environ;

namespace {

using hmc::test::check_pattern;
using hmc::test::fill_pattern;
using hmc::test::PluginHost;
using hmc::test::wait_event;
using Clock = std::chrono::steady_clock;

struct Vendor {
  const char* name;          // plugin name, also the emulator's
  const char* var;           // the plugin's library variable
  const char* fake;          // emulated runtime, relative to FAKEGPU_DIR
  const char* fake_lacking;  // a variant lacking the dma-buf export symbol
  const char* device_name;   // device 0's name through the full runtime
  const char* lacking_name;  // device 0's name through the lacking variant
  int pci_bus;               // first device's PCI bus
  size_t vendor_ipc_bytes;
  bool host_register;
  bool peer_access;
  const char* no_device_reason;
  const char* old_version_var;
  const char* old_version_value;
  const char* old_version_text;  // expected in the reason
  const char* oom_text;          // the vendor's out-of-memory error in the log
};

const Vendor kVendors[] = {
    {"cuda", "HMC_CUDA_LIBRARY", "cuda/libcuda.so.1", "cuda-nodmabuf/libcuda.so.1",
     "NVIDIA FakeGPU CUDA 0", "NVIDIA FakeGPU CUDA 0", 0x1a, 64, true, true,
     "cuInit: CUDA_ERROR_NO_DEVICE (100)", "FAKEGPU_CUDA_DRIVER_VERSION", "10020",
     "CUDA driver 10.2 (", "CUDA_ERROR_OUT_OF_MEMORY (2)"},
    {"hip", "HMC_HIP_LIBRARY", "hip7/libamdhip64.so.7", "hip5/libamdhip64.so.5",
     "AMD FakeGPU HIP 0", "AMD FakeGPU HIP 0", 0x2a, 64, true, true,
     "hipGetDeviceCount: hipErrorNoDevice (100)", "FAKEGPU_HIP_VERSION", "40500000",
     "HIP runtime 4.5.0 (", "hipErrorOutOfMemory (2)"},
    {"mlu", "HMC_MLU_LIBRARY", "mlu/libcnrt.so", "mlu-nodmabuf/libcnrt.so",
     "Cambricon FakeGPU MLU 0", "Cambricon FakeGPU MLU 0", 0x3a, 8, false, false,
     "cnrtGetDeviceCount: cnrtErrorNoDevice (100004)", "FAKEGPU_MLU_VERSION_MAJOR", "4",
     "CNRT 4.14.0 (", "cnrtErrorNoMem (100100)"},
    {"musa", "HMC_MUSA_LIBRARY", "musa/libmusart.so", "musa-nodmabuf/libmusart.so",
     "Moore Threads FakeGPU MUSA 0", "Moore Threads FakeGPU MUSA 0", 0x4a, 64, true, true,
     "musaGetDeviceCount: musaErrorNoDevice (100)", "FAKEGPU_MUSA_VERSION", "900",
     "MUSA runtime 0.90 (", "musaErrorMemoryAllocation (2)"},
};

void PrintTo(const Vendor& v, std::ostream* os) {
  *os << v.name;
}

std::string fake_path(const char* rel) {
  return std::string(FAKEGPU_DIR "/") + rel;
}
std::string plugin_path(const char* name) {
  return std::string(HMC_TEST_PLUGIN_DIR "/libhmc-device-") + name + ".so";
}
bool exists(const std::string& path) {
  return access(path.c_str(), R_OK) == 0;
}

void clear_fake_environment() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "FAKEGPU_", 8) == 0) names.emplace_back(*e, std::strchr(*e, '=') - *e);
  for (const auto& n : names) unsetenv(n.c_str());
}

hmc_device_props_t props_of(const PluginHost& h, int dev, hmc_plugin_status_t* st = nullptr) {
  hmc_device_props_t p{};
  p.hdr = HMC_ABI_HEADER_INIT(hmc_device_props_t);
  hmc_plugin_status_t s = h->device_info(h.ctx(), dev, &p);
  if (st != nullptr) *st = s;
  return p;
}

hmc_device_ptr_info_t query(const PluginHost& h, const void* p) {
  hmc_device_ptr_info_t info{};
  info.hdr = HMC_ABI_HEADER_INIT(hmc_device_ptr_info_t);
  EXPECT_EQ(h->ptr_query(h.ctx(), p, &info), HMC_PLUGIN_SUCCESS);
  return info;
}

class DevicePluginTest : public ::testing::TestWithParam<Vendor> {
 protected:
  void SetUp() override {
    clear_fake_environment();
    if (!exists(plugin_path(v().name))) GTEST_SKIP() << plugin_path(v().name) << " was not built";
  }

  void TearDown() override {
    if (host_) {
      EXPECT_EQ(host_->finalize(), HMC_PLUGIN_SUCCESS);
    }
    host_.reset();
    clear_fake_environment();
    fakegpu_reset();
  }

  const Vendor& v() const { return GetParam(); }

  // Starts the plugin over `library` (the full emulated runtime by default), after the FAKEGPU_
  // settings of the test were made.
  PluginHost& start(const std::string& library = "") {
    fakegpu_reset();
    host_ = std::make_unique<PluginHost>(std::map<std::string, std::string>{
        {v().var, library.empty() ? fake_path(v().fake) : library}});
    std::string why;
    EXPECT_TRUE(host_->load(plugin_path(v().name), &why)) << why;
    EXPECT_EQ(host_->init(), HMC_PLUGIN_SUCCESS) << host_->log_text();
    return *host_;
  }

  PluginHost& h() { return *host_; }
  const hmc_device_plugin_v1_t* t() { return host_->table(); }
  hmc_device_ctx_t* ctx() { return host_->ctx(); }

  void* alloc(int dev, size_t size) {
    void* p = nullptr;
    EXPECT_EQ(t()->mem_alloc(ctx(), dev, size, &p), HMC_PLUGIN_SUCCESS) << host_->log_text();
    return p;
  }

  // One copy on a fresh stream of `dev`, waited for.
  hmc_plugin_status_t copy(int dev, void* dst, const void* src, size_t size, hmc_copy_kind_t kind) {
    hmc_device_stream_t* s = nullptr;
    hmc_device_event_t* e = nullptr;
    hmc_plugin_status_t st = t()->stream_create(ctx(), dev, &s);
    if (st == HMC_PLUGIN_SUCCESS) st = t()->event_create(ctx(), dev, &e);
    if (st == HMC_PLUGIN_SUCCESS) st = t()->copy_async(s, dst, src, size, kind);
    if (st == HMC_PLUGIN_SUCCESS) st = t()->event_record(e, s);
    if (st == HMC_PLUGIN_SUCCESS) st = wait_event(t(), e);
    if (e != nullptr) {
      EXPECT_EQ(t()->event_destroy(e), HMC_PLUGIN_SUCCESS);
    }
    if (s != nullptr) {
      EXPECT_EQ(t()->stream_destroy(s), HMC_PLUGIN_SUCCESS);
    }
    return st;
  }

  std::unique_ptr<PluginHost> host_;
};

TEST_P(DevicePluginTest, ListsTheDevicesWithTheirIdentity) {
  setenv("FAKEGPU_DEVICES", "3", 1);
  start();
  int n = -1;
  ASSERT_EQ(t()->device_count(ctx(), &n), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(n, 3) << h().log_text();
  EXPECT_EQ(t()->unavailable_reason(ctx()), nullptr);
  ASSERT_NE(t()->runtime_version(ctx()), nullptr);
  EXPECT_STRNE(t()->runtime_version(ctx()), "");
  EXPECT_STREQ(t()->name, v().name);
  for (int dev = 0; dev < n; ++dev) {
    SCOPED_TRACE("device " + std::to_string(dev));
    hmc_plugin_status_t st;
    hmc_device_props_t p = props_of(h(), dev, &st);
    ASSERT_EQ(st, HMC_PLUGIN_SUCCESS);
    std::string name = v().device_name;
    name.back() = static_cast<char>('0' + dev);
    EXPECT_EQ(p.name, name);
    EXPECT_EQ(std::memcmp(p.uuid, "FAKE", 4), 0);
    EXPECT_EQ(std::memcmp(p.uuid + 4, v().name, std::strlen(v().name)), 0);
    EXPECT_EQ(p.uuid[15], dev);
    char bus[16];
    std::snprintf(bus, sizeof bus, "0000:%02x:00.0", v().pci_bus + dev);
    ASSERT_NE(p.pci_bus_id, nullptr);
    EXPECT_STREQ(p.pci_bus_id, bus);  // normalized to lower case
    EXPECT_EQ(p.mem_bytes, 1024ull << 20);
    EXPECT_EQ(p.numa_node, -1);  // no such PCI device in sysfs
    EXPECT_TRUE(p.caps & HMC_DEVICE_CAP_IPC);
    EXPECT_TRUE(p.caps & HMC_DEVICE_CAP_DMABUF);
    EXPECT_EQ((p.caps & HMC_DEVICE_CAP_HOST_REGISTER) != 0, v().host_register);
    EXPECT_EQ((p.caps & HMC_DEVICE_CAP_PEER_ACCESS) != 0, v().peer_access);
    EXPECT_EQ(p.ipc_handle_size, 24 + v().vendor_ipc_bytes);
  }
  hmc_plugin_status_t st;
  props_of(h(), 3, &st);
  EXPECT_EQ(st, HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(h().logged("3 device(s)")) << h().log_text();
}

TEST_P(DevicePluginTest, AllocatesAndFreesDeviceMemory) {
  start();
  void* a = alloc(0, 1 << 20);
  void* b = alloc(1, 12345);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(query(h(), a).device, 0);
  EXPECT_EQ(query(h(), b).device, 1);
  EXPECT_EQ(t()->mem_free(ctx(), a), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->mem_free(ctx(), a), HMC_PLUGIN_ERR_INVALID_ARGUMENT);  // twice
  EXPECT_TRUE(h().logged("already freed")) << h().log_text();
  EXPECT_EQ(t()->mem_free(ctx(), static_cast<char*>(b) + 1), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t()->mem_free(ctx(), b), HMC_PLUGIN_SUCCESS);
  void* p = nullptr;
  EXPECT_EQ(t()->mem_alloc(ctx(), 2, 4096, &p), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t()->mem_alloc(ctx(), 0, 0, &p), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr);
  // More than the device holds: the runtime's out-of-memory, mapped.
  EXPECT_EQ(t()->mem_alloc(ctx(), 0, 2048ull << 20, &p), HMC_PLUGIN_ERR_NO_MEMORY);
}

TEST_P(DevicePluginTest, CopiesInEveryDirectionByteExactly) {
  start();
  const size_t n = (1 << 20) + 123;  // not a multiple of anything
  std::vector<uint8_t> src(n), back(n, 0), h2h(n, 0);
  fill_pattern(src.data(), n, 1);
  auto* d0a = static_cast<char*>(alloc(0, n));
  auto* d0b = static_cast<char*>(alloc(0, n));
  auto* d1 = static_cast<char*>(alloc(1, n));
  ASSERT_EQ(copy(0, d0a, src.data(), n, HMC_COPY_HOST_TO_DEVICE), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(copy(0, d0b, d0a, n, HMC_COPY_DEVICE_TO_DEVICE), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(copy(0, d1, d0b, n, HMC_COPY_DEVICE_TO_DEVICE), HMC_PLUGIN_SUCCESS);  // across devices
  ASSERT_EQ(copy(1, back.data(), d1, n, HMC_COPY_DEVICE_TO_HOST), HMC_PLUGIN_SUCCESS);
  size_t bad = 0;
  EXPECT_TRUE(check_pattern(back.data(), n, 1, &bad)) << "first wrong byte " << bad;

  // Pinned host memory, an interior device pointer, host to host.
  void* pinned = nullptr;
  ASSERT_EQ(t()->host_alloc(ctx(), n, &pinned), HMC_PLUGIN_SUCCESS) << h().log_text();
  fill_pattern(pinned, n, 2);
  ASSERT_EQ(copy(0, d0a + 4096, pinned, n - 4096, HMC_COPY_HOST_TO_DEVICE), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(copy(0, back.data(), d0a + 4096, n - 4096, HMC_COPY_DEVICE_TO_HOST),
            HMC_PLUGIN_SUCCESS);
  EXPECT_TRUE(check_pattern(back.data(), n - 4096, 2, &bad)) << "first wrong byte " << bad;
  ASSERT_EQ(copy(0, h2h.data(), pinned, n, HMC_COPY_HOST_TO_HOST), HMC_PLUGIN_SUCCESS);
  EXPECT_TRUE(check_pattern(h2h.data(), n, 2, &bad)) << "first wrong byte " << bad;

  // Out of bounds of a known allocation, and a bad kind: refused before the runtime.
  hmc_device_stream_t* s = nullptr;
  ASSERT_EQ(t()->stream_create(ctx(), 0, &s), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->copy_async(s, d0a + 1, src.data(), n, HMC_COPY_HOST_TO_DEVICE),
            HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(h().logged("overrun")) << h().log_text();
  EXPECT_EQ(t()->copy_async(s, d0a, src.data(), n, static_cast<hmc_copy_kind_t>(7)),
            HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t()->stream_destroy(s), HMC_PLUGIN_SUCCESS);

  EXPECT_EQ(t()->host_free(ctx(), pinned), HMC_PLUGIN_SUCCESS);
  for (void* p : {static_cast<void*>(d0a), static_cast<void*>(d0b), static_cast<void*>(d1)})
    EXPECT_EQ(t()->mem_free(ctx(), p), HMC_PLUGIN_SUCCESS);
}

TEST_P(DevicePluginTest, CopiesCompleteAfterTheyAreIssued) {
  setenv("FAKEGPU_BANDWIDTH_MBPS", "2", 1);  // 512 KiB take about 260 ms each way
  start();
  const size_t n = 512 << 10;
  std::vector<uint8_t> src(n), dst(n, 0);
  fill_pattern(src.data(), n, 3);
  void* d = alloc(0, n);
  hmc_device_stream_t* s = nullptr;
  hmc_device_event_t *up = nullptr, *down = nullptr, *never = nullptr;
  ASSERT_EQ(t()->stream_create(ctx(), 0, &s), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(t()->event_create(ctx(), 0, &up), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(t()->event_create(ctx(), 0, &down), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(t()->event_create(ctx(), 0, &never), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->event_query(never), HMC_PLUGIN_SUCCESS);  // nothing recorded: nothing to wait for

  auto started = Clock::now();
  ASSERT_EQ(t()->copy_async(s, d, src.data(), n, HMC_COPY_HOST_TO_DEVICE), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(t()->event_record(up, s), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(t()->copy_async(s, dst.data(), d, n, HMC_COPY_DEVICE_TO_HOST), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(t()->event_record(down, s), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->event_query(up), HMC_PLUGIN_IN_PROGRESS);
  EXPECT_EQ(t()->event_query(down), HMC_PLUGIN_IN_PROGRESS);
  EXPECT_EQ(dst[0], 0);  // nothing arrived yet

  EXPECT_EQ(wait_event(t(), down), HMC_PLUGIN_SUCCESS);
  auto took = Clock::now() - started;
  EXPECT_EQ(t()->event_query(up), HMC_PLUGIN_SUCCESS);  // in order on the stream
  EXPECT_GE(took, std::chrono::milliseconds(450)) << "the bandwidth limit was not honoured";
  size_t bad = 0;
  EXPECT_TRUE(check_pattern(dst.data(), n, 3, &bad)) << "first wrong byte " << bad;

  hmc_device_stream_t* other = nullptr;
  ASSERT_EQ(t()->stream_create(ctx(), 1, &other), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->event_record(up, other), HMC_PLUGIN_ERR_INVALID_ARGUMENT);  // other device
  for (auto* e : {up, down, never}) EXPECT_EQ(t()->event_destroy(e), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->stream_destroy(other), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->stream_destroy(s), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->mem_free(ctx(), d), HMC_PLUGIN_SUCCESS);
}

// event_record_native: an event of the plugin's on a stream the application made with the
// vendor's runtime (here the emulated runtime's own stream), reporting the end of the work on it.
TEST_P(DevicePluginTest, RecordsOnTheApplicationsStream) {
  setenv("FAKEGPU_BANDWIDTH_MBPS", "2", 1);  // 256 KiB take about 130 ms
  start();
  ASSERT_TRUE(HMC_ABI_HAS_FIELD(t(), hmc_device_plugin_v1_t, event_record_native) &&
              t()->event_record_native != nullptr);
  fakegpu::Emulator& emu = fakegpu::Emulator::get(v().name);
  fakegpu::Stream* app = nullptr;
  ASSERT_EQ(emu.stream_create(0, &app), fakegpu::Err::Ok);
  const size_t n = 256 << 10;
  std::vector<uint8_t> src(n);
  fill_pattern(src.data(), n, 5);
  void* d = alloc(0, n);
  hmc_device_event_t* ev = nullptr;
  ASSERT_EQ(t()->event_create(ctx(), 0, &ev), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->event_record_native(ev, nullptr), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(emu.copy_async(0, app, d, src.data(), n, fakegpu::Dir::HostToDevice), fakegpu::Err::Ok);
  ASSERT_EQ(t()->event_record_native(ev, app), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->event_query(ev), HMC_PLUGIN_IN_PROGRESS);  // the upload is still running
  EXPECT_EQ(wait_event(t(), ev), HMC_PLUGIN_SUCCESS);
  std::vector<uint8_t> back(n, 0);
  ASSERT_EQ(emu.copy_sync(0, back.data(), d, n, fakegpu::Dir::DeviceToHost), fakegpu::Err::Ok);
  size_t bad = 0;
  EXPECT_TRUE(check_pattern(back.data(), n, 5, &bad)) << "first wrong byte " << bad;
  EXPECT_EQ(t()->event_destroy(ev), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(emu.stream_destroy(app), fakegpu::Err::Ok);
  EXPECT_EQ(t()->mem_free(ctx(), d), HMC_PLUGIN_SUCCESS);
}

TEST_P(DevicePluginTest, PointerQueryKnowsWhereMemoryLives) {
  start();
  auto* d = static_cast<char*>(alloc(0, 10000));
  hmc_device_ptr_info_t i = query(h(), d + 100);
  EXPECT_EQ(i.owned, 1);
  EXPECT_EQ(i.device, 0);
  EXPECT_EQ(i.base, reinterpret_cast<uintptr_t>(d));
  EXPECT_EQ(i.size, 10000u);
  EXPECT_EQ(i.is_host, 0);

  void* pinned = nullptr;
  ASSERT_EQ(t()->host_alloc(ctx(), 5000, &pinned), HMC_PLUGIN_SUCCESS);
  i = query(h(), static_cast<char*>(pinned) + 4999);
  EXPECT_EQ(i.owned, 1);
  EXPECT_EQ(i.device, -1);
  EXPECT_EQ(i.is_host, 1);
  EXPECT_EQ(i.base, reinterpret_cast<uintptr_t>(pinned));
  EXPECT_EQ(i.size, 5000u);

  int on_stack = 0;
  EXPECT_EQ(query(h(), &on_stack).owned, 0);
  std::vector<char> heap(1 << 16);
  EXPECT_EQ(query(h(), heap.data()).owned, 0);

  if (v().host_register) {
    ASSERT_EQ(t()->host_register(ctx(), heap.data(), heap.size()), HMC_PLUGIN_SUCCESS);
    i = query(h(), heap.data() + 10);
    EXPECT_EQ(i.owned, 1);
    EXPECT_EQ(i.is_host, 1);
    EXPECT_EQ(t()->host_register(ctx(), heap.data() + 8, 8), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(t()->host_unregister(ctx(), heap.data()), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(query(h(), heap.data()).owned, 0);
  } else {
    EXPECT_EQ(t()->host_register(ctx(), heap.data(), heap.size()), HMC_PLUGIN_ERR_NOT_SUPPORTED);
  }

  // Memory the application allocated through the runtime itself (a framework's tensor).
  fakegpu::Emulator& emu = fakegpu::Emulator::get(v().name);
  void* foreign = nullptr;
  ASSERT_EQ(emu.alloc(1, 8192, &foreign), fakegpu::Err::Ok);
  i = query(h(), static_cast<char*>(foreign) + 8000);
  EXPECT_EQ(i.owned, 1);
  EXPECT_EQ(i.device, 1);
  EXPECT_EQ(i.is_host, 0);
  EXPECT_EQ(i.base, reinterpret_cast<uintptr_t>(foreign));
  EXPECT_EQ(i.size, 8192u);
  // ... which the plugin does not free for it.
  EXPECT_EQ(t()->mem_free(ctx(), foreign), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(emu.free(foreign), fakegpu::Err::Ok);

  EXPECT_EQ(t()->host_free(ctx(), pinned), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->mem_free(ctx(), d), HMC_PLUGIN_SUCCESS);
}

TEST_P(DevicePluginTest, HostCannotDereferenceDeviceMemory) {
  start();
  void* d = alloc(0, 4096);
  ASSERT_NE(d, nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGSEGV, &dfl, nullptr);  // not a sanitizer's handler: die of the signal
    volatile char c = *static_cast<volatile char*>(d);
    (void)c;
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status))
      << "the child read device memory from the host and exited " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);
  EXPECT_EQ(t()->mem_free(ctx(), d), HMC_PLUGIN_SUCCESS);
}

// Runs the IPC peer process for a handle; its exit status, or -1 when it did not end in time.
int run_ipc_peer(const Vendor& v, const std::string& library, const std::string& handle_hex,
                 size_t size, uint32_t seed) {
  std::string plugin = plugin_path(v.name), sz = std::to_string(size), sd = std::to_string(seed);
  std::vector<char*> argv = {const_cast<char*>(FAKEGPU_IPC_PEER),
                             plugin.data(),
                             const_cast<char*>(v.var),
                             const_cast<char*>(library.c_str()),
                             const_cast<char*>(handle_hex.c_str()),
                             sz.data(),
                             sd.data(),
                             nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, FAKEGPU_IPC_PEER, nullptr, nullptr, argv.data(), environ) != 0) return -2;
  auto deadline = Clock::now() + std::chrono::seconds(30);
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_P(DevicePluginTest, IpcSharesMemoryWithAnotherProcess) {
  start();
  const size_t n = 256 << 10;
  std::vector<uint8_t> buf(n);
  fill_pattern(buf.data(), n, 7);
  auto* d = static_cast<char*>(alloc(0, n));
  ASSERT_EQ(copy(0, d, buf.data(), n, HMC_COPY_HOST_TO_DEVICE), HMC_PLUGIN_SUCCESS);

  uint8_t handle[HMC_DEVICE_IPC_HANDLE_MAX];
  size_t len = sizeof handle;
  ASSERT_EQ(t()->ipc_export(ctx(), d + 512, handle, &len), HMC_PLUGIN_SUCCESS) << h().log_text();
  EXPECT_EQ(len, props_of(h(), 0).ipc_handle_size);

  // The other process sees the data and writes its own.
  EXPECT_EQ(run_ipc_peer(v(), fake_path(v().fake), hmc::test::to_hex(handle, len), n, 7), 0);
  ASSERT_EQ(copy(0, buf.data(), d, n, HMC_COPY_DEVICE_TO_HOST), HMC_PLUGIN_SUCCESS);
  size_t bad = 0;
  EXPECT_TRUE(check_pattern(buf.data(), n, 8, &bad)) << "first wrong byte " << bad;

  // Refused: a buffer too small, garbage, a handle of another plugin, the exporter's own handle.
  size_t small = 10;
  EXPECT_EQ(t()->ipc_export(ctx(), d, handle, &small), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  void* p = nullptr;
  uint8_t garbage[88] = {1, 2, 3};
  EXPECT_EQ(t()->ipc_open(ctx(), 0, garbage, sizeof garbage, &p), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(h().logged("not an hmc device IPC handle")) << h().log_text();
  uint8_t other[HMC_DEVICE_IPC_HANDLE_MAX];
  std::memcpy(other, handle, len);
  std::memcpy(other + 8, "zzz\0\0\0\0", 8);
  EXPECT_EQ(t()->ipc_open(ctx(), 0, other, len, &p), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(h().logged("exported by the 'zzz' plugin")) << h().log_text();
  EXPECT_NE(t()->ipc_open(ctx(), 0, handle, len, &p), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(p, nullptr);
  int on_stack = 0;
  EXPECT_EQ(t()->ipc_export(ctx(), &on_stack, handle, &len), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t()->mem_free(ctx(), d), HMC_PLUGIN_SUCCESS);
}

TEST_P(DevicePluginTest, ExportsDeviceMemoryAsDmabuf) {
  start();
  const size_t n = 64 << 10;
  std::vector<uint8_t> buf(n);
  fill_pattern(buf.data(), n, 9);
  auto* d = static_cast<char*>(alloc(0, n));
  ASSERT_EQ(copy(0, d, buf.data(), n, HMC_COPY_HOST_TO_DEVICE), HMC_PLUGIN_SUCCESS);

  const size_t at = 4096 + 100, len = 1000;
  int fd = -1;
  uint64_t offset = ~0ull;
  ASSERT_EQ(t()->dmabuf_export(ctx(), d + at, len, &fd, &offset), HMC_PLUGIN_SUCCESS)
      << h().log_text();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(offset, at);  // the buffer starts at the allocation
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  const size_t map_len = (offset + len + 4095) / 4096 * 4096;
  void* m = mmap(nullptr, map_len, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED) << std::strerror(errno);
  EXPECT_EQ(std::memcmp(static_cast<char*>(m) + offset, buf.data() + at, len), 0);
  munmap(m, map_len);
  close(fd);

  EXPECT_EQ(t()->dmabuf_export(ctx(), d + n - 10, 100, &fd, &offset),
            HMC_PLUGIN_ERR_INVALID_ARGUMENT);  // past the allocation
  EXPECT_EQ(t()->dmabuf_export(ctx(), buf.data(), 100, &fd, &offset),
            HMC_PLUGIN_ERR_INVALID_ARGUMENT);  // host memory
  EXPECT_EQ(t()->mem_free(ctx(), d), HMC_PLUGIN_SUCCESS);
}

TEST_P(DevicePluginTest, RuntimeLackingAnOptionalPieceLosesOnlyThatCapability) {
  start(fake_path(v().fake_lacking));
  int n = 0;
  ASSERT_EQ(t()->device_count(ctx(), &n), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(n, 2) << h().log_text();
  hmc_device_props_t p = props_of(h(), 0);
  EXPECT_FALSE(p.caps & HMC_DEVICE_CAP_DMABUF);
  EXPECT_TRUE(p.caps & HMC_DEVICE_CAP_IPC);
  EXPECT_STREQ(p.name, v().lacking_name);
  const size_t size = 8192;
  auto* d = static_cast<char*>(alloc(0, size));
  int fd = -1;
  uint64_t offset = 0;
  EXPECT_EQ(t()->dmabuf_export(ctx(), d, size, &fd, &offset), HMC_PLUGIN_ERR_NOT_SUPPORTED);
  std::vector<uint8_t> a(size), b(size);
  fill_pattern(a.data(), size, 11);
  ASSERT_EQ(copy(0, d, a.data(), size, HMC_COPY_HOST_TO_DEVICE), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(copy(0, b.data(), d, size, HMC_COPY_DEVICE_TO_HOST), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(a, b);
  EXPECT_EQ(t()->mem_free(ctx(), d), HMC_PLUGIN_SUCCESS);
}

// MLU and MUSA take names, sizes, UUIDs and dma-buf from a second library (CNDrv, libmusa).
// When it cannot be used, the devices still work, under generic names and without dma-buf.
class DriverLibraryTest : public DevicePluginTest {};

TEST_P(DriverLibraryTest, UnusableDriverLibraryLeavesTheRuntimeWorking) {
  std::string var =
      std::string("FAKEGPU_") + (v().name[1] == 'l' ? "MLU" : "MUSA") + "_DRIVER_INIT_FAILS";
  setenv(var.c_str(), "1", 1);
  start();
  int n = 0;
  ASSERT_EQ(t()->device_count(ctx(), &n), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(n, 2) << h().log_text();
  hmc_device_props_t p = props_of(h(), 1);
  EXPECT_EQ(std::string(p.name), std::string(v().name[1] == 'l' ? "MLU" : "MUSA") + " device 1");
  EXPECT_EQ(p.mem_bytes, 1024ull << 20);  // from the runtime's memory info instead
  EXPECT_FALSE(p.caps & HMC_DEVICE_CAP_DMABUF);
  EXPECT_TRUE(h().logged("dma-buf export")) << h().log_text();  // said once, at info level
  std::vector<uint8_t> a(4096), b(4096);
  fill_pattern(a.data(), a.size(), 12);
  void* d = alloc(1, a.size());
  ASSERT_EQ(copy(1, d, a.data(), a.size(), HMC_COPY_HOST_TO_DEVICE), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(copy(1, b.data(), d, b.size(), HMC_COPY_DEVICE_TO_HOST), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(a, b);
  EXPECT_EQ(t()->mem_free(ctx(), d), HMC_PLUGIN_SUCCESS);
}

TEST_P(DevicePluginTest, InjectedAllocationFailureIsOutOfMemory) {
  setenv("FAKEGPU_FAIL_ALLOC_NTH", "2", 1);
  start();
  void* a = alloc(0, 4096);
  void* p = nullptr;
  EXPECT_EQ(t()->mem_alloc(ctx(), 0, 4096, &p), HMC_PLUGIN_ERR_NO_MEMORY);
  EXPECT_EQ(p, nullptr);
  EXPECT_TRUE(h().logged(v().oom_text)) << h().log_text();
  void* c = alloc(0, 4096);
  EXPECT_EQ(t()->mem_free(ctx(), a), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->mem_free(ctx(), c), HMC_PLUGIN_SUCCESS);
}

TEST_P(DevicePluginTest, FailedCopyIsReportedByItsEvent) {
  setenv("FAKEGPU_FAIL_COPY_NTH", "2", 1);
  start();
  const size_t n = 4096;
  std::vector<uint8_t> src(n), dst(n, 0);
  fill_pattern(src.data(), n, 5);
  void* d = alloc(0, n);
  EXPECT_EQ(copy(0, d, src.data(), n, HMC_COPY_HOST_TO_DEVICE), HMC_PLUGIN_SUCCESS);
  hmc_plugin_status_t st = copy(0, dst.data(), d, n, HMC_COPY_DEVICE_TO_HOST);
  EXPECT_NE(st, HMC_PLUGIN_SUCCESS);
  EXPECT_NE(st, HMC_PLUGIN_IN_PROGRESS);
  EXPECT_TRUE(h().logged("an operation before the")) << h().log_text();
  // The next copy works again.
  EXPECT_EQ(copy(0, dst.data(), d, n, HMC_COPY_DEVICE_TO_HOST), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(src, dst);
  EXPECT_EQ(t()->mem_free(ctx(), d), HMC_PLUGIN_SUCCESS);
}

TEST_P(DevicePluginTest, LostDeviceFailsEverythingWithoutHanging) {
  setenv("FAKEGPU_BANDWIDTH_MBPS", "1", 1);  // the copy below would take a second
  setenv("FAKEGPU_LOSE_DEVICE_AFTER", "6", 1);
  start();
  const size_t n = 1 << 20;
  std::vector<uint8_t> src(n, 1);
  hmc_device_stream_t* s = nullptr;
  hmc_device_event_t* e = nullptr;
  ASSERT_EQ(t()->stream_create(ctx(), 0, &s), HMC_PLUGIN_SUCCESS);  // operation 1
  ASSERT_EQ(t()->event_create(ctx(), 0, &e), HMC_PLUGIN_SUCCESS);
  void* d = alloc(0, n);  // 2
  ASSERT_EQ(t()->copy_async(s, d, src.data(), n, HMC_COPY_HOST_TO_DEVICE),
            HMC_PLUGIN_SUCCESS);                           // 3
  ASSERT_EQ(t()->event_record(e, s), HMC_PLUGIN_SUCCESS);  // 4
  hmc_plugin_status_t st = HMC_PLUGIN_SUCCESS;
  std::vector<void*> more;
  for (int i = 0; i < 10 && st == HMC_PLUGIN_SUCCESS; ++i) {
    void* p = nullptr;
    st = t()->mem_alloc(ctx(), 1, 4096, &p);
    if (st == HMC_PLUGIN_SUCCESS) more.push_back(p);
  }
  EXPECT_EQ(more.size(), 2u);  // operations 5 and 6
  EXPECT_EQ(st, HMC_PLUGIN_ERR_INTERNAL);
  // The copy in flight fails promptly instead of finishing or hanging.
  st = wait_event(t(), e, std::chrono::seconds(5));
  EXPECT_NE(st, HMC_PLUGIN_SUCCESS);
  EXPECT_NE(st, HMC_PLUGIN_IN_PROGRESS);
  EXPECT_NE(t()->copy_async(s, d, src.data(), n, HMC_COPY_HOST_TO_DEVICE), HMC_PLUGIN_SUCCESS);
  EXPECT_NE(t()->event_record(e, s), HMC_PLUGIN_SUCCESS);
  // Teardown still works (TearDown finalizes and checks).
  EXPECT_EQ(t()->event_destroy(e), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(t()->stream_destroy(s), HMC_PLUGIN_SUCCESS);
}

TEST_P(DevicePluginTest, NoLibraryMeansNoDevicesAndAReason) {
  std::string missing =
      "/nonexistent/" + std::string(v().fake).substr(std::string(v().fake).find('/') + 1);
  start(missing);
  int n = -1;
  ASSERT_EQ(t()->device_count(ctx(), &n), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(n, 0);
  ASSERT_NE(t()->unavailable_reason(ctx()), nullptr);
  EXPECT_NE(std::string(t()->unavailable_reason(ctx()))
                .find(missing + ": cannot open shared object file"),
            std::string::npos)
      << t()->unavailable_reason(ctx());
  EXPECT_EQ(t()->runtime_version(ctx()), nullptr);
  void* p = nullptr;
  EXPECT_EQ(t()->mem_alloc(ctx(), 0, 4096, &p), HMC_PLUGIN_ERR_NO_DEVICE);
  EXPECT_EQ(t()->host_alloc(ctx(), 4096, &p), HMC_PLUGIN_ERR_NO_DEVICE);
  int x = 0;
  EXPECT_EQ(query(h(), &x).owned, 0);
}

TEST_P(DevicePluginTest, NoDeviceMeansNoDevicesAndTheRuntimesAnswer) {
  setenv("FAKEGPU_DEVICES", "0", 1);
  start();
  int n = -1;
  ASSERT_EQ(t()->device_count(ctx(), &n), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(n, 0);
  ASSERT_NE(t()->unavailable_reason(ctx()), nullptr);
  EXPECT_STREQ(t()->unavailable_reason(ctx()), v().no_device_reason);
  EXPECT_NE(t()->runtime_version(ctx()), nullptr);
}

TEST_P(DevicePluginTest, TooOldRuntimeIsRefusedWithAReason) {
  setenv(v().old_version_var, v().old_version_value, 1);
  start();
  int n = -1;
  ASSERT_EQ(t()->device_count(ctx(), &n), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(n, 0);
  ASSERT_NE(t()->unavailable_reason(ctx()), nullptr);
  std::string reason = t()->unavailable_reason(ctx());
  EXPECT_NE(reason.find(v().old_version_text), std::string::npos) << reason;
  EXPECT_NE(reason.find("the oldest this plugin supports"), std::string::npos) << reason;
}

TEST_P(DevicePluginTest, SeveralThreadsUseThePluginAtOnce) {
  start();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      const size_t n = 64 << 10;
      std::vector<uint8_t> a(n), b(n);
      fill_pattern(a.data(), n, 100 + static_cast<uint32_t>(i));
      for (int round = 0; round < 5; ++round) {
        void* d = nullptr;
        if (t()->mem_alloc(ctx(), i % 2, n, &d) != HMC_PLUGIN_SUCCESS ||
            copy(i % 2, d, a.data(), n, HMC_COPY_HOST_TO_DEVICE) != HMC_PLUGIN_SUCCESS ||
            copy(i % 2, b.data(), d, n, HMC_COPY_DEVICE_TO_HOST) != HMC_PLUGIN_SUCCESS || a != b ||
            t()->mem_free(ctx(), d) != HMC_PLUGIN_SUCCESS)
          ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << h().log_text();
}

TEST_P(DevicePluginTest, FinalizeReleasesWhatTheCallerLeftBehind) {
  start();
  void* d = alloc(0, 4096);
  hmc_device_stream_t* s = nullptr;
  hmc_device_event_t* e = nullptr;
  ASSERT_EQ(t()->stream_create(ctx(), 1, &s), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(t()->event_create(ctx(), 1, &e), HMC_PLUGIN_SUCCESS);
  fakegpu::PtrInfo info;
  fakegpu::Emulator::get(v().name).query(d, &info);
  ASSERT_EQ(info.type, fakegpu::MemType::Device);
  EXPECT_EQ(h().finalize(), HMC_PLUGIN_SUCCESS);
  EXPECT_TRUE(h().logged("1 stream(s), 1 event(s), 1 allocation(s)")) << h().log_text();
  fakegpu::Emulator::get(v().name).query(d, &info);
  EXPECT_EQ(info.type, fakegpu::MemType::Unregistered);  // freed in the runtime
}

INSTANTIATE_TEST_SUITE_P(Vendors, DevicePluginTest, ::testing::ValuesIn(kVendors),
                         [](const ::testing::TestParamInfo<Vendor>& i) {
                           return std::string(i.param.name);
                         });

INSTANTIATE_TEST_SUITE_P(Vendors, DriverLibraryTest, ::testing::Values(kVendors[2], kVendors[3]),
                         [](const ::testing::TestParamInfo<Vendor>& i) {
                           return std::string(i.param.name);
                         });

// ---- vendor specifics ---------------------------------------------------------------------------

// Plugin `name` loaded into h and initialised over a freshly reset emulator; fatal to the test
// when either fails.
void load_and_init(PluginHost& h, const char* name) {
  fakegpu_reset();
  std::string why;
  ASSERT_TRUE(h.load(plugin_path(name), &why)) << why;
  ASSERT_EQ(h.init(), HMC_PLUGIN_SUCCESS);
}

class HipVersionsTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    clear_fake_environment();
    if (!exists(plugin_path("hip"))) GTEST_SKIP() << "the hip plugin was not built";
  }
  void TearDown() override {
    clear_fake_environment();
    fakegpu_reset();
  }
};

// The pointer-type values and the IPC flag changed between HIP 5 and 6; the plugin decodes them
// by the version the runtime reports, whatever the file is called.
TEST_P(HipVersionsTest, PointersAndIpcFollowTheRuntimeVersion) {
  std::string library = fake_path(GetParam());
  if (std::strcmp(GetParam(), "hip6-as-5") == 0) {
    library = fake_path("hip6/libamdhip64.so.6");
    setenv("FAKEGPU_HIP_VERSION", "50221153", 1);
  }
  PluginHost h(std::map<std::string, std::string>{{"HMC_HIP_LIBRARY", library}});
  ASSERT_NO_FATAL_FAILURE(load_and_init(h, "hip"));
  int n = 0;
  ASSERT_EQ(h->device_count(h.ctx(), &n), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(n, 2) << h.log_text();

  fakegpu::Emulator& emu = fakegpu::Emulator::get("hip");
  void* dev1 = nullptr;
  void* pinned = nullptr;
  ASSERT_EQ(emu.alloc(1, 4096, &dev1), fakegpu::Err::Ok);
  ASSERT_EQ(emu.host_alloc(4096, &pinned), fakegpu::Err::Ok);
  hmc_device_ptr_info_t i = query(h, dev1);
  EXPECT_EQ(i.owned, 1);
  EXPECT_EQ(i.device, 1);
  EXPECT_EQ(i.is_host, 0);
  i = query(h, pinned);
  EXPECT_EQ(i.owned, 1);
  EXPECT_EQ(i.is_host, 1);
  int x = 0;
  EXPECT_EQ(query(h, &x).owned, 0);

  // IPC: the peer process opens the handle with the version's flag.
  void* d = nullptr;
  ASSERT_EQ(h->mem_alloc(h.ctx(), 0, 8192, &d), HMC_PLUGIN_SUCCESS);
  std::vector<uint8_t> buf(8192);
  fill_pattern(buf.data(), buf.size(), 21);
  ASSERT_EQ(emu.copy_sync(0, d, buf.data(), buf.size(), fakegpu::Dir::HostToDevice),
            fakegpu::Err::Ok);
  uint8_t handle[HMC_DEVICE_IPC_HANDLE_MAX];
  size_t len = sizeof handle;
  ASSERT_EQ(h->ipc_export(h.ctx(), d, handle, &len), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(run_ipc_peer(kVendors[1], library, hmc::test::to_hex(handle, len), buf.size(), 21), 0);

  EXPECT_EQ(emu.free(dev1), fakegpu::Err::Ok);
  EXPECT_EQ(emu.host_free(pinned), fakegpu::Err::Ok);
  EXPECT_EQ(h->mem_free(h.ctx(), d), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(h.finalize(), HMC_PLUGIN_SUCCESS);
}

INSTANTIATE_TEST_SUITE_P(Flavours, HipVersionsTest,
                         ::testing::Values("hip5/libamdhip64.so.5", "hip6/libamdhip64.so.6",
                                           "hip7/libamdhip64.so.7", "hip6-as-5"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string s = i.param;
                           return s.substr(0, s.find('/')) == "hip6-as-5"
                                      ? std::string("hip6_reporting_5")
                                      : s.substr(0, s.find('/'));
                         });

// Before HIP 7 there is no hipMemGetHandleForAddressRange: dma-buf goes through the HSA runtime
// the HIP library loaded, which answers the offset itself.
TEST(HipDmabuf, ExportsThroughHsaBeforeHip7) {
  clear_fake_environment();
  if (!exists(plugin_path("hip"))) GTEST_SKIP() << "the hip plugin was not built";
  PluginHost h(
      std::map<std::string, std::string>{{"HMC_HIP_LIBRARY", fake_path("hip6/libamdhip64.so.6")}});
  ASSERT_NO_FATAL_FAILURE(load_and_init(h, "hip"));
  ASSERT_TRUE(props_of(h, 0).caps & HMC_DEVICE_CAP_DMABUF) << h.log_text();
  void* d = nullptr;
  ASSERT_EQ(h->mem_alloc(h.ctx(), 0, 3 * 4096, &d), HMC_PLUGIN_SUCCESS);
  std::vector<uint8_t> buf(3 * 4096);
  fill_pattern(buf.data(), buf.size(), 31);
  ASSERT_EQ(fakegpu::Emulator::get("hip").copy_sync(0, d, buf.data(), buf.size(),
                                                    fakegpu::Dir::HostToDevice),
            fakegpu::Err::Ok);
  int fd = -1;
  uint64_t offset = 0;
  ASSERT_EQ(h->dmabuf_export(h.ctx(), static_cast<char*>(d) + 5000, 3000, &fd, &offset),
            HMC_PLUGIN_SUCCESS)
      << h.log_text();
  EXPECT_EQ(offset, 5000u);
  void* m = mmap(nullptr, 3 * 4096, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED);
  EXPECT_EQ(std::memcmp(static_cast<char*>(m) + offset, buf.data() + 5000, 3000), 0);
  munmap(m, 3 * 4096);
  close(fd);
  EXPECT_EQ(h->mem_free(h.ctx(), d), HMC_PLUGIN_SUCCESS);
  fakegpu_reset();
}

// The plugin works on each device's primary context and leaves the application's current context
// as it found it (PyTorch keeps its own current device per thread).
TEST(CudaContext, PrimaryContextIsUsedAndTheCallersContextRestored) {
  clear_fake_environment();
  if (!exists(plugin_path("cuda"))) GTEST_SKIP() << "the cuda plugin was not built";
  PluginHost h(
      std::map<std::string, std::string>{{"HMC_CUDA_LIBRARY", fake_path("cuda/libcuda.so.1")}});
  ASSERT_NO_FATAL_FAILURE(load_and_init(h, "cuda"));

  // The application's side: the same driver library, device 1's primary context current.
  void* lib = dlopen(fake_path("cuda/libcuda.so.1").c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  using Retain = int (*)(void**, int);
  using SetCurrent = int (*)(void*);
  using GetCurrent = int (*)(void**);
  auto retain = reinterpret_cast<Retain>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
  auto set_current = reinterpret_cast<SetCurrent>(dlsym(lib, "cuCtxSetCurrent"));
  auto get_current = reinterpret_cast<GetCurrent>(dlsym(lib, "cuCtxGetCurrent"));
  void* app_ctx = nullptr;
  ASSERT_EQ(retain(&app_ctx, 1), 0);
  ASSERT_EQ(set_current(app_ctx), 0);

  void* d = nullptr;
  ASSERT_EQ(h->mem_alloc(h.ctx(), 0, 4096, &d), HMC_PLUGIN_SUCCESS);
  void* now = nullptr;
  ASSERT_EQ(get_current(&now), 0);
  EXPECT_EQ(now, app_ctx);
  fakegpu::PtrInfo info;
  fakegpu::Emulator::get("cuda").query(d, &info);
  EXPECT_EQ(info.device, 0);  // allocated on the plugin's device, not the current one
  EXPECT_EQ(h->mem_free(h.ctx(), d), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(set_current(nullptr), 0);
  EXPECT_EQ(h.finalize(), HMC_PLUGIN_SUCCESS);
}

}  // namespace
