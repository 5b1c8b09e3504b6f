/*
 * hmc: Heterogeneous Memory Communication. The public C API.
 *
 * Conventions
 *  - Every function returns an hmc_status_t. On failure, hmc_last_error() returns a message for
 *    the calling thread that says what was wrong and where; outputs are set only on success.
 *  - Handles are opaque pointers. A handle used after it was closed, freed or destroyed is
 *    detected where possible (HMC_ERR_INVALID_HANDLE) but must not be relied on.
 *  - Sizes are bytes; timeouts are milliseconds, where -1 means HMC_TIMEOUT_MS (the context's
 *    default) and 0 means "do not wait".
 *  - Thread-safety: all functions may be called from any thread. A request handle is used by one
 *    thread at a time.
 *  - Tags: user tags are 64-bit values below HMC_TAG_MAX; the values above are reserved.
 *  - Text in the fixed-size char fields of the info structs is NUL-terminated; a text longer
 *    than its field is cut at a character boundary and ends with "..." to say so.
 *  - Structs passed in or filled start with struct_size: set it to sizeof the struct. A smaller
 *    one is HMC_ERR_INVALID_ARGUMENT; a later version that appends fields fills and reads only
 *    what struct_size covers, so programs built against this header keep working.
 */
#ifndef HMC_HMC_H
#define HMC_HMC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HMC_API_VERSION_MAJOR 0
#define HMC_API_VERSION_MINOR 1
#define HMC_TAG_MAX ((uint64_t)1 << 59)

#if defined(__GNUC__)
#define HMC_API __attribute__((visibility("default")))
#else
#define HMC_API
#endif

/* ------------------------------------------------------------------------------------------ */
/* Status                                                                                     */

typedef enum hmc_status {
  HMC_SUCCESS = 0,
  HMC_IN_PROGRESS = 1,           /* a non-blocking request has not finished yet */
  HMC_ERR_INVALID_ARGUMENT = -1, /* NULL pointer, zero or overflowing size, bad flag */
  HMC_ERR_INVALID_HANDLE = -2,   /* a freed, closed, unregistered or foreign handle */
  HMC_ERR_OUT_OF_BOUNDS = -3,    /* an offset/size outside a region */
  HMC_ERR_NOT_SUPPORTED = -4,    /* no plugin or path offers this operation */
  HMC_ERR_NOT_FOUND = -5,        /* no such device or plugin name */
  HMC_ERR_NO_MEMORY = -6,        /* allocation or registration failed */
  HMC_ERR_TIMEOUT = -7,          /* the wait ended before the operation did */
  HMC_ERR_PEER_LOST = -8,        /* the peer died or disconnected */
  HMC_ERR_REMOTE = -9,           /* the peer refused (bounds, unknown key, access rights), or
                                    aborted a message it had started (its device failed) */
  HMC_ERR_TRUNCATED = -10,       /* the message was larger than the receive buffer */
  HMC_ERR_CANCELLED = -11,       /* the request was cancelled */
  HMC_ERR_AUTH = -12,            /* the peer failed (or we failed) the HMC_AUTH_TOKEN challenge */
  HMC_ERR_VERSION = -13,         /* protocol or ABI version mismatch */
  HMC_ERR_CONFIG = -14,          /* an HMC_ environment variable has an invalid value */
  HMC_ERR_NO_PATH = -15,         /* no data path reaches this peer for these memories */
  HMC_ERR_SYSTEM = -16,          /* a system call failed; the message has the errno text */
  HMC_ERR_PLUGIN = -17,          /* a plugin failed unexpectedly */
  HMC_ERR_PROTOCOL = -18,        /* a malformed message arrived from the peer */
  HMC_ERR_INTERNAL = -19         /* a bug in hmc */
} hmc_status_t;

/* Fixed name of a status ("HMC_ERR_TIMEOUT"); never NULL. */
HMC_API const char* hmc_status_string(hmc_status_t status);
/* The message of the calling thread's last failed call; "" when none. Valid until the thread's
 * next hmc call. */
HMC_API const char* hmc_last_error(void);
/* Library version text, "0.1.0". */
HMC_API const char* hmc_version(void);

/* ------------------------------------------------------------------------------------------ */
/* Context                                                                                    */

typedef struct hmc_context* hmc_context_t;
typedef struct hmc_peer* hmc_peer_t;
typedef struct hmc_region* hmc_region_t;
typedef struct hmc_remote* hmc_remote_t;
typedef struct hmc_request* hmc_request_t;

typedef struct hmc_context_options {
  uint32_t struct_size;    /* sizeof(hmc_context_options_t); lets the struct grow */
  int32_t progress_thread; /* 1 on, 0 off, -1 from HMC_PROGRESS_THREAD (default on) */
  const char* listen_host; /* control-plane TCP address, NULL: HMC_LISTEN_HOST (127.0.0.1) */
  uint16_t listen_port;    /* 0: HMC_LISTEN_PORT (0 = any free port) */
} hmc_context_options_t;

/* Creates a context: reads the HMC_ environment (invalid values are HMC_ERR_CONFIG, misspelled
 * names a warning), loads plugins, starts the control plane and, unless disabled, the progress
 * thread. opts may be NULL. */
HMC_API hmc_status_t hmc_context_create(const hmc_context_options_t* opts, hmc_context_t* ctx);
/* Closes every peer (their pending requests end with HMC_ERR_PEER_LOST or HMC_ERR_CANCELLED),
 * frees registrations, finalizes plugins. The handle is invalid afterwards. */
HMC_API hmc_status_t hmc_context_destroy(hmc_context_t ctx);
/* Drives progress once from the calling thread (needed only without the progress thread). */
HMC_API hmc_status_t hmc_progress(hmc_context_t ctx);

/* ------------------------------------------------------------------------------------------ */
/* Plugins and devices                                                                        */

