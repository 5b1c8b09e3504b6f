// The nccl ccl plugin: NVIDIA's collective library (libnccl.so.2) for CUDA device memory, opened
// at run time with the CUDA driver (libcuda.so.1), whose streams and events the plugin uses.
//
// Built with HMC_CCL_MCCL it is the mccl ccl plugin: Moore Threads' MCCL (libmccl.so), NCCL's
// API under mccl* names over the MUSA runtime (libmusart.so), for MUSA device memory.
// Built with HMC_CCL_RCCL this source is the rccl ccl plugin: AMD's RCCL (librccl.so.1, also
// Hygon DTK's), which exports NCCL's API (the same nccl* names, enum values and 128-byte unique
// id) over HIP, for ROCm device memory, with the HIP runtime (libamdhip64.so.6) for its streams
// and events. Only the vendor block below (names, settings, memory interface, the runtime's
// stream and event calls) differs among the three.
//
// Each communicator has a stream of its own (made on the device's primary context, the one the
// CUDA runtime and so NCCL use); a collective posted with stream NULL goes there. Completion is
// an event recorded after the NCCL call on the same stream and queried with cuEventQuery,
// which never blocks. ncclCommInitRank is NCCL's blocking form: it returns when every rank
// joined (NCCL's own bootstrap timeout applies). The unique id the core distributes is
// ncclUniqueId's 128 bytes.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <iterator>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "ccl_ctx_slots.h"
#include "ccl_current_device.h"
#include "ccl_resolve.h"
#include "hmc/plugin/ccl.h"
#include "hmc/plugin/log.hpp"
#include "nccl_api.h"

using namespace hmc::vendor::nccl;

namespace {

using hmc::plugin::ccl::resolve;

// ---- the vendor block ------------------------------------------------------------------------
// GpuApi: the runtime's calls behind one shape. A DeviceHandle is what makes a device current
// (CUDA: its primary context; HIP: its ordinal); retain() makes one, release() lets it go.
#if defined(HMC_CCL_RCCL) || defined(HMC_CCL_MCCL)
// RCCL over HIP and MCCL over MUSA: both runtimes have the CUDA runtime's shape, so one GpuApi
// serves them, its names spelled through RT().
#ifdef HMC_CCL_RCCL
using namespace hmc::vendor::hiprt;
#define RT(name) hip##name
#define RT_PFN(name) PFN_hip##name
#define RT_NAME(name) "hip" #name
#define HMC_CCL_PREFIX "nccl"
constexpr const char* kPluginName = "rccl";
constexpr const char* kLibraryVar = "HMC_RCCL_LIBRARY";
constexpr const char* kLibraryDefault = "librccl.so.1";
constexpr const char* kLibraryWord = "RCCL";
constexpr const char* kRuntimeVar = "HMC_RCCL_HIP_LIBRARY";
constexpr const char* kRuntimeDefault =
    "the HIP runtime RCCL itself loaded, else libamdhip64.so.7, .so.6, .so.5, /opt/rocm/lib, "
    "/opt/dtk/lib (Hygon DTK)";
// Without the setting: the one of these RCCL's own load brought in (RTLD_NOLOAD, so that the
// plugin never adds a second HIP runtime to the process), else the first that opens.
const char* const kRuntimeCandidates[] = {"libamdhip64.so.7", "libamdhip64.so.6",
                                          "libamdhip64.so.5", "/opt/rocm/lib/libamdhip64.so",
                                          "/opt/dtk/lib/libamdhip64.so"};
constexpr const char* kRuntimeWord = "the HIP runtime";
constexpr hmc_mem_iface_t kMemIface = HMC_MEM_IFACE_ROCM;
const hmc_config_var_t kConfigVars[] = {
    {kLibraryVar, kLibraryDefault, "the RCCL library the rccl ccl plugin opens"},
    {kRuntimeVar, kRuntimeDefault,
     "the HIP runtime library the rccl ccl plugin opens for its streams and events"},
    {nullptr, nullptr, nullptr},
};
#else
using namespace hmc::vendor::musart;
#define RT(name) musa##name
#define RT_PFN(name) PFN_musa##name
#define RT_NAME(name) "musa" #name
#define HMC_CCL_PREFIX "mccl"
constexpr const char* kPluginName = "mccl";
constexpr const char* kLibraryVar = "HMC_MCCL_LIBRARY";
constexpr const char* kLibraryDefault = "libmccl.so";
constexpr const char* kLibraryWord = "MCCL";
constexpr const char* kRuntimeVar = "HMC_MCCL_MUSA_LIBRARY";
constexpr const char* kRuntimeDefault =
    "the MUSA runtime MCCL itself loaded, else libmusart.so, /usr/local/musa/lib/libmusart.so";
const char* const kRuntimeCandidates[] = {"libmusart.so", "/usr/local/musa/lib/libmusart.so"};
constexpr const char* kRuntimeWord = "the MUSA runtime";
constexpr hmc_mem_iface_t kMemIface = HMC_MEM_IFACE_MUSA;
const hmc_config_var_t kConfigVars[] = {
    {kLibraryVar, kLibraryDefault, "the MCCL library the mccl ccl plugin opens"},
    {kRuntimeVar, kRuntimeDefault,
     "the MUSA runtime library the mccl ccl plugin opens for its streams and events"},
    {nullptr, nullptr, nullptr},
};
#endif

using GpuResult = RT(Error_t);
using GpuStream = RT(Stream_t);
using GpuEvent = RT(Event_t);
using DeviceHandle = int;
constexpr GpuResult kGpuSuccess = RT(Success);
constexpr GpuResult kGpuNotReady = RT(ErrorNotReady);

struct GpuApi {
  static constexpr const char* kError = RT_NAME() " error";
  static constexpr const char* kEventCreateCall = RT_NAME(EventCreateWithFlags);
  static constexpr const char* kEventRecordCall = RT_NAME(EventRecord);
  static constexpr const char* kEventQueryCall = RT_NAME(EventQuery);
  static constexpr const char* kStreamCreateCall = RT_NAME(StreamCreateWithFlags);
#ifdef HMC_CCL_RCCL
  PFN_hipInit init_;  // MUSA's runtime initialises itself
#endif
  RT_PFN(GetDeviceCount) device_count_;
  RT_PFN(GetDevice) get_device_;
  RT_PFN(SetDevice) set_device_;
  RT_PFN(StreamCreateWithFlags) stream_create_;
  RT_PFN(StreamDestroy) stream_destroy_;
  RT_PFN(EventCreateWithFlags) event_create_;
  RT_PFN(EventRecord) event_record_;
  RT_PFN(EventQuery) event_query_;
  RT_PFN(EventDestroy) event_destroy_;

