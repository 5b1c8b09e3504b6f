#include "util/digest.h"

#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>

namespace hmc {
namespace {

static_assert(SHA256_DIGEST_SIZE == sizeof(Sha256Digest), "a SHA-256 digest is 32 bytes");

// Empty inputs may come as NULL; Nettle is handed a valid pointer for them all the same.
const uint8_t* bytes_of(const void* p, size_t len) {
  static const uint8_t kEmpty = 0;
  return len == 0 ? &kEmpty : static_cast<const uint8_t*>(p);
}

}  // namespace

void sha256(const void* data, size_t len, Sha256Digest* out) {
  sha256_ctx c;
  sha256_init(&c);
  sha256_update(&c, len, bytes_of(data, len));
  sha256_digest(&c, SHA256_DIGEST_SIZE, out->data());
}

void hmac_sha256(const void* key, size_t key_len, const void* msg, size_t len, Sha256Digest* out) {
  hmac_sha256_ctx c;
  hmac_sha256_set_key(&c, key_len, bytes_of(key, key_len));
  hmac_sha256_update(&c, len, bytes_of(msg, len));
  hmac_sha256_digest(&c, SHA256_DIGEST_SIZE, out->data());
}

bool constant_time_equal(const void* a, const void* b, size_t len) {
  return memeql_sec(a, b, len) != 0;
}

}  // namespace hmc
