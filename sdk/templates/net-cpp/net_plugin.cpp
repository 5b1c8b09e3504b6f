// Template of an hmc net plugin in C++ (net ABI v2): tagged messages between processes of one
// host over Unix stream sockets, the transport and wire of the C template (../net/net_plugin.c),
// written on the SDK's adaptor (hmc/plugin/net_adaptor.hpp). The adaptor fills the plugin table,
// turns the opaque handles into this file's classes, refuses the arguments no plugin takes (NULL
// handles and out-pointers, a NULL buffer with a length, a device the context does not have) and
// catches every exception at the boundary; what is left here is the transport. Copy this
// directory, then replace the parts marked "TO DO" with yours; the rest (matching, ordering,
// unexpected messages, truncation, cancel, peer loss, progress and sleeping) is what every
// transport must do the same way.
//
// The contract is share/hmc/plugin-contract.md of the installed SDK (its sections are cited as
// "contract 3.4" below); the slots are described in include/hmc/plugin/net.h.
//
// The wire, per connection (one socket):
//   connector -> acceptor   hello {magic, wire version, cookie}
//   acceptor  -> connector  hello {magic, wire version, cookie}
//   then, both ways         message {tag, length} followed by length bytes
// The cookie is a random number the listener put in its connection handle, so that a process
// that merely finds the socket cannot connect (contract 3.3).
//
// Threading: the core serialises every call into one context and its objects (contract 3.1), and
// this plugin runs no threads of its own, so it takes no locks.
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <memory>
#include <new>
#include <set>
#include <vector>

#include "hmc/plugin/log.hpp"
#include "hmc/plugin/net.h"
#include "hmc/plugin/net_adaptor.hpp"

namespace {  // TO DO: your namespace

// TO DO: your plugin's name (equal to NAME in CMakeLists.txt) and version.
constexpr char kName[] = "template_cpp";
constexpr char kVersion[] = "0.1.0";

// The plugin's one option (contract 5.1), read through config_get, which returns NULL when the
// variable is unset (the plugin applies the declared default). TO DO: HMC_<PLUGIN>_<NAME>.
constexpr char kSockbufVar[] = "HMC_TEMPLATE_CPP_SOCKBUF";
constexpr char kSockbufDefault[] = "0";
constexpr unsigned long long kSockbufMin = 4096, kSockbufMax = 1ull << 30;

using hmc::plugin::Log;

// ---- the wire: TO DO, your transport's addressing and handshake ----------------------------

constexpr uint32_t kWireMagic = 0x43504d48u;  // "HMPC"
constexpr uint32_t kWireVersion = 1;          // raised by any change of the wire below

// What listen writes and connect reads: a socket name in Linux's abstract namespace (nothing to
// unlink) and the cookie.
struct WireHandle {
  uint32_t magic, version;
  uint64_t cookie;
  char name[48];
};
// Sent by each side first (the acceptor's echoes the cookie).
struct WireHello {
  uint32_t magic, version;
  uint64_t cookie;
};
struct WireMsg {
  uint64_t tag, len;
};

// Write what is left of total bytes (the iovecs') or read what is left of len bytes at p, *off
// done so far, without blocking. 1: all done; 0: the socket would block; -1: the connection is
// gone (errno says why, 0 for the peer's close).
int write_some(int fd, const iovec* iov, int n, size_t total, size_t* off) {
  while (*off < total) {
    iovec v[2];
    int k = 0;
    size_t skip = *off;
    for (int i = 0; i < n; ++i) {
      if (skip >= iov[i].iov_len) {
        skip -= iov[i].iov_len;
        continue;
      }
      v[k].iov_base = static_cast<char*>(iov[i].iov_base) + skip;
      v[k++].iov_len = iov[i].iov_len - skip;
      skip = 0;
    }
    msghdr m{};
    m.msg_iov = v;
    m.msg_iovlen = static_cast<size_t>(k);
    ssize_t w = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);  // a lost peer is no SIGPIPE
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    *off += static_cast<size_t>(w);
  }
  return 1;
}

