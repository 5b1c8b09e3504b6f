/*
 * Template of an hmc net plugin (net ABI v2): tagged messages between processes of one host over
 * Unix stream sockets. Copy this directory, then replace the parts marked "TO DO" with your
 * transport; the rest (matching, ordering, unexpected messages, truncation, cancel, peer loss,
 * progress and sleeping) is what every transport must do the same way.
 *
 * The contract is share/hmc/plugin-contract.md of the installed SDK (its sections are cited as
 * "contract 3.4" below); the slots are described in include/hmc/plugin/net.h.
 *
 * The wire, per connection (one socket):
 *   connector -> acceptor   hello {magic, wire version, cookie}
 *   acceptor  -> connector  hello {magic, wire version, cookie}
 *   then, both ways         message {tag, length} followed by length bytes
 * The cookie is a random number the listener put in its connection handle; the core carries the
 * handle to the peer over its control plane (authenticated when HMC_AUTH_TOKEN is set), so a
 * process that merely finds the socket cannot connect (contract 3.3: the core does not
 * authenticate data connections, a plugin does).
 *
 * Threading: the core serialises every call into one context and its objects (contract 3.1), and
 * this plugin runs no threads of its own, so it takes no locks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "hmc/plugin/net.h"

/* TO DO: your plugin's name (equal to NAME in CMakeLists.txt) and version. */
#ifndef PLUGIN_NAME
#define PLUGIN_NAME "template"
#endif
#define PLUGIN_VERSION "0.2.0"

/* The plugin's one option (contract 5.1): declared in config_vars, read through config_get,
 * which returns NULL when the variable is unset (the core does not apply the declared default:
 * the plugin does, from the same text). TO DO: your options, HMC_<PLUGIN>_<NAME>. */
#define SOCKBUF_VAR "HMC_TEMPLATE_SOCKBUF"
#define SOCKBUF_DEFAULT "0"
#define SOCKBUF_MIN 4096ull
#define SOCKBUF_MAX (1ull << 30)

/* Deliberate bugs, for the checker's own tests only (tests/plugin builds this file once per bug,
 * with -DTEMPLATE_BREAK=n, and expects hmc-plugin-check to name the rule each breaks). Delete. */
#ifndef TEMPLATE_BREAK
#define TEMPLATE_BREAK 0
#endif
#define BREAK_ORDER 1      /* a message matches the newest posted receive of its tag */
#define BREAK_TRUNC_LEN 2  /* a truncated receive reports 0 bytes, not the length sent */
#define BREAK_DROP_LOST 3  /* messages that arrived before the peer left are dropped with it */
#define BREAK_NULL_IRECV 4 /* the device says HMC_NET_FLAG_TAGGED, the table has no irecv */

/* ---- the wire: TO DO, your transport's addressing and handshake ----------------------------- */

#define WIRE_MAGIC 0x544d4348u /* "HCMT" */
#define WIRE_VERSION 1u        /* raised by any change of the wire below */

/* What listen writes and connect reads (at most HMC_NET_HANDLE_MAX bytes): a socket name in
 * Linux's abstract namespace (nothing to unlink) and the cookie. */
typedef struct wire_handle {
  uint32_t magic, version;
  uint64_t cookie;
  char name[48];
} wire_handle_t;

/* Sent by each side first (the acceptor's echoes the cookie: the connector reached the right
 * listener). Magic, version and cookie stay first in every future wire version. */
typedef struct wire_hello {
  uint32_t magic, version;
  uint64_t cookie;
} wire_hello_t;

typedef struct wire_msg {
  uint64_t tag, len;
} wire_msg_t;

/* ---- objects --------------------------------------------------------------------------------- */

typedef enum { EP_CONNECTING, EP_HELLO, EP_READY, EP_LOST } ep_stage_t;
typedef enum { REQ_SEND, REQ_RECV } req_kind_t;

struct hmc_net_ctx {
  const hmc_host_services_t* host;
  int epfd; /* wait_fd: every socket of the context */
  int sockbuf;
  struct hmc_net_ep* eps;
  struct hmc_net_listener* listeners;
};

struct hmc_net_request {
  struct hmc_net_ep* ep;
  req_kind_t kind;
  int done;
  hmc_plugin_status_t status;
  size_t bytes; /* moved; for a receive, the length that was sent */
  uint64_t tag;
  unsigned char* buf;
  size_t len;
  wire_msg_t hdr;               /* sends: the header written before buf */
  size_t off;                   /* sends: bytes of hdr and buf written so far */
  struct hmc_net_request* next; /* in the send queue or the posted receives */
  struct hmc_net_request* next_live;
};

