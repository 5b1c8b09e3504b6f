// Two-sided transfers between the test process and a peer process, over every data path:
// sizes from 0 bytes to 64 MiB both ways, receives posted before and after the send, tags
// received out of order, truncation, and 1000 requests in flight at once.
#include "fixture.h"

namespace hmc_test {
namespace {

class SendRecv : public LoopbackTest {};
HMC_INSTANTIATE_OVER_PATHS(SendRecv);

// The forced path is the one both sides report, and the peer info names the peer process.
TEST_P(SendRecv, ConnectsOverTheForcedPath) {
  ASSERT_NO_FATAL_FAILURE(open());
  Child c;
  ASSERT_NO_FATAL_FAILURE(start(&c, scenario::kHello, {"expect-path=" + GetParam().path}));
  hmc_peer_info_t info{};
  info.struct_size = sizeof info;
  hmc_status_t st = hmc_peer_info(c.peer, &info);
  ASSERT_EQ(st, HMC_SUCCESS) << describe(st);
  EXPECT_EQ(std::string(info.path), GetParam().path)
      << "HMC_PATH is not honoured; the reason given: " << info.path_reason;
  EXPECT_EQ(info.remote_pid, c.proc.pid());
  EXPECT_EQ(info.same_host, 1);
  EXPECT_EQ(info.alive, 1);
  ASSERT_NO_FATAL_FAILURE(send_ctrl(c.peer, kTagCtrl, 41));
  uint64_t v = 0;
  ASSERT_NO_FATAL_FAILURE(recv_ctrl(c.peer, kTagCtrl + 1, &v));
  EXPECT_EQ(v, 42u);
  expect_exit_ok(&c);
}

TEST_P(SendRecv, SizesBothDirections) {
  ASSERT_NO_FATAL_FAILURE(open());
  const std::vector<size_t> sizes{0, 1, 7, 4096, kMiB + 3, 64 * kMiB};
  std::string list;
  for (size_t s : sizes) list += (list.empty() ? "" : ",") + std::to_string(s);
  Child c;
  ASSERT_NO_FATAL_FAILURE(start(&c, scenario::kEchoSizes, {"sizes=" + list}));
  ASSERT_NO_FATAL_FAILURE(echo_sizes(&c, sizes, false));
  expect_exit_ok(&c);
}

// Receives posted before the message (the peer says "ready" first), and after it (the peer
// posts them only once we said everything was sent, in another order than sent), with tags 0,
// HMC_TAG_MAX - 1 and in between; both directions.
TEST_P(SendRecv, ReceivesPostedBeforeAndAfterSendMatchByTag) {
  ASSERT_NO_FATAL_FAILURE(open());
  Child c;
  ASSERT_NO_FATAL_FAILURE(start(&c, scenario::kOrdering));

  const auto& early = ordering_early_sizes();
  for (size_t i = 0; i < early.size(); ++i) {
    uint64_t ready = ~0ull;
    ASSERT_NO_FATAL_FAILURE(recv_ctrl(c.peer, kTagCtrl, &ready));
    ASSERT_EQ(ready, i);
    HostBuffer b(early[i]);
    pattern_fill(b.data(), early[i], kSeedParent + i);
    std::string err;
    ASSERT_EQ(send_wait(c.peer, b.data(), early[i], kTagData + i, kOpTimeoutMs, &err), HMC_SUCCESS)
        << err;
  }

  const auto& late = ordering_late_messages();
  {
    OrderingLateSends sends(c.peer, kSeedParent + 100);
    ASSERT_NO_FATAL_FAILURE(send_ctrl(c.peer, kTagCtrl + 1, late.size()));
    for (size_t i = 0; i < sends.rq.size(); ++i) {
      const auto& r = sends.rq.wait(i, kOpTimeoutMs);
      EXPECT_EQ(r.status, HMC_SUCCESS) << "send on tag " << late[i].tag << ": " << r.error;
    }
  }

  // The peer's messages are all sent (or on their way) before we post a receive.
  uint64_t n = 0;
  ASSERT_NO_FATAL_FAILURE(recv_ctrl(c.peer, kTagCtrl + 2, &n));
  ASSERT_EQ(n, late.size());
  for (size_t idx : ordering_late_recv_order()) {
    HostBuffer b(late[idx].size);
    size_t got = ~size_t{0};
    std::string err;
    ASSERT_EQ(recv_wait(c.peer, b.data(), late[idx].size, late[idx].tag, kOpTimeoutMs, &got, &err),
              HMC_SUCCESS)
        << "tag " << late[idx].tag << ": " << err;
    EXPECT_EQ(got, late[idx].size) << "tag " << late[idx].tag;
    EXPECT_EQ(pattern_check(b.data(), late[idx].size, kSeedChild + 100 + idx), "")
        << "tag " << late[idx].tag;
  }
  ASSERT_NO_FATAL_FAILURE(send_ctrl(c.peer, kTagCtrl + 3, kCtrlDone));
  expect_exit_ok(&c);
}

// A message larger than the receive buffer ends the receive with HMC_ERR_TRUNCATED, writes
// nothing past the buffer, lets the send succeed, and leaves the connection usable.
TEST_P(SendRecv, TooSmallReceiveIsTruncated) {
  ASSERT_NO_FATAL_FAILURE(open());
  Child c;
  ASSERT_NO_FATAL_FAILURE(start(&c, scenario::kTruncate));
  {
    std::vector<HostBuffer> bufs;
    Requests rq;
    for (const auto& t : truncate_to_child()) {
      bufs.emplace_back(t.sent);
      pattern_fill(bufs.back().data(), t.sent, kSeedParent);
      rq.post([&](hmc_request_t* posted) {
        return hmc_send(c.peer, bufs.back().data(), t.sent, t.tag, posted);
      });
    }
    for (size_t i = 0; i < rq.size(); ++i) {
      const auto& r = rq.wait(i, kOpTimeoutMs);
      EXPECT_EQ(r.status, HMC_SUCCESS) << "the send of a message the peer truncates: " << r.error;
    }
  }
  uint64_t ack = 0;
  ASSERT_NO_FATAL_FAILURE(recv_ctrl(c.peer, kTagCtrl, &ack));
  ASSERT_EQ(ack, kCtrlAck);

  for (const auto& t : truncate_to_parent()) {
    std::vector<uint8_t> b(t.posted + kGuard, kGuardByte);
    size_t got = 0;
    hmc_status_t st = recv_wait(c.peer, b.data(), t.posted, t.tag, kOpTimeoutMs, &got);
    std::string msg = hmc_last_error();
    EXPECT_EQ(st, HMC_ERR_TRUNCATED)
        << "receiving " << t.sent << " bytes into " << t.posted << ": " << describe(st);
    EXPECT_NE(msg, "") << "HMC_ERR_TRUNCATED without a message";
    size_t bad = t.posted;
    while (bad < b.size() && b[bad] == kGuardByte) ++bad;
    EXPECT_EQ(bad, b.size()) << "the truncated receive wrote past its " << t.posted
                             << "-byte buffer, at offset " << bad;
  }

  HostBuffer b(4096);
  pattern_fill(b.data(), 4096, kSeedParent + 10);
  std::string err;
  ASSERT_EQ(send_wait(c.peer, b.data(), 4096, kTagData + 10, kOpTimeoutMs, &err), HMC_SUCCESS)
      << "the connection after truncation: " << err;
  ASSERT_NO_FATAL_FAILURE(recv_ctrl(c.peer, kTagCtrl + 1, &ack));
  EXPECT_EQ(ack, kCtrlAck);
  expect_exit_ok(&c);
}

// 1000 sends and 1000 receives of mixed sizes (0 B to 1 MiB + 3) in flight at once on each
// side, every byte checked on both sides.
TEST_P(SendRecv, ThousandConcurrentRequestsOfMixedSizes) {
  ASSERT_NO_FATAL_FAILURE(open());
  const size_t n = kConcurrentCount;
  Child c;
  ASSERT_NO_FATAL_FAILURE(start(&c, scenario::kConcurrent, {"count=" + std::to_string(n)}));
  {
    ConcurrentExchange x(c.peer, n, kTagReply, kTagData, kSeedParent);
    int failures = 0;
    for (size_t i = 0; i < x.rq.size() && failures < 5; ++i) {
      const auto& r = x.rq.wait(i, kOpTimeoutMs);
      size_t k = i % n;
      if (r.status != HMC_SUCCESS) {
        ADD_FAILURE() << (i < n ? "receive " : "send ") << k << ": " << r.error;
        ++failures;
        continue;
      }
      if (i >= n) continue;
      std::string bad = pattern_check(x.in.data() + x.off[k], concurrent_size(k), kSeedChild + k);
      if (r.bytes != concurrent_size(k) || !bad.empty()) {
        ADD_FAILURE() << "receive " << k << ": " << r.bytes << " bytes of " << concurrent_size(k)
                      << "; " << bad;
        ++failures;
      }
    }
  }
  ASSERT_NO_FATAL_FAILURE(send_ctrl(c.peer, kTagCtrl, kCtrlDone));
  expect_exit_ok(&c);
}

// Messages whose sends completed just before the sender closed the peer and destroyed its
// context are still delivered: an orderly close must not drop what was already sent. Our
// receives are posted first; the peer sends once told to, then closes at once.
TEST_P(SendRecv, MessagesSentRightBeforeCloseAreDelivered) {
  ASSERT_NO_FATAL_FAILURE(open());
  Child c;
  ASSERT_NO_FATAL_FAILURE(start(&c, scenario::kSendThenClose, {"set=mixed"}));
  const auto& sizes = send_then_close_sizes(false);
  std::vector<HostBuffer> bufs;
  for (size_t s : sizes) bufs.emplace_back(s);
  {
    Requests rq;
    for (size_t i = 0; i < sizes.size(); ++i)
      rq.post([&](hmc_request_t* posted) {
        return hmc_recv(c.peer, bufs[i].data(), sizes[i], kTagReply + i, posted);
      });
    // Our receives are posted before the peer sends (it waits for this).
    ASSERT_NO_FATAL_FAILURE(send_ctrl(c.peer, kTagCtrl, kCtrlGo));
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto& r = rq.wait(i, kOpTimeoutMs);
      EXPECT_EQ(r.status, HMC_SUCCESS)
          << "message " << i << " of " << sizes.size() << " (" << sizes[i]
          << " bytes), sent before the peer closed: " << r.error;
      if (r.status != HMC_SUCCESS) continue;
      EXPECT_EQ(r.bytes, sizes[i]) << "message " << i;
      EXPECT_EQ(pattern_check(bufs[i].data(), sizes[i], kSeedChild + i), "") << "message " << i;
    }
  }
  c.peer = nullptr;  // it closed: no last word
  expect_exit_ok(&c);
}

// The same with small (eager) messages, our receives posted only after the peer has exited:
// messages that arrived before the close are still there to be received (a reply followed by
// a close is the common request/response pattern).
TEST_P(SendRecv, MessagesSentBeforeCloseCanBeReceivedAfterIt) {
  ASSERT_NO_FATAL_FAILURE(open());
  Child c;
  ASSERT_NO_FATAL_FAILURE(start(&c, scenario::kSendThenClose, {"set=small"}));
  ASSERT_NO_FATAL_FAILURE(send_ctrl(c.peer, kTagCtrl, kCtrlGo));
  hmc_peer_t peer = c.peer;
  c.peer = nullptr;  // it closes: no last word
  expect_exit_ok(&c);
  const auto& sizes = send_then_close_sizes(true);
  for (size_t i = 0; i < sizes.size(); ++i) {
    HostBuffer b(sizes[i]);
    size_t got = 0;
    std::string err;
    hmc_status_t st = recv_wait(peer, b.data(), sizes[i], kTagReply + i, kOpTimeoutMs, &got, &err);
    EXPECT_EQ(st, HMC_SUCCESS) << "message " << i << " of " << sizes.size() << " (" << sizes[i]
                               << " bytes), sent before the peer closed, received after: " << err;
    if (st != HMC_SUCCESS) continue;
    EXPECT_EQ(got, sizes[i]) << "message " << i;
    EXPECT_EQ(pattern_check(b.data(), sizes[i], kSeedChild + i), "") << "message " << i;
  }
}

}  // namespace
}  // namespace hmc_test
