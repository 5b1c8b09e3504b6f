/*
 * One source for every plugin the loader tests use: good ones and deliberately broken ones, each
 * built into its own shared object with compile-time toggles (see CMakeLists.txt here).
 *
 * Kind of code (exactly one):
 *   TP_NET / TP_DEVICE       build a net / device plugin table and entry
 * Identity:
 *   TP_NAME="x"              name in the table (TP_TABLE_NAME overrides it, for bad names)
 *   TP_VAR_PREFIX="HMC_TP_X_" prefix of the declared variables PROBE_FILE and OPTION
 *   TP_VERSION="test"        version text
 * Breakage:
 *   TP_NO_ENTRY              export no entry symbol
 *   TP_USE_HELPER            (with TP_NO_ENTRY) link a helper library that defines the entry
 *   TP_HELPER                build that helper: the entry plus tp_helper_marker()
 *   TP_ENTRY_NULL            the entry returns NULL
 *   TP_ABI=n                 hdr.abi_version
 *   TP_V1_ENTRY              (net) export the previous ABI's entry, hmc_net_plugin_v1, instead
 *   TP_SHORT_TABLE           hdr.struct_size ends before the last required slots (too small)
 *   TP_MIN_TABLE             (net) hdr.struct_size ends right after the last required slot: valid,
 *                            and the optional slots the static table still holds must be ignored
 *   TP_NULL_ACCEPT           the required slot accept is NULL
 *   TP_INIT_FAIL             init logs an error and fails
 *   TP_INIT_NO_DEVICE        init logs a reason and answers HMC_PLUGIN_ERR_NO_DEVICE
 *   TP_RMA_NO_IPUT           the net device claims HMC_NET_FLAG_RMA but iput is NULL
 *   TP_RMA_HOST_BY_POINTER   the net device declares host memory in rma_mem_ifaces
 *   TP_NET_FLAGS=n           flags of the net device (default HMC_NET_FLAG_TAGGED)
 *   TP_BAD_VAR               a config variable whose name lacks the HMC_ prefix
 *   TP_CCL                   build a ccl plugin table and entry (collectives are refused: the
 *                            table is for the loader's checks)
 *   TP_CCL_NO_LIBRARY        (ccl) no vendor library found: 0 devices and a reason
 *   TP_CCL_IFACE=n           (ccl) mem_iface (default HMC_MEM_IFACE_CUDA)
 *   TP_CCL_DTYPES=n          (ccl) the dtypes mask (default f32 and i32)
 *   TP_NULL_TEST             (ccl) the required slot test is NULL
 *
 * Good plugins report what init received from the host through a probe file: when the variable
 * <prefix>PROBE_FILE is set, init writes "key=value" lines to it and finalize appends "finalize".
 * When <prefix>OPTION is "read-undeclared", init also reads a variable it did not declare.
 */
#include <stdio.h>
#include <string.h>

#include "hmc/plugin/ccl.h"
#include "hmc/plugin/device.h"
#include "hmc/plugin/net.h"

#ifndef TP_NAME
#error "TP_NAME must be defined"
#endif
#ifndef TP_TABLE_NAME
#define TP_TABLE_NAME TP_NAME
#endif
#ifndef TP_VAR_PREFIX
#error "TP_VAR_PREFIX must be defined"
#endif
#ifndef TP_VERSION
#define TP_VERSION "test"
#endif
#ifndef TP_ABI
#ifdef TP_NET
#define TP_ABI HMC_NET_ABI_VERSION
#elif defined(TP_CCL)
#define TP_ABI HMC_CCL_ABI_VERSION
#else
#define TP_ABI HMC_PLUGIN_ABI_VERSION
#endif
#endif
#ifndef TP_NET_FLAGS
#define TP_NET_FLAGS HMC_NET_FLAG_TAGGED
#endif
#if defined(TP_NET) + defined(TP_DEVICE) + defined(TP_CCL) != 1
#error "define exactly one of TP_NET, TP_DEVICE and TP_CCL"
#endif

/* ---- what init saw -------------------------------------------------------------------------- */

static const hmc_host_services_t* g_host;
static char g_probe_path[4096];

