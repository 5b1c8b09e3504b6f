/*
 * Template of an hmc device plugin (ABI v1). Copy this directory, then fill in the places marked
 * "TO DO". As it stands the plugin is complete and valid: it looks for a vendor runtime library,
 * finds none (or finds it but discovers no devices yet), and reports 0 devices with a clear
 * reason. That is how every device plugin must behave on a machine without its hardware: init
 * succeeds, device_count answers 0, unavailable_reason says why.
 *
 * Rules that matter (sdk/include/hmc/plugin/common.h and device.h have the details):
 *  - Export exactly one symbol, hmc_device_plugin_v1 (hmc_add_plugin() hides everything else).
 *  - Never link the vendor runtime: dlopen it in init, so the plugin loads everywhere.
 *  - Read options only through host->config_get, and declare each in config_vars below, named
 *    HMC_<PLUGIN>_<NAME>.
 *  - Log through host->log; never print to stdout/stderr yourself.
 *  - Slots may be called from several threads at once: make them thread-safe.
 *  - Whoever allocates frees; set outputs only on success.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmc/plugin/device.h"

/* TO DO: your plugin's name (equal to NAME in CMakeLists.txt) and version. */
#define PLUGIN_NAME "template"
#define PLUGIN_VERSION "0.1.0"
/* TO DO: the variable naming your runtime library, and its default soname. */
#define RUNTIME_LIB_VAR "HMC_TEMPLATE_RUNTIME_LIBRARY"
#define RUNTIME_LIB_DEFAULT "libmyaccel.so.1"

static const hmc_config_var_t config_vars[] = {
    {RUNTIME_LIB_VAR, RUNTIME_LIB_DEFAULT, "vendor runtime library the template plugin dlopens"},
    {NULL, NULL, NULL}};

/* Everything the plugin knows, owned by one context (created by init, destroyed by finalize). */
struct hmc_device_ctx {
  const hmc_host_services_t* host;
  void* runtime; /* dlopen handle of the vendor runtime, or NULL */
  int device_count;
  char unavailable[512]; /* why device_count is 0 */
  /* TO DO: the runtime's function pointers (dlsym'd in init), per-device state. */
};

/* TO DO: your streams and events wrap the runtime's. */
struct hmc_device_stream {
  hmc_device_ctx_t* ctx;
};
struct hmc_device_event {
  hmc_device_ctx_t* ctx;
};

static void plugin_log(const hmc_host_services_t* host, int level, const char* message) {
  if (host->log_enabled(host->host_ctx, level)) host->log(host->host_ctx, level, message);
}

/* ---- lifetime ------------------------------------------------------------------------------ */

static hmc_plugin_status_t dev_init(const hmc_host_services_t* host, hmc_device_ctx_t** out) {
  if (!host || !out) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* A core older or newer than this ABI would have been refused by the loader already; a plugin
   * that needs a newer core feature checks host->core_abi_max here. */
  hmc_device_ctx_t* ctx = calloc(1, sizeof *ctx);
  if (!ctx) return HMC_PLUGIN_ERR_NO_MEMORY;
  ctx->host = host;

  const char* lib = host->config_get(host->host_ctx, RUNTIME_LIB_VAR);
  if (!lib || !*lib) lib = RUNTIME_LIB_DEFAULT;
  ctx->runtime = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!ctx->runtime) {
    /* Not an error: no runtime means no devices. */
    const char* err = dlerror();
    snprintf(ctx->unavailable, sizeof ctx->unavailable, "runtime library not available: %s",
             err ? err : lib);
  } else {
    /* TO DO: dlsym the runtime's entry points, initialise it, count devices into
     * ctx->device_count, and fill ctx->unavailable when there are none ("driver too old",
     * "no devices visible: check CUDA_VISIBLE_DEVICES" ...). */
    ctx->device_count = 0;
    snprintf(ctx->unavailable, sizeof ctx->unavailable,
             "%s loaded, but this template plugin does not discover devices yet", lib);
  }
  if (ctx->device_count == 0) plugin_log(host, HMC_LOG_INFO, ctx->unavailable);
  *out = ctx;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t dev_finalize(hmc_device_ctx_t* ctx) {
  if (!ctx) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: free what is still allocated, destroy streams/events, shut the runtime down. */
  if (ctx->runtime) dlclose(ctx->runtime);
  free(ctx);
  return HMC_PLUGIN_SUCCESS;
}

/* ---- devices ------------------------------------------------------------------------------- */

