// The part of NCCL's public API (nccl.h) and of the CUDA driver API (cuda.h) the nccl ccl plugin
// calls, declared here so that the plugin builds without the CUDA toolkit. Values and
// prototypes follow NCCL 2.x's nccl.h; abi_check.cpp holds them to the toolkit's headers where
// those are installed.
#pragma once

#include <cstddef>

// The CUDA driver API calls the plugin makes for its communicators' streams and its requests'
// events (libcuda.so.1).
namespace hmc::vendor::cudadrv {

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;

using PFN_cuInit = CUresult (*)(unsigned flags);
using PFN_cuDeviceGetCount = CUresult (*)(int* count);
using PFN_cuDeviceGet = CUresult (*)(CUdevice* dev, int ordinal);
using PFN_cuDevicePrimaryCtxRetain = CUresult (*)(CUcontext* ctx, CUdevice dev);
using PFN_cuDevicePrimaryCtxRelease = CUresult (*)(CUdevice dev);
using PFN_cuCtxGetCurrent = CUresult (*)(CUcontext* ctx);
using PFN_cuCtxSetCurrent = CUresult (*)(CUcontext ctx);
using PFN_cuStreamCreate = CUresult (*)(CUstream* stream, unsigned flags);
using PFN_cuStreamDestroy = CUresult (*)(CUstream stream);
using PFN_cuEventCreate = CUresult (*)(CUevent* event, unsigned flags);
using PFN_cuEventRecord = CUresult (*)(CUevent event, CUstream stream);
using PFN_cuEventQuery = CUresult (*)(CUevent event);
using PFN_cuEventDestroy = CUresult (*)(CUevent event);
using PFN_cuGetErrorName = CUresult (*)(CUresult error, const char** name);

}  // namespace hmc::vendor::cudadrv

// The HIP runtime calls the rccl ccl plugin (this source built with HMC_CCL_RCCL) makes for the
// same purpose (libamdhip64.so.6); HIP's values as hip_runtime_api.h gives them.
namespace hmc::vendor::hiprt {

typedef int hipError_t;
typedef struct ihipStream_t* hipStream_t;
typedef struct ihipEvent_t* hipEvent_t;
constexpr hipError_t hipSuccess = 0;
constexpr hipError_t hipErrorNotReady = 600;
constexpr unsigned hipEventDisableTiming = 0x2;
constexpr unsigned hipStreamNonBlocking = 0x1;

using PFN_hipInit = hipError_t (*)(unsigned flags);
using PFN_hipGetDeviceCount = hipError_t (*)(int* count);
using PFN_hipGetDevice = hipError_t (*)(int* device);
using PFN_hipSetDevice = hipError_t (*)(int device);
using PFN_hipStreamCreateWithFlags = hipError_t (*)(hipStream_t* stream, unsigned flags);
using PFN_hipStreamDestroy = hipError_t (*)(hipStream_t stream);
using PFN_hipEventCreateWithFlags = hipError_t (*)(hipEvent_t* event, unsigned flags);
using PFN_hipEventRecord = hipError_t (*)(hipEvent_t event, hipStream_t stream);
using PFN_hipEventQuery = hipError_t (*)(hipEvent_t event);
using PFN_hipEventDestroy = hipError_t (*)(hipEvent_t event);

}  // namespace hmc::vendor::hiprt

