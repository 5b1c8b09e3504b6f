// hmc-perf client: sends the plan to the server, runs the timed loops, prints the results.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "buffers.h"
#include "report.h"
#include "session.h"

namespace hmc::perf {
namespace {

class Client {
 public:
  Client(const Options& o, hmc::Context& ctx, hmc::Peer& peer)
      : o_(o), ctx_(ctx), peer_(peer), ch_(peer, o.timeout_ms), plan_(make_plan(o)) {}

  ~Client() {
    if (samples_) std::fclose(samples_);
  }

  int run() {
    if (!o_.samples.empty()) {
      samples_ = std::fopen(o_.samples.c_str(), "w");
      if (!samples_)
        throw RunError("--samples: cannot write " + o_.samples + ": " + std::strerror(errno));
    }
    size_t area = area_bytes(plan_);
    size_t largest = max_size(plan_);
    Needs needs = client_needs(o_.test, o_.op);
    if (needs.tx) tx_ = Buffers(ctx_, o_.mem, area, largest);
    if (needs.rx) rx_ = Buffers(ctx_, o_.mem, area, largest);

    Setup setup;
    setup.test = o_.test;
    setup.op = o_.op;
    setup.check = o_.check;
    setup.peer_mem = o_.peer_mem;
    setup.plan = plan_;
    hmc::Region rx_region;  // put latency: the server puts its replies into rx
    if (o_.test == Test::Lat && o_.op == Op::Put) {
      rx_region = ctx_.register_memory(rx_.at(0), rx_.size(), HMC_ACCESS_REMOTE_WRITE);
      setup.client_desc = rx_region.pack();
    }
    // Device memory a put reads or a get writes is registered, as applications do for one-sided
    // transfers: where the path registers device memory (hmc_peer_info's device_memory) the NIC
    // then reaches it directly; unregistered device memory goes through bounce buffers.
    hmc::Region local_region;
    if (o_.op != Op::Send && !device_is_host(ctx_, o_.mem)) {
      Buffers& b = o_.op == Op::Put ? tx_ : rx_;
      local_region = ctx_.register_memory(b.at(0), b.size(), 0);
    }
    ch_.send(encode(setup), "the setup message");
    auto m = ch_.recv("the server's reply to the setup");
    Reply reply;
    std::string err;
    if (!decode(m.data(), m.size(), &reply, &err)) throw RunError("bad setup reply: " + err);
    if (reply.status != 0) throw RunError("the server refused the run: " + reply.error);
    if (o_.op != Op::Send) remote_ = peer_.import_remote(reply.server_desc);

    auto info = peer_.info();
    // What every size's result shares: the run's choices and the path the peer took.
    run_.test = o_.test;
    run_.op = o_.op;
    run_.path = info.path;
    run_.device_ipc = info.device_ipc;
    run_.device_memory = info.device_memory;
    run_.mem = o_.mem;
    run_.peer_mem = o_.peer_mem;
    run_.check = o_.check;
    if (o_.format == Format::Table) {
      std::printf("# hmc-perf %s: test %s, op %s, mem %s -> peer %s, progress thread %d%s\n",
                  hmc::version().c_str(), to_string(o_.test), to_string(o_.op), o_.mem.c_str(),
                  o_.peer_mem.c_str(), o_.progress_thread, o_.check ? ", --check" : "");
      std::printf("# path %s: %s\n", info.path, info.path_reason);
      if (info.device_memory[0])
        std::printf("# device memory in regions: %s\n", info.device_memory);
      if (info.device_ipc[0])
        std::printf("# device IPC for %s memory: large messages are copied device to device\n",
                    info.device_ipc);
      if (o_.test == Test::Bw)
        std::printf("# bw: lat avg is the time per message with WINDOW in flight\n");
      else if (o_.op == Op::Get)
        std::printf("# lat: a whole get (one round trip)\n");
      else
        std::printf("# lat: half a ping-pong round trip\n");
      std::fputs(table_header().c_str(), stdout);
      std::fflush(stdout);
    }

    for (uint32_t idx = 0; idx < plan_.size(); ++idx) {
      Result r = run_size(idx, plan_[idx]);
      if (o_.format == Format::Table)
        std::fputs(table_row(r).c_str(), stdout);
      else
        std::printf("%s\n", to_json(r).c_str());
      std::fflush(stdout);
    }
    ch_.send_control(MsgType::End, 0, "the end of the run");
    ch_.recv_control(MsgType::Bye, 0, "the server's goodbye");
    return 0;
  }

