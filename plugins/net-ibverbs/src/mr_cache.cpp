#include "mr_cache.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "device.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

namespace hmc::ibverbs {
namespace {

constexpr uint64_t kEvents =
    UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_REMAP;
// How long a lookup waits for the monitor to publish events it has read (it has nothing else to
// do in between); past it the whole cache is treated as invalid, which is always safe.
constexpr uint64_t kPublishWaitNs = 1000000000ull;

uintptr_t page_size() {
  static const uintptr_t p = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return p;
}

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

MrCache::MrCache(const VerbsApi& api, const Log& log, size_t limit) : api_(api), log_(log) {
  if (limit == 0) return;
  std::string why;
  if (!start_monitor(&why)) {
    IB_INFO(log_, "registration cache off: %s (buffers are registered for each transfer)",
            why.c_str());
    return;
  }
  limit_ = limit;
  IB_DEBUG(log_, "registration cache: up to %zu bytes, invalidated through userfaultfd", limit);
}

MrCache::~MrCache() {
  if (enabled())
    IB_DEBUG(log_, "registration cache: %llu hits, %llu entries invalidated by unmaps",
             static_cast<unsigned long long>(hits_),
             static_cast<unsigned long long>(invalidations_));
  if (thread_.joinable()) {
    uint64_t one = 1;
    if (::write(stop_fd_, &one, sizeof one) < 0) {
      // eventfd writes fail only on overflow, which one write cannot reach
    }
    thread_.join();
  }
  for (auto& kv : by_start_) {
    kv.second->cached = false;
    if (kv.second->refs == 0) destroy(kv.second);
  }
  by_start_.clear();
  lru_.clear();
  if (uffd_ >= 0) ::close(uffd_);
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

bool MrCache::start_monitor(std::string* why) {
  int fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd < 0 && errno == EPERM)  // unprivileged: user-space faults are all this needs
    fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
  if (fd < 0) {
    const int e = errno;
    *why = std::string("userfaultfd: ") + std::strerror(e);
    if (e == EPERM)
      *why += " (vm.unprivileged_userfaultfd is 0 and the process lacks CAP_SYS_PTRACE)";
    if (e == ENOSYS) *why += " (kernel built without CONFIG_USERFAULTFD)";
    return false;
  }
  uffdio_api a{};
  a.api = UFFD_API;
  a.features = kEvents;
  if (ioctl(fd, UFFDIO_API, &a) != 0 || (a.features & kEvents) != kEvents ||
      (a.ioctls & (1ull << _UFFDIO_REGISTER)) == 0) {
    *why = std::string("userfaultfd without unmap/remove/remap events: ") + std::strerror(errno);
    ::close(fd);
    return false;
  }
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) {
    *why = std::string("eventfd: ") + std::strerror(errno);
    ::close(fd);
    return false;
  }
  uffd_ = fd;
  try {
    thread_ = std::thread([this] { monitor_loop(); });
  } catch (const std::exception& e) {
    *why = std::string("cannot start the monitor thread: ") + e.what();
    return false;
  }
  return true;
}

void MrCache::monitor_loop() {
  for (;;) {
    pollfd p[2] = {{uffd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    // The timeout only bounds the wait; events wake it at once.
    int n = ::poll(p, 2, 1000);
    if (n < 0 && errno != EINTR) return;
    if (p[1].revents != 0) return;
    if ((p[0].revents & POLLIN) == 0) continue;
    // Announced before the read: a thread the read releases finds it set until the ranges are
    // published, and its lookups wait for them.
    reading_.store(true);
    uffd_msg msgs[32];
    ssize_t got = ::read(uffd_, msgs, sizeof msgs);
    if (got > 0) {
      std::lock_guard<std::mutex> lk(ranges_mu_);
      for (size_t i = 0; i < static_cast<size_t>(got) / sizeof(uffd_msg); ++i) {
        const uffd_msg& m = msgs[i];
        Range r;
        if (m.event == UFFD_EVENT_UNMAP || m.event == UFFD_EVENT_REMOVE) {
          r = {static_cast<uintptr_t>(m.arg.remove.start),
               static_cast<uintptr_t>(m.arg.remove.end)};
        } else if (m.event == UFFD_EVENT_REMAP) {
          r = {static_cast<uintptr_t>(m.arg.remap.from),
               static_cast<uintptr_t>(m.arg.remap.from + m.arg.remap.len)};
        } else {
          continue;  // a fault cannot come (write-protect mode, nothing protected)
        }
        if (nranges_ < kMaxRanges)
          ranges_[nranges_++] = r;
        else
          overflow_ = true;
        published_.store(true);
      }
    }
    reading_.store(false);
  }
}

void MrCache::apply_invalidations() {
  const uint64_t t0 = mono_ns();
  bool timed_out = false;
  while (reading_.load()) {
    if (mono_ns() - t0 > kPublishWaitNs) {
      timed_out = true;
      break;
    }
    sched_yield();
  }
  std::array<Range, kMaxRanges> got;
  size_t n = 0;
  bool all = timed_out;
  {
    std::lock_guard<std::mutex> lk(ranges_mu_);
    n = nranges_;
    std::copy(ranges_.begin(), ranges_.begin() + static_cast<std::ptrdiff_t>(n), got.begin());
    nranges_ = 0;
    all |= overflow_;
    overflow_ = false;
    published_.store(false);
  }
  if (all) {
    invalidate(0, UINTPTR_MAX);
    return;
  }
  for (size_t i = 0; i < n; ++i) invalidate(got[i].start, got[i].end);
}

void MrCache::invalidate(uintptr_t start, uintptr_t end) {
  auto it = by_start_.lower_bound(start - std::min(start, longest_));
  while (it != by_start_.end() && it->first < end) {
    Registration* r = it->second;
    ++it;
    if (r->end <= start) continue;
    ++invalidations_;
    unindex(r);
    if (r->refs == 0) destroy(r);
  }
}

void MrCache::unindex(Registration* r) {
  if (!r->cached) return;
  auto range = by_start_.equal_range(r->start);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second == r) {
      by_start_.erase(it);
      break;
    }
  lru_.erase(r->lru);
  bytes_ -= r->end - r->start;
  r->cached = false;
}

void MrCache::destroy(Registration* r) {
  if (r->mr != nullptr) api_.dereg_mr(r->mr);
  delete r;
}

void MrCache::watch_range(uintptr_t start, uintptr_t end, bool* ok) {
  uffdio_register reg{};
  reg.range.start = start;
  reg.range.len = end - start;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  *ok = ioctl(uffd_, UFFDIO_REGISTER, &reg) == 0;
  if (!*ok)
    IB_DEBUG(log_, "registration cache: %#zx+%zu cannot be watched (%s): not cached",
             static_cast<size_t>(start), static_cast<size_t>(end - start), std::strerror(errno));
}

void MrCache::unwatch_range(uintptr_t start, uintptr_t end) {
  // Pages another entry still covers stay watched: only a range no entry overlaps is let go.
  auto it = by_start_.lower_bound(start - std::min(start, longest_));
  for (; it != by_start_.end() && it->first < end; ++it)
    if (it->second->end > start) return;
  uffdio_range r{start, end - start};
  ioctl(uffd_, UFFDIO_UNREGISTER, &r);  // fails only where the range is gone already
}

bool MrCache::evict_unused(size_t want_free) {
  bool any = false;
  for (auto it = lru_.end();
       it != lru_.begin() && (want_free == SIZE_MAX || bytes_ + want_free > limit_);) {
    --it;
    Registration* r = *it;
    if (r->refs > 0) continue;
    it = lru_.erase(it);
    r->lru = lru_.end();
    auto range = by_start_.equal_range(r->start);
    for (auto b = range.first; b != range.second; ++b)
      if (b->second == r) {
        by_start_.erase(b);
        break;
      }
    bytes_ -= r->end - r->start;
    r->cached = false;
    unwatch_range(r->start, r->end);
    destroy(r);
    any = true;
  }
  return any;
}

Registration* MrCache::lookup(Device& d, uintptr_t start, uintptr_t end, int access) {
  auto it = by_start_.upper_bound(start);
  const uintptr_t lowest = start - std::min(start, longest_);
  while (it != by_start_.begin()) {
    --it;
    if (it->first < lowest) break;
    Registration* r = it->second;
    if (r->dev == &d && r->end >= end && (r->access & access) == access) {
      lru_.splice(lru_.begin(), lru_, r->lru);
      ++r->refs;
      ++hits_;
      return r;
    }
  }
  return nullptr;
}

Registration* MrCache::find(Device& d, void* addr, size_t len, int access) {
  if (!enabled()) return nullptr;
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t pg = page_size();
  apply_invalidations();
  return lookup(d, a & ~(pg - 1), (a + len + pg - 1) & ~(pg - 1), access);
}

Registration* MrCache::acquire(Device& d, void* addr, size_t len, int access, std::string* why) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t pg = page_size();
  const uintptr_t start = a & ~(pg - 1);
  const uintptr_t end = (a + len + pg - 1) & ~(pg - 1);
  const bool cacheable = enabled() && end - start <= limit_;
  if (cacheable) {
    apply_invalidations();
    if (Registration* r = lookup(d, start, end, access)) return r;
    evict_unused(end - start);
  }
  auto* r = new Registration();
  r->dev = &d;
  r->access = access;
  r->refs = 1;
  // Cached entries cover whole pages, so that neighbours in the same pages hit; the pages are the
  // buffer's own, nothing else gets pinned.
  r->start = cacheable ? start : a;
  r->end = cacheable ? end : a + len;
  r->mr = d.reg(reinterpret_cast<void*>(r->start), r->end - r->start, access, why);
  if (r->mr == nullptr && drop_unused()) {
    IB_DEBUG(log_, "%s: registration refused; retrying after dropping the unused cached ones",
             d.name().c_str());
    r->mr = d.reg(reinterpret_cast<void*>(r->start), r->end - r->start, access, why);
  }
  if (r->mr == nullptr) {
    delete r;
    return nullptr;
  }
  if (cacheable) {
    bool watched = false;
    watch_range(start, end, &watched);
    if (watched) {
      r->cached = true;
      by_start_.emplace(start, r);
      lru_.push_front(r);
      r->lru = lru_.begin();
      bytes_ += end - start;
      longest_ = std::max<size_t>(longest_, end - start);
    }
  }
  return r;
}

void MrCache::release(Registration* r) {
  if (r == nullptr || --r->refs > 0) return;
  if (!r->cached) destroy(r);
}

}  // namespace hmc::ibverbs
