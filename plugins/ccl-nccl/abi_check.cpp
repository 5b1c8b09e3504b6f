// Compile-time check of the nccl plugin's declarations (src/nccl_api.h) against NCCL's nccl.h:
// the values of results, operations and types, the unique id's size, and each prototype's
// parameters (our cudaStream_t is the driver's CUstream, which the runtime's cudaStream_t is).
// Built only when nccl.h is found (see CMakeLists.txt); compiling is the test.
#include <type_traits>

#include "nccl_api.h"

namespace ours = hmc::vendor::nccl;

#include <nccl.h>

#define CHECK_VALUE(name) static_assert(int(ours::name) == int(::name), #name " differs")
CHECK_VALUE(ncclSuccess);
CHECK_VALUE(ncclUnhandledCudaError);
CHECK_VALUE(ncclSystemError);
CHECK_VALUE(ncclInternalError);
CHECK_VALUE(ncclInvalidArgument);
CHECK_VALUE(ncclInvalidUsage);
CHECK_VALUE(ncclRemoteError);
CHECK_VALUE(ncclInProgress);
CHECK_VALUE(ncclSum);
CHECK_VALUE(ncclProd);
CHECK_VALUE(ncclMax);
CHECK_VALUE(ncclMin);
CHECK_VALUE(ncclAvg);
CHECK_VALUE(ncclInt8);
CHECK_VALUE(ncclUint8);
CHECK_VALUE(ncclInt32);
CHECK_VALUE(ncclUint32);
CHECK_VALUE(ncclInt64);
CHECK_VALUE(ncclUint64);
CHECK_VALUE(ncclFloat16);
CHECK_VALUE(ncclFloat32);
CHECK_VALUE(ncclFloat64);
CHECK_VALUE(ncclBfloat16);
#undef CHECK_VALUE
static_assert(ours::kUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(sizeof(ours::ncclUniqueId) == sizeof(::ncclUniqueId));

// The same prototype once our types are mapped onto nccl.h's.
template <typename T>
struct Map {
  using type = T;
};
template <>
struct Map<ours::ncclResult_t> {
  using type = ::ncclResult_t;
};
template <>
struct Map<ours::ncclResult_t*> {
  using type = ::ncclResult_t*;
};
template <>
struct Map<ours::ncclDataType_t> {
  using type = ::ncclDataType_t;
};
template <>
struct Map<ours::ncclRedOp_t> {
  using type = ::ncclRedOp_t;
};
template <>
struct Map<ours::ncclComm_t> {
  using type = ::ncclComm_t;
};
template <>
struct Map<ours::ncclComm_t*> {
  using type = ::ncclComm_t*;
};
template <>
struct Map<ours::ncclUniqueId> {
  using type = ::ncclUniqueId;
};
template <>
struct Map<ours::ncclUniqueId*> {
  using type = ::ncclUniqueId*;
};
template <>
struct Map<ours::cudaStream_t> {
  using type = ::cudaStream_t;
};
template <typename F>
struct Proto;
template <typename R, typename... A>
struct Proto<R (*)(A...)> {
  using type = typename Map<R>::type (*)(typename Map<A>::type...);
};
#define CHECK_PROTO(name) \
  static_assert(std::is_same_v<Proto<ours::PFN_##name>::type, decltype(&::name)>, #name)
CHECK_PROTO(ncclGetVersion);
CHECK_PROTO(ncclGetUniqueId);
CHECK_PROTO(ncclCommInitRank);
CHECK_PROTO(ncclCommDestroy);
CHECK_PROTO(ncclCommAbort);
CHECK_PROTO(ncclCommGetAsyncError);
CHECK_PROTO(ncclGetErrorString);
CHECK_PROTO(ncclGetLastError);
CHECK_PROTO(ncclAllReduce);
CHECK_PROTO(ncclAllGather);
CHECK_PROTO(ncclReduceScatter);
CHECK_PROTO(ncclBroadcast);
CHECK_PROTO(ncclSend);
CHECK_PROTO(ncclRecv);
CHECK_PROTO(ncclGroupStart);
CHECK_PROTO(ncclGroupEnd);
#undef CHECK_PROTO