typedef enum hmc_plugin_kind {
  HMC_PLUGIN_KIND_UNKNOWN = 0, /* a broken file whose kind could not be told */
  HMC_PLUGIN_KIND_DEVICE = 1,
  HMC_PLUGIN_KIND_NET = 2,
  HMC_PLUGIN_KIND_CCL = 3 /* a vendor collective library (hmc/plugin/ccl.h) */
} hmc_plugin_kind_t;

typedef struct hmc_plugin_info {
  uint32_t struct_size;
  hmc_plugin_kind_t kind;
  char name[64];        /* "hoststage"; the file name when the table could not be read */
  char path[512];       /* the shared object */
  uint32_t abi_version; /* 0 when unknown */
  int32_t loaded;       /* 1 loaded and initialised, 0 skipped */
  char reason[256];     /* why it was skipped, or a note ("excluded by HMC_NET_PLUGINS") */
} hmc_plugin_info_t;

/* Every plugin found, loaded or not, in search order. */
HMC_API hmc_status_t hmc_plugin_count(hmc_context_t ctx, int* count);
HMC_API hmc_status_t hmc_plugin_info(hmc_context_t ctx, int index, hmc_plugin_info_t* info);

typedef struct hmc_device_info {
  uint32_t struct_size;
  char name[32];       /* "host", "cuda:0" */
  char plugin[64];     /* "builtin" for host */
  char model[128];     /* device model */
  char pci_bus_id[32]; /* "" when unknown */
  uint8_t uuid[16];
  int32_t numa_node;
  uint64_t mem_bytes;
  uint32_t caps;   /* HMC_DEVICE_CAP_* of sdk/include/hmc/plugin/device.h */
  int32_t is_host; /* 1 for host memory */
  /* (HMC_HAS_DEVICE_COPY_FIGURES) Copy rates in MB/s, 0 when unknown: device to pinned
   * host memory, pinned host memory to device, device to device. Declared by the plugin, or
   * measured on the plugin's first device at the first connect or accept (or by
   * hmc_device_calibrate); copy_basis says which ("declared", "measured", "measured on cuda:0",
   * "not measured: <why>", "" before any measurement). copy_ways: how this device's memory would
   * cross to a process like this one on this host, the ways the cost model ranks best first with
   * the MB/s it expects for 64 MiB messages ("" for host memory or before the measurement). */
  uint64_t copy_d2h_MBps;
  uint64_t copy_h2d_MBps;
  uint64_t copy_d2d_MBps;
  char copy_basis[96];
  char copy_ways[256];
  /* (HMC_HAS_NET_MEM_IFACES) The interface of the device's memory (hmc_mem_iface_t of
   * hmc/plugin/common.h; 0, host, for host memory), -1 when its plugin declares none. */
  int32_t mem_iface;
} hmc_device_info_t;

HMC_API hmc_status_t hmc_device_count(hmc_context_t ctx, int* count);
HMC_API hmc_status_t hmc_device_info(hmc_context_t ctx, int index, hmc_device_info_t* info);

/* Measures now the copy rates of each device plugin that declares none (otherwise done at the
 * first connect or accept); a few milliseconds per plugin. A plugin whose copies fail is not an
 * error (hmc_device_info's copy_basis says why). HMC_DEVICE_COPY_CALIBRATE=0 makes it do
 * nothing. */
#define HMC_HAS_DEVICE_COPY_FIGURES 1
HMC_API hmc_status_t hmc_device_calibrate(hmc_context_t ctx);

typedef struct hmc_net_device_info {
  uint32_t struct_size;
  char plugin[64]; /* "hoststage" */
  char name[64];   /* "tcp", "shm" */
  char pci_path[256];
  uint64_t bandwidth_MBps;
  uint32_t latency_ns;
  uint32_t mem_kinds; /* the first 32 bits of mem_ifaces, below */
  uint32_t flags;     /* HMC_NET_FLAG_* */
  uint32_t max_inflight;
  uint64_t max_msg_size;
  /* (HMC_HAS_NET_CALIBRATION) Calibration of devices that declare no bandwidth or
   * latency. The figures were measured on this host over loopback (0: not measured); path choice
   * uses them for peers on this host and as a bound for others. calibration says what became of
   * it: "declared", "measured", "cached in <file>", "not measured yet", "off
   * (HMC_NET_CALIBRATE=0)", "failed: <why>", "skipped: <why>". */
  uint64_t measured_bandwidth_MBps;
  uint32_t measured_latency_ns;
  char calibration[192];
  /* (HMC_HAS_NET_MEM_IFACES) The memory interfaces (hmc_mem_iface_t of
   * hmc/plugin/common.h, as bits 1 << iface) the device reads and writes natively, whether it
   * registers device memory from dma-bufs (dmabuf), and which NIC and port it is (0: unknown). */
  uint64_t mem_ifaces;
  uint32_t dmabuf;
  uint32_t nic_port;
  uint64_t nic_guid;
  /* (HMC_HAS_NET_FABRIC) The network the device is on, which a peer's device of the
   * same plugin pairs with whatever its name ("roce-v2", "ib:<subnet prefix>"); "": only a
   * device of the same name. */
  char fabric[64];
  /* (HMC_HAS_NET_DETAILS) The plugin's description of the device for people, not used
   * by hmc: its link and transport ("InfiniBand", "Ethernet (RoCE v2)"; "" when the plugin does
   * not say), and further properties as lines "name: value" separated by '\n' (the port, its
   * addresses with the one in use marked, link rate, MTU, memory registration; "" when none;
   * cut at the last whole line that fits). */
  char link_layer[64];
  char details[2048];
  /* (HMC_HAS_NET_RMA_MEM_IFACES) The memory interfaces whose device memory the device
   * registers by pointer for one-sided operations only (legacy GPUDirect, nvidia_peermem): puts
   * and gets of such memory in a registered region go direct, messages of it are staged. */
  uint64_t rma_mem_ifaces;
} hmc_net_device_info_t;
#define HMC_HAS_NET_RMA_MEM_IFACES 1
#define HMC_HAS_NET_MEM_IFACES 1
#define HMC_HAS_NET_FABRIC 1
#define HMC_HAS_NET_DETAILS 1

