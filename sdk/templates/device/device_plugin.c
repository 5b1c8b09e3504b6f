/*
 * Template of an hmc device plugin (ABI v1). Copy this directory, then fill in the places marked
 * "TO DO". As it stands the plugin is complete and valid: it looks for a vendor runtime library,
 * finds none (or finds it but discovers no devices yet), and reports 0 devices with a clear
 * reason. That is how every device plugin must behave on a machine without its hardware: init
 * succeeds, device_count answers 0, unavailable_reason says why.
 *
 * With HMC_TEMPLATE_EMULATED_DEVICES=N it drives N devices of a stand-in runtime instead (the
 * section marked "STAND-IN RUNTIME"): "device memory" in host memory the core must not touch,
 * and streams whose copies a thread of their own performs in order, completing after
 * copy_async has returned, as a DMA engine does. It shows the asynchronous contract end to end
 * (hmc-plugin-check exercises it) and is what a vendor replaces by calls into its runtime.
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
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmc/plugin/device.h"

/* TO DO: your plugin's name (equal to NAME in CMakeLists.txt) and version. */
#ifndef PLUGIN_NAME
#define PLUGIN_NAME "template"
#endif
#define PLUGIN_VERSION "0.1.0"
/* TO DO: the variable naming your runtime library, and its default soname. */
#define RUNTIME_LIB_VAR "HMC_TEMPLATE_RUNTIME_LIBRARY"
#define RUNTIME_LIB_DEFAULT "libmyaccel.so.1"
#define EMULATE_VAR "HMC_TEMPLATE_EMULATED_DEVICES" /* delete with the stand-in runtime */
#define MAX_EMULATED 8

/* Deliberate bugs, for the checker's own tests only (tests/plugin builds this file once per bug,
 * with -DTEMPLATE_BREAK=n, and expects hmc-plugin-check to name the rule each breaks). Delete. */
#ifndef TEMPLATE_BREAK
#define TEMPLATE_BREAK 0
#endif
#define BREAK_REDUCE_TAIL 1      /* reduce leaves the last element as it was */
#define BREAK_REDUCE_ANY_DTYPE 2 /* reduce accepts an unknown dtype (and does nothing) */

static const hmc_config_var_t config_vars[] = {
    {RUNTIME_LIB_VAR, RUNTIME_LIB_DEFAULT, "vendor runtime library the template plugin dlopens"},
    {EMULATE_VAR, "0",
     "template plugin: drive this many devices of its stand-in runtime (0 to 8; 0: look for the "
     "runtime library)"},
    {NULL, NULL, NULL}};

/* ---- STAND-IN RUNTIME: replace with calls into your runtime --------------------------------
 * Allocations are host memory, kept in a list so that ptr_query can tell them. A stream is a
 * queue served by a thread: copies run there in order, and an event recorded on the stream is
 * a marker the thread reaches once every copy before it ended. */
struct allocation {
  void* ptr;
  size_t size;
  int dev;
  struct allocation* next;
};
struct job {
  void* dst; /* a copy: dst, src, size; a marker: event and generation; a reduction: dst, src,
                src2, count (size), dtype and op */
  const void* src;
  const void* src2;
  size_t size;
  uint32_t dtype, op;
  int reduce;
  hmc_device_event_t* event;
  uint64_t generation;
  struct job* next;
};

/* Everything the plugin knows, owned by one context (created by init, destroyed by finalize). */
struct hmc_device_ctx {
  const hmc_host_services_t* host;
  void* runtime; /* dlopen handle of the vendor runtime, or NULL */
  int device_count;
  char unavailable[512]; /* why device_count is 0 */
  /* TO DO: the runtime's function pointers (dlsym'd in init), per-device state. */
  int emulated; /* the stand-in runtime drives the devices */
  pthread_mutex_t alloc_lock;
  struct allocation* allocations;
};

/* TO DO: your streams and events wrap the runtime's. */
struct hmc_device_stream {
  hmc_device_ctx_t* ctx;
  pthread_t worker;
  pthread_mutex_t lock;
  pthread_cond_t work;
  struct job *head, *tail;
  int stop;
};
struct hmc_device_event {
  hmc_device_ctx_t* ctx;
  _Atomic uint64_t recorded; /* records so far */
  _Atomic uint64_t reached;  /* the last record the stream's thread got to */
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
  pthread_mutex_init(&ctx->alloc_lock, NULL);

