// The part of the CUDA driver API (libcuda.so.1) that the cuda device plugin calls, declared here
// so that the plugin builds without the CUDA toolkit. Values and prototypes follow cuda.h; where
// cuda.h maps a name to an ABI suffix (cuMemAlloc -> cuMemAlloc_v2), the type is named after the
// suffixed symbol, and the version column of the symbol table (cuda_vendor.cpp) is the
// cuGetProcAddress version that returns that ABI. abi_check.cpp compares every declaration here
// with the real cuda.h when the toolkit is installed; the emulated driver in tests/fakes
// implements the same prototypes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hmc::vendor::cuda {

typedef enum cudaError_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_ALREADY_MAPPED = 208,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
  CUDA_ERROR_UNKNOWN = 999
} CUresult;

typedef enum CUdevice_attribute_enum {
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 116,
  CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124
} CUdevice_attribute;

typedef enum CUpointer_attribute_enum {
  CU_POINTER_ATTRIBUTE_CONTEXT = 1,
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
  CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
  CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
  CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12
} CUpointer_attribute;

typedef enum CUmemorytype_enum {
  CU_MEMORYTYPE_HOST = 1,
  CU_MEMORYTYPE_DEVICE = 2,
  CU_MEMORYTYPE_ARRAY = 3,
  CU_MEMORYTYPE_UNIFIED = 4
} CUmemorytype;

typedef enum CUmemRangeHandleType_enum {
  CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1
} CUmemRangeHandleType;

// Flags (macros in cuda.h, enum members of unnamed enums in newer versions).
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 2;
constexpr unsigned CU_EVENT_INTERPROCESS = 4;
constexpr unsigned CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1;
constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 1;
constexpr unsigned CU_MEMHOSTALLOC_DEVICEMAP = 2;
constexpr unsigned CU_MEMHOSTREGISTER_PORTABLE = 1;
constexpr size_t CU_IPC_HANDLE_SIZE = 64;

typedef unsigned long long CUdeviceptr;  // CUdeviceptr_v2 on 64-bit hosts
typedef int CUdevice;
typedef uint64_t cuuint64_t;
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
typedef CUctx_st* CUcontext;
typedef CUstream_st* CUstream;
typedef CUevent_st* CUevent;
typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;
typedef struct CUipcMemHandle_st {
  char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;

// Function types, one per exported symbol.
typedef CUresult (*PFN_cuInit)(unsigned int flags);
typedef CUresult (*PFN_cuDriverGetVersion)(int* version);
// The plain exported cuGetProcAddress (CUDA 11.3 ABI; cuda.h 12+ maps the name to
// cuGetProcAddress_v2, which adds a query-result argument).
typedef CUresult (*PFN_cuGetProcAddress)(const char* symbol, void** pfn, int cudaVersion,
                                         cuuint64_t flags);
typedef CUresult (*PFN_cuGetErrorName)(CUresult error, const char** str);
typedef CUresult (*PFN_cuDeviceGetCount)(int* count);
typedef CUresult (*PFN_cuDeviceGet)(CUdevice* device, int ordinal);
typedef CUresult (*PFN_cuDeviceGetName)(char* name, int len, CUdevice dev);
typedef CUresult (*PFN_cuDeviceTotalMem_v2)(size_t* bytes, CUdevice dev);
typedef CUresult (*PFN_cuDeviceGetUuid_v2)(CUuuid* uuid, CUdevice dev);
typedef CUresult (*PFN_cuDeviceGetPCIBusId)(char* pciBusId, int len, CUdevice dev);
typedef CUresult (*PFN_cuDeviceGetAttribute)(int* pi, CUdevice_attribute attrib, CUdevice dev);
typedef CUresult (*PFN_cuDeviceCanAccessPeer)(int* canAccessPeer, CUdevice dev, CUdevice peerDev);
typedef CUresult (*PFN_cuDevicePrimaryCtxRetain)(CUcontext* pctx, CUdevice dev);
typedef CUresult (*PFN_cuDevicePrimaryCtxRelease_v2)(CUdevice dev);
typedef CUresult (*PFN_cuCtxSetCurrent)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxGetCurrent)(CUcontext* pctx);
typedef CUresult (*PFN_cuMemGetInfo_v2)(size_t* free, size_t* total);
typedef CUresult (*PFN_cuMemAlloc_v2)(CUdeviceptr* dptr, size_t bytesize);
typedef CUresult (*PFN_cuMemFree_v2)(CUdeviceptr dptr);
typedef CUresult (*PFN_cuMemHostAlloc)(void** pp, size_t bytesize, unsigned int Flags);
typedef CUresult (*PFN_cuMemFreeHost)(void* p);
typedef CUresult (*PFN_cuMemHostRegister_v2)(void* p, size_t bytesize, unsigned int Flags);
typedef CUresult (*PFN_cuMemHostUnregister)(void* p);
typedef CUresult (*PFN_cuMemcpyHtoDAsync_v2)(CUdeviceptr dstDevice, const void* srcHost,
                                             size_t ByteCount, CUstream hStream);
typedef CUresult (*PFN_cuMemcpyDtoHAsync_v2)(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                             CUstream hStream);
typedef CUresult (*PFN_cuMemcpyDtoDAsync_v2)(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                             size_t ByteCount, CUstream hStream);
typedef CUresult (*PFN_cuMemcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                      CUstream hStream);
typedef CUresult (*PFN_cuStreamCreate)(CUstream* phStream, unsigned int Flags);
typedef CUresult (*PFN_cuStreamDestroy_v2)(CUstream hStream);
typedef CUresult (*PFN_cuEventCreate)(CUevent* phEvent, unsigned int Flags);
typedef CUresult (*PFN_cuEventRecord)(CUevent hEvent, CUstream hStream);
typedef CUresult (*PFN_cuEventQuery)(CUevent hEvent);
typedef CUresult (*PFN_cuEventDestroy_v2)(CUevent hEvent);
typedef CUresult (*PFN_cuIpcGetMemHandle)(CUipcMemHandle* pHandle, CUdeviceptr dptr);
typedef CUresult (*PFN_cuIpcOpenMemHandle_v2)(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                              unsigned int Flags);
typedef CUresult (*PFN_cuIpcCloseMemHandle)(CUdeviceptr dptr);
typedef CUresult (*PFN_cuPointerGetAttribute)(void* data, CUpointer_attribute attribute,
                                              CUdeviceptr ptr);
typedef CUresult (*PFN_cuMemGetAddressRange_v2)(CUdeviceptr* pbase, size_t* psize,
                                                CUdeviceptr dptr);
typedef CUresult (*PFN_cuMemGetHandleForAddressRange)(void* handle, CUdeviceptr dptr, size_t size,
                                                      CUmemRangeHandleType handleType,
                                                      unsigned long long flags);

// The oldest driver the plugin accepts: cuGetProcAddress appeared in CUDA 11.3.
constexpr int kMinDriverVersion = 11030;

}  // namespace hmc::vendor::cuda
