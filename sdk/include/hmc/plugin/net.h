/*
 * hmc net plugin ABI, version 2.
 *
 * A net plugin moves bytes between two processes: tagged two-sided messages and one-sided
 * put/get against memory the peer registered. Its shape follows NCCL's net plugin (devices,
 * properties, listen/connect/accept with an opaque handle carried by the core's control plane,
 * registration, non-blocking requests completed by test) plus one-sided operations.
 *
 * Entry point: a plugin exports exactly one symbol,
 *     HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void);
 * returning a table with static storage duration, whose hdr is HMC_NET_ABI_HEADER_INIT.
 *
 * Version 2 changed the memory model (a core refuses a version 1 plugin and says so):
 *  - registration is per net device, each with its own remote key (reg_mr takes the device);
 *  - memory is described by a vendor-neutral interface (hmc_mem_iface_t) plus a device ordinal,
 *    and by a dma-buf fd and offset when the device plugin exported one; a device says which
 *    interfaces it reaches natively (mem_ifaces), whether it registers dma-bufs
 *    (HMC_NET_FLAG_DMABUF), and (appended) which it registers by pointer for put/get only
 *    (rma_mem_ifaces);
 *  - optional slots: flush, vectored put/get, put with a notification carried with the data;
 *    device properties name the NIC and port (nic_guid, nic_port).
 *
 * Threading: the core serialises every call into one plugin context (the hmc_net_ctx_t and every
 * object made from it); no two slots run concurrently on the same context. A plugin needs no
 * locks of its own unless it runs threads of its own. No slot blocks longer than a bounded
 * system call: waits are the core's job (it polls test/progress, or sleeps on wait_fd).
 *
 * What the core does (share/hmc/plugin-contract.md, section 3, has the details):
 *  - It calls progress on every pass of its progress engine while a peer uses the plugin,
 *    whether or not a request is outstanding: drain incoming data there (unexpected messages).
 *    Without wait_fd, an idle core progresses the plugin only every HMC_HEARTBEAT_MS/2.
 *  - It does not call ep_ready on an endpoint accept returned when it connects peers: it uses
 *    the endpoint as returned (calibration does call it; it must then answer SUCCESS).
 *  - It does not authenticate data connections (HMC_AUTH_TOKEN covers its control plane, over
 *    which the handle travels): a plugin that wants them authenticated puts a random secret in
 *    the handle at listen and refuses connections that do not present it.
 *  - A send's completion means its buffer may be reused; it says nothing of delivery.
 *
 * Ordering and semantics every plugin must provide:
 *  - Tags: exact 64-bit match per endpoint; messages with the same tag on the same endpoint
 *    match receives in the order they were sent. A message that arrives before its receive is
 *    posted is kept until one is (the core often posts late). A message longer than the receive
 * buffer completes the receive with HMC_PLUGIN_ERR_TRUNCATED (and the send still succeeds); test
 *    then reports in *bytes the length that was sent (the core relies on it to skip the rest of
 *    a message it cut into pieces), or the bytes delivered where the transport cannot know.
 *    Zero-byte messages are valid.
 *  - Put/get completion means the data is in place at the target (put) or locally (get).
 *  - One-sided access is checked by the owner of the memory before any byte is touched: an
 *    address range outside the registered region, an unknown or deregistered key, or an access
 *    the registration did not allow completes with HMC_PLUGIN_ERR_REMOTE.
 *  - When the connection breaks, every pending request on the endpoint completes with
 *    HMC_PLUGIN_ERR_PEER_LOST, and later posts fail with it -- except receives: messages that
 *    arrived whole before the break stay matchable, so a receive posted afterwards that matches
 *    one completes normally (a reply followed by a close is a common pattern), and only a
 *    receive matching nothing already arrived fails with HMC_PLUGIN_ERR_PEER_LOST.
 */
#ifndef HMC_PLUGIN_NET_H
#define HMC_PLUGIN_NET_H

#include "hmc/plugin/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The net ABI's major version: a version 2 table's hdr.abi_version, and the structs' below. */
#define HMC_NET_ABI_VERSION 2u
#define HMC_NET_ABI_HEADER_INIT(type) \
  { (uint32_t)sizeof(type), HMC_NET_ABI_VERSION }