  void resolve_all(void* L, std::string* missing) {
#ifdef HMC_CCL_RCCL
    resolve(L, "hipInit", &init_, missing);
#endif
    resolve(L, RT_NAME(GetDeviceCount), &device_count_, missing);
    resolve(L, RT_NAME(GetDevice), &get_device_, missing);
    resolve(L, RT_NAME(SetDevice), &set_device_, missing);
    resolve(L, RT_NAME(StreamCreateWithFlags), &stream_create_, missing);
    resolve(L, RT_NAME(StreamDestroy), &stream_destroy_, missing);
    resolve(L, RT_NAME(EventCreateWithFlags), &event_create_, missing);
    resolve(L, RT_NAME(EventRecord), &event_record_, missing);
    resolve(L, RT_NAME(EventQuery), &event_query_, missing);
    resolve(L, RT_NAME(EventDestroy), &event_destroy_, missing);
  }
  // Empty, or why there is no device.
  std::string start(int* count) const {
#ifdef HMC_CCL_RCCL
    if (GpuResult r = init_(0); r != hipSuccess)
      return "hipInit failed: HIP error " + std::to_string(r);
#endif
    if (device_count_(count) != kGpuSuccess || *count <= 0)
      return std::string(kRuntimeWord) + " reports no device";
    return {};
  }
  bool retain(int device, DeviceHandle* out) const {
    *out = device;
    return true;
  }
  void release(int) const {}
  bool get_current(DeviceHandle* h) const {
    return get_device_(h) == kGpuSuccess;
  }
  bool set_current(DeviceHandle h) const {
    return set_device_(h) == kGpuSuccess;
  }
  GpuResult stream_create(GpuStream* s) const {
    return stream_create_(s, RT(StreamNonBlocking));
  }
  void stream_destroy(GpuStream s) const {
    stream_destroy_(s);
  }
  GpuResult event_create(GpuEvent* e) const {
    return event_create_(e, RT(EventDisableTiming));
  }
  GpuResult event_record(GpuEvent e, GpuStream s) const {
    return event_record_(e, s);
  }
  GpuResult event_query(GpuEvent e) const {
    return event_query_(e);
  }
  void event_destroy(GpuEvent e) const {
    event_destroy_(e);
  }
};
#else
using namespace hmc::vendor::cudadrv;
#define HMC_CCL_PREFIX "nccl"
constexpr const char* kPluginName = "nccl";
constexpr const char* kLibraryVar = "HMC_NCCL_LIBRARY";
constexpr const char* kLibraryDefault = "libnccl.so.2";
constexpr const char* kLibraryWord = "NCCL";
constexpr const char* kRuntimeVar = "HMC_NCCL_CUDA_LIBRARY";
constexpr const char* kRuntimeDefault = "libcuda.so.1";
const char* const kRuntimeCandidates[] = {kRuntimeDefault};
constexpr const char* kRuntimeWord = "the CUDA driver";
constexpr hmc_mem_iface_t kMemIface = HMC_MEM_IFACE_CUDA;
const hmc_config_var_t kConfigVars[] = {
    {kLibraryVar, kLibraryDefault, "the NCCL library the nccl ccl plugin opens"},
    {kRuntimeVar, kRuntimeDefault,
     "the CUDA driver library the nccl ccl plugin opens for its streams and events"},
    {nullptr, nullptr, nullptr},
};

using GpuResult = CUresult;
using GpuStream = CUstream;
using GpuEvent = CUevent;
using DeviceHandle = CUcontext;
constexpr GpuResult kGpuSuccess = CUDA_SUCCESS;
constexpr GpuResult kGpuNotReady = CUDA_ERROR_NOT_READY;

struct GpuApi {
  static constexpr const char* kError = "CUDA error";
  static constexpr const char* kEventCreateCall = "cuEventCreate";
  static constexpr const char* kEventRecordCall = "cuEventRecord";
  static constexpr const char* kEventQueryCall = "cuEventQuery";
  static constexpr const char* kStreamCreateCall = "cuStreamCreate";
  PFN_cuInit init_;
  PFN_cuDeviceGetCount device_count_;
  PFN_cuDeviceGet device_get_;
  PFN_cuDevicePrimaryCtxRetain primary_retain_;
  PFN_cuDevicePrimaryCtxRelease primary_release_;
  PFN_cuCtxGetCurrent ctx_get_;
  PFN_cuCtxSetCurrent ctx_set_;
  PFN_cuStreamCreate stream_create_;
  PFN_cuStreamDestroy stream_destroy_;
  PFN_cuEventCreate event_create_;
  PFN_cuEventRecord event_record_;
  PFN_cuEventQuery event_query_;
  PFN_cuEventDestroy event_destroy_;

