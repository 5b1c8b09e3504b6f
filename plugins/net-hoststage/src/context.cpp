#include "context.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "endpoint.h"
#include "listener.h"

namespace hmc::hoststage {

namespace {

// Lets a same-host peer attach to this process for cross-memory copies when Yama restricts
// ptrace to descendants. Process-wide, harmless elsewhere; EINVAL without Yama is expected.
void allow_cma_peers(const Log& log) {
#if defined(PR_SET_PTRACER) && defined(PR_SET_PTRACER_ANY)
  if (::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0 && errno != EINVAL)
    HS_DEBUG(log, "prctl(PR_SET_PTRACER, ANY) failed: %s", errno_text(errno).c_str());
#else
  (void)log;
#endif
}

bool memfd_supported() {
  int fd = ::memfd_create("hmc-hoststage-probe", MFD_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

}  // namespace

hmc_plugin_status_t Context::create(const hmc_host_services_t* host, Context** out) {
  std::unique_ptr<Context> c(new Context(host));
  hmc_plugin_status_t st = load_config(host, c->log_, &c->cfg_);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  st = resolve_tcp_addresses(c->cfg_, c->log_, &c->tcp_);
  if (st != HMC_PLUGIN_SUCCESS) return st;

  c->epfd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!c->epfd_.valid()) {
    c->log_.write(HMC_LOG_ERROR, "epoll_create1 failed: %s", errno_text(errno).c_str());
    return HMC_PLUGIN_ERR_SYSTEM;
  }
  if (c->cfg_.shm) {
    if (!memfd_supported()) {
      HS_INFO(c->log_, "shm device not offered: memfd_create failed: %s",
              errno_text(errno).c_str());
      c->cfg_.shm = false;
    }
  }
  if (c->cfg_.shm) {
    c->wake_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!c->wake_.valid()) {
      c->log_.write(HMC_LOG_ERROR, "eventfd failed: %s", errno_text(errno).c_str());
      return HMC_PLUGIN_ERR_SYSTEM;
    }
    if (c->watch(c->wake_.get(), EPOLLIN, PollKind::kWake, c.get()) == 0) {
      c->log_.write(HMC_LOG_ERROR, "epoll_ctl(eventfd) failed: %s", errno_text(errno).c_str());
      return HMC_PLUGIN_ERR_SYSTEM;
    }
    if (c->cfg_.shm_cma) allow_cma_peers(c->log_);
  }
  HS_DEBUG(c->log_,
           "context ready: devices %d, streams %d, eager %zu (shm %zu), chunk %zu (shm %zu), "
           "sockbuf %zu, cma %d",
           c->device_count(), c->cfg_.streams, c->cfg_.eager_limit, c->cfg_.shm_eager_limit,
           c->cfg_.chunk, c->cfg_.shm_chunk, c->cfg_.sockbuf, c->cfg_.shm_cma ? 1 : 0);
  *out = c.release();
  return HMC_PLUGIN_SUCCESS;
}

Context::~Context() {
  std::vector<Listener*> ls = listeners_;
  for (Listener* l : ls) delete l;
  std::vector<Endpoint*> eps = eps_;
  for (Endpoint* ep : eps) delete ep;  // their requests go to free_reqs_
  for (Request* r : free_reqs_) delete r;
  for (MemRegion* m : mrs_) delete m;
  for (RemoteKey* k : rkeys_) delete k;
}

void Context::remove_endpoint(Endpoint* ep) {
  auto it = std::find(eps_.begin(), eps_.end(), ep);
  if (it != eps_.end()) eps_.erase(it);
}

void Context::remove_listener(Listener* l) {
  auto it = std::find(listeners_.begin(), listeners_.end(), l);
  if (it != listeners_.end()) listeners_.erase(it);
}

uint64_t Context::watch(int fd, uint32_t events, PollKind kind, void* obj, void* aux, int index) {
  uint64_t token = next_token_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  if (::epoll_ctl(epfd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return 0;
  pollers_[token] = Poller{kind, obj, aux, index};
  return token;
}

void Context::modify(int fd, uint64_t token, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  ::epoll_ctl(epfd_.get(), EPOLL_CTL_MOD, fd, &ev);
}

void Context::unwatch(int fd, uint64_t token) {
  if (token == 0) return;
  pollers_.erase(token);
  if (fd >= 0) ::epoll_ctl(epfd_.get(), EPOLL_CTL_DEL, fd, nullptr);
}

int Context::poll_sockets() {
  epoll_event evs[64];
  int n;
  do {
    n = ::epoll_wait(epfd_.get(), evs, 64, 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return 0;
  for (int i = 0; i < n; ++i) {
    auto it = pollers_.find(evs[i].data.u64);
    if (it == pollers_.end()) continue;  // closed earlier in this batch
    Poller p = it->second;               // handlers may add pollers (rehash)
    uint32_t events = evs[i].events;
    switch (p.kind) {
      case PollKind::kStream: static_cast<Stream*>(p.obj)->on_event(events); break;
      case PollKind::kDial: static_cast<Endpoint*>(p.obj)->on_dial_event(p.index, events); break;
      case PollKind::kListen: static_cast<Listener*>(p.obj)->on_listen_event(p.index); break;
      case PollKind::kIncoming: static_cast<Listener*>(p.obj)->on_incoming_event(p.aux); break;
      case PollKind::kWake: {
        uint64_t v;
        while (::read(wake_.get(), &v, sizeof(v)) > 0) {
        }
        break;
      }
    }
  }
  if (n == 64) more_work_ = true;
  return n;
}

void Context::progress() {
  if (armed_) disarm();
  more_work_ = false;
  bool hot = false;
  bool establishing = false;
  for (Listener* l : listeners_) {
    if (l->waiting()) establishing = true;
  }
  for (size_t i = 0; i < eps_.size(); ++i) {
    Endpoint* ep = eps_[i];
    switch (ep->state()) {
      case Endpoint::State::kConnecting: establishing = true; break;
      case Endpoint::State::kReady:
        if (ep->dev() == DevKind::kShm) {
          ep->progress_shm();
          if (ep->socket_busy()) hot = true;
        } else {
          hot = true;
        }
        break;
      case Endpoint::State::kFailed: break;
    }
  }
  // Ready shm endpoints only need their sockets for peer death and the rare fallback stream, so
  // the epoll set is polled every 1024th call (a system call costs as much as ~20 ring polls);
  // tcp endpoints every call. A sleeping core wakes on the fd anyway.
  // Connection setup is not latency-critical: every 16th call while something is established.
  ++tick_;
  if (hot || (establishing && (tick_ & 15) == 0) || (tick_ & 1023) == 0) poll_sockets();
  if (establishing) {
    uint64_t now = now_ns();
    for (size_t i = 0; i < eps_.size(); ++i) eps_[i]->check_deadline(now);
    for (size_t i = 0; i < listeners_.size(); ++i) listeners_[i]->check_deadlines(now);
  }
}

hmc_plugin_status_t Context::arm() {
  if (more_work_) return HMC_PLUGIN_IN_PROGRESS;
  // Handles whatever the epoll set already reports (and drains the wake eventfd), so that the
  // core's poll on wait_fd does not return at once for something already seen.
  if (poll_sockets() > 0 || more_work_) return HMC_PLUGIN_IN_PROGRESS;
  bool any = false;
  for (Endpoint* ep : eps_) {
    if (ep->ready() && ep->dev() == DevKind::kShm) {
      ep->arm_flags();
      any = true;
    }
  }
  if (any) {
    armed_ = true;
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  for (Endpoint* ep : eps_) {
    if (ep->has_unsignalled_work()) return HMC_PLUGIN_IN_PROGRESS;
  }
  return HMC_PLUGIN_SUCCESS;
}

void Context::disarm() {
  armed_ = false;
  for (Endpoint* ep : eps_) {
    if (ep->ready() && ep->dev() == DevKind::kShm) ep->disarm_flags();
  }
}

}  // namespace hmc::hoststage

namespace hmc::hoststage {

bool Context::inject_error(const char* what) {
  if (cfg_.inject_errors <= 0) return false;
  if (!inject_state_) inject_state_ = now_ns() ^ (uint64_t(::getpid()) << 32) ^ 0x5eedu;
  // splitmix64: one in N at random, different in every process.
  uint64_t x = (inject_state_ += 0x9E3779B97F4A7C15ull);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  if (x % uint64_t(cfg_.inject_errors) != 0) return false;
  log_.write(HMC_LOG_ERROR, "%s: error injected by HMC_HOSTSTAGE_INJECT_ERRORS=%d", what,
             cfg_.inject_errors);
  return true;
}

}  // namespace hmc::hoststage