// The MUSA runtime calls the mccl ccl plugin (this source built with HMC_CCL_MCCL) makes
// (libmusart.so): the CUDA runtime's shape under musa* names, with its values.
namespace hmc::vendor::musart {

typedef int musaError_t;
typedef struct MUstream_st* musaStream_t;
typedef struct MUevent_st* musaEvent_t;
constexpr musaError_t musaSuccess = 0;
constexpr musaError_t musaErrorNotReady = 600;
constexpr unsigned musaEventDisableTiming = 0x2;
constexpr unsigned musaStreamNonBlocking = 0x1;

using PFN_musaGetDeviceCount = musaError_t (*)(int* count);
using PFN_musaGetDevice = musaError_t (*)(int* device);
using PFN_musaSetDevice = musaError_t (*)(int device);
using PFN_musaStreamCreateWithFlags = musaError_t (*)(musaStream_t* stream, unsigned flags);
using PFN_musaStreamDestroy = musaError_t (*)(musaStream_t stream);
using PFN_musaEventCreateWithFlags = musaError_t (*)(musaEvent_t* event, unsigned flags);
using PFN_musaEventRecord = musaError_t (*)(musaEvent_t event, musaStream_t stream);
using PFN_musaEventQuery = musaError_t (*)(musaEvent_t event);
using PFN_musaEventDestroy = musaError_t (*)(musaEvent_t event);

}  // namespace hmc::vendor::musart

namespace hmc::vendor::nccl {

// ncclUniqueId: an opaque 128-byte blob, passed by value.
constexpr size_t kUniqueIdBytes = 128;
struct ncclUniqueId {
  char internal[kUniqueIdBytes];
};
typedef struct ncclComm* ncclComm_t;
using cudaStream_t = cudadrv::CUstream;  // the runtime's stream is the driver's CUstream

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

// Note the order: ncclMax is 2 and ncclMin 3 (hmc has MIN 2, MAX 3).
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
} ncclDataType_t;

using PFN_ncclGetVersion = ncclResult_t (*)(int* version);
using PFN_ncclGetUniqueId = ncclResult_t (*)(ncclUniqueId* id);
using PFN_ncclCommInitRank = ncclResult_t (*)(ncclComm_t* comm, int nranks, ncclUniqueId id,
                                              int rank);
using PFN_ncclCommDestroy = ncclResult_t (*)(ncclComm_t comm);
using PFN_ncclCommAbort = ncclResult_t (*)(ncclComm_t comm);
using PFN_ncclCommGetAsyncError = ncclResult_t (*)(ncclComm_t comm, ncclResult_t* error);
using PFN_ncclGetErrorString = const char* (*)(ncclResult_t result);
using PFN_ncclGetLastError = const char* (*)(ncclComm_t comm);
using PFN_ncclAllReduce = ncclResult_t (*)(const void* send, void* recv, size_t count,
                                           ncclDataType_t dtype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream);
using PFN_ncclAllGather = ncclResult_t (*)(const void* send, void* recv, size_t sendcount,
                                           ncclDataType_t dtype, ncclComm_t comm,
                                           cudaStream_t stream);
using PFN_ncclReduceScatter = ncclResult_t (*)(const void* send, void* recv, size_t recvcount,
                                               ncclDataType_t dtype, ncclRedOp_t op,
                                               ncclComm_t comm, cudaStream_t stream);
using PFN_ncclBroadcast = ncclResult_t (*)(const void* send, void* recv, size_t count,
                                           ncclDataType_t dtype, int root, ncclComm_t comm,
                                           cudaStream_t stream);
using PFN_ncclSend = ncclResult_t (*)(const void* send, size_t count, ncclDataType_t dtype,
                                      int peer, ncclComm_t comm, cudaStream_t stream);
using PFN_ncclRecv = ncclResult_t (*)(void* recv, size_t count, ncclDataType_t dtype, int peer,
                                      ncclComm_t comm, cudaStream_t stream);
using PFN_ncclGroupStart = ncclResult_t (*)();
using PFN_ncclGroupEnd = ncclResult_t (*)();

// NCCL_VERSION(X,Y,Z) of nccl.h: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after.
inline void decode_version(int code, int* major, int* minor, int* patch) {
  if (code >= 10000) {
    *major = code / 10000;
    *minor = code % 10000 / 100;
  } else {
    *major = code / 1000;
    *minor = code % 1000 / 100;
  }
  *patch = code % 100;
}

}  // namespace hmc::vendor::nccl
