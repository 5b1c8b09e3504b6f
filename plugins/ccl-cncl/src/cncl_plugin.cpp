// The cncl ccl plugin: Cambricon's collective library (libcncl.so) for MLU device memory, opened
// at run time with the CNRT runtime (libcnrt.so), whose queues and notifiers the plugin uses.
//
// Each communicator has a CNRT queue of its own, made with its device current; a collective
// posted with stream NULL goes there. Completion is a notifier placed after the CNCL call on the
// same queue and polled with cnrtQueryNotifier (busy while pending), which never blocks.
// cnclInitComms makes this process's one communicator of the clique (num_comm 1, the rank and
// device of this rank); it blocks until every rank joined. The id the core distributes is the
// whole cnclCliqueId: its 128 bytes and the hash after them.
//
// What CNCL lacks is refused, never emulated: float64 (no CNCL type) and the average (no CNCL
// operation) are outside the table's masks, so the core keeps those collectives on hmc's own
// algorithms, or refuses them when the CNCL backend is forced.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "ccl_ctx_slots.h"
#include "ccl_current_device.h"
#include "ccl_resolve.h"
#include "cncl_api.h"
#include "hmc/plugin/ccl.h"
#include "hmc/plugin/log.hpp"

using namespace hmc::vendor::cncl;

namespace {

constexpr const char* kLibraryVar = "HMC_CNCL_LIBRARY";
constexpr const char* kLibraryDefault = "libcncl.so";
constexpr const char* kRuntimeVar = "HMC_CNCL_CNRT_LIBRARY";
constexpr const char* kRuntimeDefault =
    "the CNRT runtime CNCL itself loaded, else libcnrt.so, /usr/local/neuware/lib64/libcnrt.so";
// Without the setting: the one of these CNCL's own load brought in (RTLD_NOLOAD, so that the
// plugin never adds a second CNRT to the process), else the first that opens.
const char* const kRuntimeCandidates[] = {"libcnrt.so", "/usr/local/neuware/lib64/libcnrt.so"};
constexpr size_t kIdBytes = sizeof(cnclCliqueId);

const hmc_config_var_t kConfigVars[] = {
    {kLibraryVar, kLibraryDefault, "the CNCL library the cncl ccl plugin opens"},
    {kRuntimeVar, kRuntimeDefault,
     "the CNRT runtime library the cncl ccl plugin opens for its queues and notifiers"},
    {nullptr, nullptr, nullptr},
};

using hmc::plugin::ccl::resolve;

struct CnrtApi {
  PFN_cnrtGetDeviceCount device_count;
  PFN_cnrtGetDevice get_device;
  PFN_cnrtSetDevice set_device;
  PFN_cnrtQueueCreate queue_create;
  PFN_cnrtQueueDestroy queue_destroy;
  PFN_cnrtNotifierCreate notifier_create;
  PFN_cnrtNotifierDestroy notifier_destroy;
  PFN_cnrtPlaceNotifier place_notifier;
  PFN_cnrtQueryNotifier query_notifier;

  // Resolves every function; the first one missing is kept in *missing.
  void resolve_all(void* L, std::string* missing) {
    resolve(L, "cnrtGetDeviceCount", &device_count, missing);
    resolve(L, "cnrtGetDevice", &get_device, missing);
    resolve(L, "cnrtSetDevice", &set_device, missing);
    resolve(L, "cnrtQueueCreate", &queue_create, missing);
    resolve(L, "cnrtQueueDestroy", &queue_destroy, missing);
    resolve(L, "cnrtNotifierCreate", &notifier_create, missing);
    resolve(L, "cnrtNotifierDestroy", &notifier_destroy, missing);
    resolve(L, "cnrtPlaceNotifier", &place_notifier, missing);
    resolve(L, "cnrtQueryNotifier", &query_notifier, missing);
  }
  // For CurrentDevice: the calling thread's device.
  bool get_current(int* device) const { return get_device(device) == cnrtSuccess; }
  bool set_current(int device) const { return set_device(device) == cnrtSuccess; }
};

struct CnclApi {
  PFN_cnclGetLibVersion lib_version;
  PFN_cnclGetErrorStr error_str;
  PFN_cnclGetCliqueId clique_id;
  PFN_cnclInitComms init_comms;
  PFN_cnclDestroyComms destroy_comms;
  PFN_cnclAbortComm abort_comm;
  PFN_cnclGetCommAsyncError async_error;
  PFN_cnclAllReduce all_reduce;
  PFN_cnclAllGather all_gather;
  PFN_cnclReduceScatter reduce_scatter;
  PFN_cnclBroadcast broadcast;
  PFN_cnclSend send;
  PFN_cnclRecv recv;
  PFN_cnclGroupStart group_start;
  PFN_cnclGroupEnd group_end;