/* Bounds on opaque blobs the core carries between peers. */
#define HMC_NET_HANDLE_MAX 256u  /* connection handle from listen */
#define HMC_NET_RKEY_MAX 256u    /* packed remote key from reg_mr, per device */
#define HMC_NET_HELLO_MAX 65536u /* connector's hello from connect_hello */

/* hmc_net_device_props_t.flags */
#define HMC_NET_FLAG_RMA (1u << 0)       /* iput/iget are offered */
#define HMC_NET_FLAG_TAGGED (1u << 1)    /* isend/irecv are offered */
#define HMC_NET_FLAG_SAME_HOST (1u << 2) /* reaches only processes on the same host */
#define HMC_NET_FLAG_NEEDS_REG (1u << 3) /* local buffers must be registered (mr != NULL) */
#define HMC_NET_FLAG_DMABUF (1u << 4)    /* reg_mr accepts device memory as a dma-buf fd */

/* Opaque plugin objects. */
typedef struct hmc_net_ctx hmc_net_ctx_t;
typedef struct hmc_net_listener hmc_net_listener_t;
typedef struct hmc_net_ep hmc_net_ep_t;
typedef struct hmc_net_mr hmc_net_mr_t;
typedef struct hmc_net_rkey hmc_net_rkey_t;
typedef struct hmc_net_request hmc_net_request_t;

/* Properties of one net device (NIC, rail, or transport flavour). The caller sets hdr; the
 * plugin fills every field that fits in hdr.struct_size. Strings are owned by the plugin and
 * live until finalize. A value of 0 for bandwidth or latency means "unknown": the core then
 * calibrates. Devices with the same nonzero nic_guid are ports or rails of one physical NIC (the
 * core does not count their bandwidth twice). */
typedef struct hmc_net_device_props {
  hmc_abi_header_t hdr;
  const char* name;        /* "tcp", "shm", "mlx5_0:1" */
  const char* pci_path;    /* sysfs PCI path, or NULL */
  uint64_t bandwidth_MBps; /* expected bandwidth, 10^6 bytes/s, 0 = unknown */
  uint32_t latency_ns;     /* expected one-way small-message latency, 0 = unknown */
  uint32_t flags;          /* HMC_NET_FLAG_* */
  uint32_t max_inflight;   /* requests per endpoint the plugin handles well, 0 = no limit */
  uint64_t max_msg_size;   /* largest single message or put/get, 0 = no limit */
  /* Interfaces whose memory this device reads and writes by pointer, without a dma-buf:
   * HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST) for host memory (every device that moves bytes sets
   * it), plus a vendor's bit where the transport reaches its device memory natively (UCX or
   * libfabric built with CUDA, legacy GPUDirect through nvidia_peermem). */
  uint64_t mem_ifaces;
  uint64_t nic_guid; /* the NIC's identity (node GUID, or a MAC), 0 = unknown */
  uint32_t nic_port; /* port of that NIC, 0 = unknown */
  /* The network this device is attached to, for pairing with a peer's device of the same plugin:
   * two devices whose fabric strings are equal reach each other whatever their names (an
   * InfiniBand subnet, a routable RoCE v2 network). NULL or "": the device reaches only the
   * peer's device of the same name (a transport flavour such as "tcp" or "shm"). */
  const char* fabric;
  /* Appended: for people (hmc-info), never interpreted by the core. Both NULL or "" when the
   * plugin has nothing to say; check with HMC_ABI_HAS_FIELD before reading.
   * link_layer: the device's link and transport in a few words ("InfiniBand", "Ethernet (RoCE
   * v2)", "TCP", "shared memory"), at most 63 bytes.
   * details: further properties, one per line as "name: value" (name without ':', lines
   * separated by '\n', no other control characters), in the order worth reading: what a user
   * checks when a device is slow or not used (ports, addresses with the one in use marked, link
   * rate, MTU, what memory it registers). The core shows at most 2047 bytes. */
  const char* link_layer;
  const char* details;
  /* Appended (HMC_HAS_NET_RMA_MEM_IFACES); read it with HMC_ABI_HAS_FIELD, 0 from a plugin that
   * predates it. Interfaces whose device memory this device registers BY POINTER for one-sided
   * operations only: reg_mr of such memory with dmabuf_fd -1 succeeds (or says why not), and
   * iput/iget move it between the NIC and the device directly (legacy GPUDirect through
   * nvidia_peermem). Unlike mem_ifaces it promises nothing else: the plugin may copy message
   * payloads with the CPU, so the core never passes such memory to isend/irecv nor, unregistered,
   * to iput/iget (it stages those). Never HMC_MEM_IFACE_HOST; needs HMC_NET_FLAG_RMA. A bit in
   * both masks means mem_ifaces; the core tries a dma-buf first where both sides can. */
  uint64_t rma_mem_ifaces;
} hmc_net_device_props_t;
#define HMC_HAS_NET_RMA_MEM_IFACES 1

