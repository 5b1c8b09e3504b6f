#include "util/digest.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <climits>

#include "util/status.h"

namespace hmc {
namespace {

// Fails with the oldest error of this thread's libcrypto queue and empties the queue.
hmc_status_t libcrypto_failure(const char* what) {
  char text[256] = "no error queued";
  if (unsigned long e = ERR_get_error()) ERR_error_string_n(e, text, sizeof text);
  ERR_clear_error();
  return fail(HMC_ERR_SYSTEM, "{} failed in libcrypto: {}", what, text);
}

}  // namespace

hmc_status_t sha256(const void* data, size_t len, Sha256Digest* out) {
  Sha256Digest d;
  unsigned int n = 0;
  if (EVP_Digest(data, len, d.data(), &n, EVP_sha256(), nullptr) != 1 || n != d.size())
    return libcrypto_failure("SHA-256");
  *out = d;
  return HMC_SUCCESS;
}

hmc_status_t hmac_sha256(const void* key, size_t key_len, const void* msg, size_t len,
                         Sha256Digest* out) {
  if (key_len > static_cast<size_t>(INT_MAX))
    return fail(HMC_ERR_INVALID_ARGUMENT, "HMAC-SHA256: key of {} bytes is over libcrypto's {}",
                key_len, INT_MAX);
  // libcrypto 3.0's HMAC() fails when key and msg are both NULL: empty inputs get a valid pointer.
  static const uint8_t kEmpty = 0;
  if (key_len == 0) key = &kEmpty;
  if (len == 0) msg = &kEmpty;
  Sha256Digest d;
  unsigned int n = 0;
  if (!HMAC(EVP_sha256(), key, static_cast<int>(key_len), static_cast<const unsigned char*>(msg),
            len, d.data(), &n) ||
      n != d.size())
    return libcrypto_failure("HMAC-SHA256");
  *out = d;
  return HMC_SUCCESS;
}

bool constant_time_equal(const void* a, const void* b, size_t len) {
  return CRYPTO_memcmp(a, b, len) == 0;
}

}  // namespace hmc
