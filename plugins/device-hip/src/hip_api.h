// The part of the HIP runtime (libamdhip64) and of the HSA runtime (libhsa-runtime64) that the hip
// device plugin calls, declared here so that the plugin builds without ROCm. Values follow
// hip_runtime_api.h. Two ABI differences between HIP 5.x and 6.x matter here and are decided at
// run time from hipRuntimeGetVersion: the values of hipMemoryType and of
// hipIpcMemLazyEnablePeerAccess (namespaces v5 and v6 below), and the first field of
// hipPointerAttribute_t (memoryType in 5.x, type in 6.x: same place, same size).
// abi_check.cpp compares these declarations with Debian's libamdhip64-dev headers (HIP 5.2) when
// they are installed; the emulated runtime in tests/fakes implements the same prototypes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hmc::vendor::hip {

typedef enum hipError_t {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorOutOfMemory = 2,
  hipErrorNotInitialized = 3,
  hipErrorDeinitialized = 4,
  hipErrorInsufficientDriver = 35,
  hipErrorNoDevice = 100,
  hipErrorInvalidDevice = 101,
  hipErrorInvalidContext = 201,
  hipErrorInvalidHandle = 400,
  hipErrorNotFound = 500,
  hipErrorNotReady = 600,
  hipErrorIllegalAddress = 700,
  hipErrorHostMemoryAlreadyRegistered = 712,
  hipErrorHostMemoryNotRegistered = 713,
  hipErrorLaunchFailure = 719,
  hipErrorNotSupported = 801,
  hipErrorUnknown = 999
} hipError_t;

typedef enum hipMemcpyKind {
  hipMemcpyHostToHost = 0,
  hipMemcpyHostToDevice = 1,
  hipMemcpyDeviceToHost = 2,
  hipMemcpyDeviceToDevice = 3,
  hipMemcpyDefault = 4
} hipMemcpyKind;

// hipDeviceAttribute_t: only the values the plugin names (equal in HIP 5.2 and 6.x).
typedef enum hipDeviceAttribute_t {
  hipDeviceAttributePciBusId = 67,
  hipDeviceAttributePciDeviceId = 68,
  hipDeviceAttributePciDomainID = 69
} hipDeviceAttribute_t;

// hipMemoryType values by runtime major version.
namespace v5 {
constexpr int hipMemoryTypeHost = 0;
constexpr int hipMemoryTypeDevice = 1;
constexpr int hipMemoryTypeArray = 2;
constexpr int hipMemoryTypeUnified = 3;
constexpr unsigned hipIpcMemLazyEnablePeerAccess = 0;
}  // namespace v5
namespace v6 {
constexpr int hipMemoryTypeUnregistered = 0;
constexpr int hipMemoryTypeHost = 1;
constexpr int hipMemoryTypeDevice = 2;
constexpr int hipMemoryTypeManaged = 3;
constexpr int hipMemoryTypeArray = 10;
constexpr int hipMemoryTypeUnified = 11;
constexpr unsigned hipIpcMemLazyEnablePeerAccess = 1;
}  // namespace v6

// hipMemRangeHandleType (HIP 7.0+).
typedef enum hipMemRangeHandleType { hipMemRangeHandleTypeDmaBufFd = 1 } hipMemRangeHandleType;

constexpr unsigned hipStreamNonBlocking = 1;
constexpr unsigned hipEventDisableTiming = 2;
constexpr unsigned hipHostMallocPortable = 1;
constexpr unsigned hipHostRegisterPortable = 1;
constexpr size_t HIP_IPC_HANDLE_SIZE = 64;

typedef int hipDevice_t;
typedef void* hipDeviceptr_t;
struct ihipStream_t;
struct ihipEvent_t;
typedef ihipStream_t* hipStream_t;
typedef ihipEvent_t* hipEvent_t;
typedef struct hipUUID_t {
  char bytes[16];
} hipUUID;
typedef struct hipIpcMemHandle_st {
  char reserved[HIP_IPC_HANDLE_SIZE];
} hipIpcMemHandle_t;
// The first field is an enum hipMemoryType (4 bytes), named memoryType before HIP 6.
typedef struct hipPointerAttribute_t {
  int type;
  int device;
  void* devicePointer;
  void* hostPointer;
  int isManaged;
  unsigned allocationFlags;
} hipPointerAttribute_t;

