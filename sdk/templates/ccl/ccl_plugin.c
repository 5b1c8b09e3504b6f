/*
 * Template of an hmc ccl plugin (ABI v1): a vendor's collective communication library for the
 * core's communicators. Copy this directory, then fill in the places marked "TO DO". As it
 * stands the plugin is complete and valid: it looks for its vendor library, finds none (or one
 * without the functions below), and serves 0 devices with a clear reason. That is how every ccl
 * plugin must behave on a machine without its library: init succeeds, device_count answers 0,
 * unavailable_reason says why.
 *
 * The vendor API below ("myccl") is shaped like NCCL's: a unique id made on rank 0, a
 * communicator per rank made from it, collectives enqueued on a stream, point-to-point calls
 * grouped, an asynchronous error query, abort. TO DO: replace the names and prototypes in
 * struct myccl_api by your library's (plugins/ccl-nccl in hmc's source is the NCCL one).
 *
 * Rules that matter (sdk/include/hmc/plugin/common.h and ccl.h have the details):
 *  - Export exactly one symbol, hmc_ccl_plugin_v1 (hmc_add_plugin() hides everything else).
 *  - Never link the vendor library: dlopen it in init, so the plugin loads everywhere.
 *  - Open no bootstrap connections: the core carries rank 0's unique id to every rank.
 *  - No slot blocks except comm_create (collective over the ranks); completion is test's job.
 *  - Read options only through host->config_get, declared in config_vars below.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmc/plugin/ccl.h"

/* TO DO: your plugin's name (equal to NAME in CMakeLists.txt), version, library and its
 * variable. */
#define PLUGIN_NAME "template"
#define PLUGIN_VERSION "0.1.0"
#define LIB_VAR "HMC_TEMPLATE_CCL_LIBRARY"
#define LIB_DEFAULT "libmyccl.so.1"
#define ID_BYTES 128 /* TO DO: your unique id's size (at most HMC_CCL_UNIQUE_ID_MAX) */

/* TO DO: your library's calls. Each returns 0 on success. */
struct myccl_api {
  int (*get_version)(int* version);
  int (*get_device_count)(int* count);
  int (*get_unique_id)(void* id);
  int (*comm_init_rank)(void** comm, int nranks, const void* id, int rank, int device);
  int (*comm_destroy)(void* comm);
  int (*comm_abort)(void* comm);
  int (*comm_get_async_error)(void* comm, int* error);
  const char* (*get_error_string)(int result);
  int (*all_reduce)(const void* send, void* recv, size_t count, int dtype, int op, void* comm,
                    void* stream);
  int (*all_gather)(const void* send, void* recv, size_t count, int dtype, void* comm,
                    void* stream);
  int (*reduce_scatter)(const void* send, void* recv, size_t count, int dtype, int op, void* comm,
                        void* stream);
  int (*broadcast)(const void* send, void* recv, size_t count, int dtype, int root, void* comm,
                   void* stream);
  int (*send)(const void* buf, size_t count, int dtype, int peer, void* comm, void* stream);
  int (*recv)(void* buf, size_t count, int dtype, int peer, void* comm, void* stream);
  int (*group_start)(void);
  int (*group_end)(void);
  /* Streams and completion markers, from the vendor's runtime. */
  int (*stream_create)(void** stream);
  int (*stream_destroy)(void* stream);
  int (*event_create)(void** event);
  int (*event_record)(void* event, void* stream);
  int (*event_query)(void* event); /* 0 done, 1 not yet, else an error */
  int (*event_destroy)(void* event);
};

static const char* const kSymbols[] = {
    "myGetVersion",    "myGetDeviceCount",    "myGetUniqueId",    "myCommInitRank", "myCommDestroy",
    "myCommAbort",     "myCommGetAsyncError", "myGetErrorString", "myAllReduce",    "myAllGather",
    "myReduceScatter", "myBroadcast",         "mySend",           "myRecv",         "myGroupStart",
    "myGroupEnd",      "myStreamCreate",      "myStreamDestroy",  "myEventCreate",  "myEventRecord",
    "myEventQuery",    "myEventDestroy"};

static const hmc_config_var_t kVars[] = {
    {LIB_VAR, LIB_DEFAULT, "the collective library the template ccl plugin opens"},
    {NULL, NULL, NULL}};

