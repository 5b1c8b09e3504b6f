#include "listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "context.h"
#include "endpoint.h"

namespace hmc::hoststage {

hmc_plugin_status_t Listener::create(Context& ctx, DevKind dev, void* handle, size_t* handle_len,
                                     Listener** out) {
  std::unique_ptr<Listener> l(new Listener(ctx, dev));
  l->nonce_ = random_u64();
  ConnHandle h;
  h.dev = dev;
  h.nonce = l->nonce_;
  hmc_plugin_status_t st = dev == DevKind::kTcp ? l->open_tcp(&h) : l->open_shm(&h);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  size_t n = encode_handle(h, static_cast<uint8_t*>(handle), HMC_NET_HANDLE_MAX);
  if (n == 0) {
    ctx.log().write(HMC_LOG_ERROR, "connection handle does not fit in %u bytes",
                    HMC_NET_HANDLE_MAX);
    return HMC_PLUGIN_ERR_INTERNAL;
  }
  *handle_len = n;
  ctx.add_listener(l.get());
  *out = l.release();
  return HMC_PLUGIN_SUCCESS;
}

Listener::~Listener() {
  close_sockets();
  ready_.reset();
  ctx_.remove_listener(this);
}

hmc_plugin_status_t Listener::open_tcp(ConnHandle* h) {
  const TcpAddresses& addrs = ctx_.tcp_addresses();
  const Log& log = ctx_.log();
  for (size_t i = 0; i < addrs.listen.size(); ++i) {
    ListenSock s;
    s.fd.reset(make_tcp_socket(ctx_.cfg()));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = addrs.listen[i];
    socklen_t alen = sizeof(a);
    if (!s.fd.valid() || ::bind(s.fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::listen(s.fd.get(), 64) != 0 ||
        ::getsockname(s.fd.get(), reinterpret_cast<sockaddr*>(&a), &alen) != 0) {
      log.write(HMC_LOG_ERROR, "tcp: listening on %s failed: %s",
                ip_to_string(addrs.listen[i]).c_str(), errno_text(errno).c_str());
      return HMC_PLUGIN_ERR_SYSTEM;
    }
    s.token =
        ctx_.watch(s.fd.get(), EPOLLIN, PollKind::kListen, this, nullptr, static_cast<int>(i));
    if (s.token == 0) {
      log.write(HMC_LOG_ERROR, "tcp: epoll_ctl failed: %s", errno_text(errno).c_str());
      return HMC_PLUGIN_ERR_SYSTEM;
    }
    h->addrs.push_back(TcpAddr{addrs.advertise[i], ntohs(a.sin_port)});
    socks_.push_back(std::move(s));
  }
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Listener::open_shm(ConnHandle* h) {
  const Log& log = ctx_.log();
  char name[64];
  std::snprintf(name, sizeof(name), "hmc-hoststage-%d-%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(random_u64()));
  ListenSock s;
  s.fd.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  sockaddr_un ua{};
  socklen_t ua_len = make_unix_address(name, &ua);
  if (!s.fd.valid() || ::bind(s.fd.get(), reinterpret_cast<sockaddr*>(&ua), ua_len) != 0 ||
      ::listen(s.fd.get(), 16) != 0) {
    log.write(HMC_LOG_ERROR, "shm: listening on @%s failed: %s", name, errno_text(errno).c_str());
    return HMC_PLUGIN_ERR_SYSTEM;
  }
  s.token = ctx_.watch(s.fd.get(), EPOLLIN, PollKind::kListen, this, nullptr, 0);
  if (s.token == 0) {
    log.write(HMC_LOG_ERROR, "shm: epoll_ctl failed: %s", errno_text(errno).c_str());
    return HMC_PLUGIN_ERR_SYSTEM;
  }
  socks_.push_back(std::move(s));
  h->pid = static_cast<uint32_t>(::getpid());
  h->unix_name = name;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Listener::accept(Endpoint** out) {
  if (handed_out_) {
    ctx_.log().write(HMC_LOG_ERROR,
                     "accept on a listener that already handed out its one endpoint");
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  if (ready_ == nullptr) ctx_.progress();
  if (ready_ == nullptr) return HMC_PLUGIN_IN_PROGRESS;
  *out = ready_.release();
  handed_out_ = true;
  return HMC_PLUGIN_SUCCESS;
}

void Listener::on_listen_event(int index) {
  if (index < 0 || static_cast<size_t>(index) >= socks_.size()) return;
  for (;;) {
    int c = ::accept4(socks_[static_cast<size_t>(index)].fd.get(), nullptr, nullptr,
                      SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) {
      int e = errno;
      if (e == EINTR) continue;
      if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        // The connector stays in the backlog and the socket stays readable: watched, it would
        // wake every progress pass (a busy loop for as long as descriptors lack). It is left
        // unwatched for a while instead; the connector's setup times out if none comes free.
        ListenSock& s = socks_[static_cast<size_t>(index)];
        if (!s.paused) ctx_.modify(s.fd.get(), s.token, 0);
        s.paused = true;
        resume_ns_ = ctx_.now_ns() + kAcceptPauseNs;
        if (!warned_)
          ctx_.log().write(HMC_LOG_WARN, "accept4 failed: %s: not accepting for %d ms",
                           errno_text(e).c_str(), int(kAcceptPauseNs / 1000000));
        warned_ = true;
        return;
      }
      if (e != EAGAIN && e != EWOULDBLOCK)
        HS_DEBUG(ctx_.log(), "accept4 failed: %s", errno_text(e).c_str());
      return;
    }
    Fd fd(c);
    if (!waiting()) continue;  // the one peer already arrived: refuse others (fd closes)
    if (dev_ == DevKind::kTcp) tune_tcp_socket(c, ctx_.cfg());
    auto in = std::make_unique<Incoming>();
    in->deadline_ns = ctx_.now_ns() + ctx_.timeout_ns();
    in->token = ctx_.watch(c, EPOLLIN, PollKind::kIncoming, this, in.get());
    if (in->token == 0) continue;
    in->fd = std::move(fd);
    incoming_.push_back(std::move(in));
  }
}

void Listener::on_incoming_event(void* p) {
  Incoming* in = static_cast<Incoming*>(p);
  if (in->got < sizeof(Hello)) {
    auto* dst = reinterpret_cast<uint8_t*>(&in->hello) + in->got;
    size_t want = sizeof(Hello) - in->got;
    ssize_t n;
    if (dev_ == DevKind::kShm) {
      n = recv_with_fds(in->fd.get(), dst, want, &in->fds);
    } else {
      do {
        n = ::recv(in->fd.get(), dst, want, MSG_DONTWAIT);
      } while (n < 0 && errno == EINTR);
    }
    if (n == 0) {
      drop(in, "closed before its hello");
      return;
    }
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) drop(in, "failed before its hello");
      return;
    }
    in->got += static_cast<size_t>(n);
    if (in->got < sizeof(Hello)) return;
    if (!verify(in)) return;
  }
  for (Incoming* s : by_stream_)
    if (s == nullptr) return;
  assemble();
}

void Listener::drop(Incoming* in, const char* why) {
  HS_WARN(ctx_.log(), "%s listener: closing an incoming connection: %s",
          dev_ == DevKind::kTcp ? "tcp" : "shm", why);
  ctx_.unwatch(in->fd.get(), in->token);
  for (Incoming*& s : by_stream_)
    if (s == in) s = nullptr;
  auto it = std::find_if(incoming_.begin(), incoming_.end(),
                         [in](const std::unique_ptr<Incoming>& p) { return p.get() == in; });
  if (it != incoming_.end()) incoming_.erase(it);
}

bool Listener::verify(Incoming* in) {
  const Hello& h = in->hello;
  if (h.magic != kHelloMagic || h.kind != kHelloConnect) {
    drop(in, "not a hoststage hello");
    return false;
  }
  if (h.version != kProtocolVersion) {
    HS_WARN(ctx_.log(), "peer speaks hoststage protocol version %u, this side %u", h.version,
            kProtocolVersion);
    drop(in, "protocol version mismatch");
    return false;
  }
  if (h.endian != kEndianMark) {
    drop(in, "the peer has a different byte order");
    return false;
  }
  if (h.nonce != nonce_) {
    drop(in, "wrong connection nonce");
    return false;
  }
  if (dev_ == DevKind::kTcp) {
    if (h.nstreams == 0 || h.nstreams > kMaxStreams || h.stream >= h.nstreams) {
      drop(in, "bad stream index");
      return false;
    }
    if (nstreams_ == 0) {
      nstreams_ = h.nstreams;
      by_stream_.assign(nstreams_, nullptr);
    }
    if (h.nstreams != nstreams_ || by_stream_[h.stream] != nullptr) {
      drop(in, "stream count mismatch or duplicate stream");
      return false;
    }
    by_stream_[h.stream] = in;
    return true;
  }
  if (h.nstreams != 1 || h.stream != 0 || in->fds.size() != 2) {
    drop(in, "shm hello must carry one stream and two descriptors");
    return false;
  }
  uint64_t ring = h.ring_bytes;
  struct stat st {};
  if (ring < kMinShmRing || ring > kMaxShmRing || (ring & (ring - 1)) != 0 ||
      ::fstat(in->fds[0].get(), &st) != 0 ||
      static_cast<uint64_t>(st.st_size) != ring_segment_bytes(static_cast<size_t>(ring))) {
    drop(in, "bad ring segment");
    return false;
  }
  if (nstreams_ != 0) {
    drop(in, "duplicate stream");
    return false;
  }
  nstreams_ = 1;
  by_stream_.assign(1, in);
  return true;
}

void Listener::assemble() {
  auto ep = std::make_unique<Endpoint>(ctx_, dev_);
  if (dev_ == DevKind::kTcp) {
    std::vector<Fd> socks;
    for (Incoming* in : by_stream_) {
      ctx_.unwatch(in->fd.get(), in->token);
      in->token = 0;
      socks.push_back(std::move(in->fd));
    }
    Hello peer = by_stream_[0]->hello;
    ep->start_accepted_tcp(std::move(socks), peer);
  } else {
    Incoming* in = by_stream_[0];
    size_t seg_len = ring_segment_bytes(static_cast<size_t>(in->hello.ring_bytes));
    void* p = ::mmap(nullptr, seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, in->fds[0].get(), 0);
    if (p == MAP_FAILED) {
      HS_WARN(ctx_.log(), "shm listener: mapping the peer's ring segment failed: %s",
              errno_text(errno).c_str());
      drop(in, "ring segment not mappable");
      nstreams_ = 0;
      by_stream_.clear();
      return;
    }
    Mapping seg(p, seg_len);
    ucred cred{};
    socklen_t clen = sizeof(cred);
    if (::getsockopt(in->fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) cred.pid = 0;
    ctx_.unwatch(in->fd.get(), in->token);
    in->token = 0;
    Hello peer = in->hello;
    ep->start_accepted_shm(std::move(in->fd), std::move(seg), std::move(in->fds[1]), cred.pid,
                           peer);
  }
  ready_ = std::move(ep);
  close_sockets();
}

void Listener::check_deadlines(uint64_t now_ns) {
  if (resume_ns_ && now_ns >= resume_ns_) {
    resume_ns_ = 0;
    for (ListenSock& s : socks_) {
      if (s.paused) ctx_.modify(s.fd.get(), s.token, EPOLLIN);
      s.paused = false;
    }
  }
  std::vector<Incoming*> late;
  for (auto& in : incoming_)
    if (now_ns > in->deadline_ns) late.push_back(in.get());
  for (Incoming* in : late) drop(in, "no complete hello within HMC_TIMEOUT_MS");
}

void Listener::close_sockets() {
  for (ListenSock& s : socks_) ctx_.unwatch(s.fd.get(), s.token);
  socks_.clear();
  for (auto& in : incoming_) ctx_.unwatch(in->fd.get(), in->token);
  incoming_.clear();
  by_stream_.clear();
}

}  // namespace hmc::hoststage