int read_some(int fd, void* p, size_t len, size_t* off) {
  while (*off < len) {
    ssize_t r = recv(fd, static_cast<char*>(p) + *off, len - *off, MSG_DONTWAIT);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    if (r == 0) {
      errno = 0;
      return -1;
    }
    *off += static_cast<size_t>(r);
  }
  return 1;
}

// ---- objects ---------------------------------------------------------------------------------

class Endpoint;
class Listener;

// This transport registers nothing and offers no one-sided operations: its region and remote
// key types are never made. TO DO: yours, with reg_mr, rkey_unpack, iput and iget.
struct NoRegion {};
struct NoKey {};

class Context {
 public:
  static hmc_plugin_status_t create(const hmc_host_services_t* host, Context** out);
  ~Context();
  int device_count() const { return 1; }  // TO DO: your NICs or rails
  bool valid_device(int dev) const { return dev == 0; }

  hmc_plugin_status_t watch(int fd, uint32_t events, int op) const;

  const hmc_host_services_t* host = nullptr;
  Log log;
  int epfd = -1;  // wait_fd: every socket of the context
  int sockbuf = 0;
  std::set<Endpoint*> eps;
  std::set<Listener*> listeners;

 private:
  hmc_plugin_status_t read_sockbuf();
};

enum class Kind { kSend, kRecv };

// The adaptor's report_test reads done, result and bytes.
struct Request {
  Endpoint* ep;
  Kind kind;
  uint64_t tag;
  unsigned char* buf;
  size_t len;
  bool done = false;
  hmc_plugin_status_t result = HMC_PLUGIN_SUCCESS;
  size_t bytes = 0;  // moved; for a receive, the length that was sent
  WireMsg hdr{};     // sends: the header written before buf
  size_t off = 0;    // sends: bytes of hdr and buf written so far

  void complete(hmc_plugin_status_t st, size_t n) {
    done = true;
    result = st;
    bytes = n;
  }
  // Ends a receive whose message of sent bytes is in place. The length reported is the one sent,
  // also when it did not fit (contract 3.4: the core skips the rest of a message it cut up).
  void finish_recv(size_t sent) {
    complete(sent > len ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS, sent);
  }
};

// A message read before its receive was posted (contract 3.4), possibly still arriving.
struct Message {
  uint64_t tag;
  std::vector<unsigned char> data;
  size_t got = 0;
  Request* waiter = nullptr;  // a receive that matched it before it was whole
};

enum class Stage { kConnecting, kHello, kReady, kLost };

class Endpoint {
 public:
  // Watches fd (which the endpoint then owns); nullptr when it cannot.
  static Endpoint* open(Context& ctx, int fd, uint64_t cookie, bool connector);
  ~Endpoint();

  hmc_plugin_status_t ready_status();  // the adaptor's default ep_ready
  hmc_plugin_status_t handshake();
  void progress() {
    if (stage_ == Stage::kReady) read();
    if (stage_ == Stage::kReady) write();
  }
  hmc_plugin_status_t send(const void* buf, size_t len, uint64_t tag, Request** out);
  hmc_plugin_status_t recv(void* buf, size_t len, uint64_t tag, Request** out);
  hmc_plugin_status_t cancel(Request& r);
  void release(Request* r);
  // The events fd waits for before the core sleeps: a socket with sends queued must wake it
  // when it drains.
  hmc_plugin_status_t arm();

