// Emulated CNCL (libcncl.so) over the emulated CNRT runtime (tests/fakes/mlu): the calls the cncl
// ccl plugin makes, with ranks as real processes and real data crossing between them. A test
// double: exact and simple, not fast.
//
// The communicators, collectives, barriers, timeouts and injected failures are the emulated
// NCCL's (nccl/fake_nccl_engine.h, its FAKENCCL_* settings included: FAKENCCL_TIMEOUT_MS,
// FAKENCCL_FAIL_INIT, FAKENCCL_FAIL_OP_NTH), built here over the "mlu" emulator with their nccl*
// entry points hidden; this file gives them CNCL's shape: CNCL's result codes, dtype and
// operation values, the 136-byte cnclCliqueId (the engine's id in its data, the hash unused),
// communicators made in arrays by cnclInitComms and the asynchronous error as a return value.
// An injected failure reports CNCL_RET_ASYNC_ERROR from cnclGetCommAsyncError.
//
// Settings (environment), beyond the engine's:
//   FAKECNCL_VERSION   what cnclGetLibVersion answers, "major.minor.patch" (default 1.25.0)
// Not emulated: more than one communicator per process in one cnclInitComms (num_comm > 1 is
// CNCL_RET_ERR_UNSUPPORTED), a NULL clique id, 16-bit integers (CNCL_RET_ERR_UNSUPPORTED),
// cnclBcast, cnclReduce, the all-to-all calls, collectives inside cnclGroupStart/End.
#define FAKENCCL_RUNTIME "mlu"
#define FAKENCCL_MEMORY "MLU"
#define FAKENCCL_WORD "fake CNCL"
#define FAKENCCL_EXPORT __attribute__((visibility("hidden")))
#include <type_traits>

#include "cncl_api.h"
#include "fake_nccl_engine.h"

namespace cncl = hmc::vendor::cncl;
using cncl::cnclResult_t;

namespace {

ncclComm_t inner(cncl::cnclComm_t c) {
  return reinterpret_cast<ncclComm_t>(c);
}
cudaStream_t stream_of(cncl::cnrtQueue_t q) {
  return reinterpret_cast<cudaStream_t>(q);  // both are the emulator's fakegpu::Stream
}

cnclResult_t to_cncl(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return cncl::CNCL_RET_SUCCESS;
    case ncclUnhandledCudaError: return cncl::CNCL_RET_ERR_MLU_RUNTIME;
    case ncclSystemError: return cncl::CNCL_RET_ERR_SYSTEM;
    case ncclInternalError: return cncl::CNCL_RET_ERR_INTERNAL;
    case ncclInvalidArgument:
    case ncclInvalidUsage: return cncl::CNCL_RET_ERR_ARGUMENTS;
    case ncclRemoteError: return cncl::CNCL_RET_ERR_SYS_SOCKET;
    case ncclInProgress: return cncl::CNCL_RET_ASYNC_IN_PROGRESS;
  }
  return cncl::CNCL_RET_ERR_INTERNAL;
}

// The engine's type of a CNCL type; false for the 16-bit integers it does not emulate.
bool to_nccl(cncl::cnclDataType_t t, ncclDataType_t* out) {
  switch (t) {
    case cncl::cnclFloat16: *out = ncclFloat16; return true;
    case cncl::cnclBfloat16: *out = ncclBfloat16; return true;
    case cncl::cnclFloat32: *out = ncclFloat32; return true;
    case cncl::cnclInt8: *out = ncclInt8; return true;
    case cncl::cnclInt32: *out = ncclInt32; return true;
    case cncl::cnclInt64: *out = ncclInt64; return true;
    case cncl::cnclUint8: *out = ncclUint8; return true;
    case cncl::cnclUint32: *out = ncclUint32; return true;
    case cncl::cnclUint64: *out = ncclUint64; return true;
    default: return false;
  }
}

// CNCL's operations have NCCL's values for the four they share.
bool to_nccl(cncl::cnclReduceOp_t op, ncclRedOp_t* out) {
  if (op < cncl::cnclSum || op > cncl::cnclMin) return false;
  *out = ncclRedOp_t(int(op));
  return true;
}

