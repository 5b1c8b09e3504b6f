// The C boundary: validate, convert handles, call the core, catch everything.
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>
#include <string_view>
#include <type_traits>

#include "coll/reduce.h"
#include "context/context.h"
#include "hmc/hmc.h"
#include "net/registration.h"
#include "peer/capabilities.h"
#include "peer/device_memory.h"
#include "util/clock.h"
#include "util/handles.h"
#include "util/hot.h"
#include "util/log.h"
#include "util/status.h"
#include "util/text.h"
#include "xfer/xfer_list.h"

using namespace hmc;

namespace {

#define HMC_TRY try {
#define HMC_CATCH                                                                      \
  }                                                                                    \
  catch (const std::bad_alloc&) {                                                      \
    return fail(HMC_ERR_NO_MEMORY, "{}: out of memory", __func__);                     \
  }                                                                                    \
  catch (const std::exception& e) {                                                    \
    return fail(HMC_ERR_INTERNAL, "{}: unexpected exception: {}", __func__, e.what()); \
  }                                                                                    \
  catch (...) {                                                                        \
    return fail(HMC_ERR_INTERNAL, "{}: unexpected exception", __func__);               \
  }

#define CHECK_NOT_NULL(p)                                                                       \
  do {                                                                                          \
    if (!(p)) return fail(HMC_ERR_INVALID_ARGUMENT, "{}: argument '{}' is NULL", __func__, #p); \
  } while (0)

#define CHECK_HANDLE(h, kind)                                                                   \
  do {                                                                                          \
    if (!(h)) return fail(HMC_ERR_INVALID_ARGUMENT, "{}: argument '{}' is NULL", __func__, #h); \
    if (!Handles::valid((h), HandleKind::kind))                                                 \
      return fail(HMC_ERR_INVALID_HANDLE,                                                       \
                  "{}: '{}' is not a live {} handle (closed, freed or "                         \
                  "never created)",                                                             \
                  __func__, #h, #kind);                                                         \
  } while (0)

// Resolves a request handle into `var`.
#define CHECK_REQUEST(h, var)                                                                 \
  if (!(h)) return fail(HMC_ERR_INVALID_ARGUMENT, "{}: argument '{}' is NULL", __func__, #h); \
  Request* var = RequestTable::lookup(h);                                                     \
  if (!var)                                                                                   \
  return fail(HMC_ERR_INVALID_HANDLE,                                                         \
              "{}: '{}' is not a live request handle (it ended, "                             \
              "or it was never one)",                                                         \
              __func__, #h)

#define CHECK_TIMEOUT(t)                                        \
  do {                                                          \
    if ((t) < -1)                                               \
      return fail(HMC_ERR_INVALID_ARGUMENT,                     \
                  "{}: timeout {} ms is invalid (-1 for the "   \
                  "default, 0 for none, or a positive number)", \
                  __func__, (t));                               \
  } while (0)

Context* ctx_of(hmc_context_t c) {
  return reinterpret_cast<Context*>(c);
}
// Collectives' requests have no peer of their own.
Context* ctx_of_request(const Request* r) {
  return r->peer ? r->peer->ctx : r->owner;
}
Peer* peer_of(hmc_peer_t p) {
  return reinterpret_cast<Peer*>(p);
}
Region* region_of(hmc_region_t r) {
  return reinterpret_cast<Region*>(r);
}
Remote* remote_of(hmc_remote_t r) {
  return reinterpret_cast<Remote*>(r);
}

// Copies text into a fixed-size output field, always terminated; a cut text ends with "...".
template <size_t N>
void copy_str(char (&dst)[N], const std::string& src) {
  copy_cut(dst, N, src);
}

template <typename T>
const T& deref(const T& v) {
  return v;
}
template <typename T>
const T& deref(const std::unique_ptr<T>& v) {
  return *v;
}
template <typename T>
const T& deref(T* v) {
  return *v;
}

hmc_status_t check_struct(uint32_t size, size_t min, const char* func, const char* what) {
  if (size < min)
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: {}->struct_size is {}, expected at least {}", func,
                what, size, min);
  return HMC_SUCCESS;
}

hmc_status_t check_buffer(const void* buf, size_t size, const char* func) {
  if (!buf && size)
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: buf is NULL but size is {}", func, size);
  if (reinterpret_cast<uintptr_t>(buf) + size < reinterpret_cast<uintptr_t>(buf))
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: buf {} + size {} wraps around the address space",
                func, buf, size);
  return HMC_SUCCESS;
}

// --- collectives -------------------------------------------------------------------------------

coll::Communicator* comm_of(hmc_comm_t c) {
  return reinterpret_cast<coll::Communicator*>(c);
}

// Bytes of `count` elements of dtype, refusing unknown datatypes and overflow.
hmc_status_t coll_bytes(uint64_t count, hmc_dtype_t dtype, uint64_t times, const char* func,
                        uint64_t* out) {
  if (!coll::valid_dtype(dtype))
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: datatype {} is not an hmc_dtype_t", func,
                int(dtype));
  uint64_t es = coll::dtype_size(dtype);
  if (count && (times > UINT64_MAX / count || count * times > UINT64_MAX / es))
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: {} x {} elements overflow", func, count, times);
  *out = count * times * es;
  return HMC_SUCCESS;
}

// A known operation, defined on the datatype (the bitwise ones on integers only).
hmc_status_t check_op(hmc_dtype_t dtype, hmc_reduce_op_t op, const char* func) {
  if (!coll::valid_op(op))
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: operation {} is not an hmc_reduce_op_t", func,
                int(op));
  if (!coll::valid_op_for(dtype, op))
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "{}: {} is a bitwise operation, defined on the integer "
                "datatypes only, not on {}",
                func, coll::reduce_op_name(op), coll::dtype_name(dtype));
  return HMC_SUCCESS;
}

// A root that is a rank of a communicator of `size` ranks.
hmc_status_t check_root(int root, int size, const char* func) {
  if (root < 0 || root >= size)
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: root {} is outside 0..{}", func, root, size - 1);
  return HMC_SUCCESS;
}

bool overlap(const void* a, uint64_t alen, const void* b, uint64_t blen) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return alen && blen && x < y + blen && y < x + alen;
}

hmc_status_t post_coll(hmc_comm_t comm, const coll::CollArgs& args, const void* in, void* out,
                       uint64_t out_elements, const char* func, hmc_request_t* req) {
  coll::Communicator* c = comm_of(comm);
  Request* r = nullptr;
  hmc_status_t st = c->owner->collectives().post(c, args, in, out, out_elements, func, &r);
  if (st != HMC_SUCCESS) return st;
  *req = RequestTable::handle(r);
  uint64_t elements = args.count;
  for (uint64_t n : args.send_counts) elements += n;
  const char* name = strncmp(func, "hmc_", 4) == 0 ? func + 4 : func;
  c->owner->coll_metrics().posted(reinterpret_cast<uintptr_t>(*req),
                                  {c->id, name, c->backend_kind.load(std::memory_order_relaxed)},
                                  elements * coll::dtype_size(args.dtype), now_ns());
  return st;
}

