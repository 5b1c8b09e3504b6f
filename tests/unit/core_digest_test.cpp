// SHA-256 (FIPS 180-4 examples), HMAC-SHA256 (RFC 4231 test cases) and the constant-time compare
// of util/digest.h: the known answers that keep the token challenge's bytes on the wire fixed.
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <string>

#include "util/digest.h"

using namespace hmc;

namespace {

std::string hex(const Sha256Digest& d) {
  return fmt::format("{:02x}", fmt::join(d, ""));
}
std::string sha_hex(const std::string& s) {
  Sha256Digest d;
  sha256(s.data(), s.size(), &d);
  return hex(d);
}
std::string hmac_hex(const std::string& key, const std::string& msg) {
  Sha256Digest d;
  hmac_sha256(key.data(), key.size(), msg.data(), msg.size(), &d);
  return hex(d);
}

}  // namespace

TEST(CoreDigest, Fips180Vectors) {
  EXPECT_EQ(sha_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      sha_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
              "klmnopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(CoreDigest, HmacRfc4231Vectors) {
  EXPECT_EQ(hmac_hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hmac_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hmac_hex(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  EXPECT_EQ(hmac_hex(key4, std::string(50, '\xcd')),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Test case 5 specifies the output truncated to 128 bits.
  EXPECT_EQ(hmac_hex(std::string(20, '\x0c'), "Test With Truncation").substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
  // Keys longer than the block are hashed first.
  EXPECT_EQ(
      hmac_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(hmac_hex(std::string(131, '\xaa'),
                     "This is a test using a larger than block-size key and a larger than "
                     "block-size data. The key needs to be hashed before being used by the HMAC "
                     "algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(CoreDigest, EmptyInputsEvenAsNullPointers) {
  const std::string empty_hmac = "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad";
  EXPECT_EQ(hmac_hex("", ""), empty_hmac);
  Sha256Digest d;
  hmac_sha256(nullptr, 0, nullptr, 0, &d);
  EXPECT_EQ(hex(d), empty_hmac);
  sha256(nullptr, 0, &d);
  EXPECT_EQ(hex(d), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(CoreDigest, ConstantTimeEqual) {
  const uint8_t a[4] = {1, 2, 3, 4};
  const uint8_t b[4] = {1, 2, 3, 4};
  const uint8_t c[4] = {1, 2, 3, 5};
  const uint8_t d[4] = {0, 2, 3, 4};
  EXPECT_TRUE(constant_time_equal(a, b, 4));
  EXPECT_FALSE(constant_time_equal(a, c, 4));
  EXPECT_FALSE(constant_time_equal(a, d, 4));
  EXPECT_TRUE(constant_time_equal(a, c, 3));  // only the first len bytes count
  EXPECT_TRUE(constant_time_equal(a, d, 0));
}