/* A message read before its receive was posted (contract 3.4), possibly still arriving. */
typedef struct message {
  struct message* next;
  uint64_t tag;
  size_t len, got;
  struct hmc_net_request* waiter; /* a receive that matched it before it was whole */
  unsigned char data[];
} message_t;

struct hmc_net_ep {
  hmc_net_ctx_t* ctx;
  int fd;
  ep_stage_t stage;
  int connector;
  hmc_plugin_status_t failure; /* why establishing failed */
  struct sockaddr_un addr;     /* connector: where to connect */
  socklen_t addr_len;
  wire_hello_t hello_out, hello_in;
  size_t hello_out_off, hello_in_off;
  uint64_t cookie;
  uint32_t epoll_events;
  struct hmc_net_request* sendq;  /* oldest first; the head is being written */
  struct hmc_net_request* posted; /* receives waiting for a message, oldest first */
  message_t* unexpected;          /* oldest first */
  /* The message being read: header, then payload into a receive or an unexpected message. */
  wire_msg_t in_hdr;
  size_t in_hdr_off, in_got;
  struct hmc_net_request* in_recv;
  message_t* in_msg;
  struct hmc_net_request* live; /* every request not yet released by test */
  struct hmc_net_ep* next_in_ctx;
};

struct hmc_net_listener {
  hmc_net_ctx_t* ctx;
  int fd;
  uint64_t cookie;
  struct hmc_net_ep* ep; /* the accepted connection, until accept returns it */
  struct hmc_net_listener* next_in_ctx;
};

/* Log lines reach the core's log as "[net/template] ..." (contract 5.3). */
static void plugin_log(hmc_net_ctx_t* ctx, int level, const char* fmt, ...) {
  const hmc_host_services_t* h = ctx->host;
  if (!h->log_enabled(h->host_ctx, level)) return;
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  h->log(h->host_ctx, level, text);
}

#define UNLINK(head, item, field)                                     \
  do {                                                                \
    for (__typeof__(item)* pp_ = &(head); *pp_; pp_ = &(*pp_)->field) \
      if (*pp_ == (item)) {                                           \
        *pp_ = (item)->field;                                         \
        break;                                                        \
      }                                                               \
  } while (0)

#define APPEND(head, item, field)      \
  do {                                 \
    __typeof__(item)* pp_ = &(head);   \
    while (*pp_) pp_ = &(*pp_)->field; \
    (item)->field = NULL;              \
    *pp_ = (item);                     \
  } while (0)

static void complete(struct hmc_net_request* r, hmc_plugin_status_t st, size_t bytes) {
  r->done = 1;
  r->status = st;
  r->bytes = bytes;
}

/* Ends a receive whose message of sent bytes is in place. The length reported is the one sent,
 * also when it did not fit (contract 3.4: the core skips the rest of a message it cut up). */
static void finish_recv(struct hmc_net_request* r, size_t sent) {
  if (sent > r->len)
    complete(r, HMC_PLUGIN_ERR_TRUNCATED, TEMPLATE_BREAK == BREAK_TRUNC_LEN ? 0 : sent);
  else
    complete(r, HMC_PLUGIN_SUCCESS, sent);
}

/* ---- socket I/O: TO DO, your transport's posting and completion ----------------------------- */

/* Write what is left of total bytes (the iovecs') or read what is left of len bytes at p, *off
 * done so far, without blocking. 1: all done; 0: the socket would block; -1: the connection is
 * gone (errno says why, 0 for the peer's close). */
static int write_some(int fd, const struct iovec* iov, int n, size_t total, size_t* off) {
  while (*off < total) {
    struct iovec v[2];
    int k = 0;
    size_t skip = *off;
    for (int i = 0; i < n; ++i) {
      if (skip >= iov[i].iov_len) {
        skip -= iov[i].iov_len;
        continue;
      }
      v[k].iov_base = (char*)iov[i].iov_base + skip;
      v[k++].iov_len = iov[i].iov_len - skip;
      skip = 0;
    }
    struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)k};
    ssize_t w = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL); /* a lost peer is no SIGPIPE */
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    *off += (size_t)w;
  }
  return 1;
}