  void resolve_all(void* L, std::string* missing) {
    resolve(L, "cuInit", &init_, missing);
    resolve(L, "cuDeviceGetCount", &device_count_, missing);
    resolve(L, "cuDeviceGet", &device_get_, missing);
    resolve(L, "cuDevicePrimaryCtxRetain", &primary_retain_, missing);
    resolve(L, "cuDevicePrimaryCtxRelease_v2", &primary_release_, missing);
    resolve(L, "cuCtxGetCurrent", &ctx_get_, missing);
    resolve(L, "cuCtxSetCurrent", &ctx_set_, missing);
    resolve(L, "cuStreamCreate", &stream_create_, missing);
    resolve(L, "cuStreamDestroy_v2", &stream_destroy_, missing);
    resolve(L, "cuEventCreate", &event_create_, missing);
    resolve(L, "cuEventRecord", &event_record_, missing);
    resolve(L, "cuEventQuery", &event_query_, missing);
    resolve(L, "cuEventDestroy_v2", &event_destroy_, missing);
  }
  std::string start(int* count) const {
    if (GpuResult r = init_(0); r != CUDA_SUCCESS)
      return "cuInit failed: CUDA error " + std::to_string(r);
    if (device_count_(count) != CUDA_SUCCESS || *count <= 0)
      return "the CUDA driver reports no device";
    return {};
  }
  // The device's primary context, the one the CUDA runtime and so NCCL use.
  bool retain(int device, DeviceHandle* out) const {
    CUdevice dev = 0;
    return device_get_(&dev, device) == CUDA_SUCCESS && primary_retain_(out, dev) == CUDA_SUCCESS;
  }
  void release(int device) const { primary_release_(device); }
  bool get_current(DeviceHandle* h) const { return ctx_get_(h) == CUDA_SUCCESS; }
  bool set_current(DeviceHandle h) const { return ctx_set_(h) == CUDA_SUCCESS; }
  GpuResult stream_create(GpuStream* s) const { return stream_create_(s, CU_STREAM_NON_BLOCKING); }
  void stream_destroy(GpuStream s) const { stream_destroy_(s); }
  GpuResult event_create(GpuEvent* e) const { return event_create_(e, CU_EVENT_DISABLE_TIMING); }
  GpuResult event_record(GpuEvent e, GpuStream s) const { return event_record_(e, s); }
  GpuResult event_query(GpuEvent e) const { return event_query_(e); }
  void event_destroy(GpuEvent e) const { event_destroy_(e); }
};
#endif
// The library's call of that name: "ncclAllReduce", or "mcclAllReduce" in MCCL's spelling.
#define LIBCALL(name) HMC_CCL_PREFIX #name
// ---- end of the vendor block -----------------------------------------------------------------

struct NcclApi {
  PFN_ncclGetVersion get_version;
  PFN_ncclGetUniqueId get_unique_id;
  PFN_ncclCommInitRank comm_init_rank;
  PFN_ncclCommDestroy comm_destroy;
  PFN_ncclCommAbort comm_abort;
  PFN_ncclCommGetAsyncError comm_get_async_error;
  PFN_ncclGetErrorString get_error_string;
  PFN_ncclGetLastError get_last_error;
  PFN_ncclAllReduce all_reduce;
  PFN_ncclAllGather all_gather;
  PFN_ncclReduceScatter reduce_scatter;
  PFN_ncclBroadcast broadcast;
  PFN_ncclSend send;
  PFN_ncclRecv recv;
  PFN_ncclGroupStart group_start;
  PFN_ncclGroupEnd group_end;
};

}  // namespace

