// hmc-perf server: receives the client's plan, prepares buffers and regions, follows the timed
// loops, checks data (--check) and reports the outcome of each size.
#include <cstdio>
#include <string>
#include <vector>

#include "buffers.h"
#include "session.h"

namespace hmc::perf {
namespace {

// The first bad byte seen by the server during one size; reported in the Result message.
struct Mismatch {
  bool seen = false;
  uint64_t iteration = 0;
  uint64_t offset = 0;
  std::string text;
  void note(uint64_t it, uint64_t off, const std::string& t) {
    if (seen) return;
    seen = true;
    iteration = it;
    offset = off;
    text = t;
  }
};

class Server {
 public:
  Server(const Options& o, hmc::Context& ctx, hmc::Peer& peer)
      : o_(o), ctx_(ctx), peer_(peer), ch_(peer, o.timeout_ms) {}

  int run() {
    auto m = ch_.recv("the client's setup message");
    std::string err;
    if (!decode(m.data(), m.size(), &setup_, &err)) throw RunError("bad setup message: " + err);

    // Prepare; a failure here (unknown device, out of memory) is reported to the client, which
    // then stops with the server's reason instead of a timeout.
    Reply reply;
    hmc::Region region;
    try {
      size_t area = area_bytes(setup_.plan);
      size_t largest = max_size(setup_.plan);
      Needs needs = server_needs(setup_.test, setup_.op);
      if (needs.tx) tx_ = Buffers(ctx_, setup_.peer_mem, area, largest);
      if (needs.rx) rx_ = Buffers(ctx_, setup_.peer_mem, area, largest);
      if (setup_.op == Op::Put)
        region = ctx_.register_memory(rx_.at(0), rx_.size(), HMC_ACCESS_REMOTE_WRITE);
      else if (setup_.op == Op::Get)
        region = ctx_.register_memory(tx_.at(0), tx_.size(), HMC_ACCESS_REMOTE_READ);
      if (region) reply.server_desc = region.pack();
      if (setup_.test == Test::Lat && setup_.op == Op::Put)
        client_remote_ = peer_.import_remote(setup_.client_desc);
      reply.path = peer_.info().path;
    } catch (const hmc::Error& e) {
      reply.status = e.status();
      reply.error = e.what();
    } catch (const std::exception& e) {
      reply.status = HMC_ERR_INVALID_ARGUMENT;
      reply.error = e.what();
    }
    ch_.send(encode(reply), "the setup reply");
    if (reply.status != 0) {
      // The loopback child's parent prints the reason; a --listen server says it itself.
      if (o_.mode == Mode::Peer) return 1;
      throw RunError("refused the client's run: " + reply.error);
    }

    for (;;) {
      auto msg = ch_.recv("the client's next step");
      Control c;
      if (decode(msg.data(), msg.size(), MsgType::End, &c, &err)) break;
      if (!decode(msg.data(), msg.size(), MsgType::Begin, &c, &err))
        throw RunError("bad control message from the client: " + err);
      if (c.index >= setup_.plan.size())
        throw RunError("the client asked for size index " + std::to_string(c.index) + " of " +
                       std::to_string(setup_.plan.size()));
      run_size(c.index, setup_.plan[c.index]);
    }
    ch_.send_control(MsgType::Bye, 0, "the goodbye");
    return 0;
  }

 private:
  void run_size(uint32_t idx, const SizePlan& p) {
    Mismatch bad;
    bool check = setup_.check;
    if (setup_.op == Op::Get && check)
      for (int64_t s = 0; s < p.window; ++s)
        tx_.fill(static_cast<size_t>(s) * p.size, p.size, seed_slot(static_cast<uint64_t>(s)));
    // A get needs nothing of the server but its region: it is ready at once.
    const bool bw = setup_.test == Test::Bw;
    if (setup_.op == Op::Send)
      bw ? bw_send(idx, p, &bad) : lat_send(idx, p, &bad);
    else if (setup_.op == Op::Put)
      bw ? bw_put(idx, p, &bad) : lat_put(idx, p, &bad);
    else
      ready(idx);
    if (setup_.op == Op::Get)
      ch_.recv_control(MsgType::Fin, idx, "the client to finish its gets", true);
    Control r;
    r.type = MsgType::Result;
    r.index = idx;
    if (bad.seen) {
      r.status = 1;
      r.bad_iteration = bad.iteration;
      r.bad_offset = bad.offset;
      r.text = bad.text;
    }
    ch_.send(encode(r), "the result");
  }

  void ready(uint32_t idx) { ch_.send_control(MsgType::Ready, idx, "ready"); }

  void check_rx(size_t off, size_t n, uint64_t seed, uint64_t iteration, Mismatch* bad) {
    if (bad->seen) return;  // the first bad byte is what matters; keep the loop fast after it
    size_t b = rx_.check(off, n, seed);
    if (b != n) bad->note(iteration, b, "");
  }

