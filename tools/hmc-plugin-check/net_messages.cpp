// Tagged messages over the loopback: the client context sends, the server context receives.
#include <poll.h>

#include <cstring>

#include "hmc/plugin/status.hpp"
#include "net_loopback.h"
#include "pattern.h"
#include "rules.h"

namespace hmc::check {
namespace {

using hmc::plugin::status_name;

constexpr size_t kLargeMessage = (size_t{1} << 20) + 7;  // beyond any eager limit, odd length

// How one message ended.
struct Outcome {
  bool ended = false;  // both requests ended within the limit (else already reported)
  int send_st = 0, recv_st = 0;
  size_t recv_bytes = 0;
};

class MessageCheck {
 public:
  explicit MessageCheck(Loopback& lb)
      : lb_(lb), t_(lb.t), r_(lb.report), send_(kLargeMessage), recv_(kLargeMessage + 64) {}

  void run();

 private:
  // Sends slen bytes of the send buffer with tag into a receive of rlen bytes at the start of
  // the receive buffer, the receive posted first when recv_first, and waits for both.
  Outcome exchange(const char* name, uint64_t tag, size_t slen, size_t rlen, bool recv_first);
  // True when the message ended well and arrived whole with the pattern of seed; else reported.
  bool whole(const char* name, const Outcome& o, size_t len, unsigned seed);

  void both_orders();
  void order_per_tag();
  void unexpected();
  void large();
  void zero_byte();
  void truncation();
  void cancel();

