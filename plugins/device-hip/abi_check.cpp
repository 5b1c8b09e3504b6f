// Compile-time check of the hip plugin's declarations (src/hip_api.h) against the HIP headers
// (Debian's libamdhip64-dev, HIP 5.2): every prototype, enum value and struct layout the plugin
// relies on. Built only when the headers are found (see CMakeLists.txt); compiling is the test.
// The HIP 6 values (namespace v6) and the functions HIP 5.2 lacks (hipMemGetHandleForAddressRange,
// the HSA dma-buf export) are checked when the headers are new enough to have them.
#include "devplug/abi_check.h"

#include <cstddef>

#include "hip_api.h"

namespace ours = hmc::vendor::hip;

// The HIP headers define these as macros; take our values before they are included.
constexpr unsigned kOurStreamNonBlocking = ours::hipStreamNonBlocking;
constexpr unsigned kOurEventDisableTiming = ours::hipEventDisableTiming;
constexpr unsigned kOurHostMallocPortable = ours::hipHostMallocPortable;
constexpr unsigned kOurHostRegisterPortable = ours::hipHostRegisterPortable;
[[maybe_unused]] constexpr unsigned kOurIpcLazyV5 = ours::v5::hipIpcMemLazyEnablePeerAccess;
[[maybe_unused]] constexpr unsigned kOurIpcLazyV6 = ours::v6::hipIpcMemLazyEnablePeerAccess;
constexpr size_t kOurIpcHandleSize = ours::HIP_IPC_HANDLE_SIZE;

// The C++ template overloads (hipMalloc(T**, ...)) would make &hipMalloc ambiguous.
#define __HIP_DISABLE_CPP_FUNCTIONS__ 1
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>

DP_ABI_SAME_TYPE(ours::hipError_t, ::hipError_t);
DP_ABI_SAME_TYPE(ours::hipMemcpyKind, ::hipMemcpyKind);
DP_ABI_SAME_TYPE(ours::hipDeviceAttribute_t, ::hipDeviceAttribute_t);
DP_ABI_SAME_TYPE(ours::ihipStream_t, ::ihipStream_t);
DP_ABI_SAME_TYPE(ours::ihipEvent_t, ::ihipEvent_t);
DP_ABI_SAME_TYPE(ours::hipUUID, ::hipUUID);
DP_ABI_SAME_TYPE(ours::hipIpcMemHandle_t, ::hipIpcMemHandle_t);
DP_ABI_SAME_TYPE(ours::hipPointerAttribute_t, ::hipPointerAttribute_t);

// Types and layouts.
static_assert(std::is_same_v<ours::hipDevice_t, ::hipDevice_t>);
static_assert(std::is_same_v<ours::hipDeviceptr_t, ::hipDeviceptr_t>);
DP_ABI_CHECK_ENUM(ours::hipError_t, ::hipError_t);
DP_ABI_CHECK_ENUM(ours::hipMemcpyKind, ::hipMemcpyKind);
DP_ABI_CHECK_ENUM(ours::hipDeviceAttribute_t, ::hipDeviceAttribute_t);
DP_ABI_CHECK_SIZE(ours::hipUUID, ::hipUUID);
DP_ABI_CHECK_SIZE(ours::hipIpcMemHandle_t, ::hipIpcMemHandle_t);
DP_ABI_CHECK_SIZE(ours::hipPointerAttribute_t, ::hipPointerAttribute_t);
DP_ABI_CHECK_SIZE(int, enum hipMemoryType);
#if HIP_VERSION_MAJOR < 6
DP_ABI_CHECK_OFFSET(ours::hipPointerAttribute_t, type, ::hipPointerAttribute_t, memoryType);
#else
DP_ABI_CHECK_OFFSET(ours::hipPointerAttribute_t, type, ::hipPointerAttribute_t, type);
#endif
DP_ABI_CHECK_OFFSET(ours::hipPointerAttribute_t, device, ::hipPointerAttribute_t, device);
DP_ABI_CHECK_OFFSET(ours::hipPointerAttribute_t, devicePointer, ::hipPointerAttribute_t,
                    devicePointer);
