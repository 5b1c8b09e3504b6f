#include "util/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "util/status.h"

namespace hmc {

hmc_status_t random_bytes(void* buf, size_t len) {
  uint8_t* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(HMC_ERR_SYSTEM, "getrandom({} bytes) failed: {} (errno {})", len, strerror(errno),
                  errno);
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return HMC_SUCCESS;
}

}  // namespace hmc
