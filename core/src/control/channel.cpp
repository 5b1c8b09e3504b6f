#include "control/channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "control/socket.h"
#include "util/clock.h"
#include "util/status.h"

namespace hmc::control {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kCompactThreshold = 64 * 1024;

bool is_connection_loss(int err) {
  return err == EPIPE || err == ECONNRESET || err == ECONNABORTED || err == ETIMEDOUT ||
         err == EHOSTUNREACH || err == ENETUNREACH || err == ENOTCONN;
}

}  // namespace

Channel::Channel(Fd fd) : fd_(std::move(fd)) {}

std::string Channel::describe() const {
  return peer_name_.empty() ? fmt::format("peer on fd {}", fd_.get()) : "peer " + peer_name_;
}

hmc_status_t Channel::fail_send(hmc_status_t st, std::string msg) {
  send_status_ = st;
  send_error_ = std::move(msg);
  out_.clear();
  out_head_ = 0;
  return set_error(st, send_error_);
}

hmc_status_t Channel::fail_recv(hmc_status_t st, std::string msg) {
  recv_status_ = st;
  recv_error_ = std::move(msg);
  return set_error(st, recv_error_);
}

hmc_status_t Channel::fail_both(hmc_status_t st, std::string msg) {
  if (send_status_ == HMC_SUCCESS) fail_send(st, msg);
  return fail_recv(st, std::move(msg));
}

bool Channel::want_write() const {
  return send_status_ == HMC_SUCCESS && out_head_ < out_.size();
}

hmc_status_t Channel::send(MsgType type, const Writer& payload) {
  return send(type, payload.data().data(), payload.size());
}

hmc_status_t Channel::send(MsgType type, const uint8_t* payload, size_t len) {
  if (send_status_ != HMC_SUCCESS) return set_error(send_status_, send_error_);
  if (len > kMaxFramePayload)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "send {} to {}: payload of {} bytes exceeds the control frame limit of {} bytes",
                msg_type_name(type), describe(), len, kMaxFramePayload);
  if (!fd_.valid())
    return fail(HMC_ERR_INVALID_ARGUMENT, "send {}: channel has no socket", msg_type_name(type));
  encode_frame(type, payload, len, &out_);
  return flush();
}

hmc_status_t Channel::flush() {
  if (send_status_ != HMC_SUCCESS) return set_error(send_status_, send_error_);
  while (out_head_ < out_.size()) {
    ssize_t n = ::send(fd_.get(), out_.data() + out_head_, out_.size() - out_head_,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out_head_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    int err = n < 0 ? errno : EPIPE;
    if (is_connection_loss(err))
      return fail_send(HMC_ERR_PEER_LOST,
                       fmt::format("control connection to {} lost while sending: "
                                   "{}",
                                   describe(), strerror(err)));
    return fail_both(HMC_ERR_SYSTEM, fmt::format("send to {} failed: {} (errno {})", describe(),
                                                 strerror(err), err));
  }
  if (out_head_ == out_.size()) {
    out_.clear();
    out_head_ = 0;
  } else if (out_head_ > kCompactThreshold && out_head_ > out_.size() / 2) {
    out_.erase(out_.begin(), out_.begin() + static_cast<std::ptrdiff_t>(out_head_));
    out_head_ = 0;
  }
  return HMC_SUCCESS;
}

hmc_status_t Channel::read_available(std::vector<Message>* out) {
  uint8_t chunk[kReadChunk];
  size_t budget = kReadBudget;
  while (budget > 0) {
    ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return HMC_SUCCESS;
      int err = errno;
      if (is_connection_loss(err))
        return fail_both(HMC_ERR_PEER_LOST, fmt::format("control connection to {} lost: {}",
                                                        describe(), strerror(err)));
      return fail_both(HMC_ERR_SYSTEM, fmt::format("receive from {} failed: {} (errno {})",
                                                   describe(), strerror(err), err));
    }
    if (n == 0) {
      if (in_.buffered() > 0)
        return fail_both(HMC_ERR_PEER_LOST,
                         fmt::format("{} closed the control connection in the middle of a frame "
                                     "({} bytes of it received)",
                                     describe(), in_.buffered()));
      return fail_both(HMC_ERR_PEER_LOST,
                       fmt::format("{} closed the control connection", describe()));
    }
    received_bytes_ += static_cast<uint64_t>(n);
    budget -= std::min(budget, static_cast<size_t>(n));
    in_.append(chunk, static_cast<size_t>(n));
    for (;;) {
      Message m;
      std::string err;
      Decode d = in_.next(&m, &err);
      if (d == Decode::NeedMore) break;
      if (d == Decode::Error)
        return fail_both(HMC_ERR_PROTOCOL,
                         fmt::format("malformed control frame from {}: {}", describe(), err));
      out->push_back(std::move(m));
    }
  }
  return HMC_SUCCESS;
}