DP_ABI_CHECK_OFFSET(ours::hipPointerAttribute_t, hostPointer, ::hipPointerAttribute_t, hostPointer);
DP_ABI_CHECK_OFFSET(ours::hipPointerAttribute_t, isManaged, ::hipPointerAttribute_t, isManaged);
DP_ABI_CHECK_OFFSET(ours::hipPointerAttribute_t, allocationFlags, ::hipPointerAttribute_t,
                    allocationFlags);

// Values.
DP_ABI_CHECK_VALUE(ours::hipSuccess, ::hipSuccess);
DP_ABI_CHECK_VALUE(ours::hipErrorInvalidValue, ::hipErrorInvalidValue);
DP_ABI_CHECK_VALUE(ours::hipErrorOutOfMemory, ::hipErrorOutOfMemory);
DP_ABI_CHECK_VALUE(ours::hipErrorNotInitialized, ::hipErrorNotInitialized);
DP_ABI_CHECK_VALUE(ours::hipErrorDeinitialized, ::hipErrorDeinitialized);
DP_ABI_CHECK_VALUE(ours::hipErrorInsufficientDriver, ::hipErrorInsufficientDriver);
DP_ABI_CHECK_VALUE(ours::hipErrorNoDevice, ::hipErrorNoDevice);
DP_ABI_CHECK_VALUE(ours::hipErrorInvalidDevice, ::hipErrorInvalidDevice);
DP_ABI_CHECK_VALUE(ours::hipErrorInvalidContext, ::hipErrorInvalidContext);
DP_ABI_CHECK_VALUE(ours::hipErrorInvalidHandle, ::hipErrorInvalidHandle);
DP_ABI_CHECK_VALUE(ours::hipErrorNotFound, ::hipErrorNotFound);
DP_ABI_CHECK_VALUE(ours::hipErrorNotReady, ::hipErrorNotReady);
DP_ABI_CHECK_VALUE(ours::hipErrorIllegalAddress, ::hipErrorIllegalAddress);
DP_ABI_CHECK_VALUE(ours::hipErrorHostMemoryAlreadyRegistered,
                   ::hipErrorHostMemoryAlreadyRegistered);
DP_ABI_CHECK_VALUE(ours::hipErrorHostMemoryNotRegistered, ::hipErrorHostMemoryNotRegistered);
DP_ABI_CHECK_VALUE(ours::hipErrorLaunchFailure, ::hipErrorLaunchFailure);
DP_ABI_CHECK_VALUE(ours::hipErrorNotSupported, ::hipErrorNotSupported);
DP_ABI_CHECK_VALUE(ours::hipErrorUnknown, ::hipErrorUnknown);
DP_ABI_CHECK_VALUE(ours::hipMemcpyHostToHost, ::hipMemcpyHostToHost);
DP_ABI_CHECK_VALUE(ours::hipMemcpyHostToDevice, ::hipMemcpyHostToDevice);
DP_ABI_CHECK_VALUE(ours::hipMemcpyDeviceToHost, ::hipMemcpyDeviceToHost);
DP_ABI_CHECK_VALUE(ours::hipMemcpyDeviceToDevice, ::hipMemcpyDeviceToDevice);
DP_ABI_CHECK_VALUE(ours::hipMemcpyDefault, ::hipMemcpyDefault);
DP_ABI_CHECK_VALUE(ours::hipDeviceAttributePciBusId, ::hipDeviceAttributePciBusId);
DP_ABI_CHECK_VALUE(ours::hipDeviceAttributePciDeviceId, ::hipDeviceAttributePciDeviceId);
DP_ABI_CHECK_VALUE(ours::hipDeviceAttributePciDomainID, ::hipDeviceAttributePciDomainID);
DP_ABI_CHECK_VALUE(kOurStreamNonBlocking, hipStreamNonBlocking);
DP_ABI_CHECK_VALUE(kOurEventDisableTiming, hipEventDisableTiming);
DP_ABI_CHECK_VALUE(kOurHostMallocPortable, hipHostMallocPortable);
DP_ABI_CHECK_VALUE(kOurHostRegisterPortable, hipHostRegisterPortable);
DP_ABI_CHECK_VALUE(kOurIpcHandleSize, HIP_IPC_HANDLE_SIZE);
#if HIP_VERSION_MAJOR < 6
DP_ABI_CHECK_VALUE(ours::v5::hipMemoryTypeHost, ::hipMemoryTypeHost);
DP_ABI_CHECK_VALUE(ours::v5::hipMemoryTypeDevice, ::hipMemoryTypeDevice);
DP_ABI_CHECK_VALUE(ours::v5::hipMemoryTypeArray, ::hipMemoryTypeArray);
DP_ABI_CHECK_VALUE(ours::v5::hipMemoryTypeUnified, ::hipMemoryTypeUnified);
DP_ABI_CHECK_VALUE(kOurIpcLazyV5, hipIpcMemLazyEnablePeerAccess);
#else
DP_ABI_CHECK_VALUE(ours::v6::hipMemoryTypeUnregistered, ::hipMemoryTypeUnregistered);
DP_ABI_CHECK_VALUE(ours::v6::hipMemoryTypeHost, ::hipMemoryTypeHost);
DP_ABI_CHECK_VALUE(ours::v6::hipMemoryTypeDevice, ::hipMemoryTypeDevice);
DP_ABI_CHECK_VALUE(ours::v6::hipMemoryTypeManaged, ::hipMemoryTypeManaged);
DP_ABI_CHECK_VALUE(ours::v6::hipMemoryTypeArray, ::hipMemoryTypeArray);
DP_ABI_CHECK_VALUE(ours::v6::hipMemoryTypeUnified, ::hipMemoryTypeUnified);
DP_ABI_CHECK_VALUE(kOurIpcLazyV6, hipIpcMemLazyEnablePeerAccess);
#endif