/* Memory to register. addr/len always describe the virtual range the core will pass to
 * operations. For device memory, iface and device_ordinal say whose it is; when dmabuf_fd is not
 * -1 the fd (owned by the core, valid during the call only) and dmabuf_offset describe the same
 * bytes, and a device with HMC_NET_FLAG_DMABUF registers them through it. */
typedef struct hmc_net_mem_desc {
  hmc_abi_header_t hdr;
  void* addr;
  size_t len;
  uint32_t iface;         /* hmc_mem_iface_t */
  int32_t device_ordinal; /* the device plugin's device index, -1 for host memory */
  int32_t dmabuf_fd;      /* -1: none; register by pointer */
  uint32_t access;        /* HMC_NET_ACCESS_* */
  uint64_t dmabuf_offset; /* where addr lies inside the dma-buf */
} hmc_net_mem_desc_t;

/* One piece of a vectored put or get: len bytes between buf (registered as mr) and remote_addr. */
typedef struct hmc_net_iov {
  void* buf;
  size_t len;
  hmc_net_mr_t* mr;
  uint64_t remote_addr;
} hmc_net_iov_t;

#define HMC_NET_ACCESS_LOCAL (1u << 0)        /* used as a local buffer */
#define HMC_NET_ACCESS_REMOTE_READ (1u << 1)  /* peers may iget from it */
#define HMC_NET_ACCESS_REMOTE_WRITE (1u << 2) /* peers may iput into it */

