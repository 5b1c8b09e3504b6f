// Bad input at the public C API, in one process: every call answers with a distinct status and
// a message saying what was wrong, never a crash.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstddef>
#include <cstring>
#include <set>
#include <string>

#include "hmc/hmc.h"

namespace {

class ApiArgs : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("HMC_PLUGIN_PATH", HMC_TEST_PLUGIN_DIR, 1);
    hmc_context_options_t o{};
    o.struct_size = sizeof o;
    o.progress_thread = 0;
    ASSERT_EQ(hmc_context_create(&o, &ctx), HMC_SUCCESS) << hmc_last_error();
  }
  void TearDown() override {
    if (ctx) {
      EXPECT_EQ(hmc_context_destroy(ctx), HMC_SUCCESS);
    }
    unsetenv("HMC_PLUGIN_PATH");
  }
  static std::string err() { return hmc_last_error(); }
  hmc_context_t ctx = nullptr;
};

TEST_F(ApiArgs, NullOutputsAndHandles) {
  EXPECT_EQ(hmc_context_create(nullptr, nullptr), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err().find("out"), std::string::npos) << err();
  EXPECT_EQ(hmc_context_destroy(nullptr), HMC_ERR_INVALID_ARGUMENT);
  int n;
  EXPECT_EQ(hmc_device_count(ctx, nullptr), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_device_count(reinterpret_cast<hmc_context_t>(&n), &n), HMC_ERR_INVALID_HANDLE);
  EXPECT_NE(err().find("not a live"), std::string::npos) << err();
  hmc_request_t bogus = reinterpret_cast<hmc_request_t>(&n);
  EXPECT_EQ(hmc_request_test(bogus, nullptr), HMC_ERR_INVALID_HANDLE);
  EXPECT_EQ(hmc_request_wait(nullptr, 0, nullptr), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_peer_close(reinterpret_cast<hmc_peer_t>(&n)), HMC_ERR_INVALID_HANDLE);
}