// A collective's end as the application sees it, for the metrics: `handle` no longer names a
// live request once test or wait returned its end.
void note_coll_end(Context* ctx, hmc_request_t handle, hmc_status_t st) {
  if (!RequestTable::lookup(handle))
    ctx->coll_metrics().ended(reinterpret_cast<uintptr_t>(handle), st, now_ns());
}

#define CHECK_COLL(comm, req) \
  CHECK_HANDLE(comm, Comm);   \
  CHECK_NOT_NULL(req);        \
  coll::Communicator* c = comm_of(comm)

}  // namespace

extern "C" {

HMC_API hmc_status_t hmc_context_create(const hmc_context_options_t* opts, hmc_context_t* out) {
  HMC_TRY
  CHECK_NOT_NULL(out);
  std::unique_ptr<Context> ctx;
  hmc_status_t st = Context::create(opts, &ctx);
  if (st != HMC_SUCCESS) return st;
  Handles::add(ctx.get(), HandleKind::Context);
  *out = reinterpret_cast<hmc_context_t>(ctx.release());
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_context_destroy(hmc_context_t ctx) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  Handles::remove(ctx);
  delete ctx_of(ctx);
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_progress(hmc_context_t ctx) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  ctx_of(ctx)->progress(true);
  ctx_of(ctx)->drive_incoming();
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_plugin_count(hmc_context_t ctx, int* count) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(count);
  *count = static_cast<int>(ctx_of(ctx)->loader().records().size());
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_plugin_info(hmc_context_t ctx, int index, hmc_plugin_info_t* info) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(info);
  hmc_status_t st = check_struct(info->struct_size, sizeof(hmc_plugin_info_t), __func__, "info");
  if (st != HMC_SUCCESS) return st;
  const auto& recs = ctx_of(ctx)->loader().records();
  if (index < 0 || static_cast<size_t>(index) >= recs.size())
    return fail(HMC_ERR_NOT_FOUND, "hmc_plugin_info: index {} outside 0..{}", index, recs.size());
  const auto& r = deref(recs[index]);
  info->kind = r.kind == plugin::Kind::Device ? HMC_PLUGIN_KIND_DEVICE
               : r.kind == plugin::Kind::Net  ? HMC_PLUGIN_KIND_NET
               : r.kind == plugin::Kind::Ccl  ? HMC_PLUGIN_KIND_CCL
                                              : HMC_PLUGIN_KIND_UNKNOWN;
  copy_str(info->name, r.name);
  copy_str(info->path, r.path);
  info->abi_version = r.abi_version;
  info->loaded = r.loaded ? 1 : 0;
  copy_str(info->reason, r.reason);
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_device_count(hmc_context_t ctx, int* count) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(count);
  *count = static_cast<int>(ctx_of(ctx)->devices().devices().size());
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_device_info(hmc_context_t ctx, int index, hmc_device_info_t* info) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(info);
  hmc_status_t st = check_struct(info->struct_size, sizeof(hmc_device_info_t), __func__, "info");
  if (st != HMC_SUCCESS) return st;
  const auto& devs = ctx_of(ctx)->devices().devices();
  if (index < 0 || static_cast<size_t>(index) >= devs.size())
    return fail(HMC_ERR_NOT_FOUND, "hmc_device_info: index {} outside 0..{}", index, devs.size());
  const Device& d = devs[index];
  copy_str(info->name, d.name);
  copy_str(info->plugin, d.plugin_name);
  copy_str(info->model, d.model);
  copy_str(info->pci_bus_id, d.pci_bus_id);
  memcpy(info->uuid, d.uuid, sizeof info->uuid);
  info->numa_node = d.numa_node;
  info->mem_bytes = d.mem_bytes;
  info->caps = d.caps;
  info->is_host = d.is_host() ? 1 : 0;
  CopyFigures f = ctx_of(ctx)->copy_figures_of(d);
  info->copy_d2h_MBps = f.d2h_MBps;
  info->copy_h2d_MBps = f.h2d_MBps;
  info->copy_d2d_MBps = f.d2d_MBps;
  copy_str(info->copy_basis, f.basis);
  copy_str(info->copy_ways,
           d.is_host() || f.basis.empty() ? "" : same_host_ways(ctx_of(ctx)->connector(), d));
  info->mem_iface = d.mem_iface;
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_device_calibrate(hmc_context_t ctx) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  ctx_of(ctx)->copy_records();
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_net_device_count(hmc_context_t ctx, int* count) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(count);
  *count = static_cast<int>(ctx_of(ctx)->net_devices().size());
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_net_device_info(hmc_context_t ctx, int index,
                                         hmc_net_device_info_t* info) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(info);
  hmc_status_t st =
      check_struct(info->struct_size, sizeof(hmc_net_device_info_t), __func__, "info");
  if (st != HMC_SUCCESS) return st;
  auto devs = ctx_of(ctx)->net_devices();
  if (index < 0 || static_cast<size_t>(index) >= devs.size())
    return fail(HMC_ERR_NOT_FOUND, "hmc_net_device_info: index {} outside 0..{}", index,
                devs.size());
  const NetDevice& d = *devs[index];
  copy_str(info->plugin, d.plugin->name());
  copy_str(info->name, d.name);
  copy_str(info->pci_path, d.pci_path);
  info->bandwidth_MBps = d.props.bandwidth_MBps;
  info->latency_ns = d.props.latency_ns;
  info->mem_kinds = static_cast<uint32_t>(d.props.mem_ifaces);
  info->mem_ifaces = d.props.mem_ifaces;
  info->dmabuf = (d.props.flags & HMC_NET_FLAG_DMABUF) != 0;
  info->nic_port = d.props.nic_port;
  info->nic_guid = d.props.nic_guid;
  copy_str(info->fabric, d.props.fabric ? d.props.fabric : "");
  copy_str(info->link_layer, d.props.link_layer ? d.props.link_layer : "");
  std::string details = d.props.details ? d.props.details : "";
  // A line cut in the middle would read as a wrong value: keep whole lines only.
  if (details.size() >= sizeof info->details) {
    size_t end = details.rfind('\n', sizeof info->details - 1);
    details.resize(end == std::string::npos ? 0 : end);
  }
  copy_str(info->details, details);
  info->rma_mem_ifaces = rma_mem_ifaces(d);
  info->flags = d.props.flags;
  info->max_inflight = d.props.max_inflight;
  info->max_msg_size = d.props.max_msg_size;
  std::vector<path::CalibrationOutcome> outcomes;
  path::Capabilities caps =
      local_capabilities(ctx_of(ctx)->connector(), path::CalibrationMode::LookupOnly, &outcomes);
  info->measured_bandwidth_MBps = 0;
  info->measured_latency_ns = 0;
  copy_str(info->calibration, "");
  for (size_t i = 0; i < caps.net.size(); ++i) {
    if (caps.net[i].key() != d.key()) continue;
    info->measured_bandwidth_MBps = caps.net[i].measured_bandwidth_MBps;
    info->measured_latency_ns = caps.net[i].measured_latency_ns;
    copy_str(info->calibration, outcomes[i].state);
  }
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_net_calibrate(hmc_context_t ctx) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  local_capabilities(ctx_of(ctx)->connector(), path::CalibrationMode::MeasureAll, nullptr);
  return HMC_SUCCESS;
  HMC_CATCH
}

namespace {
// The configuration a call reports: the context's, or with ctx NULL the core's own variables read
// straight from the environment (so that hmc-info --config works when a value is invalid).
hmc_status_t config_of(hmc_context_t ctx, const char* func, std::unique_ptr<Config>* own,
                       const Config** out) {
  if (!ctx) {
    *own = std::make_unique<Config>();
    (*own)->load_from_environment();  // an invalid value still leaves every variable declared
    *out = own->get();
    return HMC_SUCCESS;
  }
  if (!Handles::valid(ctx, HandleKind::Context))
    return fail(HMC_ERR_INVALID_HANDLE, "{}: 'ctx' is not a live Context handle", func);
  *out = &ctx_of(ctx)->config();
  return HMC_SUCCESS;
}
}  // namespace

HMC_API hmc_status_t hmc_config_count(hmc_context_t ctx, int* count) {
  HMC_TRY
  CHECK_NOT_NULL(count);
  std::unique_ptr<Config> own;
  const Config* cfg = nullptr;
  hmc_status_t st = config_of(ctx, __func__, &own, &cfg);
  if (st != HMC_SUCCESS) return st;
  *count = static_cast<int>(cfg->declared().size());
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_config_entry(hmc_context_t ctx, int index, hmc_config_entry_t* out) {
  HMC_TRY
  CHECK_NOT_NULL(out);
  hmc_status_t st = check_struct(out->struct_size, sizeof(hmc_config_entry_t), __func__, "out");
  if (st != HMC_SUCCESS) return st;
  std::unique_ptr<Config> own;
  const Config* cfgp = nullptr;
  if ((st = config_of(ctx, __func__, &own, &cfgp)) != HMC_SUCCESS) return st;
  const Config& cfg = *cfgp;
  const auto& vars = cfg.declared();
  if (index < 0 || static_cast<size_t>(index) >= vars.size())
    return fail(HMC_ERR_NOT_FOUND, "hmc_config_entry: index {} outside 0..{}", index, vars.size());
  const ConfigVar& v = vars[index];
  copy_str(out->name, v.name);
  // Secrets are never handed out, only whether they are set.
  bool secret = v.name == "HMC_AUTH_TOKEN";
  copy_str(out->value, secret ? (cfg.raw(v.name) ? "(set)" : "") : cfg.get(v.name));
  copy_str(out->default_value, v.default_value);
  copy_str(out->help, v.help);
  copy_str(out->owner, v.owner);
  out->is_set = cfg.raw(v.name) ? 1 : 0;
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_mem_alloc(hmc_context_t ctx, const char* device, size_t size, void** ptr) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(device);
  CHECK_NOT_NULL(ptr);
  if (size == 0) return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_mem_alloc: size is 0");
  return ctx_of(ctx)->devices().alloc(device, size, ptr);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_mem_free(hmc_context_t ctx, void* ptr) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(ptr);
  return ctx_of(ctx)->devices().free(ptr);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_mem_copy(hmc_context_t ctx, void* dst, const void* src, size_t size) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  hmc_status_t st;
  if ((st = check_buffer(dst, size, __func__)) != HMC_SUCCESS) return st;
  if ((st = check_buffer(src, size, __func__)) != HMC_SUCCESS) return st;
  if (size == 0) return HMC_SUCCESS;
  return ctx_of(ctx)->devices().copy(dst, src, size);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_mem_register(hmc_context_t ctx, void* addr, size_t size, uint32_t access,
                                      hmc_region_t* region) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(addr);
  CHECK_NOT_NULL(region);
  if (size == 0) return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_mem_register: size is 0");
  hmc_status_t st = check_buffer(addr, size, __func__);
  if (st != HMC_SUCCESS) return st;
  if (access & ~(HMC_ACCESS_REMOTE_READ | HMC_ACCESS_REMOTE_WRITE))
    return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_mem_register: unknown access bits {:#x}",
                access & ~(HMC_ACCESS_REMOTE_READ | HMC_ACCESS_REMOTE_WRITE));
  Region* r = nullptr;
  st = ctx_of(ctx)->regions().register_memory(addr, size, access, &r);
  if (st == HMC_SUCCESS) *region = reinterpret_cast<hmc_region_t>(r);
  return st;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_mem_deregister(hmc_region_t region) {
  HMC_TRY
  CHECK_HANDLE(region, Region);
  Region* r = region_of(region);
  return r->ctx->regions().deregister_memory(r);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_region_pack(hmc_region_t region, void* buf, size_t* len) {
  HMC_TRY
  CHECK_HANDLE(region, Region);
  CHECK_NOT_NULL(len);
  std::vector<uint8_t> packed = pack_region(*region_of(region));
  if (!buf || *len < packed.size()) {
    size_t have = *len;
    *len = packed.size();
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_region_pack: the descriptor needs {} bytes, the "
                "buffer has {}",
                packed.size(), buf ? have : 0);
  }
  memcpy(buf, packed.data(), packed.size());
  *len = packed.size();
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_remote_import(hmc_peer_t peer, const void* desc, size_t len,
                                       hmc_remote_t* remote) {
  HMC_TRY
  CHECK_HANDLE(peer, Peer);
  CHECK_NOT_NULL(desc);
  CHECK_NOT_NULL(remote);
  Peer* p = peer_of(peer);
  Remote* r = nullptr;
  hmc_status_t st = p->ctx->regions().import_remote(p->shared_from_this(), desc, len, &r);
  if (st == HMC_SUCCESS) *remote = reinterpret_cast<hmc_remote_t>(r);
  return st;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_remote_release(hmc_remote_t remote) {
  HMC_TRY
  CHECK_HANDLE(remote, Remote);
  Remote* r = remote_of(remote);
  return r->peer->ctx->regions().release_remote(r);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_remote_size(hmc_remote_t remote, uint64_t* size) {
  HMC_TRY
  CHECK_HANDLE(remote, Remote);
  CHECK_NOT_NULL(size);
  *size = remote_of(remote)->size;
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_address(hmc_context_t ctx, void* buf, size_t* len) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(len);
  std::vector<uint8_t> a = ctx_of(ctx)->address();
  if (!buf || *len < a.size()) {
    size_t have = *len;
    *len = a.size();
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_address: the address needs {} bytes, the buffer "
                "has {}",
                a.size(), buf ? have : 0);
  }
  memcpy(buf, a.data(), a.size());
  *len = a.size();
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_address_from_host(const char* host_port, void* buf, size_t* len) {
  HMC_TRY
  CHECK_NOT_NULL(host_port);
  CHECK_NOT_NULL(len);
  Address addr;
  hmc_status_t st = parse_host_port(host_port, &addr);
  if (st != HMC_SUCCESS) return st;
  std::vector<uint8_t> a = encode_address(addr);
  if (!buf || *len < a.size()) {
    *len = a.size();
    return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_address_from_host: the address needs {} bytes",
                a.size());
  }
  memcpy(buf, a.data(), a.size());
  *len = a.size();
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_connect(hmc_context_t ctx, const void* addr, size_t len, int timeout_ms,
                                 hmc_peer_t* peer) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(addr);
  CHECK_NOT_NULL(peer);
  CHECK_TIMEOUT(timeout_ms);
  Address a;
  hmc_status_t st = decode_address(addr, len, &a);
  if (st != HMC_SUCCESS) return st;
  Context* c = ctx_of(ctx);
  std::shared_ptr<Peer> p;
  st = c->connect(a, c->resolve_timeout(timeout_ms), &p);
  if (st == HMC_SUCCESS) *peer = reinterpret_cast<hmc_peer_t>(p.get());
  return st;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_accept(hmc_context_t ctx, int timeout_ms, hmc_peer_t* peer) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(peer);
  CHECK_TIMEOUT(timeout_ms);
  Context* c = ctx_of(ctx);
  std::shared_ptr<Peer> p;
  hmc_status_t st = c->accept(c->resolve_timeout(timeout_ms), &p);
  if (st == HMC_SUCCESS) *peer = reinterpret_cast<hmc_peer_t>(p.get());
  return st;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_accept_stats(hmc_context_t ctx, hmc_accept_stats_t* stats) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(stats);
  hmc_status_t st = check_struct(stats->struct_size, sizeof(hmc_accept_stats_t), __func__, "stats");
  if (st != HMC_SUCCESS) return st;
  IncomingPeers::Stats s = ctx_of(ctx)->accept_stats();
  stats->pending = s.pending;
  stats->waiting = s.waiting;
  stats->last_failure_status = s.last_failure_status;
  stats->accepted = s.accepted;
  stats->failed = s.failed;
  stats->timed_out = s.timed_out;
  stats->dropped = s.dropped;
  copy_str(stats->last_failure, s.last_failure);
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_peer_close(hmc_peer_t peer) {
  HMC_TRY
  CHECK_HANDLE(peer, Peer);
  Peer* p = peer_of(peer);
  return p->ctx->close_peer(p->shared_from_this());
  HMC_CATCH
}

HMC_API hmc_status_t hmc_peer_info(hmc_peer_t peer, hmc_peer_info_t* info) {
  HMC_TRY
  CHECK_HANDLE(peer, Peer);
  CHECK_NOT_NULL(info);
  hmc_status_t st = check_struct(info->struct_size, sizeof(hmc_peer_info_t), __func__, "info");
  if (st != HMC_SUCCESS) return st;
  Peer* p = peer_of(peer);
  copy_str(info->path, p->choice.key());
  copy_str(info->path_reason, p->choice.reason);
  copy_str(info->remote_host, p->remote.hostname);
  info->same_host = p->same_host ? 1 : 0;
  info->remote_pid = p->remote.pid;
  info->est_bandwidth_MBps = p->choice.bandwidth_MBps;
  info->est_latency_us = p->choice.latency_us;
  info->alive = p->lost ? 0 : 1;
  std::string ipc;
  if (!p->framing.ipc_refused)
    for (const auto& name : p->framing.ipc_plugins) ipc += (ipc.empty() ? "" : ",") + name;
  copy_str(info->device_ipc, ipc);
  info->ipc_messages = p->framing.ipc_messages.load(std::memory_order_relaxed);
  info->staged_transfers = p->framing.staged_transfers.load(std::memory_order_relaxed);
  info->shared_staged_messages = p->framing.shared_messages.load(std::memory_order_relaxed);
  copy_str(info->remote_address, p->address);
  info->direct_transfers = p->framing.direct_transfers.load(std::memory_order_relaxed);
  const path::NetRecord* peer_nd = nullptr;
  const std::string& peer_device =
      p->choice.peer_device.empty() ? p->choice.device : p->choice.peer_device;
  for (const auto& r : p->remote.net)
    if (r.plugin == p->choice.plugin && r.device == peer_device) peer_nd = &r;
  copy_str(info->device_memory,
           describe_device_memory(p->net_device, peer_nd, p->remote.device_count,
                                  p->ctx->devices().devices(),
                                  p->ctx->config().get_bool("HMC_NET_DMABUF")));
  return HMC_SUCCESS;
  HMC_CATCH
}

namespace {
hmc_status_t check_tag(uint64_t tag, const char* func) {
  if (tag >= HMC_TAG_MAX)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "{}: tag {:#x} is reserved (tags must be below "
                "HMC_TAG_MAX)",
                func, tag);
  return HMC_SUCCESS;
}
}  // namespace

HMC_HOT HMC_API hmc_status_t hmc_send(hmc_peer_t peer, const void* buf, size_t size, uint64_t tag,
                                      hmc_request_t* req) {
  HMC_TRY
  CHECK_HANDLE(peer, Peer);
  CHECK_NOT_NULL(req);
  hmc_status_t st;
  if ((st = check_buffer(buf, size, __func__)) != HMC_SUCCESS) return st;
  if ((st = check_tag(tag, __func__)) != HMC_SUCCESS) return st;
  Peer* p = peer_of(peer);
  Request* r = nullptr;
  st = p->ctx->transfers().post_send(p, buf, size, tag, &r);
  if (st == HMC_SUCCESS) *req = RequestTable::handle(r);
  return st;
  HMC_CATCH
}

HMC_HOT HMC_API hmc_status_t hmc_recv(hmc_peer_t peer, void* buf, size_t size, uint64_t tag,
                                      hmc_request_t* req) {
  HMC_TRY
  CHECK_HANDLE(peer, Peer);
  CHECK_NOT_NULL(req);
  hmc_status_t st;
  if ((st = check_buffer(buf, size, __func__)) != HMC_SUCCESS) return st;
  if ((st = check_tag(tag, __func__)) != HMC_SUCCESS) return st;
  Peer* p = peer_of(peer);
  Request* r = nullptr;
  st = p->ctx->transfers().post_recv(p, buf, size, tag, &r);
  if (st == HMC_SUCCESS) *req = RequestTable::handle(r);
  return st;
  HMC_CATCH
}

namespace {
// The bytes of a notification (hmc_put_notify, hmc_xfer_post_notify, hmc_notify_send), checked.
hmc_status_t notify_bytes(const hmc_notify_msg_t& n, const char* what, std::string_view* bytes) {
  if (n.size > HMC_NOTIFY_MAX_BYTES)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "{}: the notification carries {} bytes, more than HMC_NOTIFY_MAX_BYTES ({})", what,
                n.size, HMC_NOTIFY_MAX_BYTES);
  if (n.size && !n.bytes)
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: notify->bytes is NULL with notify->size {}", what,
                n.size);
  *bytes = std::string_view(static_cast<const char*>(n.bytes), n.size);
  return HMC_SUCCESS;
}

// hmc_put and hmc_put_notify, once their handles were checked.
hmc_status_t post_put(hmc_peer_t peer, const void* buf, size_t size, hmc_remote_t remote,
                      uint64_t remote_offset, uint32_t flags, uint64_t notify_value,
                      std::string_view bytes, hmc_request_t* req, const char* what) {
  hmc_status_t st = check_buffer(buf, size, what);
  if (st != HMC_SUCCESS) return st;
  Remote* rm = remote_of(remote);
  if (rm->peer.get() != peer_of(peer))
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: the remote handle was imported for another peer",
                what);
  Request* r = nullptr;
  st = rm->peer->ctx->transfers().post_put(rm, buf, size, remote_offset, flags, notify_value, &r,
                                           bytes);
  if (st == HMC_SUCCESS) *req = RequestTable::handle(r);
  return st;
}

// hmc_xfer_post and hmc_xfer_post_notify, once the list's handle was checked.
hmc_status_t post_list(hmc_xfer_list_t list, uint32_t flags, uint64_t notify_value,
                       std::string_view bytes, hmc_request_t* req, const char* what) {
  const XferList& l = *reinterpret_cast<XferList*>(list);
  // The regions may have gone since the list was made: look before touching them.
  if (!Handles::valid(l.local, HandleKind::Region))
    return fail(HMC_ERR_INVALID_HANDLE,
                "{}: the list's local region was deregistered; prepare a new list", what);
  if (!Handles::valid(l.remote, HandleKind::Remote))
    return fail(HMC_ERR_INVALID_HANDLE,
                "{}: the list's remote region was released; prepare a new list", what);
  Request* r = nullptr;
  hmc_status_t st = l.remote->peer->ctx->transfers().post_list(l, flags, notify_value, &r, bytes);
  if (st == HMC_SUCCESS) *req = RequestTable::handle(r);
  return st;
}
}  // namespace

HMC_API hmc_status_t hmc_put(hmc_peer_t peer, const void* buf, size_t size, hmc_remote_t remote,
                             uint64_t remote_offset, uint32_t flags, uint64_t notify_value,
                             hmc_request_t* req) {
  HMC_TRY
  CHECK_HANDLE(peer, Peer);
  CHECK_HANDLE(remote, Remote);
  CHECK_NOT_NULL(req);
  if (flags & ~HMC_PUT_NOTIFY)
    return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_put: unknown flag bits {:#x}",
                flags & ~HMC_PUT_NOTIFY);
  return post_put(peer, buf, size, remote, remote_offset, flags, notify_value, {}, req, __func__);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_put_notify(hmc_peer_t peer, const void* buf, size_t size,
                                    hmc_remote_t remote, uint64_t remote_offset,
                                    const hmc_notify_msg_t* notify, hmc_request_t* req) {
  HMC_TRY
  CHECK_HANDLE(peer, Peer);
  CHECK_HANDLE(remote, Remote);
  CHECK_NOT_NULL(notify);
  CHECK_NOT_NULL(req);
  std::string_view bytes;
  hmc_status_t st = notify_bytes(*notify, __func__, &bytes);
  if (st != HMC_SUCCESS) return st;
  return post_put(peer, buf, size, remote, remote_offset, HMC_PUT_NOTIFY, notify->value, bytes, req,
                  __func__);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_get(hmc_peer_t peer, void* buf, size_t size, hmc_remote_t remote,
                             uint64_t remote_offset, hmc_request_t* req) {
  HMC_TRY
  CHECK_HANDLE(peer, Peer);
  CHECK_HANDLE(remote, Remote);
  CHECK_NOT_NULL(req);
  hmc_status_t st = check_buffer(buf, size, __func__);
  if (st != HMC_SUCCESS) return st;
  Remote* rm = remote_of(remote);
  if (rm->peer.get() != peer_of(peer))
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_get: the remote handle was imported for another peer");
  Request* r = nullptr;
  st = rm->peer->ctx->transfers().post_get(rm, buf, size, remote_offset, &r);
  if (st == HMC_SUCCESS) *req = RequestTable::handle(r);
  return st;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_xfer_prepare(hmc_region_t local, hmc_remote_t remote, hmc_xfer_op_t op,
                                      const hmc_xfer_desc_t* descs, size_t count,
                                      hmc_xfer_list_t* list) {
  HMC_TRY
  CHECK_HANDLE(local, Region);
  CHECK_HANDLE(remote, Remote);
  CHECK_NOT_NULL(list);
  if (op != HMC_XFER_WRITE && op != HMC_XFER_READ)
    return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_xfer_prepare: unknown op {}", static_cast<int>(op));
  if (count == 0) return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_xfer_prepare: count is 0");
  CHECK_NOT_NULL(descs);
  Region* lr = region_of(local);
  Remote* rm = remote_of(remote);
  if (lr->ctx != rm->peer->ctx)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_xfer_prepare: the local region and the remote belong to different contexts");
  std::unique_ptr<XferList> made;
  hmc_status_t st = make_xfer_list(lr, rm, op, descs, count, &made);
  if (st != HMC_SUCCESS) return st;
  rm->peer->ctx->transfers().vectorize_list(*made);
  XferList* l = made.release();
  Handles::add(l, HandleKind::XferList);
  *list = reinterpret_cast<hmc_xfer_list_t>(l);
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_xfer_post(hmc_xfer_list_t list, uint32_t flags, uint64_t notify_value,
                                   hmc_request_t* req) {
  HMC_TRY
  CHECK_HANDLE(list, XferList);
  CHECK_NOT_NULL(req);
  if (flags & ~HMC_XFER_NOTIFY)
    return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_xfer_post: unknown flag bits {:#x}",
                flags & ~HMC_XFER_NOTIFY);
  return post_list(list, flags, notify_value, {}, req, __func__);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_xfer_post_notify(hmc_xfer_list_t list, const hmc_notify_msg_t* notify,
                                          hmc_request_t* req) {
  HMC_TRY
  CHECK_HANDLE(list, XferList);
  CHECK_NOT_NULL(notify);
  CHECK_NOT_NULL(req);
  std::string_view bytes;
  hmc_status_t st = notify_bytes(*notify, __func__, &bytes);
  if (st != HMC_SUCCESS) return st;
  return post_list(list, HMC_XFER_NOTIFY, notify->value, bytes, req, __func__);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_notify_send(hmc_peer_t peer, const hmc_notify_msg_t* notify,
                                     hmc_request_t* req) {
  HMC_TRY
  CHECK_HANDLE(peer, Peer);
  CHECK_NOT_NULL(notify);
  CHECK_NOT_NULL(req);
  std::string_view bytes;
  hmc_status_t st = notify_bytes(*notify, __func__, &bytes);
  if (st != HMC_SUCCESS) return st;
  Peer* p = peer_of(peer);
  Request* r = nullptr;
  st = p->ctx->transfers().post_notify(p, notify->value, bytes, &r);
  if (st == HMC_SUCCESS) *req = RequestTable::handle(r);
  return st;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_xfer_release(hmc_xfer_list_t list) {
  HMC_TRY
  CHECK_HANDLE(list, XferList);
  Handles::remove(list);
  delete reinterpret_cast<XferList*>(list);
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_notify_wait(hmc_context_t ctx, int timeout_ms, hmc_notification_t* out) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(out);
  CHECK_TIMEOUT(timeout_ms);
  size_t size = 0;
  return ctx_of(ctx)->transfers().notify_wait(timeout_ms, out, nullptr, 0, &size, __func__);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_notify_wait_msg(hmc_context_t ctx, int timeout_ms, hmc_notification_t* out,
                                         void* buf, size_t capacity, size_t* size) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(out);
  CHECK_NOT_NULL(size);
  CHECK_TIMEOUT(timeout_ms);
  if (capacity && !buf)
    return fail(HMC_ERR_INVALID_ARGUMENT, "hmc_notify_wait_msg: buf is NULL with capacity {}",
                capacity);
  return ctx_of(ctx)->transfers().notify_wait(timeout_ms, out, buf, capacity, size, __func__);
  HMC_CATCH
}

HMC_HOT HMC_API hmc_status_t hmc_request_test(hmc_request_t req, size_t* bytes) {
  HMC_TRY
  CHECK_REQUEST(req, r);
  Context* ctx = ctx_of_request(r);
  if (r->op != Op::Coll) return ctx->transfers().test(r, bytes);
  hmc_status_t st = ctx->transfers().test(r, bytes);
  note_coll_end(ctx, req, st);
  return st;
  HMC_CATCH
}

HMC_HOT HMC_API hmc_status_t hmc_request_wait(hmc_request_t req, int timeout_ms, size_t* bytes) {
  HMC_TRY
  CHECK_REQUEST(req, r);
  CHECK_TIMEOUT(timeout_ms);
  Context* ctx = ctx_of_request(r);
  if (r->op != Op::Coll) return ctx->transfers().wait(r, timeout_ms, bytes);
  hmc_status_t st = ctx->transfers().wait(r, timeout_ms, bytes);
  note_coll_end(ctx, req, st);
  return st;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_request_cancel(hmc_request_t req) {
  HMC_TRY
  CHECK_REQUEST(req, r);
  if (r->op == Op::Coll) return ctx_of_request(r)->collectives().cancel(r);
  return ctx_of_request(r)->transfers().cancel(r);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_log_set_handler(hmc_log_handler_t handler, void* user) {
  HMC_TRY
  log::set_handler(handler, user);
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_metrics_dump(hmc_context_t ctx, char* buf, size_t* len) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(len);
  const std::string text = ctx_of(ctx)->metrics_text();
  const size_t need = text.size() + 1;
  if (!buf) {
    *len = need;
    return HMC_SUCCESS;
  }
  if (*len < need) {
    size_t have = *len;
    *len = need;
    return fail(HMC_ERR_TRUNCATED, "hmc_metrics_dump: the metrics need {} bytes, the buffer has {}",
                need, have);
  }
  memcpy(buf, text.c_str(), need);
  *len = need;
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_context_event_fd(hmc_context_t ctx, int* fd) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(fd);
  if (!ctx_of(ctx)->progress_thread())
    return fail(HMC_ERR_NOT_SUPPORTED,
                "hmc_context_event_fd: this context has no progress thread, so nothing would "
                "make the descriptor readable while the application sleeps; call hmc_progress "
                "instead, or create the context with the progress thread");
  return ctx_of(ctx)->transfers().events().fd(fd);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_context_event_clear(hmc_context_t ctx) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  return ctx_of(ctx)->transfers().events().clear();
  HMC_CATCH
}

HMC_API hmc_status_t hmc_comm_create(hmc_context_t ctx, const hmc_comm_options_t* opts,
                                     hmc_comm_t* comm) {
  HMC_TRY
  CHECK_HANDLE(ctx, Context);
  CHECK_NOT_NULL(comm);
  coll::Communicator* c = nullptr;
  hmc_status_t st = ctx_of(ctx)->collectives().create(ctx_of(ctx)->config(), opts, &c);
  if (st == HMC_SUCCESS) *comm = reinterpret_cast<hmc_comm_t>(c);
  return st;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_comm_destroy(hmc_comm_t comm) {
  HMC_TRY
  CHECK_HANDLE(comm, Comm);
  coll::Communicator* c = comm_of(comm);
  return c->owner->collectives().destroy(c);
  HMC_CATCH
}

HMC_API hmc_status_t hmc_comm_rank(hmc_comm_t comm, int* rank) {
  HMC_TRY
  CHECK_HANDLE(comm, Comm);
  CHECK_NOT_NULL(rank);
  *rank = comm_of(comm)->rank;
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_comm_size(hmc_comm_t comm, int* size) {
  HMC_TRY
  CHECK_HANDLE(comm, Comm);
  CHECK_NOT_NULL(size);
  *size = comm_of(comm)->size;
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_comm_member_info(hmc_comm_t comm, int rank, hmc_comm_member_info_t* info) {
  HMC_TRY
  CHECK_HANDLE(comm, Comm);
  CHECK_NOT_NULL(info);
  coll::Communicator* c = comm_of(comm);
  if (rank < 0 || rank >= c->size)
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: rank {} is outside 0..{}", __func__, rank,
                c->size - 1);
  if (info->struct_size < sizeof(hmc_comm_member_info_t))
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: info->struct_size is {}, expected {}", __func__,
                info->struct_size, sizeof(hmc_comm_member_info_t));
  const coll::Member& m = c->members[size_t(rank)];
  hmc_comm_member_info_t out{};
  out.struct_size = sizeof out;
  out.host = c->shape.host_of_rank[size_t(rank)];
  out.pid = m.pid;
  // host_id is "<hostname>/<boot id>" (control/socket.h): the name is what people read.
  std::string name = m.host_id.substr(0, m.host_id.find('/'));
  snprintf(out.hostname, sizeof out.hostname, "%s", name.c_str());
  snprintf(out.vendor, sizeof out.vendor, "%s", m.vendor.c_str());
  *info = out;
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_comm_last_backend(hmc_comm_t comm, char* buf, size_t len) {
  HMC_TRY
  CHECK_HANDLE(comm, Comm);
  CHECK_NOT_NULL(buf);
  if (len == 0) return fail(HMC_ERR_INVALID_ARGUMENT, "{}: len is 0", __func__);
  coll::Communicator* c = comm_of(comm);
  std::string text = c->owner->collectives().last_backend(c);
  snprintf(buf, len, "%s", text.c_str());
  return HMC_SUCCESS;
  HMC_CATCH
}

HMC_API hmc_status_t hmc_comm_split(hmc_comm_t comm, int color, int key, hmc_comm_t* out) {
  HMC_TRY
  CHECK_HANDLE(comm, Comm);
  CHECK_NOT_NULL(out);
  coll::Communicator* c = comm_of(comm);
  coll::Communicator* child = nullptr;
  hmc_status_t st = c->owner->collectives().split(c, color < 0 ? -1 : color, key, &child);
  if (st == HMC_SUCCESS) *out = reinterpret_cast<hmc_comm_t>(child);
  return st;
  HMC_CATCH
}

}  // extern "C"

namespace {

hmc_status_t barrier_on(hmc_comm_t comm, void* stream, const char* fn, hmc_request_t* req) {
  HMC_TRY
  CHECK_COLL(comm, req);
  (void)c;
  coll::CollArgs args;
  args.kind = coll::CollKind::Barrier;
  args.stream = stream;
  return post_coll(comm, args, nullptr, nullptr, 0, fn, req);
  HMC_CATCH
}

hmc_status_t broadcast_on(hmc_comm_t comm, void* buf, size_t count, hmc_dtype_t dtype, int root,
                          void* stream, const char* fn, hmc_request_t* req) {
  HMC_TRY
  CHECK_COLL(comm, req);
  uint64_t bytes;
  hmc_status_t st;
  if ((st = coll_bytes(count, dtype, 1, fn, &bytes)) != HMC_SUCCESS) return st;
  if ((st = check_buffer(buf, bytes, fn)) != HMC_SUCCESS) return st;
  if ((st = check_root(root, c->size, fn)) != HMC_SUCCESS) return st;
  coll::CollArgs args;
  args.kind = coll::CollKind::Broadcast;
  args.dtype = dtype;
  args.count = count;
  args.root = root;
  args.in_place = true;
  args.stream = stream;
  return post_coll(comm, args, buf, buf, 0, fn, req);
  HMC_CATCH
}

hmc_status_t all_gather_on(hmc_comm_t comm, const void* send, void* recv, size_t count,
                           hmc_dtype_t dtype, void* stream, const char* fn, hmc_request_t* req) {
  HMC_TRY
  CHECK_COLL(comm, req);
  uint64_t block, total;
  hmc_status_t st;
  if ((st = coll_bytes(count, dtype, 1, fn, &block)) != HMC_SUCCESS) return st;
  if ((st = coll_bytes(count, dtype, uint64_t(c->size), fn, &total)) != HMC_SUCCESS) return st;
  if ((st = check_buffer(recv, total, fn)) != HMC_SUCCESS) return st;
  coll::CollArgs args;
  args.kind = coll::CollKind::AllGather;
  args.dtype = dtype;
  args.count = count;
  args.in_place = block && send == static_cast<uint8_t*>(recv) + uint64_t(c->rank) * block;
  if (!args.in_place) {
    if ((st = check_buffer(send, block, fn)) != HMC_SUCCESS) return st;
    if (overlap(send, block, recv, total))
      return fail(HMC_ERR_INVALID_ARGUMENT,
                  "{}: send overlaps recv but is not this rank's block "
                  "of it (the in-place form)",
                  fn);
  }
  args.stream = stream;
  return post_coll(comm, args, send, recv, 0, fn, req);
  HMC_CATCH
}

hmc_status_t all_to_all_on(hmc_comm_t comm, const void* send, void* recv, size_t count,
                           hmc_dtype_t dtype, void* stream, const char* fn, hmc_request_t* req) {
  HMC_TRY
  CHECK_COLL(comm, req);
  uint64_t total;
  hmc_status_t st;
  if ((st = coll_bytes(count, dtype, uint64_t(c->size), fn, &total)) != HMC_SUCCESS) return st;
  if ((st = check_buffer(send, total, fn)) != HMC_SUCCESS) return st;
  if ((st = check_buffer(recv, total, fn)) != HMC_SUCCESS) return st;
  if (overlap(send, total, recv, total))
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: send and recv overlap (all-to-all is not in place)",
                fn);
  coll::CollArgs args;
  args.kind = coll::CollKind::AllToAll;
  args.dtype = dtype;
  args.count = count;
  args.stream = stream;
  return post_coll(comm, args, send, recv, 0, fn, req);
  HMC_CATCH
}

hmc_status_t all_to_allv_on(hmc_comm_t comm, const void* send, const size_t* send_counts,
                            const size_t* send_displs, void* recv, const size_t* recv_counts,
                            const size_t* recv_displs, hmc_dtype_t dtype, void* stream,
                            const char* fn, hmc_request_t* req) {
  HMC_TRY
  CHECK_COLL(comm, req);
  CHECK_NOT_NULL(send_counts);
  CHECK_NOT_NULL(send_displs);
  CHECK_NOT_NULL(recv_counts);
  CHECK_NOT_NULL(recv_displs);
  hmc_status_t st;
  coll::CollArgs args;
  args.kind = coll::CollKind::AllToAllV;
  args.dtype = dtype;
  uint64_t send_end = 0, recv_end = 0;
  for (int p = 0; p < c->size; ++p) {
    uint64_t end_s, end_r;
    if ((st = coll_bytes(send_counts[p] + send_displs[p], dtype, 1, fn, &end_s)) != HMC_SUCCESS ||
        (st = coll_bytes(recv_counts[p] + recv_displs[p], dtype, 1, fn, &end_r)) != HMC_SUCCESS)
      return st;
    if (send_counts[p] + send_displs[p] < send_displs[p] ||
        recv_counts[p] + recv_displs[p] < recv_displs[p])
      return fail(HMC_ERR_INVALID_ARGUMENT, "{}: count + displacement of rank {} overflows", fn, p);
    if (send_counts[p]) send_end = std::max(send_end, end_s);
    if (recv_counts[p]) recv_end = std::max(recv_end, end_r);
    args.send_counts.push_back(send_counts[p]);
    args.send_displs.push_back(send_displs[p]);
    args.recv_counts.push_back(recv_counts[p]);
    args.recv_displs.push_back(recv_displs[p]);
  }
  if ((st = check_buffer(send, send_end, fn)) != HMC_SUCCESS) return st;
  if ((st = check_buffer(recv, recv_end, fn)) != HMC_SUCCESS) return st;
  if (overlap(send, send_end, recv, recv_end))
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "{}: send and recv overlap (all-to-all-v is not in "
                "place)",
                fn);
  args.stream = stream;
  return post_coll(comm, args, send, recv, 0, fn, req);
  HMC_CATCH
}

hmc_status_t reduce_scatter_on(hmc_comm_t comm, const void* send, void* recv, size_t count,
                               hmc_dtype_t dtype, hmc_reduce_op_t op, void* stream, const char* fn,
                               hmc_request_t* req) {
  HMC_TRY
  CHECK_COLL(comm, req);
  uint64_t block, total;
  hmc_status_t st;
  if ((st = coll_bytes(count, dtype, 1, fn, &block)) != HMC_SUCCESS) return st;
  if ((st = coll_bytes(count, dtype, uint64_t(c->size), fn, &total)) != HMC_SUCCESS) return st;
  if ((st = check_op(dtype, op, fn)) != HMC_SUCCESS) return st;
  if ((st = check_buffer(send, total, fn)) != HMC_SUCCESS) return st;
  if ((st = check_buffer(recv, block, fn)) != HMC_SUCCESS) return st;
  coll::CollArgs args;
  args.kind = coll::CollKind::ReduceScatter;
  args.dtype = dtype;
  args.op = op;
  args.count = count;
  args.in_place = block && recv == static_cast<const uint8_t*>(send) + uint64_t(c->rank) * block;
  if (!args.in_place && overlap(send, total, recv, block))
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "{}: recv overlaps send but is not this rank's block of "
                "it (the in-place form)",
                fn);
  args.stream = stream;
  return post_coll(comm, args, send, recv, count, fn, req);
  HMC_CATCH
}

hmc_status_t all_reduce_on(hmc_comm_t comm, const void* send, void* recv, size_t count,
                           hmc_dtype_t dtype, hmc_reduce_op_t op, void* stream, const char* fn,
                           hmc_request_t* req) {
  HMC_TRY
  CHECK_COLL(comm, req);
  (void)c;
  uint64_t bytes;
  hmc_status_t st;
  if ((st = coll_bytes(count, dtype, 1, fn, &bytes)) != HMC_SUCCESS) return st;
  if ((st = check_op(dtype, op, fn)) != HMC_SUCCESS) return st;
  if ((st = check_buffer(send, bytes, fn)) != HMC_SUCCESS) return st;
  if ((st = check_buffer(recv, bytes, fn)) != HMC_SUCCESS) return st;
  coll::CollArgs args;
  args.kind = coll::CollKind::AllReduce;
  args.dtype = dtype;
  args.op = op;
  args.count = count;
  args.in_place = send == recv;
  if (!args.in_place && overlap(send, bytes, recv, bytes))
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "{}: send and recv overlap but are not the same buffer "
                "(the in-place form)",
                fn);
  args.stream = stream;
  return post_coll(comm, args, send, recv, count, fn, req);
  HMC_CATCH
}

hmc_status_t reduce_on(hmc_comm_t comm, const void* send, void* recv, size_t count,
                       hmc_dtype_t dtype, hmc_reduce_op_t op, int root, void* stream,
                       const char* fn, hmc_request_t* req) {
  HMC_TRY
  CHECK_COLL(comm, req);
  uint64_t bytes;
  hmc_status_t st;
  if ((st = coll_bytes(count, dtype, 1, fn, &bytes)) != HMC_SUCCESS) return st;
  if ((st = check_op(dtype, op, fn)) != HMC_SUCCESS) return st;
  if ((st = check_root(root, c->size, fn)) != HMC_SUCCESS) return st;
  if ((st = check_buffer(send, bytes, fn)) != HMC_SUCCESS) return st;
  const bool at_root = c->rank == root;
  if (at_root && (st = check_buffer(recv, bytes, fn)) != HMC_SUCCESS) return st;
  coll::CollArgs args;
  args.kind = coll::CollKind::Reduce;
  args.dtype = dtype;
  args.op = op;
  args.count = count;
  args.root = root;
  args.in_place = at_root && send == recv;
  if (at_root && !args.in_place && overlap(send, bytes, recv, bytes))
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "{}: send and recv overlap but are not the same buffer "
                "(the in-place form)",
                fn);
  args.stream = stream;
  // Only the root's recv is written: the others' is not the collective's to touch.
  return post_coll(comm, args, send, at_root ? recv : nullptr, at_root ? count : 0, fn, req);
  HMC_CATCH
}

}  // namespace

extern "C" {

HMC_API hmc_status_t hmc_barrier(hmc_comm_t comm, hmc_request_t* req) {
  return barrier_on(comm, nullptr, __func__, req);
}

HMC_API hmc_status_t hmc_barrier_on_stream(hmc_comm_t comm, void* stream, hmc_request_t* req) {
  return barrier_on(comm, stream, __func__, req);
}

HMC_API hmc_status_t hmc_broadcast(hmc_comm_t comm, void* buf, size_t count, hmc_dtype_t dtype,
                                   int root, hmc_request_t* req) {
  return broadcast_on(comm, buf, count, dtype, root, nullptr, __func__, req);
}

HMC_API hmc_status_t hmc_broadcast_on_stream(hmc_comm_t comm, void* buf, size_t count,
                                             hmc_dtype_t dtype, int root, void* stream,
                                             hmc_request_t* req) {
  return broadcast_on(comm, buf, count, dtype, root, stream, __func__, req);
}

HMC_API hmc_status_t hmc_all_gather(hmc_comm_t comm, const void* send, void* recv, size_t count,
                                    hmc_dtype_t dtype, hmc_request_t* req) {
  return all_gather_on(comm, send, recv, count, dtype, nullptr, __func__, req);
}

HMC_API hmc_status_t hmc_all_gather_on_stream(hmc_comm_t comm, const void* send, void* recv,
                                              size_t count, hmc_dtype_t dtype, void* stream,
                                              hmc_request_t* req) {
  return all_gather_on(comm, send, recv, count, dtype, stream, __func__, req);
}

HMC_API hmc_status_t hmc_all_to_all(hmc_comm_t comm, const void* send, void* recv, size_t count,
                                    hmc_dtype_t dtype, hmc_request_t* req) {
  return all_to_all_on(comm, send, recv, count, dtype, nullptr, __func__, req);
}

HMC_API hmc_status_t hmc_all_to_all_on_stream(hmc_comm_t comm, const void* send, void* recv,
                                              size_t count, hmc_dtype_t dtype, void* stream,
                                              hmc_request_t* req) {
  return all_to_all_on(comm, send, recv, count, dtype, stream, __func__, req);
}

HMC_API hmc_status_t hmc_all_to_allv(hmc_comm_t comm, const void* send, const size_t* send_counts,
                                     const size_t* send_displs, void* recv,
                                     const size_t* recv_counts, const size_t* recv_displs,
                                     hmc_dtype_t dtype, hmc_request_t* req) {
  return all_to_allv_on(comm, send, send_counts, send_displs, recv, recv_counts, recv_displs, dtype,
                        nullptr, __func__, req);
}

HMC_API hmc_status_t hmc_all_to_allv_on_stream(hmc_comm_t comm, const void* send,
                                               const size_t* send_counts, const size_t* send_displs,
                                               void* recv, const size_t* recv_counts,
                                               const size_t* recv_displs, hmc_dtype_t dtype,
                                               void* stream, hmc_request_t* req) {
  return all_to_allv_on(comm, send, send_counts, send_displs, recv, recv_counts, recv_displs, dtype,
                        stream, __func__, req);
}

HMC_API hmc_status_t hmc_reduce_scatter(hmc_comm_t comm, const void* send, void* recv, size_t count,
                                        hmc_dtype_t dtype, hmc_reduce_op_t op, hmc_request_t* req) {
  return reduce_scatter_on(comm, send, recv, count, dtype, op, nullptr, __func__, req);
}

HMC_API hmc_status_t hmc_reduce_scatter_on_stream(hmc_comm_t comm, const void* send, void* recv,
                                                  size_t count, hmc_dtype_t dtype,
                                                  hmc_reduce_op_t op, void* stream,
                                                  hmc_request_t* req) {
  return reduce_scatter_on(comm, send, recv, count, dtype, op, stream, __func__, req);
}

HMC_API hmc_status_t hmc_all_reduce(hmc_comm_t comm, const void* send, void* recv, size_t count,
                                    hmc_dtype_t dtype, hmc_reduce_op_t op, hmc_request_t* req) {
  return all_reduce_on(comm, send, recv, count, dtype, op, nullptr, __func__, req);
}

HMC_API hmc_status_t hmc_all_reduce_on_stream(hmc_comm_t comm, const void* send, void* recv,
                                              size_t count, hmc_dtype_t dtype, hmc_reduce_op_t op,
                                              void* stream, hmc_request_t* req) {
  return all_reduce_on(comm, send, recv, count, dtype, op, stream, __func__, req);
}

HMC_API hmc_status_t hmc_reduce(hmc_comm_t comm, const void* send, void* recv, size_t count,
                                hmc_dtype_t dtype, hmc_reduce_op_t op, int root,
                                hmc_request_t* req) {
  return reduce_on(comm, send, recv, count, dtype, op, root, nullptr, __func__, req);
}

HMC_API hmc_status_t hmc_reduce_on_stream(hmc_comm_t comm, const void* send, void* recv,
                                          size_t count, hmc_dtype_t dtype, hmc_reduce_op_t op,
                                          int root, void* stream, hmc_request_t* req) {
  return reduce_on(comm, send, recv, count, dtype, op, root, stream, __func__, req);
}

}  // extern "C"
