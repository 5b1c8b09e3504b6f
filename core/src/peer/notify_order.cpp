#include "peer/notify_order.h"

namespace hmc {

void NotifyReceiver::carried(uint64_t value, std::vector<uint64_t>* out) {
  out->push_back(value);
  ++carried_;
  release(out);
}

void NotifyReceiver::control(uint64_t value, uint64_t carried_before, std::vector<uint64_t>* out) {
  held_.emplace_back(value, carried_before);
  release(out);
}

void NotifyReceiver::drain(std::vector<uint64_t>* out) {
  for (const auto& h : held_) {
    out->push_back(h.first);
    ++control_delivered_;
  }
  held_.clear();
}

// Notify messages arrive in the order they were sent, so only the oldest can be next.
void NotifyReceiver::release(std::vector<uint64_t>* out) {
  while (!held_.empty() && held_.front().second <= carried_) {
    out->push_back(held_.front().first);
    held_.pop_front();
    ++control_delivered_;
  }
}

}  // namespace hmc