  /* config_get returns NULL for an unset variable: the declared default is the plugin's to
   * apply. An invalid value of a plugin's own variable fails the context (HMC_PLUGIN_ERR_CONFIG),
   * naming it. */
  const char* emulate = host->config_get(host->host_ctx, EMULATE_VAR);
  if (emulate && *emulate) {
    char* end = NULL;
    long n = strtol(emulate, &end, 10);
    if (*end != '\0' || n < 0 || n > MAX_EMULATED) {
      char msg[160];
      snprintf(msg, sizeof msg, "invalid %s=\"%.40s\": expected an integer from 0 to %d",
               EMULATE_VAR, emulate, MAX_EMULATED);
      plugin_log(host, HMC_LOG_ERROR, msg);
      free(ctx);
      return HMC_PLUGIN_ERR_CONFIG;
    }
    if (n > 0) {
      ctx->emulated = 1;
      ctx->device_count = (int)n;
      *out = ctx;
      return HMC_PLUGIN_SUCCESS;
    }
  }

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
  while (ctx->allocations) {
    struct allocation* a = ctx->allocations;
    ctx->allocations = a->next;
    free(a->ptr);
    free(a);
  }
  pthread_mutex_destroy(&ctx->alloc_lock);
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
  if (!ctx->emulated) return HMC_PLUGIN_ERR_INTERNAL;
  if (HMC_ABI_HAS_FIELD(info, hmc_device_props_t, name)) info->name = "template stand-in device";
  if (HMC_ABI_HAS_FIELD(info, hmc_device_props_t, pci_bus_id)) info->pci_bus_id = NULL;
  if (HMC_ABI_HAS_FIELD(info, hmc_device_props_t, uuid)) {
    memset(info->uuid, 0, sizeof info->uuid);
    info->uuid[15] = (uint8_t)dev;
  }
  if (HMC_ABI_HAS_FIELD(info, hmc_device_props_t, numa_node)) info->numa_node = -1;
  if (HMC_ABI_HAS_FIELD(info, hmc_device_props_t, mem_bytes)) info->mem_bytes = 1ull << 30;
  if (HMC_ABI_HAS_FIELD(info, hmc_device_props_t, caps)) info->caps = 0;
  if (HMC_ABI_HAS_FIELD(info, hmc_device_props_t, ipc_handle_size)) info->ipc_handle_size = 0;
  if (HMC_ABI_HAS_FIELD(info, hmc_device_props_t, copy_bandwidth_MBps))
    info->copy_bandwidth_MBps = 0; /* unknown: the core measures it */
  return HMC_PLUGIN_SUCCESS;
}

static const char* dev_unavailable_reason(hmc_device_ctx_t* ctx) {
  return ctx && ctx->device_count == 0 ? ctx->unavailable : NULL;
}

static const char* dev_runtime_version(hmc_device_ctx_t* ctx) {
  /* TO DO: ask the runtime ("MyAccel driver 3.2"); NULL when no runtime was found. */
  return ctx && ctx->emulated ? "template stand-in runtime (host memory, a copy thread per stream)"
                              : NULL;
}

/* ---- memory -------------------------------------------------------------------------------- */

