#include "peer/incoming.h"

#include <algorithm>
#include <chrono>

#include "control/socket.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {
namespace {

// At most this many connector failures are logged per second; the rest are counted and summed
// up in the next window's first line.
constexpr uint32_t kLogsPerWindow = 10;
constexpr uint64_t kLogWindowNs = 1000ull * 1000 * 1000;
// How long the listeners rest after accept(2) failed for a reason other than "none pending"
// (out of descriptors: the pending connection stays, and polling it again at once would spin).
constexpr uint64_t kListenPauseNs = 100ull * 1000 * 1000;
// Batches of new connectors one drive() takes at most, so that a flood in the kernel's backlog
// does not keep the driving thread (the progress thread) from everything else.
constexpr int kBatchesPerDrive = 8;
// How often, at most, drive() looks at the listeners. The progress thread calls it on every
// turn, and a turn with transfers in flight should not pay two accept(2) calls for nothing; a
// sleeping thread is woken by the listeners themselves (add_poll_fds) once this has passed.
constexpr uint64_t kListenCheckNs = 1000ull * 1000;
// Without a progress thread, how long hmc_accept sleeps at most before it looks at the queue of
// finished peers again.
constexpr int kQueueLookMs = 10;

int ms_until(uint64_t deadline, uint64_t now) {
  if (deadline <= now) return 0;
  return static_cast<int>(std::min<uint64_t>((deadline - now + 999999) / 1000000, INT32_MAX));
}

}  // namespace

IncomingPeers::~IncomingPeers() {
  std::lock_guard<std::mutex> lock(drive_mutex_);
  arrivals_.clear();
}

size_t IncomingPeers::take_new_connectors(size_t most, std::vector<Ended>* ended) {
  const uint64_t now = now_ns();
  size_t taken = 0;
  if (now < listen_pause_until_ns_) return taken;
  listen_checked_ns_ = now;
  // One from each listener in turn: a flood on one transport does not starve the other.
  int listeners[2] = {s_.unix_listener, s_.tcp_listener};
  while (taken < most && (listeners[0] >= 0 || listeners[1] >= 0)) {
    for (int& listener : listeners) {
      if (listener < 0 || taken >= most) continue;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        // hmc_accept is behind: let the kernel hold them.
        if (ready_.size() >= s_.max_pending) return taken;
      }
      control::Fd fd;
      std::string remote;
      hmc_status_t st = control::accept_one(listener, &fd, &remote);
      if (st == HMC_IN_PROGRESS) {
        listener = -1;  // none pending there now
        continue;
      }
      if (st != HMC_SUCCESS) {
        listen_pause_until_ns_ = now + kListenPauseNs;
        ended->push_back({st, "accepting connectors: " + last_error(), Ended::Kind::Listener});
        return taken;
      }
      if (arrivals_.size() >= s_.max_pending) evict_one(ended);
      arrivals_.push_back(
          connector_.arrive(std::move(fd), std::move(remote), s_.handshake_timeout_ms));
      ++taken;
    }
  }
  return taken;
}

void IncomingPeers::evict_one(std::vector<Ended>* ended) {
  auto victim = std::find_if(arrivals_.begin(), arrivals_.end(), [](const auto& a) {
    return a->stage() == PeerConnector::Arrival::Stage::Hello;
  });
  if (victim == arrivals_.end()) victim = arrivals_.begin();
  ended->push_back({HMC_ERR_TIMEOUT,
                    fmt::format("incoming connector {} dropped after {} ms in setup: {} "
                                "connectors were in setup (HMC_MAX_PENDING_HANDSHAKES) and the "
                                "oldest goes first",
                                (*victim)->remote(), (now_ns() - (*victim)->started_ns()) / 1000000,
                                s_.max_pending),
                    Ended::Kind::Dropped});
  arrivals_.erase(victim);
}

bool IncomingPeers::drive() {
  std::unique_lock<std::mutex> drive_lock(drive_mutex_, std::try_to_lock);
  if (!drive_lock.owns_lock()) return false;
  std::vector<Ended> ended;
  std::vector<Finished> done;
  // Advancing first ends the arrivals that are over already (closed, garbage), so that new
  // connectors evict only ones still alive. New connectors come in batches of half the table,
  // each advanced before the next batch can evict anything: a real peer's Hello is usually in
  // its socket by the time accept(2) returns it, and moves it past its hello.
  bool busy = advance_all(&ended, &done);
  const size_t batch = std::max<size_t>(1, s_.max_pending / 2);
  const bool look = now_ns() - listen_checked_ns_ >= kListenCheckNs;
  for (int round = 0; look && round < kBatchesPerDrive; ++round) {
    const size_t taken = take_new_connectors(batch, &ended);
    if (taken == 0) break;
    busy = true;
    advance_all(&ended, &done);
    if (taken < batch) break;
  }
  busy |= !ended.empty();
  record(ended, done.size());
  for (auto& d : done) services_.peer_arrived(std::move(d.first), std::move(d.second));
  return busy;
}

