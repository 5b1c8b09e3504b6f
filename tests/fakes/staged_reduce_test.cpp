// Reductions of device memory (coll/staged_reduce.h) over the emulated runtimes and the SDK's
// device template: staged through pinned host buffers for the four vendor plugins (which have
// no reduce slot), on the device through the template's reduce slot (its stand-in runtime runs
// it on the stream's thread). Several chunks per reduction, so that the pipeline has pieces in
// flight; integers checked exactly, floats within rounding.
#include "coll/staged_reduce.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "coll/reduce.h"
#include "coll/schedule.h"
#include "device/copy.h"
#include "device/registry.h"
#include "fake_runtimes.h"
#include "fakegpu.h"
#include "plugin/loader.h"
#include "util/config.h"
#include "util/status.h"

namespace {

using hmc::DeviceRegistry;
using hmc::coll::reduce_memory;
using hmc::coll::ReducedOn;

using hmc::fakes::kRuntimes;
using hmc::fakes::Runtime;

constexpr size_t kChunk = 64 << 10;

class StagedReduceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const Runtime& r : kRuntimes) {
      std::string p = std::string(HMC_TEST_PLUGIN_DIR "/libhmc-device-") + r.name + ".so";
      if (access(p.c_str(), R_OK) != 0) GTEST_SKIP() << p << " is not built";
    }
    if (access(HMC_TEMPLATE_DEVICE_PLUGIN, R_OK) != 0)
      GTEST_SKIP() << HMC_TEMPLATE_DEVICE_PLUGIN << " is not built";
    setenv("HMC_PLUGIN_PATH", HMC_TEST_PLUGIN_DIR ":" HMC_TEMPLATE_DEVICE_PLUGIN, 1);
    unsetenv("HMC_DEVICE_PLUGINS");
    setenv("HMC_TEMPLATE_EMULATED_DEVICES", "1", 1);
    hmc::fakes::use_fake_runtimes();
    fakegpu_reset();
    ASSERT_NO_FATAL_FAILURE(hmc::fakes::load_device_registry(
        cfg_, loader_, registry_, hmc::fakes::staged_copy_settings(kChunk, 3)));
    for (const char* d : {"cuda:0", "hip:0", "mlu:0", "musa:0", "template:0"})
      ASSERT_NE(registry_->find(d), nullptr) << d;
  }

  void TearDown() override {
    hmc::fakes::release_device_registry(loader_, registry_);
    unsetenv("HMC_TEMPLATE_EMULATED_DEVICES");
    fakegpu_reset();
  }

  // `bytes` in `mem` ("host" or a device), holding `init`.
  void* place(const std::string& mem, const std::vector<uint8_t>& init) {
    if (mem == "host") {
      host_.push_back(init);
      return host_.back().data();
    }
    void* p = nullptr;
    EXPECT_EQ(registry_->alloc(mem, init.size(), &p), HMC_SUCCESS) << hmc::last_error();
    EXPECT_EQ(registry_->copy(p, init.data(), init.size()), HMC_SUCCESS) << hmc::last_error();
    return p;
  }
  std::vector<uint8_t> read(const void* p, size_t bytes) {
    std::vector<uint8_t> v(bytes);
    EXPECT_EQ(registry_->copy(v.data(), p, bytes), HMC_SUCCESS) << hmc::last_error();
    return v;
  }

  // Reduces src (in src_mem) into dst (in dst_mem) and checks the result against the host
  // reduction of the same operands, and where it ran.
  void check(const std::string& dst_mem, const std::string& src_mem, hmc_dtype_t dtype,
             hmc_reduce_op_t op, size_t count, ReducedOn want_on) {
    SCOPED_TRACE(dst_mem + " <- " + src_mem + ", dtype " + std::to_string(dtype) + ", op " +
                 std::to_string(op) + ", " + std::to_string(count) + " elements");
    size_t es = hmc::coll::dtype_size(dtype);
    std::vector<uint8_t> a(count * es), b(count * es);
    fill(a.data(), dtype, count, 1);
    fill(b.data(), dtype, count, 2);
    std::vector<uint8_t> want = a;
    ASSERT_EQ(hmc::coll::reduce_into(want.data(), b.data(), count, dtype, op), HMC_SUCCESS);
    void* dst = place(dst_mem, a);
    void* src = place(src_mem, b);
    ReducedOn on = ReducedOn::Host;
    ASSERT_EQ(reduce_memory(*registry_, dst, src, count, dtype, op, &on), HMC_SUCCESS)
        << hmc::last_error();
    EXPECT_EQ(static_cast<int>(on), static_cast<int>(want_on));
    std::vector<uint8_t> got = read(dst, a.size());
    for (size_t i = 0; i < count; ++i) {
      if (dtype == HMC_DTYPE_F32) {
        float g, w;
        std::memcpy(&g, &got[i * 4], 4);
        std::memcpy(&w, &want[i * 4], 4);
        ASSERT_NEAR(g, w, 1e-6 * std::fabs(w) + 1e-6) << "element " << i;
      } else {
        ASSERT_EQ(std::memcmp(&got[i * es], &want[i * es], es), 0) << "element " << i;
      }
    }
    if (dst_mem != "host") {
      EXPECT_EQ(registry_->free(dst), HMC_SUCCESS);
    }
    if (src_mem != "host") {
      EXPECT_EQ(registry_->free(src), HMC_SUCCESS);
    }
  }

  static void fill(uint8_t* p, hmc_dtype_t dtype, size_t count, int seed) {
    for (size_t i = 0; i < count; ++i) {
      int k = int((i * 31 + size_t(seed) * 17) % 2001) - 1000;
      switch (dtype) {
        case HMC_DTYPE_F32: {
          float f = float(k) * 0.013f;
          std::memcpy(p + i * 4, &f, 4);
          break;
        }
        case HMC_DTYPE_I32: {
          int32_t x = k * 1000003;
          std::memcpy(p + i * 4, &x, 4);
          break;
        }
        case HMC_DTYPE_I64: {
          int64_t x = int64_t(k) * 77777777777LL;
          std::memcpy(p + i * 8, &x, 8);
          break;
        }
        case HMC_DTYPE_BF16: {  // k / 8, its low bits cut off beyond 8 significant bits
          float f = float(k) / 8.0f;
          uint32_t bits;
          std::memcpy(&bits, &f, 4);
          uint16_t h = uint16_t(bits >> 16);
          std::memcpy(p + i * 2, &h, 2);
          break;
        }
        default:
          std::memset(p + i * hmc::coll::dtype_size(dtype), k & 0xff, hmc::coll::dtype_size(dtype));
      }
    }
  }

  hmc::Config cfg_;
  std::unique_ptr<hmc::plugin::Loader> loader_;
  std::unique_ptr<DeviceRegistry> registry_;
  std::vector<std::vector<uint8_t>> host_;
};

