// The memory a plugin handed out (device allocations, pinned and registered host memory, IPC
// mappings), so that ptr_query answers for it without asking the runtime, frees find their
// device, and finalize can release what the caller left behind. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace hmc::devplug {

enum class AllocKind { Device, HostPinned, HostRegistered, IpcMapped };
const char* alloc_kind_name(AllocKind kind);  // "device memory", "pinned host memory" ...

struct Allocation {
  uintptr_t base = 0;
  size_t size = 0;
  int dev = -1;  // device index; -1 for host memory
  AllocKind kind = AllocKind::Device;
  int refs = 1;  // IPC mappings: a runtime may hand out the same mapping for a handle opened twice
  bool is_host() const {
    return kind == AllocKind::HostPinned || kind == AllocKind::HostRegistered;
  }
};

class AllocTable {
 public:
  // False when the range overlaps one already recorded (the runtime handed out a range twice, or
  // the caller registers host memory twice). An IPC mapping equal to a recorded one (same base,
  // size and device) is counted instead: it takes as many take() calls to remove.
  bool insert(const Allocation& a);
  // The allocation containing p, if any.
  bool find(const void* p, Allocation* out) const;
  // Removes and returns the allocation starting exactly at base, if it is of that kind (for a
  // counted IPC mapping, drops one reference and returns it with refs > 0 while others remain).
  bool take(const void* base, AllocKind kind, Allocation* out);
  // Removes and returns everything (for finalize).
  std::vector<Allocation> take_all();

 private:
  mutable std::mutex mutex_;
  std::map<uintptr_t, Allocation> by_base_;
};

}  // namespace hmc::devplug
