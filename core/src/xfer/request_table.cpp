#include <mutex>
#include <new>
#include <vector>

#include "framed/framed_transfer.h"
#include "request/request.h"
#include "util/hot.h"

namespace hmc {
namespace {

constexpr uint32_t kSegmentSlots = 1024;
constexpr uint32_t kMaxSegments = 4096;  // 4 Mi requests in flight at once, per process

static_assert(sizeof(void*) == 8, "request handles carry a slot index and a generation");

struct Segment {
  Request slots[kSegmentSlots];
};

// The free slots form a stack linked through Request::next_free, its head a tagged word
// (count of pushes << 32 | index + 1 of the top slot, 0 for empty): a pop and a push are one
// compare-and-swap each, and the count defeats the ABA problem (a slot popped, reused and
// pushed back between another thread's read of the head and its swap). LIFO: a quiet process
// keeps reusing the same few slots.
struct Table {
  std::atomic<Segment*> segments[kMaxSegments] = {};
  std::atomic<uint64_t> free_head{0};
  std::mutex mutex;   // guards used (growing the table)
  uint32_t used = 0;  // segments allocated
};

Table& table() {
  static auto* t = new Table();  // never destroyed: handles may be checked during exit
  return *t;
}

Request* slot(Table& t, uint32_t index) {
  Segment* s = t.segments[index / kSegmentSlots].load(std::memory_order_acquire);
  return s ? &s->slots[index % kSegmentSlots] : nullptr;
}

// Resets a request to its just-constructed state, keeping its slot bookkeeping.
HMC_HOT void reset(Request* r) {
  r->op = Op::Send;
  r->peer = nullptr;
  r->size = 0;
  r->tag = 0;
  r->notify = false;
  r->notify_value = 0;
  r->notify_bytes.clear();
  r->landed = false;
  r->carried = false;
  r->net = nullptr;
  r->temp_mr = nullptr;
  r->control_driven = false;
  r->done.store(false, std::memory_order_relaxed);
  r->status = HMC_IN_PROGRESS;
  r->bytes = 0;
  r->error.clear();
  r->framed.reset();
  r->owner = nullptr;
}

// Generations are 32-bit in handles and never 0.
uint64_t next_generation(uint64_t state) {
  uint64_t gen = (state >> 1) + 1;
  return gen > 0xffffffffu ? 1 : gen;
}

}  // namespace

namespace {

// Pushes the chain first..last (linked through next_free already) onto the free stack.
HMC_HOT void push_free(Table& t, Request* first, Request* last) {
  uint64_t head = t.free_head.load(std::memory_order_relaxed);
  uint64_t top;
  do {
    last->next_free.store(uint32_t(head), std::memory_order_relaxed);
    top = ((head >> 32) + 1) << 32 | (uint64_t(first->index) + 1);
  } while (!t.free_head.compare_exchange_weak(head, top, std::memory_order_release,
                                              std::memory_order_relaxed));
}

// Pops a free slot, or nullptr when there is none.
HMC_HOT Request* pop_free(Table& t) {
  uint64_t head = t.free_head.load(std::memory_order_acquire);
  for (;;) {
    uint32_t top = uint32_t(head);
    if (top == 0) return nullptr;
    // A slot on the stack is in a published segment.
    uint32_t index = top - 1;
    Request* r = &t.segments[index / kSegmentSlots]
                      .load(std::memory_order_acquire)
                      ->slots[index % kSegmentSlots];
    // r may be popped by another thread meanwhile: then the swap fails (the count moved).
    uint64_t next = (head >> 32) << 32 | r->next_free.load(std::memory_order_relaxed);
    if (t.free_head.compare_exchange_weak(head, next, std::memory_order_acquire,
                                          std::memory_order_acquire))
      return r;
  }
}

}  // namespace

HMC_HOT Request* RequestTable::acquire(Context* ctx) {
  Table& t = table();
  Request* r;
  while (!(r = pop_free(t))) {
    std::lock_guard<std::mutex> lock(t.mutex);
    if (t.free_head.load(std::memory_order_acquire) & 0xffffffffu) continue;  // another grew it
    if (t.used == kMaxSegments) throw std::bad_alloc();
    auto* seg = new Segment();
    uint32_t base = t.used * kSegmentSlots;
    for (uint32_t i = 0; i < kSegmentSlots; ++i) {
      seg->slots[i].index = base + i;
      seg->slots[i].state.store(uint64_t(1) << 1, std::memory_order_relaxed);
      seg->slots[i].next_free.store(i + 1 < kSegmentSlots ? base + i + 2 : 0,
                                    std::memory_order_relaxed);
    }
    t.segments[t.used].store(seg, std::memory_order_release);
    ++t.used;
    push_free(t, &seg->slots[0], &seg->slots[kSegmentSlots - 1]);
  }
  r->owner = ctx;
  // The slot is ours alone until its handle is given out: no read-modify-write needed.
  r->state.store(r->state.load(std::memory_order_relaxed) | 1, std::memory_order_release);
  return r;
}

HMC_HOT Request* RequestTable::acquire(Context* ctx, Op op, Peer* peer, size_t size, uint64_t tag,
                                       bool notify, uint64_t notify_value,
                                       std::string_view notify_bytes) {
  Request* r = acquire(ctx);
  r->op = op;
  r->peer = peer;
  r->size = size;
  r->tag = tag;
  r->notify = notify;
  r->notify_value = notify_value;
  if (!notify_bytes.empty()) r->notify_bytes.assign(notify_bytes.data(), notify_bytes.size());
  return r;
}

HMC_HOT void RequestTable::release(Request* req) {
  // Stale first (lookups fail from here on), then reset: dropping the last reference to a
  // peer may run its destructor.
  uint64_t st = req->state.load(std::memory_order_relaxed);
  do {
    if (!(st & 1)) return;  // already released
  } while (
      !req->state.compare_exchange_weak(st, next_generation(st) << 1, std::memory_order_acq_rel));
  reset(req);
  push_free(table(), req, req);
}

void RequestTable::release_all(Context* ctx) {
  Table& t = table();
  std::vector<Request*> mine;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    for (uint32_t i = 0; i < t.used * kSegmentSlots; ++i) {
      Request* r = slot(t, i);
      if ((r->state.load(std::memory_order_acquire) & 1) && r->owner == ctx) mine.push_back(r);
    }
  }
  for (Request* r : mine) release(r);
}

HMC_HOT Request* RequestTable::lookup(hmc_request_t handle) {
  auto h = reinterpret_cast<uintptr_t>(handle);
  uint64_t index_plus_1 = h & 0xffffffffu;
  uint64_t gen = h >> 32;
  if (index_plus_1 == 0 || gen == 0 || index_plus_1 > uint64_t(kMaxSegments) * kSegmentSlots)
    return nullptr;
  Request* r = slot(table(), uint32_t(index_plus_1 - 1));
  if (!r) return nullptr;
  return r->state.load(std::memory_order_acquire) == ((gen << 1) | 1) ? r : nullptr;
}

hmc_request_t RequestTable::handle(const Request* req) {
  uint64_t gen = req->state.load(std::memory_order_relaxed) >> 1;
  return reinterpret_cast<hmc_request_t>(uintptr_t((gen << 32) | (uint64_t(req->index) + 1)));
}

}  // namespace hmc
