// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the control plane's token challenge.
// Written here so that the core needs no crypto library; checked against the FIPS 180-4 and
// RFC 4231 vectors in tests/unit/control_sha256_test.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace hmc::control {

using Digest = std::array<uint8_t, 32>;

// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t len);
  Digest finish();  // the object must not be updated afterwards

 private:
  void compress(const uint8_t block[64]);
  uint32_t h_[8];
  uint8_t block_[64];
  size_t block_len_ = 0;
  uint64_t total_len_ = 0;
};

Digest sha256(const void* data, size_t len);
Digest hmac_sha256(const void* key, size_t key_len, const void* msg, size_t len);

// Compares without data-dependent early exit (the time does not reveal where a MAC differs).
bool constant_time_equal(const void* a, const void* b, size_t len);

}  // namespace hmc::control
