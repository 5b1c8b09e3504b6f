// Single-producer/single-consumer byte ring in memory shared by two processes (the shm device).
// Carries protocol headers and inline payloads; bulk data never goes through it.
//
// Records are 64-byte aligned: {u32 size, u32 kind} + WireHdr (56 bytes) + payload. A record never
// wraps: when it does not fit before the end, a wrap record fills the rest of the ring. head and
// tail are free-running byte counters; the producer publishes head with release semantics after
// writing the record, the consumer publishes tail after it copied the record out.
//
// Sleep/wake: a consumer about to sleep sets consumer_sleeping, fences, and re-checks head; a
// producer fences after publishing head and, if the flag is set, clears it and signals the
// consumer's wake fd. producer_waiting works the same way for a producer blocked on a full ring.
// The two fences make sure at least one side sees the other (no lost wake-up).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "util.h"
#include "wire.h"

namespace hmc::hoststage {

struct RingCtl {
  alignas(64) std::atomic<uint64_t> head;               // written by the producer
  alignas(64) std::atomic<uint64_t> tail;               // written by the consumer
  alignas(64) std::atomic<uint32_t> consumer_sleeping;  // set by the consumer before sleeping
  alignas(64) std::atomic<uint32_t> producer_waiting;   // set by a producer blocked on space
};
static_assert(sizeof(RingCtl) == 256, "ring control block layout");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "ring counters must be lock-free");

// Shared segment: [ctl connector->acceptor][ctl acceptor->connector] padded to one page, then the
// two data areas of ring_bytes each.
constexpr size_t kRingHeaderBytes = 4096;
constexpr size_t kRecordAlign = 64;
constexpr size_t kRecordHeader = 64;  // prefix + WireHdr
inline size_t ring_segment_bytes(size_t ring_bytes) {
  return kRingHeaderBytes + 2 * ring_bytes;
}

struct RecordPrefix {
  uint32_t size;
  uint32_t kind;
};
constexpr uint32_t kRecordMsg = 0x3147534du;
constexpr uint32_t kRecordWrap = 0x50415257u;

class RingTx {
 public:
  void attach(RingCtl* ctl, uint8_t* data, size_t cap) {
    ctl_ = ctl;
    data_ = data;
    cap_ = cap;
    mask_ = cap - 1;
    head_ = ctl->head.load(std::memory_order_relaxed);
    tail_cache_ = ctl->tail.load(std::memory_order_acquire);
  }
  bool attached() const { return ctl_ != nullptr; }

  // Appends one record. False when it does not fit now (nothing written).
  bool push(const WireHdr& h, const void* payload, size_t len) {
    size_t need = align_up(kRecordHeader + len, kRecordAlign);
    size_t pos = static_cast<size_t>(head_ & mask_);
    if (pos >= kRewindBytes && need <= pos && starts_page(pos, need)) pos = rewind_if_empty(pos);
    size_t contig = cap_ - pos;
    size_t total = need <= contig ? need : contig + need;
    if (cap_ - (head_ - tail_cache_) < total) {
      tail_cache_ = ctl_->tail.load(std::memory_order_acquire);
      if (cap_ - (head_ - tail_cache_) < total) return false;
    }
    if (need > contig) {
      RecordPrefix wrap{static_cast<uint32_t>(contig), kRecordWrap};
      std::memcpy(data_ + pos, &wrap, sizeof(wrap));
      head_ += contig;
      pos = 0;
    }
    RecordPrefix pre{static_cast<uint32_t>(need), kRecordMsg};
    std::memcpy(data_ + pos, &pre, sizeof(pre));
    std::memcpy(data_ + pos + sizeof(pre), &h, sizeof(h));
    if (len > 0) std::memcpy(data_ + pos + kRecordHeader, payload, len);
    head_ += need;
    ctl_->head.store(head_, std::memory_order_release);
    return true;
  }

  // Traffic that never fills the ring (ping-pong, a trickle of small messages) would otherwise
  // walk all of it, touching a page it has not touched for a while every 4 KiB: a page fault on
  // the first lap (tens of microseconds on a VM), cache misses after. When a record is about to
  // enter a new page and the consumer has taken everything, a wrap record sends it back to the
  // start, whose pages are mapped and in cache. A ring that is not empty is used in full.
  static constexpr size_t kRewindBytes = 16384;
  static constexpr size_t kPageBytes = 4096;
  static bool starts_page(size_t pos, size_t need) {
    return (pos & (kPageBytes - 1)) == 0 || (pos / kPageBytes) != ((pos + need - 1) / kPageBytes);
  }
  size_t rewind_if_empty(size_t pos) {
    if (tail_cache_ != head_) tail_cache_ = ctl_->tail.load(std::memory_order_acquire);
    if (tail_cache_ != head_) return pos;
    RecordPrefix wrap{static_cast<uint32_t>(cap_ - pos), kRecordWrap};
    std::memcpy(data_ + pos, &wrap, sizeof(wrap));
    head_ += cap_ - pos;
    return 0;
  }