// 100003 int32 are 6+ chunks: pieces in flight at every stage.
constexpr size_t kMany = 100003;

TEST_F(StagedReduceTest, VendorDeviceOutputIsStagedThroughHostMemory) {
  for (const char* dev : {"cuda:0", "hip:0", "mlu:0", "musa:0"}) {
    check(dev, "host", HMC_DTYPE_I32, HMC_OP_SUM, kMany, ReducedOn::Staged);
    check(dev, "host", HMC_DTYPE_F32, HMC_OP_SUM, kMany, ReducedOn::Staged);
  }
  check("cuda:0", "host", HMC_DTYPE_I64, HMC_OP_MAX, 5, ReducedOn::Staged);
  check("hip:0", "host", HMC_DTYPE_I32, HMC_OP_AVG, 1, ReducedOn::Staged);  // sums
}

TEST_F(StagedReduceTest, DeviceSourcesAcrossVendorsAreStaged) {
  check("host", "mlu:0", HMC_DTYPE_I32, HMC_OP_MIN, kMany, ReducedOn::Staged);
  check("musa:0", "cuda:0", HMC_DTYPE_F32, HMC_OP_PROD, kMany, ReducedOn::Staged);
  check("cuda:0", "cuda:0", HMC_DTYPE_I64, HMC_OP_SUM, 3 * kChunk / 8 + 5, ReducedOn::Staged);
  check("template:0", "hip:0", HMC_DTYPE_I32, HMC_OP_SUM, kMany, ReducedOn::Staged);
}

