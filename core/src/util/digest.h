// SHA-256 and HMAC-SHA256 (Nettle) and a constant-time compare for checking MACs. Nettle keeps no
// global state: a digest computed while the process exits (a handshake on the progress thread)
// never meets a library's exit handler tearing its tables down, as libcrypto's OPENSSL_cleanup
// does. The known answers (FIPS 180-4, RFC 4231) are pinned in tests/unit/core_digest_test.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace hmc {

using Sha256Digest = std::array<uint8_t, 32>;

// *out = SHA-256(data). data may be NULL when len is 0.
void sha256(const void* data, size_t len, Sha256Digest* out);

// *out = HMAC-SHA256(key, msg) (RFC 2104). key and msg may be NULL when their length is 0.
void hmac_sha256(const void* key, size_t key_len, const void* msg, size_t len, Sha256Digest* out);

// Compares len bytes in a time independent of where they differ (Nettle's memeql_sec).
bool constant_time_equal(const void* a, const void* b, size_t len);

}  // namespace hmc