  void set_peer(const char* name) {
    addr_.sun_family = AF_UNIX;
    std::memcpy(addr_.sun_path + 1, name, std::strlen(name));
    addr_len_ = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + std::strlen(name));
  }

 private:
  Endpoint(Context& ctx, int fd, uint64_t cookie, bool connector)
      : ctx_(ctx), fd_(fd), cookie_(cookie), connector_(connector) {
    stage_ = connector ? Stage::kConnecting : Stage::kHello;
    hello_out_ = WireHello{kWireMagic, kWireVersion, cookie};
  }
  Request* new_request(Kind kind, const void* buf, size_t len, uint64_t tag);
  void lost(const char* why);
  bool start_message();
  void read();
  void write();

  Context& ctx_;
  int fd_;
  uint64_t cookie_;
  bool connector_;
  Stage stage_;
  hmc_plugin_status_t failure_ = HMC_PLUGIN_SUCCESS;  // why establishing failed
  sockaddr_un addr_{};                                // connector: where to connect
  socklen_t addr_len_ = 0;
  WireHello hello_out_{}, hello_in_{};
  size_t hello_out_off_ = 0, hello_in_off_ = 0;
  uint32_t epoll_events_ = EPOLLIN;
  std::deque<Request*> sendq_;     // oldest first; the front is being written
  std::deque<Request*> posted_;    // receives waiting for a message, oldest first
  std::list<Message> unexpected_;  // oldest first
  // The message being read: header, then payload into a receive or an unexpected message.
  WireMsg in_hdr_{};
  size_t in_hdr_off_ = 0, in_got_ = 0;
  Request* in_recv_ = nullptr;
  Message* in_msg_ = nullptr;
  std::vector<std::unique_ptr<Request>> live_;  // every request not yet released by test
};

class Listener {
 public:
  Listener(Context& ctx, int fd, uint64_t cookie) : ctx_(ctx), fd_(fd), cookie_(cookie) {
    ctx_.listeners.insert(this);
  }
  ~Listener();
  hmc_plugin_status_t accept(Endpoint** out);  // the adaptor's default accept

 private:
  Context& ctx_;
  int fd_;
  uint64_t cookie_;
  Endpoint* ep_ = nullptr;  // the accepted connection, until accept returns it
};

// ---- lifetime --------------------------------------------------------------------------------

hmc_plugin_status_t Context::create(const hmc_host_services_t* host, Context** out) {
  auto c = std::make_unique<Context>();
  c->host = host;
  c->log = Log(host);
  hmc_plugin_status_t st = c->read_sockbuf();
  if (st != HMC_PLUGIN_SUCCESS) return st;
  // TO DO: open your devices. With nothing to drive here, log why and return
  // HMC_PLUGIN_ERR_NO_DEVICE: the core then skips the plugin quietly.
  if ((c->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
    HMC_PLUGIN_LOG(c->log, HMC_LOG_ERROR, "epoll_create1: %s", std::strerror(errno));
    return HMC_PLUGIN_ERR_SYSTEM;
  }
  *out = c.release();
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Context::read_sockbuf() {
  const char* v = host->config_get(host->host_ctx, kSockbufVar);
  if (v == nullptr || *v == '\0') v = kSockbufDefault;
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || v[0] == '-' ||
      (n != 0 && (n < kSockbufMin || n > kSockbufMax))) {
    HMC_PLUGIN_LOG(log, HMC_LOG_ERROR, "invalid %s=\"%s\": expected 0 or bytes from %llu to %llu",
                   kSockbufVar, v, kSockbufMin, kSockbufMax);
    return HMC_PLUGIN_ERR_CONFIG;  // fails hmc_context_create with HMC_ERR_CONFIG
  }
  sockbuf = static_cast<int>(n);
  return HMC_PLUGIN_SUCCESS;
}

Context::~Context() {
  while (!listeners.empty()) delete *listeners.begin();
  while (!eps.empty()) delete *eps.begin();
  if (epfd >= 0) close(epfd);
}

hmc_plugin_status_t Context::watch(int fd, uint32_t events, int op) const {
  epoll_event e{};
  e.events = events;
  if (epoll_ctl(epfd, op, fd, &e) == 0) return HMC_PLUGIN_SUCCESS;
  HMC_PLUGIN_LOG(log, HMC_LOG_ERROR, "epoll_ctl: %s", std::strerror(errno));
  return HMC_PLUGIN_ERR_SYSTEM;
}

Endpoint* Endpoint::open(Context& ctx, int fd, uint64_t cookie, bool connector) {
  if (ctx.sockbuf != 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &ctx.sockbuf, sizeof ctx.sockbuf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &ctx.sockbuf, sizeof ctx.sockbuf);
  }
  if (ctx.watch(fd, EPOLLIN, EPOLL_CTL_ADD) != HMC_PLUGIN_SUCCESS) return nullptr;
  auto* ep = new Endpoint(ctx, fd, cookie, connector);
  ctx.eps.insert(ep);
  return ep;
}

