// Compile-time check of the cuda plugin's driver declarations (src/cuda_api.h) against the CUDA
// toolkit's cuda.h: every prototype, enum value and struct layout the plugin relies on. Built
// only when cuda.h is found (see CMakeLists.txt); compiling is the test. Not checked here: the
// plain 4-argument cuGetProcAddress (cuda.h declares only cuGetProcAddress_v2 outside the
// toolkit's internal build) and the 9.2 ABI of cuDeviceGetUuid, the fallback for old drivers.
#include "devplug/abi_check.h"

#include <cstddef>

#include "cuda_api.h"

namespace ours = hmc::vendor::cuda;

// cuda.h defines these as macros; take our values before it is included.
constexpr unsigned kOurMemHostAllocPortable = ours::CU_MEMHOSTALLOC_PORTABLE;
constexpr unsigned kOurMemHostAllocDeviceMap = ours::CU_MEMHOSTALLOC_DEVICEMAP;
constexpr unsigned kOurMemHostRegisterPortable = ours::CU_MEMHOSTREGISTER_PORTABLE;
constexpr size_t kOurIpcHandleSize = ours::CU_IPC_HANDLE_SIZE;

#include <cuda.h>

DP_ABI_SAME_TYPE(ours::CUresult, ::CUresult);
DP_ABI_SAME_TYPE(ours::CUdevice_attribute, ::CUdevice_attribute);
DP_ABI_SAME_TYPE(ours::CUpointer_attribute, ::CUpointer_attribute);
DP_ABI_SAME_TYPE(ours::CUmemRangeHandleType, ::CUmemRangeHandleType);
DP_ABI_SAME_TYPE(ours::CUctx_st, ::CUctx_st);
DP_ABI_SAME_TYPE(ours::CUstream_st, ::CUstream_st);
DP_ABI_SAME_TYPE(ours::CUevent_st, ::CUevent_st);
DP_ABI_SAME_TYPE(ours::CUuuid, ::CUuuid);
DP_ABI_SAME_TYPE(ours::CUipcMemHandle, ::CUipcMemHandle);

// Types.
static_assert(std::is_same_v<ours::CUdeviceptr, ::CUdeviceptr>);
static_assert(std::is_same_v<ours::CUdevice, ::CUdevice>);
static_assert(std::is_same_v<ours::cuuint64_t, ::cuuint64_t>);
DP_ABI_CHECK_ENUM(ours::CUresult, ::CUresult);
DP_ABI_CHECK_ENUM(ours::CUdevice_attribute, ::CUdevice_attribute);
DP_ABI_CHECK_ENUM(ours::CUpointer_attribute, ::CUpointer_attribute);
DP_ABI_CHECK_ENUM(ours::CUmemorytype, ::CUmemorytype);
DP_ABI_CHECK_ENUM(ours::CUmemRangeHandleType, ::CUmemRangeHandleType);
DP_ABI_CHECK_SIZE(ours::CUuuid, ::CUuuid);
DP_ABI_CHECK_SIZE(ours::CUipcMemHandle, ::CUipcMemHandle);

// Values.
DP_ABI_CHECK_VALUE(ours::CUDA_SUCCESS, ::CUDA_SUCCESS);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_INVALID_VALUE, ::CUDA_ERROR_INVALID_VALUE);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_OUT_OF_MEMORY, ::CUDA_ERROR_OUT_OF_MEMORY);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_NOT_INITIALIZED, ::CUDA_ERROR_NOT_INITIALIZED);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_DEINITIALIZED, ::CUDA_ERROR_DEINITIALIZED);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_STUB_LIBRARY, ::CUDA_ERROR_STUB_LIBRARY);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_DEVICE_UNAVAILABLE, ::CUDA_ERROR_DEVICE_UNAVAILABLE);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_NO_DEVICE, ::CUDA_ERROR_NO_DEVICE);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_INVALID_DEVICE, ::CUDA_ERROR_INVALID_DEVICE);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_INVALID_CONTEXT, ::CUDA_ERROR_INVALID_CONTEXT);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_ALREADY_MAPPED, ::CUDA_ERROR_ALREADY_MAPPED);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_INVALID_HANDLE, ::CUDA_ERROR_INVALID_HANDLE);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_NOT_FOUND, ::CUDA_ERROR_NOT_FOUND);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_NOT_READY, ::CUDA_ERROR_NOT_READY);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_ILLEGAL_ADDRESS, ::CUDA_ERROR_ILLEGAL_ADDRESS);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
                   ::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
                   ::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_LAUNCH_FAILED, ::CUDA_ERROR_LAUNCH_FAILED);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_NOT_PERMITTED, ::CUDA_ERROR_NOT_PERMITTED);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_NOT_SUPPORTED, ::CUDA_ERROR_NOT_SUPPORTED);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, ::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH);
