/*
 * hmc ccl plugin ABI, version 1.
 *
 * A ccl plugin gives the core one vendor's collective communication library (NCCL, RCCL, CNCL,
 * MCCL): the collectives that library runs on that vendor's device memory with its own kernels
 * and links. The core uses it for a communicator whose ranks all hold memory of the interface
 * the plugin serves (mem_iface); everything else stays on hmc's own algorithms.
 *
 * Entry point: a plugin exports exactly one symbol,
 *     HMC_PLUGIN_EXPORT const hmc_ccl_plugin_v1_t* hmc_ccl_plugin_v1(void);
 * returning a table with static storage duration, whose hdr is HMC_CCL_ABI_HEADER_INIT.
 *
 * A plugin dlopens its vendor library (and the vendor runtime it needs for streams and events)
 * at init, never links them, so it loads on machines without them: init then succeeds,
 * device_count answers 0 and unavailable_reason says why.
 *
 * Rendezvous: the plugin opens no bootstrap connections of its own. Rank 0's core asks
 * unique_id for an opaque id, carries it to every rank over the hmc communicator, and each rank
 * passes it to comm_create. How the vendor library connects its ranks afterwards is its affair.
 *
 * Completion: collectives are posted without blocking and return a request; test reports its
 * end without blocking. A collective takes a stream handle shaped like the vendor's
 * (cudaStream_t, hipStream_t, cnrtQueue_t, musaStream_t): NULL means "the plugin's own stream of
 * that communicator", and the buffers are then ready when the call is made (the core's
 * contract without a stream); with a stream, the collective is ordered after the work already
 * enqueued on it.
 *
 * Threading: the core serialises the calls on one communicator (the hmc_ccl_comm_t and its
 * requests); calls on different communicators, and init/device_count/unique_id, may come from
 * different threads, one at a time per object.
 *
 * Errors: a failed slot returns an hmc_plugin_status_t and logs nothing itself that the core
 * needs; comm_error_text gives the library's own message of the last failure on a communicator,
 * which the core puts in the hmc error it reports (with the library's and the call's names).
 */
#ifndef HMC_PLUGIN_CCL_H
#define HMC_PLUGIN_CCL_H

#include "hmc/plugin/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ccl ABI's major version: a version 1 table's hdr.abi_version, and its structs'. */
#define HMC_CCL_ABI_VERSION 1u
#define HMC_CCL_ABI_HEADER_INIT(type) \
  { (uint32_t)sizeof(type), HMC_CCL_ABI_VERSION }

/* The most bytes of unique id the core carries (NCCL's ncclUniqueId is 128). */
#define HMC_CCL_UNIQUE_ID_MAX 256u

/* Element types and operations: the values of hmc.h's hmc_dtype_t and hmc_reduce_op_t (as the
 * device ABI's HMC_DEVICE_DTYPE_* and HMC_DEVICE_REDUCE_*), so the core passes them unchanged.
 * A plugin declares the ones its library handles as masks of HMC_CCL_BIT(value). */
#define HMC_CCL_DTYPE_F32 0u
#define HMC_CCL_DTYPE_F64 1u
#define HMC_CCL_DTYPE_F16 2u
#define HMC_CCL_DTYPE_BF16 3u
#define HMC_CCL_DTYPE_I8 4u
#define HMC_CCL_DTYPE_U8 5u
#define HMC_CCL_DTYPE_I32 6u
#define HMC_CCL_DTYPE_I64 7u
#define HMC_CCL_OP_SUM 0u
#define HMC_CCL_OP_PROD 1u
#define HMC_CCL_OP_MIN 2u
#define HMC_CCL_OP_MAX 3u
#define HMC_CCL_OP_AVG 4u /* sum divided by the number of ranks */
#define HMC_CCL_BIT(value) (1u << (unsigned)(value))

typedef struct hmc_ccl_ctx hmc_ccl_ctx_t;         /* a plugin context (one per hmc context) */
typedef struct hmc_ccl_comm hmc_ccl_comm_t;       /* one rank's vendor communicator */
typedef struct hmc_ccl_request hmc_ccl_request_t; /* one posted collective */

/* One point-to-point part of a grouped send_recv: send or receive `count` elements at buf. */
typedef struct hmc_ccl_p2p {
  int32_t peer;    /* rank in the vendor communicator */
  int32_t is_send; /* 1 send, 0 receive */
  void* buf;       /* device memory (const for a send) */
  size_t count;    /* elements of the call's dtype; 0 is valid and moves nothing */
} hmc_ccl_p2p_t;