  Loopback& lb_;
  const hmc_net_plugin_v2_t* t_;
  Report& r_;
  Buffer send_, recv_;
};

void MessageCheck::run() {
  r_.step("messages");
  if (!send_.reg(lb_, lb_.client_ctx, HMC_NET_ACCESS_LOCAL, false, "messages") ||
      !recv_.reg(lb_, lb_.server_ctx, HMC_NET_ACCESS_LOCAL, false, "messages"))
    return;
  both_orders();
  order_per_tag();
  unexpected();
  large();
  zero_byte();
  truncation();
  cancel();
}

Outcome MessageCheck::exchange(const char* name, uint64_t tag, size_t slen, size_t rlen,
                               bool recv_first) {
  Outcome o;
  hmc_net_request_t *rq = nullptr, *sq = nullptr;
  int st = HMC_PLUGIN_SUCCESS;
  if (recv_first) {
    st = t_->irecv(lb_.server, recv_.data(), rlen, recv_.mr(), tag, &rq);
    if (st == HMC_PLUGIN_SUCCESS) {
      // Nothing was sent yet: test answers at once that it is pending.
      int done = 1;
      size_t b = 0;
      int tst = t_->test(rq, &done, &b);
      if (tst != HMC_PLUGIN_SUCCESS || done != 0) {
        r_.fail(lb_.id("pending"), rule::kNoBlock,
                "test of a receive whose message was not sent yet returned %s with done = %d",
                status_name(tst), done);
        if (done != 0) rq = nullptr;  // released by the plugin
      }
    }
  }
  if (st == HMC_PLUGIN_SUCCESS)
    st = t_->isend(lb_.client, send_.data(), slen, send_.mr(), tag, &sq);
  if (st == HMC_PLUGIN_SUCCESS && !recv_first)
    st = t_->irecv(lb_.server, recv_.data(), rlen, recv_.mr(), tag, &rq);
  if (st != HMC_PLUGIN_SUCCESS) {
    r_.fail(lb_.id(name), rule::kMessages, "posting a %zu-byte message returned %s", slen,
            status_name(st));
    return o;  // what was posted stays pending until close_ep releases it
  }
  size_t sent = 0;
  if (!lb_.wait(sq, &o.send_st, &sent)) {
    r_.fail(lb_.id(name), rule::kNoBlock, "the send of %zu bytes did not end within %.1f s", slen,
            lb_.waiter.seconds());
    return o;
  }
  if (rq == nullptr || !lb_.wait(rq, &o.recv_st, &o.recv_bytes)) {
    r_.fail(lb_.id(name), rule::kNoBlock, "the receive of %zu bytes did not end within %.1f s",
            slen, lb_.waiter.seconds());
    return o;
  }
  o.ended = true;
  return o;
}

bool MessageCheck::whole(const char* name, const Outcome& o, size_t len, unsigned seed) {
  if (!o.ended) return false;
  if (o.send_st != HMC_PLUGIN_SUCCESS || o.recv_st != HMC_PLUGIN_SUCCESS) {
    r_.fail(lb_.id(name), rule::kMessages, "a %zu-byte message ended with send %s, receive %s", len,
            status_name(o.send_st), status_name(o.recv_st));
    return false;
  }
  size_t bad = pattern_mismatch(recv_.data(), len, seed);
  if (o.recv_bytes != len || bad != len) {
    r_.fail(lb_.id(name), rule::kMessages,
            "a %zu-byte message arrived as %zu bytes, first wrong byte at %zu", len, o.recv_bytes,
            bad);
    return false;
  }
  return true;
}

void MessageCheck::both_orders() {
  fill_pattern(send_.data(), 100, 1);
  if (!whole("messages", exchange("messages", 0x1001, 100, 256, true), 100, 1)) return;
  fill_pattern(send_.data(), 100, 2);
  if (!whole("messages", exchange("messages", 0x1002, 100, 256, false), 100, 2)) return;
  r_.ok(lb_.id("messages"), "100 bytes with the receive posted before and after the send");
}

// Two messages of one tag, both sent before either receive, match in send order; one of another
// tag sent between them matches only its own receive.
void MessageCheck::order_per_tag() {
  unsigned char* s = send_.data();
  unsigned char* rb = recv_.data();
  fill_pattern(s, 64, 3);
  fill_pattern(s + 64, 64, 4);
  fill_pattern(s + 128, 64, 5);
  hmc_net_request_t *s1 = nullptr, *s2 = nullptr, *s3 = nullptr;
  hmc_net_request_t *r1 = nullptr, *r2 = nullptr, *r3 = nullptr;
  int p = t_->isend(lb_.client, s, 64, send_.mr(), 0x1003, &s1);
  if (p == HMC_PLUGIN_SUCCESS) p = t_->isend(lb_.client, s + 128, 64, send_.mr(), 0x1004, &s3);
  if (p == HMC_PLUGIN_SUCCESS) p = t_->isend(lb_.client, s + 64, 64, send_.mr(), 0x1003, &s2);
  if (p == HMC_PLUGIN_SUCCESS) p = t_->irecv(lb_.server, rb + 512, 64, recv_.mr(), 0x1004, &r3);
  if (p == HMC_PLUGIN_SUCCESS) p = t_->irecv(lb_.server, rb, 64, recv_.mr(), 0x1003, &r1);
  if (p == HMC_PLUGIN_SUCCESS) p = t_->irecv(lb_.server, rb + 256, 64, recv_.mr(), 0x1003, &r2);
  if (p != HMC_PLUGIN_SUCCESS) {
    r_.fail(lb_.id("order"), rule::kMessages, "posting three 64-byte messages returned %s",
            status_name(p));
    return;
  }
  int st = 0, st1 = 0, st2 = 0, st3 = 0;
  size_t b1 = 0, b2 = 0, b3 = 0, ignored = 0;
  if (!lb_.wait(s1, &st, &ignored) || !lb_.wait(s2, &st, &ignored) ||
      !lb_.wait(s3, &st, &ignored) || !lb_.wait(r1, &st1, &b1) || !lb_.wait(r2, &st2, &b2) ||
      !lb_.wait(r3, &st3, &b3)) {
    r_.fail(lb_.id("order"), rule::kNoBlock, "three 64-byte messages did not end within %.1f s",
            lb_.waiter.seconds());
    return;
  }
  const bool same_tag_ok =
      pattern_mismatch(rb, 64, 3) == 64 && pattern_mismatch(rb + 256, 64, 4) == 64;
  const bool other_ok = pattern_mismatch(rb + 512, 64, 5) == 64;
  if (st1 != HMC_PLUGIN_SUCCESS || st2 != HMC_PLUGIN_SUCCESS || st3 != HMC_PLUGIN_SUCCESS ||
      b1 != 64 || b2 != 64 || b3 != 64 || !same_tag_ok || !other_ok)
    r_.fail(lb_.id("order"), !same_tag_ok ? rule::kOrder : rule::kMessages,
            "two messages of one tag and one of another ended %s/%s/%s with %zu/%zu/%zu bytes%s",
            status_name(st1), status_name(st2), status_name(st3), b1, b2, b3,
            !same_tag_ok ? "; the messages of one tag matched out of order, or changed"
            : !other_ok  ? "; the other tag's message changed"
                         : "");
  else
    r_.ok(lb_.id("order"), "messages of one tag in send order, another tag apart");
}

// Four messages that arrive before any receive is posted (the contexts progress a while in
// between): two of one tag, a zero-byte one, and one that will not fit. The receives, posted in
// another order than the sends, get each whole, the two of one tag in send order.
void MessageCheck::unexpected() {
  r_.step("unexpected messages");
  unsigned char* s = send_.data();
  unsigned char* rb = recv_.data();
  fill_pattern(s, 100, 21);
  fill_pattern(s + 128, 64, 22);
  fill_pattern(s + 256, 64, 23);
  std::memset(rb, 0, 1024);
  struct Msg {
    uint64_t tag;
    size_t off, len;    // in the send buffer
    size_t roff, rlen;  // the receive's
    hmc_net_request_t* sq = nullptr;
    hmc_net_request_t* rq = nullptr;
    int st = 0;
    size_t bytes = 0;
  };
  Msg m[] = {{0x1011, 0, 100, 0, 128},
             {0x1012, 0, 0, 128, 16},
             {0x1011, 128, 64, 256, 128},
             {0x1013, 256, 64, 512, 8}};
  int p = HMC_PLUGIN_SUCCESS;
  for (Msg& x : m)
    if (p == HMC_PLUGIN_SUCCESS)
      p = t_->isend(lb_.client, s + x.off, x.len, send_.mr(), x.tag, &x.sq);
  if (p == HMC_PLUGIN_SUCCESS) lb_.settle(20);
  for (int i : {3, 1, 0, 2})
    if (p == HMC_PLUGIN_SUCCESS)
      p = t_->irecv(lb_.server, rb + m[i].roff, m[i].rlen, recv_.mr(), m[i].tag, &m[i].rq);
  if (p != HMC_PLUGIN_SUCCESS) {
    r_.fail(lb_.id("unexpected"), rule::kUnexpected, "posting four messages returned %s",
            status_name(p));
    return;
  }
  int ignored_st = 0;
  size_t ignored = 0;
  for (Msg& x : m)
    if (!lb_.wait(x.sq, &ignored_st, &ignored) || !lb_.wait(x.rq, &x.st, &x.bytes)) {
      r_.fail(lb_.id("unexpected"), rule::kNoBlock,
              "four messages that arrived before their receives did not end within %.1f s",
              lb_.waiter.seconds());
      return;
    }
  if (m[0].st != HMC_PLUGIN_SUCCESS || m[2].st != HMC_PLUGIN_SUCCESS || m[0].bytes != 100 ||
      m[2].bytes != 64 || pattern_mismatch(rb, 100, 21) != 100 ||
      pattern_mismatch(rb + 256, 64, 22) != 64) {
    const bool swapped = m[0].bytes == 64 && m[2].bytes == 100;
    r_.fail(lb_.id("unexpected"), swapped ? rule::kOrder : rule::kUnexpected,
            "two messages of one tag (100 and 64 bytes) that arrived before their receives ended "
            "%s/%s with %zu/%zu bytes%s",
            status_name(m[0].st), status_name(m[2].st), m[0].bytes, m[2].bytes,
            swapped ? ": out of send order" : "");
    return;
  }
  if (m[1].st != HMC_PLUGIN_SUCCESS || m[1].bytes != 0) {
    r_.fail(lb_.id("unexpected"), rule::kZeroByte,
            "a zero-byte message that arrived before its receive ended %s with %zu bytes",
            status_name(m[1].st), m[1].bytes);
    return;
  }
  if (m[3].st != HMC_PLUGIN_ERR_TRUNCATED || (m[3].bytes != 64 && m[3].bytes != 8)) {
    r_.fail(lb_.id("unexpected"), rule::kTruncation,
            "a 64-byte message that arrived before its 8-byte receive ended %s with %zu bytes",
            status_name(m[3].st), m[3].bytes);
    return;
  }
  r_.ok(lb_.id("unexpected"),
        "messages that arrived before their receives: whole, in send order per tag, zero-byte, "
        "truncated");
}

void MessageCheck::large() {
  size_t len = kLargeMessage;
  const uint64_t max = lb_.device().max_msg_size;
  if (max != 0 && max < len) len = static_cast<size_t>(max);
  fill_pattern(send_.data(), len, 6);
  if (whole("large", exchange("large", 0x1005, len, len + 64, true), len, 6))
    r_.ok(lb_.id("large"), "%zu bytes", len);
}

void MessageCheck::zero_byte() {
  Outcome z = exchange("zero_byte", 0x1006, 0, 16, false);
  if (!z.ended) return;
  if (z.send_st != HMC_PLUGIN_SUCCESS || z.recv_st != HMC_PLUGIN_SUCCESS || z.recv_bytes != 0)
    r_.fail(lb_.id("zero_byte"), rule::kZeroByte,
            "a zero-byte message ended with send %s, receive %s and %zu bytes",
            status_name(z.send_st), status_name(z.recv_st), z.recv_bytes);
  else
    r_.ok(lb_.id("zero_byte"), "a zero-byte message arrived as 0 bytes");
}

// 64 bytes into 4; then the next message of the tag arrives whole (nothing of the rest of the
// truncated one is left in the way).
void MessageCheck::truncation() {
  fill_pattern(send_.data(), 64, 7);
  Outcome o = exchange("truncation", 0x1007, 64, 4, true);
  if (!o.ended) return;
  if (o.recv_st != HMC_PLUGIN_ERR_TRUNCATED || o.send_st != HMC_PLUGIN_SUCCESS)
    r_.fail(lb_.id("truncation"), rule::kTruncation,
            "a 64-byte message into a 4-byte receive ended with receive %s, send %s",
            status_name(o.recv_st), status_name(o.send_st));
  else if (o.recv_bytes == 64)
    r_.ok(lb_.id("truncation"), "TRUNCATED, reporting the 64 bytes sent");
  else if (o.recv_bytes == 4)
    r_.warn(lb_.id("truncation"), rule::kTruncation,
            "TRUNCATED, but test reported the 4 bytes delivered, not the 64 sent");
  else
    r_.fail(lb_.id("truncation"), rule::kTruncation,
            "TRUNCATED, with %zu bytes reported for a 64-byte message into 4 bytes", o.recv_bytes);
  fill_pattern(send_.data(), 48, 8);
  if (whole("after_truncation", exchange("after_truncation", 0x1007, 48, 64, false), 48, 8))
    r_.ok(lb_.id("after_truncation"), "the next message of the tag arrives whole");
}

void MessageCheck::cancel() {
  if (t_->cancel == nullptr) {
    r_.skip(lb_.id("cancel"), "cancel is not offered");
    return;
  }
  r_.step("cancel");
  hmc_net_request_t* q = nullptr;
  int st = 0;
  size_t bytes = 0;
  int posted = t_->irecv(lb_.server, recv_.data(), 64, recv_.mr(), 0x10FF, &q);
  int cst = posted == HMC_PLUGIN_SUCCESS ? t_->cancel(q) : posted;
  if (cst != HMC_PLUGIN_SUCCESS) {
    r_.fail(lb_.id("cancel"), rule::kCancel, "cancel of an unmatched receive returned %s",
            status_name(cst));
  } else if (!lb_.wait(q, &st, &bytes)) {
    r_.fail(lb_.id("cancel"), rule::kCancel, "the cancelled receive did not end within %.1f s",
            lb_.waiter.seconds());
  } else if (st != HMC_PLUGIN_ERR_CANCELLED) {
    r_.fail(lb_.id("cancel"), rule::kCancel, "the cancelled receive ended with %s",
            status_name(st));
  } else {
    // The cancelled receive takes nothing: the next message of its tag goes to the next receive.
    std::memset(recv_.data(), 0, 64);
    fill_pattern(send_.data(), 40, 24);
    Outcome o = exchange("cancel", 0x10FF, 40, 64, false);
    if (o.ended && o.recv_st == HMC_PLUGIN_SUCCESS && o.recv_bytes == 40 &&
        pattern_mismatch(recv_.data(), 40, 24) == 40)
      r_.ok(lb_.id("cancel"), "an unmatched receive ends CANCELLED, and takes no message");
    else if (o.ended)
      r_.fail(lb_.id("cancel"), rule::kCancel,
              "after a receive of the tag was cancelled, a 40-byte message ended %s with %zu "
              "bytes in the next receive",
              status_name(o.recv_st), o.recv_bytes);
  }
}

}  // namespace

void check_messages(Loopback& lb) {
  MessageCheck(lb).run();
}

void check_wakeup(Loopback& lb) {
  const hmc_net_plugin_v2_t* t = lb.t;
  Report& r = lb.report;
  if (t->wait_fd == nullptr || t->arm == nullptr) {
    r.skip(lb.id("wakeup"), "wait_fd and arm are not both offered (the core then polls)");
    return;
  }
  r.step("wake-up");
  int fd = -1;
  if (t->wait_fd(lb.server_ctx, &fd) != HMC_PLUGIN_SUCCESS || fd < 0) return;  // wait_fd's check
  // Quiet first: progress until arm answers SUCCESS and the fd is not readable.
  bool quiet = false;
  int st = HMC_PLUGIN_IN_PROGRESS;
  const auto limit = Clock::now() + lb.waiter.limit();
  while (!quiet && Clock::now() < limit) {
    if (t->progress != nullptr) t->progress(lb.server_ctx);
    st = t->arm(lb.server_ctx);
    struct pollfd p = {fd, POLLIN, 0};
    quiet = st == HMC_PLUGIN_SUCCESS && ::poll(&p, 1, 0) == 0;
  }
  if (!quiet) {
    r.warn(lb.id("wakeup"), rule::kWakeupPeer,
           "with nothing sent, arm answered %s or the fd stayed readable for %.1f s (the core "
           "would spin)",
           status_name(st), lb.waiter.seconds());
    return;
  }
  Buffer sbuf(32), rbuf(32);
  if (!sbuf.reg(lb, lb.client_ctx, HMC_NET_ACCESS_LOCAL, false, "wakeup") ||
      !rbuf.reg(lb, lb.server_ctx, HMC_NET_ACCESS_LOCAL, false, "wakeup"))
    return;
  fill_pattern(sbuf.data(), 32, 25);
  hmc_net_request_t *sq = nullptr, *rq = nullptr;
  st = t->isend(lb.client, sbuf.data(), 32, sbuf.mr(), 0x1020, &sq);
  if (st != HMC_PLUGIN_SUCCESS) {
    r.fail(lb.id("wakeup"), rule::kMessages, "isend returned %s", status_name(st));
    return;
  }
  // Only the sending context progresses: the armed one sleeps, as the core's would.
  bool woke = false;
  while (!woke && Clock::now() < limit + lb.waiter.limit()) {
    if (t->progress != nullptr) t->progress(lb.client_ctx);
    struct pollfd p = {fd, POLLIN, 0};
    woke = ::poll(&p, 1, 1) > 0;
  }
  if (!woke)
    r.fail(lb.id("wakeup"), rule::kWakeupPeer,
           "a 32-byte message sent to the armed context left its wait_fd unreadable for %.1f s",
           lb.waiter.seconds());
  st = t->irecv(lb.server, rbuf.data(), 32, rbuf.mr(), 0x1020, &rq);
  int sst = 0, rst = 0;
  size_t b = 0, ignored = 0;
  if (st != HMC_PLUGIN_SUCCESS || !lb.wait(sq, &sst, &ignored) || !lb.wait(rq, &rst, &b) ||
      rst != HMC_PLUGIN_SUCCESS || b != 32 || pattern_mismatch(rbuf.data(), 32, 25) != 32) {
    r.fail(lb.id("wakeup"), rule::kMessages, "the 32-byte message ended %s with %zu bytes",
           status_name(st != HMC_PLUGIN_SUCCESS ? st : rst), b);
    return;
  }
  if (woke)
    r.ok(lb.id("wakeup"), "a message from the peer made the armed context's wait_fd readable");
}

void check_peer_lost(Loopback& lb) {
  Report& r = lb.report;
  const hmc_net_plugin_v2_t* t = lb.t;
  r.step("peer loss");
  Buffer sbuf(64), buf(64), kept(64);
  if (!sbuf.reg(lb, lb.client_ctx, HMC_NET_ACCESS_LOCAL, false, "peer_lost") ||
      !buf.reg(lb, lb.server_ctx, HMC_NET_ACCESS_LOCAL, false, "peer_lost") ||
      !kept.reg(lb, lb.server_ctx, HMC_NET_ACCESS_LOCAL, false, "peer_lost"))
    return;
  // A message that arrives before the break, its receive posted only after.
  fill_pattern(sbuf.data(), 48, 26);
  hmc_net_request_t* sq = nullptr;
  int st = t->isend(lb.client, sbuf.data(), 48, sbuf.mr(), 0x10FD, &sq);
  int sst = 0;
  size_t bytes = 0;
  if (st != HMC_PLUGIN_SUCCESS || !lb.wait(sq, &sst, &bytes) || sst != HMC_PLUGIN_SUCCESS) {
    r.fail(lb.id("peer_lost"), rule::kMessages, "a 48-byte send returned %s, ended %s",
           status_name(st), status_name(sst));
    return;
  }
  lb.settle(20);
  hmc_net_request_t* q = nullptr;
  st = t->irecv(lb.server, buf.data(), buf.size(), buf.mr(), 0x10FE, &q);
  if (st != HMC_PLUGIN_SUCCESS) {
    r.fail(lb.id("peer_lost"), rule::kMessages, "irecv returned %s", status_name(st));
    return;
  }
  ExpectedErrors quiet;  // the plugin may log the peer's departure as a warning
  st = t->close_ep(lb.client);
  lb.client = nullptr;
  if (st != HMC_PLUGIN_SUCCESS) {
    r.fail(lb.id("peer_lost"), rule::kClose, "close_ep returned %s", status_name(st));
    return;
  }
  // A warning only: a transport without connections (libfabric RDM) may notice a peer's end
  // only when its process or context is gone, which this single process cannot show; the core
  // ends such requests itself when its control plane reports the peer gone.
  if (!lb.wait(q, &st, &bytes)) {
    r.warn(lb.id("peer_lost"), rule::kPeerLost,
           "a receive pending on an endpoint whose peer closed its end did not end within %.1f s",
           lb.waiter.seconds());
    return;
  }
  if (st != HMC_PLUGIN_ERR_PEER_LOST) {
    r.fail(lb.id("peer_lost"), rule::kPeerLost,
           "a receive pending on an endpoint whose peer closed ended with %s", status_name(st));
    return;
  }
  r.ok(lb.id("peer_lost"), "the peer closed: the pending receive ended PEER_LOST");

  // The message that arrived before the break is still there.
  q = nullptr;
  st = t->irecv(lb.server, kept.data(), kept.size(), kept.mr(), 0x10FD, &q);
  if (st == HMC_PLUGIN_SUCCESS && !lb.wait(q, &st, &bytes)) st = HMC_PLUGIN_IN_PROGRESS;
  if (st != HMC_PLUGIN_SUCCESS || bytes != 48 || pattern_mismatch(kept.data(), 48, 26) != 48)
    r.fail(lb.id("kept_after_loss"), rule::kKeptAfterLoss,
           "a 48-byte message that arrived before the peer closed, received after, ended %s with "
           "%zu bytes",
           status_name(st), st == HMC_PLUGIN_SUCCESS ? bytes : 0);
  else
    r.ok(lb.id("kept_after_loss"),
         "a message that arrived before the peer closed is received after");

  // Later posts that nothing can answer end PEER_LOST, at once or when tested.
  auto ends_lost = [&](int posted, hmc_net_request_t* req) {
    int end = posted;
    if (posted == HMC_PLUGIN_SUCCESS && !lb.wait(req, &end, &bytes)) end = HMC_PLUGIN_IN_PROGRESS;
    return end;
  };
  q = nullptr;
  int recv_end = ends_lost(t->irecv(lb.server, buf.data(), 16, buf.mr(), 0x10FB, &q), q);
  q = nullptr;
  int send_end = ends_lost(t->isend(lb.server, buf.data(), 16, buf.mr(), 0x10FB, &q), q);
  if (recv_end != HMC_PLUGIN_ERR_PEER_LOST || send_end != HMC_PLUGIN_ERR_PEER_LOST)
    r.fail(lb.id("posts_after_loss"), rule::kPeerLost,
           "after the peer closed, a receive matching nothing ended %s, a send %s",
           status_name(recv_end), status_name(send_end));
  else
    r.ok(lb.id("posts_after_loss"), "later sends and unmatched receives end PEER_LOST");
}

}  // namespace hmc::check