// Prototypes.
DP_ABI_CHECK_FUNCTION(ours::PFN_hipInit, ::hipInit);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipRuntimeGetVersion, ::hipRuntimeGetVersion);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipDriverGetVersion, ::hipDriverGetVersion);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipGetErrorName, ::hipGetErrorName);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipGetDeviceCount, ::hipGetDeviceCount);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipDeviceGet, ::hipDeviceGet);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipDeviceGetName, ::hipDeviceGetName);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipDeviceTotalMem, ::hipDeviceTotalMem);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipDeviceGetUuid, ::hipDeviceGetUuid);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipDeviceGetPCIBusId, ::hipDeviceGetPCIBusId);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipDeviceGetAttribute, ::hipDeviceGetAttribute);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipDeviceCanAccessPeer, ::hipDeviceCanAccessPeer);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipSetDevice, ::hipSetDevice);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipGetDevice, ::hipGetDevice);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipMemGetInfo, ::hipMemGetInfo);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipMalloc, ::hipMalloc);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipFree, ::hipFree);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipHostMalloc, ::hipHostMalloc);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // deprecated in 5.x, the name in 7.x
DP_ABI_CHECK_FUNCTION(ours::PFN_hipHostMalloc, ::hipHostAlloc);
#pragma GCC diagnostic pop
DP_ABI_CHECK_FUNCTION(ours::PFN_hipHostFree, ::hipHostFree);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipHostRegister, ::hipHostRegister);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipHostUnregister, ::hipHostUnregister);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipMemcpyAsync, ::hipMemcpyAsync);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipStreamCreateWithFlags, ::hipStreamCreateWithFlags);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipStreamDestroy, ::hipStreamDestroy);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipEventCreateWithFlags, ::hipEventCreateWithFlags);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipEventRecord, ::hipEventRecord);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipEventQuery, ::hipEventQuery);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipEventDestroy, ::hipEventDestroy);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipIpcGetMemHandle, ::hipIpcGetMemHandle);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipIpcOpenMemHandle, ::hipIpcOpenMemHandle);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipIpcCloseMemHandle, ::hipIpcCloseMemHandle);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipPointerGetAttributes, ::hipPointerGetAttributes);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipMemGetAddressRange, ::hipMemGetAddressRange);
#if HIP_VERSION_MAJOR >= 7
DP_ABI_SAME_TYPE(ours::hipMemRangeHandleType, ::hipMemRangeHandleType);
DP_ABI_CHECK_VALUE(ours::hipMemRangeHandleTypeDmaBufFd, ::hipMemRangeHandleTypeDmaBufFd);
DP_ABI_CHECK_FUNCTION(ours::PFN_hipMemGetHandleForAddressRange, ::hipMemGetHandleForAddressRange);
#endif
