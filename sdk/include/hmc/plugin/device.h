/*
 * hmc device plugin ABI, version 1.
 *
 * A device plugin gives the core one vendor's accelerators: identity, memory, pointer queries,
 * asynchronous copies with event completion, same-host IPC and dma-buf export. Host memory is
 * built into the core and needs no plugin.
 *
 * Entry point: a plugin exports exactly one symbol,
 *     HMC_PLUGIN_EXPORT const hmc_device_plugin_v1_t* hmc_device_plugin_v1(void);
 * returning a table with static storage duration.
 *
 * A plugin dlopens its vendor runtime itself (never links it), so it loads on machines without
 * the runtime. No runtime, or no device, is not an error: init succeeds, device_count reports 0
 * and unavailable_reason says why.
 *
 * Threading: unlike net plugins, device plugin slots may be called from several threads at
 * once (the staging pipeline copies while the application allocates); a plugin makes its slots
 * thread-safe. Streams and events are used by one thread at a time.
 */
#ifndef HMC_PLUGIN_DEVICE_H
#define HMC_PLUGIN_DEVICE_H

#include "hmc/plugin/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HMC_DEVICE_IPC_HANDLE_MAX 128u

/* hmc_device_props_t.caps */
#define HMC_DEVICE_CAP_IPC (1u << 0)           /* ipc_export/ipc_open work for this device */
#define HMC_DEVICE_CAP_DMABUF (1u << 1)        /* dmabuf_export works for this device */
#define HMC_DEVICE_CAP_PEER_ACCESS (1u << 2)   /* direct copies to other devices of the plugin */
#define HMC_DEVICE_CAP_HOST_REGISTER (1u << 3) /* host_register pins existing host memory */
#define HMC_DEVICE_CAP_GPUDIRECT_RDMA (1u << 4)
/* ipc_export's handle names one allocation for the life of the exporting process: a later
 * allocation, even at the same address, gets another handle. Importers may then keep a mapping
 * open for later messages from the same handle instead of mapping per message. */
#define HMC_DEVICE_CAP_IPC_UNIQUE_HANDLES (1u << 5)

/* Element types and operations of the reduce slot: the values of hmc.h's hmc_dtype_t and
 * hmc_reduce_op_t (the core passes them unchanged). F16 is IEEE 754 binary16, BF16 bfloat16. */
#define HMC_DEVICE_DTYPE_F32 0u
#define HMC_DEVICE_DTYPE_F64 1u
#define HMC_DEVICE_DTYPE_F16 2u
#define HMC_DEVICE_DTYPE_BF16 3u
#define HMC_DEVICE_DTYPE_I8 4u
#define HMC_DEVICE_DTYPE_U8 5u
#define HMC_DEVICE_DTYPE_I32 6u
#define HMC_DEVICE_DTYPE_I64 7u
#define HMC_DEVICE_REDUCE_SUM 0u
#define HMC_DEVICE_REDUCE_PROD 1u
#define HMC_DEVICE_REDUCE_MIN 2u
#define HMC_DEVICE_REDUCE_MAX 3u

/* Copy directions for copy_async. */
typedef enum hmc_copy_kind {
  HMC_COPY_HOST_TO_DEVICE = 1,
  HMC_COPY_DEVICE_TO_HOST = 2,
  HMC_COPY_DEVICE_TO_DEVICE = 3,
  HMC_COPY_HOST_TO_HOST = 4
} hmc_copy_kind_t;

typedef struct hmc_device_ctx hmc_device_ctx_t;
typedef struct hmc_device_stream hmc_device_stream_t;
typedef struct hmc_device_event hmc_device_event_t;

/* One device. The caller sets hdr; the plugin fills what fits. Strings live until finalize. */
typedef struct hmc_device_props {
  hmc_abi_header_t hdr;
  const char* name;       /* marketing name, "NVIDIA H100 80GB HBM3" */
  const char* pci_bus_id; /* "0000:3b:00.0", or NULL */
  uint8_t uuid[16];
  int32_t numa_node; /* -1 when unknown */
  uint64_t mem_bytes;
  uint32_t caps; /* HMC_DEVICE_CAP_* */
  uint32_t ipc_handle_size;
  uint64_t copy_bandwidth_MBps; /* declared host<->device copy bandwidth, 0 = unknown (the core
                                   then measures it: HMC_DEVICE_COPY_CALIBRATE) */
} hmc_device_props_t;

/* Answer of ptr_query. */
typedef struct hmc_device_ptr_info {
  hmc_abi_header_t hdr;
  int32_t owned;   /* 1: the pointer lies in memory of this plugin's devices or its pinned host
                      memory; 0: not ours (every other field is then undefined) */
  int32_t device;  /* device index, or -1 for pinned host memory */
  uint64_t base;   /* start of the allocation containing the pointer */
  uint64_t size;   /* size of that allocation */
  int32_t is_host; /* 1 for pinned/registered host memory the CPU can dereference */
} hmc_device_ptr_info_t;