typedef hipError_t (*PFN_hipInit)(unsigned int flags);
typedef hipError_t (*PFN_hipRuntimeGetVersion)(int* runtimeVersion);
typedef hipError_t (*PFN_hipDriverGetVersion)(int* driverVersion);
typedef const char* (*PFN_hipGetErrorName)(hipError_t hip_error);
typedef hipError_t (*PFN_hipGetDeviceCount)(int* count);
typedef hipError_t (*PFN_hipDeviceGet)(hipDevice_t* device, int ordinal);
typedef hipError_t (*PFN_hipDeviceGetName)(char* name, int len, hipDevice_t device);
typedef hipError_t (*PFN_hipDeviceTotalMem)(size_t* bytes, hipDevice_t device);
typedef hipError_t (*PFN_hipDeviceGetUuid)(hipUUID* uuid, hipDevice_t device);
typedef hipError_t (*PFN_hipDeviceGetPCIBusId)(char* pciBusId, int len, int device);
typedef hipError_t (*PFN_hipDeviceGetAttribute)(int* pi, hipDeviceAttribute_t attr, int deviceId);
typedef hipError_t (*PFN_hipDeviceCanAccessPeer)(int* canAccessPeer, int deviceId,
                                                 int peerDeviceId);
typedef hipError_t (*PFN_hipSetDevice)(int deviceId);
typedef hipError_t (*PFN_hipGetDevice)(int* deviceId);
typedef hipError_t (*PFN_hipMemGetInfo)(size_t* free, size_t* total);
typedef hipError_t (*PFN_hipMalloc)(void** ptr, size_t size);
typedef hipError_t (*PFN_hipFree)(void* ptr);
typedef hipError_t (*PFN_hipHostMalloc)(void** ptr, size_t size, unsigned int flags);
typedef hipError_t (*PFN_hipHostFree)(void* ptr);
typedef hipError_t (*PFN_hipHostRegister)(void* hostPtr, size_t sizeBytes, unsigned int flags);
typedef hipError_t (*PFN_hipHostUnregister)(void* hostPtr);
typedef hipError_t (*PFN_hipMemcpyAsync)(void* dst, const void* src, size_t sizeBytes,
                                         hipMemcpyKind kind, hipStream_t stream);
typedef hipError_t (*PFN_hipStreamCreateWithFlags)(hipStream_t* stream, unsigned int flags);
typedef hipError_t (*PFN_hipStreamDestroy)(hipStream_t stream);
typedef hipError_t (*PFN_hipEventCreateWithFlags)(hipEvent_t* event, unsigned flags);
typedef hipError_t (*PFN_hipEventRecord)(hipEvent_t event, hipStream_t stream);
typedef hipError_t (*PFN_hipEventQuery)(hipEvent_t event);
typedef hipError_t (*PFN_hipEventDestroy)(hipEvent_t event);
typedef hipError_t (*PFN_hipIpcGetMemHandle)(hipIpcMemHandle_t* handle, void* devPtr);
typedef hipError_t (*PFN_hipIpcOpenMemHandle)(void** devPtr, hipIpcMemHandle_t handle,
                                              unsigned int flags);
typedef hipError_t (*PFN_hipIpcCloseMemHandle)(void* devPtr);
typedef hipError_t (*PFN_hipPointerGetAttributes)(hipPointerAttribute_t* attributes,
                                                  const void* ptr);
typedef hipError_t (*PFN_hipMemGetAddressRange)(hipDeviceptr_t* pbase, size_t* psize,
                                                hipDeviceptr_t dptr);
// HIP 7.0+ (absent from HIP 5/6 and from Hygon DTK).
typedef hipError_t (*PFN_hipMemGetHandleForAddressRange)(void* handle, hipDeviceptr_t dptr,
                                                         size_t size,
                                                         hipMemRangeHandleType handleType,
                                                         unsigned long long flags);

// HSA (libhsa-runtime64.so.1): dma-buf export before HIP 7 (ROCm 5.6+).
typedef enum hsa_status_t {
  HSA_STATUS_SUCCESS = 0x0,
  HSA_STATUS_ERROR = 0x1000,
  HSA_STATUS_ERROR_INVALID_ARGUMENT = 0x1001
} hsa_status_t;
typedef hsa_status_t (*PFN_hsa_amd_portable_export_dmabuf)(const void* ptr, size_t size,
                                                           int* dmabuf, uint64_t* offset);
typedef hsa_status_t (*PFN_hsa_amd_portable_close_dmabuf)(int dmabuf);

// HIP_VERSION = major * 10000000 + minor * 100000 + patch.
constexpr int kMinRuntimeVersion = 50000000;  // HIP 5.0

}  // namespace hmc::vendor::hip