hmc_status_t Channel::receive(std::vector<Message>* out) {
  if (!out) return fail(HMC_ERR_INVALID_ARGUMENT, "Channel::receive: out is NULL");
  const size_t before = out->size();
  while (!ready_.empty()) {
    out->push_back(std::move(ready_.front()));
    ready_.pop_front();
  }
  if (recv_status_ == HMC_SUCCESS) (void)read_available(out);
  if (out->size() > before) return HMC_SUCCESS;  // a failure, if any, is reported next call
  if (recv_status_ != HMC_SUCCESS) return set_error(recv_status_, recv_error_);
  return HMC_SUCCESS;
}

hmc_status_t Channel::flush_wait(uint64_t deadline_ns) {
  for (;;) {
    hmc_status_t st = flush();
    if (st != HMC_SUCCESS) return st;
    if (!want_write()) return HMC_SUCCESS;
    short rev = 0;
    int w = wait_fd(fd_.get(), POLLOUT, deadline_ns, &rev);
    if (w == 0)
      return fail(HMC_ERR_TIMEOUT, "sending to {}: {} bytes still unsent at the deadline",
                  describe(), queued_bytes());
    if (w < 0)
      return fail(HMC_ERR_SYSTEM, "poll on the control connection to {} failed: {}", describe(),
                  strerror(errno));
  }
}

hmc_status_t Channel::send_wait(MsgType type, const Writer& payload, uint64_t deadline_ns) {
  hmc_status_t st = send(type, payload);
  if (st != HMC_SUCCESS) return st;
  return flush_wait(deadline_ns);
}

hmc_status_t Channel::receive_one(Message* out, uint64_t deadline_ns) {
  if (!out) return fail(HMC_ERR_INVALID_ARGUMENT, "Channel::receive_one: out is NULL");
  const uint64_t start = now_ns();
  for (;;) {
    if (ready_.empty() && recv_status_ == HMC_SUCCESS) {
      std::vector<Message> got;
      (void)read_available(&got);
      for (auto& m : got) ready_.push_back(std::move(m));
    }
    if (!ready_.empty()) {
      *out = std::move(ready_.front());
      ready_.pop_front();
      return HMC_SUCCESS;
    }
    if (recv_status_ != HMC_SUCCESS) return set_error(recv_status_, recv_error_);
    if (want_write()) {
      hmc_status_t st = flush();
      // A send failure is not final here: the peer's last message may still be readable.
      (void)st;
    }
    short events = POLLIN | (want_write() ? POLLOUT : 0);
    short rev = 0;
    int w = wait_fd(fd_.get(), events, deadline_ns, &rev);
    if (w == 0)
      return fail(HMC_ERR_TIMEOUT, "no control message from {} within {} ms", describe(),
                  (now_ns() - start) / 1000000);
    if (w < 0)
      return fail(HMC_ERR_SYSTEM, "poll on the control connection to {} failed: {}", describe(),
                  strerror(errno));
  }
}

}  // namespace hmc::control