// An all-reduce or a reduce-scatter (the same arguments) through the engine's `reduction`.
template <typename NcclReduction>
cnclResult_t reduce_by(NcclReduction reduction, const void* send, void* recv, size_t count,
                       cncl::cnclDataType_t t, cncl::cnclReduceOp_t op, cncl::cnclComm_t comm,
                       cncl::cnrtQueue_t queue) {
  ncclDataType_t nt;
  ncclRedOp_t no;
  if (!to_nccl(t, &nt) || !to_nccl(op, &no)) return cncl::CNCL_RET_ERR_UNSUPPORTED;
  return to_cncl(reduction(send, recv, count, nt, no, inner(comm), stream_of(queue)));
}

// call(t in the engine's terms) as CNCL's status; unsupported for a type the engine lacks.
template <typename Call>
cnclResult_t with_nccl_type(cncl::cnclDataType_t t, Call call) {
  ncclDataType_t nt;
  if (!to_nccl(t, &nt)) return cncl::CNCL_RET_ERR_UNSUPPORTED;
  return to_cncl(call(nt));
}

}  // namespace

// What the emulated library exports (everything else is hidden).
#define CNCL_EXPORT __attribute__((visibility("default")))

extern "C" {

CNCL_EXPORT cnclResult_t cnclGetLibVersion(int* major, int* minor, int* patch) {
  if (!major || !minor || !patch) return cncl::CNCL_RET_ERR_ARGUMENTS;
  *major = 1, *minor = 25, *patch = 0;
  if (const char* v = std::getenv("FAKECNCL_VERSION"); v && *v)
    std::sscanf(v, "%d.%d.%d", major, minor, patch);
  return cncl::CNCL_RET_SUCCESS;
}

CNCL_EXPORT const char* cnclGetErrorStr(cnclResult_t r) {
  switch (r) {
    case cncl::CNCL_RET_SUCCESS: return "CNCL success";
    case cncl::CNCL_RET_ERR_INTERNAL: return "CNCL internal error";
    case cncl::CNCL_RET_ERR_UNSUPPORTED: return "CNCL unsupported operation";
    case cncl::CNCL_RET_ERR_SYSTEM: return "CNCL system error";
    case cncl::CNCL_RET_ERR_SYS_SOCKET: return "CNCL socket error (a peer is gone)";
    case cncl::CNCL_RET_ERR_MLU_RUNTIME: return "CNCL CNRT runtime error";
    case cncl::CNCL_RET_ASYNC_IN_PROGRESS: return "CNCL asynchronous operation in progress";
    case cncl::CNCL_RET_ASYNC_ERROR: return "CNCL asynchronous error";
    case cncl::CNCL_RET_ERR_ARGUMENTS: return "CNCL illegal arguments";
    default: return "CNCL unknown error";
  }
}

CNCL_EXPORT cnclResult_t cnclGetCliqueId(cncl::cnclCliqueId_t id) {
  if (!id) return cncl::CNCL_RET_ERR_ARGUMENTS;
  static_assert(sizeof(ncclUniqueId) <= sizeof id->data);
  ncclUniqueId uid;
  if (ncclResult_t r = ncclGetUniqueId(&uid); r != ncclSuccess) return to_cncl(r);
  std::memcpy(id->data, uid.internal, sizeof uid.internal);
  id->hash = 0;
  return cncl::CNCL_RET_SUCCESS;
}

CNCL_EXPORT cnclResult_t cnclInitComms(cncl::cnclComm_t* comms, int num_comm, const int* dev_list,
                                       const int* rank_list, int nrank,
                                       const cncl::cnclCliqueId_t clique_id) {
  if (!comms || !dev_list || !rank_list || !clique_id) return cncl::CNCL_RET_ERR_NULL_POINTER;
  if (num_comm != 1) return cncl::CNCL_RET_ERR_UNSUPPORTED;
  if (emu().check_device(dev_list[0]) != Err::Ok) return cncl::CNCL_RET_ERR_ARGUMENTS;
  ncclUniqueId uid;
  std::memcpy(uid.internal, clique_id->data, sizeof uid.internal);
  ncclComm_t c = nullptr;
  if (ncclResult_t r = ncclCommInitRank(&c, nrank, uid, rank_list[0]); r != ncclSuccess)
    return r == ncclSystemError ? cncl::CNCL_RET_ERR_INIT : to_cncl(r);
  comms[0] = reinterpret_cast<cncl::cnclComm_t>(c);
  return cncl::CNCL_RET_SUCCESS;
}

CNCL_EXPORT cnclResult_t cnclDestroyComms(cncl::cnclComm_t* comms, int num_comm) {
  if (!comms || num_comm < 0) return cncl::CNCL_RET_ERR_ARGUMENTS;
  cnclResult_t result = cncl::CNCL_RET_SUCCESS;
  for (int i = 0; i < num_comm; ++i)
    if (ncclResult_t r = ncclCommDestroy(inner(comms[i])); r != ncclSuccess) result = to_cncl(r);
  return result;
}

CNCL_EXPORT cnclResult_t cnclAbortComm(cncl::cnclComm_t comm) {
  return to_cncl(ncclCommAbort(inner(comm)));
}

CNCL_EXPORT cnclResult_t cnclGetCommAsyncError(const cncl::cnclComm_t comm) {
  ncclResult_t err = ncclSuccess;
  if (ncclResult_t r = ncclCommGetAsyncError(inner(comm), &err); r != ncclSuccess)
    return to_cncl(r);
  return err == ncclSuccess ? cncl::CNCL_RET_SUCCESS : cncl::CNCL_RET_ASYNC_ERROR;
}

CNCL_EXPORT cnclResult_t cnclAllReduce(const void* send, void* recv, size_t count,
                                       cncl::cnclDataType_t t, cncl::cnclReduceOp_t op,
                                       cncl::cnclComm_t comm, cncl::cnrtQueue_t queue) {
  return reduce_by(ncclAllReduce, send, recv, count, t, op, comm, queue);
}

CNCL_EXPORT cnclResult_t cnclAllGather(const void* send, void* recv, size_t count,
                                       cncl::cnclDataType_t t, cncl::cnclComm_t comm,
                                       cncl::cnrtQueue_t queue) {
  return with_nccl_type(t, [&](ncclDataType_t nt) {
    return ncclAllGather(send, recv, count, nt, inner(comm), stream_of(queue));
  });
}

CNCL_EXPORT cnclResult_t cnclReduceScatter(const void* send, void* recv, size_t count,
                                           cncl::cnclDataType_t t, cncl::cnclReduceOp_t op,
                                           cncl::cnclComm_t comm, cncl::cnrtQueue_t queue) {
  return reduce_by(ncclReduceScatter, send, recv, count, t, op, comm, queue);
}

CNCL_EXPORT cnclResult_t cnclBroadcast(const void* send, void* recv, size_t count,
                                       cncl::cnclDataType_t t, int root, cncl::cnclComm_t comm,
                                       cncl::cnrtQueue_t queue) {
  return with_nccl_type(t, [&](ncclDataType_t nt) {
    return ncclBroadcast(send, recv, count, nt, root, inner(comm), stream_of(queue));
  });
}

CNCL_EXPORT cnclResult_t cnclSend(void* buf, const size_t count, cncl::cnclDataType_t t,
                                  const int peer, const cncl::cnclComm_t comm,
                                  cncl::cnrtQueue_t queue) {
  return with_nccl_type(t, [&](ncclDataType_t nt) {
    return ncclSend(buf, count, nt, peer, inner(comm), stream_of(queue));
  });
}

CNCL_EXPORT cnclResult_t cnclRecv(void* buf, const size_t count, cncl::cnclDataType_t t,
                                  const int peer, const cncl::cnclComm_t comm,
                                  cncl::cnrtQueue_t queue) {
  return with_nccl_type(t, [&](ncclDataType_t nt) {
    return ncclRecv(buf, count, nt, peer, inner(comm), stream_of(queue));
  });
}

CNCL_EXPORT cnclResult_t cnclGroupStart() {
  return to_cncl(ncclGroupStart());
}

CNCL_EXPORT cnclResult_t cnclGroupEnd() {
  return to_cncl(ncclGroupEnd());
}

}  // extern "C"

// The emulated functions have exactly the prototypes the plugin declares.
static_assert(std::is_same_v<decltype(&cnclInitComms), cncl::PFN_cnclInitComms>);
static_assert(std::is_same_v<decltype(&cnclAllReduce), cncl::PFN_cnclAllReduce>);
static_assert(std::is_same_v<decltype(&cnclSend), cncl::PFN_cnclSend>);
static_assert(std::is_same_v<decltype(&cnclGetCommAsyncError), cncl::PFN_cnclGetCommAsyncError>);