bool IncomingPeers::advance_all(std::vector<Ended>* ended, std::vector<Finished>* done) {
  bool busy = false;
  for (size_t i = 0; i < arrivals_.size();) {
    std::shared_ptr<Peer> peer;
    std::vector<control::Channel::Message> extra;
    hmc_status_t st = connector_.advance(*arrivals_[i], &peer, &extra);
    if (st == HMC_IN_PROGRESS) {
      ++i;
      continue;
    }
    if (st == HMC_SUCCESS)
      done->emplace_back(std::move(peer), std::move(extra));
    else
      ended->push_back({st, last_error(),
                        st == HMC_ERR_PEER_LOST &&
                                arrivals_[i]->stage() == PeerConnector::Arrival::Stage::Hello &&
                                !arrivals_[i]->heard()
                            ? Ended::Kind::Probe
                            : Ended::Kind::Failed});
    arrivals_.erase(arrivals_.begin() + static_cast<std::ptrdiff_t>(i));
    busy = true;
  }
  return busy;
}

void IncomingPeers::record(const std::vector<Ended>& ended, size_t accepted) {
  {
    // One update, so that a reader never sees an ended connector still counted as pending.
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.accepted += accepted;
    stats_.pending = static_cast<uint32_t>(arrivals_.size());
    for (const Ended& e : ended) {
      if (e.kind == Ended::Kind::Listener) continue;  // not a connector
      if (e.kind == Ended::Kind::Dropped)
        ++stats_.dropped;
      else if (e.status == HMC_ERR_TIMEOUT)
        ++stats_.timed_out;
      else
        ++stats_.failed;
      stats_.last_failure_status = e.status;
      stats_.last_failure = e.reason;
    }
  }
  for (const Ended& e : ended) log_rate_limited(e);
}

void IncomingPeers::log_rate_limited(const Ended& e) {
  const uint64_t now = now_ns();
  if (now - log_window_ns_ >= kLogWindowNs) {
    if (suppressed_ > 0)
      HMC_LOG_W(
          "{} more incoming connectors failed or were dropped in the last {} s without a "
          "line of their own (hmc_accept_stats counts them all)",
          suppressed_, (now - log_window_ns_) / 1000000000);
    log_window_ns_ = now;
    logged_in_window_ = 0;
    suppressed_ = 0;
  }
  if (logged_in_window_ >= kLogsPerWindow) {
    ++suppressed_;
    return;
  }
  ++logged_in_window_;
  // One that connected and closed without a byte is a probe (a port check, a load balancer's
  // health check): harmless, so not a warning.
  if (e.kind == Ended::Kind::Probe)
    HMC_LOG_I("{}", e.reason);
  else
    HMC_LOG_W("{}", e.reason);
}

void IncomingPeers::add_poll_fds(std::vector<pollfd>* fds, int* timeout_ms) {
  std::lock_guard<std::mutex> drive_lock(drive_mutex_);
  const uint64_t now = now_ns();
  bool room;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    room = ready_.size() < s_.max_pending;
  }
  const uint64_t listen_at = std::max(listen_pause_until_ns_, listen_checked_ns_ + kListenCheckNs);
  if (room && now >= listen_at) {
    for (int listener : {s_.unix_listener, s_.tcp_listener})
      if (listener >= 0) fds->push_back({listener, POLLIN, 0});
  } else if (room) {
    *timeout_ms = std::min(*timeout_ms, std::max(1, ms_until(listen_at, now)));
  }
  for (const auto& a : arrivals_) {
    fds->push_back({a->fd(), short(POLLIN | (a->wants_write() ? POLLOUT : 0)), 0});
    *timeout_ms = std::min(*timeout_ms, std::max(1, ms_until(a->deadline_ns(), now)));
    if (a->stage() == PeerConnector::Arrival::Stage::DataPath) *timeout_ms = 1;
  }
}

void IncomingPeers::queue_for_accept(std::shared_ptr<Peer> peer) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.push_back(std::move(peer));
  }
  ready_cv_.notify_one();
}

hmc_status_t IncomingPeers::next(uint64_t deadline_ns, bool drive_here,
                                 std::shared_ptr<Peer>* out) {
  const uint64_t start = now_ns();
  std::vector<pollfd> fds;
  for (;;) {
    if (drive_here) drive();
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!drive_here && ready_.empty()) {
        const uint64_t now = now_ns();
        if (now < deadline_ns)
          ready_cv_.wait_for(lock, std::chrono::nanoseconds(deadline_ns - now),
                             [&] { return !ready_.empty(); });
      }
      if (!ready_.empty()) {
        *out = std::move(ready_.front());
        ready_.pop_front();
        return HMC_SUCCESS;
      }
      if (now_ns() >= deadline_ns) {
        std::string note =
            stats_.pending == 0
                ? ""
                : fmt::format(" ({} connectors are still in their setup)", stats_.pending);
        return fail(HMC_ERR_TIMEOUT, "hmc_accept: no peer finished connecting within {} ms{}",
                    (now_ns() - start) / 1000000, note);
      }
    }
    if (!drive_here) continue;
    fds.clear();
    // Another thread driving (hmc_progress, a second hmc_accept) may finish a peer while this
    // one sleeps on sockets it will never see ready: look at the queue now and then.
    int timeout = std::min(ms_until(deadline_ns, now_ns()), kQueueLookMs);
    add_poll_fds(&fds, &timeout);
    if (fds.empty()) {
      struct timespec ts = {timeout / 1000, (timeout % 1000) * 1000000L};
      nanosleep(&ts, nullptr);
    } else {
      (void)poll(fds.data(), fds.size(), timeout);
    }
  }
}

IncomingPeers::Stats IncomingPeers::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  Stats s = stats_;
  s.waiting = static_cast<uint32_t>(ready_.size());
  return s;
}

}  // namespace hmc
