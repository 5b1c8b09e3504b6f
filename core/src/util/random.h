// Cryptographically secure random bytes (getrandom(2), the kernel's CSPRNG): handshake nonces
// and context ids.
#pragma once

#include <cstddef>

#include "hmc/hmc.h"

namespace hmc {

// Fills buf with len random bytes; blocks only until the kernel pool is initialised at boot.
// HMC_ERR_SYSTEM (message with errno text) if the kernel refuses.
hmc_status_t random_bytes(void* buf, size_t len);

}  // namespace hmc