typedef struct hmc_device_plugin_v1 {
  hmc_abi_header_t hdr;
  const char* name;    /* device-name prefix: "cuda" gives devices cuda:0, cuda:1 ... */
  const char* vendor;  /* "NVIDIA", "AMD", "Cambricon", "Moore Threads" */
  const char* version; /* the plugin's own version text */
  const hmc_config_var_t* config_vars;

  /* --- required ------------------------------------------------------------------------ */
  hmc_plugin_status_t (*init)(const hmc_host_services_t* host, hmc_device_ctx_t** ctx);
  hmc_plugin_status_t (*finalize)(hmc_device_ctx_t* ctx);
  /* Number of usable devices (0 is valid). */
  hmc_plugin_status_t (*device_count)(hmc_device_ctx_t* ctx, int* count);
  hmc_plugin_status_t (*device_info)(hmc_device_ctx_t* ctx, int dev, hmc_device_props_t* info);
  /* Why device_count is 0 ("libcuda.so.1 not found"), or NULL. Lives until finalize. */
  const char* (*unavailable_reason)(hmc_device_ctx_t* ctx);
  /* Runtime version text ("CUDA driver 13.0"), or NULL when no runtime was found. */
  const char* (*runtime_version)(hmc_device_ctx_t* ctx);

  hmc_plugin_status_t (*mem_alloc)(hmc_device_ctx_t* ctx, int dev, size_t size, void** ptr);
  hmc_plugin_status_t (*mem_free)(hmc_device_ctx_t* ctx, void* ptr);
  hmc_plugin_status_t (*ptr_query)(hmc_device_ctx_t* ctx, const void* ptr,
                                   hmc_device_ptr_info_t* info);

  hmc_plugin_status_t (*stream_create)(hmc_device_ctx_t* ctx, int dev,
                                       hmc_device_stream_t** stream);
  hmc_plugin_status_t (*stream_destroy)(hmc_device_stream_t* stream);
  /* Enqueues a copy; returns without waiting. Completion is observed through an event recorded
   * after it on the same stream. */
  hmc_plugin_status_t (*copy_async)(hmc_device_stream_t* stream, void* dst, const void* src,
                                    size_t size, hmc_copy_kind_t kind);
  hmc_plugin_status_t (*event_create)(hmc_device_ctx_t* ctx, int dev, hmc_device_event_t** ev);
  hmc_plugin_status_t (*event_destroy)(hmc_device_event_t* ev);
  hmc_plugin_status_t (*event_record)(hmc_device_event_t* ev, hmc_device_stream_t* stream);
  /* SUCCESS when everything before the record has finished, IN_PROGRESS while not, an error
   * when a copy before it failed. Never blocks. */
  hmc_plugin_status_t (*event_query)(hmc_device_event_t* ev);

  /* --- optional ------------------------------------------------------------------------ */
  /* Pinned host memory, usable by copy_async at full speed. */
  hmc_plugin_status_t (*host_alloc)(hmc_device_ctx_t* ctx, size_t size, void** ptr);
  hmc_plugin_status_t (*host_free)(hmc_device_ctx_t* ctx, void* ptr);
  hmc_plugin_status_t (*host_register)(hmc_device_ctx_t* ctx, void* ptr, size_t size);
  hmc_plugin_status_t (*host_unregister)(hmc_device_ctx_t* ctx, void* ptr);

  /* Same-host IPC. ipc_export writes info.ipc_handle_size bytes (at most
   * HMC_DEVICE_IPC_HANDLE_MAX) describing the allocation that contains ptr; ipc_open maps it in
   * this process and returns the base pointer; ipc_close unmaps. */
  hmc_plugin_status_t (*ipc_export)(hmc_device_ctx_t* ctx, const void* ptr, void* handle,
                                    size_t* handle_len);
  hmc_plugin_status_t (*ipc_open)(hmc_device_ctx_t* ctx, int dev, const void* handle,
                                  size_t handle_len, void** ptr);
  hmc_plugin_status_t (*ipc_close)(hmc_device_ctx_t* ctx, void* ptr);

  /* Exports [ptr, ptr+size) as a dma-buf. *fd is owned by the caller (close it); *offset is
   * where ptr lies inside the exported buffer. */
  hmc_plugin_status_t (*dmabuf_export)(hmc_device_ctx_t* ctx, const void* ptr, size_t size, int* fd,
                                       uint64_t* offset);

  /* Appended: the interface of this plugin's device memory (an hmc_mem_iface_t value), which
   * net plugins are told when they register it. Absent (a table too short to hold it) means the
   * core knows of no net device that reaches the memory natively; dma-buf export still works. */
  uint32_t mem_iface;

  /* Appended, optional: dst[i] = a[i] op b[i] for i < count, elements of dtype
   * (HMC_DEVICE_DTYPE_*), op one of HMC_DEVICE_REDUCE_* (the core divides an average itself),
   * on memory of the stream's device. dst may be a or b; other overlaps are not allowed.
   * Integers wrap on overflow; f16 and bf16 are combined in f32 and rounded to nearest even;
   * MIN and MAX of floats return a NaN operand. Stream-ordered like copy_async: it runs after
   * what was enqueued on the stream before it, and an event recorded after it reports its end
   * (or its failure). Never waits. INVALID_ARGUMENT for an unknown dtype or op (nothing
   * enqueued); NOT_SUPPORTED for one this plugin does not reduce: the core then reduces that
   * one on the host, as it does for a plugin without the slot. */
  hmc_plugin_status_t (*reduce)(hmc_device_stream_t* stream, void* dst, const void* a,
                                const void* b, size_t count, uint32_t dtype, uint32_t op);

  /* Appended, optional: records ev on a stream of the vendor's own runtime that the
   * application made (a CUstream, hipStream_t, cnrtQueue_t or musaStream_t of the event's
   * device), as event_record does on the plugin's streams: event_query then reports the end of
   * the work the application enqueued on it before the record. What a collective given the
   * application's stream waits for before it starts on hmc's own paths. Never waits.
   * INVALID_ARGUMENT for a NULL stream. */
  hmc_plugin_status_t (*event_record_native)(hmc_device_event_t* ev, void* native_stream);
} hmc_device_plugin_v1_t;

typedef const hmc_device_plugin_v1_t* (*hmc_device_plugin_v1_entry_t)(void);
#define HMC_DEVICE_PLUGIN_ENTRY_V1 "hmc_device_plugin_v1"

#ifdef __cplusplus
}
#endif
#endif /* HMC_PLUGIN_DEVICE_H */
