// Put notifications in the order of the puts, when some travel with the data (net plugins
// offering iput_notify) and the others on the control plane (Notify messages: those of puts the
// path does not carry, every one that carries bytes, and those without data, hmc_notify_send).
//
// The two channels race, so each side keeps counts:
//  - a Notify message says how many carried notifications the initiator's puts had landed
//    before it; the target holds it until that many arrived;
//  - the initiator carries a notification only while every Notify it sent was delivered (the
//    target acknowledges them with NotifyAck), so a carried one never overtakes a Notify.
// A peer that never mixes the two pays nothing: carried notifications go straight through, and
// Notify messages need no wait.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace hmc {

// A notification as the target delivers it: the value and the bytes it carries (empty for a
// value-only one, and always for one the net plugin carried).
struct Note {
  uint64_t value = 0;
  std::string bytes;
};

// The initiator's side, per peer (guarded by the peer's net mutex, except acked()).
class NotifySender {
 public:
  // Set at connect: the path offers iput_notify and the target orders carried notifications.
  bool carry_offered = false;

  // Whether a put posted now may carry its notification: only when no earlier notifying put
  // waits for a Notify message (no_control_queued) and every Notify sent was delivered.
  bool may_carry(bool no_control_queued) const {
    return carry_offered && no_control_queued &&
           acked_.load(std::memory_order_acquire) == control_sent_;
  }
  // A put that carried its notification landed.
  void carried_landed() { ++carried_landed_; }
  // A Notify message is being sent: returns the carried notifications it follows.
  uint64_t control_sending() {
    ++control_sent_;
    return carried_landed_;
  }
  // The target acknowledged `delivered` Notify messages (control thread, any lock).
  void acked(uint64_t delivered) {
    uint64_t cur = acked_.load(std::memory_order_relaxed);
    while (delivered > cur && !acked_.compare_exchange_weak(cur, delivered)) {
    }
  }

 private:
  uint64_t carried_landed_ = 0;
  uint64_t control_sent_ = 0;
  std::atomic<uint64_t> acked_{0};
};

// The target's side, per peer (guarded by the context's notification mutex).
class NotifyReceiver {
 public:
  // A notification the net plugin carried: appends what may be delivered now, in order.
  void carried(uint64_t value, std::vector<Note>* out);
  // A Notify message that followed carried_before carried notifications.
  void control(Note note, uint64_t carried_before, std::vector<Note>* out);
  // The peer is gone: whatever is held, in order (the carried ones it waits for never come).
  void drain(std::vector<Note>* out);
  // Notify messages delivered so far (what NotifyAck says).
  uint64_t control_delivered() const { return control_delivered_; }
  size_t held() const { return held_.size(); }

 private:
  void release(std::vector<Note>* out);

  uint64_t carried_ = 0;
  uint64_t control_delivered_ = 0;
  std::deque<std::pair<Note, uint64_t>> held_;  // (note, carried_before), in arrival order
};

}  // namespace hmc
