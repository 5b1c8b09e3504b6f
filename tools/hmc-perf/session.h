// What hmc-perf's client and server share: the error type, bounded waits that turn a timeout or
// a failed transfer into a message saying what was being waited for, and the control channel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <hmc/hmc.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "child_process.h"
#include "options.h"
#include "wire.h"

namespace hmc::perf {

// Ends the run with exit status 1; what() is the whole message.
class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline double now_s() {
  return hmc::tools::monotonic_seconds();
}

// What a wait is for, to complete the message of a failed wait ("timed out ... for ping 12"): a
// text and an optional number, put together only when the wait fails, so that the waits of the
// measured loops allocate nothing.
class What {
 public:
  What(const char* text, int64_t index = -1) : text_(text), index_(index) {}  // NOLINT
  What(std::string text) : owned_(std::move(text)) {}                         // NOLINT
  std::string str() const {
    std::string s = text_ != nullptr ? std::string(text_) : owned_;
    if (index_ >= 0) s += " " + std::to_string(index_);
    return s;
  }

 private:
  const char* text_ = nullptr;  // not owned: a literal
  std::string owned_;
  int64_t index_ = -1;
};

// Throws the RunError for a wait that ended in s (not HMC_SUCCESS).
[[noreturn]] inline void wait_failed(hmc_status_t s, const char* call, int timeout_ms,
                                     const What& what) {
  hmc::Error e(s, call);  // captures hmc_last_error() now
  if (s == HMC_ERR_TIMEOUT)
    throw RunError("timed out after " + std::to_string(timeout_ms) + " ms " + what.str() + " (" +
                   e.what() + ")");
  throw RunError(what.str() + ": " + e.what());
}

// Waits for r up to timeout_ms; returns the bytes moved. `what` completes "timed out ... <what>".
inline size_t wait_for(hmc::Request& r, int timeout_ms, const What& what) {
  size_t bytes = 0;
  hmc_status_t s = r.wait_status(timeout_ms, &bytes);
  if (s != HMC_SUCCESS) wait_failed(s, "hmc_request_wait", timeout_ms, what);
  return bytes;
}

inline hmc_notification_t wait_notification(hmc::Context& ctx, int timeout_ms, const What& what) {
  hmc_notification_t n{};
  hmc_status_t s = hmc_notify_wait(ctx.get(), timeout_ms, &n);
  if (s != HMC_SUCCESS) wait_failed(s, "hmc_notify_wait", timeout_ms, what);
  return n;
}

// Like wait_for, for waits whose length depends on the other side's work (the server waiting
// for the client's gets, or for the last put of a long phase): waits in slices of timeout_ms
// for as long as the peer is alive. A dead or silent peer is declared lost by the core.
inline size_t wait_patiently(hmc::Request& r, hmc::Peer& peer, int timeout_ms, const What& what) {
  for (;;) {
    size_t bytes = 0;
    hmc_status_t s = r.wait_status(timeout_ms, &bytes);
    if (s == HMC_SUCCESS) return bytes;
    hmc::Error e(s, "hmc_request_wait");
    if (s != HMC_ERR_TIMEOUT) throw RunError(what.str() + ": " + e.what());
    if (!peer.info().alive) throw RunError("the peer was lost " + what.str());
  }
}

inline hmc_notification_t wait_notification_patiently(hmc::Context& ctx, hmc::Peer& peer,
                                                      int timeout_ms, const What& what) {
  for (;;) {
    hmc_notification_t n{};
    hmc_status_t s = hmc_notify_wait(ctx.get(), timeout_ms, &n);
    if (s == HMC_SUCCESS) return n;
    hmc::Error e(s, "hmc_notify_wait");
    if (s != HMC_ERR_TIMEOUT) throw RunError(what.str() + ": " + e.what());
    if (!peer.info().alive) throw RunError("the peer was lost " + what.str());
  }
}

// Control messages on the tool's reserved tag.
class Channel {
 public:
  Channel(hmc::Peer& peer, int timeout_ms) : peer_(peer), timeout_ms_(timeout_ms) {}