static const hmc_config_var_t tp_vars[] = {
#ifdef TP_BAD_VAR
    {"TP_BADVAR_OPTION", "", "a variable without the HMC_ prefix"},
#endif
    {TP_VAR_PREFIX "PROBE_FILE", "", "test only: where init writes what it received"},
    {TP_VAR_PREFIX "OPTION", "dflt", "test only: an option init reads and reports"},
    {NULL, NULL, NULL}};

static void tp_log(int level, const char* message) {
  if (g_host && g_host->log_enabled(g_host->host_ctx, level))
    g_host->log(g_host->host_ctx, level, message);
}

static void tp_probe_init(const hmc_host_services_t* host) {
  g_host = host;
  g_probe_path[0] = '\0';
  const char* path = host->config_get(host->host_ctx, TP_VAR_PREFIX "PROBE_FILE");
  const char* option = host->config_get(host->host_ctx, TP_VAR_PREFIX "OPTION");
  if (option && strcmp(option, "read-undeclared") == 0) { /* twice: the host warns once */
    host->config_get(host->host_ctx, TP_VAR_PREFIX "UNDECLARED");
    host->config_get(host->host_ctx, TP_VAR_PREFIX "UNDECLARED");
  }
  uint64_t t0 = host->now_ns(host->host_ctx);
  uint64_t t1 = host->now_ns(host->host_ctx);
  char msg[256];
  snprintf(msg, sizeof msg, "initialised (option=%s)", option ? option : "(unset)");
  tp_log(HMC_LOG_INFO, msg);
  if (!path) return;
  snprintf(g_probe_path, sizeof g_probe_path, "%s", path);
  FILE* f = fopen(g_probe_path, "w");
  if (!f) return;
  fprintf(f, "name=%s\n", TP_NAME);
  fprintf(f, "option=%s\n", option ? option : "(null)");
  fprintf(f, "timeout_ms=%u\n", (unsigned)host->timeout_ms);
  fprintf(f, "abi=%u..%u\n", (unsigned)host->core_abi_min, (unsigned)host->core_abi_max);
  fprintf(f, "hdr_size=%u\n", (unsigned)host->hdr.struct_size);
  fprintf(f, "clock=%s\n", t0 > 0 && t1 >= t0 ? "ok" : "bad");
  fprintf(f, "log_enabled_error=%d\n", host->log_enabled(host->host_ctx, HMC_LOG_ERROR));
  fclose(f);
}

static void tp_probe_finalize(void) {
  if (g_probe_path[0]) {
    FILE* f = fopen(g_probe_path, "a");
    if (f) {
      fputs("finalize\n", f);
      fclose(f);
    }
  }
  g_host = NULL;
}

/* Init, shared by both kinds: the failure toggles act here. */
static hmc_plugin_status_t tp_init_common(const hmc_host_services_t* host) {
  tp_probe_init(host);
#ifdef TP_INIT_FAIL
  tp_log(HMC_LOG_INFO, "probing /dev/hmc-test0");
  tp_log(HMC_LOG_ERROR, "cannot open /dev/hmc-test0: Permission denied");
  return HMC_PLUGIN_ERR_INTERNAL;
#elif defined(TP_INIT_NO_DEVICE)
  tp_log(HMC_LOG_INFO, "no test NIC on this host");
  return HMC_PLUGIN_ERR_NO_DEVICE;
#else
  return HMC_PLUGIN_SUCCESS;
#endif
}

#ifdef TP_USE_HELPER
int tp_helper_marker(void); /* defined by the helper library, which also defines the entry */
#endif
#ifdef TP_HELPER
HMC_PLUGIN_EXPORT int tp_helper_marker(void) {
  return 42;
}
#endif

static int tp_marker(void) {
#ifdef TP_USE_HELPER
  return tp_helper_marker();
#else
  return 42;
#endif
}

/* ---- net ----------------------------------------------------------------------------------- */
#ifdef TP_NET

struct hmc_net_ctx {
  int unused;
};
static struct hmc_net_ctx g_net_ctx;