  void bw_send(uint32_t idx, const SizePlan& p, Mismatch* bad) {
    size_t w = static_cast<size_t>(p.window);
    int64_t total = p.warmup + p.iters;
    std::vector<hmc::Request> reqs(w);
    auto post = [&](int64_t i) {
      size_t slot = static_cast<size_t>(i % p.window);
      if (setup_.check) rx_.poison(slot * p.size, p.size);
      // One shared buffer without --check (see the client's bw_send).
      size_t off = setup_.check ? slot * p.size : 0;
      reqs[slot] = peer_.recv(rx_.at(off), p.size, kDataTagBase + static_cast<uint64_t>(i));
    };
    for (int64_t i = 0; i < std::min<int64_t>(p.window, total); ++i) post(i);
    ready(idx);
    for (int64_t i = 0; i < total; ++i) {
      size_t slot = static_cast<size_t>(i % p.window);
      size_t n = wait_for(reqs[slot], o_.timeout_ms, What("for message", i));
      if (n != p.size)
        bad->note(static_cast<uint64_t>(i), n, "received " + std::to_string(n) + " bytes");
      if (setup_.check)
        check_rx(slot * p.size, p.size, seed_forward(static_cast<uint64_t>(i)), i, bad);
      if (i + p.window < total) post(i + p.window);
    }
  }

  void bw_put(uint32_t idx, const SizePlan& p, Mismatch* bad) {
    int64_t total = p.warmup + p.iters;
    ready(idx);
    if (!setup_.check) {
      // One notification ends each phase (see the client).
      std::vector<uint64_t> expect;
      if (p.warmup > 0) expect.push_back(static_cast<uint64_t>(p.warmup - 1));
      expect.push_back(static_cast<uint64_t>(total - 1));
      for (uint64_t e : expect) {
        auto n = wait_notification_patiently(ctx_, peer_, o_.timeout_ms,
                                             "waiting for the last put of a phase");
        if (n.value != e)
          throw RunError("put notification " + std::to_string(n.value) + ", expected " +
                         std::to_string(e));
      }
      return;
    }
    // --check: every put notifies; check its slot, then let the client reuse the slot.
    size_t w = static_cast<size_t>(p.window);
    std::vector<hmc::Request> acks(w);
    std::vector<uint64_t> ack_vals(w);
    for (int64_t k = 0; k < total; ++k) {
      auto n = wait_notification(ctx_, o_.timeout_ms, "for a put notification");
      if (n.value >= static_cast<uint64_t>(total))
        throw RunError("put notification " + std::to_string(n.value) + " beyond the " +
                       std::to_string(total) + " iterations");
      size_t slot = static_cast<size_t>(n.value % w);
      check_rx(slot * p.size, p.size, seed_forward(n.value), n.value, bad);
      if (acks[slot]) wait_for(acks[slot], o_.timeout_ms, "for an acknowledgement to be sent");
      ack_vals[slot] = n.value;
      acks[slot] = peer_.send(&ack_vals[slot], sizeof(uint64_t), kAckTagBase + n.value);
    }
    for (auto& a : acks)
      if (a) wait_for(a, o_.timeout_ms, "for an acknowledgement to be sent");
  }

  void lat_send(uint32_t idx, const SizePlan& p, Mismatch* bad) {
    int64_t total = p.warmup + p.iters;
    if (setup_.check) rx_.poison(0, p.size);
    auto r = peer_.recv(rx_.at(0), p.size, kDataTagBase);
    ready(idx);
    for (int64_t i = 0; i < total; ++i) {
      uint64_t it = static_cast<uint64_t>(i);
      size_t n = wait_for(r, o_.timeout_ms, What("for ping", i));
      if (n != p.size) bad->note(it, n, "received " + std::to_string(n) + " bytes");
      if (setup_.check) {
        check_rx(0, p.size, seed_forward(it), it, bad);
        rx_.poison(0, p.size);
        tx_.fill(0, p.size, seed_back(it));
      }
      // Reply first, then post the next receive while the reply is on its way: as
      // ucx_perftest's ping-pong does, so that the post is not on the measured path. The
      // client's next ping cannot be sent before our reply arrived.
      auto s = peer_.send(tx_.at(0), p.size, kDataTagBase + it);
      if (i + 1 < total) r = peer_.recv(rx_.at(0), p.size, kDataTagBase + it + 1);
      wait_for(s, o_.timeout_ms, "for a reply to be sent");
    }
  }

  void lat_put(uint32_t idx, const SizePlan& p, Mismatch* bad) {
    int64_t total = p.warmup + p.iters;
    ready(idx);
    for (int64_t i = 0; i < total; ++i) {
      uint64_t it = static_cast<uint64_t>(i);
      auto n = wait_notification(ctx_, o_.timeout_ms, What("for put", i));
      if (n.value != it)
        throw RunError("put notification " + std::to_string(n.value) + ", expected " +
                       std::to_string(it));
      if (setup_.check) {
        check_rx(0, p.size, seed_forward(it), it, bad);
        rx_.poison(0, p.size);
        tx_.fill(0, p.size, seed_back(it));
      }
      auto r = peer_.put(tx_.at(0), p.size, client_remote_, 0, HMC_PUT_NOTIFY, it);
      wait_for(r, o_.timeout_ms, "for a put back to complete");
    }
  }

  const Options& o_;
  hmc::Context& ctx_;
  hmc::Peer& peer_;
  Channel ch_;
  Setup setup_;
  Buffers tx_, rx_;
  hmc::Remote client_remote_;
};

}  // namespace

int run_server(const Options& o, hmc::Context& ctx, hmc::Peer& peer) {
  Server s(o, ctx, peer);
  return s.run();
}

}  // namespace hmc::perf
