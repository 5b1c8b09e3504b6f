// Traits hooks shared by the runtimes that mirror the CUDA *runtime* API (HIP, MUSA): the device
// is chosen per thread with <prefix>SetDevice, copies take a direction argument, and pointers are
// described by <prefix>PointerGetAttributes. A vendor traits class derives from
// RuntimeShaped<Itself>, uses CurrentDeviceScope<Api> as its Scope, and supplies, besides what
// cuda_shaped.h asks for:
//   Api members  set_device, get_device, memcpy_async, pointer_attributes
//   types        PointerAttributes (with members `type` and `device`), MemcpyKind
//   static MemKind memory_kind(const State&, int type)   its memory-type enum, by version
#pragma once

#include <cstring>
#include <utility>

#include "devplug/cuda_shaped.h"

namespace hmc::devplug {

enum class MemKind { Unregistered, Host, Device, Other };

// Makes `ordinal` the calling thread's current device through api.get_device / api.set_device
// (hipSetDevice, musaSetDevice, cnrtSetDevice ...) and restores the previous one on exit, so the
// application's choice survives the plugin's calls.
template <class Api>
class CurrentDeviceScope {
 public:
  template <class State>
  CurrentDeviceScope(Api& api, State&, int ordinal) : api_(api) {
    int current = -1;
    rc_ = api.get_device(&current);
    if (rc_ == Result{} && current != ordinal) {
      rc_ = api.set_device(ordinal);
      if (rc_ == Result{}) previous_ = current;
    }
  }
  ~CurrentDeviceScope() {
    if (previous_ >= 0) api_.set_device(previous_);
  }
  CurrentDeviceScope(const CurrentDeviceScope&) = delete;
  CurrentDeviceScope& operator=(const CurrentDeviceScope&) = delete;
  using Result = decltype(std::declval<Api&>().set_device(0));
  bool ok() const { return rc_ == Result{}; }
  Result result() const { return rc_; }

 private:
  Api& api_;
  Result rc_{};
  int previous_ = -1;
};

template <class V>
struct RuntimeShaped : VendorDefaults {
  // cudaMemcpyKind and its twins: host-to-host 0, host-to-device 1, device-to-host 2,
  // device-to-device 3.
  template <class Api, class State, class Stream>
  static auto copy_async(Api& api, State&, void* dst, const void* src, size_t size,
                         hmc_copy_kind_t kind, Stream stream) {
    using Kind = typename V::MemcpyKind;
    Kind k = kind == HMC_COPY_HOST_TO_DEVICE     ? static_cast<Kind>(1)
             : kind == HMC_COPY_DEVICE_TO_HOST   ? static_cast<Kind>(2)
             : kind == HMC_COPY_DEVICE_TO_DEVICE ? static_cast<Kind>(3)
                                                 : static_cast<Kind>(0);
    return api.memcpy_async(dst, src, size, k, stream);
  }

  template <class Api, class State>
  static bool pointer_kind(Api& api, State& st, const void* ptr, int* ordinal, bool* is_host) {
    // Room beyond the declared struct, in case a runtime version writes more than we declare.
    union {
      typename V::PointerAttributes attr;
      unsigned char room[512];
    } u;
    std::memset(&u, 0, sizeof u);
    if (api.pointer_attributes(&u.attr, ptr) != decltype(api.pointer_attributes(&u.attr, ptr)){})
      return false;  // HIP 5 answers an error for memory it does not know
    switch (V::memory_kind(st, static_cast<int>(u.attr.type))) {
      case MemKind::Host: *is_host = true; return true;
      case MemKind::Device:
        *is_host = false;
        *ordinal = u.attr.device;
        return true;
      default: return false;
    }
  }
};

}  // namespace hmc::devplug
