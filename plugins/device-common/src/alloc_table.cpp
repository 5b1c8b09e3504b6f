#include "devplug/alloc_table.h"

#include <iterator>

namespace hmc::devplug {

const char* alloc_kind_name(AllocKind kind) {
  switch (kind) {
    case AllocKind::Device: return "device memory";
    case AllocKind::HostPinned: return "pinned host memory";
    case AllocKind::HostRegistered: return "registered host memory";
    case AllocKind::IpcMapped: return "an IPC mapping";
  }
  return "memory";
}

bool AllocTable::insert(const Allocation& a) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto same = by_base_.find(a.base);
  if (same != by_base_.end() && a.kind == AllocKind::IpcMapped &&
      same->second.kind == AllocKind::IpcMapped && same->second.size == a.size &&
      same->second.dev == a.dev) {
    ++same->second.refs;
    return true;
  }
  auto next = by_base_.lower_bound(a.base);
  if (next != by_base_.end() && next->first < a.base + (a.size ? a.size : 1)) return false;
  if (next != by_base_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.size > a.base) return false;
  }
  by_base_.emplace(a.base, a);
  return true;
}

bool AllocTable::find(const void* p, Allocation* out) const {
  auto addr = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_base_.upper_bound(addr);
  if (it == by_base_.begin()) return false;
  --it;
  const Allocation& a = it->second;
  if (addr >= a.base + (a.size ? a.size : 1)) return false;
  *out = a;
  return true;
}

bool AllocTable::take(const void* base, AllocKind kind, Allocation* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = by_base_.find(reinterpret_cast<uintptr_t>(base));
  if (it == by_base_.end() || it->second.kind != kind) return false;
  if (--it->second.refs > 0) {
    *out = it->second;
    return true;
  }
  *out = it->second;
  by_base_.erase(it);
  return true;
}

std::vector<Allocation> AllocTable::take_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Allocation> all;
  all.reserve(by_base_.size());
  for (auto& [base, a] : by_base_) all.push_back(a);
  by_base_.clear();
  return all;
}

}  // namespace hmc::devplug
