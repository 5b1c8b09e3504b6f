#include "request/event_signal.h"

#include <sys/eventfd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "util/status.h"

namespace hmc {

hmc_status_t EventSignal::fd(int* fd) {
  std::lock_guard<std::mutex> lock(make_mutex_);
  if (!owned_.valid()) {
    int e = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e < 0)
      return fail(HMC_ERR_SYSTEM, "hmc_context_event_fd: eventfd: {}", std::strerror(errno));
    owned_.reset(e);
  }
  *fd = owned_.get();
  return HMC_SUCCESS;
}

hmc_status_t EventSignal::clear() {
  int e;
  {
    std::lock_guard<std::mutex> lock(make_mutex_);
    if (!owned_.valid())
      return fail(HMC_ERR_INVALID_ARGUMENT,
                  "hmc_context_event_clear: no event descriptor yet (call hmc_context_event_fd "
                  "first)");
    e = owned_.get();
  }
  uint64_t count;
  // Nonblocking: EAGAIN when nothing rang since the last clear.
  while (read(e, &count, sizeof count) < 0 && errno == EINTR) {
  }
  armed_.store(true);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // before the caller's test (ring())
  return HMC_SUCCESS;
}

void EventSignal::write_one() {
  uint64_t one = 1;
  // The counter cannot overflow at one write per arming; EINTR is the only retry.
  while (write(owned_.get(), &one, sizeof one) < 0 && errno == EINTR) {
  }
}

}  // namespace hmc