static int read_some(int fd, void* p, size_t len, size_t* off) {
  while (*off < len) {
    ssize_t r = recv(fd, (char*)p + *off, len - *off, MSG_DONTWAIT);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    if (r == 0) {
      errno = 0;
      return -1;
    }
    *off += (size_t)r;
  }
  return 1;
}

/* The connection is gone (contract 3.9): every pending request ends PEER_LOST, except that
 * messages which arrived whole stay matchable by receives posted later. */
static void ep_lost(struct hmc_net_ep* ep, const char* why) {
  if (ep->stage == EP_LOST) return;
  plugin_log(ep->ctx, HMC_LOG_INFO, "connection lost (%s%s%s)", why, errno ? ": " : "",
             errno ? strerror(errno) : "the peer closed it");
  ep->stage = EP_LOST;
  epoll_ctl(ep->ctx->epfd, EPOLL_CTL_DEL, ep->fd, NULL);
  close(ep->fd);
  ep->fd = -1;
  for (struct hmc_net_request* r = ep->sendq; r; r = r->next)
    complete(r, HMC_PLUGIN_ERR_PEER_LOST, 0);
  for (struct hmc_net_request* r = ep->posted; r; r = r->next)
    complete(r, HMC_PLUGIN_ERR_PEER_LOST, 0);
  ep->sendq = ep->posted = NULL;
  if (ep->in_recv) complete(ep->in_recv, HMC_PLUGIN_ERR_PEER_LOST, 0);
  ep->in_recv = NULL;
  for (message_t** pm = &ep->unexpected; *pm;) {
    message_t* m = *pm;
    if (m->got == m->len && TEMPLATE_BREAK != BREAK_DROP_LOST) {
      pm = &m->next;
      continue;
    }
    if (m->waiter) complete(m->waiter, HMC_PLUGIN_ERR_PEER_LOST, 0);
    *pm = m->next;
    free(m);
  }
  ep->in_msg = NULL;
}

/* The first receive of the list waiting for tag (oldest first: contract 3.4). */
static struct hmc_net_request* match_posted(struct hmc_net_request* r, uint64_t tag) {
  struct hmc_net_request* found = NULL;
  for (; r; r = r->next)
    if (r->tag == tag) {
      found = r;
      if (TEMPLATE_BREAK != BREAK_ORDER) break;
    }
  return found;
}

/* Header read: the message goes to the oldest matching receive, or is kept as unexpected. */
static int start_message(struct hmc_net_ep* ep) {
  ep->in_got = 0;
  ep->in_recv = match_posted(ep->posted, ep->in_hdr.tag);
  if (ep->in_recv) {
    UNLINK(ep->posted, ep->in_recv, next);
    return 1;
  }
  /* TO DO: a transport bounds the memory of unexpected messages (flow control, or rendezvous
   * for large messages); this template keeps whatever arrives. */
  message_t* m = ep->in_hdr.len < ((size_t)1 << 40) ? malloc(sizeof *m + ep->in_hdr.len) : NULL;
  if (!m) {
    plugin_log(ep->ctx, HMC_LOG_ERROR, "no memory for an unexpected message of %llu bytes",
               (unsigned long long)ep->in_hdr.len);
    return 0;
  }
  m->tag = ep->in_hdr.tag;
  m->len = ep->in_hdr.len;
  m->got = 0;
  m->waiter = NULL;
  APPEND(ep->unexpected, m, next);
  ep->in_msg = m;
  return 1;
}

/* Reads whatever has arrived, message after message, without blocking. */
static void ep_read(struct hmc_net_ep* ep) {
  for (;;) {
    int rc;
    if (ep->in_hdr_off < sizeof ep->in_hdr) {
      rc = read_some(ep->fd, &ep->in_hdr, sizeof ep->in_hdr, &ep->in_hdr_off);
      if (rc < 0) ep_lost(ep, "reading");
      if (rc <= 0) return;
      if (!start_message(ep)) {
        ep_lost(ep, "out of memory");
        return;
      }
    }
    const size_t len = ep->in_hdr.len;
    if (ep->in_recv) {
      /* Straight into the receive's buffer; what does not fit is read and dropped. */
      struct hmc_net_request* r = ep->in_recv;
      const size_t fit = len < r->len ? len : r->len;
      while (ep->in_got < len) {
        unsigned char sink[4096];
        size_t got = 0;
        if (ep->in_got < fit)
          rc = read_some(ep->fd, r->buf + ep->in_got, fit - ep->in_got, &got);
        else
          rc = read_some(ep->fd, sink,
                         len - ep->in_got < sizeof sink ? len - ep->in_got : sizeof sink, &got);
        ep->in_got += got;
        if (rc < 0) ep_lost(ep, "reading");
        if (rc <= 0) return;
      }
      ep->in_recv = NULL;
      finish_recv(r, len);
    } else {
      message_t* m = ep->in_msg;
      rc = read_some(ep->fd, m->data, m->len, &m->got);
      if (rc < 0) ep_lost(ep, "reading");
      if (rc <= 0) return;
      ep->in_msg = NULL;
      if (m->waiter) {
        if (m->len)
          memcpy(m->waiter->buf, m->data, m->len < m->waiter->len ? m->len : m->waiter->len);
        finish_recv(m->waiter, m->len);
        UNLINK(ep->unexpected, m, next);
        free(m);
      }
    }
    ep->in_hdr_off = 0;
  }
}