  // True when a record with len payload bytes would fit now.
  bool fits(size_t len) {
    size_t need = align_up(kRecordHeader + len, kRecordAlign);
    size_t contig = cap_ - static_cast<size_t>(head_ & mask_);
    size_t total = need <= contig ? need : contig + need;
    tail_cache_ = ctl_->tail.load(std::memory_order_acquire);
    return cap_ - (head_ - tail_cache_) >= total;
  }

  // After push: true when the consumer is asleep and must be signalled (clears its request).
  bool consumer_wants_wake() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ctl_->consumer_sleeping.load(std::memory_order_relaxed) != 0 &&
           ctl_->consumer_sleeping.exchange(0, std::memory_order_acq_rel) != 0;
  }
  void set_waiting(bool on) { ctl_->producer_waiting.store(on ? 1 : 0, std::memory_order_relaxed); }

 private:
  RingCtl* ctl_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t cap_ = 0;
  uint64_t mask_ = 0;
  uint64_t head_ = 0;
  uint64_t tail_cache_ = 0;
};

class RingRx {
 public:
  void attach(RingCtl* ctl, uint8_t* data, size_t cap) {
    ctl_ = ctl;
    data_ = data;
    cap_ = cap;
    mask_ = cap - 1;
    tail_ = ctl->tail.load(std::memory_order_relaxed);
    head_cache_ = tail_;
  }
  bool attached() const { return ctl_ != nullptr; }

  // The next record: 1 with *h and *payload set, 0 when the ring is empty, -1 when the ring is
  // corrupt (the peer wrote garbage). The payload stays valid until advance().
  int next(WireHdr* h, const uint8_t** payload) {
    for (;;) {
      if (tail_ == head_cache_) {
        head_cache_ = ctl_->head.load(std::memory_order_acquire);
        if (tail_ == head_cache_) return 0;
      }
      uint64_t avail = head_cache_ - tail_;
      size_t pos = static_cast<size_t>(tail_ & mask_);
      // Records start 64-byte aligned; a tail the peer set to anything else (it initialises the
      // control block) would read a prefix across the ring's end.
      if (pos % kRecordAlign != 0) return -1;
      RecordPrefix pre;
      std::memcpy(&pre, data_ + pos, sizeof(pre));
      if (avail > cap_ || pre.size < kRecordAlign || pre.size % kRecordAlign != 0 ||
          pre.size > cap_ - pos || pre.size > avail)
        return -1;
      if (pre.kind == kRecordWrap) {
        tail_ += pre.size;
        continue;
      }
      if (pre.kind != kRecordMsg) return -1;
      std::memcpy(h, data_ + pos + sizeof(pre), sizeof(*h));
      uint64_t plen = (h->flags & kFlagPayload) != 0 ? h->len : 0;
      if (plen > pre.size - kRecordHeader) return -1;
      *payload = data_ + pos + kRecordHeader;
      cur_ = pre.size;
      return 1;
    }
  }
  void advance() {
    tail_ += cur_;
    cur_ = 0;
  }
  // Makes consumed space available to the producer.
  void publish() { ctl_->tail.store(tail_, std::memory_order_release); }
  // After publish: true when the producer waits for space and must be signalled.
  bool producer_wants_wake() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return ctl_->producer_waiting.load(std::memory_order_relaxed) != 0 &&
           ctl_->producer_waiting.exchange(0, std::memory_order_acq_rel) != 0;
  }

  // Re-reads head: true when a record is waiting.
  bool has_data() {
    head_cache_ = ctl_->head.load(std::memory_order_acquire);
    return head_cache_ != tail_;
  }
  void set_sleeping(bool on) {
    ctl_->consumer_sleeping.store(on ? 1 : 0, std::memory_order_relaxed);
  }

 private:
  RingCtl* ctl_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t cap_ = 0;
  uint64_t mask_ = 0;
  uint64_t tail_ = 0;
  uint64_t head_cache_ = 0;
  size_t cur_ = 0;
};

}  // namespace hmc::hoststage