 private:
  void write_samples(uint64_t size, const std::vector<double>& lat) {
    if (!samples_) return;
    for (double v : lat)
      std::fprintf(samples_, "%llu %.3f\n", static_cast<unsigned long long>(size), v);
    if (std::fflush(samples_) != 0)
      throw RunError("--samples: writing " + o_.samples + ": " + std::strerror(errno));
  }

  Result run_size(uint32_t idx, const SizePlan& p) {
    idx_ = idx;
    ch_.send_control(MsgType::Begin, idx, "the start of size " + size_text(p.size));
    ch_.recv_control(MsgType::Ready, idx, "the server to be ready for size " + size_text(p.size));
    Result r = run_;
    r.size = p.size;
    r.iters = p.iters;
    r.window = p.window;
    const hmc_peer_info_t before = peer_.info();
    if (o_.test == Test::Bw) {
      double elapsed = o_.op == Op::Send ? bw_send(p) : o_.op == Op::Put ? bw_put(p) : bw_get(p);
      r.bw_MBps = static_cast<double>(p.size) * static_cast<double>(p.iters) / elapsed / 1e6;
      r.lat_us_avg = elapsed * 1e6 / static_cast<double>(p.iters);
    } else {
      std::vector<double> lat;
      lat.reserve(static_cast<size_t>(p.iters));
      if (o_.op == Op::Send)
        lat_send(p, &lat);
      else if (o_.op == Op::Put)
        lat_put(p, &lat);
      else
        lat_get(p, &lat);
      double sum = 0;
      for (double v : lat) sum += v;
      r.lat_us_avg = sum / static_cast<double>(lat.size());
      r.lat_us_p50 = percentile(lat, 0.50);
      r.lat_us_p99 = percentile(lat, 0.99);
      r.lat_us_p999 = percentile(lat, 0.999);
      r.lat_us_max = percentile(lat, 1.0);
      write_samples(p.size, lat);
      r.bw_MBps = static_cast<double>(p.size) / r.lat_us_avg;  // bytes per us = MB/s
    }
    const hmc_peer_info_t after = peer_.info();
    r.ipc_messages = after.ipc_messages - before.ipc_messages;
    r.shared_messages = after.shared_staged_messages - before.shared_staged_messages;
    r.staged_transfers = after.staged_transfers - before.staged_transfers;
    r.direct_transfers = after.direct_transfers - before.direct_transfers;
    if (o_.op == Op::Get)
      ch_.send_control(MsgType::Fin, idx, "the end of size " + size_text(p.size));
    if (!have_result_) result_ = ch_.recv_control(MsgType::Result, idx, "the server's result");
    have_result_ = false;
    if (result_.status == 1)
      throw RunError("--check: the server received bad data at size " + std::to_string(p.size) +
                     ", iteration " + std::to_string(result_.bad_iteration) +
                     ", first bad offset " + std::to_string(result_.bad_offset) +
                     (result_.text.empty() ? "" : ": ") + result_.text);
    if (result_.status != 0) throw RunError("the server failed: " + result_.text);
    return r;
  }

  // bw loops return the elapsed seconds of the measured iterations. For send and put the clock
  // stops when the server reports that everything arrived, not when the last local request
  // completed (which may only mean "handed to the transport").
  double bw_send(const SizePlan& p) {
    std::vector<hmc::Request> reqs(static_cast<size_t>(p.window));
    auto post = [&](int64_t i, bool /*last*/) {
      size_t slot = static_cast<size_t>(i % p.window);
      // Without --check every message in flight shares one buffer, as ucx_perftest does, so the
      // transport is measured rather than the cache misses of a window-sized working set.
      size_t off = o_.check ? slot * p.size : 0;
      if (reqs[slot]) wait_for(reqs[slot], o_.timeout_ms, "for a send to complete");
      if (o_.check) tx_.fill(off, p.size, seed_forward(static_cast<uint64_t>(i)));
      reqs[slot] = peer_.send(tx_.at(off), p.size, kDataTagBase + static_cast<uint64_t>(i));
    };
    auto drain = [&] {
      for (auto& r : reqs)
        if (r) wait_for(r, o_.timeout_ms, "for a send to complete");
    };
    return stream(p, post, drain, "the server to receive everything");
  }