  void send(const std::vector<uint8_t>& msg, const std::string& what) {
    auto r = peer_.send(msg.data(), msg.size(), kControlTag);
    wait_for(r, timeout_ms_, "sending " + what);
  }
  // patient: the message may take as long as the peer's work (see wait_patiently).
  std::vector<uint8_t> recv(const std::string& what, bool patient = false) {
    buf_.resize(kControlMax);
    auto r = peer_.recv(buf_.data(), buf_.size(), kControlTag);
    size_t n = patient ? wait_patiently(r, peer_, timeout_ms_, "waiting for " + what)
                       : wait_for(r, timeout_ms_, "waiting for " + what);
    return std::vector<uint8_t>(buf_.begin(), buf_.begin() + static_cast<long>(n));
  }
  void send_control(MsgType type, uint32_t index, const std::string& what) {
    Control c;
    c.type = type;
    c.index = index;
    send(encode(c), what);
  }
  Control recv_control(MsgType type, uint32_t index, const std::string& what,
                       bool patient = false) {
    auto m = recv(what, patient);
    Control c;
    std::string err;
    if (!decode(m.data(), m.size(), type, &c, &err))
      throw RunError("bad control message while waiting for " + what + ": " + err);
    if (c.index != index)
      throw RunError("control message for size index " + std::to_string(c.index) +
                     " while waiting for " + what + " of index " + std::to_string(index));
    return c;
  }
  int timeout_ms() const { return timeout_ms_; }

 private:
  hmc::Peer& peer_;
  int timeout_ms_;
  std::vector<uint8_t> buf_;
};

// A progress line on stderr at most once a second, once a size has run for a second.
class ProgressLine {
 public:
  ProgressLine(bool enabled, uint64_t size, int64_t total)
      : enabled_(enabled), size_(size), total_(total), start_(now_s()), next_(start_ + 1.0) {}
  void tick(int64_t done) {
    // For small messages the clock is read on every 64th call only: a read costs tens of ns on
    // a VM, as much as part of what a latency run measures. Large ones check every time, so
    // that a long run of few messages still reports.
    if (!enabled_ || (size_ < kEveryCall && (++calls_ & 63) != 0)) return;
    double t = now_s();
    if (t < next_) return;
    std::fprintf(stderr, "hmc-perf: size %s, %lld/%lld iters, %.1f s\n", size_text(size_).c_str(),
                 static_cast<long long>(done), static_cast<long long>(total_), t - start_);
    next_ = t + 1.0;
  }

 private:
  bool enabled_;
  uint64_t size_;
  int64_t total_;
  static constexpr uint64_t kEveryCall = 64 << 10;
  double start_, next_;
  uint64_t calls_ = 0;
};

// The largest slot area a plan needs: window * size, maximised over the sizes.
inline size_t area_bytes(const std::vector<SizePlan>& plan) {
  size_t area = 0;
  for (const auto& p : plan) {
    if (p.size > SIZE_MAX / static_cast<uint64_t>(p.window))
      throw RunError("window " + std::to_string(p.window) + " x size " + std::to_string(p.size) +
                     " does not fit in memory");
    area = std::max<size_t>(area, p.size * static_cast<uint64_t>(p.window));
  }
  return area;
}
inline size_t max_size(const std::vector<SizePlan>& plan) {
  size_t m = 0;
  for (const auto& p : plan) m = std::max<size_t>(m, p.size);
  return m;
}

// Which buffer areas a side needs. tx: data it sends or puts (or serves to get); rx: data it
// receives (or gets into, or that is put into it).
struct Needs {
  bool tx = false, rx = false;
};
inline Needs client_needs(Test t, Op op) {
  Needs n;
  n.tx = op != Op::Get;
  n.rx = op == Op::Get || t == Test::Lat;
  return n;
}
inline Needs server_needs(Test t, Op op) {
  Needs n;
  n.rx = op != Op::Get;
  n.tx = op == Op::Get || t == Test::Lat;
  return n;
}

// Entry points (client.cpp, server.cpp). Both return the process exit status or throw RunError /
// hmc::Error.
int run_client(const Options& o, hmc::Context& ctx, hmc::Peer& peer);
int run_server(const Options& o, hmc::Context& ctx, hmc::Peer& peer);

}  // namespace hmc::perf
