// Establishing an endpoint. Connector: open every stream without blocking, send each a hello
// with the handle's nonce (shm: with the ring memfd and the wake eventfd), wait for the accept
// hello on stream 0. Acceptor: the listener verified the hellos; send the accept and go.
// Every step is bounded by the host's timeout_ms (check_deadline).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "context.h"
#include "endpoint.h"

namespace hmc::hoststage {

namespace {

pid_t peer_pid_of(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return 0;
  return cred.pid;
}

}  // namespace

void Endpoint::set_limits(const Hello& peer) {
  const Config& cfg = ctx_.cfg();
  size_t local = dev_ == DevKind::kTcp ? cfg.eager_limit : cfg.shm_eager_limit;
  rx_inline_max_ = local;
  inline_limit_ = static_cast<size_t>(std::min<uint64_t>(local, peer.eager_limit));
  if (dev_ == DevKind::kShm)
    inline_limit_ = static_cast<size_t>(std::min<uint64_t>(inline_limit_, peer.ring_bytes / 4));
}

static Hello make_hello(uint8_t kind, uint16_t stream, uint16_t nstreams, uint64_t nonce,
                        uint64_t eager_limit, uint64_t ring_bytes) {
  Hello h{};
  h.magic = kHelloMagic;
  h.version = kProtocolVersion;
  h.kind = kind;
  h.stream = stream;
  h.nstreams = nstreams;
  h.endian = kEndianMark;
  h.nonce = nonce;
  h.eager_limit = eager_limit;
  h.ring_bytes = ring_bytes;
  h.pid = static_cast<uint32_t>(::getpid());
  return h;
}

hmc_plugin_status_t Endpoint::dial(const ConnHandle& h) {
  const Config& cfg = ctx_.cfg();
  const Log& log = ctx_.log();
  nonce_ = h.nonce;
  deadline_ns_ = ctx_.now_ns() + ctx_.timeout_ns();
  Busy busy(*this);

  if (dev_ == DevKind::kTcp) {
    size_t n = std::max<size_t>(static_cast<size_t>(cfg.streams), h.addrs.size());
    n = std::min<size_t>(n, kMaxStreams);
    dial_nstreams_ = static_cast<uint16_t>(n);
    name_ = "tcp peer " + ip_to_string(h.addrs[0].ip_be) + ":" + std::to_string(h.addrs[0].port);
    const std::vector<uint32_t>& bind_to = ctx_.tcp_addresses().bind;
    for (size_t i = 0; i < n; ++i) {
      DialSock d;
      d.fd.reset(make_tcp_socket(cfg));
      if (!d.fd.valid()) {
        log.write(HMC_LOG_ERROR, "%s: socket() failed: %s", name_.c_str(),
                  errno_text(errno).c_str());
        return HMC_PLUGIN_ERR_SYSTEM;
      }
      if (!bind_to.empty()) {
        sockaddr_in la{};
        la.sin_family = AF_INET;
        la.sin_addr.s_addr = bind_to[i % bind_to.size()];
        if (::bind(d.fd.get(), reinterpret_cast<sockaddr*>(&la), sizeof(la)) != 0) {
          log.write(HMC_LOG_ERROR, "%s: binding stream %zu to %s failed: %s", name_.c_str(), i,
                    ip_to_string(la.sin_addr.s_addr).c_str(), errno_text(errno).c_str());
          return HMC_PLUGIN_ERR_SYSTEM;
        }
      }
      const TcpAddr& a = h.addrs[i % h.addrs.size()];
      sockaddr_in ra{};
      ra.sin_family = AF_INET;
      ra.sin_port = htons(a.port);
      ra.sin_addr.s_addr = a.ip_be;
      int err = 0;
      if (::connect(d.fd.get(), reinterpret_cast<sockaddr*>(&ra), sizeof(ra)) == 0)
        d.connected = true;
      else if (errno != EINPROGRESS && errno != EINTR)
        err = errno;
      d.token = ctx_.watch(d.fd.get(), EPOLLIN | EPOLLOUT, PollKind::kDial, this, nullptr,
                           static_cast<int>(i));
      if (d.token == 0) {
        log.write(HMC_LOG_ERROR, "%s: epoll_ctl failed: %s", name_.c_str(),
                  errno_text(errno).c_str());
        return HMC_PLUGIN_ERR_SYSTEM;
      }
      dial_.push_back(std::move(d));
      if (err != 0) {
        fail(HMC_PLUGIN_ERR_PEER_LOST, "connecting stream %zu to %s:%u: %s", i,
             ip_to_string(a.ip_be).c_str(), a.port, errno_text(err).c_str());
        return HMC_PLUGIN_SUCCESS;
      }
    }
  } else {
    dial_nstreams_ = 1;
    name_ = "shm peer pid " + std::to_string(h.pid);
    size_t seg_len = ring_segment_bytes(cfg.shm_ring);
    Fd memfd(::memfd_create("hmc-hoststage-ring", MFD_CLOEXEC));
    if (!memfd.valid() || ::ftruncate(memfd.get(), static_cast<off_t>(seg_len)) != 0) {
      log.write(HMC_LOG_ERROR, "%s: creating the %zu-byte ring segment failed: %s", name_.c_str(),
                seg_len, errno_text(errno).c_str());
      return HMC_PLUGIN_ERR_SYSTEM;
    }
    void* p = ::mmap(nullptr, seg_len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd.get(), 0);
    if (p == MAP_FAILED) {
      log.write(HMC_LOG_ERROR, "%s: mapping the ring segment failed: %s", name_.c_str(),
                errno_text(errno).c_str());
      return HMC_PLUGIN_ERR_NO_MEMORY;
    }
    pending_segment_ = Mapping(p, seg_len);
    new (p) RingCtl();
    new (static_cast<uint8_t*>(p) + sizeof(RingCtl)) RingCtl();
    pending_memfd_ = std::move(memfd);

    sockaddr_un ua{};
    socklen_t ua_len = make_unix_address(h.unix_name, &ua);
    dial_target_.assign(reinterpret_cast<uint8_t*>(&ua), reinterpret_cast<uint8_t*>(&ua) + ua_len);
    DialSock d;
    d.fd.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!d.fd.valid()) {
      log.write(HMC_LOG_ERROR, "%s: socket(AF_UNIX) failed: %s", name_.c_str(),
                errno_text(errno).c_str());
      return HMC_PLUGIN_ERR_SYSTEM;
    }
    d.token = ctx_.watch(d.fd.get(), EPOLLIN | EPOLLOUT, PollKind::kDial, this, nullptr, 0);
    if (d.token == 0) {
      log.write(HMC_LOG_ERROR, "%s: epoll_ctl failed: %s", name_.c_str(),
                errno_text(errno).c_str());
      return HMC_PLUGIN_ERR_SYSTEM;
    }
    dial_.push_back(std::move(d));
  }
  advance_dial();
  return HMC_PLUGIN_SUCCESS;
}

