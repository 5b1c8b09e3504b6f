// DLPack's C ABI (v0.x): the tensors that numpy (1.22+), torch, cupy and jax exchange through a
// capsule named "dltensor" (after consumption "used_dltensor"), as `__dlpack__()` returns it.
// Declared here rather than taken from <dlpack/dlpack.h> so that the package builds without
// it; where that header is installed, the layouts are checked against it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hmcpy::dl {

enum DeviceType : int32_t {
  kCPU = 1,
  kCUDA = 2,
  kCUDAHost = 3,
  kROCM = 10,
  kROCMHost = 11,
  kCUDAManaged = 13,
};
enum TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2 };

struct Device {
  int32_t type;
  int32_t id;
};
struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL: compact row-major
  uint64_t byte_offset;
};
struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor*);
};

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

// The device types whose memory hmc reaches by its address: host memory (plain and pinned),
// CUDA (plain and managed) and ROCm memory, which the device plugins recognise.
inline bool reachable(int32_t type) {
  return type == kCPU || type == kCUDA || type == kCUDAHost || type == kROCM || type == kROCMHost ||
         type == kCUDAManaged;
}

}  // namespace hmcpy::dl

#if defined(__has_include)
#if __has_include(<dlpack/dlpack.h>)
#include <dlpack/dlpack.h>
static_assert(sizeof(hmcpy::dl::Tensor) == sizeof(DLTensor), "DLTensor's layout");
static_assert(offsetof(hmcpy::dl::Tensor, byte_offset) == offsetof(DLTensor, byte_offset),
              "DLTensor's layout");
static_assert(offsetof(hmcpy::dl::ManagedTensor, deleter) == offsetof(DLManagedTensor, deleter),
              "DLManagedTensor's layout");
static_assert(int{hmcpy::dl::kCUDA} == int{kDLCUDA} && int{hmcpy::dl::kROCM} == int{kDLROCM} &&
                  int{hmcpy::dl::kCUDAManaged} == int{kDLCUDAManaged},
              "DLPack's device types");
#endif
#endif