/* Writes queued sends, oldest first. A send ends once the socket took its last byte: its buffer
 * is reusable then, whether or not the peer has read it (contract 3.5). */
static void ep_write(struct hmc_net_ep* ep) {
  while (ep->sendq) {
    struct hmc_net_request* r = ep->sendq;
    struct iovec iov[2] = {{&r->hdr, sizeof r->hdr}, {r->buf, r->len}};
    int rc = write_some(ep->fd, iov, 2, sizeof r->hdr + r->len, &r->off);
    if (rc < 0) ep_read(ep); /* what the peer sent before it left stays receivable */
    if (rc < 0) ep_lost(ep, "writing");
    if (rc <= 0) return;
    ep->sendq = r->next;
    complete(r, HMC_PLUGIN_SUCCESS, r->len);
  }
}

/* Both hellos: the connector sends first; the acceptor checks the connector's before answering.
 * SUCCESS once both are through, IN_PROGRESS before, an error when the peer is not the one the
 * handle was given to or speaks another wire version. */
static hmc_plugin_status_t ep_handshake(struct hmc_net_ep* ep) {
  if (ep->stage == EP_CONNECTING) {
    if (connect(ep->fd, (struct sockaddr*)&ep->addr, ep->addr_len) != 0) {
      if (errno == EAGAIN || errno == EINTR) return HMC_PLUGIN_IN_PROGRESS; /* backlog full */
      plugin_log(ep->ctx, HMC_LOG_WARN, "connect to @%s: %s", ep->addr.sun_path + 1,
                 strerror(errno));
      return ep->failure = HMC_PLUGIN_ERR_PEER_LOST;
    }
    ep->stage = EP_HELLO;
  }
  struct iovec out = {&ep->hello_out, sizeof ep->hello_out};
  if (ep->connector || ep->hello_in_off == sizeof ep->hello_in) {
    int rc = write_some(ep->fd, &out, 1, sizeof ep->hello_out, &ep->hello_out_off);
    if (rc < 0) return ep->failure = HMC_PLUGIN_ERR_PEER_LOST;
  }
  if (ep->hello_in_off < sizeof ep->hello_in) {
    int rc = read_some(ep->fd, &ep->hello_in, sizeof ep->hello_in, &ep->hello_in_off);
    if (rc < 0) return ep->failure = HMC_PLUGIN_ERR_PEER_LOST;
    if (rc == 0) return HMC_PLUGIN_IN_PROGRESS;
    const wire_hello_t* h = &ep->hello_in;
    if (h->magic != WIRE_MAGIC || h->cookie != ep->cookie) {
      plugin_log(ep->ctx, HMC_LOG_WARN, "a connection without this handle's cookie: closed");
      return ep->failure = HMC_PLUGIN_ERR_REMOTE;
    }
    if (h->version != WIRE_VERSION) {
      plugin_log(ep->ctx, HMC_LOG_ERROR, "the peer speaks wire version %u, this plugin %u",
                 h->version, WIRE_VERSION);
      if (!ep->connector) { /* tell the connector too, best effort */
        size_t off = 0;
        write_some(ep->fd, &out, 1, sizeof ep->hello_out, &off);
      }
      return ep->failure = HMC_PLUGIN_ERR_VERSION;
    }
    if (!ep->connector) return ep_handshake(ep); /* now answer */
  }
  if (ep->hello_out_off < sizeof ep->hello_out) return HMC_PLUGIN_IN_PROGRESS;
  ep->stage = EP_READY;
  return HMC_PLUGIN_SUCCESS;
}

static void ep_progress(struct hmc_net_ep* ep) {
  if (ep->stage == EP_READY) ep_read(ep);
  if (ep->stage == EP_READY) ep_write(ep);
}