TEST_F(StagedReduceTest, TemplatePluginReducesOnItsDevice) {
  // From host memory: uploaded in chunks, reduced by the plugin's reduce slot.
  check("template:0", "host", HMC_DTYPE_I32, HMC_OP_SUM, kMany, ReducedOn::Device);
  check("template:0", "host", HMC_DTYPE_F32, HMC_OP_SUM, kMany, ReducedOn::Device);
  check("template:0", "host", HMC_DTYPE_BF16, HMC_OP_SUM, 4097, ReducedOn::Device);
  check("template:0", "host", HMC_DTYPE_I64, HMC_OP_MIN, 7, ReducedOn::Device);
  check("template:0", "host", HMC_DTYPE_I32, HMC_OP_AVG, 9, ReducedOn::Device);  // sums
  // Both on the device: one reduction.
  check("template:0", "template:0", HMC_DTYPE_I32, HMC_OP_PROD, kMany, ReducedOn::Device);
  check("template:0", "template:0", HMC_DTYPE_F32, HMC_OP_MAX, kMany, ReducedOn::Device);
}

// device.h has no bitwise operations: a plugin with a reduce slot is not asked, the host reduces.
TEST_F(StagedReduceTest, BitwiseOperationsAreReducedOnTheHost) {
  check("template:0", "host", HMC_DTYPE_I32, HMC_OP_BXOR, kMany, ReducedOn::Staged);
  check("template:0", "template:0", HMC_DTYPE_I64, HMC_OP_BAND, 4097, ReducedOn::Staged);
  check("cuda:0", "host", HMC_DTYPE_I32, HMC_OP_BOR, 33, ReducedOn::Staged);
  check("host", "host", HMC_DTYPE_I64, HMC_OP_BXOR, 1000, ReducedOn::Host);
  void* d = nullptr;
  ASSERT_EQ(registry_->alloc("template:0", 64, &d), HMC_SUCCESS);
  std::vector<float> h(16);
  EXPECT_EQ(reduce_memory(*registry_, d, h.data(), 16, HMC_DTYPE_F32, HMC_OP_BAND),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(hmc::last_error().find("band"), std::string::npos) << hmc::last_error();
  EXPECT_EQ(registry_->free(d), HMC_SUCCESS);
}

TEST_F(StagedReduceTest, HostMemoryIsReducedInPlace) {
  check("host", "host", HMC_DTYPE_I32, HMC_OP_SUM, 1000, ReducedOn::Host);
}

TEST_F(StagedReduceTest, ArgumentsAreChecked) {
  void* d = nullptr;
  ASSERT_EQ(registry_->alloc("cuda:0", 64, &d), HMC_SUCCESS);
  std::vector<int32_t> h(16);
  EXPECT_EQ(reduce_memory(*registry_, d, h.data(), 16, hmc_dtype_t(99), HMC_OP_SUM),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(reduce_memory(*registry_, d, h.data(), 16, HMC_DTYPE_I32, hmc_reduce_op_t(99)),
            HMC_ERR_INVALID_ARGUMENT);
  // 17 int32 overrun the 64-byte allocation.
  std::vector<int32_t> more(17);
  EXPECT_EQ(reduce_memory(*registry_, d, more.data(), 17, HMC_DTYPE_I32, HMC_OP_SUM),
            HMC_ERR_OUT_OF_BOUNDS);
  EXPECT_EQ(reduce_memory(*registry_, d, h.data(), 0, HMC_DTYPE_I32, HMC_OP_SUM), HMC_SUCCESS);
  EXPECT_EQ(registry_->free(d), HMC_SUCCESS);
}

}  // namespace