void Endpoint::on_dial_event(int index, uint32_t events) {
  Busy busy(*this);
  if (state_ != State::kConnecting || index < 0 || static_cast<size_t>(index) >= dial_.size())
    return;
  DialSock& d = dial_[static_cast<size_t>(index)];
  if (d.hello_sent && index != 0 && (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
    // Only stream 0 hears back during the handshake; another stream closing means refusal.
    fail(HMC_PLUGIN_ERR_PEER_LOST, "the peer closed stream %d during the handshake", index);
    return;
  }
  if (!d.connected && dev_ == DevKind::kTcp) {
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(d.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      fail(HMC_PLUGIN_ERR_PEER_LOST, "connecting stream %d: %s", index, errno_text(err).c_str());
      return;
    }
    if ((events & EPOLLOUT) == 0) return;
    d.connected = true;
  }
  advance_dial();
}

void Endpoint::advance_dial() {
  if (state_ != State::kConnecting) return;
  const Config& cfg = ctx_.cfg();
  bool all = true;
  for (size_t i = 0; i < dial_.size(); ++i) {
    DialSock& d = dial_[i];
    if (!d.connected) {
      if (dev_ == DevKind::kTcp) {
        all = false;
        continue;
      }
      // A Unix stream connect completes at once, or says EAGAIN while the backlog is full.
      const auto* sa = reinterpret_cast<const sockaddr*>(dial_target_.data());
      if (::connect(d.fd.get(), sa, static_cast<socklen_t>(dial_target_.size())) == 0 ||
          errno == EISCONN) {
        d.connected = true;
      } else if (errno == EAGAIN || errno == EINPROGRESS || errno == EALREADY || errno == EINTR) {
        all = false;
        continue;
      } else {
        fail(HMC_PLUGIN_ERR_PEER_LOST,
             "connecting to its Unix socket: %s (is the peer on this host and still listening?)",
             errno_text(errno).c_str());
        return;
      }
    }
    if (!d.hello_sent) {
      uint64_t limit = dev_ == DevKind::kTcp ? cfg.eager_limit : cfg.shm_eager_limit;
      Hello hello = make_hello(kHelloConnect, static_cast<uint16_t>(i), dial_nstreams_, nonce_,
                               limit, dev_ == DevKind::kShm ? cfg.shm_ring : 0);
      ssize_t n;
      if (dev_ == DevKind::kShm) {
        int fds[2] = {pending_memfd_.get(), ctx_.wake_event_fd()};
        n = send_with_fds(d.fd.get(), &hello, sizeof(hello), fds, 2);
      } else {
        do {
          n = ::send(d.fd.get(), &hello, sizeof(hello), MSG_NOSIGNAL | MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        all = false;
        continue;
      }
      // A fresh socket always takes 64 bytes at once; anything else is a broken connection.
      if (n != static_cast<ssize_t>(sizeof(hello))) {
        fail(HMC_PLUGIN_ERR_PEER_LOST, "sending the hello on stream %zu: %s", i,
             n < 0 ? errno_text(errno).c_str() : "short write");
        return;
      }
      d.hello_sent = true;
      ctx_.modify(d.fd.get(), d.token, EPOLLIN | EPOLLRDHUP);
    }
    if (i == 0 && d.ack_got < sizeof(Hello)) {
      auto* dst = reinterpret_cast<uint8_t*>(&d.ack) + d.ack_got;
      size_t want = sizeof(Hello) - d.ack_got;
      ssize_t n;
      if (dev_ == DevKind::kShm) {
        n = recv_with_fds(d.fd.get(), dst, want, &d.ack_fds);
      } else {
        do {
          n = ::recv(d.fd.get(), dst, want, MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
      }
      if (n == 0) {
        fail(HMC_PLUGIN_ERR_PEER_LOST,
             "the peer closed the connection during the handshake (wrong nonce, or its listener "
             "already accepted another peer)");
        return;
      }
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          all = false;
          continue;
        }
        fail(HMC_PLUGIN_ERR_PEER_LOST, "waiting for the accept hello: %s",
             errno_text(errno).c_str());
        return;
      }
      d.ack_got += static_cast<size_t>(n);
      if (d.ack_got < sizeof(Hello)) {
        all = false;
        continue;
      }
      const Hello& a = d.ack;
      if (a.magic != kHelloMagic || a.endian != kEndianMark || a.kind != kHelloAccept ||
          a.nonce != nonce_) {
        fail(HMC_PLUGIN_ERR_PEER_LOST, "the peer's accept hello is malformed");
        return;
      }
      if (a.version != kProtocolVersion) {
        fail(HMC_PLUGIN_ERR_PEER_LOST, "the peer speaks protocol version %u, this side %u",
             a.version, kProtocolVersion);
        return;
      }
      if (dev_ == DevKind::kShm && d.ack_fds.size() != 1) {
        fail(HMC_PLUGIN_ERR_PEER_LOST, "the peer's accept hello carried %zu descriptors, not 1",
             d.ack_fds.size());
        return;
      }
    }
  }
  if (all) become_ready();
}

void Endpoint::become_ready() {
  Hello ack = dial_[0].ack;
  Hello peer = ack;
  peer.ring_bytes = ctx_.cfg().shm_ring;  // the connector chose the ring size
  set_limits(peer);
  pid_t pid = 0;
  Fd peer_event;
  if (dev_ == DevKind::kShm) {
    pid = peer_pid_of(dial_[0].fd.get());
    peer_event = std::move(dial_[0].ack_fds[0]);
  }
  for (size_t i = 0; i < dial_.size(); ++i) {
    DialSock& d = dial_[i];
    ctx_.unwatch(d.fd.get(), d.token);
    d.token = 0;
    streams_.push_back(
        std::make_unique<Stream>(*this, std::move(d.fd), static_cast<int>(i), rx_inline_max_));
  }
  dial_.clear();
  if (dev_ == DevKind::kShm) {
    attach_shm(std::move(pending_segment_), ctx_.cfg().shm_ring, true, std::move(peer_event), pid);
    pending_memfd_.reset();
    if (pid != 0) name_ = "shm peer pid " + std::to_string(pid);
  }
  state_ = State::kReady;
  for (auto& s : streams_) s->start();
  HS_DEBUG(ctx_.log(), "%s: connected with %zu stream(s), inline limit %zu", name_.c_str(),
           streams_.size(), inline_limit_);
}

void Endpoint::attach_shm(Mapping segment, size_t ring_bytes, bool connector, Fd peer_event,
                          pid_t peer_pid) {
  auto* c2a = reinterpret_cast<RingCtl*>(segment.data());
  auto* a2c = reinterpret_cast<RingCtl*>(segment.data() + sizeof(RingCtl));
  uint8_t* d_c2a = segment.data() + kRingHeaderBytes;
  uint8_t* d_a2c = d_c2a + ring_bytes;
  if (connector) {
    tx_.attach(c2a, d_c2a, ring_bytes);
    rx_.attach(a2c, d_a2c, ring_bytes);
  } else {
    tx_.attach(a2c, d_a2c, ring_bytes);
    rx_.attach(c2a, d_c2a, ring_bytes);
  }
  segment_ = std::move(segment);
  peer_event_ = std::move(peer_event);
  peer_pid_ = peer_pid;
  cma_ok_ = ctx_.cfg().shm_cma && peer_pid > 0;
}

void Endpoint::start_accepted_tcp(std::vector<Fd> socks, const Hello& peer) {
  Busy busy(*this);
  nonce_ = peer.nonce;
  sockaddr_in pa{};
  socklen_t pl = sizeof(pa);
  if (::getpeername(socks[0].get(), reinterpret_cast<sockaddr*>(&pa), &pl) == 0)
    name_ =
        "tcp peer " + ip_to_string(pa.sin_addr.s_addr) + ":" + std::to_string(ntohs(pa.sin_port));
  set_limits(peer);
  for (size_t i = 0; i < socks.size(); ++i)
    streams_.push_back(
        std::make_unique<Stream>(*this, std::move(socks[i]), static_cast<int>(i), rx_inline_max_));
  state_ = State::kReady;
  Hello ack = make_hello(kHelloAccept, 0, static_cast<uint16_t>(socks.size()), nonce_,
                         ctx_.cfg().eager_limit, 0);
  ssize_t n;
  do {
    n = ::send(streams_[0]->fd(), &ack, sizeof(ack), MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  int err = errno;
  for (auto& s : streams_) s->start();
  if (n != static_cast<ssize_t>(sizeof(ack)))
    fail(HMC_PLUGIN_ERR_PEER_LOST, "sending the accept hello: %s",
         n < 0 ? errno_text(err).c_str() : "short write");
  else
    HS_DEBUG(ctx_.log(), "%s: accepted with %zu stream(s), inline limit %zu", name_.c_str(),
             streams_.size(), inline_limit_);
}

void Endpoint::start_accepted_shm(Fd sock, Mapping segment, Fd peer_event, pid_t peer_pid,
                                  const Hello& peer) {
  Busy busy(*this);
  nonce_ = peer.nonce;
  name_ = "shm peer pid " + std::to_string(peer_pid);
  set_limits(peer);
  streams_.push_back(std::make_unique<Stream>(*this, std::move(sock), 0, rx_inline_max_));
  attach_shm(std::move(segment), static_cast<size_t>(peer.ring_bytes), false, std::move(peer_event),
             peer_pid);
  state_ = State::kReady;
  Hello ack = make_hello(kHelloAccept, 0, 1, nonce_, ctx_.cfg().shm_eager_limit, peer.ring_bytes);
  int wake = ctx_.wake_event_fd();
  ssize_t n = send_with_fds(streams_[0]->fd(), &ack, sizeof(ack), &wake, 1);
  int err = errno;
  streams_[0]->start();
  if (n != static_cast<ssize_t>(sizeof(ack)))
    fail(HMC_PLUGIN_ERR_PEER_LOST, "sending the accept hello: %s",
         n < 0 ? errno_text(err).c_str() : "short write");
  else
    HS_DEBUG(ctx_.log(), "%s: accepted, ring %llu bytes, inline limit %zu", name_.c_str(),
             static_cast<unsigned long long>(peer.ring_bytes), inline_limit_);
}

hmc_plugin_status_t Endpoint::ready_status() {
  if (state_ == State::kConnecting) ctx_.progress();
  switch (state_) {
    case State::kReady: return HMC_PLUGIN_SUCCESS;
    case State::kFailed: return fail_status_;
    case State::kConnecting: break;
  }
  return HMC_PLUGIN_IN_PROGRESS;
}

void Endpoint::check_deadline(uint64_t now_ns) {
  if (state_ == State::kConnecting && now_ns > deadline_ns_)
    fail(HMC_PLUGIN_ERR_PEER_LOST, "no connection within %u ms (HMC_TIMEOUT_MS)",
         static_cast<unsigned>(ctx_.timeout_ns() / 1000000ull));
}

}  // namespace hmc::hoststage