struct hmc_ccl_ctx {
  const hmc_host_services_t* host;
  void* lib;
  struct myccl_api api;
  int devices;
  char reason[512];
  char library[160];
};

struct hmc_ccl_comm {
  struct hmc_ccl_ctx* ctx;
  void* comm;
  void* stream;
  int nranks;
  int aborted;
  char error[512];
};

struct hmc_ccl_request {
  struct hmc_ccl_comm* comm;
  void* event;
  const char* call;
};

static void log_msg(const struct hmc_ccl_ctx* ctx, int level, const char* msg) {
  if (ctx->host->log_enabled(ctx->host->host_ctx, level))
    ctx->host->log(ctx->host->host_ctx, level, msg);
}

/* TO DO: map hmc's dtypes (HMC_CCL_DTYPE_*) and operations (HMC_CCL_OP_*) to your library's. */
static int map_dtype(uint32_t dtype) {
  return dtype <= HMC_CCL_DTYPE_I64 ? (int)dtype : -1;
}
static int map_op(uint32_t op) {
  return op <= HMC_CCL_OP_AVG ? (int)op : -1;
}

static hmc_plugin_status_t failure(struct hmc_ccl_comm* c, const char* call, int result) {
  const char* text = c->ctx->api.get_error_string(result);
  snprintf(c->error, sizeof c->error, "%s: %s", call, text ? text : "unknown error");
  return HMC_PLUGIN_ERR_INTERNAL;
}

