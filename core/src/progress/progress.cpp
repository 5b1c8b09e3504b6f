#include "progress/progress.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "peer/dispatch.h"
#include "peer/incoming.h"
#include "peer/messages.h"
#include "peer/peer.h"
#include "progress/peer_failure.h"
#include "regions/regions.h"
#include "request/request.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/status.h"
#include "xfer/target_staging.h"
#include "xfer/transfers.h"

namespace hmc {

hmc_status_t Progress::start(bool thread) {
  int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) return fail(HMC_ERR_SYSTEM, "eventfd: {}", strerror(errno));
  wake_fd_.reset(efd);
  if (thread) thread_ = std::thread([this] { thread_main(); });
  return HMC_SUCCESS;
}

void Progress::stop() {
  stopping_ = true;
  wake();
  w_.transfers.polling().thread_cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Progress::service_control(const std::shared_ptr<Peer>& peer, uint64_t now) {
  bool busy = false;
  std::string lost;
  {
    std::lock_guard<std::mutex> lock(peer->ctrl_mutex);
    if (!peer->ctrl || peer->lost) return false;
    std::vector<control::Channel::Message> msgs;
    hmc_status_t st = peer->ctrl->receive(&msgs);
    for (auto& m : msgs) {
      busy = true;
      peer->last_heard_ns = now;
      std::string why = w_.dispatch.dispatch(peer, m);
      if (lost.empty()) lost = why;
    }
    if (lost.empty() && st != HMC_SUCCESS) {
      if (peer->remote_closed) {
        peer->ctrl.reset();  // its end went away after Bye, as it should
        return busy;
      }
      lost = "control connection: " + last_error();
    }
    if (lost.empty() && !peer->remote_closed &&
        elapsed_ns(now, peer->last_sent_ns) > uint64_t(settings_.heartbeat_ms) * 1000000) {
      control::Writer w;
      if (peer->ctrl->send(control::MsgType::Heartbeat, w) == HMC_SUCCESS)
        peer->last_sent_ns = now;
      else
        lost = "control connection: " + last_error();
    } else if (lost.empty() && peer->ctrl->want_write()) {
      if (peer->ctrl->flush() != HMC_SUCCESS) lost = "control connection: " + last_error();
    }
  }
  uint64_t completions = peer->completions.load(std::memory_order_relaxed);
  if (completions != peer->completions_seen) {
    peer->completions_seen = completions;
    peer->last_heard_ns = now;
  }
  // A silent peer with work outstanding is declared lost after the timeout.
  if (lost.empty() && peer->pending_count.load(std::memory_order_relaxed) > 0 &&
      elapsed_ns(now, peer->last_heard_ns.load()) > uint64_t(settings_.timeout_ms) * 1000000)
    lost = fmt::format("nothing heard for {} ms (HMC_TIMEOUT_MS)", settings_.timeout_ms);
  if (!lost.empty()) {
    w_.failure.fail_peer(*peer, HMC_ERR_PEER_LOST, lost);
    busy = true;
  }
  return busy;
}

bool Progress::pass(bool control) {
  bool busy = pass_peers(control);
  if (settings_.collectives) busy |= settings_.collectives->progress();
  return busy;
}

bool Progress::pass_peers(bool control) {
  bool busy = false;
  std::lock_guard<std::mutex> plock(w_.peers_mutex);
  for (auto& net : w_.nets) {
    // A plugin no peer uses has nothing to advance (connection setup drives its own progress):
    // passing it by saves its progress call, which for some is a system call or several.
    bool used = false;
    for (auto& peer : w_.peers) used |= peer->net == net.get();
    if (!used) continue;
    std::lock_guard<std::mutex> lock(net->mutex());
    if (HMC_NET_SLOT(net->table(), progress)) net->table()->progress(net->ctx());
    const bool carried_notify = HMC_NET_SLOT(net->table(), notify_poll);
    for (auto& peer : w_.peers) {
      if (peer->net != net.get()) continue;
      if (carried_notify) w_.transfers.poll_carried_notifications_locked(*peer);
      if (peer->pending.empty()) continue;
      auto& pend = peer->pending;
      bool broken = false;
      for (size_t i = 0; i < pend.size();) {
        Request* req = pend[i];
        if (req->framed) {
          FramedTransfer& f = *req->framed;
          busy |= f.advance(req, *peer, w_.stage_env);
          if (f.broken() && w_.transfers.framed_broken_locked(*peer, req))
            break;  // pending was cleared
          if (!f.finished()) {
            ++i;
            continue;
          }
          pend[i] = pend.back();
          pend.pop_back();
          w_.transfers.end_framed_locked(req);
          busy = true;
          continue;
        }
        int done = 0;
        size_t bytes = 0;
        hmc_plugin_status_t st = net->table()->test(req->net, &done, &bytes);
        if (!done && st == HMC_PLUGIN_SUCCESS) {
          ++i;
          continue;
        }
        pend[i] = pend.back();
        pend.pop_back();
        w_.transfers.finish_request_locked(req, st, bytes);
        broken |= w_.transfers.breaks_path(*peer, *req, st);
        busy = true;
      }
      if (broken) w_.failure.fail_peer_locked(*peer, HMC_ERR_PEER_LOST, "connection broken");
    }
  }
  if (control) {
    uint64_t now = now_ns();
    w_.transfers.polling().last_control_ns = now;
    w_.failure.reap_parked_transfers();
    for (auto& peer : w_.peers) busy |= service_control(peer, now);
    busy |= settings_.staging->advance();  // after the StagedPut/Get/Done messages just dispatched
    busy |=
        settings_.regions->settle_withdrawals();  // after the RegionGone messages just dispatched
  }
  return busy;
}

bool Progress::until(const std::function<bool()>& done, uint64_t deadline_ns) {
  Polling::Scope scope(w_.transfers.polling());
  for (;;) {
    if (done()) return true;
    bool busy = pass(true);
    if (done()) return true;
    if (now_ns() >= deadline_ns) return false;
    // Give the core to the peer process (and the kernel's socket work) on small machines.
    if (!busy) sched_yield();
  }
}

void Progress::wake() {
  if (!wake_fd_.valid()) return;
  uint64_t one = 1;
  ssize_t rc = write(wake_fd_.get(), &one, sizeof one);
  (void)rc;
}

void Progress::thread_main() {
  Polling& polling = w_.transfers.polling();
  while (!stopping_) {
    // Outside every lock of a pass: a connector's setup takes plugin and peer-list locks itself.
    const bool arrivals = settings_.incoming && settings_.incoming->drive();
    if (polling.active_pollers.load() > 0) {
      // An application thread is driving progress itself; stay out of its way.
      std::unique_lock<std::mutex> lock(polling.thread_mutex);
      polling.thread_cv.wait_for(lock, std::chrono::milliseconds(2));
      continue;
    }
    if (pass(true) || arrivals) continue;
    // Nothing to do: sleep until a socket or plugin has something, or the next heartbeat.
    sleep_for_events(std::max(1, settings_.heartbeat_ms / 2), true);
  }
}

bool Progress::sleep_for_events(int timeout_ms, bool thread) {
  std::vector<struct pollfd> fds;
  fds.push_back({wake_fd_.get(), POLLIN, 0});
  bool any_pending = false;
  {
    std::lock_guard<std::mutex> plock(w_.peers_mutex);
    for (auto& peer : w_.peers) {
      any_pending |= peer->pending_count.load() > 0;
      std::lock_guard<std::mutex> lock(peer->ctrl_mutex);
      if (peer->ctrl && !peer->lost)
        fds.push_back(
            {peer->ctrl->fd(), short(POLLIN | (peer->ctrl->want_write() ? POLLOUT : 0)), 0});
    }
    for (auto& net : w_.nets) {
      // A waiting thread needs only the plugins its peers use (the others have nothing that
      // could end its wait); the progress thread also sleeps on the rest, for their setup.
      bool used = thread;
      for (auto& peer : w_.peers) used |= peer->net == net.get();
      if (!used) continue;
      int fd = net->wait_fd();
      if (fd < 0 || !net->can_arm()) {
        // No way to sleep on this plugin: a waiting thread goes on polling; the progress thread
        // polls it often while requests are pending.
        if (!thread) return false;
        if (any_pending) timeout_ms = 1;
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
        continue;
      }
      std::lock_guard<std::mutex> lock(net->mutex());
      if (net->table()->arm(net->ctx()) != HMC_PLUGIN_SUCCESS) return false;  // work already
      fds.push_back({fd, POLLIN, 0});
    }
  }
  if (thread && settings_.incoming) settings_.incoming->add_poll_fds(&fds, &timeout_ms);
  if (thread) thread_sleeping_ = true;
  int rc = poll(fds.data(), fds.size(), timeout_ms);
  if (thread) thread_sleeping_ = false;
  if (rc > 0 && (fds[0].revents & POLLIN)) {
    uint64_t v;
    ssize_t n = read(wake_fd_.get(), &v, sizeof v);
    (void)n;
  }
  return true;
}

}  // namespace hmc