/* Net devices of every loaded net plugin. hmc_net_device_info never measures: the measured
 * figures are those this process or the calibration cache already has. */
HMC_API hmc_status_t hmc_net_device_count(hmc_context_t ctx, int* count);
HMC_API hmc_status_t hmc_net_device_info(hmc_context_t ctx, int index, hmc_net_device_info_t* info);

/* Measures now, over loopback in this process, every net device that declares no bandwidth or
 * latency and is not yet measured (otherwise done at the first connect or accept, when a choice
 * depends on it). Takes at most about half a second; a device that cannot be measured is not an
 * error (hmc_net_device_info says why). HMC_NET_CALIBRATE=0 makes it do nothing. */
#define HMC_HAS_NET_CALIBRATION 1
HMC_API hmc_status_t hmc_net_calibrate(hmc_context_t ctx);

/* Every HMC_ variable the context knows (the core's and the loaded plugins'), with its value. */
typedef struct hmc_config_entry {
  uint32_t struct_size;
  char name[64];
  char value[256]; /* the value in effect: the environment's, else the default */
  char default_value[128];
  char help[256];
  char owner[64]; /* "core" or a plugin name */
  int32_t is_set; /* 1 when set in the environment */
} hmc_config_entry_t;
/* With ctx NULL: the core's own variables, read from the environment (works when an invalid value
 * keeps hmc_context_create from succeeding). The value of HMC_AUTH_TOKEN reads "(set)". */
HMC_API hmc_status_t hmc_config_count(hmc_context_t ctx, int* count);
HMC_API hmc_status_t hmc_config_entry(hmc_context_t ctx, int index, hmc_config_entry_t* out);

/* ------------------------------------------------------------------------------------------ */
/* Memory                                                                                     */

/* Allocates size bytes on the named device ("host", "cuda:0"). Free with hmc_mem_free. */
HMC_API hmc_status_t hmc_mem_alloc(hmc_context_t ctx, const char* device, size_t size, void** ptr);
/* Frees memory from hmc_mem_alloc. HMC_ERR_INVALID_HANDLE for a pointer it did not return. */
HMC_API hmc_status_t hmc_mem_free(hmc_context_t ctx, void* ptr);
/* Copies size bytes between any two local memories; blocks until done. */
HMC_API hmc_status_t hmc_mem_copy(hmc_context_t ctx, void* dst, const void* src, size_t size);

#define HMC_ACCESS_REMOTE_READ (1u << 1)  /* peers may hmc_get from the region */
#define HMC_ACCESS_REMOTE_WRITE (1u << 2) /* peers may hmc_put into the region */

/* Registers [addr, addr+size) for one-sided access by peers. The memory stays owned by the
 * caller and must outlive the registration. Host memory and device memory (from hmc_mem_alloc)
 * alike: device memory that no net plugin can reach is served by target-side staging (a peer's
 * put or get on it is carried out by this context's progress engine, through bounce buffers,
 * device IPC or shared bounces), so it needs the progress thread or calls into hmc to move.
 * HMC_ERR_OUT_OF_BOUNDS when the range overruns its device allocation. */
HMC_API hmc_status_t hmc_mem_register(hmc_context_t ctx, void* addr, size_t size, uint32_t access,
                                      hmc_region_t* region);
/* Ends the registration; later remote accesses with its descriptor are refused, on every path.
 * Peers that imported the descriptor are told first, and the call waits (at most
 * HMC_TIMEOUT_MS) until none of their operations on the region is still running; a peer that
 * does not answer in that time is declared lost. Costs nothing extra when nobody imported it. */
HMC_API hmc_status_t hmc_mem_deregister(hmc_region_t region);
/* Packs the region's remote descriptor, to be given to peers by any means. *len is the capacity
 * of buf on input and the bytes written (or needed, with HMC_ERR_INVALID_ARGUMENT when buf is
 * too small) on output. */
HMC_API hmc_status_t hmc_region_pack(hmc_region_t region, void* buf, size_t* len);
/* Turns a peer's packed descriptor into a handle for hmc_put/hmc_get towards that peer. The
 * peer that packed it is asked (bounded by HMC_TIMEOUT_MS) whether the region is live and the
 * descriptor is its own: HMC_ERR_REMOTE when it is not (deregistered, forged), HMC_ERR_TIMEOUT
 * or HMC_ERR_PEER_LOST when the peer does not answer, HMC_ERR_INVALID_ARGUMENT for a
 * descriptor packed by another peer. After the owner deregisters the region, hmc_put and
 * hmc_get on the handle fail with HMC_ERR_REMOTE. */
HMC_API hmc_status_t hmc_remote_import(hmc_peer_t peer, const void* desc, size_t len,
                                       hmc_remote_t* remote);
/* Releases an imported descriptor; requests using it must have ended (a put or get of device
 * memory staged through bounce buffers keeps using it until its last piece). */
HMC_API hmc_status_t hmc_remote_release(hmc_remote_t remote);
/* The size of the remote region. */
HMC_API hmc_status_t hmc_remote_size(hmc_remote_t remote, uint64_t* size);

/* ------------------------------------------------------------------------------------------ */
/* Peers                                                                                      */

/* Writes this context's address blob (at most HMC_ADDRESS_MAX bytes). *len: capacity in,
 * length out. */