static hmc_plugin_status_t tpl_init(const hmc_host_services_t* host, hmc_ccl_ctx_t** out) {
  struct hmc_ccl_ctx* ctx = calloc(1, sizeof *ctx);
  if (!ctx) return HMC_PLUGIN_ERR_NO_MEMORY;
  ctx->host = host;
  *out = ctx;
  const char* name = host->config_get(host->host_ctx, LIB_VAR);
  if (!name || !*name) name = LIB_DEFAULT;
  ctx->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!ctx->lib) {
    const char* e = dlerror();
    snprintf(ctx->reason, sizeof ctx->reason, "%s not found: %s", name, e ? e : "dlopen failed");
    log_msg(ctx, HMC_LOG_INFO, ctx->reason);
    return HMC_PLUGIN_SUCCESS; /* valid, serving nothing */
  }
  void** slots = (void**)&ctx->api;
  for (size_t i = 0; i < sizeof kSymbols / sizeof kSymbols[0]; ++i) {
    slots[i] = dlsym(ctx->lib, kSymbols[i]);
    if (!slots[i]) {
      snprintf(ctx->reason, sizeof ctx->reason, "%s lacks %s", name, kSymbols[i]);
      return HMC_PLUGIN_SUCCESS;
    }
  }
  int version = 0, count = 0;
  if (ctx->api.get_version(&version) != 0 || ctx->api.get_device_count(&count) != 0 || count <= 0) {
    snprintf(ctx->reason, sizeof ctx->reason, "%s reports no device", name);
    return HMC_PLUGIN_SUCCESS;
  }
  snprintf(ctx->library, sizeof ctx->library, "%s, version %d", name, version);
  ctx->devices = count;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t tpl_finalize(hmc_ccl_ctx_t* ctx) {
  free(ctx); /* the library stays mapped: it may have threads winding down */
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t tpl_device_count(hmc_ccl_ctx_t* ctx, int* count) {
  *count = ctx->devices;
  return HMC_PLUGIN_SUCCESS;
}

static const char* tpl_unavailable(hmc_ccl_ctx_t* ctx) {
  return ctx->reason[0] ? ctx->reason : NULL;
}

static const char* tpl_library(hmc_ccl_ctx_t* ctx) {
  return ctx->library[0] ? ctx->library : NULL;
}

static hmc_plugin_status_t tpl_unique_id(hmc_ccl_ctx_t* ctx, void* id, size_t* len) {
  if (ctx->devices == 0) return HMC_PLUGIN_ERR_NO_DEVICE;
  if (*len < ID_BYTES) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (ctx->api.get_unique_id(id) != 0) return HMC_PLUGIN_ERR_INTERNAL;
  *len = ID_BYTES;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t tpl_comm_create(hmc_ccl_ctx_t* ctx, const void* id, size_t len,
                                           int nranks, int rank, int device, hmc_ccl_comm_t** out) {
  if (ctx->devices == 0) return HMC_PLUGIN_ERR_NO_DEVICE;
  if (len != ID_BYTES || rank < 0 || rank >= nranks || device < 0 || device >= ctx->devices)
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  struct hmc_ccl_comm* c = calloc(1, sizeof *c);
  if (!c) return HMC_PLUGIN_ERR_NO_MEMORY;
  c->ctx = ctx;
  c->nranks = nranks;
  if (ctx->api.stream_create(&c->stream) != 0) {
    free(c);
    return HMC_PLUGIN_ERR_INTERNAL;
  }
  /* TO DO: bound the wait by ctx->host->timeout_ms if your library has a non-blocking init. */
  if (ctx->api.comm_init_rank(&c->comm, nranks, id, rank, device) != 0) {
    ctx->api.stream_destroy(c->stream);
    free(c);
    return HMC_PLUGIN_ERR_PEER_LOST;
  }
  *out = c;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t tpl_comm_destroy(hmc_ccl_comm_t* c) {
  if (!c->aborted) c->ctx->api.comm_destroy(c->comm);
  c->ctx->api.stream_destroy(c->stream);
  free(c);
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t tpl_comm_abort(hmc_ccl_comm_t* c) {
  if (!c->aborted) c->ctx->api.comm_abort(c->comm);
  c->aborted = 1;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t tpl_comm_async_error(hmc_ccl_comm_t* c) {
  int error = 0;
  if (c->aborted) return HMC_PLUGIN_ERR_CANCELLED;
  if (c->ctx->api.comm_get_async_error(c->comm, &error) != 0 || error != 0)
    return failure(c, "async error", error);
  return HMC_PLUGIN_SUCCESS;
}

static const char* tpl_comm_error_text(hmc_ccl_comm_t* c) {
  return c->error;
}

/* Records the completion marker after the call just enqueued on stream. */
static hmc_plugin_status_t posted(struct hmc_ccl_comm* c, void* stream, const char* call,
                                  hmc_ccl_request_t** req) {
  struct hmc_ccl_request* r = calloc(1, sizeof *r);
  if (!r) return HMC_PLUGIN_ERR_NO_MEMORY;
  if (c->ctx->api.event_create(&r->event) != 0 || c->ctx->api.event_record(r->event, stream) != 0) {
    if (r->event) c->ctx->api.event_destroy(r->event);
    free(r);
    snprintf(c->error, sizeof c->error, "%s: cannot record its completion", call);
    return HMC_PLUGIN_ERR_INTERNAL;
  }
  r->comm = c;
  r->call = call;
  *req = r;
  return HMC_PLUGIN_SUCCESS;
}

#define STREAM(c, s) ((s) ? (s) : (c)->stream)

static hmc_plugin_status_t tpl_all_reduce(hmc_ccl_comm_t* c, const void* send, void* recv,
                                          size_t count, uint32_t dtype, uint32_t op, void* stream,
                                          hmc_ccl_request_t** req) {
  int t = map_dtype(dtype), o = map_op(op);
  if (t < 0 || o < 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  int r = c->ctx->api.all_reduce(send, recv, count, t, o, c->comm, STREAM(c, stream));
  return r ? failure(c, "myAllReduce", r) : posted(c, STREAM(c, stream), "myAllReduce", req);
}

static hmc_plugin_status_t tpl_all_gather(hmc_ccl_comm_t* c, const void* send, void* recv,
                                          size_t count, uint32_t dtype, void* stream,
                                          hmc_ccl_request_t** req) {
  int t = map_dtype(dtype);
  if (t < 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  int r = c->ctx->api.all_gather(send, recv, count, t, c->comm, STREAM(c, stream));
  return r ? failure(c, "myAllGather", r) : posted(c, STREAM(c, stream), "myAllGather", req);
}

static hmc_plugin_status_t tpl_reduce_scatter(hmc_ccl_comm_t* c, const void* send, void* recv,
                                              size_t count, uint32_t dtype, uint32_t op,
                                              void* stream, hmc_ccl_request_t** req) {
  int t = map_dtype(dtype), o = map_op(op);
  if (t < 0 || o < 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  int r = c->ctx->api.reduce_scatter(send, recv, count, t, o, c->comm, STREAM(c, stream));
  return r ? failure(c, "myReduceScatter", r)
           : posted(c, STREAM(c, stream), "myReduceScatter", req);
}

static hmc_plugin_status_t tpl_broadcast(hmc_ccl_comm_t* c, const void* send, void* recv,
                                         size_t count, uint32_t dtype, int root, void* stream,
                                         hmc_ccl_request_t** req) {
  int t = map_dtype(dtype);
  if (t < 0 || root < 0 || root >= c->nranks) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  int r = c->ctx->api.broadcast(send, recv, count, t, root, c->comm, STREAM(c, stream));
  return r ? failure(c, "myBroadcast", r) : posted(c, STREAM(c, stream), "myBroadcast", req);
}

static hmc_plugin_status_t tpl_send_recv(hmc_ccl_comm_t* c, const hmc_ccl_p2p_t* parts, size_t n,
                                         uint32_t dtype, void* stream, hmc_ccl_request_t** req) {
  int t = map_dtype(dtype);
  if (t < 0) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  void* s = STREAM(c, stream);
  int r = c->ctx->api.group_start();
  for (size_t i = 0; r == 0 && i < n; ++i)
    r = parts[i].is_send
            ? c->ctx->api.send(parts[i].buf, parts[i].count, t, parts[i].peer, c->comm, s)
            : c->ctx->api.recv(parts[i].buf, parts[i].count, t, parts[i].peer, c->comm, s);
  int end = c->ctx->api.group_end(); /* a group is closed even when a call in it failed */
  if (r == 0) r = end;
  return r ? failure(c, "myGroupEnd", r) : posted(c, s, "myGroupEnd", req);
}

static hmc_plugin_status_t tpl_test(hmc_ccl_request_t* r, int* done) {
  struct hmc_ccl_comm* c = r->comm;
  int q = c->ctx->api.event_query(r->event);
  hmc_plugin_status_t st = HMC_PLUGIN_SUCCESS;
  if (q == 1) {
    st = tpl_comm_async_error(c); /* a failure may leave the stream stuck */
    if (st == HMC_PLUGIN_SUCCESS) {
      *done = 0;
      return st;
    }
  } else if (q != 0) {
    st = failure(c, r->call, q);
  }
  c->ctx->api.event_destroy(r->event);
  free(r);
  *done = 1;
  return st;
}

static const hmc_ccl_plugin_v1_t kTable = {
    .hdr = HMC_CCL_ABI_HEADER_INIT(hmc_ccl_plugin_v1_t),
    .name = PLUGIN_NAME,
    .version = PLUGIN_VERSION,
    .config_vars = kVars,
    .mem_iface = HMC_MEM_IFACE_CUDA, /* TO DO: the interface of your devices' memory */
    .dtypes = HMC_CCL_BIT(HMC_CCL_DTYPE_F32) | HMC_CCL_BIT(HMC_CCL_DTYPE_I32), /* TO DO */
    .ops = HMC_CCL_BIT(HMC_CCL_OP_SUM) | HMC_CCL_BIT(HMC_CCL_OP_MAX),          /* TO DO */
    .init = tpl_init,
    .finalize = tpl_finalize,
    .device_count = tpl_device_count,
    .unavailable_reason = tpl_unavailable,
    .library_version = tpl_library,
    .unique_id = tpl_unique_id,
    .comm_create = tpl_comm_create,
    .comm_destroy = tpl_comm_destroy,
    .comm_abort = tpl_comm_abort,
    .comm_async_error = tpl_comm_async_error,
    .comm_error_text = tpl_comm_error_text,
    .all_reduce = tpl_all_reduce,
    .all_gather = tpl_all_gather,
    .reduce_scatter = tpl_reduce_scatter,
    .broadcast = tpl_broadcast,
    .send_recv = tpl_send_recv,
    .test = tpl_test,
};

HMC_PLUGIN_EXPORT const hmc_ccl_plugin_v1_t* hmc_ccl_plugin_v1(void) {
  return &kTable;
}