struct hmc_ccl_ctx {
  const hmc_host_services_t* host = nullptr;
  hmc::plugin::Log log;
  void* nccl_lib = nullptr;
  void* gpu_lib = nullptr;
  NcclApi nccl{};
  GpuApi gpu{};
  int devices = 0;
  std::string unavailable;
  std::string library;                 // "libnccl.so.2, NCCL 2.28.9"
  std::mutex mutex;                    // contexts_
  std::vector<DeviceHandle> contexts;  // per ordinal, retained on first use
  std::vector<char> retained;
};

struct hmc_ccl_comm {
  hmc_ccl_ctx* ctx = nullptr;
  ncclComm_t comm = nullptr;
  DeviceHandle dev{};
  GpuStream stream = nullptr;
  int rank = 0, nranks = 0;
  bool aborted = false;
  std::vector<GpuEvent> spare_events;
  std::vector<hmc_ccl_request*> spare_requests;  // of collectives that ended well, for reuse
  std::string error;                             // comm_error_text
};

struct hmc_ccl_request {
  hmc_ccl_comm* comm = nullptr;
  GpuEvent event = nullptr;
  const char* call = "";
};

namespace {

// Makes the communicator's context current on the calling thread for the life of the scope.
using CurrentContext = hmc::plugin::ccl::CurrentDevice<GpuApi, DeviceHandle>;

hmc_plugin_status_t status_of(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return HMC_PLUGIN_SUCCESS;
    case ncclInProgress: return HMC_PLUGIN_IN_PROGRESS;
    case ncclInvalidArgument:
    case ncclInvalidUsage: return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    case ncclRemoteError: return HMC_PLUGIN_ERR_PEER_LOST;
    case ncclSystemError: return HMC_PLUGIN_ERR_SYSTEM;
    default: return HMC_PLUGIN_ERR_INTERNAL;
  }
}

// Records the library's words for a failed call and returns its status.
hmc_plugin_status_t nccl_failure(hmc_ccl_comm* c, const char* call, ncclResult_t r) {
  const NcclApi& api = c->ctx->nccl;
  const char* what = api.get_error_string(r);
  const char* last = api.get_last_error ? api.get_last_error(c->comm) : nullptr;
  c->error = std::string(call) + ": " + (what ? what : "unknown error");
  if (last && *last) c->error += std::string(" (") + last + ")";
  return status_of(r);
}

hmc_plugin_status_t gpu_failure(hmc_ccl_comm* c, const char* call, GpuResult r) {
  c->error = std::string(call) + ": " + GpuApi::kError + " " + std::to_string(r);
  return HMC_PLUGIN_ERR_INTERNAL;
}

bool map_dtype(uint32_t dtype, ncclDataType_t* out) {
  switch (dtype) {
    case HMC_CCL_DTYPE_F32: *out = ncclFloat32; return true;
    case HMC_CCL_DTYPE_F64: *out = ncclFloat64; return true;
    case HMC_CCL_DTYPE_F16: *out = ncclFloat16; return true;
    case HMC_CCL_DTYPE_BF16: *out = ncclBfloat16; return true;
    case HMC_CCL_DTYPE_I8: *out = ncclInt8; return true;
    case HMC_CCL_DTYPE_U8: *out = ncclUint8; return true;
    case HMC_CCL_DTYPE_I32: *out = ncclInt32; return true;
    case HMC_CCL_DTYPE_I64: *out = ncclInt64; return true;
  }
  return false;
}

bool map_op(uint32_t op, ncclRedOp_t* out) {
  switch (op) {
    case HMC_CCL_OP_SUM: *out = ncclSum; return true;
    case HMC_CCL_OP_PROD: *out = ncclProd; return true;
    case HMC_CCL_OP_MIN: *out = ncclMin; return true;
    case HMC_CCL_OP_MAX: *out = ncclMax; return true;
    case HMC_CCL_OP_AVG: *out = ncclAvg; return true;
  }
  return false;
}

GpuStream stream_of(hmc_ccl_comm* c, void* stream) {
  return stream ? static_cast<GpuStream>(stream) : c->stream;
}

// The library's stream parameter: the runtime's stream, the same pointer.
cudaStream_t lib_stream(GpuStream s) {
  return reinterpret_cast<cudaStream_t>(s);
}

