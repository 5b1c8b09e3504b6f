// SHA-256 and HMAC-SHA256 (OpenSSL's libcrypto) and a constant-time compare for checking MACs.
// The known answers (FIPS 180-4, RFC 4231) are pinned in tests/unit/core_digest_test.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "hmc/hmc.h"

namespace hmc {

using Sha256Digest = std::array<uint8_t, 32>;

// *out = SHA-256(data). HMC_ERR_SYSTEM (libcrypto's error text) if libcrypto fails.
hmc_status_t sha256(const void* data, size_t len, Sha256Digest* out);

// *out = HMAC-SHA256(key, msg) (RFC 2104). HMC_ERR_INVALID_ARGUMENT when key_len exceeds
// INT_MAX (libcrypto's limit), HMC_ERR_SYSTEM (libcrypto's error text) if libcrypto fails.
hmc_status_t hmac_sha256(const void* key, size_t key_len, const void* msg, size_t len,
                         Sha256Digest* out);

// Compares len bytes in a time independent of where they differ (CRYPTO_memcmp).
bool constant_time_equal(const void* a, const void* b, size_t len);

}  // namespace hmc