static hmc_plugin_status_t dev_mem_alloc(hmc_device_ctx_t* ctx, int dev, size_t size, void** ptr) {
  if (!ctx || !ptr || dev < 0 || dev >= ctx->device_count) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: allocate device memory; HMC_PLUGIN_ERR_NO_MEMORY when it cannot be satisfied. */
  if (!ctx->emulated) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  struct allocation* a = calloc(1, sizeof *a);
  if (!a || !(a->ptr = aligned_alloc(256, (size + 255) / 256 * 256 + 256))) {
    free(a);
    return HMC_PLUGIN_ERR_NO_MEMORY;
  }
  a->size = size;
  a->dev = dev;
  pthread_mutex_lock(&ctx->alloc_lock);
  a->next = ctx->allocations;
  ctx->allocations = a;
  pthread_mutex_unlock(&ctx->alloc_lock);
  *ptr = a->ptr;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t dev_mem_free(hmc_device_ctx_t* ctx, void* ptr) {
  /* TO DO: free memory from dev_mem_alloc; HMC_PLUGIN_ERR_INVALID_ARGUMENT for anything else. */
  if (!ctx) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&ctx->alloc_lock);
  for (struct allocation** p = &ctx->allocations; *p; p = &(*p)->next) {
    if ((*p)->ptr != ptr) continue;
    struct allocation* a = *p;
    *p = a->next;
    pthread_mutex_unlock(&ctx->alloc_lock);
    free(a->ptr);
    free(a);
    return HMC_PLUGIN_SUCCESS;
  }
  pthread_mutex_unlock(&ctx->alloc_lock);
  return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}

static hmc_plugin_status_t dev_ptr_query(hmc_device_ctx_t* ctx, const void* ptr,
                                         hmc_device_ptr_info_t* info) {
  if (!ctx || !HMC_ABI_HAS_FIELD(info, hmc_device_ptr_info_t, owned))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: ask the runtime whether ptr is device or pinned memory of this plugin, and fill
   * device, base, size and is_host. Without devices nothing is ours. */
  info->owned = 0;
  pthread_mutex_lock(&ctx->alloc_lock);
  for (struct allocation* a = ctx->allocations; a; a = a->next) {
    uintptr_t p = (uintptr_t)ptr, b = (uintptr_t)a->ptr;
    if (p < b || p >= b + (a->size ? a->size : 1)) continue;
    info->owned = 1;
    info->device = a->dev;
    info->base = b;
    info->size = a->size;
    /* The CPU could read it, but real device memory it stands for cannot be: say so, and the
     * core moves it with copies. */
    info->is_host = 0;
    break;
  }
  pthread_mutex_unlock(&ctx->alloc_lock);
  return HMC_PLUGIN_SUCCESS;
}

/* ---- streams, copies, events ---------------------------------------------------------------- */

/* ---- reductions (STAND-IN RUNTIME: a vendor runs a kernel on the stream instead) ----------- */

/* f16 and bf16 are combined in f32, each result rounded to nearest even once. */
static float f16_load(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else { /* subnormal: shift the mantissa up until its leading one shows */
    uint32_t e = 113;
    while (!(man & 0x400u)) {
      man <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint16_t f16_store(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
  uint32_t exp = (bits >> 23) & 0xffu, man = bits & 0x7fffffu;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return sign;
    man |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t h = man >> shift, rest = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (h & 1))) ++h;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)e << 10) | (man >> 13), rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;
  return (uint16_t)(sign | h);
}

