#include "util/handles.h"

#include <atomic>

#include "util/hot.h"

namespace hmc {
namespace {
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<const void*, HandleKind>& registry() {
  static auto* r =
      new std::unordered_map<const void*, HandleKind>();  // never destroyed: safe at exit
  return *r;
}

// Every removal bumps the epoch. A thread remembers, per kind, the last handle it found live and
// the epoch it saw then: while no handle was removed since, the same handle is still live, and the
// check needs no lock (the common case: one peer used for message after message).
std::atomic<uint64_t> g_epoch{1};
constexpr int kKinds = static_cast<int>(HandleKind::kCount);
struct Remembered {
  const void* handle = nullptr;
  uint64_t epoch = 0;
};
thread_local Remembered t_last[kKinds];
}  // namespace

void Handles::add(const void* h, HandleKind kind) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[h] = kind;
}

void Handles::remove(const void* h) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().erase(h);
  g_epoch.fetch_add(1, std::memory_order_acq_rel);
}

HMC_HOT bool Handles::valid(const void* h, HandleKind kind) {
  if (!h) return false;
  Remembered& last = t_last[static_cast<int>(kind)];
  uint64_t epoch = g_epoch.load(std::memory_order_acquire);
  if (last.handle == h && last.epoch == epoch) return true;
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(h);
  if (it == registry().end() || it->second != kind) return false;
  // Read under the lock: no removal can slip between the lookup and this epoch.
  last.handle = h;
  last.epoch = g_epoch.load(std::memory_order_relaxed);
  return true;
}

}  // namespace hmc