#define HMC_ADDRESS_MAX 512u
HMC_API hmc_status_t hmc_address(hmc_context_t ctx, void* buf, size_t* len);
/* Makes an address blob from "host:port", reaching the context whose control plane listens
 * there (HMC_LISTEN_HOST/HMC_LISTEN_PORT). *len: capacity in, length out. */
HMC_API hmc_status_t hmc_address_from_host(const char* host_port, void* buf, size_t* len);
/* Connects to the context whose address blob is given; blocks up to timeout_ms. Runs the hello
 * (and token challenge), the capability exchange and path choice. HMC_ERR_TIMEOUT when the
 * listener does not answer in time; the message says which step stalled ("stalled waiting for
 * HelloAck": it accepted the connection but never answered). May return before the other side
 * called hmc_accept: its context finishes the setup of connectors on its own (below). */
HMC_API hmc_status_t hmc_connect(hmc_context_t ctx, const void* addr, size_t len, int timeout_ms,
                                 hmc_peer_t* peer);
/* Returns the first incoming peer whose setup (hello, token challenge, capabilities, data path)
 * finished, waiting up to timeout_ms for one. Connectors are set up concurrently, in the
 * background (by the progress thread; without one, inside hmc_accept and hmc_progress), each
 * with its own deadline (HMC_HANDSHAKE_TIMEOUT_MS for the hello, HMC_TIMEOUT_MS for the rest),
 * so a silent or slow connector never holds this call up. Connectors that fail (garbage, wrong
 * version, wrong token, closed early) or time out never come out of hmc_accept: they are logged
 * and counted (hmc_accept_stats). HMC_ERR_TIMEOUT when no peer finished in time. */
HMC_API hmc_status_t hmc_accept(hmc_context_t ctx, int timeout_ms, hmc_peer_t* peer);

/* What became of the connectors to this context's control plane so far. */
typedef struct hmc_accept_stats {
  uint32_t struct_size;
  uint32_t pending;            /* in setup now (at most HMC_MAX_PENDING_HANDSHAKES) */
  uint32_t waiting;            /* finished, not yet returned by hmc_accept */
  int32_t last_failure_status; /* status of the last connector that failed, HMC_SUCCESS if none */
  uint64_t accepted;           /* finished their setup */
  uint64_t failed;             /* refused or broken: not hmc, wrong version, token, closed early */
  uint64_t timed_out;          /* did not finish their hello or setup in time */
  uint64_t dropped;            /* evicted while HMC_MAX_PENDING_HANDSHAKES others were in setup */
  char last_failure[256];      /* the last one that failed: who (remote address), where, why */
} hmc_accept_stats_t;
/* Fills *stats. HMC_ERR_INVALID_ARGUMENT when stats->struct_size is too small. */
HMC_API hmc_status_t hmc_accept_stats(hmc_context_t ctx, hmc_accept_stats_t* stats);
/* Closes the peer: its pending requests end with HMC_ERR_CANCELLED. */
HMC_API hmc_status_t hmc_peer_close(hmc_peer_t peer);

typedef struct hmc_peer_info {
  uint32_t struct_size;
  char path[128]; /* "hoststage/shm", with the reason in path_reason */
  char path_reason[256];
  char remote_host[64];
  int32_t same_host;
  int32_t remote_pid;
  double est_bandwidth_MBps;
  double est_latency_us;
  int32_t alive;                   /* 0 once the peer was lost */
  char device_ipc[64];             /* device plugins whose memory crosses to this peer by device IPC
                                      (same host, other process, both sides IPC-capable), comma-separated:
                                      "cuda"; "" when none */
  uint64_t ipc_messages;           /* messages sent to or received from the peer by device IPC */
  uint64_t staged_transfers;       /* transfers with the peer whose device memory went through
                                      pinned bounce buffers */
  uint64_t shared_staged_messages; /* of those, messages whose pieces the receiver copied
                                      straight out of the sender's bounce buffers (same host) */
  char remote_address[64]; /* where the peer was dialled or came from: "tcp 192.0.2.7:40112",
                              "unix @name" (dialled), "unix pid 4242" (accepted) */
  /* (HMC_HAS_PEER_DEVICE_DIRECT) Device memory in registered regions
   * (hmc_mem_register) over this path. device_memory says, per device plugin of this side,
   * "direct" (the path's net device registers it, by dma-buf or natively: the NIC reads and
   * writes the device's memory) or "staged" (through pinned bounce buffers) and why, then what
   * the peer's end of the path takes: "cuda direct (dma-buf); peer's rxe1:1 registers dma-bufs",
   * "hip staged (no native access, no dma-buf)". Each region still falls back to staging on its
   * own where its registration is refused (hmc_mem_register logs which way each region goes).
   * "" when neither side has device memory. direct_transfers counts puts and gets with the peer
   * that moved device memory (this side's, the peer's, or both) with no bounce buffer on either
   * side. */
  uint64_t direct_transfers;
  char device_memory[256];
} hmc_peer_info_t;
#define HMC_HAS_PEER_DEVICE_DIRECT 1
HMC_API hmc_status_t hmc_peer_info(hmc_peer_t peer, hmc_peer_info_t* info);

/* ------------------------------------------------------------------------------------------ */
/* Transfers. All are non-blocking: they post a request and return it in *req. buf must stay
 * valid until the request ends.                                                              */

HMC_API hmc_status_t hmc_send(hmc_peer_t peer, const void* buf, size_t size, uint64_t tag,
                              hmc_request_t* req);
HMC_API hmc_status_t hmc_recv(hmc_peer_t peer, void* buf, size_t size, uint64_t tag,
                              hmc_request_t* req);

#define HMC_PUT_NOTIFY (1u << 0) /* deliver notify_value to the target after the data landed */

