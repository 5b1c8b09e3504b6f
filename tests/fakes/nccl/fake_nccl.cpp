// Emulated NCCL (libnccl.so.2) over the emulated CUDA driver (tests/fakes/cuda): the calls the
// nccl ccl plugin makes, with ranks as real processes and real data crossing between them. A
// test double: exact and simple, not fast.
//
// A communicator is a shared-memory segment named from the unique id (/fakenccl-<key>), holding a
// process-shared robust mutex, a condition variable and a counting barrier. A collective is host
// work queued on the caller's stream (fakegpu's launch_host, so it runs in stream order and an
// event recorded after it reports its end): each rank writes what it contributes from its
// device memory into a segment of its own (/fakenccl-<key>-<seq>-<part>), all meet at the
// barrier, each reads the others' segments and writes its result into its device memory, all
// meet again, and each removes its segments. Reductions go in rank order, so every rank computes
// the same bits. Every wait is bounded (FAKENCCL_TIMEOUT_MS, default 20000); a rank that fails
// or aborts marks the communicator aborted, and the others' waits end at once with an error.
//
// Settings (environment):
//   FAKENCCL_TIMEOUT_MS   bound of every wait for the other ranks
//   FAKENCCL_VERSION      what ncclGetVersion answers (default 22809 = 2.28.9)
//   FAKENCCL_FAIL_INIT    1: ncclCommInitRank fails (ncclSystemError) on every rank
//   FAKENCCL_FAIL_OP_NTH  the Nth collective (1-based) a process posts fails asynchronously: the
//                         stream's next event reports an error, ncclCommGetAsyncError reports
//                         ncclSystemError, and the communicator is aborted for every rank
// Not emulated: collectives inside ncclGroupStart/End (only sends and receives), a NULL stream
// (ncclInvalidArgument: the plugin always passes its communicator's stream), host buffers
// (ncclInvalidArgument, as real NCCL fails on unregistered host memory), FP8 types.

// The engine is fake_nccl_engine.h (cncl/fake_cncl.cpp wraps it in CNCL's API). Built three times:
// as libnccl.so.2 over the emulated CUDA runtime (the default); with FAKENCCL_HIP, as librccl.so.1
// over the emulated HIP runtime (RCCL: the same API over HIP); with FAKENCCL_MUSA, as libmccl.so
// over the emulated MUSA runtime (MCCL: the API under mccl* names, which the defines below give the
// exported functions).
#if defined(FAKENCCL_HIP)
#define FAKENCCL_RUNTIME "hip"
#define FAKENCCL_MEMORY "HIP"
#define FAKENCCL_WORD "fake NCCL"
#elif defined(FAKENCCL_MUSA)
#define FAKENCCL_RUNTIME "musa"
#define FAKENCCL_MEMORY "MUSA"
#define FAKENCCL_WORD "fake MCCL"
#define ncclGetVersion mcclGetVersion
#define ncclGetErrorString mcclGetErrorString
#define ncclGetLastError mcclGetLastError
#define ncclGetUniqueId mcclGetUniqueId
#define ncclCommInitRank mcclCommInitRank
#define ncclCommGetAsyncError mcclCommGetAsyncError
#define ncclCommAbort mcclCommAbort
#define ncclCommDestroy mcclCommDestroy
#define ncclAllReduce mcclAllReduce
#define ncclAllGather mcclAllGather
#define ncclReduceScatter mcclReduceScatter
#define ncclBroadcast mcclBroadcast
#define ncclSend mcclSend
#define ncclRecv mcclRecv
#define ncclGroupStart mcclGroupStart
#define ncclGroupEnd mcclGroupEnd
#else
#define FAKENCCL_RUNTIME "cuda"
#define FAKENCCL_MEMORY "CUDA"
#define FAKENCCL_WORD "fake NCCL"
#endif
#define FAKENCCL_EXPORT __attribute__((visibility("default")))

#include "fake_nccl_engine.h"