  double bw_put(const SizePlan& p) {
    size_t w = static_cast<size_t>(p.window);
    std::vector<hmc::Request> reqs(w), acks(w);
    std::vector<uint64_t> ack_vals(w);
    auto wait_ack = [&](size_t slot) {
      size_t n = wait_for(acks[slot], o_.timeout_ms, "for the server to check a put");
      if (n != sizeof(uint64_t)) throw RunError("malformed acknowledgement from the server");
    };
    auto drain = [&] {
      for (size_t s = 0; s < w; ++s) {
        if (reqs[s]) wait_for(reqs[s], o_.timeout_ms, "for a put to complete");
        if (acks[s]) wait_ack(s);
      }
    };
    auto post = [&](int64_t i, bool last_of_phase) {
      size_t slot = static_cast<size_t>(i % p.window);
      size_t off = slot * p.size;
      if (reqs[slot]) wait_for(reqs[slot], o_.timeout_ms, "for a put to complete");
      uint32_t flags = 0;
      if (o_.check) {
        // The server checks every put; the slot is reused only after it said so.
        if (acks[slot]) wait_ack(slot);
        tx_.fill(off, p.size, seed_forward(static_cast<uint64_t>(i)));
        flags = HMC_PUT_NOTIFY;
      } else if (last_of_phase) {
        // The notification of the last put tells the server the phase is over; earlier puts
        // must have completed first so it also covers them.
        drain();
        flags = HMC_PUT_NOTIFY;
      }
      reqs[slot] = peer_.put(tx_.at(off), p.size, remote_, off, flags, static_cast<uint64_t>(i));
      if (o_.check)
        acks[slot] =
            peer_.recv(&ack_vals[slot], sizeof(uint64_t), kAckTagBase + static_cast<uint64_t>(i));
    };
    return stream(p, post, drain, "the server to see the last put");
  }

  double bw_get(const SizePlan& p) {
    size_t w = static_cast<size_t>(p.window);
    std::vector<hmc::Request> reqs(w);
    std::vector<int64_t> iter_of(w, -1);
    auto complete = [&](size_t slot) {
      wait_for(reqs[slot], o_.timeout_ms, "for a get to complete");
      if (o_.check) check_rx(slot * p.size, p.size, seed_slot(slot), iter_of[slot]);
    };
    auto post = [&](int64_t i, bool /*last*/) {
      size_t slot = static_cast<size_t>(i % p.window);
      size_t off = slot * p.size;
      if (reqs[slot]) complete(slot);
      if (o_.check) rx_.poison(off, p.size);
      iter_of[slot] = i;
      reqs[slot] = peer_.get(rx_.at(off), p.size, remote_, off);
    };
    auto drain = [&] {
      for (size_t s = 0; s < w; ++s)
        if (reqs[s]) complete(s);
    };
    return stream(p, post, drain, nullptr);
  }

  // The shape of every bw loop: the warm-up posts, then the measured ones under a progress line,
  // each drained. post(i, last) posts iteration i (last: the phase's final one); the clock stops
  // when the server's result comes, waiting for `server_done`, or with no server step (nullptr)
  // when the drain ends.
  template <typename Post, typename Drain>
  double stream(const SizePlan& p, Post post, Drain drain, const char* server_done) {
    const int64_t total = p.warmup + p.iters;
    for (int64_t i = 0; i < p.warmup; ++i) post(i, i == p.warmup - 1);
    drain();
    ProgressLine progress(!o_.quiet, p.size, p.iters);
    const double t0 = now_s();
    for (int64_t i = p.warmup; i < total; ++i) {
      post(i, i == total - 1);
      progress.tick(i - p.warmup + 1);
    }
    drain();
    if (server_done != nullptr) {
      result_ = ch_.recv_control(MsgType::Result, idx_, server_done);
      have_result_ = true;
    }
    return now_s() - t0;
  }