/* Writes size bytes from buf into the remote region at remote_offset. The request ends when the
 * data is in place at the target. With HMC_PUT_NOTIFY the target receives notify_value through
 * hmc_notify_wait once this put's data is in place; it says nothing of other puts still in
 * flight (wait for those to end before posting the notifying put to cover them too).
 * Notifications of one initiator arrive in the order of its puts. Into device memory the path
 * cannot reach (target-side staging) the target's progress engine receives the data; the
 * request ends with HMC_ERR_REMOTE when the target refuses (the region does not grant remote
 * write, or was deregistered), with nothing written, and with HMC_ERR_PEER_LOST when the target
 * is lost. HMC_ERR_OUT_OF_BOUNDS (at once) for a range outside the region. */
HMC_API hmc_status_t hmc_put(hmc_peer_t peer, const void* buf, size_t size, hmc_remote_t remote,
                             uint64_t remote_offset, uint32_t flags, uint64_t notify_value,
                             hmc_request_t* req);
/* Reads size bytes from the remote region at remote_offset into buf. The request ends when the
 * data is in buf. From device memory the path cannot reach (target-side staging) the target's
 * progress engine sends the data; HMC_ERR_REMOTE when it refuses (no remote read granted, or
 * deregistered), HMC_ERR_OUT_OF_BOUNDS (at once) for a range outside the region. */
HMC_API hmc_status_t hmc_get(hmc_peer_t peer, void* buf, size_t size, hmc_remote_t remote,
                             uint64_t remote_offset, hmc_request_t* req);

/* Transfer lists: many ranges between one registered local region and one imported remote
 * region, checked and merged once, then posted any number of times, each post one request (the
 * shape of a KV-cache transfer: a thousand blocks by block id). Ranges adjacent on both sides
 * are merged; the rest go to the path as pieces, many in flight. */
typedef enum hmc_xfer_op {
  HMC_XFER_WRITE = 0, /* local to remote, as hmc_put */
  HMC_XFER_READ = 1   /* remote to local, as hmc_get */
} hmc_xfer_op_t;

typedef struct hmc_xfer_desc {
  uint64_t local_offset;  /* in the local region */
  uint64_t remote_offset; /* in the remote region */
  uint64_t size;          /* bytes; 0 moves nothing */
} hmc_xfer_desc_t;

typedef struct hmc_xfer_list* hmc_xfer_list_t;

/* Checks every descriptor against both regions and keeps the merged list; the descriptors are
 * read during the call only. HMC_ERR_OUT_OF_BOUNDS names the first descriptor outside a region,
 * and nothing is prepared. Both regions must stay valid until hmc_xfer_release. */
HMC_API hmc_status_t hmc_xfer_prepare(hmc_region_t local, hmc_remote_t remote, hmc_xfer_op_t op,
                                      const hmc_xfer_desc_t* descs, size_t count,
                                      hmc_xfer_list_t* list);
/* Posts the whole list as one request, which ends when every range is in place (*bytes: the
 * list's total). With HMC_XFER_NOTIFY the target receives notify_value through hmc_notify_wait
 * after the last byte: for a write once the data landed, for a read once the initiator holds
 * it (the target may then reuse the memory). A range the target refuses ends the request with
 * HMC_ERR_REMOTE; the peer's loss with HMC_ERR_PEER_LOST. A list may be posted again while an
 * earlier post of it runs. A remote region served by target-side staging (device memory the
 * path cannot reach) takes one staged transfer per merged range, still as one request. */
#define HMC_XFER_NOTIFY HMC_PUT_NOTIFY
HMC_API hmc_status_t hmc_xfer_post(hmc_xfer_list_t list, uint32_t flags, uint64_t notify_value,
                                   hmc_request_t* req);

/* Frees the list. Posts still running keep what they need. */
HMC_API hmc_status_t hmc_xfer_release(hmc_xfer_list_t list);

/* Notifications that carry bytes (a request id, a key) with the value. The bytes always travel
 * on the control plane, after the data and in the initiator's posting order with its other
 * notifications (value-only ones the path carries with the data included). */
#define HMC_NOTIFY_MAX_BYTES 4096u /* the most bytes one notification carries */
typedef struct hmc_notify_msg {
  uint64_t value;    /* as notify_value */
  const void* bytes; /* copied during the call; may be NULL when size is 0 */
  size_t size;       /* at most HMC_NOTIFY_MAX_BYTES, else HMC_ERR_INVALID_ARGUMENT */
} hmc_notify_msg_t;
#define HMC_HAS_NOTIFY_BYTES 1
/* hmc_put with HMC_PUT_NOTIFY whose notification also carries notify's bytes. notify is read
 * during the call only. HMC_ERR_INVALID_ARGUMENT for a NULL notify, more than
 * HMC_NOTIFY_MAX_BYTES, or NULL bytes with a size; otherwise as hmc_put. */
HMC_API hmc_status_t hmc_put_notify(hmc_peer_t peer, const void* buf, size_t size,
                                    hmc_remote_t remote, uint64_t remote_offset,
                                    const hmc_notify_msg_t* notify, hmc_request_t* req);
/* hmc_xfer_post with HMC_XFER_NOTIFY whose notification also carries notify's bytes; the
 * arguments are checked as for hmc_put_notify. */
HMC_API hmc_status_t hmc_xfer_post_notify(hmc_xfer_list_t list, const hmc_notify_msg_t* notify,
                                          hmc_request_t* req);
/* A notification without data: the target receives it through hmc_notify_wait after every
 * notification of this initiator's earlier notifying puts and lists (in posting order, whether
 * or not those have landed yet: it waits for them). The request ends once it is sent
 * (HMC_ERR_PEER_LOST if the peer is lost first); its *bytes is 0. The arguments are checked as
 * for hmc_put_notify; HMC_ERR_PEER_LOST (at once) for a peer lost or closed by the other side. */
HMC_API hmc_status_t hmc_notify_send(hmc_peer_t peer, const hmc_notify_msg_t* notify,
                                     hmc_request_t* req);

