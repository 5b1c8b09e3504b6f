// The context's event descriptor (hmc_context_event_fd): an eventfd that an event loop watches
// (asyncio's add_reader, epoll) and that becomes readable when a request ends or a notification
// arrives. It rings only while armed, and once per arming: an application that is not watching
// pays one relaxed load per request end, one that is pays one write(2) per wake-up, not one per
// request.
#pragma once

#include <atomic>
#include <mutex>

#include "control/fd.h"
#include "hmc/hmc.h"

namespace hmc {

class EventSignal {
 public:
  // Makes the eventfd on first use (thread-safe); *fd is owned by the signal.
  hmc_status_t fd(int* fd);
  // Drains the descriptor and arms it: the next ring() makes it readable. The caller tests what
  // it waits for after this call, so that an end in between is not missed.
  hmc_status_t clear();
  // Makes the descriptor readable if armed (any thread, any lock held).
  // The fence pairs with clear()'s: the end stored before it, or the arming seen after it.
  void ring() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (armed_.load(std::memory_order_relaxed) && armed_.exchange(false)) write_one();
  }

 private:
  void write_one();

  std::atomic<bool> armed_{false};
  std::mutex make_mutex_;  // serialises the first fd()
  control::Fd owned_;      // written once, under make_mutex_, before armed_ can be set
};

}  // namespace hmc