// Requests still live are released here: the core does not test them afterwards.
Endpoint::~Endpoint() {
  if (fd_ >= 0) {
    epoll_ctl(ctx_.epfd, EPOLL_CTL_DEL, fd_, nullptr);
    close(fd_);
  }
  ctx_.eps.erase(this);
}

Listener::~Listener() {
  delete ep_;
  epoll_ctl(ctx_.epfd, EPOLL_CTL_DEL, fd_, nullptr);  // ENOENT once it was served
  close(fd_);
  ctx_.listeners.erase(this);
}

// ---- socket I/O: TO DO, your transport's posting and completion ----------------------------

// The connection is gone (contract 3.9): every pending request ends PEER_LOST, except that
// messages which arrived whole stay matchable by receives posted later.
void Endpoint::lost(const char* why) {
  if (stage_ == Stage::kLost) return;
  const int err = errno;
  HMC_PLUGIN_LOG(ctx_.log, HMC_LOG_INFO, "connection lost (%s%s%s)", why, err ? ": " : "",
                 err ? std::strerror(err) : "the peer closed it");
  stage_ = Stage::kLost;
  epoll_ctl(ctx_.epfd, EPOLL_CTL_DEL, fd_, nullptr);
  close(fd_);
  fd_ = -1;
  for (Request* r : sendq_) r->complete(HMC_PLUGIN_ERR_PEER_LOST, 0);
  for (Request* r : posted_) r->complete(HMC_PLUGIN_ERR_PEER_LOST, 0);
  sendq_.clear();
  posted_.clear();
  if (in_recv_ != nullptr) in_recv_->complete(HMC_PLUGIN_ERR_PEER_LOST, 0);
  in_recv_ = nullptr;
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    if (it->got == it->data.size()) {
      ++it;
      continue;
    }
    if (it->waiter != nullptr) it->waiter->complete(HMC_PLUGIN_ERR_PEER_LOST, 0);
    it = unexpected_.erase(it);
  }
  in_msg_ = nullptr;
}

// Header read: the message goes to the oldest matching receive (contract 3.4), or is kept as
// unexpected.
bool Endpoint::start_message() {
  in_got_ = 0;
  auto match = std::find_if(posted_.begin(), posted_.end(),
                            [&](const Request* r) { return r->tag == in_hdr_.tag; });
  if (match != posted_.end()) {
    in_recv_ = *match;
    posted_.erase(match);
    return true;
  }
  // TO DO: a transport bounds the memory of unexpected messages (flow control, or rendezvous
  // for large messages); this template keeps whatever arrives.
  if (in_hdr_.len >= (uint64_t{1} << 40)) {
    HMC_PLUGIN_LOG(ctx_.log, HMC_LOG_ERROR, "no memory for an unexpected message of %llu bytes",
                   static_cast<unsigned long long>(in_hdr_.len));
    return false;
  }
  try {
    unexpected_.push_back(Message{in_hdr_.tag, std::vector<unsigned char>(in_hdr_.len)});
  } catch (const std::bad_alloc&) {
    HMC_PLUGIN_LOG(ctx_.log, HMC_LOG_ERROR, "no memory for an unexpected message of %llu bytes",
                   static_cast<unsigned long long>(in_hdr_.len));
    return false;
  }
  in_msg_ = &unexpected_.back();
  return true;
}