typedef struct hmc_notification {
  hmc_peer_t peer;
  uint64_t value;
} hmc_notification_t;
/* Takes the oldest notification delivered to this context; waits up to timeout_ms
 * (HMC_ERR_TIMEOUT when none came). It is hmc_notify_wait_msg with no buffer: a notification
 * that carries bytes is not taken, it returns HMC_ERR_TRUNCATED and the notification stays
 * queued (take it with hmc_notify_wait_msg), so that no bytes are lost silently. */
HMC_API hmc_status_t hmc_notify_wait(hmc_context_t ctx, int timeout_ms, hmc_notification_t* out);
/* As hmc_notify_wait, and copies the oldest notification's bytes into buf (capacity bytes; buf
 * may be NULL when capacity is 0), *size (not NULL) their number (0 for a value-only
 * notification). When they do not fit: HMC_ERR_TRUNCATED, *size the number needed, *out
 * untouched and the notification stays queued. A buffer of HMC_NOTIFY_MAX_BYTES always fits. */
HMC_API hmc_status_t hmc_notify_wait_msg(hmc_context_t ctx, int timeout_ms, hmc_notification_t* out,
                                         void* buf, size_t capacity, size_t* size);

/* Requests. test and wait return HMC_IN_PROGRESS / HMC_ERR_TIMEOUT while the request runs
 * (the handle stays valid); any other status is final and releases the request. *bytes (may be
 * NULL) receives the bytes received or moved. */
HMC_API hmc_status_t hmc_request_test(hmc_request_t req, size_t* bytes);
HMC_API hmc_status_t hmc_request_wait(hmc_request_t req, int timeout_ms, size_t* bytes);
/* Asks to cancel. HMC_SUCCESS: the request will end with HMC_ERR_CANCELLED; HMC_ERR_NOT_SUPPORTED:
 * it is too late and it will end normally. Either way, test/wait it to release it.
 * A collective is cancelled at once (the way out after hmc_request_wait timed out on it): once
 * this returns HMC_SUCCESS nothing of it touches its buffers any more, but its communicator's
 * connections were dropped (or its vendor library's communicator aborted), so the communicator
 * refuses every later collective (HMC_ERR_PEER_LOST, naming the cancelled one) and the other
 * ranks' collectives on it end with an error; destroy it and create another. */
HMC_API hmc_status_t hmc_request_cancel(hmc_request_t req);

/* For event loops (asyncio's add_reader, epoll, libuv): a descriptor that becomes readable when,
 * after the last hmc_context_event_clear, a request of this context ended (transfers, transfer
 * lists and collectives) or a notification arrived. It needs the progress thread (else
 * HMC_ERR_NOT_SUPPORTED: nothing would make it readable while the application sleeps). The
 * context owns it; never read or close it yourself. The way to wait:
 *   loop: hmc_context_event_clear; test what you wait for (hmc_request_test, hmc_notify_wait
 *         with timeout 0); if nothing ended, sleep until the descriptor is readable.
 * Clearing before the tests means an end that happens after them still wakes the loop; the
 * descriptor rings once per clear, so an idle watcher costs the transfers nothing. */
HMC_API hmc_status_t hmc_context_event_fd(hmc_context_t ctx, int* fd);
HMC_API hmc_status_t hmc_context_event_clear(hmc_context_t ctx);

/* ------------------------------------------------------------------------------------------ */
/* Metrics (docs/metrics.md)                                                                  */

/* Writes the context's metrics in Prometheus' text exposition format (version 0.0.4), ending
 * in a NUL: its peers by state, transfers and bytes per peer, path and operation, collectives
 * with a latency histogram, errors by status code. With buf NULL only *len is set: the bytes
 * needed, NUL included. *len: capacity in, bytes written (NUL included) out;
 * HMC_ERR_TRUNCATED, with the bytes needed in *len, when the buffer is too small (the text may
 * grow between two calls: leave room or loop). The same text is served over HTTP when
 * HMC_METRICS_ADDR is set, and written at destruction when HMC_METRICS_FILE is. */
#define HMC_HAS_METRICS 1
HMC_API hmc_status_t hmc_metrics_dump(hmc_context_t ctx, char* buf, size_t* len);

/* ------------------------------------------------------------------------------------------ */
/* Groups and collectives: datatypes and reductions.                                          */

typedef enum hmc_dtype {
  HMC_DTYPE_F32 = 0,
  HMC_DTYPE_F64 = 1,
  HMC_DTYPE_F16 = 2,  /* IEEE 754 binary16 */
  HMC_DTYPE_BF16 = 3, /* bfloat16 */
  HMC_DTYPE_I8 = 4,
  HMC_DTYPE_U8 = 5,
  HMC_DTYPE_I32 = 6,
  HMC_DTYPE_I64 = 7,
} hmc_dtype_t;

typedef enum hmc_reduce_op {
  HMC_OP_SUM = 0,
  HMC_OP_PROD = 1,
  HMC_OP_MIN = 2,
  HMC_OP_MAX = 3,
  HMC_OP_AVG = 4, /* the sum divided by the group's size (integers: rounded toward zero) */
  /* Bitwise, on the integer datatypes only (HMC_ERR_INVALID_ARGUMENT on a floating type). */
  HMC_OP_BAND = 5,
  HMC_OP_BOR = 6,
  HMC_OP_BXOR = 7,
} hmc_reduce_op_t;

/* ------------------------------------------------------------------------------------------ */
/* Communicators: groups of ranks (docs/collectives.md).                                      */

typedef struct hmc_comm* hmc_comm_t;

