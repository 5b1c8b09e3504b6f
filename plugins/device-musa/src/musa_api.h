// The part of Moore Threads' MUSA runtime (libmusart.so) and driver (libmusa.so) that the musa
// device plugin calls, declared here so that the plugin builds without the MUSA SDK. The runtime
// is a one-to-one rename of the CUDA runtime API and the driver of the CUDA driver API (without
// the _v2 suffixes); values are CUDA's. Not checked against an official header (none is
// available to us): the items marked (unconfirmed) follow the CUDA equivalent by that rename.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hmc::vendor::musa {

// Runtime (libmusart).
typedef enum musaError {
  musaSuccess = 0,
  musaErrorInvalidValue = 1,
  musaErrorMemoryAllocation = 2,
  musaErrorInitializationError = 3,
  musaErrorInsufficientDriver = 35,
  musaErrorDevicesUnavailable = 46,
  musaErrorNoDevice = 100,
  musaErrorInvalidDevice = 101,
  musaErrorInvalidResourceHandle = 400,
  musaErrorNotReady = 600,
  musaErrorIllegalAddress = 700,
  musaErrorHostMemoryAlreadyRegistered = 712,
  musaErrorHostMemoryNotRegistered = 713,
  musaErrorLaunchFailure = 719,
  musaErrorNotSupported = 801,
  musaErrorUnknown = 999
} musaError_t;

typedef enum musaMemcpyKind {
  musaMemcpyHostToHost = 0,
  musaMemcpyHostToDevice = 1,
  musaMemcpyDeviceToHost = 2,
  musaMemcpyDeviceToDevice = 3,
  musaMemcpyDefault = 4
} musaMemcpyKind;

// musaMemoryType (unconfirmed: CUDA 11+ values).
constexpr int musaMemoryTypeUnregistered = 0;
constexpr int musaMemoryTypeHost = 1;
constexpr int musaMemoryTypeDevice = 2;
constexpr int musaMemoryTypeManaged = 3;

constexpr unsigned musaStreamNonBlocking = 1;
constexpr unsigned musaEventDisableTiming = 2;
constexpr unsigned musaHostAllocPortable = 1;
constexpr unsigned musaHostRegisterPortable = 1;
constexpr unsigned musaIpcMemLazyEnablePeerAccess = 1;
constexpr size_t MUSA_IPC_HANDLE_SIZE = 64;  // (unconfirmed) as CUDA's

struct MUstream_st;
struct MUevent_st;
typedef MUstream_st* musaStream_t;
typedef MUevent_st* musaEvent_t;
typedef struct musaIpcMemHandle_st {
  char reserved[MUSA_IPC_HANDLE_SIZE];
} musaIpcMemHandle_t;
// (unconfirmed) CUDA 11+ layout; callers pass room for more.
struct musaPointerAttributes {
  int type;  // musaMemoryType
  int device;
  void* devicePointer;
  void* hostPointer;
};

typedef musaError_t (*PFN_musaRuntimeGetVersion)(int* runtimeVersion);
typedef musaError_t (*PFN_musaDriverGetVersion)(int* driverVersion);
typedef const char* (*PFN_musaGetErrorName)(musaError_t error);
typedef musaError_t (*PFN_musaGetDeviceCount)(int* count);
typedef musaError_t (*PFN_musaSetDevice)(int device);
typedef musaError_t (*PFN_musaGetDevice)(int* device);
typedef musaError_t (*PFN_musaDeviceGetPCIBusId)(char* pciBusId, int len, int device);
typedef musaError_t (*PFN_musaDeviceCanAccessPeer)(int* canAccessPeer, int device, int peerDevice);
typedef musaError_t (*PFN_musaMemGetInfo)(size_t* free, size_t* total);
typedef musaError_t (*PFN_musaMalloc)(void** devPtr, size_t size);
typedef musaError_t (*PFN_musaFree)(void* devPtr);
typedef musaError_t (*PFN_musaHostAlloc)(void** pHost, size_t size, unsigned int flags);
typedef musaError_t (*PFN_musaFreeHost)(void* ptr);
typedef musaError_t (*PFN_musaHostRegister)(void* ptr, size_t size, unsigned int flags);
typedef musaError_t (*PFN_musaHostUnregister)(void* ptr);
typedef musaError_t (*PFN_musaMemcpyAsync)(void* dst, const void* src, size_t count,
                                           musaMemcpyKind kind, musaStream_t stream);
typedef musaError_t (*PFN_musaStreamCreateWithFlags)(musaStream_t* pStream, unsigned int flags);
typedef musaError_t (*PFN_musaStreamDestroy)(musaStream_t stream);
typedef musaError_t (*PFN_musaEventCreateWithFlags)(musaEvent_t* event, unsigned int flags);
typedef musaError_t (*PFN_musaEventRecord)(musaEvent_t event, musaStream_t stream);
typedef musaError_t (*PFN_musaEventQuery)(musaEvent_t event);
typedef musaError_t (*PFN_musaEventDestroy)(musaEvent_t event);
typedef musaError_t (*PFN_musaIpcGetMemHandle)(musaIpcMemHandle_t* handle, void* devPtr);
typedef musaError_t (*PFN_musaIpcOpenMemHandle)(void** devPtr, musaIpcMemHandle_t handle,
                                                unsigned int flags);
typedef musaError_t (*PFN_musaIpcCloseMemHandle)(void* devPtr);
typedef musaError_t (*PFN_musaPointerGetAttributes)(musaPointerAttributes* attributes,
                                                    const void* ptr);

// Driver (libmusa): device identity, address ranges and dma-buf.
typedef enum MUresult_enum {
  MUSA_SUCCESS = 0,
  MUSA_ERROR_INVALID_VALUE = 1,
  MUSA_ERROR_NOT_INITIALIZED = 3,
  MUSA_ERROR_NO_DEVICE = 100,
  MUSA_ERROR_NOT_FOUND = 500,
  MUSA_ERROR_NOT_SUPPORTED = 801
} MUresult;
typedef int MUdevice;
typedef unsigned long long MUdeviceptr;
typedef struct MUuuid_st {
  char bytes[16];
} MUuuid;
typedef enum MUmemRangeHandleType_enum {
  MU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1  // (unconfirmed) as CUDA's
} MUmemRangeHandleType;

typedef MUresult (*PFN_muInit)(unsigned int flags);
typedef MUresult (*PFN_muDeviceGet)(MUdevice* device, int ordinal);
typedef MUresult (*PFN_muDeviceGetName)(char* name, int len, MUdevice dev);
typedef MUresult (*PFN_muDeviceTotalMem)(size_t* bytes, MUdevice dev);
typedef MUresult (*PFN_muDeviceGetUuid)(MUuuid* uuid, MUdevice dev);
typedef MUresult (*PFN_muMemGetAddressRange)(MUdeviceptr* pbase, size_t* psize, MUdeviceptr dptr);
typedef MUresult (*PFN_muMemGetHandleForAddressRange)(void* handle, MUdeviceptr dptr, size_t size,
                                                      MUmemRangeHandleType handleType,
                                                      unsigned long long flags);
typedef MUresult (*PFN_muGetErrorName)(MUresult error, const char** str);

// musaRuntimeGetVersion encodes major * 1000 + minor * 10, as CUDA's (unconfirmed).
constexpr int kMinRuntimeVersion = 1000;  // MUSA 1.0

}  // namespace hmc::vendor::musa