static hmc_plugin_status_t tp_net_init(const hmc_host_services_t* host, hmc_net_ctx_t** ctx) {
  hmc_plugin_status_t st = tp_init_common(host);
  if (st == HMC_PLUGIN_SUCCESS) *ctx = &g_net_ctx;
  return st;
}
static hmc_plugin_status_t tp_net_finalize(hmc_net_ctx_t* ctx) {
  tp_probe_finalize();
  return ctx == &g_net_ctx ? HMC_PLUGIN_SUCCESS : HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
static hmc_plugin_status_t tp_device_count(hmc_net_ctx_t* ctx, int* count) {
  *count = tp_marker() == 42 ? 1 : 0;
  return HMC_PLUGIN_SUCCESS;
}
static hmc_plugin_status_t tp_device_props(hmc_net_ctx_t* ctx, int dev, hmc_net_device_props_t* p) {
  if (dev != 0 || !HMC_ABI_HAS_FIELD(p, hmc_net_device_props_t, mem_ifaces))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  p->name = "fake0";
  p->pci_path = NULL;
  p->bandwidth_MBps = 1000;
  p->latency_ns = 1000;
  p->mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
#ifdef TP_RMA_NO_IPUT
  p->flags = HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_RMA;
#else
  p->flags = TP_NET_FLAGS;
#endif
  p->max_inflight = 0;
  p->max_msg_size = 0;
#ifdef TP_RMA_HOST_BY_POINTER
  if (HMC_ABI_HAS_FIELD(p, hmc_net_device_props_t, rma_mem_ifaces))
    p->rma_mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
#endif
  return HMC_PLUGIN_SUCCESS;
}
/* Data-path slots: present so the table is valid; the loader tests never call them. */
static hmc_plugin_status_t tp_listen(hmc_net_ctx_t* c, int d, void* h, size_t* l,
                                     hmc_net_listener_t** o) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
#ifndef TP_NULL_ACCEPT
static hmc_plugin_status_t tp_accept(hmc_net_listener_t* l, hmc_net_ep_t** ep) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
#endif
static hmc_plugin_status_t tp_close_listener(hmc_net_listener_t* l) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_connect(hmc_net_ctx_t* c, int d, const void* h, size_t l,
                                      hmc_net_ep_t** ep) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_ep_ready(hmc_net_ep_t* ep) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_close_ep(hmc_net_ep_t* ep) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_test(hmc_net_request_t* r, int* done, size_t* bytes) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_reg_mr(hmc_net_ctx_t* c, int dev, const hmc_net_mem_desc_t* m,
                                     hmc_net_mr_t** mr, void* rkey, size_t* rkey_len) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_dereg_mr(hmc_net_ctx_t* c, hmc_net_mr_t* mr) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_isend(hmc_net_ep_t* ep, const void* b, size_t n, hmc_net_mr_t* mr,
                                    uint64_t tag, hmc_net_request_t** r) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_irecv(hmc_net_ep_t* ep, void* b, size_t n, hmc_net_mr_t* mr,
                                    uint64_t tag, hmc_net_request_t** r) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_rkey_unpack(hmc_net_ep_t* ep, const void* k, size_t n,
                                          hmc_net_rkey_t** o) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_rkey_release(hmc_net_rkey_t* k) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_iget(hmc_net_ep_t* ep, void* b, size_t n, hmc_net_mr_t* mr,
                                   uint64_t a, hmc_net_rkey_t* k, hmc_net_request_t** r) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
#ifndef TP_RMA_NO_IPUT
static hmc_plugin_status_t tp_iput(hmc_net_ep_t* ep, const void* b, size_t n, hmc_net_mr_t* mr,
                                   uint64_t a, hmc_net_rkey_t* k, hmc_net_request_t** r) {
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
#endif

#if defined(TP_SHORT_TABLE)
#define TP_STRUCT_SIZE offsetof(hmc_net_plugin_v2_t, listen)
#elif defined(TP_MIN_TABLE)
#define TP_STRUCT_SIZE offsetof(hmc_net_plugin_v2_t, reg_mr)
#else
#define TP_STRUCT_SIZE sizeof(hmc_net_plugin_v2_t)
#endif

static const hmc_net_plugin_v2_t tp_table = {
    .hdr = {(uint32_t)(TP_STRUCT_SIZE), TP_ABI},
    .name = TP_TABLE_NAME,
    .version = TP_VERSION,
    .config_vars = tp_vars,
    .init = tp_net_init,
    .finalize = tp_net_finalize,
    .device_count = tp_device_count,
    .device_props = tp_device_props,
    .listen = tp_listen,
#ifdef TP_NULL_ACCEPT
    .accept = NULL,
#else
    .accept = tp_accept,
#endif
    .close_listener = tp_close_listener,
    .connect = tp_connect,
    .ep_ready = tp_ep_ready,
    .close_ep = tp_close_ep,
    .test = tp_test,
    .reg_mr = tp_reg_mr,
    .dereg_mr = tp_dereg_mr,
    .isend = tp_isend,
    .irecv = tp_irecv,
    .rkey_unpack = tp_rkey_unpack,
    .rkey_release = tp_rkey_release,
#ifdef TP_RMA_NO_IPUT
    .iput = NULL,
#else
    .iput = tp_iput,
#endif
    .iget = tp_iget,
};

/* Keeps the table referenced (and the compiler quiet) when no entry is built; hidden. */
const void* tp_table_address(void) {
  return &tp_table;
}

#if defined(TP_V1_ENTRY)
HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v1(void) {
  return &tp_table;
}
#elif !defined(TP_NO_ENTRY)
HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
#ifdef TP_ENTRY_NULL
  return NULL;
#else
  return &tp_table;
#endif
}
#endif
#endif /* TP_NET */

/* ---- device -------------------------------------------------------------------------------- */
#ifdef TP_DEVICE

struct hmc_device_ctx {
  int unused;
};
static struct hmc_device_ctx g_dev_ctx;

static hmc_plugin_status_t tp_dev_init(const hmc_host_services_t* host, hmc_device_ctx_t** ctx) {
  hmc_plugin_status_t st = tp_init_common(host);
  if (st == HMC_PLUGIN_SUCCESS) *ctx = &g_dev_ctx;
  return st;
}
static hmc_plugin_status_t tp_dev_finalize(hmc_device_ctx_t* ctx) {
  tp_probe_finalize();
  return ctx == &g_dev_ctx ? HMC_PLUGIN_SUCCESS : HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
static hmc_plugin_status_t tp_dev_count(hmc_device_ctx_t* ctx, int* count) {
  *count = tp_marker() == 42 ? 0 : 1;
  return HMC_PLUGIN_SUCCESS;
}
static hmc_plugin_status_t tp_dev_info(hmc_device_ctx_t* ctx, int dev, hmc_device_props_t* info) {
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT; /* there are no devices */
}
static const char* tp_unavailable(hmc_device_ctx_t* ctx) {
  return "no fake accelerator (test plugin)";
}
static const char* tp_runtime(hmc_device_ctx_t* ctx) {
  return NULL;
}
static hmc_plugin_status_t tp_mem_alloc(hmc_device_ctx_t* c, int d, size_t n, void** p) {
  return HMC_PLUGIN_ERR_NO_DEVICE;
}
static hmc_plugin_status_t tp_mem_free(hmc_device_ctx_t* c, void* p) {
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
static hmc_plugin_status_t tp_ptr_query(hmc_device_ctx_t* c, const void* p,
                                        hmc_device_ptr_info_t* i) {
  if (!HMC_ABI_HAS_FIELD(i, hmc_device_ptr_info_t, owned)) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  i->owned = 0;
  return HMC_PLUGIN_SUCCESS;
}
static hmc_plugin_status_t tp_stream_create(hmc_device_ctx_t* c, int d, hmc_device_stream_t** s) {
  return HMC_PLUGIN_ERR_NO_DEVICE;
}
static hmc_plugin_status_t tp_stream_destroy(hmc_device_stream_t* s) {
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
static hmc_plugin_status_t tp_copy_async(hmc_device_stream_t* s, void* d, const void* src, size_t n,
                                         hmc_copy_kind_t k) {
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
static hmc_plugin_status_t tp_event_create(hmc_device_ctx_t* c, int d, hmc_device_event_t** e) {
  return HMC_PLUGIN_ERR_NO_DEVICE;
}
static hmc_plugin_status_t tp_event_destroy(hmc_device_event_t* e) {
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
static hmc_plugin_status_t tp_event_record(hmc_device_event_t* e, hmc_device_stream_t* s) {
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
static hmc_plugin_status_t tp_event_query(hmc_device_event_t* e) {
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}

#if defined(TP_SHORT_TABLE)
#define TP_STRUCT_SIZE offsetof(hmc_device_plugin_v1_t, mem_alloc)
#else
#define TP_STRUCT_SIZE sizeof(hmc_device_plugin_v1_t)
#endif

static const hmc_device_plugin_v1_t tp_table = {
    .hdr = {(uint32_t)(TP_STRUCT_SIZE), TP_ABI},
    .name = TP_TABLE_NAME,
    .vendor = "hmc tests",
    .version = TP_VERSION,
    .config_vars = tp_vars,
    .init = tp_dev_init,
    .finalize = tp_dev_finalize,
    .device_count = tp_dev_count,
    .device_info = tp_dev_info,
    .unavailable_reason = tp_unavailable,
    .runtime_version = tp_runtime,
    .mem_alloc = tp_mem_alloc,
    .mem_free = tp_mem_free,
    .ptr_query = tp_ptr_query,
    .stream_create = tp_stream_create,
    .stream_destroy = tp_stream_destroy,
    .copy_async = tp_copy_async,
    .event_create = tp_event_create,
    .event_destroy = tp_event_destroy,
    .event_record = tp_event_record,
    .event_query = tp_event_query,
};

const void* tp_table_address(void) {
  return &tp_table;
}

#ifndef TP_NO_ENTRY
HMC_PLUGIN_EXPORT const hmc_device_plugin_v1_t* hmc_device_plugin_v1(void) {
#ifdef TP_ENTRY_NULL
  return NULL;
#else
  return &tp_table;
#endif
}
#endif
#endif /* TP_DEVICE */

/* ---- ccl ------------------------------------------------------------------------------------ */
#ifdef TP_CCL

#ifndef TP_CCL_IFACE
#define TP_CCL_IFACE HMC_MEM_IFACE_CUDA
#endif
#ifndef TP_CCL_DTYPES
#define TP_CCL_DTYPES (HMC_CCL_BIT(HMC_CCL_DTYPE_F32) | HMC_CCL_BIT(HMC_CCL_DTYPE_I32))
#endif

struct hmc_ccl_ctx {
  int unused;
};
static struct hmc_ccl_ctx g_ccl_ctx;

static hmc_plugin_status_t tp_ccl_init(const hmc_host_services_t* host, hmc_ccl_ctx_t** ctx) {
  hmc_plugin_status_t st = tp_init_common(host);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  *ctx = &g_ccl_ctx;
  return tp_marker() == 42 ? HMC_PLUGIN_SUCCESS : HMC_PLUGIN_ERR_INTERNAL;
}
static hmc_plugin_status_t tp_ccl_finalize(hmc_ccl_ctx_t* ctx) {
  (void)ctx;
  tp_probe_finalize();
  return HMC_PLUGIN_SUCCESS;
}
static hmc_plugin_status_t tp_ccl_count(hmc_ccl_ctx_t* ctx, int* count) {
  (void)ctx;
#ifdef TP_CCL_NO_LIBRARY
  *count = 0;
#else
  *count = 2;
#endif
  return HMC_PLUGIN_SUCCESS;
}
static const char* tp_ccl_unavailable(hmc_ccl_ctx_t* ctx) {
  (void)ctx;
#ifdef TP_CCL_NO_LIBRARY
  return "libtestccl.so.1 not found";
#else
  return NULL;
#endif
}
static const char* tp_ccl_library(hmc_ccl_ctx_t* ctx) {
  (void)ctx;
#ifdef TP_CCL_NO_LIBRARY
  return NULL;
#else
  return "libtestccl.so.1, TestCCL 1.2.3";
#endif
}
static hmc_plugin_status_t tp_ccl_unique_id(hmc_ccl_ctx_t* ctx, void* id, size_t* len) {
  (void)ctx, (void)id, (void)len;
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_ccl_comm_create(hmc_ccl_ctx_t* ctx, const void* id, size_t len,
                                              int nranks, int rank, int device,
                                              hmc_ccl_comm_t** comm) {
  (void)ctx, (void)id, (void)len, (void)nranks, (void)rank, (void)device, (void)comm;
  return HMC_PLUGIN_ERR_NOT_SUPPORTED;
}
static hmc_plugin_status_t tp_ccl_comm_op(hmc_ccl_comm_t* comm) {
  (void)comm;
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
static const char* tp_ccl_error_text(hmc_ccl_comm_t* comm) {
  (void)comm;
  return "";
}
static hmc_plugin_status_t tp_ccl_reduce(hmc_ccl_comm_t* c, const void* s, void* r, size_t n,
                                         uint32_t t, uint32_t op, void* st, hmc_ccl_request_t** q) {
  (void)c, (void)s, (void)r, (void)n, (void)t, (void)op, (void)st, (void)q;
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
static hmc_plugin_status_t tp_ccl_gather(hmc_ccl_comm_t* c, const void* s, void* r, size_t n,
                                         uint32_t t, void* st, hmc_ccl_request_t** q) {
  (void)c, (void)s, (void)r, (void)n, (void)t, (void)st, (void)q;
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
static hmc_plugin_status_t tp_ccl_bcast(hmc_ccl_comm_t* c, const void* s, void* r, size_t n,
                                        uint32_t t, int root, void* st, hmc_ccl_request_t** q) {
  (void)c, (void)s, (void)r, (void)n, (void)t, (void)root, (void)st, (void)q;
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
static hmc_plugin_status_t tp_ccl_send_recv(hmc_ccl_comm_t* c, const hmc_ccl_p2p_t* p, size_t n,
                                            uint32_t t, void* st, hmc_ccl_request_t** q) {
  (void)c, (void)p, (void)n, (void)t, (void)st, (void)q;
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
#ifndef TP_NULL_TEST
static hmc_plugin_status_t tp_ccl_test(hmc_ccl_request_t* req, int* done) {
  (void)req, (void)done;
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}
#endif

#if defined(TP_SHORT_TABLE)
#define TP_STRUCT_SIZE offsetof(hmc_ccl_plugin_v1_t, all_reduce)
#else
#define TP_STRUCT_SIZE sizeof(hmc_ccl_plugin_v1_t)
#endif

static const hmc_ccl_plugin_v1_t tp_table = {
    .hdr = {(uint32_t)(TP_STRUCT_SIZE), TP_ABI},
    .name = TP_TABLE_NAME,
    .version = TP_VERSION,
    .config_vars = tp_vars,
    .mem_iface = TP_CCL_IFACE,
    .dtypes = TP_CCL_DTYPES,
    .ops = HMC_CCL_BIT(HMC_CCL_OP_SUM),
    .init = tp_ccl_init,
    .finalize = tp_ccl_finalize,
    .device_count = tp_ccl_count,
    .unavailable_reason = tp_ccl_unavailable,
    .library_version = tp_ccl_library,
    .unique_id = tp_ccl_unique_id,
    .comm_create = tp_ccl_comm_create,
    .comm_destroy = tp_ccl_comm_op,
    .comm_abort = tp_ccl_comm_op,
    .comm_async_error = tp_ccl_comm_op,
    .comm_error_text = tp_ccl_error_text,
    .all_reduce = tp_ccl_reduce,
    .all_gather = tp_ccl_gather,
    .reduce_scatter = tp_ccl_reduce,
    .broadcast = tp_ccl_bcast,
    .send_recv = tp_ccl_send_recv,
#ifndef TP_NULL_TEST
    .test = tp_ccl_test,
#endif
};

const void* tp_table_address(void) {
  return &tp_table;
}

#ifndef TP_NO_ENTRY
HMC_PLUGIN_EXPORT const hmc_ccl_plugin_v1_t* hmc_ccl_plugin_v1(void) {
#ifdef TP_ENTRY_NULL
  return NULL;
#else
  return &tp_table;
#endif
}
#endif
#endif /* TP_CCL */
