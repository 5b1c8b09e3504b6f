#include "peer/notify_order.h"

namespace hmc {

void NotifyReceiver::carried(uint64_t value, std::vector<Note>* out) {
  out->push_back({value, {}});
  ++carried_;
  release(out);
}

void NotifyReceiver::control(Note note, uint64_t carried_before, std::vector<Note>* out) {
  held_.emplace_back(std::move(note), carried_before);
  release(out);
}

void NotifyReceiver::drain(std::vector<Note>* out) {
  for (auto& h : held_) {
    out->push_back(std::move(h.first));
    ++control_delivered_;
  }
  held_.clear();
}

// Notify messages arrive in the order they were sent, so only the oldest can be next.
void NotifyReceiver::release(std::vector<Note>* out) {
  while (!held_.empty() && held_.front().second <= carried_) {
    out->push_back(std::move(held_.front().first));
    held_.pop_front();
    ++control_delivered_;
  }
}

}  // namespace hmc
