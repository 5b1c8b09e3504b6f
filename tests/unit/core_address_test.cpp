// Address blobs and region descriptors: round trips and rejection of foreign or damaged bytes.
#include <gtest/gtest.h>

#include "net/region.h"
#include "peer/address.h"

using namespace hmc;

TEST(Address, RoundTrip) {
  Address a;
  a.host_id = "boot-1/host";
  a.hostname = "host";
  a.pid = 42;
  a.context_id = 0x1122334455667788ull;
  a.unix_name = "hmc-42-x";
  a.tcp_host = "127.0.0.1";
  a.tcp_port = 5555;
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
