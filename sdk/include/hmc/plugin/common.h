/*
 * hmc plugin ABI, version 1: what every plugin kind shares.
 *
 * Rules (in full, with the core's side of the contract: share/hmc/plugin-contract.md of the
 * installed SDK, sdk/doc/plugin-contract.md in hmc's source tree):
 *  - C types only. Every struct that crosses the boundary starts with hmc_abi_header_t and only
 *    ever grows by appending fields. A reader checks header.struct_size before touching a field
 *    (HMC_ABI_HAS_FIELD) and treats a function slot beyond struct_size, or NULL, as "not
 * supported".
 *  - Whoever allocates frees: an object a plugin creates is destroyed by that plugin's own slot.
 *  - Every slot returns an hmc_plugin_status_t and sets its outputs only on success.
 *  - A plugin never reads the core's globals or the environment for its options: the core hands it
 *    hmc_host_services_t at init, and HMC_<PLUGIN>_<NAME> options are read through config_get.
 *  - No exceptions, longjmp or C++ types cross the boundary.
 */
#ifndef HMC_PLUGIN_COMMON_H
#define HMC_PLUGIN_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI major version this header describes. An incompatible change makes a new major version,
 * with new entry-symbol names (hmc_device_plugin_v2 ...). Minor growth is by appending only. */
#define HMC_PLUGIN_ABI_VERSION 1u

/* Where memory lives, independent of vendor (as libfabric's enum fi_hmem_iface). A device plugin
 * declares the interface of its devices' memory (hmc_device_plugin_v1_t.mem_iface); a net plugin
 * says which interfaces each device reaches natively (hmc_net_device_props_t.mem_ifaces) and
 * registers memory described by interface plus device ordinal (hmc_net_mem_desc_t). Values are
 * frozen; new vendors are appended below 64 so that a 64-bit mask covers every interface. */
typedef enum hmc_mem_iface {
  HMC_MEM_IFACE_HOST = 0, /* ordinary host memory */
  HMC_MEM_IFACE_CUDA = 1, /* NVIDIA CUDA device memory */
  HMC_MEM_IFACE_ROCM = 2, /* AMD ROCm/HIP and Hygon DTK device memory */
  HMC_MEM_IFACE_MLU = 3,  /* Cambricon MLU (CNRT) device memory */
  HMC_MEM_IFACE_MUSA = 4  /* Moore Threads MUSA device memory */
} hmc_mem_iface_t;
#define HMC_MEM_IFACE_MAX 64u /* interfaces are numbered below this */
#define HMC_MEM_IFACE_BIT(iface) (1ull << (unsigned)(iface))

/* Export marker for a plugin's entry symbol; everything else should be hidden
 * (-fvisibility=hidden; hmc_add_plugin() from the hmc-sdk CMake package sets it). */
#if defined(__GNUC__)
#define HMC_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define HMC_PLUGIN_EXPORT
#endif

/* Distinct status codes, shared by all plugin kinds. Values are frozen. */
typedef enum hmc_plugin_status {
  HMC_PLUGIN_SUCCESS = 0,
  HMC_PLUGIN_IN_PROGRESS = 1,           /* a non-blocking call has not finished: call again/test */
  HMC_PLUGIN_ERR_NOT_SUPPORTED = -1,    /* the operation or option is not offered */
  HMC_PLUGIN_ERR_NO_DEVICE = -2,        /* valid plugin, nothing to drive here (not a failure) */
  HMC_PLUGIN_ERR_VERSION = -3,          /* incompatible ABI or runtime version */
  HMC_PLUGIN_ERR_INVALID_ARGUMENT = -4, /* bad pointer, size, handle, or out-of-bounds access */
  HMC_PLUGIN_ERR_NO_MEMORY = -5,        /* allocation or registration could not be satisfied */
  HMC_PLUGIN_ERR_REMOTE = -6,           /* the peer refused the operation (bounds, unknown key) */
  HMC_PLUGIN_ERR_PEER_LOST = -7,        /* the connection to the peer is gone */
  HMC_PLUGIN_ERR_TRUNCATED = -8,        /* an incoming message was larger than the posted buffer */
  HMC_PLUGIN_ERR_CANCELLED = -9,        /* the request was cancelled */
  HMC_PLUGIN_ERR_INTERNAL = -10,        /* a bug or an unexpected system/runtime failure */
  HMC_PLUGIN_ERR_SYSTEM = -11,          /* a system call failed (errno in the logged message) */
  HMC_PLUGIN_ERR_CONFIG = -12 /* init only: one of the plugin's own HMC_<PLUGIN>_* variables
                                 has an invalid value (log which and why); the core
                                 then fails hmc_context_create with HMC_ERR_CONFIG, as
                                 for its own variables. A core older than this code
                                 skips the plugin instead. */
} hmc_plugin_status_t;