/* ---- lifetime and devices ------------------------------------------------------------------- */

static hmc_plugin_status_t read_sockbuf(hmc_net_ctx_t* ctx) {
  const char* v = ctx->host->config_get(ctx->host->host_ctx, SOCKBUF_VAR);
  if (!v || !*v) v = SOCKBUF_DEFAULT;
  char* end = NULL;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (errno || end == v || *end || v[0] == '-' || (n && (n < SOCKBUF_MIN || n > SOCKBUF_MAX))) {
    plugin_log(ctx, HMC_LOG_ERROR, "invalid %s=\"%s\": expected 0 or bytes from %llu to %llu",
               SOCKBUF_VAR, v, SOCKBUF_MIN, SOCKBUF_MAX);
    return HMC_PLUGIN_ERR_CONFIG; /* fails hmc_context_create with HMC_ERR_CONFIG */
  }
  ctx->sockbuf = (int)n;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t net_finalize(hmc_net_ctx_t* ctx);

static hmc_plugin_status_t net_init(const hmc_host_services_t* host, hmc_net_ctx_t** out) {
  if (!host || !out || !HMC_ABI_HAS_FIELD(host, hmc_host_services_t, now_ns))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  hmc_net_ctx_t* ctx = calloc(1, sizeof *ctx);
  if (!ctx) return HMC_PLUGIN_ERR_NO_MEMORY;
  ctx->host = host;
  ctx->epfd = -1;
  hmc_plugin_status_t st = read_sockbuf(ctx);
  /* TO DO: open your devices. With nothing to drive here, log why and return
   * HMC_PLUGIN_ERR_NO_DEVICE: the core then skips the plugin quietly. */
  if (st == HMC_PLUGIN_SUCCESS && (ctx->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
    plugin_log(ctx, HMC_LOG_ERROR, "epoll_create1: %s", strerror(errno));
    st = HMC_PLUGIN_ERR_SYSTEM;
  }
  if (st != HMC_PLUGIN_SUCCESS) {
    net_finalize(ctx);
    return st;
  }
  *out = ctx;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t net_close_ep(hmc_net_ep_t* ep);
static hmc_plugin_status_t net_close_listener(hmc_net_listener_t* l);

static hmc_plugin_status_t net_finalize(hmc_net_ctx_t* ctx) {
  if (!ctx) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  while (ctx->listeners) net_close_listener(ctx->listeners);
  while (ctx->eps) net_close_ep(ctx->eps);
  if (ctx->epfd >= 0) close(ctx->epfd);
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
  /* Fill every field that fits in p->hdr.struct_size (contract 1.2). TO DO: your device's values;
   * announce in flags only what the slots offer (RMA needs reg_mr, rkey_*, iput and iget). */
  p->name = "unix";
  p->pci_path = NULL;
  p->bandwidth_MBps = 0; /* unknown: the core measures it */
  p->latency_ns = 0;
  p->flags = HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_SAME_HOST;
  if (HMC_ABI_HAS_FIELD(p, hmc_net_device_props_t, max_inflight)) p->max_inflight = 0;
  if (HMC_ABI_HAS_FIELD(p, hmc_net_device_props_t, max_msg_size)) p->max_msg_size = 0;
  if (HMC_ABI_HAS_FIELD(p, hmc_net_device_props_t, mem_ifaces))
    p->mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
  if (HMC_ABI_HAS_FIELD(p, hmc_net_device_props_t, nic_port)) p->nic_guid = p->nic_port = 0;
  if (HMC_ABI_HAS_FIELD(p, hmc_net_device_props_t, fabric)) p->fabric = NULL;
  return HMC_PLUGIN_SUCCESS;
}

/* ---- connections ---------------------------------------------------------------------------- */

static hmc_plugin_status_t watch(hmc_net_ctx_t* ctx, int fd, uint32_t events, int op) {
  struct epoll_event e = {.events = events};
  if (epoll_ctl(ctx->epfd, op, fd, &e) == 0) return HMC_PLUGIN_SUCCESS;
  plugin_log(ctx, HMC_LOG_ERROR, "epoll_ctl: %s", strerror(errno));
  return HMC_PLUGIN_ERR_SYSTEM;
}

static struct hmc_net_ep* ep_new(hmc_net_ctx_t* ctx, int fd, uint64_t cookie, int connector) {
  struct hmc_net_ep* ep = calloc(1, sizeof *ep);
  if (!ep) return NULL;
  if (ctx->sockbuf) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &ctx->sockbuf, sizeof ctx->sockbuf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &ctx->sockbuf, sizeof ctx->sockbuf);
  }
  if (watch(ctx, fd, EPOLLIN, EPOLL_CTL_ADD) != HMC_PLUGIN_SUCCESS) {
    free(ep);
    return NULL;
  }
  ep->ctx = ctx;
  ep->fd = fd;
  ep->cookie = cookie;
  ep->connector = connector;
  ep->stage = connector ? EP_CONNECTING : EP_HELLO;
  ep->epoll_events = EPOLLIN;
  ep->hello_out = (wire_hello_t){WIRE_MAGIC, WIRE_VERSION, cookie};
  ep->next_in_ctx = ctx->eps;
  ctx->eps = ep;
  return ep;
}

static hmc_plugin_status_t net_listen(hmc_net_ctx_t* ctx, int dev, void* handle, size_t* handle_len,
                                      hmc_net_listener_t** out) {
  if (!ctx || dev != 0 || !handle || !handle_len || !out) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  wire_handle_t h = {WIRE_MAGIC, WIRE_VERSION, 0, {0}};
  if (getrandom(&h.cookie, sizeof h.cookie, 0) != sizeof h.cookie) {
    plugin_log(ctx, HMC_LOG_ERROR, "getrandom: %s", strerror(errno));
    return HMC_PLUGIN_ERR_SYSTEM;
  }
  snprintf(h.name, sizeof h.name, "hmc-%s-%d-%016llx", PLUGIN_NAME, (int)getpid(),
           (unsigned long long)h.cookie);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  memcpy(a.sun_path + 1, h.name, strlen(h.name)); /* sun_path[0] = 0: the abstract namespace */
  socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(h.name));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, alen) != 0 || listen(fd, 4) != 0) {
    plugin_log(ctx, HMC_LOG_ERROR, "listening on @%s: %s", h.name, strerror(errno));
    if (fd >= 0) close(fd);
    return HMC_PLUGIN_ERR_SYSTEM;
  }
  struct hmc_net_listener* l = calloc(1, sizeof *l);
  hmc_plugin_status_t st = l ? watch(ctx, fd, EPOLLIN, EPOLL_CTL_ADD) : HMC_PLUGIN_ERR_NO_MEMORY;
  if (st != HMC_PLUGIN_SUCCESS) {
    free(l);
    close(fd);
    return st;
  }
  *l = (struct hmc_net_listener){ctx, fd, h.cookie, NULL, ctx->listeners};
  ctx->listeners = l;
  memcpy(handle, &h, sizeof h);
  *handle_len = sizeof h;
  *out = l;
  return HMC_PLUGIN_SUCCESS;
}