static float bf16_load(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint16_t bf16_store(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

/* Integers wrap (computed unsigned); MIN and MAX of floats return a NaN operand. */
#define REDUCE_INT(T, U)                                                        \
  static void reduce_##T(T* d, const T* a, const T* b, size_t n, uint32_t op) { \
    for (size_t i = 0; i < n; ++i) {                                            \
      T x = a[i], y = b[i];                                                     \
      d[i] = op == HMC_DEVICE_REDUCE_PROD  ? (T)((U)x * (U)y)                   \
             : op == HMC_DEVICE_REDUCE_MIN ? (y < x ? y : x)                    \
             : op == HMC_DEVICE_REDUCE_MAX ? (y > x ? y : x)                    \
                                           : (T)((U)x + (U)y);                  \
    }                                                                           \
  }
REDUCE_INT(int8_t, uint8_t)
REDUCE_INT(uint8_t, uint8_t)
REDUCE_INT(int32_t, uint32_t)
REDUCE_INT(int64_t, uint64_t)

/* One function per width: a wider intermediate would round differently from a device's unit. */
static double combine_f64(double x, double y, uint32_t op) {
  switch (op) {
    case HMC_DEVICE_REDUCE_PROD: return x * y;
    case HMC_DEVICE_REDUCE_MIN: return (y < x || y != y) ? y : x;
    case HMC_DEVICE_REDUCE_MAX: return (y > x || y != y) ? y : x;
    default: return x + y;
  }
}

static float combine_f32(float x, float y, uint32_t op) {
  switch (op) {
    case HMC_DEVICE_REDUCE_PROD: return x * y;
    case HMC_DEVICE_REDUCE_MIN: return (y < x || y != y) ? y : x;
    case HMC_DEVICE_REDUCE_MAX: return (y > x || y != y) ? y : x;
    default: return x + y;
  }
}

static void run_reduction(const struct job* j) {
  size_t n = j->size;
  if (TEMPLATE_BREAK == BREAK_REDUCE_TAIL && n > 0) --n;
  switch (j->dtype) {
    case HMC_DEVICE_DTYPE_F32: {
      float* d = j->dst;
      const float *a = j->src, *b = j->src2;
      for (size_t i = 0; i < n; ++i) d[i] = combine_f32(a[i], b[i], j->op);
      break;
    }
    case HMC_DEVICE_DTYPE_F64: {
      double* d = j->dst;
      const double *a = j->src, *b = j->src2;
      for (size_t i = 0; i < n; ++i) d[i] = combine_f64(a[i], b[i], j->op);
      break;
    }
    case HMC_DEVICE_DTYPE_F16:
    case HMC_DEVICE_DTYPE_BF16: {
      int half = j->dtype == HMC_DEVICE_DTYPE_F16;
      uint16_t* d = j->dst;
      const uint16_t *a = j->src, *b = j->src2;
      for (size_t i = 0; i < n; ++i) {
        float x = half ? f16_load(a[i]) : bf16_load(a[i]);
        float y = half ? f16_load(b[i]) : bf16_load(b[i]);
        float r = combine_f32(x, y, j->op);
        d[i] = half ? f16_store(r) : bf16_store(r);
      }
      break;
    }
    case HMC_DEVICE_DTYPE_I8: reduce_int8_t(j->dst, j->src, j->src2, n, j->op); break;
    case HMC_DEVICE_DTYPE_U8: reduce_uint8_t(j->dst, j->src, j->src2, n, j->op); break;
    case HMC_DEVICE_DTYPE_I32: reduce_int32_t(j->dst, j->src, j->src2, n, j->op); break;
    case HMC_DEVICE_DTYPE_I64: reduce_int64_t(j->dst, j->src, j->src2, n, j->op); break;
  }
}

/* The stream's thread: runs its jobs in order (STAND-IN RUNTIME). */
static void* stream_worker(void* arg) {
  hmc_device_stream_t* s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (!s->head && !s->stop) pthread_cond_wait(&s->work, &s->lock);
    if (!s->head) break; /* stopped, and nothing left */
    struct job* j = s->head;
    s->head = j->next;
    if (!s->head) s->tail = NULL;
    pthread_mutex_unlock(&s->lock);
    if (j->event)
      atomic_store(&j->event->reached, j->generation);
    else if (j->reduce)
      run_reduction(j);
    else
      memcpy(j->dst, j->src, j->size);
    free(j);
    pthread_mutex_lock(&s->lock);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

static hmc_plugin_status_t enqueue(hmc_device_stream_t* s, struct job* j) {
  pthread_mutex_lock(&s->lock);
  if (s->tail)
    s->tail->next = j;
  else
    s->head = j;
  s->tail = j;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t dev_stream_create(hmc_device_ctx_t* ctx, int dev,
                                             hmc_device_stream_t** s) {
  if (!ctx || !s || dev < 0 || dev >= ctx->device_count) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (!ctx->emulated) return HMC_PLUGIN_ERR_NOT_SUPPORTED; /* TO DO: the runtime's stream */
  hmc_device_stream_t* st = calloc(1, sizeof *st);
  if (!st) return HMC_PLUGIN_ERR_NO_MEMORY;
  st->ctx = ctx;
  pthread_mutex_init(&st->lock, NULL);
  pthread_cond_init(&st->work, NULL);
  if (pthread_create(&st->worker, NULL, stream_worker, st) != 0) {
    pthread_cond_destroy(&st->work);
    pthread_mutex_destroy(&st->lock);
    free(st);
    return HMC_PLUGIN_ERR_SYSTEM;
  }
  *s = st;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t dev_stream_destroy(hmc_device_stream_t* s) {
  if (!s) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: destroy the runtime's stream first. The stand-in finishes what was queued. */
  pthread_mutex_lock(&s->lock);
  s->stop = 1;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->worker, NULL);
  pthread_cond_destroy(&s->work);
  pthread_mutex_destroy(&s->lock);
  free(s);
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t dev_copy_async(hmc_device_stream_t* s, void* dst, const void* src,
                                          size_t size, hmc_copy_kind_t kind) {
  if (!s || (size > 0 && (!dst || !src)) || kind < HMC_COPY_HOST_TO_DEVICE ||
      kind > HMC_COPY_HOST_TO_HOST)
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: enqueue on the runtime's stream, never wait. */
  struct job* j = calloc(1, sizeof *j);
  if (!j) return HMC_PLUGIN_ERR_NO_MEMORY;
  j->dst = dst;
  j->src = src;
  j->size = size;
  return enqueue(s, j);
}

/* Optional: element-wise reductions on the stream, ordered and completed as copies are. Declining
 * a dtype or op with HMC_PLUGIN_ERR_NOT_SUPPORTED is allowed: the core then reduces it on the
 * host. */
static hmc_plugin_status_t dev_reduce(hmc_device_stream_t* s, void* dst, const void* a,
                                      const void* b, size_t count, uint32_t dtype, uint32_t op) {
  if (!s || (count > 0 && (!dst || !a || !b)) ||
      (dtype > HMC_DEVICE_DTYPE_I64 && TEMPLATE_BREAK != BREAK_REDUCE_ANY_DTYPE) ||
      op > HMC_DEVICE_REDUCE_MAX)
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: launch the runtime's kernel on the stream, never wait. */
  struct job* j = calloc(1, sizeof *j);
  if (!j) return HMC_PLUGIN_ERR_NO_MEMORY;
  j->dst = dst;
  j->src = a;
  j->src2 = b;
  j->size = count;
  j->dtype = dtype;
  j->op = op;
  j->reduce = 1;
  return enqueue(s, j);
}

static hmc_plugin_status_t dev_event_create(hmc_device_ctx_t* ctx, int dev,
                                            hmc_device_event_t** ev) {
  if (!ctx || !ev || dev < 0 || dev >= ctx->device_count) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (!ctx->emulated) return HMC_PLUGIN_ERR_NOT_SUPPORTED; /* TO DO: the runtime's event */
  hmc_device_event_t* e = calloc(1, sizeof *e);
  if (!e) return HMC_PLUGIN_ERR_NO_MEMORY;
  e->ctx = ctx;
  *ev = e;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t dev_event_destroy(hmc_device_event_t* ev) {
  if (!ev) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: destroy the runtime's event first. A stand-in marker still queued would write into
   * the event: let the stream's thread reach it (it only copies, so it gets there). */
  while (atomic_load(&ev->reached) < atomic_load(&ev->recorded)) sched_yield();
  free(ev);
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t dev_event_record(hmc_device_event_t* ev, hmc_device_stream_t* s) {
  if (!ev || !s) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: the runtime's record. The stand-in queues a marker behind the stream's copies. */
  struct job* j = calloc(1, sizeof *j);
  if (!j) return HMC_PLUGIN_ERR_NO_MEMORY;
  j->event = ev;
  j->generation = atomic_fetch_add(&ev->recorded, 1) + 1;
  return enqueue(s, j);
}

static hmc_plugin_status_t dev_event_query(hmc_device_event_t* ev) {
  if (!ev) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: the runtime's query: SUCCESS, IN_PROGRESS, or the copy's error. Never wait. */
  return atomic_load(&ev->reached) >= atomic_load(&ev->recorded) ? HMC_PLUGIN_SUCCESS
                                                                 : HMC_PLUGIN_IN_PROGRESS;
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
    /* optional: dst = a op b on the device (delete it if your runtime has no such kernels; the
     * core then reduces on the host). */
    .reduce = dev_reduce,
};

HMC_PLUGIN_EXPORT const hmc_device_plugin_v1_t* hmc_device_plugin_v1(void) {
  return &plugin_table;
}