// Reads whatever has arrived, message after message, without blocking.
void Endpoint::read() {
  for (;;) {
    int rc;
    if (in_hdr_off_ < sizeof in_hdr_) {
      rc = read_some(fd_, &in_hdr_, sizeof in_hdr_, &in_hdr_off_);
      if (rc < 0) lost("reading");
      if (rc <= 0) return;
      if (!start_message()) {
        lost("out of memory");
        return;
      }
    }
    const size_t len = in_hdr_.len;
    if (in_recv_ != nullptr) {
      // Straight into the receive's buffer; what does not fit is read and dropped.
      Request* r = in_recv_;
      const size_t fit = std::min(len, r->len);
      while (in_got_ < len) {
        unsigned char sink[4096];
        size_t got = 0;
        if (in_got_ < fit)
          rc = read_some(fd_, r->buf + in_got_, fit - in_got_, &got);
        else
          rc = read_some(fd_, sink, std::min(len - in_got_, sizeof sink), &got);
        in_got_ += got;
        if (rc < 0) lost("reading");
        if (rc <= 0) return;
      }
      in_recv_ = nullptr;
      r->finish_recv(len);
    } else {
      Message* m = in_msg_;
      rc = read_some(fd_, m->data.data(), m->data.size(), &m->got);
      if (rc < 0) lost("reading");
      if (rc <= 0) return;
      in_msg_ = nullptr;
      if (m->waiter != nullptr) {
        if (!m->data.empty())
          std::memcpy(m->waiter->buf, m->data.data(), std::min(m->data.size(), m->waiter->len));
        m->waiter->finish_recv(m->data.size());
        unexpected_.remove_if([m](const Message& x) { return &x == m; });
      }
    }
    in_hdr_off_ = 0;
  }
}

// Writes queued sends, oldest first. A send ends once the socket took its last byte: its buffer
// is reusable then, whether or not the peer has read it (contract 3.5).
void Endpoint::write() {
  while (!sendq_.empty()) {
    Request* r = sendq_.front();
    iovec iov[2] = {{&r->hdr, sizeof r->hdr}, {r->buf, r->len}};
    int rc = write_some(fd_, iov, 2, sizeof r->hdr + r->len, &r->off);
    if (rc < 0) read();  // what the peer sent before it left stays receivable
    if (rc < 0) lost("writing");
    if (rc <= 0) return;
    sendq_.pop_front();
    r->complete(HMC_PLUGIN_SUCCESS, r->len);
  }
}

// Both hellos: the connector sends first; the acceptor checks the connector's before answering.
// SUCCESS once both are through, IN_PROGRESS before, an error when the peer is not the one the
// handle was given to or speaks another wire version.
hmc_plugin_status_t Endpoint::handshake() {
  if (stage_ == Stage::kConnecting) {
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr_), addr_len_) != 0) {
      if (errno == EAGAIN || errno == EINTR) return HMC_PLUGIN_IN_PROGRESS;  // backlog full
      HMC_PLUGIN_LOG(ctx_.log, HMC_LOG_WARN, "connect to @%s: %s", addr_.sun_path + 1,
                     std::strerror(errno));
      return failure_ = HMC_PLUGIN_ERR_PEER_LOST;
    }
    stage_ = Stage::kHello;
  }
  iovec out = {&hello_out_, sizeof hello_out_};
  if (connector_ || hello_in_off_ == sizeof hello_in_) {
    if (write_some(fd_, &out, 1, sizeof hello_out_, &hello_out_off_) < 0)
      return failure_ = HMC_PLUGIN_ERR_PEER_LOST;
  }
  if (hello_in_off_ < sizeof hello_in_) {
    int rc = read_some(fd_, &hello_in_, sizeof hello_in_, &hello_in_off_);
    if (rc < 0) return failure_ = HMC_PLUGIN_ERR_PEER_LOST;
    if (rc == 0) return HMC_PLUGIN_IN_PROGRESS;
    if (hello_in_.magic != kWireMagic || hello_in_.cookie != cookie_) {
      HMC_PLUGIN_LOG(ctx_.log, HMC_LOG_WARN, "a connection without this handle's cookie: closed");
      return failure_ = HMC_PLUGIN_ERR_REMOTE;
    }
    if (hello_in_.version != kWireVersion) {
      HMC_PLUGIN_LOG(ctx_.log, HMC_LOG_ERROR, "the peer speaks wire version %u, this plugin %u",
                     hello_in_.version, kWireVersion);
      if (!connector_) {  // tell the connector too, best effort
        size_t off = 0;
        write_some(fd_, &out, 1, sizeof hello_out_, &off);
      }
      return failure_ = HMC_PLUGIN_ERR_VERSION;
    }
    if (!connector_) return handshake();  // now answer
  }
  if (hello_out_off_ < sizeof hello_out_) return HMC_PLUGIN_IN_PROGRESS;
  stage_ = Stage::kReady;
  return HMC_PLUGIN_SUCCESS;
}

