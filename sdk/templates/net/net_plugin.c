/*
 * Template of an hmc net plugin (net ABI v2): a complete, working in-process loopback transport.
 *
 * It moves tagged messages between two endpoints of the same process, which is enough to show
 * how the slots fit together: listen gives a connection handle the core carries to the peer,
 * connect/accept pair the endpoints, isend/irecv post requests, test ends them. Copy this
 * directory, then replace the loopback parts (marked "TO DO") with your transport.
 *
 * Rules that matter (sdk/include/hmc/plugin/common.h and net.h have the details):
 *  - Export exactly one symbol, hmc_net_plugin_v2 (hmc_add_plugin() hides everything else).
 *  - The core serialises all calls into one context; this plugin still takes a lock because the
 *    two ends of a loopback connection may belong to two contexts (a real transport whose peer is
 *    another process usually needs none, unless it runs threads of its own).
 *  - No slot blocks: accept/ep_ready/test answer IN_PROGRESS (or done = 0) and return.
 *  - Messages with the same tag on one endpoint match receives in the order they were sent; a
 *    message longer than the receive buffer ends the receive with HMC_PLUGIN_ERR_TRUNCATED.
 *  - When the peer goes away, pending requests end with HMC_PLUGIN_ERR_PEER_LOST.
 *  - Options: declare HMC_<PLUGIN>_<NAME> variables in config_vars and read them with
 *    host->config_get (see the device template); log through host->log only.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hmc/plugin/net.h"

/* TO DO: your plugin's name (equal to NAME in CMakeLists.txt) and version. */
#define PLUGIN_NAME "template"
#define PLUGIN_VERSION "0.1.0"

/* ---- objects -------------------------------------------------------------------------------- */

/* The connection handle: what listen writes and the peer's connect reads. TO DO: your address
 * (IP and port, GID and QP number ...), at most HMC_NET_HANDLE_MAX bytes. */
#define HANDLE_MAGIC 0x4c4f4f50u /* "LOOP" */
typedef struct loop_handle {
  uint32_t magic;
  uint32_t pid; /* loopback reaches only its own process */
  uint64_t listener_id;
} loop_handle_t;

struct hmc_net_ctx {
  const hmc_host_services_t* host;
  struct hmc_net_listener* listeners; /* every listener of this context */
  struct hmc_net_ep* eps;             /* every endpoint of this context, accepted or not */
};

struct hmc_net_listener {
  hmc_net_ctx_t* ctx;
  uint64_t id;
  struct hmc_net_ep* pending; /* connected, not yet returned by accept, oldest first */
  struct hmc_net_listener* next_global;
  struct hmc_net_listener* next_in_ctx;
};

/* A message that arrived before a matching receive was posted. */
typedef struct message {
  struct message* next;
  uint64_t tag;
  size_t len;
  unsigned char data[];
} message_t;

enum { REQ_SEND = 1, REQ_RECV = 2 };

struct hmc_net_request {
  struct hmc_net_ep* ep;
  int kind;
  int done;
  hmc_plugin_status_t status;
  size_t bytes;
  void* buf; /* receives: where the message goes */
  size_t len;
  uint64_t tag;
  struct hmc_net_request* next_posted; /* receives waiting for a message, oldest first */
  struct hmc_net_request* next_live;   /* every request of the endpoint not yet released */
};

struct hmc_net_ep {
  hmc_net_ctx_t* ctx;
  struct hmc_net_ep* peer; /* NULL once the peer closed */
  int lost;
  struct hmc_net_listener* listener; /* set while waiting to be accepted */
  message_t* unexpected;
  struct hmc_net_request* posted;
  struct hmc_net_request* live;
  struct hmc_net_ep* next_in_ctx;
  struct hmc_net_ep* next_pending;
};

/* Process-wide: a connecting context must find a listener of another context. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hmc_net_listener* g_listeners;
static uint64_t g_next_listener_id = 1;

static void plugin_log(const hmc_host_services_t* host, int level, const char* message) {
  if (host->log_enabled(host->host_ctx, level)) host->log(host->host_ctx, level, message);
}

/* ---- list helpers (all under g_lock) ----------------------------------------------------------
 */

#define UNLINK(head, item, next_field)                                     \
  do {                                                                     \
    for (__typeof__(item)* pp_ = &(head); *pp_; pp_ = &(*pp_)->next_field) \
      if (*pp_ == (item)) {                                                \
        *pp_ = (item)->next_field;                                         \
        break;                                                             \
      }                                                                    \
  } while (0)

#define APPEND(head, item, next_field)      \
  do {                                      \
    __typeof__(item)* pp_ = &(head);        \
    while (*pp_) pp_ = &(*pp_)->next_field; \
    (item)->next_field = NULL;              \
    *pp_ = (item);                          \
  } while (0)