static hmc_plugin_status_t dev_count(hmc_device_ctx_t* ctx, int* count) {
  if (!ctx || !count) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  *count = ctx->device_count;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t dev_info(hmc_device_ctx_t* ctx, int dev, hmc_device_props_t* info) {
  if (!ctx || !info || dev < 0 || dev >= ctx->device_count) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: fill every field that fits in info->hdr.struct_size (check with HMC_ABI_HAS_FIELD):
   * name, pci_bus_id, uuid, numa_node, mem_bytes, caps (HMC_DEVICE_CAP_*: only what the optional
   * slots below really implement), ipc_handle_size, copy_bandwidth_MBps. */
  return HMC_PLUGIN_ERR_INTERNAL;
}

static const char* dev_unavailable_reason(hmc_device_ctx_t* ctx) {
  return ctx && ctx->device_count == 0 ? ctx->unavailable : NULL;
}

static const char* dev_runtime_version(hmc_device_ctx_t* ctx) {
  /* TO DO: ask the runtime ("MyAccel driver 3.2"); NULL when no runtime was found. */
  return NULL;
}

/* ---- memory -------------------------------------------------------------------------------- */

static hmc_plugin_status_t dev_mem_alloc(hmc_device_ctx_t* ctx, int dev, size_t size, void** ptr) {
  if (!ctx || !ptr || dev < 0 || dev >= ctx->device_count) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: allocate device memory; HMC_PLUGIN_ERR_NO_MEMORY when it cannot be satisfied. */
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}

static hmc_plugin_status_t dev_mem_free(hmc_device_ctx_t* ctx, void* ptr) {
  /* TO DO: free memory from dev_mem_alloc; HMC_PLUGIN_ERR_INVALID_ARGUMENT for anything else. */
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}

static hmc_plugin_status_t dev_ptr_query(hmc_device_ctx_t* ctx, const void* ptr,
                                         hmc_device_ptr_info_t* info) {
  if (!ctx || !HMC_ABI_HAS_FIELD(info, hmc_device_ptr_info_t, owned))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: ask the runtime whether ptr is device or pinned memory of this plugin, and fill
   * device, base, size and is_host. Without devices nothing is ours. */
  info->owned = 0;
  return HMC_PLUGIN_SUCCESS;
}

/* ---- streams, copies, events ---------------------------------------------------------------- */

static hmc_plugin_status_t dev_stream_create(hmc_device_ctx_t* ctx, int dev,
                                             hmc_device_stream_t** s) {
  if (!ctx || !s || dev < 0 || dev >= ctx->device_count) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  return HMC_PLUGIN_ERR_NOT_SUPPORTED; /* TO DO */
}

static hmc_plugin_status_t dev_stream_destroy(hmc_device_stream_t* s) {
  if (!s) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  free(s); /* TO DO: destroy the runtime's stream first */
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t dev_copy_async(hmc_device_stream_t* s, void* dst, const void* src,
                                          size_t size, hmc_copy_kind_t kind) {
  if (!s) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  return HMC_PLUGIN_ERR_NOT_SUPPORTED; /* TO DO: enqueue, never wait */
}

static hmc_plugin_status_t dev_event_create(hmc_device_ctx_t* ctx, int dev,
                                            hmc_device_event_t** ev) {
  if (!ctx || !ev || dev < 0 || dev >= ctx->device_count) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  return HMC_PLUGIN_ERR_NOT_SUPPORTED; /* TO DO */
}

static hmc_plugin_status_t dev_event_destroy(hmc_device_event_t* ev) {
  if (!ev) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  free(ev); /* TO DO: destroy the runtime's event first */
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t dev_event_record(hmc_device_event_t* ev, hmc_device_stream_t* s) {
  if (!ev || !s) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  return HMC_PLUGIN_ERR_NOT_SUPPORTED; /* TO DO */
}

static hmc_plugin_status_t dev_event_query(hmc_device_event_t* ev) {
  if (!ev) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  return HMC_PLUGIN_ERR_NOT_SUPPORTED; /* TO DO: SUCCESS, IN_PROGRESS, or the copy's error */
}

/* ---- the table ------------------------------------------------------------------------------ */

static const hmc_device_plugin_v1_t plugin_table = {
    .hdr = HMC_ABI_HEADER_INIT(hmc_device_plugin_v1_t),
    .name = PLUGIN_NAME,
    .vendor = "Example Vendor", /* TO DO */
    .version = PLUGIN_VERSION,
    .config_vars = config_vars,
    /* required */
    .init = dev_init,
    .finalize = dev_finalize,
    .device_count = dev_count,
    .device_info = dev_info,
    .unavailable_reason = dev_unavailable_reason,
    .runtime_version = dev_runtime_version,
    .mem_alloc = dev_mem_alloc,
    .mem_free = dev_mem_free,
    .ptr_query = dev_ptr_query,
    .stream_create = dev_stream_create,
    .stream_destroy = dev_stream_destroy,
    .copy_async = dev_copy_async,
    .event_create = dev_event_create,
    .event_destroy = dev_event_destroy,
    .event_record = dev_event_record,
    .event_query = dev_event_query,
    /* optional: TO DO, set the ones you implement and announce them in hmc_device_props_t.caps
     * (host_alloc/host_free, host_register/host_unregister, ipc_export/ipc_open/ipc_close,
     * dmabuf_export). A NULL slot means "not supported". */
    /* TO DO: the interface of your devices' memory, as net plugins know it (hmc/plugin/common.h;
     * a new vendor's value is added there). */
    .mem_iface = HMC_MEM_IFACE_CUDA,
};

HMC_PLUGIN_EXPORT const hmc_device_plugin_v1_t* hmc_device_plugin_v1(void) {
  return &plugin_table;
}