// Records the completion event after the call just made on `stream`.
hmc_plugin_status_t finish_post(hmc_ccl_comm* c, GpuStream stream, const char* call,
                                hmc_ccl_request_t** req) {
  const GpuApi& gpu = c->ctx->gpu;
  GpuEvent ev = nullptr;
  if (!c->spare_events.empty()) {
    ev = c->spare_events.back();
    c->spare_events.pop_back();
  } else if (GpuResult r = gpu.event_create(&ev); r != kGpuSuccess) {
    return gpu_failure(c, GpuApi::kEventCreateCall, r);
  }
  if (GpuResult r = gpu.event_record(ev, stream); r != kGpuSuccess) {
    gpu.event_destroy(ev);
    return gpu_failure(c, GpuApi::kEventRecordCall, r);
  }
  hmc_ccl_request* rq = nullptr;
  if (!c->spare_requests.empty()) {
    rq = c->spare_requests.back();
    c->spare_requests.pop_back();
  } else if (!(rq = new (std::nothrow) hmc_ccl_request)) {
    c->spare_events.push_back(ev);
    return HMC_PLUGIN_ERR_NO_MEMORY;
  }
  rq->comm = c;
  rq->event = ev;
  rq->call = call;
  *req = rq;
  return HMC_PLUGIN_SUCCESS;
}

// ---- slots -----------------------------------------------------------------------------------