/* The listener takes connections until one presents its cookie and a hello this plugin speaks;
 * accept returns that one once both hellos are through. */
static hmc_plugin_status_t net_accept(hmc_net_listener_t* l, hmc_net_ep_t** out) {
  if (!l || !out) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (!l->ep) {
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return HMC_PLUGIN_IN_PROGRESS;
    if (!(l->ep = ep_new(l->ctx, fd, l->cookie, 0))) {
      close(fd);
      return HMC_PLUGIN_ERR_NO_MEMORY;
    }
  }
  hmc_plugin_status_t st = ep_handshake(l->ep);
  if (st == HMC_PLUGIN_IN_PROGRESS) return st;
  struct hmc_net_ep* ep = l->ep;
  l->ep = NULL;
  if (st == HMC_PLUGIN_SUCCESS) {
    epoll_ctl(l->ctx->epfd, EPOLL_CTL_DEL, l->fd, NULL); /* served: later callers don't wake us */
    *out = ep;
    return st;
  }
  net_close_ep(ep);
  return st == HMC_PLUGIN_ERR_VERSION ? st : HMC_PLUGIN_IN_PROGRESS; /* a stranger: wait on */
}

static hmc_plugin_status_t net_close_listener(hmc_net_listener_t* l) {
  if (!l) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (l->ep) net_close_ep(l->ep);
  epoll_ctl(l->ctx->epfd, EPOLL_CTL_DEL, l->fd, NULL); /* ENOENT once it was served */
  close(l->fd);
  UNLINK(l->ctx->listeners, l, next_in_ctx);
  free(l);
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t net_connect(hmc_net_ctx_t* ctx, int dev, const void* handle,
                                       size_t handle_len, hmc_net_ep_t** out) {
  wire_handle_t h;
  if (!ctx || dev != 0 || !handle || handle_len != sizeof h || !out)
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  memcpy(&h, handle, sizeof h);
  if (h.magic != WIRE_MAGIC || h.version != WIRE_VERSION || !memchr(h.name, 0, sizeof h.name)) {
    plugin_log(ctx, HMC_LOG_ERROR, "a connection handle of wire version %u (this plugin: %u)",
               h.magic == WIRE_MAGIC ? h.version : 0, WIRE_VERSION);
    return h.magic == WIRE_MAGIC ? HMC_PLUGIN_ERR_VERSION : HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct hmc_net_ep* ep = fd < 0 ? NULL : ep_new(ctx, fd, h.cookie, 1);
  if (!ep) {
    if (fd >= 0) close(fd);
    return fd < 0 ? HMC_PLUGIN_ERR_SYSTEM : HMC_PLUGIN_ERR_NO_MEMORY;
  }
  ep->addr.sun_family = AF_UNIX;
  memcpy(ep->addr.sun_path + 1, h.name, strlen(h.name));
  ep->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(h.name));
  *out = ep;
  ep_handshake(ep); /* a failure shows in ep_ready */
  return HMC_PLUGIN_SUCCESS;
}

/* The core calls it on connecting endpoints; it may never call it on accepted ones, which are
 * established when accept returns them (contract 3.3). */
static hmc_plugin_status_t net_ep_ready(hmc_net_ep_t* ep) {
  if (!ep) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (ep->failure) return ep->failure;
  if (ep->stage == EP_READY || ep->stage == EP_LOST) return HMC_PLUGIN_SUCCESS;
  return ep_handshake(ep);
}

static hmc_plugin_status_t net_close_ep(hmc_net_ep_t* ep) {
  if (!ep) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (ep->fd >= 0) {
    epoll_ctl(ep->ctx->epfd, EPOLL_CTL_DEL, ep->fd, NULL);
    close(ep->fd);
  }
  while (ep->unexpected) {
    message_t* m = ep->unexpected;
    ep->unexpected = m->next;
    free(m);
  }
  while (ep->live) { /* released here: the core does not test them afterwards */
    struct hmc_net_request* r = ep->live;
    ep->live = r->next_live;
    free(r);
  }
  UNLINK(ep->ctx->eps, ep, next_in_ctx);
  free(ep);
  return HMC_PLUGIN_SUCCESS;
}

/* ---- tagged messages ------------------------------------------------------------------------ */

static struct hmc_net_request* req_new(struct hmc_net_ep* ep, req_kind_t kind, const void* buf,
                                       size_t len, uint64_t tag) {
  struct hmc_net_request* r = calloc(1, sizeof *r);
  if (!r) return NULL;
  *r = (struct hmc_net_request){.ep = ep,
                                .kind = kind,
                                .tag = tag,
                                .buf = (unsigned char*)buf,
                                .len = len,
                                .hdr = {tag, len},
                                .next_live = ep->live};
  ep->live = r;
  return r;
}

static hmc_plugin_status_t net_isend(hmc_net_ep_t* ep, const void* buf, size_t len,
                                     hmc_net_mr_t* mr, uint64_t tag, hmc_net_request_t** out) {
  (void)mr;
  if (!ep || (!buf && len) || !out) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (ep->stage == EP_LOST) return HMC_PLUGIN_ERR_PEER_LOST; /* later posts fail (3.9) */
  struct hmc_net_request* r = req_new(ep, REQ_SEND, buf, len, tag);
  if (!r) return HMC_PLUGIN_ERR_NO_MEMORY;
  APPEND(ep->sendq, r, next);
  if (ep->stage == EP_READY && ep->sendq == r) ep_write(ep); /* most sends end here */
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

static hmc_plugin_status_t net_irecv(hmc_net_ep_t* ep, void* buf, size_t len, hmc_net_mr_t* mr,
                                     uint64_t tag, hmc_net_request_t** out) {
  (void)mr;
  if (!ep || (!buf && len) || !out) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  message_t* m = ep->unexpected;
  while (m && (m->tag != tag || m->waiter)) m = m->next;
  if (!m && ep->stage == EP_LOST) return HMC_PLUGIN_ERR_PEER_LOST; /* nothing more will come */
  struct hmc_net_request* r = req_new(ep, REQ_RECV, buf, len, tag);
  if (!r) return HMC_PLUGIN_ERR_NO_MEMORY;
  if (!m) {
    APPEND(ep->posted, r, next);
  } else if (m->got < m->len) {
    m->waiter = r; /* ends when the rest of it arrived */
  } else {
    if (m->len) memcpy(buf, m->data, m->len < len ? m->len : len);
    finish_recv(r, m->len);
    UNLINK(ep->unexpected, m, next);
    free(m);
  }
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

/* Also progresses the request's endpoint: without that, a caller that only tests (no progress
 * calls) would never see a request end. */
static hmc_plugin_status_t net_test(hmc_net_request_t* r, int* done, size_t* bytes) {
  if (!r || !done) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (!r->done) ep_progress(r->ep);
  *done = r->done;
  if (!r->done) return HMC_PLUGIN_SUCCESS;
  if (bytes) *bytes = r->bytes;
  hmc_plugin_status_t st = r->status;
  UNLINK(r->ep->live, r, next_live);
  free(r);
  return st;
}

/* Only a receive still waiting in the posted list can be cancelled (contract 3.6); one that
 * matched a message is being filled and ends normally. */
static hmc_plugin_status_t net_cancel(hmc_net_request_t* r) {
  if (!r) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (r->done || r->kind != REQ_RECV || r->ep->in_recv == r) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  for (message_t* m = r->ep->unexpected; m; m = m->next)
    if (m->waiter == r) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  UNLINK(r->ep->posted, r, next);
  complete(r, HMC_PLUGIN_ERR_CANCELLED, 0);
  return HMC_PLUGIN_SUCCESS;
}

/* ---- progress and sleeping ------------------------------------------------------------------ */

/* The core calls progress on every pass while a peer uses the plugin, requests outstanding or
 * not (contract 3.8): incoming messages are read here even before their receive is posted, so
 * that a peer's sends never stall on a full socket. */
static hmc_plugin_status_t net_progress(hmc_net_ctx_t* ctx) {
  if (!ctx) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  for (struct hmc_net_ep* ep = ctx->eps; ep; ep = ep->next_in_ctx) ep_progress(ep);
  return HMC_PLUGIN_SUCCESS;
}

/* Readable when any socket of the context is (level-triggered epoll). */
static hmc_plugin_status_t net_wait_fd(hmc_net_ctx_t* ctx, int* fd) {
  if (!ctx || !fd) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  *fd = ctx->epfd;
  return HMC_PLUGIN_SUCCESS;
}

/* Before the core sleeps: a socket with sends queued must wake it when it drains. */
static hmc_plugin_status_t net_arm(hmc_net_ctx_t* ctx) {
  if (!ctx) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  for (struct hmc_net_ep* ep = ctx->eps; ep; ep = ep->next_in_ctx) {
    uint32_t want = EPOLLIN | (ep->sendq ? EPOLLOUT : 0);
    if (ep->fd < 0 || want == ep->epoll_events) continue;
    if (watch(ctx, ep->fd, want, EPOLL_CTL_MOD) != HMC_PLUGIN_SUCCESS)
      return HMC_PLUGIN_IN_PROGRESS;
    ep->epoll_events = want;
  }
  return HMC_PLUGIN_SUCCESS;
}

/* ---- the table ------------------------------------------------------------------------------ */

static const hmc_config_var_t config_vars[] = {
    {SOCKBUF_VAR, SOCKBUF_DEFAULT,
     "socket buffer size in bytes of the template's connections (4096 to 2^30); 0: the kernel's"},
    {NULL, NULL, NULL}};

static const hmc_net_plugin_v2_t plugin_table = {
    .hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_plugin_v2_t),
    .name = PLUGIN_NAME,
    .version = PLUGIN_VERSION,
    .config_vars = config_vars,
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
    /* optional: NULL means "not supported" (contract 1.2) */
    .isend = net_isend,
    .irecv = TEMPLATE_BREAK == BREAK_NULL_IRECV ? NULL : net_irecv,
    .cancel = net_cancel,
    .progress = net_progress,
    .wait_fd = net_wait_fd,
    .arm = net_arm,
    /* TO DO with HMC_NET_FLAG_RMA or NEEDS_REG: reg_mr, dereg_mr, rkey_unpack, rkey_release,
     * iput, iget (and, where the hardware helps, iflush, iput_v/iget_v, iput_notify/notify_poll);
     * connect_hello/accept_hello where the listener must learn who connects (net.h). */
};

HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
  return &plugin_table;
}