typedef struct hmc_comm_options {
  uint32_t struct_size;   /* sizeof(hmc_comm_options_t); lets the struct grow */
  int32_t rank;           /* -1: HMC_RANK, else RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK */
  int32_t size;           /* 0: HMC_WORLD_SIZE, else WORLD_SIZE, SLURM_NTASKS,
                             OMPI_COMM_WORLD_SIZE */
  const char* rendezvous; /* "tcp://host:port" (rank 0 hosts the store there) or
                             "redis://host:port/prefix" (a Redis server, docs/collectives.md);
                             NULL: HMC_RENDEZVOUS, else tcp://MASTER_ADDR:MASTER_PORT */
  int32_t timeout_ms;     /* how long to wait for every rank to join, and for the connection to
                           * a rank at a collective's first use of it; -1: HMC_TIMEOUT_MS */
} hmc_comm_options_t;

/* Makes a communicator of `size` ranks: every rank calls it with its own rank and the same
 * rendezvous and size. Blocks until every rank joined and each knows the others' addresses,
 * hosts and device vendors (pairs connect later, when a collective first needs them).
 * HMC_ERR_TIMEOUT naming the ranks that did not join; HMC_ERR_INVALID_ARGUMENT for a rank
 * outside [0, size) or a rank number another process holds; HMC_ERR_PROTOCOL for a size that
 * disagrees with rank 0's; HMC_ERR_SYSTEM for a store that cannot be reached or hosted;
 * HMC_ERR_NOT_SUPPORTED for redis:// in a build without hiredis. opts may be NULL. */
HMC_API hmc_status_t hmc_comm_create(hmc_context_t ctx, const hmc_comm_options_t* opts,
                                     hmc_comm_t* comm);
/* Frees the communicator (its connections stay with the context, reused by other
 * communicators). Refused with HMC_ERR_INVALID_ARGUMENT while collectives run on it: wait for
 * them first (collectives cannot be cancelled). */
HMC_API hmc_status_t hmc_comm_destroy(hmc_comm_t comm);
HMC_API hmc_status_t hmc_comm_rank(hmc_comm_t comm, int* rank);
HMC_API hmc_status_t hmc_comm_size(hmc_comm_t comm, int* size);
/* Splits the communicator as MPI_Comm_split: ranks passing the same color form one new
 * communicator, ordered by key, then by their rank here. A negative color
 * (HMC_COMM_SPLIT_NONE) joins none: *out is set to NULL. Collective over comm (every rank calls
 * it), blocking up to HMC_TIMEOUT_MS. */
#define HMC_COMM_SPLIT_NONE (-1)
HMC_API hmc_status_t hmc_comm_split(hmc_comm_t comm, int color, int key, hmc_comm_t* out);

/* Where one rank of the group runs: the group's shape, as every rank knows it. */
typedef struct hmc_comm_member_info {
  uint32_t struct_size;
  int32_t host; /* its host, numbered in order of first appearance (rank 0's is 0) */
  int32_t pid;
  char hostname[64];
  char vendor[32]; /* its context's first device plugin ("cuda", "hip", ...); "host" */
} hmc_comm_member_info_t;
/* HMC_ERR_INVALID_ARGUMENT for a rank outside the group. */
HMC_API hmc_status_t hmc_comm_member_info(hmc_comm_t comm, int rank, hmc_comm_member_info_t* info);

/* How this rank's most recently posted collective on comm runs, as text: "hmc <algorithm>"
 * (hmc's own, e.g. "hmc ring"), "ccl <plugin> (<library>)" (one vendor library, e.g. "ccl nccl
 * (libnccl.so.2, NCCL 2.28.9)"), or "hierarchical: <groups>" (e.g. "hierarchical: cuda x2
 * (nccl), hip x2 (rccl), host x1 (hmc)"); "" before the first. Copied into buf, truncated to
 * len - 1 bytes and always terminated; HMC_ERR_INVALID_ARGUMENT for a NULL buf or len 0. */
HMC_API hmc_status_t hmc_comm_last_backend(hmc_comm_t comm, char* buf, size_t len);

/* ------------------------------------------------------------------------------------------ */
/* Collectives. All are non-blocking: they return a request that hmc_request_test/wait end
 * (its bytes: those this rank received). Every rank of the communicator calls the same
 * collectives in the same order. Buffers may be in any memory (host, any vendor's device) and
 * must stay valid until the request ends. Counts are in elements of dtype. The first collective
 * that needs a pair of ranks connects them in the calling thread (up to HMC_TIMEOUT_MS).
 * Argument errors (unknown datatype or operation, NULL buffers for non-zero counts, overlapping
 * buffers that are not the in-place form) are returned before anything is sent. A rank lost
 * mid-collective ends the request with HMC_ERR_PEER_LOST on every other rank (the communicator
 * is unusable afterwards). HMC_COLL_ALGO forces an algorithm. */

HMC_API hmc_status_t hmc_barrier(hmc_comm_t comm, hmc_request_t* req);
/* root's buf (count elements) to every rank's buf. */
HMC_API hmc_status_t hmc_broadcast(hmc_comm_t comm, void* buf, size_t count, hmc_dtype_t dtype,
                                   int root, hmc_request_t* req);
/* recv (size * count) = every rank's send (count), in rank order. In place: send ==
 * recv + rank * count elements. */
HMC_API hmc_status_t hmc_all_gather(hmc_comm_t comm, const void* send, void* recv, size_t count,
                                    hmc_dtype_t dtype, hmc_request_t* req);
/* Block j of send (count elements) goes to rank j, and lands as block `rank` of its recv. Not in
 * place. */
HMC_API hmc_status_t hmc_all_to_all(hmc_comm_t comm, const void* send, void* recv, size_t count,
                                    hmc_dtype_t dtype, hmc_request_t* req);
/* send_counts[j] elements at send + send_displs[j] go to rank j, landing at its recv +
 * recv_displs[rank] (its recv_counts[rank] must equal send_counts[j] here). Every array has
 * `size` entries; zero counts are allowed. Not in place. */
