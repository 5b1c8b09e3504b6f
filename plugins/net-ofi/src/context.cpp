#include "context.h"

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "discover.h"
#include "endpoint.h"
#include "listener.h"
#include "region.h"

namespace hmc::ofi {
namespace {
// How often a device without a wait fd is polled while the core sleeps and it has work.
constexpr long kPollIntervalNs = 1000 * 1000;
// How often progress looks for endpoints whose peer should be probed (endpoint.h).
constexpr uint64_t kLivenessCheckNs = 100ull * 1000 * 1000;
}  // namespace

hmc_plugin_status_t Context::create(const hmc_host_services_t* host, Context** out) {
  std::unique_ptr<Context> c(new Context(host));
  hmc_plugin_status_t st = c->init();
  if (st == HMC_PLUGIN_SUCCESS) *out = c.release();
  return st;
}

hmc_plugin_status_t Context::init() {
  hmc_plugin_status_t st = load_config(host_, log_, &cfg_);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  std::string why;
  std::vector<DeviceChoice> choices = discover(cfg_, log_, &why);
  for (DeviceChoice& c : choices) {
    auto d = std::make_unique<Device>(*this, static_cast<int>(devices_.size()), std::move(c));
    if (d->open() == HMC_PLUGIN_SUCCESS) devices_.push_back(std::move(d));
  }
  if (devices_.empty()) {
    // Harmless when libfabric has nothing here: info, not an error.
    log_.write(HMC_LOG_INFO, "no usable libfabric provider: %s",
               why.empty() ? "every candidate failed to open (see above)" : why.c_str());
    return HMC_PLUGIN_ERR_NO_DEVICE;
  }
  // One fd for the core to sleep on: an epoll set of the completion queues' wait fds. A
  // device without one (libfabric 1.17's shm has no CQ wait object) gets a 1 ms timer in the
  // set while it has work in flight, so the core sleeps in poll(2) and still polls it.
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  can_wait_ = epoll_.get() >= 0;
  if (!can_wait_) OFI_INFO(log_, "epoll_create1: %s; the core will poll", std::strerror(errno));
  auto add = [&](int fd, const char* what) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (can_wait_ && ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      OFI_INFO(log_, "epoll_ctl(%s): %s; the core will poll", what, std::strerror(errno));
      can_wait_ = false;
    }
  };
  bool need_timer = false;
  for (const auto& d : devices_) {
    if (d->wait_fd() >= 0)
      add(d->wait_fd(), d->name().c_str());
    else
      need_timer = true;
  }
  if (can_wait_ && need_timer) {
    timer_.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
    if (timer_.get() < 0) {
      OFI_INFO(log_, "timerfd_create: %s; the core will poll", std::strerror(errno));
      can_wait_ = false;
    } else {
      add(timer_.get(), "poll timer");
    }
  }
  return HMC_PLUGIN_SUCCESS;
}

Context::~Context() {
  for (Listener* l : std::vector<Listener*>(listeners_.begin(), listeners_.end())) delete l;
  listeners_.clear();
  for (Endpoint* e : std::vector<Endpoint*>(eps_.begin(), eps_.end())) {
    e->close(false);
    delete e;
  }
  eps_.clear();
  for (RemoteKey* k : rkeys_) delete k;
  rkeys_.clear();
  for (MemRegion* m : regions_) delete m;
  regions_.clear();
  devices_.clear();  // each closes its endpoint first, then frees what is left
}

void Context::progress() {
  if (timer_armed_) {
    // Clear the poll timer (fired or not): arm sets it again if still needed.
    itimerspec off{};
    ::timerfd_settime(timer_.get(), 0, &off, nullptr);
    uint64_t ticks = 0;
    ssize_t n = ::read(timer_.get(), &ticks, sizeof(ticks));
    (void)n;
    timer_armed_ = false;
  }
  for (const auto& d : devices_) d->progress();
  tick();
}

void Context::tick() {
  // Reading the clock costs more than a completion-queue poll on some machines: look at it on
  // every 16th call only.
  if ((++ticks_ & 15) != 0) return;
  const uint64_t now = now_ns();
  if (now - last_liveness_ns_ > kLivenessCheckNs) {
    last_liveness_ns_ = now;
    for (Endpoint* e : std::vector<Endpoint*>(eps_.begin(), eps_.end())) e->check_liveness(now);
  }
}

hmc_plugin_status_t Context::wait_fd(int* fd) const {
  if (!can_wait_) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  *fd = epoll_.get();
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Context::arm() {
  if (!can_wait_) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  bool poll_soon = false;
  for (const auto& d : devices_) {
    if (d->wait_fd() >= 0) {
      if (!d->trywait()) return HMC_PLUGIN_IN_PROGRESS;
    } else if (d->busy()) {
      poll_soon = true;
    }
  }
  if (poll_soon && !timer_armed_) {
    itimerspec t{};
    t.it_value.tv_nsec = kPollIntervalNs;
    if (::timerfd_settime(timer_.get(), 0, &t, nullptr) != 0) return HMC_PLUGIN_IN_PROGRESS;
    timer_armed_ = true;
  }
  return HMC_PLUGIN_SUCCESS;
}

Endpoint* Context::make_endpoint(Device& dev) {
  auto* e = new Endpoint(dev);
  eps_.insert(e);
  return e;
}

void Context::destroy_endpoint(Endpoint* ep, bool drain) {
  eps_.erase(ep);
  ep->close(drain);
  delete ep;
}

}  // namespace hmc::ofi