typedef struct hmc_net_plugin_v2 {
  hmc_abi_header_t hdr;
  const char* name;                    /* short lowercase name: "hoststage", "ucx" */
  const char* version;                 /* the plugin's own version text */
  const hmc_config_var_t* config_vars; /* NULL-terminated, or NULL when none */

  /* --- required slots ------------------------------------------------------------------ */

  /* Creates a plugin context. host stays valid until finalize. Returns HMC_PLUGIN_ERR_NO_DEVICE
   * (with a logged reason) when the plugin has nothing to drive here; the core then skips it. */
  hmc_plugin_status_t (*init)(const hmc_host_services_t* host, hmc_net_ctx_t** ctx);
  /* Destroys the context. Every endpoint, listener, registration and request still open is
   * released. */
  hmc_plugin_status_t (*finalize)(hmc_net_ctx_t* ctx);

  hmc_plugin_status_t (*device_count)(hmc_net_ctx_t* ctx, int* count);
  hmc_plugin_status_t (*device_props)(hmc_net_ctx_t* ctx, int dev, hmc_net_device_props_t* props);

  /* Starts listening on device dev for one incoming connection. Writes at most
   * HMC_NET_HANDLE_MAX bytes of connection handle to handle and its length to *handle_len; the
   * core carries them to the peer, which passes them to connect. */
  hmc_plugin_status_t (*listen)(hmc_net_ctx_t* ctx, int dev, void* handle, size_t* handle_len,
                                hmc_net_listener_t** listener);
  /* Non-blocking accept: HMC_PLUGIN_SUCCESS with *ep set once the peer connected,
   * HMC_PLUGIN_IN_PROGRESS (and *ep untouched) while it has not. The endpoint returned must take
   * posts at once: the core may use it without calling ep_ready. */
  hmc_plugin_status_t (*accept)(hmc_net_listener_t* listener, hmc_net_ep_t** ep);
  hmc_plugin_status_t (*close_listener)(hmc_net_listener_t* listener);

  /* Starts connecting to the peer that produced handle. Returns an endpoint at once; it becomes
   * usable when ep_ready returns SUCCESS. */
  hmc_plugin_status_t (*connect)(hmc_net_ctx_t* ctx, int dev, const void* handle, size_t handle_len,
                                 hmc_net_ep_t** ep);
  /* SUCCESS once the endpoint is established (either side), IN_PROGRESS before, an error when
   * establishing failed. Operations may be posted only after SUCCESS. */
  hmc_plugin_status_t (*ep_ready)(hmc_net_ep_t* ep);
  /* Closes the endpoint. Every request still pending on it is released by the plugin; the core
   * must not test them afterwards. */
  hmc_plugin_status_t (*close_ep)(hmc_net_ep_t* ep);

  /* Tests a request. Returns SUCCESS with *done = 0 while it is pending. With *done = 1 the
   * request has ended, its result is the return value, *bytes (may be NULL) holds the bytes
   * received or moved, and the request is released. */
  hmc_plugin_status_t (*test)(hmc_net_request_t* req, int* done, size_t* bytes);

  /* --- optional slots (NULL, or beyond hdr.struct_size, means not supported) ------------ */

  /* Registers memory with device dev. Writes that device's packed remote key (at most
   * HMC_NET_RKEY_MAX bytes) for peers whose endpoint is on the same device; the registration
   * serves local buffers only on endpoints of dev. Required when any device sets
   * HMC_NET_FLAG_RMA or HMC_NET_FLAG_NEEDS_REG. NOT_SUPPORTED: this device cannot reach this
   * memory (the core then stages it); NO_MEMORY: the kernel refused to pin it (log why: a low
   * RLIMIT_MEMLOCK is the usual cause). */
  hmc_plugin_status_t (*reg_mr)(hmc_net_ctx_t* ctx, int dev, const hmc_net_mem_desc_t* mem,
                                hmc_net_mr_t** mr, void* rkey, size_t* rkey_len);
  hmc_plugin_status_t (*dereg_mr)(hmc_net_ctx_t* ctx, hmc_net_mr_t* mr);

  /* Two-sided tagged messages (devices with HMC_NET_FLAG_TAGGED). buf must stay valid until the
   * request ends. mr may be NULL unless the device sets HMC_NET_FLAG_NEEDS_REG. A send ends when
   * buf may be reused (not when the peer received it); a receive when the message is in buf. */
  hmc_plugin_status_t (*isend)(hmc_net_ep_t* ep, const void* buf, size_t len, hmc_net_mr_t* mr,
                               uint64_t tag, hmc_net_request_t** req);
  hmc_plugin_status_t (*irecv)(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t* mr,
                               uint64_t tag, hmc_net_request_t** req);

  /* One-sided (devices with HMC_NET_FLAG_RMA). rkey_unpack turns a peer's packed key into a
   * handle valid on this endpoint; remote_addr is an address inside the peer's region. */
  hmc_plugin_status_t (*rkey_unpack)(hmc_net_ep_t* ep, const void* rkey, size_t rkey_len,
                                     hmc_net_rkey_t** out);
  hmc_plugin_status_t (*rkey_release)(hmc_net_rkey_t* rkey);
  hmc_plugin_status_t (*iput)(hmc_net_ep_t* ep, const void* buf, size_t len, hmc_net_mr_t* mr,
                              uint64_t remote_addr, hmc_net_rkey_t* rkey, hmc_net_request_t** req);
  hmc_plugin_status_t (*iget)(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t* mr,
                              uint64_t remote_addr, hmc_net_rkey_t* rkey, hmc_net_request_t** req);

  /* Cancels a pending request. SUCCESS: test will end it with HMC_PLUGIN_ERR_CANCELLED.
   * NOT_SUPPORTED: it can no longer be cancelled and will end normally. Receives not yet
   * matched must be cancellable. */
  hmc_plugin_status_t (*cancel)(hmc_net_request_t* req);

  /* Advances every endpoint of the context. Called on every pass while a peer uses the plugin,
   * requests outstanding or not. Without it, test is the only progress. */
  hmc_plugin_status_t (*progress)(hmc_net_ctx_t* ctx);

  /* A file descriptor that becomes readable when progress has something to do, so that an idle
   * core can sleep in poll(2). The plugin owns it. Without it the core polls periodically. */
  hmc_plugin_status_t (*wait_fd)(hmc_net_ctx_t* ctx, int* fd);
  /* Called before the core sleeps on wait_fd. SUCCESS: nothing is pending that would not wake
   * the fd, sleeping is safe (a plugin whose peers write into shared memory asks them to signal
   * the fd from now on). IN_PROGRESS: there is work already; the core calls progress instead of
   * sleeping. Without this slot the core bounds its sleeps to a short interval. */
  hmc_plugin_status_t (*arm)(hmc_net_ctx_t* ctx);

  /* The connector's half of the handshake, carried by the core's control plane (offer both or
   * neither). A plugin whose listening side must learn who connects (the connector's address)
   * can have it there before any traffic on the data path, as it would have it had both sides
   * created their endpoints from exchanged addresses. For UCX this matters: an endpoint made in
   * answer to traffic that already arrived leaves the receiving interface first in the worker's
   * progress order, and each completion on it then waits for a poll of every other interface.
   *  - connect_hello: called once, right after connect returned ep and before ep_ready. Writes
   *    at most *len bytes (on entry HMC_NET_HELLO_MAX) and sets *len; 0 means nothing to carry.
   *    Once it gave a hello, the plugin sends none of its own on the data path.
   *  - accept_hello: the listening side gets those bytes before accept is expected to return
   *    the endpoint they announce; an error fails the accept.
   * Where the core carries no hello (these slots missing on either side, or a caller that uses
   * listen/connect/accept directly), the plugin runs its handshake on the data path: a plugin
   * offering these slots must keep working when connect_hello is never called. */
  hmc_plugin_status_t (*connect_hello)(hmc_net_ep_t* ep, void* hello, size_t* len);
  hmc_plugin_status_t (*accept_hello)(hmc_net_listener_t* listener, const void* hello, size_t len);

  /* Makes data that a receive or get placed into memory registered by pointer or dma-buf (not
   * host memory) visible to the device that owns it, as GPUDirect RDMA needs after the NIC's
   * writes (a read through the NIC that orders them). The core calls it after such a transfer
   * ended and before it reports the transfer complete; a plugin whose writes need no flush
   * leaves the slot NULL. */
  hmc_plugin_status_t (*iflush)(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t* mr,
                                hmc_net_request_t** req);

  /* Vectored one-sided operations (devices with HMC_NET_FLAG_RMA): count pieces against one
   * remote key, ending as one request when all pieces are in place. The iov array is read
   * during the call only. Same checks and completion as iput/iget per piece; a piece the target
   * refuses ends the whole request with that error. */
  hmc_plugin_status_t (*iput_v)(hmc_net_ep_t* ep, const hmc_net_iov_t* iov, size_t count,
                                hmc_net_rkey_t* rkey, hmc_net_request_t** req);
  hmc_plugin_status_t (*iget_v)(hmc_net_ep_t* ep, const hmc_net_iov_t* iov, size_t count,
                                hmc_net_rkey_t* rkey, hmc_net_request_t** req);

  /* A put whose notification travels with the data (RDMA write with immediate, or a message
   * ordered after the write on the same connection): the target's plugin makes `value` available
   * to notify_poll on the target's endpoint only once the put's data is in place there.
   * notify_poll returns SUCCESS with one value (in the order the puts were posted), or
   * IN_PROGRESS when none is waiting; the core calls it in progress for endpoints of plugins that
   * offer it (offer both or neither). Without them the core sends the notification on its
   * control plane after the put ended. */
  hmc_plugin_status_t (*iput_notify)(hmc_net_ep_t* ep, const void* buf, size_t len,
                                     hmc_net_mr_t* mr, uint64_t remote_addr, hmc_net_rkey_t* rkey,
                                     uint64_t value, hmc_net_request_t** req);
  hmc_plugin_status_t (*notify_poll)(hmc_net_ep_t* ep, uint64_t* value);
} hmc_net_plugin_v2_t;

/* The entry symbol's type and name. */
typedef const hmc_net_plugin_v2_t* (*hmc_net_plugin_v2_entry_t)(void);
#define HMC_NET_PLUGIN_ENTRY_V2 "hmc_net_plugin_v2"
/* The previous version's entry symbol: a core finding only it says the plugin needs rebuilding. */
#define HMC_NET_PLUGIN_ENTRY_V1 "hmc_net_plugin_v1"

#ifdef __cplusplus
}
#endif
#endif /* HMC_PLUGIN_NET_H */