/* First member of every struct crossing the boundary. */
typedef struct hmc_abi_header {
  uint32_t struct_size; /* sizeof the struct as the writer compiled it */
  uint32_t abi_version; /* HMC_PLUGIN_ABI_VERSION the writer compiled against */
} hmc_abi_header_t;

#define HMC_ABI_HEADER_INIT(type) \
  { (uint32_t)sizeof(type), HMC_PLUGIN_ABI_VERSION }

/* True when the struct at ptr (whose header says how large it is) contains `field` whole. */
#define HMC_ABI_HAS_FIELD(ptr, type, field) \
  ((ptr) != NULL && (ptr)->hdr.struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* Log levels, as passed to hmc_host_services_t.log. */
typedef enum hmc_log_level {
  HMC_LOG_ERROR = 1,
  HMC_LOG_WARN = 2,
  HMC_LOG_INFO = 3,
  HMC_LOG_DEBUG = 4,
  HMC_LOG_TRACE = 5
} hmc_log_level_t;

/* Services the core hands to a plugin at init. The pointer stays valid until the plugin's
 * finalize slot returns. All slots are thread-safe and never NULL. */
typedef struct hmc_host_services {
  hmc_abi_header_t hdr;
  uint32_t core_abi_min; /* oldest plugin ABI version the core accepts */
  uint32_t core_abi_max; /* newest plugin ABI version the core accepts */
  void* host_ctx;        /* opaque; pass back to every slot below */
  /* Writes a preformatted message to the core's log (HMC_LOG_LEVEL, HMC_LOG_FILE). Cheap when the
   * level is filtered out; plugins may still want log_enabled to avoid formatting. The core
   * prefixes each line with "[<kind>/<name>] " ("[net/hoststage] "): do not repeat the name. */
  void (*log)(void* host_ctx, int level, const char* message);
  int (*log_enabled)(void* host_ctx, int level);
  /* Looks up a configuration variable by its full name ("HMC_HOSTSTAGE_STREAMS"). Returns the
   * value as set (possibly ""), or NULL when unset: the default declared in config_vars is NOT
   * applied (it is what hmc-info --config shows); the plugin applies it. The string lives until
   * finalize. Plugins must declare the variables they read in their table's config_vars so the
   * core can document them; reading an undeclared one logs a warning. An invalid value: log
   * which and why, and return HMC_PLUGIN_ERR_CONFIG from init. */
  const char* (*config_get)(void* host_ctx, const char* name);
  /* Monotonic clock in nanoseconds, the same one the core uses for timeouts. */
  uint64_t (*now_ns)(void* host_ctx);
  /* HMC_TIMEOUT_MS: how long a blocking step (connect, accept, a silent peer) may take. */
  uint32_t timeout_ms;
} hmc_host_services_t;

/* A configuration variable a plugin reads, declared so hmc-info --config can list it and the core
 * does not warn about it as misspelled. Arrays of these end with an entry whose name is NULL. */
typedef struct hmc_config_var {
  const char* name;          /* full name, HMC_<PLUGIN>_<NAME> */
  const char* default_value; /* as text; "" when unset means "automatic" */
  const char* help;          /* one line */
} hmc_config_var_t;

#ifdef __cplusplus
}
#endif
#endif /* HMC_PLUGIN_COMMON_H */