HMC_API hmc_status_t hmc_all_to_allv(hmc_comm_t comm, const void* send, const size_t* send_counts,
                                     const size_t* send_displs, void* recv,
                                     const size_t* recv_counts, const size_t* recv_displs,
                                     hmc_dtype_t dtype, hmc_request_t* req);
/* recv (count) = block `rank` of the reduction over every rank's send (size * count). In place:
 * recv == send + rank * count elements. */
HMC_API hmc_status_t hmc_reduce_scatter(hmc_comm_t comm, const void* send, void* recv, size_t count,
                                        hmc_dtype_t dtype, hmc_reduce_op_t op, hmc_request_t* req);
/* recv (count) = the reduction over every rank's send (count). In place: send == recv. */
HMC_API hmc_status_t hmc_all_reduce(hmc_comm_t comm, const void* send, void* recv, size_t count,
                                    hmc_dtype_t dtype, hmc_reduce_op_t op, hmc_request_t* req);
/* (HMC_HAS_REDUCE) root's recv (count) = the reduction over every rank's send (count). recv is
 * read on root only: other ranks may pass NULL, and their recv is never written. In place on
 * root: send == recv. */
HMC_API hmc_status_t hmc_reduce(hmc_comm_t comm, const void* send, void* recv, size_t count,
                                hmc_dtype_t dtype, hmc_reduce_op_t op, int root,
                                hmc_request_t* req);
#define HMC_HAS_REDUCE 1

/* Stream-ordered collectives: the same as above, given the application's stream of the vendor
 * runtime the buffers belong to (a CUstream/cudaStream_t, hipStream_t, cnrtQueue_t or
 * musaStream_t, passed as void*), as NCCL takes one (docs/collectives.md, "Stream order"). The
 * collective is ordered after the work enqueued on the stream before the call: the buffers need
 * not be ready when it is made, only when that work ends.
 *  - Where the collective runs in a vendor library (a ccl plugin), it is enqueued on the stream
 *    itself, and work the application enqueues on the stream afterwards runs after it, without
 *    a host round trip; the request also ends when it has.
 *  - Where it runs on hmc's own paths (or a part of it does: across vendor groups, host ranks),
 *    hmc records an event on the stream and starts once that has passed, without blocking the
 *    call; its end is the request's (hmc_request_test/wait), after which the application
 *    enqueues what depends on it.
 * A NULL stream is the plain call. HMC_ERR_INVALID_ARGUMENT for a stream with buffers in host
 * memory; HMC_ERR_NOT_SUPPORTED where the buffers' device plugin cannot record on an
 * application's stream (its table lacks event_record_native). The barrier's stream is taken to
 * be of this rank's first device. */
HMC_API hmc_status_t hmc_barrier_on_stream(hmc_comm_t comm, void* stream, hmc_request_t* req);
HMC_API hmc_status_t hmc_broadcast_on_stream(hmc_comm_t comm, void* buf, size_t count,
                                             hmc_dtype_t dtype, int root, void* stream,
                                             hmc_request_t* req);
HMC_API hmc_status_t hmc_all_gather_on_stream(hmc_comm_t comm, const void* send, void* recv,
                                              size_t count, hmc_dtype_t dtype, void* stream,
                                              hmc_request_t* req);
HMC_API hmc_status_t hmc_all_to_all_on_stream(hmc_comm_t comm, const void* send, void* recv,
                                              size_t count, hmc_dtype_t dtype, void* stream,
                                              hmc_request_t* req);
HMC_API hmc_status_t hmc_all_to_allv_on_stream(hmc_comm_t comm, const void* send,
                                               const size_t* send_counts, const size_t* send_displs,
                                               void* recv, const size_t* recv_counts,
                                               const size_t* recv_displs, hmc_dtype_t dtype,
                                               void* stream, hmc_request_t* req);
HMC_API hmc_status_t hmc_reduce_scatter_on_stream(hmc_comm_t comm, const void* send, void* recv,
                                                  size_t count, hmc_dtype_t dtype,
                                                  hmc_reduce_op_t op, void* stream,
                                                  hmc_request_t* req);
HMC_API hmc_status_t hmc_all_reduce_on_stream(hmc_comm_t comm, const void* send, void* recv,
                                              size_t count, hmc_dtype_t dtype, hmc_reduce_op_t op,
                                              void* stream, hmc_request_t* req);
HMC_API hmc_status_t hmc_reduce_on_stream(hmc_comm_t comm, const void* send, void* recv,
                                          size_t count, hmc_dtype_t dtype, hmc_reduce_op_t op,
                                          int root, void* stream, hmc_request_t* req);

/* ------------------------------------------------------------------------------------------ */
/* Log handler                                                                                */

/* Receives hmc's log lines instead of HMC_LOG_FILE (or standard error): level is 1 error,
 * 2 warn, 3 info, 4 debug or 5 trace (HMC_LOG_ERROR.. of hmc/plugin/common.h), line the message
 * without the file's "[hmc <time> <pid>] <LEVEL>" prefix and without a newline, valid only
 * during the call. Only lines that HMC_LOG_LEVEL lets through arrive. It is called from any
 * thread of hmc or of the application, several at a time, often with hmc's locks held: it must
 * be thread-safe, return quickly, and call no hmc function. */
typedef void (*hmc_log_handler_t)(int level, const char* line, void* user);
/* Sets the process-wide log handler (it outlives contexts); NULL restores the default
 * destination. When it returns, no call of the previous handler is running and none will start,
 * so its user data may be freed. Must not be called from a handler. Always HMC_SUCCESS. */
#define HMC_HAS_LOG_HANDLER 1
HMC_API hmc_status_t hmc_log_set_handler(hmc_log_handler_t handler, void* user);

#ifdef __cplusplus
}
#endif
#endif /* HMC_HMC_H */