DP_ABI_CHECK_VALUE(ours::CUDA_ERROR_UNKNOWN, ::CUDA_ERROR_UNKNOWN);
DP_ABI_CHECK_VALUE(ours::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, ::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
DP_ABI_CHECK_VALUE(ours::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, ::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
DP_ABI_CHECK_VALUE(ours::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
                   ::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
DP_ABI_CHECK_VALUE(ours::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, ::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
DP_ABI_CHECK_VALUE(ours::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED,
                   ::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
DP_ABI_CHECK_VALUE(ours::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
                   ::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
DP_ABI_CHECK_VALUE(ours::CU_POINTER_ATTRIBUTE_CONTEXT, ::CU_POINTER_ATTRIBUTE_CONTEXT);
DP_ABI_CHECK_VALUE(ours::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ::CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
DP_ABI_CHECK_VALUE(ours::CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                   ::CU_POINTER_ATTRIBUTE_DEVICE_POINTER);
DP_ABI_CHECK_VALUE(ours::CU_POINTER_ATTRIBUTE_HOST_POINTER, ::CU_POINTER_ATTRIBUTE_HOST_POINTER);
DP_ABI_CHECK_VALUE(ours::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                   ::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
DP_ABI_CHECK_VALUE(ours::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                   ::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR);
DP_ABI_CHECK_VALUE(ours::CU_POINTER_ATTRIBUTE_RANGE_SIZE, ::CU_POINTER_ATTRIBUTE_RANGE_SIZE);
DP_ABI_CHECK_VALUE(ours::CU_MEMORYTYPE_HOST, ::CU_MEMORYTYPE_HOST);
DP_ABI_CHECK_VALUE(ours::CU_MEMORYTYPE_DEVICE, ::CU_MEMORYTYPE_DEVICE);
DP_ABI_CHECK_VALUE(ours::CU_MEMORYTYPE_ARRAY, ::CU_MEMORYTYPE_ARRAY);
DP_ABI_CHECK_VALUE(ours::CU_MEMORYTYPE_UNIFIED, ::CU_MEMORYTYPE_UNIFIED);
DP_ABI_CHECK_VALUE(ours::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                   ::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);
DP_ABI_CHECK_VALUE(ours::CU_STREAM_NON_BLOCKING, ::CU_STREAM_NON_BLOCKING);
DP_ABI_CHECK_VALUE(ours::CU_EVENT_DISABLE_TIMING, ::CU_EVENT_DISABLE_TIMING);
DP_ABI_CHECK_VALUE(ours::CU_EVENT_INTERPROCESS, ::CU_EVENT_INTERPROCESS);
DP_ABI_CHECK_VALUE(ours::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, ::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
DP_ABI_CHECK_VALUE(kOurMemHostAllocPortable, CU_MEMHOSTALLOC_PORTABLE);
DP_ABI_CHECK_VALUE(kOurMemHostAllocDeviceMap, CU_MEMHOSTALLOC_DEVICEMAP);
DP_ABI_CHECK_VALUE(kOurMemHostRegisterPortable, CU_MEMHOSTREGISTER_PORTABLE);
DP_ABI_CHECK_VALUE(kOurIpcHandleSize, CU_IPC_HANDLE_SIZE);

// Prototypes (the suffixed names are what cuGetProcAddress returns for our versions).
DP_ABI_CHECK_FUNCTION(ours::PFN_cuInit, ::cuInit);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuDriverGetVersion, ::cuDriverGetVersion);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuGetErrorName, ::cuGetErrorName);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuDeviceGetCount, ::cuDeviceGetCount);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuDeviceGet, ::cuDeviceGet);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuDeviceGetName, ::cuDeviceGetName);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuDeviceTotalMem_v2, ::cuDeviceTotalMem_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuDeviceGetUuid_v2, ::cuDeviceGetUuid_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuDeviceGetPCIBusId, ::cuDeviceGetPCIBusId);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuDeviceGetAttribute, ::cuDeviceGetAttribute);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuDeviceCanAccessPeer, ::cuDeviceCanAccessPeer);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuDevicePrimaryCtxRetain, ::cuDevicePrimaryCtxRetain);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuDevicePrimaryCtxRelease_v2, ::cuDevicePrimaryCtxRelease_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuCtxSetCurrent, ::cuCtxSetCurrent);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuCtxGetCurrent, ::cuCtxGetCurrent);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemGetInfo_v2, ::cuMemGetInfo_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemAlloc_v2, ::cuMemAlloc_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemFree_v2, ::cuMemFree_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemHostAlloc, ::cuMemHostAlloc);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemFreeHost, ::cuMemFreeHost);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemHostRegister_v2, ::cuMemHostRegister_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemHostUnregister, ::cuMemHostUnregister);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemcpyHtoDAsync_v2, ::cuMemcpyHtoDAsync_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemcpyDtoHAsync_v2, ::cuMemcpyDtoHAsync_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemcpyDtoDAsync_v2, ::cuMemcpyDtoDAsync_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemcpyAsync, ::cuMemcpyAsync);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuStreamCreate, ::cuStreamCreate);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuStreamDestroy_v2, ::cuStreamDestroy_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuEventCreate, ::cuEventCreate);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuEventRecord, ::cuEventRecord);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuEventQuery, ::cuEventQuery);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuEventDestroy_v2, ::cuEventDestroy_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuIpcGetMemHandle, ::cuIpcGetMemHandle);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuIpcOpenMemHandle_v2, ::cuIpcOpenMemHandle_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuIpcCloseMemHandle, ::cuIpcCloseMemHandle);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuPointerGetAttribute, ::cuPointerGetAttribute);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemGetAddressRange_v2, ::cuMemGetAddressRange_v2);
DP_ABI_CHECK_FUNCTION(ours::PFN_cuMemGetHandleForAddressRange, ::cuMemGetHandleForAddressRange);

// The header this was checked against, for the build log of whoever wonders.
static_assert(CUDA_VERSION >= 11070, "the declarations are checked against CUDA 11.7 or newer");