static void complete(struct hmc_net_request* r, hmc_plugin_status_t st, size_t bytes) {
  r->done = 1;
  r->status = st;
  r->bytes = bytes;
}

/* Copies a message into a posted receive and ends it. A truncated receive reports the length
 * that was sent (the core relies on it to skip the rest of a message it cut into pieces). */
static void deliver(struct hmc_net_request* recv, const void* data, size_t len) {
  size_t n = len < recv->len ? len : recv->len;
  if (n) memcpy(recv->buf, data, n);
  complete(recv, len > recv->len ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS, len);
}

static void ep_close_locked(struct hmc_net_ep* ep) {
  if (ep->peer) {
    struct hmc_net_ep* peer = ep->peer;
    peer->peer = NULL;
    peer->lost = 1;
    /* The peer's receives can never be matched now. */
    while (peer->posted) {
      struct hmc_net_request* r = peer->posted;
      peer->posted = r->next_posted;
      complete(r, HMC_PLUGIN_ERR_PEER_LOST, 0);
    }
  }
  if (ep->listener) UNLINK(ep->listener->pending, ep, next_pending);
  while (ep->unexpected) {
    message_t* m = ep->unexpected;
    ep->unexpected = m->next;
    free(m);
  }
  while (ep->live) { /* released here: the core must not test them afterwards */
    struct hmc_net_request* r = ep->live;
    ep->live = r->next_live;
    free(r);
  }
  UNLINK(ep->ctx->eps, ep, next_in_ctx);
  free(ep);
}

static void listener_close_locked(struct hmc_net_listener* l) {
  UNLINK(g_listeners, l, next_global);
  UNLINK(l->ctx->listeners, l, next_in_ctx);
  while (l->pending) ep_close_locked(l->pending); /* unlinks itself from l->pending */
  free(l);
}

static struct hmc_net_ep* ep_new_locked(hmc_net_ctx_t* ctx) {
  struct hmc_net_ep* ep = calloc(1, sizeof *ep);
  if (!ep) return NULL;
  ep->ctx = ctx;
  ep->next_in_ctx = ctx->eps;
  ctx->eps = ep;
  return ep;
}

static struct hmc_net_request* req_new_locked(struct hmc_net_ep* ep, int kind) {
  struct hmc_net_request* r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->ep = ep;
  r->kind = kind;
  r->next_live = ep->live;
  ep->live = r;
  return r;
}

/* ---- lifetime and devices ------------------------------------------------------------------- */

