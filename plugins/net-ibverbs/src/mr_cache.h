// Registrations of the caller's local buffers made by the plugin itself (a rendezvous send's
// buffer, the pieces of receives, puts and gets posted without an mr), kept for reuse within
// HMC_IB_MR_CACHE bytes, least recently used evicted first.
//
// A kept registration pins the pages the buffer had when it was registered. Once that memory is
// unmapped (munmap, free of a large block, mremap, madvise(MADV_DONTNEED)) the same addresses may
// hold other pages, and the registration must never serve them. A userfaultfd tells: every
// cached range is registered with it (write-protect mode, which never delivers a fault: only its
// events matter), and the kernel then reports each unmap, remove and remap of such a range and
// holds the thread that caused it until the event is read. A monitor thread of its own reads
// them at once (the progress path cannot: a thread of the application may be the one held) and
// publishes the ranges; every lookup first applies them, and waits for a read the monitor has in
// hand to be published, so once munmap returned no lookup finds the old registration. Entries in
// use by a posted request when invalidated are deregistered when that request lets go.
//
// The monitor thread never allocates and takes only the small lock of the published ranges, which
// no one holds across anything that could unmap: a thread held by the kernel on its event can
// never be waiting for the monitor.
//
// Where userfaultfd is unavailable (kernel without it, vm.unprivileged_userfaultfd=0 without
// CAP_SYS_PTRACE, seccomp) the cache is off, with the reason logged once: every registration is
// then made for its request and deregistered when the request ends.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "log.h"
#include "verbs_api.h"

namespace hmc::ibverbs {

class Device;

// One registration handed to a request or work request: its mr serves [start, end).
struct Registration {
  Device* dev = nullptr;
  ibv_mr* mr = nullptr;
  uintptr_t start = 0, end = 0;  // page-aligned for cached ones
  int access = 0;                // IBV_ACCESS_*
  int refs = 0;
  bool cached = false;  // indexed (found by lookups); false once invalidated or evicted
  std::list<Registration*>::iterator lru;
};

class MrCache {
 public:
  // limit 0: off. Starts the monitor thread; where that is impossible the cache is off and
  // why() says so.
  MrCache(const VerbsApi& api, const Log& log, size_t limit);
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  bool enabled() const { return limit_ > 0; }

  // A registration of [addr, addr + len) on d with at least access, from the cache or made now;
  // nullptr with *why when the device refused (after dropping unused entries once where the
  // refusal may be for pinned memory). Each acquire is paired with one release.
  Registration* acquire(Device& d, void* addr, size_t len, int access, std::string* why);
  void release(Registration* r);
  // A cached registration covering [addr, addr + len) with at least access, or nullptr: never
  // registers anything (a miss costs no pinning). Released like acquire's.
  Registration* find(Device& d, void* addr, size_t len, int access);
  // Applies the unmaps the monitor reported, so that registrations of memory that is gone are
  // dropped without waiting for the next acquire (cheap when there are none).
  void poll() {
    if (published_.load(std::memory_order_relaxed)) apply_invalidations();
  }
  // Deregisters every entry no request uses (registration was refused: pinned memory may be
  // the limit). False when there was none.
  bool drop_unused() { return enabled() && evict_unused(SIZE_MAX); }

 private:
  struct Range {
    uintptr_t start = 0, end = 0;
  };
  bool start_monitor(std::string* why);
  void monitor_loop();
  void apply_invalidations();
  Registration* lookup(Device& d, uintptr_t start, uintptr_t end, int access);
  void invalidate(uintptr_t start, uintptr_t end);
  void unindex(Registration* r);
  void destroy(Registration* r);
  bool evict_unused(size_t want_free);
  void watch_range(uintptr_t start, uintptr_t end, bool* ok);
  void unwatch_range(uintptr_t start, uintptr_t end);

  const VerbsApi& api_;
  const Log& log_;
  size_t limit_ = 0;
  size_t bytes_ = 0;
  size_t longest_ = 0;  // longest cached entry: how far back a lookup by start must look
  std::multimap<uintptr_t, Registration*> by_start_;
  std::list<Registration*> lru_;  // most recently used first
  uint64_t hits_ = 0, invalidations_ = 0;

  // monitor
  int uffd_ = -1;
  int stop_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> reading_{false};    // the monitor holds events it has not published yet
  std::atomic<bool> published_{false};  // ranges wait in ranges_
  std::mutex ranges_mu_;
  static constexpr size_t kMaxRanges = 256;
  std::array<Range, kMaxRanges> ranges_{};
  size_t nranges_ = 0;
  bool overflow_ = false;  // more than kMaxRanges unapplied: everything is invalid
};

}  // namespace hmc::ibverbs
