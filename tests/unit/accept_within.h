// A test helper over core/src/control/socket.h: accepts one connection on a non-blocking
// listener, waiting for it at most timeout_ms.
#pragma once

#include <poll.h>

#include "control/fd.h"
#include "control/socket.h"
#include "util/clock.h"
#include "util/status.h"

namespace hmc::control::test {

// The accepted connection, or an invalid Fd when none came in time (or accept failed).
inline Fd accept_within(int listen_fd, int timeout_ms) {
  const uint64_t deadline = deadline_after_ms(timeout_ms);
  for (;;) {
    Fd out;
    hmc_status_t st = accept_one(listen_fd, &out);
    if (st == HMC_SUCCESS) return out;
    if (st != HMC_IN_PROGRESS || wait_fd(listen_fd, POLLIN, deadline, nullptr) != 1) return Fd();
  }
}

}  // namespace hmc::control::test