  void resolve_all(void* L, std::string* missing) {
    resolve(L, "cnclGetLibVersion", &lib_version, missing);
    resolve(L, "cnclGetErrorStr", &error_str, missing);
    resolve(L, "cnclGetCliqueId", &clique_id, missing);
    resolve(L, "cnclInitComms", &init_comms, missing);
    resolve(L, "cnclDestroyComms", &destroy_comms, missing);
    resolve(L, "cnclAbortComm", &abort_comm, missing);
    resolve(L, "cnclGetCommAsyncError", &async_error, missing);
    resolve(L, "cnclAllReduce", &all_reduce, missing);
    resolve(L, "cnclAllGather", &all_gather, missing);
    resolve(L, "cnclReduceScatter", &reduce_scatter, missing);
    resolve(L, "cnclBroadcast", &broadcast, missing);
    resolve(L, "cnclSend", &send, missing);
    resolve(L, "cnclRecv", &recv, missing);
    resolve(L, "cnclGroupStart", &group_start, missing);
    resolve(L, "cnclGroupEnd", &group_end, missing);
  }
};

}  // namespace

struct hmc_ccl_ctx {
  hmc::plugin::Log log;
  CnclApi cncl{};
  CnrtApi cnrt{};
  int devices = 0;
  std::string unavailable;
  std::string library;  // "libcncl.so, CNCL 1.25.0"
};

struct hmc_ccl_comm {
  hmc_ccl_ctx* ctx = nullptr;
  cnclComm_t comm = nullptr;
  int device = 0;
  cnrtQueue_t queue = nullptr;
  int rank = 0, nranks = 0;
  bool aborted = false;
  std::vector<cnrtNotifier_t> spare;  // notifiers of ended requests, for reuse
  std::string error;                  // comm_error_text
};

struct hmc_ccl_request {
  hmc_ccl_comm* comm = nullptr;
  cnrtNotifier_t notifier = nullptr;
  const char* call = "";
};

