// Address blobs and region descriptors: round trips and rejection of foreign or damaged bytes.
#include <gtest/gtest.h>

#include "net/region.h"
#include "peer/address.h"
#include "util/status.h"

using namespace hmc;

TEST(Address, RoundTrip) {
  // host_id, hostname, pid, context_id, unix_name, tcp_host, tcp_port
  const Address a{"boot-1/host", "host", 42, 0x1122334455667788ull, "hmc-42-x", "127.0.0.1", 5555};
  auto blob = encode_address(a);
  Address b;
  ASSERT_EQ(decode_address(blob.data(), blob.size(), &b), HMC_SUCCESS);
  EXPECT_EQ(b.host_id, a.host_id);
  EXPECT_EQ(b.pid, 42);
  EXPECT_EQ(b.context_id, a.context_id);
  EXPECT_EQ(b.unix_name, a.unix_name);
  EXPECT_EQ(b.tcp_port, 5555);
  // Every truncation is refused.
  for (size_t n = 0; n < blob.size(); ++n)
    EXPECT_NE(decode_address(blob.data(), n, &b), HMC_SUCCESS) << n;
}

TEST(Address, ForeignBytesAndVersions) {
  Address b;
  const char junk[] = "definitely not an address";
  EXPECT_EQ(decode_address(junk, sizeof junk, &b), HMC_ERR_INVALID_ARGUMENT);
  Address a;
  a.tcp_host = "h";
  a.tcp_port = 1;
  auto blob = encode_address(a);
  blob[4] = 99;  // version
  EXPECT_EQ(decode_address(blob.data(), blob.size(), &b), HMC_ERR_VERSION);
}

TEST(Address, HostPort) {
  Address a;
  ASSERT_EQ(parse_host_port("127.0.0.1:8080", &a), HMC_SUCCESS);
  EXPECT_EQ(a.tcp_host, "127.0.0.1");
  EXPECT_EQ(a.tcp_port, 8080);
  ASSERT_EQ(parse_host_port("[::1]:9", &a), HMC_SUCCESS);
  EXPECT_EQ(a.tcp_host, "::1");
  EXPECT_EQ(parse_host_port("nohost", &a), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(parse_host_port("h:0", &a), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(parse_host_port("h:70000", &a), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(parse_host_port("h:12x", &a), HMC_ERR_INVALID_ARGUMENT);
}

TEST(RegionDescriptor, RoundTripWithoutPlugins) {
  Region r;
  char buf[100];
  r.addr = buf;
  r.size = sizeof buf;
  r.access = HMC_ACCESS_REMOTE_READ;
  auto packed = pack_region(r);
  PackedRegion p;
  ASSERT_EQ(unpack_region(packed.data(), packed.size(), &p), HMC_SUCCESS);
  EXPECT_EQ(p.base, reinterpret_cast<uint64_t>(buf));
  EXPECT_EQ(p.size, sizeof buf);
  EXPECT_EQ(p.access, HMC_ACCESS_REMOTE_READ);
  EXPECT_TRUE(p.rkeys.empty());
  for (size_t n = 0; n < packed.size(); ++n)
    EXPECT_NE(unpack_region(packed.data(), n, &p), HMC_SUCCESS) << n;
}

// One key per registered net device, found by (plugin, device): a path on another device of
// the same plugin has no key (and reaches device memory by staging instead).
TEST(RegionDescriptor, OneKeyPerNetDevice) {
  NetPlugin net(nullptr, nullptr, "hoststage");
  NetDevice tcp, shm;
  tcp.plugin = shm.plugin = &net;
  tcp.name = "tcp";
  shm.name = "shm";
  Region r;
  char buf[64];
  r.addr = buf;
  r.size = sizeof buf;
  r.id = 7;
  r.context_id = 9;
  r.staged = true;
  r.registrations.push_back({&tcp, nullptr, {1, 2, 3}});
  r.registrations.push_back({&shm, nullptr, {4, 5}});
  EXPECT_EQ(r.registration_on(&shm), &r.registrations[1]);
  auto packed = pack_region(r);
  PackedRegion p;
  ASSERT_EQ(unpack_region(packed.data(), packed.size(), &p), HMC_SUCCESS);
  ASSERT_EQ(p.rkeys.size(), 2u);
  ASSERT_NE(p.key_for("hoststage", "tcp"), nullptr);
  EXPECT_EQ(*p.key_for("hoststage", "tcp"), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(*p.key_for("hoststage", "shm"), (std::vector<uint8_t>{4, 5}));
  EXPECT_EQ(p.key_for("hoststage", "rdma0"), nullptr);
  EXPECT_EQ(p.key_for("ucx", "tcp"), nullptr);
  EXPECT_EQ(p.region_id, 7u);
  EXPECT_EQ(p.flags, kRegionFlagStaged);
}

// More keys than a reader takes fail loudly, naming the bound; a version 1 descriptor (one key
// per plugin, net ABI 1) is refused as a version mismatch.
TEST(RegionDescriptor, TooManyKeysAndOldVersionsAreRefused) {
  Region r;
  char buf[8];
  r.addr = buf;
  r.size = sizeof buf;
  auto packed = pack_region(r);
  // The key count sits right after magic (4), version (2), base, size (8 each) and access (4).
  const size_t count_at = 4 + 2 + 8 + 8 + 4;
  uint32_t many = kMaxRegionKeys + 1;
  memcpy(packed.data() + count_at, &many, sizeof many);
  PackedRegion p;
  EXPECT_EQ(unpack_region(packed.data(), packed.size(), &p), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("4097 keys"), std::string::npos) << last_error();
  packed = pack_region(r);
  uint16_t v1 = 1;
  memcpy(packed.data() + 4, &v1, sizeof v1);
  EXPECT_EQ(unpack_region(packed.data(), packed.size(), &p), HMC_ERR_VERSION);
}