  // lat loops append one latency in microseconds per measured iteration.
  void lat_send(const SizePlan& p, std::vector<double>* lat) {
    ProgressLine progress(!o_.quiet, p.size, p.iters);
    const int64_t total = p.warmup + p.iters;
    auto record = [&](double round_trip_s, int64_t i) {
      lat->push_back(round_trip_s * 1e6 / 2);
      progress.tick(i - p.warmup + 1);
    };
    // Without --check the clock is read once per iteration, right after the ping is posted:
    // the client then only waits for the reply, so the read adds nothing to the round trip
    // (read after the reply arrived, it would delay the next ping by its cost, tens of ns on a
    // VM). A round trip runs from one such reading to the next, the last one to its reply; the
    // average is that of send-to-reply round trips, as in ucx_perftest. With --check each
    // round trip is timed from its send to its reply, leaving out the pattern work around it.
    double mark = 0;
    for (int64_t i = 0; i < total; ++i) {
      uint64_t it = static_cast<uint64_t>(i);
      if (o_.check) {
        rx_.poison(0, p.size);
        tx_.fill(0, p.size, seed_forward(it));
      }
      double t0 = o_.check ? now_s() : 0;
      // Send, then post the receive of the reply while the ping is on its way.
      auto s = peer_.send(tx_.at(0), p.size, kDataTagBase + it);
      auto r = peer_.recv(rx_.at(0), p.size, kDataTagBase + it);
      if (!o_.check) {
        double t = now_s();
        if (i > p.warmup) record(t - mark, i - 1);  // the previous iteration's round trip
        mark = t;
      }
      wait_for(s, o_.timeout_ms, "for a send to complete");
      size_t n = wait_for(r, o_.timeout_ms, "for the server's reply");
      if (n != p.size)
        throw RunError("the server's reply has " + std::to_string(n) + " bytes, not " +
                       std::to_string(p.size));
      if (o_.check) {
        double t1 = now_s();
        check_rx(0, p.size, seed_back(it), i);
        if (i >= p.warmup) record(t1 - t0, i);
      }
    }
    if (!o_.check && p.iters > 0) record(now_s() - mark, total - 1);
  }

  void lat_put(const SizePlan& p, std::vector<double>* lat) {
    ProgressLine progress(!o_.quiet, p.size, p.iters);
    for (int64_t i = 0; i < p.warmup + p.iters; ++i) {
      uint64_t it = static_cast<uint64_t>(i);
      if (o_.check) {
        rx_.poison(0, p.size);
        tx_.fill(0, p.size, seed_forward(it));
      }
      double t0 = now_s();
      auto r = peer_.put(tx_.at(0), p.size, remote_, 0, HMC_PUT_NOTIFY, it);
      auto n = wait_notification(ctx_, o_.timeout_ms, "for the server's put back");
      double t1 = now_s();
      wait_for(r, o_.timeout_ms, "for a put to complete");
      if (n.value != it)
        throw RunError("notification " + std::to_string(n.value) + " while waiting for " +
                       std::to_string(it));
      if (o_.check) check_rx(0, p.size, seed_back(it), i);
      if (i >= p.warmup) {
        lat->push_back((t1 - t0) * 1e6 / 2);
        progress.tick(i - p.warmup + 1);
      }
    }
  }

  void lat_get(const SizePlan& p, std::vector<double>* lat) {
    ProgressLine progress(!o_.quiet, p.size, p.iters);
    for (int64_t i = 0; i < p.warmup + p.iters; ++i) {
      if (o_.check) rx_.poison(0, p.size);
      double t0 = now_s();
      auto r = peer_.get(rx_.at(0), p.size, remote_, 0);
      wait_for(r, o_.timeout_ms, "for a get to complete");
      double t1 = now_s();
      if (o_.check) check_rx(0, p.size, seed_slot(0), i);
      if (i >= p.warmup) {
        lat->push_back((t1 - t0) * 1e6);
        progress.tick(i - p.warmup + 1);
      }
    }
  }

  void check_rx(size_t off, size_t n, uint64_t seed, int64_t iteration) {
    size_t bad = rx_.check(off, n, seed);
    if (bad != n)
      throw RunError("--check: bad data received at size " + std::to_string(n) + ", iteration " +
                     std::to_string(iteration) + ", first bad offset " + std::to_string(bad));
  }

  const Options& o_;
  hmc::Context& ctx_;
  hmc::Peer& peer_;
  Channel ch_;
  std::vector<SizePlan> plan_;
  Buffers tx_, rx_;
  hmc::Remote remote_;
  Result run_;  // the fields every size's result shares (set once the peer's path is known)
  uint32_t idx_ = 0;
  Control result_;  // the server's Result, when a bw loop already received it to stop the clock
  bool have_result_ = false;
  FILE* samples_ = nullptr;  // --samples
};

}  // namespace

int run_client(const Options& o, hmc::Context& ctx, hmc::Peer& peer) {
  Client c(o, ctx, peer);
  return c.run();
}

}  // namespace hmc::perf