typedef struct hmc_ccl_plugin_v1 {
  hmc_abi_header_t hdr;
  const char* name;                    /* short lowercase name: "nccl" */
  const char* version;                 /* the plugin's own version text */
  const hmc_config_var_t* config_vars; /* NULL-terminated, or NULL when none */
  uint32_t mem_iface;                  /* hmc_mem_iface_t of the memory it reduces on */
  uint32_t dtypes;                     /* HMC_CCL_BIT(HMC_CCL_DTYPE_*) it handles */
  uint32_t ops;                        /* HMC_CCL_BIT(HMC_CCL_OP_*) it handles */

  /* --- required slots ------------------------------------------------------------------ */

  /* Creates a plugin context. host stays valid until finalize. Without the vendor library
   * this still succeeds (device_count then answers 0). */
  hmc_plugin_status_t (*init)(const hmc_host_services_t* host, hmc_ccl_ctx_t** ctx);
  /* Destroys the context. The core destroys every communicator of the context first. */
  hmc_plugin_status_t (*finalize)(hmc_ccl_ctx_t* ctx);
  /* Devices of mem_iface the library can serve here (0 is valid). */
  hmc_plugin_status_t (*device_count)(hmc_ccl_ctx_t* ctx, int* count);
  /* Why device_count is 0 ("libnccl.so.2 not found: ..."), or NULL. Lives until finalize. */
  const char* (*unavailable_reason)(hmc_ccl_ctx_t* ctx);
  /* The library opened and its version ("libnccl.so.2, NCCL 2.28.3"), or NULL when none was
   * found. Lives until finalize. */
  const char* (*library_version)(hmc_ccl_ctx_t* ctx);

  /* Rank 0 only: writes at most *len bytes (on entry HMC_CCL_UNIQUE_ID_MAX) of a fresh id for a
   * new communicator and sets *len. */
  hmc_plugin_status_t (*unique_id)(hmc_ccl_ctx_t* ctx, void* id, size_t* len);
  /* Creates this rank's vendor communicator of nranks ranks from rank 0's id, on the plugin's
   * device `device` (the ordinal its device plugin gives the rank's memory). Collective over
   * the ranks: it waits for the others, bounded by host->timeout_ms where the library offers a
   * non-blocking init (a blocking init waits as long as the library does), and fails with
   * HMC_PLUGIN_ERR_PEER_LOST when they did not all come. INVALID_ARGUMENT for an id of the wrong
   * length, a rank outside 0..nranks-1 or a device the plugin does not serve. */
  hmc_plugin_status_t (*comm_create)(hmc_ccl_ctx_t* ctx, const void* id, size_t len, int nranks,
                                     int rank, int device, hmc_ccl_comm_t** comm);
  /* Releases the communicator. Requests still pending on it are released unfinished (the core
   * aborts first when some are: comm_abort). */
  hmc_plugin_status_t (*comm_destroy)(hmc_ccl_comm_t* comm);
  /* Makes every rank's pending and later calls on the vendor communicator end (NCCL's
   * ncclCommAbort): used when a rank is lost or a collective timed out, so that no rank stays
   * inside the library. The core then only destroys the communicator. */
  hmc_plugin_status_t (*comm_abort)(hmc_ccl_comm_t* comm);
  /* SUCCESS while the communicator is healthy, else the asynchronous error the library reports
   * (its text through comm_error_text). Never blocks. */
  hmc_plugin_status_t (*comm_async_error)(hmc_ccl_comm_t* comm);
  /* The library's message of the last failure on this communicator, naming the call
   * ("ncclAllReduce: unhandled system error (run with NCCL_DEBUG=INFO for details)"); "" when
   * none. Lives until the next call on the communicator. */
  const char* (*comm_error_text)(hmc_ccl_comm_t* comm);

  /* Collectives. Each posts without blocking and returns a request to test. Counts are in
   * elements of dtype; buffers are device memory of the communicator's device; send and recv
   * may be the same pointer (in place: for all_gather at recv + rank * count, for
   * reduce_scatter send + rank * count). stream: the vendor's stream, or NULL.
   * INVALID_ARGUMENT for a dtype or op outside the table's masks (nothing posted). */
  hmc_plugin_status_t (*all_reduce)(hmc_ccl_comm_t* comm, const void* send, void* recv,
                                    size_t count, uint32_t dtype, uint32_t op, void* stream,
                                    hmc_ccl_request_t** req);
  /* recv holds nranks blocks of count elements, block r from rank r. */
  hmc_plugin_status_t (*all_gather)(hmc_ccl_comm_t* comm, const void* send, void* recv,
                                    size_t count, uint32_t dtype, void* stream,
                                    hmc_ccl_request_t** req);
  /* send holds nranks blocks of count elements; rank r receives the reduction of block r. */
  hmc_plugin_status_t (*reduce_scatter)(hmc_ccl_comm_t* comm, const void* send, void* recv,
                                        size_t count, uint32_t dtype, uint32_t op, void* stream,
                                        hmc_ccl_request_t** req);
  /* count elements of root's send arrive in every rank's recv (send is read on root only). */
  hmc_plugin_status_t (*broadcast)(hmc_ccl_comm_t* comm, const void* send, void* recv, size_t count,
                                   uint32_t dtype, int root, void* stream, hmc_ccl_request_t** req);
  /* A group of point-to-point sends and receives that progress together and end as one request
   * (NCCL's ncclGroupStart/ncclSend/ncclRecv/ncclGroupEnd): what all-to-all is made of. The
   * array is read during the call only. */
  hmc_plugin_status_t (*send_recv)(hmc_ccl_comm_t* comm, const hmc_ccl_p2p_t* parts, size_t n,
                                   uint32_t dtype, void* stream, hmc_ccl_request_t** req);

  /* Tests a request without blocking. *done = 0 while pending (returns SUCCESS). With *done = 1
   * the request has ended, its result is the return value, and the request is released. */
  hmc_plugin_status_t (*test)(hmc_ccl_request_t* req, int* done);

  /* --- optional slots (none yet; appended ones are NULL or beyond hdr.struct_size when not
   * offered) ------------------------------------------------------------------------------ */
} hmc_ccl_plugin_v1_t;

/* The entry symbol's type and name. */
typedef const hmc_ccl_plugin_v1_t* (*hmc_ccl_plugin_v1_entry_t)(void);
#define HMC_CCL_PLUGIN_ENTRY_V1 "hmc_ccl_plugin_v1"

#ifdef __cplusplus
}
#endif
#endif /* HMC_PLUGIN_CCL_H */
