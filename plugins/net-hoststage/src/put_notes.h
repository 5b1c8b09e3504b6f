// Notifications of puts posted with iput_notify, at the target: released to notify_poll in the
// order the puts arrived (their order on the control stream, which is the order they were
// posted), each once its data is in place; a put that was refused releases none.
#pragma once

#include <cstdint>
#include <deque>

namespace hmc::hoststage {

class PutNotes {
 public:
  static constexpr uint64_t kNone = ~uint64_t{0};

  // A put with a notification arrived: returns its slot.
  uint64_t arrive(uint64_t value) {
    notes_.push_back({value, State::kWaiting});
    return base_ + notes_.size() - 1;
  }
  // The put of `slot` ended: its data is in place (ok) or it was refused.
  void landed(uint64_t slot, bool ok) {
    if (slot == kNone || slot < base_ || slot - base_ >= notes_.size()) return;
    notes_[slot - base_].state = ok ? State::kReady : State::kDropped;
  }
  // The next notification in order, if its put ended.
  bool poll(uint64_t* value) {
    while (!notes_.empty() && notes_.front().state != State::kWaiting) {
      Note n = notes_.front();
      notes_.pop_front();
      ++base_;
      if (n.state == State::kReady) {
        *value = n.value;
        return true;
      }
    }
    return false;
  }

 private:
  enum class State : uint8_t { kWaiting, kReady, kDropped };
  struct Note {
    uint64_t value;
    State state;
  };
  uint64_t base_ = 0;  // slot of notes_.front()
  std::deque<Note> notes_;
};

}  // namespace hmc::hoststage