// The core calls it on connecting endpoints; it may never call it on accepted ones, which are
// established when accept returns them (contract 3.3).
hmc_plugin_status_t Endpoint::ready_status() {
  if (failure_ != HMC_PLUGIN_SUCCESS) return failure_;
  if (stage_ == Stage::kReady || stage_ == Stage::kLost) return HMC_PLUGIN_SUCCESS;
  return handshake();
}

// ---- tagged messages -------------------------------------------------------------------------

Request* Endpoint::new_request(Kind kind, const void* buf, size_t len, uint64_t tag) {
  auto r = std::make_unique<Request>(
      Request{this, kind, tag, static_cast<unsigned char*>(const_cast<void*>(buf)), len});
  r->hdr = WireMsg{tag, len};
  live_.push_back(std::move(r));
  return live_.back().get();
}

void Endpoint::release(Request* r) {
  auto it = std::find_if(live_.begin(), live_.end(), [r](const auto& p) { return p.get() == r; });
  if (it != live_.end()) live_.erase(it);
}

hmc_plugin_status_t Endpoint::send(const void* buf, size_t len, uint64_t tag, Request** out) {
  if (stage_ == Stage::kLost) return HMC_PLUGIN_ERR_PEER_LOST;  // later posts fail (3.9)
  Request* r = new_request(Kind::kSend, buf, len, tag);
  sendq_.push_back(r);
  if (stage_ == Stage::kReady && sendq_.size() == 1) write();  // most sends end here
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::recv(void* buf, size_t len, uint64_t tag, Request** out) {
  auto m = std::find_if(unexpected_.begin(), unexpected_.end(),
                        [&](const Message& x) { return x.tag == tag && x.waiter == nullptr; });
  if (m == unexpected_.end() && stage_ == Stage::kLost)
    return HMC_PLUGIN_ERR_PEER_LOST;  // nothing more will come
  Request* r = new_request(Kind::kRecv, buf, len, tag);
  if (m == unexpected_.end()) {
    posted_.push_back(r);
  } else if (m->got < m->data.size()) {
    m->waiter = r;  // ends when the rest of it arrived
  } else {
    if (!m->data.empty()) std::memcpy(buf, m->data.data(), std::min(m->data.size(), len));
    r->finish_recv(m->data.size());
    unexpected_.erase(m);
  }
  *out = r;
  return HMC_PLUGIN_SUCCESS;
}

// Only a receive still waiting in the posted list can be cancelled (contract 3.6); one that
// matched a message is being filled and ends normally.
hmc_plugin_status_t Endpoint::cancel(Request& r) {
  auto it = std::find(posted_.begin(), posted_.end(), &r);
  if (r.done || r.kind != Kind::kRecv || it == posted_.end()) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  posted_.erase(it);
  r.complete(HMC_PLUGIN_ERR_CANCELLED, 0);
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Endpoint::arm() {
  const uint32_t want = EPOLLIN | (sendq_.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT));
  if (fd_ < 0 || want == epoll_events_) return HMC_PLUGIN_SUCCESS;
  if (ctx_.watch(fd_, want, EPOLL_CTL_MOD) != HMC_PLUGIN_SUCCESS) return HMC_PLUGIN_IN_PROGRESS;
  epoll_events_ = want;
  return HMC_PLUGIN_SUCCESS;
}

// ---- connections -----------------------------------------------------------------------------

// The listener takes connections until one presents its cookie and a hello this plugin speaks;
// accept returns that one once both hellos are through.
hmc_plugin_status_t Listener::accept(Endpoint** out) {
  if (ep_ == nullptr) {
    int fd = accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return HMC_PLUGIN_IN_PROGRESS;
    if ((ep_ = Endpoint::open(ctx_, fd, cookie_, false)) == nullptr) {
      close(fd);
      return HMC_PLUGIN_ERR_SYSTEM;
    }
  }
  hmc_plugin_status_t st = ep_->handshake();
  if (st == HMC_PLUGIN_IN_PROGRESS) return st;
  Endpoint* ep = ep_;
  ep_ = nullptr;
  if (st == HMC_PLUGIN_SUCCESS) {
    epoll_ctl(ctx_.epfd, EPOLL_CTL_DEL, fd_, nullptr);  // served: later callers don't wake us
    *out = ep;
    return st;
  }
  delete ep;
  return st == HMC_PLUGIN_ERR_VERSION ? st : HMC_PLUGIN_IN_PROGRESS;  // a stranger: wait on
}

// ---- the plugin: what each slot does, on the adaptor -----------------------------------------

// The defaults of NetPlugin serve init (Context::create), finalize, device_count, valid_device,
// accept (Listener::accept), close_listener, ep_ready (Endpoint::ready_status) and close_ep
// (delete). TO DO with HMC_NET_FLAG_RMA or NEEDS_REG: reg_mr, dereg_mr, rkey_unpack,
// rkey_release, iput, iget (and, where the hardware helps, iflush, iput_v/iget_v,
// iput_notify/notify_poll); connect_hello/accept_hello where the listener must learn who
// connects (net.h). A slot this struct does not define stays NULL in the table.
struct Template : hmc::plugin::NetPlugin<Context, Endpoint, Listener, Request, NoRegion, NoKey> {
  // Fill every field that fits in props->hdr.struct_size (contract 1.2). TO DO: your device's
  // values; announce in flags only what the slots offer.
  static void device_props(Context&, int, hmc_net_device_props_t* p) {
    using P = hmc_net_device_props_t;
    if (HMC_ABI_HAS_FIELD(p, P, name)) p->name = "unix";
    if (HMC_ABI_HAS_FIELD(p, P, pci_path)) p->pci_path = nullptr;
    if (HMC_ABI_HAS_FIELD(p, P, bandwidth_MBps)) p->bandwidth_MBps = 0;  // unknown: measured
    if (HMC_ABI_HAS_FIELD(p, P, latency_ns)) p->latency_ns = 0;
    if (HMC_ABI_HAS_FIELD(p, P, flags)) p->flags = HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_SAME_HOST;
    if (HMC_ABI_HAS_FIELD(p, P, max_inflight)) p->max_inflight = 0;
    if (HMC_ABI_HAS_FIELD(p, P, max_msg_size)) p->max_msg_size = 0;
    if (HMC_ABI_HAS_FIELD(p, P, mem_ifaces)) p->mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
    if (HMC_ABI_HAS_FIELD(p, P, nic_guid)) p->nic_guid = 0;
    if (HMC_ABI_HAS_FIELD(p, P, nic_port)) p->nic_port = 0;
    if (HMC_ABI_HAS_FIELD(p, P, fabric)) p->fabric = nullptr;
  }

  static hmc_plugin_status_t listen(Context& c, int, void* handle, size_t* handle_len,
                                    Listener** out) {
    WireHandle h{kWireMagic, kWireVersion, 0, {}};
    if (getrandom(&h.cookie, sizeof h.cookie, 0) != static_cast<ssize_t>(sizeof h.cookie)) {
      HMC_PLUGIN_LOG(c.log, HMC_LOG_ERROR, "getrandom: %s", std::strerror(errno));
      return HMC_PLUGIN_ERR_SYSTEM;
    }
    std::snprintf(h.name, sizeof h.name, "hmc-%s-%d-%016llx", kName, static_cast<int>(getpid()),
                  static_cast<unsigned long long>(h.cookie));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, h.name, std::strlen(h.name));  // sun_path[0] = 0: abstract
    const auto alen =
        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + std::strlen(h.name));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), alen) != 0 || ::listen(fd, 4) != 0) {
      HMC_PLUGIN_LOG(c.log, HMC_LOG_ERROR, "listening on @%s: %s", h.name, std::strerror(errno));
      if (fd >= 0) close(fd);
      return HMC_PLUGIN_ERR_SYSTEM;
    }
    hmc_plugin_status_t st = c.watch(fd, EPOLLIN, EPOLL_CTL_ADD);
    if (st != HMC_PLUGIN_SUCCESS) {
      close(fd);
      return st;
    }
    *out = new Listener(c, fd, h.cookie);
    std::memcpy(handle, &h, sizeof h);
    *handle_len = sizeof h;
    return HMC_PLUGIN_SUCCESS;
  }

  static hmc_plugin_status_t connect(Context& c, int, const void* handle, size_t handle_len,
                                     Endpoint** out) {
    WireHandle h;
    if (handle_len != sizeof h) return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    std::memcpy(&h, handle, sizeof h);
    if (h.magic != kWireMagic || h.version != kWireVersion ||
        std::memchr(h.name, 0, sizeof h.name) == nullptr) {
      HMC_PLUGIN_LOG(c.log, HMC_LOG_ERROR,
                     "a connection handle of wire version %u (this plugin: %u)",
                     h.magic == kWireMagic ? h.version : 0, kWireVersion);
      return h.magic == kWireMagic ? HMC_PLUGIN_ERR_VERSION : HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return HMC_PLUGIN_ERR_SYSTEM;
    Endpoint* ep = Endpoint::open(c, fd, h.cookie, true);
    if (ep == nullptr) {
      close(fd);
      return HMC_PLUGIN_ERR_SYSTEM;
    }
    ep->set_peer(h.name);
    *out = ep;
    ep->handshake();  // a failure shows in ep_ready
    return HMC_PLUGIN_SUCCESS;
  }

  // Also progresses the request's endpoint: without that, a caller that only tests (no progress
  // calls) would never see a request end.
  static hmc_plugin_status_t test(Request& r, int* done, size_t* bytes) {
    Endpoint* ep = r.ep;
    if (!r.done) ep->progress();
    return hmc::plugin::report_test(r, done, bytes, [&] { ep->release(&r); });
  }

  static hmc_plugin_status_t isend(Endpoint& e, const void* buf, size_t len, NoRegion*,
                                   uint64_t tag, Request** out) {
    return e.send(buf, len, tag, out);
  }
  static hmc_plugin_status_t irecv(Endpoint& e, void* buf, size_t len, NoRegion*, uint64_t tag,
                                   Request** out) {
    return e.recv(buf, len, tag, out);
  }
  static hmc_plugin_status_t cancel(Request& r) { return r.ep->cancel(r); }

  // The core calls progress on every pass while a peer uses the plugin, requests outstanding or
  // not (contract 3.8): incoming messages are read here even before their receive is posted, so
  // that a peer's sends never stall on a full socket.
  static void progress(Context& c) {
    for (Endpoint* ep : c.eps) ep->progress();
  }
  // Readable when any socket of the context is (level-triggered epoll).
  static void wait_fd(Context& c, int* fd) { *fd = c.epfd; }
  static hmc_plugin_status_t arm(Context& c) {
    for (Endpoint* ep : c.eps)
      if (ep->arm() != HMC_PLUGIN_SUCCESS) return HMC_PLUGIN_IN_PROGRESS;
    return HMC_PLUGIN_SUCCESS;
  }
};

// ---- the table -------------------------------------------------------------------------------

constexpr hmc_config_var_t kConfigVars[] = {
    {kSockbufVar, kSockbufDefault,
     "socket buffer size in bytes of the template's connections (4096 to 2^30); 0: the kernel's"},
    {nullptr, nullptr, nullptr}};

constexpr hmc_net_plugin_v2_t kTable =
    hmc::plugin::net_table<Template>(kName, kVersion, kConfigVars);

}  // namespace

extern "C" HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
  return &kTable;
}