static hmc_plugin_status_t net_init(const hmc_host_services_t* host, hmc_net_ctx_t** out) {
  if (!host || !out) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* TO DO: open your devices. With nothing to drive here, log why and return
   * HMC_PLUGIN_ERR_NO_DEVICE: the core then skips the plugin quietly. */
  hmc_net_ctx_t* ctx = calloc(1, sizeof *ctx);
  if (!ctx) return HMC_PLUGIN_ERR_NO_MEMORY;
  ctx->host = host;
  plugin_log(host, HMC_LOG_DEBUG, "in-process loopback ready");
  *out = ctx;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t net_finalize(hmc_net_ctx_t* ctx) {
  if (!ctx) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&g_lock);
  while (ctx->listeners) listener_close_locked(ctx->listeners);
  while (ctx->eps) ep_close_locked(ctx->eps);
  pthread_mutex_unlock(&g_lock);
  free(ctx);
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t net_device_count(hmc_net_ctx_t* ctx, int* count) {
  if (!ctx || !count) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  *count = 1; /* TO DO: your NICs or rails */
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t net_device_props(hmc_net_ctx_t* ctx, int dev,
                                            hmc_net_device_props_t* p) {
  if (!ctx || dev != 0 || !HMC_ABI_HAS_FIELD(p, hmc_net_device_props_t, flags))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  /* Fill every field that fits in p->hdr.struct_size. TO DO: your device's real values; announce
   * in flags only what the slots really offer (RMA needs reg_mr, rkey_*, iput and iget). */
  p->name = "loopback";
  p->pci_path = NULL;
  p->bandwidth_MBps = 0; /* unknown: the core measures */
  p->latency_ns = 0;
  p->flags = HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_SAME_HOST;
  if (HMC_ABI_HAS_FIELD(p, hmc_net_device_props_t, max_inflight)) p->max_inflight = 0;
  if (HMC_ABI_HAS_FIELD(p, hmc_net_device_props_t, max_msg_size)) p->max_msg_size = 0;
  /* Memory interfaces reached by pointer (add a vendor's bit where your transport reads its
   * device memory natively; set HMC_NET_FLAG_DMABUF where reg_mr takes dma-buf fds), and the
   * NIC's identity (0: unknown). */
  if (HMC_ABI_HAS_FIELD(p, hmc_net_device_props_t, mem_ifaces))
    p->mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
  if (HMC_ABI_HAS_FIELD(p, hmc_net_device_props_t, nic_port)) {
    p->nic_guid = 0;
    p->nic_port = 0;
  }
  return HMC_PLUGIN_SUCCESS;
}

/* ---- connections ---------------------------------------------------------------------------- */

static hmc_plugin_status_t net_listen(hmc_net_ctx_t* ctx, int dev, void* handle, size_t* handle_len,
                                      hmc_net_listener_t** out) {
  if (!ctx || dev != 0 || !handle || !handle_len || !out) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  struct hmc_net_listener* l = calloc(1, sizeof *l);
  if (!l) return HMC_PLUGIN_ERR_NO_MEMORY;
  l->ctx = ctx;
  pthread_mutex_lock(&g_lock);
  l->id = g_next_listener_id++;
  l->next_global = g_listeners;
  g_listeners = l;
  l->next_in_ctx = ctx->listeners;
  ctx->listeners = l;
  pthread_mutex_unlock(&g_lock);

  loop_handle_t h = {HANDLE_MAGIC, (uint32_t)getpid(), l->id};
  memcpy(handle, &h, sizeof h);
  *handle_len = sizeof h;
  *out = l;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t net_accept(hmc_net_listener_t* l, hmc_net_ep_t** out) {
  if (!l || !out) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
  pthread_mutex_lock(&g_lock);
  if (l->pending) {
    struct hmc_net_ep* ep = l->pending;
    l->pending = ep->next_pending;
    ep->listener = NULL;
    *out = ep;
    st = HMC_PLUGIN_SUCCESS;
  }
  pthread_mutex_unlock(&g_lock);
  return st;
}

static hmc_plugin_status_t net_close_listener(hmc_net_listener_t* l) {
  if (!l) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&g_lock);
  listener_close_locked(l);
  pthread_mutex_unlock(&g_lock);
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t net_connect(hmc_net_ctx_t* ctx, int dev, const void* handle,
                                       size_t handle_len, hmc_net_ep_t** out) {
  loop_handle_t h;
  if (!ctx || dev != 0 || !handle || handle_len != sizeof h || !out)
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  memcpy(&h, handle, sizeof h);
  if (h.magic != HANDLE_MAGIC) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (h.pid != (uint32_t)getpid()) {
    plugin_log(ctx->host, HMC_LOG_DEBUG, "the peer is another process: loopback cannot reach it");
    return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  }
  hmc_plugin_status_t st = HMC_PLUGIN_SUCCESS;
  pthread_mutex_lock(&g_lock);
  struct hmc_net_listener* l = g_listeners;
  while (l && l->id != h.listener_id) l = l->next_global;
  struct hmc_net_ep* mine = NULL;
  struct hmc_net_ep* theirs = NULL;
  if (!l) {
    st = HMC_PLUGIN_ERR_PEER_LOST; /* the listener was closed */
  } else if (!(mine = ep_new_locked(ctx)) || !(theirs = ep_new_locked(l->ctx))) {
    if (mine) ep_close_locked(mine);
    st = HMC_PLUGIN_ERR_NO_MEMORY;
  } else {
    mine->peer = theirs;
    theirs->peer = mine;
    theirs->listener = l;
    APPEND(l->pending, theirs, next_pending);
    *out = mine;
  }
  pthread_mutex_unlock(&g_lock);
  return st;
}

static hmc_plugin_status_t net_ep_ready(hmc_net_ep_t* ep) {
  /* Loopback endpoints are usable at once. TO DO: finish your handshake step by step here. */
  return ep ? HMC_PLUGIN_SUCCESS : HMC_PLUGIN_ERR_INVALID_ARGUMENT;
}

static hmc_plugin_status_t net_close_ep(hmc_net_ep_t* ep) {
  if (!ep) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  pthread_mutex_lock(&g_lock);
  ep_close_locked(ep);
  pthread_mutex_unlock(&g_lock);
  return HMC_PLUGIN_SUCCESS;
}

/* ---- tagged messages ------------------------------------------------------------------------ */

static hmc_plugin_status_t net_isend(hmc_net_ep_t* ep, const void* buf, size_t len,
                                     hmc_net_mr_t* mr, uint64_t tag, hmc_net_request_t** out) {
  if (!ep || (!buf && len) || !out) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  hmc_plugin_status_t st = HMC_PLUGIN_SUCCESS;
  pthread_mutex_lock(&g_lock);
  struct hmc_net_ep* peer = ep->peer;
  struct hmc_net_request* r = NULL;
  if (!peer) {
    st = HMC_PLUGIN_ERR_PEER_LOST;
  } else if (!(r = req_new_locked(ep, REQ_SEND))) {
    st = HMC_PLUGIN_ERR_NO_MEMORY;
  } else {
    /* The first posted receive with this tag takes the message; else the peer queues a copy.
     * TO DO: your transport posts the send and completes it when the NIC is done with buf. */
    struct hmc_net_request* match = peer->posted;
    while (match && match->tag != tag) match = match->next_posted;
    if (match) {
      UNLINK(peer->posted, match, next_posted);
      deliver(match, buf, len);
    } else {
      message_t* m = malloc(sizeof *m + len);
      if (!m) {
        UNLINK(ep->live, r, next_live);
        free(r);
        r = NULL;
        st = HMC_PLUGIN_ERR_NO_MEMORY;
      } else {
        m->tag = tag;
        m->len = len;
        if (len) memcpy(m->data, buf, len);
        APPEND(peer->unexpected, m, next);
      }
    }
    if (r) complete(r, HMC_PLUGIN_SUCCESS, len);
  }
  if (r) *out = r;
  pthread_mutex_unlock(&g_lock);
  return st;
}

static hmc_plugin_status_t net_irecv(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t* mr,
                                     uint64_t tag, hmc_net_request_t** out) {
  if (!ep || (!buf && len) || !out) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  hmc_plugin_status_t st = HMC_PLUGIN_SUCCESS;
  pthread_mutex_lock(&g_lock);
  message_t* m = ep->unexpected;
  while (m && m->tag != tag) m = m->next;
  struct hmc_net_request* r = NULL;
  if (!m && ep->lost) {
    st = HMC_PLUGIN_ERR_PEER_LOST; /* nothing queued can match, and nothing more will come */
  } else if (!(r = req_new_locked(ep, REQ_RECV))) {
    st = HMC_PLUGIN_ERR_NO_MEMORY;
  } else {
    r->buf = buf;
    r->len = len;
    r->tag = tag;
    if (m) {
      UNLINK(ep->unexpected, m, next);
      deliver(r, m->data, m->len);
      free(m);
    } else {
      APPEND(ep->posted, r, next_posted);
    }
    *out = r;
  }
  pthread_mutex_unlock(&g_lock);
  return st;
}

static hmc_plugin_status_t net_test(hmc_net_request_t* r, int* done, size_t* bytes) {
  if (!r || !done) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  hmc_plugin_status_t st = HMC_PLUGIN_SUCCESS;
  pthread_mutex_lock(&g_lock);
  if (!r->done) {
    *done = 0;
  } else {
    *done = 1;
    if (bytes) *bytes = r->bytes;
    st = r->status;
    UNLINK(r->ep->live, r, next_live);
    free(r);
  }
  pthread_mutex_unlock(&g_lock);
  return st;
}

static hmc_plugin_status_t net_cancel(hmc_net_request_t* r) {
  if (!r) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  hmc_plugin_status_t st = HMC_PLUGIN_ERR_NOT_SUPPORTED; /* already ended: it ends normally */
  pthread_mutex_lock(&g_lock);
  if (!r->done && r->kind == REQ_RECV) {
    UNLINK(r->ep->posted, r, next_posted);
    complete(r, HMC_PLUGIN_ERR_CANCELLED, 0);
    st = HMC_PLUGIN_SUCCESS;
  }
  pthread_mutex_unlock(&g_lock);
  return st;
}

/* ---- the table ------------------------------------------------------------------------------ */

static const hmc_net_plugin_v2_t plugin_table = {
    .hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_plugin_v2_t),
    .name = PLUGIN_NAME,
    .version = PLUGIN_VERSION,
    .config_vars = NULL, /* TO DO: your HMC_<PLUGIN>_<NAME> options, NULL-terminated */
    /* required */
    .init = net_init,
    .finalize = net_finalize,
    .device_count = net_device_count,
    .device_props = net_device_props,
    .listen = net_listen,
    .accept = net_accept,
    .close_listener = net_close_listener,
    .connect = net_connect,
    .ep_ready = net_ep_ready,
    .close_ep = net_close_ep,
    .test = net_test,
    /* optional: NULL means "not supported" */
    .reg_mr = NULL, /* TO DO with HMC_NET_FLAG_NEEDS_REG or RMA */
    .dereg_mr = NULL,
    .isend = net_isend,
    .irecv = net_irecv,
    .rkey_unpack = NULL, /* TO DO with HMC_NET_FLAG_RMA: rkey_unpack, rkey_release, iput, iget */
    .rkey_release = NULL,
    .iput = NULL,
    .iget = NULL,
    .cancel = net_cancel,
    .progress = NULL, /* TO DO: drive your completion queues here */
    .wait_fd = NULL,  /* TO DO: an fd that wakes the core when progress has work */
    .arm = NULL,
    /* A plugin whose listener must learn who connects before any traffic: the core can carry
     * the connector's hello (net.h). */
    .connect_hello = NULL,
    .accept_hello = NULL,
};

HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
  return &plugin_table;
}