hmc_plugin_status_t plugin_init(const hmc_host_services_t* host, hmc_ccl_ctx_t** out) {
  auto* ctx = new (std::nothrow) hmc_ccl_ctx;
  if (!ctx) return HMC_PLUGIN_ERR_NO_MEMORY;
  ctx->host = host;
  ctx->log = hmc::plugin::Log(host);
  const char* lib = host->config_get(host->host_ctx, kLibraryVar);
  std::string nccl_name = lib && *lib ? lib : kLibraryDefault;
  const char* rtlib = host->config_get(host->host_ctx, kRuntimeVar);
  std::string gpu_name = rtlib && *rtlib ? rtlib : "";
  *out = ctx;

  ctx->nccl_lib = dlopen(nccl_name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!ctx->nccl_lib) {
    const char* e = dlerror();
    ctx->unavailable = nccl_name + " not found: " + (e ? e : "dlopen failed");
    return HMC_PLUGIN_SUCCESS;
  }
  std::string missing;
  NcclApi& n = ctx->nccl;
  void* L = ctx->nccl_lib;
  resolve(L, LIBCALL(GetVersion), &n.get_version, &missing);
  resolve(L, LIBCALL(GetUniqueId), &n.get_unique_id, &missing);
  resolve(L, LIBCALL(CommInitRank), &n.comm_init_rank, &missing);
  resolve(L, LIBCALL(CommDestroy), &n.comm_destroy, &missing);
  resolve(L, LIBCALL(CommAbort), &n.comm_abort, &missing);
  resolve(L, LIBCALL(CommGetAsyncError), &n.comm_get_async_error, &missing);
  resolve(L, LIBCALL(GetErrorString), &n.get_error_string, &missing);
  resolve(L, LIBCALL(AllReduce), &n.all_reduce, &missing);
  resolve(L, LIBCALL(AllGather), &n.all_gather, &missing);
  resolve(L, LIBCALL(ReduceScatter), &n.reduce_scatter, &missing);
  resolve(L, LIBCALL(Broadcast), &n.broadcast, &missing);
  resolve(L, LIBCALL(Send), &n.send, &missing);
  resolve(L, LIBCALL(Recv), &n.recv, &missing);
  resolve(L, LIBCALL(GroupStart), &n.group_start, &missing);
  resolve(L, LIBCALL(GroupEnd), &n.group_end, &missing);
  // Optional: NCCL has it from 2.13, and MCCL's releases may not.
  n.get_last_error = reinterpret_cast<PFN_ncclGetLastError>(dlsym(L, LIBCALL(GetLastError)));
  if (!missing.empty()) {
    ctx->unavailable =
        nccl_name + " lacks " + missing + " (an " + kLibraryWord + " too old for this plugin)";
    return HMC_PLUGIN_SUCCESS;
  }
  int code = 0;
  if (n.get_version(&code) != ncclSuccess) {
    ctx->unavailable = nccl_name + ": " LIBCALL(GetVersion) " failed";
    return HMC_PLUGIN_SUCCESS;
  }
  int major = 0, minor = 0, patch = 0;
  decode_version(code, &major, &minor, &patch);
  char text[160];
  std::snprintf(text, sizeof text, "%s, %s %d.%d.%d", nccl_name.c_str(), kLibraryWord, major, minor,
                patch);
  ctx->library = text;

  const bool searched = gpu_name.empty() && std::size(kRuntimeCandidates) > 1;
  if (!gpu_name.empty()) {
    ctx->gpu_lib = dlopen(gpu_name.c_str(), RTLD_NOW | RTLD_LOCAL);
  } else {
    for (int flags : {RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, RTLD_NOW | RTLD_LOCAL}) {
      for (const char* name : kRuntimeCandidates) {
        gpu_name = name;
        if ((ctx->gpu_lib = dlopen(name, flags)) != nullptr) break;
      }
      if (ctx->gpu_lib) break;
    }
  }
  if (!ctx->gpu_lib) {
    const char* e = dlerror();
    if (searched)  // the last one's dlerror
      ctx->unavailable = std::string(kRuntimeWord) + " not found (" + kRuntimeDefault +
                         "): " + (e ? e : "dlopen failed");
    else
      ctx->unavailable =
          gpu_name + " (" + kRuntimeWord + ") not found: " + (e ? e : "dlopen failed");
    return HMC_PLUGIN_SUCCESS;
  }
  ctx->gpu.resolve_all(ctx->gpu_lib, &missing);
  if (!missing.empty()) {
    ctx->unavailable = gpu_name + " lacks " + missing;
    return HMC_PLUGIN_SUCCESS;
  }
  int count = 0;
  if (std::string why = ctx->gpu.start(&count); !why.empty()) {
    ctx->unavailable = why;
    return HMC_PLUGIN_SUCCESS;
  }
  ctx->devices = count;
  ctx->contexts.assign(size_t(count), DeviceHandle{});
  ctx->retained.assign(size_t(count), 0);
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t plugin_finalize(hmc_ccl_ctx_t* ctx) {
  if (!ctx) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  for (size_t d = 0; d < ctx->contexts.size(); ++d)
    if (ctx->retained[d]) ctx->gpu.release(int(d));
  // The libraries stay mapped: NCCL keeps threads of its own that may still be winding down.
  delete ctx;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t plugin_unique_id(hmc_ccl_ctx_t* ctx, void* id, size_t* len) {
  if (!ctx || !id || !len || *len < kUniqueIdBytes) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (ctx->devices == 0) return HMC_PLUGIN_ERR_NO_DEVICE;
  ncclUniqueId uid;
  ncclResult_t r = ctx->nccl.get_unique_id(&uid);
  if (r != ncclSuccess) {
    ctx->log.write(HMC_LOG_WARN, LIBCALL(GetUniqueId) ": %s", ctx->nccl.get_error_string(r));
    return status_of(r);
  }
  std::memcpy(id, uid.internal, kUniqueIdBytes);
  *len = kUniqueIdBytes;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t plugin_comm_create(hmc_ccl_ctx_t* ctx, const void* id, size_t len, int nranks,
                                       int rank, int device, hmc_ccl_comm_t** out) {
  if (!ctx || !id || !out || len != kUniqueIdBytes || nranks < 1 || rank < 0 || rank >= nranks ||
      device < 0 || device >= ctx->devices)
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  DeviceHandle handle{};
  {
    std::lock_guard<std::mutex> lock(ctx->mutex);
    if (!ctx->retained[size_t(device)]) {
      if (!ctx->gpu.retain(device, &ctx->contexts[size_t(device)])) {
        ctx->log.write(HMC_LOG_WARN, "cannot make device %d of %s current", device, kRuntimeWord);
        return HMC_PLUGIN_ERR_INTERNAL;
      }
      ctx->retained[size_t(device)] = 1;
    }
    handle = ctx->contexts[size_t(device)];
  }
  auto* c = new (std::nothrow) hmc_ccl_comm;
  if (!c) return HMC_PLUGIN_ERR_NO_MEMORY;
  c->ctx = ctx;
  c->dev = handle;
  c->rank = rank;
  c->nranks = nranks;
  CurrentContext current(ctx->gpu, handle);
  if (!current.ok()) {
    delete c;
    return HMC_PLUGIN_ERR_INTERNAL;
  }
  if (GpuResult r = ctx->gpu.stream_create(&c->stream); r != kGpuSuccess) {
    ctx->log.write(HMC_LOG_WARN, "%s: %s %d", GpuApi::kStreamCreateCall, GpuApi::kError, r);
    delete c;
    return HMC_PLUGIN_ERR_INTERNAL;
  }
  ncclUniqueId uid;
  std::memcpy(uid.internal, id, kUniqueIdBytes);
  ncclResult_t r = ctx->nccl.comm_init_rank(&c->comm, nranks, uid, rank);
  if (r != ncclSuccess) {
    const char* last = ctx->nccl.get_last_error ? ctx->nccl.get_last_error(nullptr) : nullptr;
    ctx->log.write(HMC_LOG_WARN, LIBCALL(CommInitRank) " (rank %d of %d): %s%s%s", rank, nranks,
                   ctx->nccl.get_error_string(r), last && *last ? ": " : "", last ? last : "");
    ctx->gpu.stream_destroy(c->stream);
    delete c;
    return status_of(r) == HMC_PLUGIN_ERR_INTERNAL ? HMC_PLUGIN_ERR_PEER_LOST : status_of(r);
  }
  *out = c;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t plugin_comm_destroy(hmc_ccl_comm_t* c) {
  if (!c) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  const GpuApi& gpu = c->ctx->gpu;
  {
    CurrentContext current(gpu, c->dev);
    if (!c->aborted) c->ctx->nccl.comm_destroy(c->comm);
    for (GpuEvent ev : c->spare_events) gpu.event_destroy(ev);
    for (hmc_ccl_request* rq : c->spare_requests) delete rq;
    gpu.stream_destroy(c->stream);
  }
  delete c;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t plugin_comm_abort(hmc_ccl_comm_t* c) {
  if (!c) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (c->aborted) return HMC_PLUGIN_SUCCESS;
  CurrentContext current(c->ctx->gpu, c->dev);
  ncclResult_t r = c->ctx->nccl.comm_abort(c->comm);
  c->aborted = true;
  return r == ncclSuccess ? HMC_PLUGIN_SUCCESS : nccl_failure(c, LIBCALL(CommAbort), r);
}

hmc_plugin_status_t plugin_comm_async_error(hmc_ccl_comm_t* c) {
  if (!c) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (c->aborted) return HMC_PLUGIN_ERR_CANCELLED;
  ncclResult_t err = ncclSuccess;
  ncclResult_t r = c->ctx->nccl.comm_get_async_error(c->comm, &err);
  if (r != ncclSuccess) return nccl_failure(c, LIBCALL(CommGetAsyncError), r);
  if (err == ncclSuccess || err == ncclInProgress) return HMC_PLUGIN_SUCCESS;
  return nccl_failure(c, LIBCALL(CommGetAsyncError), err);
}

const char* plugin_comm_error_text(hmc_ccl_comm_t* c) {
  return c ? c->error.c_str() : "";
}

hmc_plugin_status_t plugin_all_reduce(hmc_ccl_comm_t* c, const void* send, void* recv, size_t count,
                                      uint32_t dtype, uint32_t op, void* stream,
                                      hmc_ccl_request_t** req) {
  ncclDataType_t t;
  ncclRedOp_t o;
  if (!c || !req || !map_dtype(dtype, &t) || !map_op(op, &o))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  CurrentContext current(c->ctx->gpu, c->dev);
  GpuStream s = stream_of(c, stream);
  ncclResult_t r = c->ctx->nccl.all_reduce(send, recv, count, t, o, c->comm, lib_stream(s));
  if (r != ncclSuccess) return nccl_failure(c, LIBCALL(AllReduce), r);
  return finish_post(c, s, LIBCALL(AllReduce), req);
}

hmc_plugin_status_t plugin_all_gather(hmc_ccl_comm_t* c, const void* send, void* recv, size_t count,
                                      uint32_t dtype, void* stream, hmc_ccl_request_t** req) {
  ncclDataType_t t;
  if (!c || !req || !map_dtype(dtype, &t)) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  CurrentContext current(c->ctx->gpu, c->dev);
  GpuStream s = stream_of(c, stream);
  ncclResult_t r = c->ctx->nccl.all_gather(send, recv, count, t, c->comm, lib_stream(s));
  if (r != ncclSuccess) return nccl_failure(c, LIBCALL(AllGather), r);
  return finish_post(c, s, LIBCALL(AllGather), req);
}

hmc_plugin_status_t plugin_reduce_scatter(hmc_ccl_comm_t* c, const void* send, void* recv,
                                          size_t count, uint32_t dtype, uint32_t op, void* stream,
                                          hmc_ccl_request_t** req) {
  ncclDataType_t t;
  ncclRedOp_t o;
  if (!c || !req || !map_dtype(dtype, &t) || !map_op(op, &o))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  CurrentContext current(c->ctx->gpu, c->dev);
  GpuStream s = stream_of(c, stream);
  ncclResult_t r = c->ctx->nccl.reduce_scatter(send, recv, count, t, o, c->comm, lib_stream(s));
  if (r != ncclSuccess) return nccl_failure(c, LIBCALL(ReduceScatter), r);
  return finish_post(c, s, LIBCALL(ReduceScatter), req);
}

hmc_plugin_status_t plugin_broadcast(hmc_ccl_comm_t* c, const void* send, void* recv, size_t count,
                                     uint32_t dtype, int root, void* stream,
                                     hmc_ccl_request_t** req) {
  ncclDataType_t t;
  if (!c || !req || !map_dtype(dtype, &t) || root < 0 || root >= c->nranks)
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  CurrentContext current(c->ctx->gpu, c->dev);
  GpuStream s = stream_of(c, stream);
  ncclResult_t r = c->ctx->nccl.broadcast(send, recv, count, t, root, c->comm, lib_stream(s));
  if (r != ncclSuccess) return nccl_failure(c, LIBCALL(Broadcast), r);
  return finish_post(c, s, LIBCALL(Broadcast), req);
}

hmc_plugin_status_t plugin_send_recv(hmc_ccl_comm_t* c, const hmc_ccl_p2p_t* parts, size_t n,
                                     uint32_t dtype, void* stream, hmc_ccl_request_t** req) {
  ncclDataType_t t;
  if (!c || !req || (n && !parts) || !map_dtype(dtype, &t)) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  for (size_t i = 0; i < n; ++i)
    if (parts[i].peer < 0 || parts[i].peer >= c->nranks) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  CurrentContext current(c->ctx->gpu, c->dev);
  GpuStream s = stream_of(c, stream);
  const NcclApi& api = c->ctx->nccl;
  ncclResult_t r = api.group_start();
  if (r != ncclSuccess) return nccl_failure(c, LIBCALL(GroupStart), r);
  for (size_t i = 0; i < n && r == ncclSuccess; ++i) {
    const hmc_ccl_p2p_t& p = parts[i];
    r = p.is_send ? api.send(p.buf, p.count, t, p.peer, c->comm, lib_stream(s))
                  : api.recv(p.buf, p.count, t, p.peer, c->comm, lib_stream(s));
    if (r != ncclSuccess) {
      nccl_failure(c, p.is_send ? LIBCALL(Send) : LIBCALL(Recv), r);
      api.group_end();  // a group must be closed even when a call in it failed
      return status_of(r);
    }
  }
  r = api.group_end();
  if (r != ncclSuccess) return nccl_failure(c, LIBCALL(GroupEnd), r);
  return finish_post(c, s, LIBCALL(GroupEnd) " (send/recv)", req);
}

hmc_plugin_status_t plugin_test(hmc_ccl_request_t* rq, int* done) {
  if (!rq || !done) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  hmc_ccl_comm* c = rq->comm;
  const GpuApi& gpu = c->ctx->gpu;
  GpuResult r = gpu.event_query(rq->event);
  if (r == kGpuNotReady) {
    // A library failure may leave the stream stuck: its asynchronous error says so.
    hmc_plugin_status_t st = plugin_comm_async_error(c);
    if (st == HMC_PLUGIN_SUCCESS) {
      *done = 0;
      return HMC_PLUGIN_SUCCESS;
    }
    c->error = std::string(rq->call) + ": " + c->error;
    gpu.event_destroy(rq->event);
    delete rq;
    *done = 1;
    return st;
  }
  *done = 1;
  if (r == kGpuSuccess) {
    // The event and the request serve the communicator's next collective.
    c->spare_events.push_back(rq->event);
    c->spare_requests.push_back(rq);
    return HMC_PLUGIN_SUCCESS;
  }
  hmc_plugin_status_t st = plugin_comm_async_error(c);
  if (st == HMC_PLUGIN_SUCCESS) st = gpu_failure(c, GpuApi::kEventQueryCall, r);
  c->error = std::string(rq->call) + ": " + c->error;
  gpu.event_destroy(rq->event);
  delete rq;
  return st;
}

const hmc_ccl_plugin_v1_t kTable = {
    HMC_CCL_ABI_HEADER_INIT(hmc_ccl_plugin_v1_t),
    kPluginName,
    "0.1.0",
    kConfigVars,
    kMemIface,
    HMC_CCL_BIT(HMC_CCL_DTYPE_F32) | HMC_CCL_BIT(HMC_CCL_DTYPE_F64) |
        HMC_CCL_BIT(HMC_CCL_DTYPE_F16) | HMC_CCL_BIT(HMC_CCL_DTYPE_BF16) |
        HMC_CCL_BIT(HMC_CCL_DTYPE_I8) | HMC_CCL_BIT(HMC_CCL_DTYPE_U8) |
        HMC_CCL_BIT(HMC_CCL_DTYPE_I32) | HMC_CCL_BIT(HMC_CCL_DTYPE_I64),
    HMC_CCL_BIT(HMC_CCL_OP_SUM) | HMC_CCL_BIT(HMC_CCL_OP_PROD) | HMC_CCL_BIT(HMC_CCL_OP_MIN) |
        HMC_CCL_BIT(HMC_CCL_OP_MAX) | HMC_CCL_BIT(HMC_CCL_OP_AVG),
    plugin_init,
    plugin_finalize,
    hmc::plugin::ccl::ctx_device_count<hmc_ccl_ctx>,
    hmc::plugin::ccl::ctx_unavailable_reason<hmc_ccl_ctx>,
    hmc::plugin::ccl::ctx_library_version<hmc_ccl_ctx>,
    plugin_unique_id,
    plugin_comm_create,
    plugin_comm_destroy,
    plugin_comm_abort,
    plugin_comm_async_error,
    plugin_comm_error_text,
    plugin_all_reduce,
    plugin_all_gather,
    plugin_reduce_scatter,
    plugin_broadcast,
    plugin_send_recv,
    plugin_test,
};

}  // namespace

extern "C" HMC_PLUGIN_EXPORT const hmc_ccl_plugin_v1_t* hmc_ccl_plugin_v1(void) {
  return &kTable;
}
