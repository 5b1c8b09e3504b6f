// The part of Cambricon's CNCL (cncl.h, libcncl.so) the cncl ccl plugin calls, declared here so
// that the plugin builds without Neuware; its CNRT calls (libcnrt.so) are the mlu device
// plugin's declarations (plugins/device-mlu/src/cnrt_api.h). CNCL is not
// NCCL under other names: its result codes are its own (with sub-codes such as 0x12 under the
// 0x02 system class), its dtype values are grouped by kind (0x10 floats, 0x20 signed, 0x30
// unsigned), it has no double and no average, the clique id carries a hash after its 128 bytes,
// communicators are made in arrays (cnclInitComms) and the asynchronous error is the return value
// of cnclGetCommAsyncError. Values and prototypes follow cncl.h of CNCL 1.25; docs/plugins.md
// says which were confirmed and which are assumed.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cnrt_api.h"

namespace hmc::vendor::cncl {

// ---- CNRT: the queues and notifiers, as the mlu device plugin declares them (cnrt_api.h) --
using mlu::cnrtErrorBusy;  // what cnrtQueryNotifier answers while pending
using mlu::cnrtErrorNotReady;
using mlu::cnrtNotifier_t;
using mlu::cnrtQueue_t;
using mlu::cnrtRet_t;
using mlu::cnrtSuccess;
using mlu::PFN_cnrtGetDevice;
using mlu::PFN_cnrtGetDeviceCount;
using mlu::PFN_cnrtNotifierCreate;
using mlu::PFN_cnrtNotifierDestroy;
using mlu::PFN_cnrtPlaceNotifier;
using mlu::PFN_cnrtQueryNotifier;
using mlu::PFN_cnrtQueueCreate;
using mlu::PFN_cnrtQueueDestroy;
using mlu::PFN_cnrtSetDevice;

// ---- CNCL (cncl.h) -----------------------------------------------------------------------------
typedef enum {
  CNCL_RET_SUCCESS = 0x0,
  CNCL_RET_ERR_INTERNAL = 0x01,
  CNCL_RET_ERR_UNSUPPORTED = 0x11,
  CNCL_RET_ERR_NULL_POINTER = 0x21,
  CNCL_RET_ERR_INIT = 0x51,
  CNCL_RET_ERR_NOT_INIT = 0x61,
  CNCL_RET_ERR_SYSTEM = 0x02,
  CNCL_RET_ERR_SYS_MALLOC = 0x12,
  CNCL_RET_ERR_SYS_SOCKET = 0x22,
  CNCL_RET_ERR_MLU_RUNTIME = 0x03,
  CNCL_RET_ASYNC_IN_PROGRESS = 0x06,
  CNCL_RET_ASYNC_ERROR = 0x16,
  CNCL_RET_ASYNC_UNKNOWN_ERROR = 0x26,
  CNCL_RET_ERR_ARGUMENTS = 0x07,
} cnclResult_t;

typedef enum {
  cnclInvalid = 0x0,
  cnclFloat16 = 0x10,
  cnclBfloat16 = 0x11,
  cnclFloat32 = 0x12,
  cnclInt8 = 0x20,
  cnclInt16 = 0x21,
  cnclInt32 = 0x22,
  cnclInt64 = 0x23,
  cnclUint8 = 0x30,
  cnclUint16 = 0x31,
  cnclUint32 = 0x32,
  cnclUint64 = 0x33,
} cnclDataType_t;

// The same order as NCCL's: max is 2 and min 3 (hmc has MIN 2, MAX 3). No average.
typedef enum { cnclSum = 0, cnclProd = 1, cnclMax = 2, cnclMin = 3 } cnclReduceOp_t;

typedef struct cnclComm* cnclComm_t;

// Passed by pointer; its whole size (the hash included) is what the core carries.
constexpr size_t kCliqueIdDataBytes = 128;  // CNCL_CLIQUE_ID_BYTES_SIZE
struct cnclCliqueId {
  char data[kCliqueIdDataBytes];
  uint64_t hash;
};
typedef cnclCliqueId* cnclCliqueId_t;

using PFN_cnclGetLibVersion = cnclResult_t (*)(int* major, int* minor, int* patch);
using PFN_cnclGetErrorStr = const char* (*)(cnclResult_t result);
using PFN_cnclGetCliqueId = cnclResult_t (*)(cnclCliqueId_t clique_id);
using PFN_cnclInitComms = cnclResult_t (*)(cnclComm_t* comms, int num_comm, const int* dev_list,
                                           const int* rank_list, int nrank,
                                           const cnclCliqueId_t clique_id);
using PFN_cnclDestroyComms = cnclResult_t (*)(cnclComm_t* comms, int num_comm);
using PFN_cnclAbortComm = cnclResult_t (*)(cnclComm_t comm);
using PFN_cnclGetCommAsyncError = cnclResult_t (*)(const cnclComm_t comm);
using PFN_cnclAllReduce = cnclResult_t (*)(const void* send, void* recv, size_t count,
                                           cnclDataType_t dtype, cnclReduceOp_t op, cnclComm_t comm,
                                           cnrtQueue_t queue);
using PFN_cnclAllGather = cnclResult_t (*)(const void* send, void* recv, size_t count,
                                           cnclDataType_t dtype, cnclComm_t comm,
                                           cnrtQueue_t queue);
using PFN_cnclReduceScatter = cnclResult_t (*)(const void* send, void* recv, size_t recv_count,
                                               cnclDataType_t dtype, cnclReduceOp_t op,
                                               cnclComm_t comm, cnrtQueue_t queue);
using PFN_cnclBroadcast = cnclResult_t (*)(const void* send, void* recv, size_t count,
                                           cnclDataType_t dtype, int root, cnclComm_t comm,
                                           cnrtQueue_t queue);
// cncl.h declares the buffer of a send non-const, and the count, peer and comm const by value.
using PFN_cnclSend = cnclResult_t (*)(void* buf, const size_t count, cnclDataType_t dtype,
                                      const int peer, const cnclComm_t comm, cnrtQueue_t queue);
using PFN_cnclRecv = cnclResult_t (*)(void* buf, const size_t count, cnclDataType_t dtype,
                                      const int peer, const cnclComm_t comm, cnrtQueue_t queue);
using PFN_cnclGroupStart = cnclResult_t (*)();
using PFN_cnclGroupEnd = cnclResult_t (*)();

}  // namespace hmc::vendor::cncl