// A struct smaller than this header's is refused by name, with the size expected: the info
// structs and the options alike.
TEST_F(ApiArgs, StructSizeBelowTheHeadersIsRefused) {
  hmc_device_info_t d{};
  d.struct_size = sizeof d - 1;
  EXPECT_EQ(hmc_device_info(ctx, 0, &d), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err().find("info->struct_size is " + std::to_string(sizeof d - 1) +
                       ", expected at least " + std::to_string(sizeof d)),
            std::string::npos)
      << err();
  d.struct_size = sizeof d;
  EXPECT_EQ(hmc_device_info(ctx, 0, &d), HMC_SUCCESS) << err();
  EXPECT_EQ(d.is_host, 1);
  hmc_net_device_info_t n{};
  n.struct_size = offsetof(hmc_net_device_info_t, measured_bandwidth_MBps);
  EXPECT_EQ(hmc_net_device_info(ctx, 0, &n), HMC_ERR_INVALID_ARGUMENT);
  hmc_context_options_t o{};
  o.struct_size = sizeof(uint32_t);
  hmc_context_t other = nullptr;
  EXPECT_EQ(hmc_context_create(&o, &other), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err().find("opts->struct_size is 4"), std::string::npos) << err();
  EXPECT_EQ(other, nullptr);
  hmc_comm_options_t c{};
  c.struct_size = offsetof(hmc_comm_options_t, timeout_ms);
  hmc_comm_t comm = nullptr;
  EXPECT_EQ(hmc_comm_create(ctx, &c, &comm), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(err().find("opts->struct_size"), std::string::npos) << err();
}

TEST_F(ApiArgs, MemoryAllocation) {
  void* p = nullptr;
  EXPECT_EQ(hmc_mem_alloc(ctx, "host", 0, &p), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_mem_alloc(ctx, "nosuch:0", 64, &p), HMC_ERR_NOT_FOUND);
  EXPECT_NE(err().find("nosuch:0"), std::string::npos) << err();
  EXPECT_NE(err().find("host"), std::string::npos) << "lists the devices: " << err();
  EXPECT_EQ(hmc_mem_alloc(ctx, "host", SIZE_MAX, &p), HMC_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(hmc_mem_alloc(ctx, "host", 4096, &p), HMC_SUCCESS);
  memset(p, 0xab, 4096);
  char local[16];
  EXPECT_EQ(hmc_mem_free(ctx, local), HMC_ERR_INVALID_HANDLE);
  EXPECT_EQ(hmc_mem_free(ctx, p), HMC_SUCCESS);
  EXPECT_EQ(hmc_mem_free(ctx, p), HMC_ERR_INVALID_HANDLE);
  EXPECT_NE(err().find("already freed"), std::string::npos) << err();
}

TEST_F(ApiArgs, Copy) {
  char a[64], b[64];
  memset(a, 7, sizeof a);
  EXPECT_EQ(hmc_mem_copy(ctx, b, a, sizeof a), HMC_SUCCESS);
  EXPECT_EQ(memcmp(a, b, sizeof a), 0);
  EXPECT_EQ(hmc_mem_copy(ctx, nullptr, a, 1), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_mem_copy(ctx, b, nullptr, 0), HMC_SUCCESS);
  void* p = nullptr;
  ASSERT_EQ(hmc_mem_alloc(ctx, "host", 100, &p), HMC_SUCCESS);
  EXPECT_EQ(hmc_mem_copy(ctx, static_cast<char*>(p) + 90, a, 20), HMC_ERR_OUT_OF_BOUNDS);
  EXPECT_EQ(hmc_mem_free(ctx, p), HMC_SUCCESS);
}

TEST_F(ApiArgs, Registration) {
  static char buf[4096];
  hmc_region_t r = nullptr;
  EXPECT_EQ(hmc_mem_register(ctx, buf, 0, HMC_ACCESS_REMOTE_READ, &r), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_mem_register(ctx, nullptr, 10, HMC_ACCESS_REMOTE_READ, &r),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_mem_register(ctx, buf, 10, 0x100, &r), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_mem_register(ctx, buf, SIZE_MAX, HMC_ACCESS_REMOTE_READ, &r),
            HMC_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(
      hmc_mem_register(ctx, buf, sizeof buf, HMC_ACCESS_REMOTE_READ | HMC_ACCESS_REMOTE_WRITE, &r),
      HMC_SUCCESS);
  size_t len = 0;
  EXPECT_EQ(hmc_region_pack(r, nullptr, &len), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_GT(len, 0u);
  std::string desc(len, '\0');
  EXPECT_EQ(hmc_region_pack(r, desc.data(), &len), HMC_SUCCESS);
  EXPECT_EQ(hmc_mem_deregister(r), HMC_SUCCESS);
  EXPECT_EQ(hmc_mem_deregister(r), HMC_ERR_INVALID_HANDLE);
}

TEST_F(ApiArgs, Addresses) {
  size_t len = 0;
  EXPECT_EQ(hmc_address(ctx, nullptr, &len), HMC_ERR_INVALID_ARGUMENT);
  ASSERT_GT(len, 0u);
  ASSERT_LE(len, HMC_ADDRESS_MAX);
  char addr[HMC_ADDRESS_MAX];
  EXPECT_EQ(hmc_address(ctx, addr, &len), HMC_SUCCESS);
  hmc_peer_t peer = nullptr;
  const char junk[] = "garbage";
  EXPECT_EQ(hmc_connect(ctx, junk, sizeof junk, 100, &peer), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_connect(ctx, addr, len, -5, &peer), HMC_ERR_INVALID_ARGUMENT);
  len = sizeof addr;
  EXPECT_EQ(hmc_address_from_host("localhost", addr, &len), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_accept(ctx, 0, &peer), HMC_ERR_TIMEOUT);

  hmc_accept_stats_t stats{};
  EXPECT_EQ(hmc_accept_stats(ctx, nullptr), HMC_ERR_INVALID_ARGUMENT);
  stats.struct_size = sizeof stats - 1;
  EXPECT_EQ(hmc_accept_stats(ctx, &stats), HMC_ERR_INVALID_ARGUMENT);
  stats.struct_size = sizeof stats;
  ASSERT_EQ(hmc_accept_stats(ctx, &stats), HMC_SUCCESS);
  EXPECT_EQ(stats.accepted + stats.failed + stats.timed_out + stats.dropped, 0u);
  EXPECT_EQ(stats.last_failure_status, HMC_SUCCESS);
  EXPECT_STREQ(stats.last_failure, "");
}

TEST_F(ApiArgs, StatusStringsAreDistinct) {
  std::set<std::string> seen;
  for (int s = HMC_ERR_INTERNAL; s <= HMC_IN_PROGRESS; ++s)
    EXPECT_TRUE(seen.insert(hmc_status_string(static_cast<hmc_status_t>(s))).second) << s;
  EXPECT_STREQ(hmc_status_string(static_cast<hmc_status_t>(12345)), "HMC_ERR_UNKNOWN");
}

TEST(ApiConfig, InvalidValueFailsCreateNamingTheVariable) {
  setenv("HMC_TIMEOUT_MS", "soon", 1);
  hmc_context_t ctx = nullptr;
  EXPECT_EQ(hmc_context_create(nullptr, &ctx), HMC_ERR_CONFIG);
  EXPECT_NE(std::string(hmc_last_error()).find("HMC_TIMEOUT_MS"), std::string::npos);
  unsetenv("HMC_TIMEOUT_MS");
}

}  // namespace

namespace {
TEST(ApiConfig, TableWithoutContextAndSecretsHidden) {
  setenv("HMC_TIMEOUT_MS", "soon", 1);
  setenv("HMC_AUTH_TOKEN", "s3cret", 1);
  int n = 0;
  ASSERT_EQ(hmc_config_count(nullptr, &n), HMC_SUCCESS);
  bool saw_timeout = false, saw_token = false;
  for (int i = 0; i < n; ++i) {
    hmc_config_entry_t e{};
    e.struct_size = sizeof e;
    ASSERT_EQ(hmc_config_entry(nullptr, i, &e), HMC_SUCCESS);
    if (std::string(e.name) == "HMC_TIMEOUT_MS") {
      saw_timeout = true;
      EXPECT_STREQ(e.value, "soon");  // shown as set, even though it is invalid
      EXPECT_EQ(e.is_set, 1);
      EXPECT_STREQ(e.default_value, "30000");
    }
    if (std::string(e.name) == "HMC_AUTH_TOKEN") {
      saw_token = true;
      EXPECT_STREQ(e.value, "(set)");
    }
  }
  EXPECT_TRUE(saw_timeout);
  EXPECT_TRUE(saw_token);
  hmc_config_entry_t e{};
  e.struct_size = sizeof e;
  EXPECT_EQ(hmc_config_entry(nullptr, n, &e), HMC_ERR_NOT_FOUND);
  e.struct_size = 4;
  EXPECT_EQ(hmc_config_entry(nullptr, 0, &e), HMC_ERR_INVALID_ARGUMENT);
  unsetenv("HMC_TIMEOUT_MS");
  unsetenv("HMC_AUTH_TOKEN");
}
}  // namespace