namespace {

// Makes `device` current on the calling thread for the life of the scope.
using DeviceScope = hmc::plugin::ccl::CurrentDevice<CnrtApi, int>;

// CNCL's results come in classes (the low nibble) with details above it.
hmc_plugin_status_t status_of(cnclResult_t r) {
  if (r == CNCL_RET_SUCCESS) return HMC_PLUGIN_SUCCESS;
  if (r == CNCL_RET_ASYNC_IN_PROGRESS) return HMC_PLUGIN_IN_PROGRESS;
  if (r == CNCL_RET_ERR_UNSUPPORTED) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  if (r == CNCL_RET_ERR_SYS_MALLOC) return HMC_PLUGIN_ERR_NO_MEMORY;
  if (r == CNCL_RET_ERR_SYS_SOCKET) return HMC_PLUGIN_ERR_PEER_LOST;
  switch (int(r) & 0xf) {
    case CNCL_RET_ERR_ARGUMENTS: return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    case CNCL_RET_ERR_SYSTEM: return HMC_PLUGIN_ERR_SYSTEM;
    default: return HMC_PLUGIN_ERR_INTERNAL;
  }
}

std::string cncl_words(const CnclApi& api, cnclResult_t r) {
  const char* what = api.error_str(r);
  char code[16];
  std::snprintf(code, sizeof code, "0x%x", unsigned(r));
  return std::string(what && *what ? what : "unknown error") + " (CNCL result " + code + ")";
}

// Records CNCL's words for a failed call and returns its status.
hmc_plugin_status_t cncl_failure(hmc_ccl_comm* c, const char* call, cnclResult_t r) {
  c->error = std::string(call) + ": " + cncl_words(c->ctx->cncl, r);
  return status_of(r);
}

hmc_plugin_status_t cnrt_failure(hmc_ccl_comm* c, const char* call, cnrtRet_t r) {
  c->error = std::string(call) + ": CNRT error " + std::to_string(r);
  return HMC_PLUGIN_ERR_INTERNAL;
}

// hmc's dtypes and operations that CNCL has, with CNCL's values: the table's masks and the
// mapping both come from these. Left out: HMC_CCL_DTYPE_F64 (CNCL has no 64-bit float) and
// HMC_CCL_OP_AVG (CNCL has no average).
template <typename T>
struct Mapping {
  uint32_t hmc;
  T cncl;
};
constexpr Mapping<cnclDataType_t> kDtypes[] = {
    {HMC_CCL_DTYPE_F32, cnclFloat32},   {HMC_CCL_DTYPE_F16, cnclFloat16},
    {HMC_CCL_DTYPE_BF16, cnclBfloat16}, {HMC_CCL_DTYPE_I8, cnclInt8},
    {HMC_CCL_DTYPE_U8, cnclUint8},      {HMC_CCL_DTYPE_I32, cnclInt32},
    {HMC_CCL_DTYPE_I64, cnclInt64}};
constexpr Mapping<cnclReduceOp_t> kOps[] = {{HMC_CCL_OP_SUM, cnclSum},
                                            {HMC_CCL_OP_PROD, cnclProd},
                                            {HMC_CCL_OP_MIN, cnclMin},
                                            {HMC_CCL_OP_MAX, cnclMax}};

template <typename T, size_t N>
bool map_value(const Mapping<T> (&table)[N], uint32_t hmc, T* out) {
  for (const Mapping<T>& m : table)
    if (m.hmc == hmc) {
      *out = m.cncl;
      return true;
    }
  return false;
}

template <typename T, size_t N>
uint32_t mask_of(const Mapping<T> (&table)[N]) {
  uint32_t mask = 0;
  for (const Mapping<T>& m : table) mask |= HMC_CCL_BIT(m.hmc);
  return mask;
}

bool map_dtype(uint32_t dtype, cnclDataType_t* out) {
  return map_value(kDtypes, dtype, out);
}
bool map_op(uint32_t op, cnclReduceOp_t* out) {
  return map_value(kOps, op, out);
}

// Posts one CNCL call on the communicator's device and queue (or the caller's queue), then
// places the request's notifier after it. `call` issues the CNCL work on the queue it is given.
template <typename Issue>
hmc_plugin_status_t post(hmc_ccl_comm* c, void* stream, const char* name, hmc_ccl_request_t** req,
                         Issue&& call) {
  const CnrtApi& rt = c->ctx->cnrt;
  DeviceScope scope(rt, c->device);
  if (!scope.ok()) {
    c->error = std::string(name) + ": cnrtSetDevice(" + std::to_string(c->device) + ") failed";
    return HMC_PLUGIN_ERR_INTERNAL;
  }
  cnrtQueue_t queue = stream ? static_cast<cnrtQueue_t>(stream) : c->queue;
  if (hmc_plugin_status_t st = call(queue); st != HMC_PLUGIN_SUCCESS) return st;
  cnrtNotifier_t n = nullptr;
  if (!c->spare.empty()) {
    n = c->spare.back();
    c->spare.pop_back();
  } else if (cnrtRet_t r = rt.notifier_create(&n); r != cnrtSuccess) {
    return cnrt_failure(c, "cnrtNotifierCreate", r);
  }
  if (cnrtRet_t r = rt.place_notifier(n, queue); r != cnrtSuccess) {
    rt.notifier_destroy(n);
    return cnrt_failure(c, "cnrtPlaceNotifier", r);
  }
  auto* rq = new (std::nothrow) hmc_ccl_request;
  if (!rq) {
    c->spare.push_back(n);
    return HMC_PLUGIN_ERR_NO_MEMORY;
  }
  rq->comm = c;
  rq->notifier = n;
  rq->call = name;
  *req = rq;
  return HMC_PLUGIN_SUCCESS;
}

// Opens the CNRT runtime: the named one, else one already loaded, else the first that opens.
void* open_runtime(const std::string& named, std::string* opened, std::string* why) {
  if (!named.empty()) {
    *opened = named;
    if (void* h = dlopen(named.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = dlerror();
    *why = named + " (the CNRT runtime) not found: " + (e ? e : "dlopen failed");
    return nullptr;
  }
  for (int flags : {RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, RTLD_NOW | RTLD_LOCAL})
    for (const char* name : kRuntimeCandidates)
      if (void* h = dlopen(name, flags)) {
        *opened = name;
        return h;
      }
  const char* e = dlerror();
  *why = std::string("the CNRT runtime not found (") + kRuntimeDefault +
         "): " + (e ? e : "dlopen failed");
  return nullptr;
}

// ---- slots -----------------------------------------------------------------------------------

// Fills ctx from the libraries; on return ctx->unavailable says why nothing is served, if so.
void open_libraries(hmc_ccl_ctx* ctx, const std::string& cncl_name, const std::string& rt_name) {
  void* lib = dlopen(cncl_name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    ctx->unavailable = cncl_name + " not found: " + (e ? e : "dlopen failed");
    return;
  }
  std::string missing;
  ctx->cncl.resolve_all(lib, &missing);
  if (!missing.empty()) {
    ctx->unavailable = cncl_name + " lacks " + missing + " (not a CNCL this plugin can use)";
    return;
  }
  int major = 0, minor = 0, patch = 0;
  if (cnclResult_t r = ctx->cncl.lib_version(&major, &minor, &patch); r != CNCL_RET_SUCCESS) {
    ctx->unavailable = cncl_name + ": cnclGetLibVersion: " + cncl_words(ctx->cncl, r);
    return;
  }
  char text[160];
  std::snprintf(text, sizeof text, "%s, CNCL %d.%d.%d", cncl_name.c_str(), major, minor, patch);
  ctx->library = text;

  std::string opened;
  void* rt = open_runtime(rt_name, &opened, &ctx->unavailable);
  if (!rt) return;
  ctx->cnrt.resolve_all(rt, &missing);
  if (!missing.empty()) {
    ctx->unavailable = opened + " lacks " + missing;
    return;
  }
  unsigned count = 0;
  if (ctx->cnrt.device_count(&count) != cnrtSuccess || count == 0) {
    ctx->unavailable = "the CNRT runtime reports no device";
    return;
  }
  ctx->devices = int(count);
  // The libraries stay mapped for the life of the process: CNCL keeps threads of its own.
}

hmc_plugin_status_t plugin_init(const hmc_host_services_t* host, hmc_ccl_ctx_t** out) {
  auto* ctx = new (std::nothrow) hmc_ccl_ctx;
  if (!ctx) return HMC_PLUGIN_ERR_NO_MEMORY;
  ctx->log = hmc::plugin::Log(host);
  const char* lib = host->config_get(host->host_ctx, kLibraryVar);
  const char* rt = host->config_get(host->host_ctx, kRuntimeVar);
  open_libraries(ctx, lib && *lib ? lib : kLibraryDefault, rt && *rt ? rt : "");
  *out = ctx;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t plugin_finalize(hmc_ccl_ctx_t* ctx) {
  if (!ctx) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  delete ctx;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t plugin_unique_id(hmc_ccl_ctx_t* ctx, void* id, size_t* len) {
  if (!ctx || !id || !len || *len < kIdBytes) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (ctx->devices == 0) return HMC_PLUGIN_ERR_NO_DEVICE;
  cnclCliqueId clique{};
  if (cnclResult_t r = ctx->cncl.clique_id(&clique); r != CNCL_RET_SUCCESS) {
    ctx->log.write(HMC_LOG_WARN, "cnclGetCliqueId: %s", cncl_words(ctx->cncl, r).c_str());
    return status_of(r);
  }
  std::memcpy(id, &clique, kIdBytes);
  *len = kIdBytes;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t plugin_comm_create(hmc_ccl_ctx_t* ctx, const void* id, size_t len, int nranks,
                                       int rank, int device, hmc_ccl_comm_t** out) {
  if (!ctx || !id || !out || len != kIdBytes || nranks < 1 || rank < 0 || rank >= nranks ||
      device < 0 || device >= ctx->devices)
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  DeviceScope scope(ctx->cnrt, device);
  if (!scope.ok()) {
    ctx->log.write(HMC_LOG_WARN, "cnrtSetDevice(%d) failed", device);
    return HMC_PLUGIN_ERR_INTERNAL;
  }
  auto* c = new (std::nothrow) hmc_ccl_comm;
  if (!c) return HMC_PLUGIN_ERR_NO_MEMORY;
  c->ctx = ctx;
  c->device = device;
  c->rank = rank;
  c->nranks = nranks;
  if (cnrtRet_t r = ctx->cnrt.queue_create(&c->queue); r != cnrtSuccess) {
    ctx->log.write(HMC_LOG_WARN, "cnrtQueueCreate: CNRT error %d", r);
    delete c;
    return HMC_PLUGIN_ERR_INTERNAL;
  }
  cnclCliqueId clique;
  std::memcpy(&clique, id, kIdBytes);
  cnclResult_t r = ctx->cncl.init_comms(&c->comm, 1, &device, &rank, nranks, &clique);
  if (r != CNCL_RET_SUCCESS) {
    ctx->log.write(HMC_LOG_WARN, "cnclInitComms (rank %d of %d, device %d): %s", rank, nranks,
                   device, cncl_words(ctx->cncl, r).c_str());
    ctx->cnrt.queue_destroy(c->queue);
    delete c;
    hmc_plugin_status_t st = status_of(r);
    return st == HMC_PLUGIN_ERR_INTERNAL ? HMC_PLUGIN_ERR_PEER_LOST : st;
  }
  *out = c;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t plugin_comm_destroy(hmc_ccl_comm_t* c) {
  if (!c) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  const CnrtApi& rt = c->ctx->cnrt;
  {
    DeviceScope scope(rt, c->device);
    // cnclAbortComm already released the communicator's resources.
    if (!c->aborted) c->ctx->cncl.destroy_comms(&c->comm, 1);
    for (cnrtNotifier_t n : c->spare) rt.notifier_destroy(n);
    rt.queue_destroy(c->queue);
  }
  delete c;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t plugin_comm_abort(hmc_ccl_comm_t* c) {
  if (!c) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (c->aborted) return HMC_PLUGIN_SUCCESS;
  DeviceScope scope(c->ctx->cnrt, c->device);
  cnclResult_t r = c->ctx->cncl.abort_comm(c->comm);
  c->aborted = true;
  return r == CNCL_RET_SUCCESS ? HMC_PLUGIN_SUCCESS : cncl_failure(c, "cnclAbortComm", r);
}

hmc_plugin_status_t plugin_comm_async_error(hmc_ccl_comm_t* c) {
  if (!c) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (c->aborted) return HMC_PLUGIN_ERR_CANCELLED;
  // The asynchronous error is the call's result; in progress is no error.
  cnclResult_t r = c->ctx->cncl.async_error(c->comm);
  if (r == CNCL_RET_SUCCESS || r == CNCL_RET_ASYNC_IN_PROGRESS) return HMC_PLUGIN_SUCCESS;
  return cncl_failure(c, "cnclGetCommAsyncError", r);
}

const char* plugin_comm_error_text(hmc_ccl_comm_t* c) {
  return c ? c->error.c_str() : "";
}

// The checks every collective shares: a communicator, a request slot and CNCL's dtype.
bool collective_args(hmc_ccl_comm_t* c, hmc_ccl_request_t** req, uint32_t dtype,
                     cnclDataType_t* t) {
  return c && req && map_dtype(dtype, t);
}

hmc_plugin_status_t plugin_all_reduce(hmc_ccl_comm_t* c, const void* send, void* recv, size_t count,
                                      uint32_t dtype, uint32_t op, void* stream,
                                      hmc_ccl_request_t** req) {
  cnclDataType_t t;
  cnclReduceOp_t o;
  if (!collective_args(c, req, dtype, &t) || !map_op(op, &o))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  return post(c, stream, "cnclAllReduce", req, [&](cnrtQueue_t q) {
    cnclResult_t r = c->ctx->cncl.all_reduce(send, recv, count, t, o, c->comm, q);
    return r == CNCL_RET_SUCCESS ? HMC_PLUGIN_SUCCESS : cncl_failure(c, "cnclAllReduce", r);
  });
}

hmc_plugin_status_t plugin_all_gather(hmc_ccl_comm_t* c, const void* send, void* recv, size_t count,
                                      uint32_t dtype, void* stream, hmc_ccl_request_t** req) {
  cnclDataType_t t;
  if (!collective_args(c, req, dtype, &t)) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  return post(c, stream, "cnclAllGather", req, [&](cnrtQueue_t q) {
    cnclResult_t r = c->ctx->cncl.all_gather(send, recv, count, t, c->comm, q);
    return r == CNCL_RET_SUCCESS ? HMC_PLUGIN_SUCCESS : cncl_failure(c, "cnclAllGather", r);
  });
}

hmc_plugin_status_t plugin_reduce_scatter(hmc_ccl_comm_t* c, const void* send, void* recv,
                                          size_t count, uint32_t dtype, uint32_t op, void* stream,
                                          hmc_ccl_request_t** req) {
  cnclDataType_t t;
  cnclReduceOp_t o;
  if (!collective_args(c, req, dtype, &t) || !map_op(op, &o))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  return post(c, stream, "cnclReduceScatter", req, [&](cnrtQueue_t q) {
    cnclResult_t r = c->ctx->cncl.reduce_scatter(send, recv, count, t, o, c->comm, q);
    return r == CNCL_RET_SUCCESS ? HMC_PLUGIN_SUCCESS : cncl_failure(c, "cnclReduceScatter", r);
  });
}

hmc_plugin_status_t plugin_broadcast(hmc_ccl_comm_t* c, const void* send, void* recv, size_t count,
                                     uint32_t dtype, int root, void* stream,
                                     hmc_ccl_request_t** req) {
  cnclDataType_t t;
  if (!collective_args(c, req, dtype, &t) || root < 0 || root >= c->nranks)
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  return post(c, stream, "cnclBroadcast", req, [&](cnrtQueue_t q) {
    cnclResult_t r = c->ctx->cncl.broadcast(send, recv, count, t, root, c->comm, q);
    return r == CNCL_RET_SUCCESS ? HMC_PLUGIN_SUCCESS : cncl_failure(c, "cnclBroadcast", r);
  });
}

hmc_plugin_status_t plugin_send_recv(hmc_ccl_comm_t* c, const hmc_ccl_p2p_t* parts, size_t n,
                                     uint32_t dtype, void* stream, hmc_ccl_request_t** req) {
  cnclDataType_t t;
  if (!collective_args(c, req, dtype, &t) || (n && !parts)) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; i < n; ++i)
    if (parts[i].peer < 0 || parts[i].peer >= c->nranks) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  return post(c, stream, "cnclGroupEnd (send/recv)", req, [&](cnrtQueue_t q) {
    const CnclApi& api = c->ctx->cncl;
    if (cnclResult_t r = api.group_start(); r != CNCL_RET_SUCCESS)
      return cncl_failure(c, "cnclGroupStart", r);
    for (size_t i = 0; i < n; ++i) {
      const hmc_ccl_p2p_t& p = parts[i];
      cnclResult_t r = p.is_send ? api.send(p.buf, p.count, t, p.peer, c->comm, q)
                                 : api.recv(p.buf, p.count, t, p.peer, c->comm, q);
      if (r != CNCL_RET_SUCCESS) {
        hmc_plugin_status_t st = cncl_failure(c, p.is_send ? "cnclSend" : "cnclRecv", r);
        api.group_end();  // a group is closed even when a call in it failed
        return st;
      }
    }
    cnclResult_t r = api.group_end();
    return r == CNCL_RET_SUCCESS ? HMC_PLUGIN_SUCCESS : cncl_failure(c, "cnclGroupEnd", r);
  });
}

// Ends a request with `st`, its text prefixed with the call it was.
hmc_plugin_status_t end_request(hmc_ccl_request_t* rq, hmc_plugin_status_t st, int* done) {
  hmc_ccl_comm* c = rq->comm;
  if (st == HMC_PLUGIN_SUCCESS) {
    c->spare.push_back(rq->notifier);
  } else {
    c->error = std::string(rq->call) + ": " + c->error;
    c->ctx->cnrt.notifier_destroy(rq->notifier);
  }
  delete rq;
  *done = 1;
  return st;
}

hmc_plugin_status_t plugin_test(hmc_ccl_request_t* rq, int* done) {
  if (!rq || !done) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  hmc_ccl_comm* c = rq->comm;
  cnrtRet_t r = c->ctx->cnrt.query_notifier(rq->notifier);
  if (r == cnrtErrorBusy || r == cnrtErrorNotReady) {
    // A CNCL failure may leave the queue stuck: its asynchronous error says so.
    hmc_plugin_status_t st = plugin_comm_async_error(c);
    if (st == HMC_PLUGIN_SUCCESS) {
      *done = 0;
      return HMC_PLUGIN_SUCCESS;
    }
    return end_request(rq, st, done);
  }
  if (r == cnrtSuccess) return end_request(rq, HMC_PLUGIN_SUCCESS, done);
  hmc_plugin_status_t st = plugin_comm_async_error(c);
  if (st == HMC_PLUGIN_SUCCESS) st = cnrt_failure(c, "cnrtQueryNotifier", r);
  return end_request(rq, st, done);
}

hmc_ccl_plugin_v1_t make_table() {
  hmc_ccl_plugin_v1_t t{};
  t.hdr = HMC_CCL_ABI_HEADER_INIT(hmc_ccl_plugin_v1_t);
  t.name = "cncl";
  t.version = "0.1.0";
  t.config_vars = kConfigVars;
  t.mem_iface = HMC_MEM_IFACE_MLU;
  t.dtypes = mask_of(kDtypes);
  t.ops = mask_of(kOps);
  t.init = plugin_init;
  t.finalize = plugin_finalize;
  t.device_count = hmc::plugin::ccl::ctx_device_count<hmc_ccl_ctx>;
  t.unavailable_reason = hmc::plugin::ccl::ctx_unavailable_reason<hmc_ccl_ctx>;
  t.library_version = hmc::plugin::ccl::ctx_library_version<hmc_ccl_ctx>;
  t.unique_id = plugin_unique_id;
  t.comm_create = plugin_comm_create;
  t.comm_destroy = plugin_comm_destroy;
  t.comm_abort = plugin_comm_abort;
  t.comm_async_error = plugin_comm_async_error;
  t.comm_error_text = plugin_comm_error_text;
  t.all_reduce = plugin_all_reduce;
  t.all_gather = plugin_all_gather;
  t.reduce_scatter = plugin_reduce_scatter;
  t.broadcast = plugin_broadcast;
  t.send_recv = plugin_send_recv;
  t.test = plugin_test;
  return t;
}

const hmc_ccl_plugin_v1_t kTable = make_table();

}  // namespace

extern "C" HMC_PLUGIN_EXPORT const hmc_ccl_plugin_v1_t* hmc_ccl_plugin_v1(void) {
  return &kTable;
}
