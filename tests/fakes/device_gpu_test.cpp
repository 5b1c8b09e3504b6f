// The device plugins on real hardware: each plugin over its vendor's installed runtime (the
// default library names, no emulation). Skipped, with the plugin's reason, where the machine has
// no such device; labelled `gpu` in CTest.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "plugin_host.h"

namespace {

using hmc::test::check_pattern;
using hmc::test::fill_pattern;
using hmc::test::PluginHost;
using hmc::test::wait_event;

class RealDeviceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RealDeviceTest, AllocatesCopiesAndQueries) {
  std::string plugin = std::string(HMC_TEST_PLUGIN_DIR "/libhmc-device-") + GetParam() + ".so";
  if (access(plugin.c_str(), R_OK) != 0) GTEST_SKIP() << plugin << " was not built";
  PluginHost h;  // no configuration: the vendor's default library
  std::string why;
  ASSERT_TRUE(h.load(plugin, &why)) << why;
  ASSERT_EQ(h.init(), HMC_PLUGIN_SUCCESS);
  int n = 0;
  ASSERT_EQ(h->device_count(h.ctx(), &n), HMC_PLUGIN_SUCCESS);
  if (n == 0) GTEST_SKIP() << "no " << GetParam() << " device: " << h->unavailable_reason(h.ctx());

  hmc_device_props_t p{};
  p.hdr = HMC_ABI_HEADER_INIT(hmc_device_props_t);
  ASSERT_EQ(h->device_info(h.ctx(), 0, &p), HMC_PLUGIN_SUCCESS);
  std::printf("%s: %s, %s, %llu bytes, caps 0x%x, %s\n", GetParam(), p.name,
              p.pci_bus_id ? p.pci_bus_id : "-", static_cast<unsigned long long>(p.mem_bytes),
              p.caps, h->runtime_version(h.ctx()));
  EXPECT_GT(p.mem_bytes, 0u);

  const size_t size = 8 << 20;
  void* d = nullptr;
  void* pinned = nullptr;
  ASSERT_EQ(h->mem_alloc(h.ctx(), 0, size, &d), HMC_PLUGIN_SUCCESS) << h.log_text();
  ASSERT_EQ(h->host_alloc(h.ctx(), size, &pinned), HMC_PLUGIN_SUCCESS) << h.log_text();
  std::vector<uint8_t> back(size);
  fill_pattern(pinned, size, 42);
  hmc_device_stream_t* s = nullptr;
  hmc_device_event_t* e = nullptr;
  ASSERT_EQ(h->stream_create(h.ctx(), 0, &s), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(h->event_create(h.ctx(), 0, &e), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(h->copy_async(s, d, pinned, size, HMC_COPY_HOST_TO_DEVICE), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(h->copy_async(s, back.data(), d, size, HMC_COPY_DEVICE_TO_HOST), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(h->event_record(e, s), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(wait_event(h.table(), e), HMC_PLUGIN_SUCCESS) << h.log_text();
  EXPECT_TRUE(check_pattern(back.data(), size, 42));

  hmc_device_ptr_info_t info{};
  info.hdr = HMC_ABI_HEADER_INIT(hmc_device_ptr_info_t);
  ASSERT_EQ(h->ptr_query(h.ctx(), static_cast<char*>(d) + 100, &info), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(info.owned, 1);
  EXPECT_EQ(info.device, 0);
  EXPECT_EQ(info.base, reinterpret_cast<uintptr_t>(d));
  if (p.caps & HMC_DEVICE_CAP_DMABUF) {
    int fd = -1;
    uint64_t offset = 0;
    EXPECT_EQ(h->dmabuf_export(h.ctx(), d, size, &fd, &offset), HMC_PLUGIN_SUCCESS) << h.log_text();
    if (fd >= 0) close(fd);
  }
  EXPECT_EQ(h->event_destroy(e), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(h->stream_destroy(s), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(h->host_free(h.ctx(), pinned), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(h->mem_free(h.ctx(), d), HMC_PLUGIN_SUCCESS);
}

INSTANTIATE_TEST_SUITE_P(Vendors, RealDeviceTest, ::testing::Values("cuda", "hip", "mlu", "musa"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

}  // namespace
