// Tagged messages over the loopback: the client context sends, the server context receives.
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
    r_.fail(lb_.id("order"), rule::kMessages,
            "two messages of one tag and one of another ended %s/%s/%s with %zu/%zu/%zu bytes%s",
            status_name(st1), status_name(st2), status_name(st3), b1, b2, b3,
            !same_tag_ok ? "; the messages of one tag matched out of order, or changed"
            : !other_ok  ? "; the other tag's message changed"
                         : "");
  else
    r_.ok(lb_.id("order"), "messages of one tag in send order, another tag apart");
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
    r_.ok(lb_.id("cancel"), "an unmatched receive ends CANCELLED");
  }
}

}  // namespace

void check_messages(Loopback& lb) {
  MessageCheck(lb).run();
}

void check_peer_lost(Loopback& lb) {
  Report& r = lb.report;
  r.step("peer loss");
  Buffer buf(64);
  if (!buf.reg(lb, lb.server_ctx, HMC_NET_ACCESS_LOCAL, false, "peer_lost")) return;
  hmc_net_request_t* q = nullptr;
  int st = lb.t->irecv(lb.server, buf.data(), buf.size(), buf.mr(), 0x10FE, &q);
  if (st != HMC_PLUGIN_SUCCESS) {
    r.fail(lb.id("peer_lost"), rule::kMessages, "irecv returned %s", status_name(st));
    return;
  }
  ExpectedErrors quiet;  // the plugin may log the peer's departure as a warning
  st = lb.t->close_ep(lb.client);
  lb.client = nullptr;
  if (st != HMC_PLUGIN_SUCCESS) {
    r.fail(lb.id("peer_lost"), rule::kClose, "close_ep returned %s", status_name(st));
    return;
  }
  size_t bytes = 0;
  // A warning only: a transport without connections (libfabric RDM) may notice a peer's end
  // only when its process or context is gone, which this single process cannot show; the core
  // ends such requests itself when its control plane reports the peer gone.
  if (!lb.wait(q, &st, &bytes))
    r.warn(lb.id("peer_lost"), rule::kPeerLost,
           "a receive pending on an endpoint whose peer closed its end did not end within %.1f s",
           lb.waiter.seconds());
  else if (st != HMC_PLUGIN_ERR_PEER_LOST)
    r.fail(lb.id("peer_lost"), rule::kPeerLost,
           "a receive pending on an endpoint whose peer closed ended with %s", status_name(st));
  else
    r.ok(lb.id("peer_lost"), "the peer closed: the pending receive ended PEER_LOST");
}

}  // namespace hmc::check
