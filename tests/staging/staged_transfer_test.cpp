// Device memory of one vendor sent to device memory of another (or host memory) between two
// processes, over hoststage's TCP and shared-memory paths, which reach host memory only: every
// byte goes through the staging pipeline (device -> pinned bounce -> wire -> bounce -> device),
// or, between devices of one vendor, by device IPC. Devices are the emulated runtimes of
// tests/fakes, whose memory the host cannot touch.
#include "two_process.h"

namespace {

using namespace staging_test;

class Staged : public testing::TestWithParam<Pair> {};

TEST_P(Staged, SendRecvBothWaysByteExact) {
  echo_sizes(GetParam(), {0, 1, 4096 + 3, kFirst - 1, kFirst, kFirst + 1, kChunk - 1, kChunk,
                          kChunk + 1, 3 * kChunk + 17, 2 * kChunk, 8 * 1024 * 1024 + 5});
}

INSTANTIATE_TEST_SUITE_P(
    Vendors, Staged,
    testing::Values(
        Pair{"cuda:0", "hip:0", "hoststage/tcp"}, Pair{"cuda:0", "hip:0", "hoststage/shm"},
        Pair{"mlu:0", "musa:0", "hoststage/tcp"}, Pair{"mlu:0", "musa:0", "hoststage/shm"},
        Pair{"cuda:0", "host", "hoststage/tcp"}, Pair{"host", "cuda:0", "hoststage/shm"},
        Pair{"hip:0", "musa:0", "hoststage/tcp"}, Pair{"hip:0", "musa:0", "hoststage/shm"},
        // Same vendor: device IPC for messages of a chunk or more (mlu: its 8-byte
        // handles may be recycled, so nothing stays mapped between messages).
        Pair{"cuda:0", "cuda:1", "hoststage/tcp"}, Pair{"hip:0", "hip:0", "hoststage/shm"},
        Pair{"mlu:0", "mlu:1", "hoststage/shm"}, Pair{"musa:1", "musa:0", "hoststage/tcp"}),
    pair_name);

// 256 MiB and 3 bytes (1025 pieces) each way.
class StagedLarge : public testing::TestWithParam<Pair> {};

TEST_P(StagedLarge, QuarterGibibyteBothWaysByteExact) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "half a minute or more under AddressSanitizer; the normal build runs it";
#endif
  echo_sizes(GetParam(), {(256u << 20) + 3});
}

INSTANTIATE_TEST_SUITE_P(Vendors, StagedLarge,
                         testing::Values(Pair{"cuda:0", "hip:0", "hoststage/shm"},
                                         Pair{"mlu:0", "musa:0", "hoststage/tcp"}),
                         pair_name);

// ---- scenarios beyond the echo: cuda:0 here, hip:0 (or cuda:0) in the peer ------------------

// Runs `child` in a forked peer process (child_mem, hip:0 unless given) and `parent` here
// (cuda:0 memory). The child returns what failed ("" when every check held). FAKEGPU_ settings
// meant for the parent are set by it after the fork.
template <typename ChildFn, typename ParentFn>
void run_pair(const char* path, ChildFn child, ParentFn parent, const EnvList& child_env = {},
              const char* child_mem = "hip:0") {
  run_roles(
      path, "cuda:0", child_mem,
      [&](hmc_context_t ctx, hmc_peer_t peer, const char*) -> std::string {
        return child(ctx, peer);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer, const char*) -> std::string {
        parent(ctx, peer);
        return "";
      },
      child_env);
}

constexpr uint64_t kVerdictTag = 99;

// The checks the peer makes on what it received. What failed travels back to the parent as
// text on kVerdictTag ("" when every check held), for the parent to report with its own.
class Verdict {
 public:
  void expect(bool ok, const std::string& what) {
    if (!ok) failed_ += (failed_.empty() ? "" : "; ") + what;
  }
  // A receive that ended with st and got bytes in buf: `size` bytes of round's pattern.
  void expect_received(hmc_context_t ctx, hmc_status_t st, size_t got, const void* buf, size_t size,
                       int round, const std::string& what) {
    if (st != HMC_SUCCESS || got != size) {
      expect(false, what + ": not received whole (" + hmc_status_string(st) + ", " +
                        std::to_string(got) + " of " + std::to_string(size) + " bytes)");
      return;
    }
    long bad = check(ctx, buf, size, round);
    expect(bad == -1, what + ": byte " + std::to_string(bad) + " differs");
  }
  // One message on tag into buf (room bytes), which must be `size` bytes of round's pattern.
  void expect_message(hmc_context_t ctx, hmc_peer_t peer, void* buf, size_t room, uint64_t tag,
                      size_t size, int round, const std::string& what) {
    size_t got = 0;
    hmc_status_t st = recv_wait(peer, buf, room, tag, &got);
    expect_received(ctx, st, got, buf, size, round, what);
  }
  // Rounds first..last of `size` bytes on tag into buf, each of its round's pattern.
  void expect_rounds(hmc_context_t ctx, hmc_peer_t peer, void* buf, size_t size, uint64_t tag,
                     int first, int last, const std::string& what) {
    for (int round = first; round <= last; ++round)
      expect_message(ctx, peer, buf, size, tag, size, round,
                     what + ", round " + std::to_string(round));
  }
  // Sends what failed to the parent and returns it (the peer's exit status says it again).
  std::string report(hmc_peer_t peer) {
    failed_.resize(std::min(failed_.size(), kMaxText));
    CHECK_OK(send_wait(peer, failed_.data(), failed_.size(), kVerdictTag));
    return failed_;
  }
  static constexpr size_t kMaxText = 4000;

 private:
  std::string failed_;
};

// The peer's verdict: "" when every check it made held.
std::string verdict_of(hmc_peer_t peer) {
  std::vector<char> text(Verdict::kMaxText);
  size_t got = 0;
  EXPECT_EQ(recv_wait(peer, text.data(), text.size(), kVerdictTag, &got), HMC_SUCCESS)
      << hmc_last_error();
  return std::string(text.data(), got);
}

hmc_peer_info_t peer_info(hmc_peer_t peer) {
  hmc_peer_info_t info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(hmc_peer_info(peer, &info), HMC_SUCCESS) << hmc_last_error();
  return info;
}

// Sends rounds first..last of `size` bytes from buf on tag, each filled with its pattern.
void send_rounds(hmc_context_t ctx, hmc_peer_t peer, void* buf, size_t size, uint64_t tag,
                 int first, int last) {
  for (int round = first; round <= last; ++round) {
    ASSERT_TRUE(fill(ctx, buf, size, round));
    ASSERT_EQ(send_wait(peer, buf, size, tag), HMC_SUCCESS) << hmc_last_error();
  }
}

// The peer's side: `size` bytes of its `mem` for body(buf, verdict), then the verdict reported.
template <typename Body>
std::string check_into(hmc_context_t ctx, hmc_peer_t peer, const char* mem, size_t size,
                       Body body) {
  void* buf;
  CHECK_OK(hmc_mem_alloc(ctx, mem, size, &buf));
  Verdict v;
  body(buf, v);
  hmc_mem_free(ctx, buf);
  return v.report(peer);
}

constexpr uint32_t kRemoteRw = HMC_ACCESS_REMOTE_WRITE | HMC_ACCESS_REMOTE_READ;
constexpr uint8_t kUntouched = 0x5a;

TEST(StagedScenarios, TruncatedMessagesLeaveTheStreamInStep) {
  // Three messages on one tag: one longer than a chunk into a one-chunk buffer, one longer than
  // a chunk into a tiny buffer (the plugin's reported length says its pieces must be skipped),
  // then a small one that must arrive intact.
  const size_t a = 3 * kChunk + 5, b = kChunk + 7, c = 100;
  run_pair(
      "hoststage/tcp",
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        return check_into(ctx, peer, "hip:0", a, [&](void* buf, Verdict& v) {
          size_t got = 0;
          v.expect(recv_wait(peer, buf, kChunk, 1, &got) == HMC_ERR_TRUNCATED,
                   "the first message into one chunk was not truncated");
          v.expect(recv_wait(peer, buf, 50, 1, &got) == HMC_ERR_TRUNCATED,
                   "the second message into 50 bytes was not truncated");
          v.expect_message(ctx, peer, buf, a, 1, c, 3, "the third message");
        });
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", a, &buf), HMC_SUCCESS);
        int round = 1;
        for (size_t size : {a, b, c}) {
          ASSERT_TRUE(fill(ctx, buf, size, round++));
          ASSERT_EQ(send_wait(peer, buf, size, 1), HMC_SUCCESS) << hmc_last_error();
        }
        EXPECT_EQ(verdict_of(peer), "");
        hmc_mem_free(ctx, buf);
      });
}

TEST(StagedScenarios, SameTagMessagesMatchInOrderWithManyInFlight) {
  // Large and small messages on one tag, all posted at once on both sides, with another tag
  // interleaved: each receive gets its own message, whole.
  const std::vector<size_t> sizes = {2 * kChunk + 3, 10, kChunk + 1, 0, 3 * kChunk, 77};
  size_t max = 3 * kChunk;
  run_pair(
      "hoststage/shm",
      [&](hmc_context_t ctx, hmc_peer_t peer) -> std::string {
        std::vector<void*> bufs(sizes.size());
        std::vector<hmc_request_t> reqs(sizes.size());
        for (size_t i = 0; i < sizes.size(); ++i) {
          CHECK_OK(hmc_mem_alloc(ctx, "hip:0", max, &bufs[i]));
          CHECK_OK(hmc_recv(peer, bufs[i], max, i % 2 ? 6 : 5, &reqs[i]));
        }
        Verdict v;
        for (size_t i = 0; i < sizes.size(); ++i) {
          size_t got = 0;
          hmc_status_t st = hmc_request_wait(reqs[i], kTimeoutMs, &got);
          v.expect_received(ctx, st, got, bufs[i], sizes[i], int(i),
                            "message " + std::to_string(i));
          hmc_mem_free(ctx, bufs[i]);
        }
        return v.report(peer);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        std::vector<void*> bufs(sizes.size());
        std::vector<hmc_request_t> reqs(sizes.size());
        for (size_t i = 0; i < sizes.size(); ++i) {
          ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", max, &bufs[i]), HMC_SUCCESS);
          ASSERT_TRUE(fill(ctx, bufs[i], sizes[i], int(i)));
        }
        for (size_t i = 0; i < sizes.size(); ++i)
          ASSERT_EQ(hmc_send(peer, bufs[i], sizes[i], i % 2 ? 6 : 5, &reqs[i]), HMC_SUCCESS);
        for (size_t i = 0; i < sizes.size(); ++i)
          EXPECT_EQ(hmc_request_wait(reqs[i], kTimeoutMs, nullptr), HMC_SUCCESS)
              << hmc_last_error();
        EXPECT_EQ(verdict_of(peer), "");
        for (void* b : bufs) hmc_mem_free(ctx, b);
      });
}

// The peer sends round 1 of `size` bytes on tag 1, which its device copies fail, then round 2
// on tag 2, which must go through. Returns what failed.
std::string send_failing_then_whole(hmc_context_t ctx, hmc_peer_t peer, size_t size, Verdict* v) {
  void* buf;
  CHECK_OK(hmc_mem_alloc(ctx, "hip:0", size, &buf));
  CHECK_TRUE(fill(ctx, buf, size, 1), "fill failed");
  hmc_status_t st = send_wait(peer, buf, size, 1);
  v->expect(st != HMC_SUCCESS && st != HMC_ERR_PEER_LOST,
            std::string("the first send did not fail as it should: ") + hmc_status_string(st) +
                " " + hmc_last_error());
  CHECK_TRUE(fill(ctx, buf, size, 2), "fill failed");
  st = send_wait(peer, buf, size, 2);
  v->expect(st == HMC_SUCCESS, std::string("the next send failed: ") + hmc_last_error());
  hmc_mem_free(ctx, buf);
  return "";
}

// The peer sends with its nth device copy failing (FAKEGPU_FAIL_COPY_NTH): round 1 of `size`
// bytes on tag 1 must fail, round 2 on tag 2 go through; with wait_for_us it then waits for a
// step message (tag 8) before its verdict. `ours` receives into `size` bytes of our cuda:0
// memory; the peer's verdict is checked after it.
// Ours: one message of `size` bytes on tag into buf, whole and of round's pattern.
void expect_round_here(hmc_context_t ctx, hmc_peer_t peer, void* buf, size_t size, uint64_t tag,
                       int round) {
  size_t got = 0;
  EXPECT_EQ(recv_wait(peer, buf, size, tag, &got), HMC_SUCCESS) << hmc_last_error();
  EXPECT_EQ(got, size);
  EXPECT_EQ(check(ctx, buf, size, round), -1);
}

void run_failing_sender(const char* path, size_t size, const char* nth, bool wait_for_us,
                        const std::function<void(hmc_context_t, hmc_peer_t, void*)>& ours) {
  run_pair(
      path,
      [&](hmc_context_t ctx, hmc_peer_t peer) -> std::string {
        Verdict v;
        STEP(send_failing_then_whole(ctx, peer, size, &v));
        if (wait_for_us) STEP(step_recv(peer, 8));
        return v.report(peer);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &buf), HMC_SUCCESS);
        ours(ctx, peer, buf);
        EXPECT_EQ(verdict_of(peer), "");
        hmc_mem_free(ctx, buf);
      },
      {{"FAKEGPU_FAIL_COPY_NTH", nth}});
}

TEST(StagedScenarios, DeviceFailureMidMessageEndsBothSidesAndTheNextMessageArrives) {
  // The sender's (the peer's) 3rd device copy fails: the 1st fills its buffer, the 2nd stages
  // piece 0, the 3rd would stage the next piece. The send ends with the device's error, the
  // receiver learns that the message was aborted, and the next message on the peer goes through.
  const size_t size = 4 * kChunk + 9;
  run_failing_sender(
      "hoststage/tcp", size, "3", false, [&](hmc_context_t ctx, hmc_peer_t peer, void* buf) {
        size_t got = 0;
        EXPECT_EQ(recv_wait(peer, buf, size, 1, &got), HMC_ERR_REMOTE) << hmc_last_error();
        EXPECT_NE(strstr(hmc_last_error(), "aborted"), nullptr) << hmc_last_error();
        expect_round_here(ctx, peer, buf, size, 2, 2);
      });
}

TEST(StagedScenarios, DeviceFailureBeforeAnythingLeftSendsNothing) {
  // The copy staging piece 0 fails (the 1st copy fills the buffer): the send fails and nothing
  // of it reaches the receiver, whose next message arrives whole.
  const size_t size = 2 * kChunk + 1;
  run_failing_sender("hoststage/shm", size, "2", true,
                     [&](hmc_context_t ctx, hmc_peer_t peer, void* buf) {
                       expect_round_here(ctx, peer, buf, size, 2, 2);
                       hmc_request_t r;  // nothing arrived on tag 1 (the peer waits for us)
                       ASSERT_EQ(hmc_recv(peer, buf, size, 1, &r), HMC_SUCCESS);
                       EXPECT_EQ(hmc_request_wait(r, 200, nullptr), HMC_ERR_TIMEOUT);
                       EXPECT_EQ(hmc_request_cancel(r), HMC_SUCCESS) << hmc_last_error();
                       EXPECT_EQ(hmc_request_wait(r, kTimeoutMs, nullptr), HMC_ERR_CANCELLED);
                       EXPECT_EQ(step_send(peer, 8), "");
                     });
}

TEST(StagedScenarios, WhatArrivedStaysReceivableAfterTheSenderClosed) {
  // The peer sends a message and closes. A receive that matches nothing ends with PEER_LOST,
  // without taking the path down: the message that did arrive is still received, whole. Then
  // the context is destroyed promptly (nothing of the ended receive lingers).
  run_pair(
      "hoststage/tcp",
      [&](hmc_context_t, hmc_peer_t peer) -> std::string {
        const char msg[] = "sent before the close";
        CHECK_OK(send_wait(peer, msg, sizeof msg, 2));
        return "";
      },
      [&](hmc_context_t, hmc_peer_t peer) {
        char buf[64] = {};
        size_t got = 0;
        EXPECT_EQ(recv_wait(peer, buf, sizeof buf, 3, &got), HMC_ERR_PEER_LOST) << hmc_last_error();
        EXPECT_EQ(recv_wait(peer, buf, sizeof buf, 2, &got), HMC_SUCCESS) << hmc_last_error();
        EXPECT_STREQ(buf, "sent before the close");
      });
}

// ---- one-sided access to the peer's host memory from our cuda:0 memory, over each path ------

// run(): the peer exports `region` bytes of host memory (kUntouched) on tag 7 and waits for
// notification `value`, then checks(host, verdict) run on what our first transfer left there;
// it then tells us (tag 8), waits for our second transfer to end (tag 9) and reports.
class StagedRemoteAccess : public testing::TestWithParam<const char*> {
 protected:
  using PeerChecks = std::function<void(std::vector<uint8_t>& host, Verdict& v)>;

  void run(size_t region, uint64_t value, const PeerChecks& checks,
           const std::function<void(hmc_context_t, hmc_peer_t)>& ours) {
    run_pair(
        GetParam(),
        [&](hmc_context_t ctx, hmc_peer_t peer) -> std::string {
          std::vector<uint8_t> host(region, kUntouched);
          hmc_region_t reg;
          STEP(export_memory(ctx, peer, host.data(), host.size(), kRemoteRw, &reg, 7));
          Verdict v;
          hmc_notification_t n{};
          v.expect(hmc_notify_wait(ctx, kTimeoutMs, &n) == HMC_SUCCESS && n.value == value,
                   "no notification " + std::to_string(value) + " after the transfer");
          checks(host, v);
          STEP(step_send(peer, 8));
          STEP(step_recv(peer, 9));  // our second transfer is done
          hmc_mem_deregister(reg);
          return v.report(peer);
        },
        ours);
  }
};

TEST_P(StagedRemoteAccess, PutAndGetMoveLocalDeviceMemoryThroughBounces) {
  // The peer exports host memory; we put from and get into cuda:0 memory, which the path cannot
  // reach: pieces go through bounce buffers. The put's notification comes after all its bytes.
  const size_t region = 3 * kChunk + 64, size = 3 * kChunk + 17, off = 5;
  run(
      region, 42,
      [&](std::vector<uint8_t>& host, Verdict& v) {
        bool put = true;
        for (size_t i = 0; i < size; ++i) put &= host[off + i] == pattern(i, size, 1);
        v.expect(put, "the bytes put differ");
        v.expect(host[off - 1] == kUntouched && host[off + size] == kUntouched,
                 "bytes around the put changed");
        for (size_t i = 0; i < size; ++i) host[off + i] = pattern(i, size, 2);  // for the get
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        hmc_remote_t remote;
        ASSERT_EQ(import_region(peer, &remote), "");
        void* dev;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &dev), HMC_SUCCESS);
        ASSERT_TRUE(fill(ctx, dev, size, 1));
        hmc_request_t r;
        // Out of the region: refused before anything moves.
        EXPECT_EQ(hmc_put(peer, dev, size, remote, region - 10, 0, 0, &r), HMC_ERR_OUT_OF_BOUNDS);
        ASSERT_EQ(hmc_put(peer, dev, size, remote, off, HMC_PUT_NOTIFY, 42, &r), HMC_SUCCESS)
            << hmc_last_error();
        EXPECT_EQ(hmc_request_wait(r, kTimeoutMs, nullptr), HMC_SUCCESS) << hmc_last_error();
        ASSERT_EQ(step_recv(peer, 8), "");
        void* back;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &back), HMC_SUCCESS);
        ASSERT_EQ(hmc_get(peer, back, size, remote, off, &r), HMC_SUCCESS) << hmc_last_error();
        size_t got = 0;
        EXPECT_EQ(hmc_request_wait(r, kTimeoutMs, &got), HMC_SUCCESS) << hmc_last_error();
        EXPECT_EQ(got, size);
        EXPECT_EQ(check(ctx, back, size, 2), -1);
        // A device pointer with a size past its allocation is refused before anything moves.
        EXPECT_EQ(hmc_send(peer, dev, size + 1, 3, &r), HMC_ERR_OUT_OF_BOUNDS);
        EXPECT_EQ(step_send(peer, 9), "");
        EXPECT_EQ(verdict_of(peer), "");
        // Device memory over a host-only path is served by target-side staging
        // (target_staging_test.cpp has its transfers).
        hmc_region_t reg;
        EXPECT_EQ(hmc_mem_register(ctx, dev, size, HMC_ACCESS_REMOTE_WRITE, &reg), HMC_SUCCESS)
            << hmc_last_error();
        EXPECT_EQ(hmc_mem_deregister(reg), HMC_SUCCESS);
        hmc_remote_release(remote);
        hmc_mem_free(ctx, dev);
        hmc_mem_free(ctx, back);
      });
}

TEST_P(StagedRemoteAccess, TransferListsMoveLocalDeviceMemoryThroughBounces) {
  // The peer exports host memory; a list writes scattered blocks of our cuda:0 memory into it
  // (pieces through bounce buffers), notifying after the last byte, and another list reads
  // them back into a second cuda:0 buffer in another order.
  const size_t block = kChunk / 2 + 5, blocks = 6, size = block * blocks;
  std::vector<hmc_xfer_desc_t> writes, reads;
  for (size_t k = 0; k < blocks; ++k)
    writes.push_back({k * block, ((k * 5) % blocks) * block, block});
  for (size_t k = 0; k < blocks; ++k) reads.push_back({(blocks - 1 - k) * block, k * block, block});
  run(
      size, 43,
      [&](std::vector<uint8_t>& host, Verdict& v) {
        bool written = true;
        for (const auto& d : writes)
          for (size_t j = 0; j < d.size; ++j)
            written &= host[d.remote_offset + j] == pattern(d.local_offset + j, size, 1);
        v.expect(written, "the bytes written differ");
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        hmc_remote_t remote;
        ASSERT_EQ(import_region(peer, &remote), "");
        void *dev, *back;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &dev), HMC_SUCCESS);
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &back), HMC_SUCCESS);
        ASSERT_TRUE(fill(ctx, dev, size, 1));
        hmc_region_t src, dst;
        ASSERT_EQ(hmc_mem_register(ctx, dev, size, 0, &src), HMC_SUCCESS) << hmc_last_error();
        ASSERT_EQ(hmc_mem_register(ctx, back, size, 0, &dst), HMC_SUCCESS) << hmc_last_error();
        hmc_xfer_list_t list;
        ASSERT_EQ(
            hmc_xfer_prepare(src, remote, HMC_XFER_WRITE, writes.data(), writes.size(), &list),
            HMC_SUCCESS)
            << hmc_last_error();
        hmc_request_t r;
        ASSERT_EQ(hmc_xfer_post(list, HMC_XFER_NOTIFY, 43, &r), HMC_SUCCESS) << hmc_last_error();
        size_t got = 0;
        EXPECT_EQ(hmc_request_wait(r, kTimeoutMs, &got), HMC_SUCCESS) << hmc_last_error();
        EXPECT_EQ(got, size);
        EXPECT_EQ(hmc_xfer_release(list), HMC_SUCCESS);
        ASSERT_EQ(step_recv(peer, 8), "");
        ASSERT_EQ(hmc_xfer_prepare(dst, remote, HMC_XFER_READ, reads.data(), reads.size(), &list),
                  HMC_SUCCESS)
            << hmc_last_error();
        ASSERT_EQ(hmc_xfer_post(list, 0, 0, &r), HMC_SUCCESS) << hmc_last_error();
        EXPECT_EQ(hmc_request_wait(r, kTimeoutMs, &got), HMC_SUCCESS) << hmc_last_error();
        EXPECT_EQ(hmc_xfer_release(list), HMC_SUCCESS);
        // back[l] holds host[remote] = dev[local of the write that filled it].
        std::vector<uint8_t> want(size), remote_image(size), seen(size);
        for (const auto& d : writes)
          for (size_t j = 0; j < d.size; ++j)
            remote_image[d.remote_offset + j] = pattern(d.local_offset + j, size, 1);
        for (const auto& d : reads)
          memcpy(want.data() + d.local_offset, remote_image.data() + d.remote_offset, d.size);
        ASSERT_EQ(hmc_mem_copy(ctx, seen.data(), back, size), HMC_SUCCESS) << hmc_last_error();
        EXPECT_TRUE(seen == want) << "the blocks read back into device memory differ";
        EXPECT_EQ(step_send(peer, 9), "");
        EXPECT_EQ(verdict_of(peer), "");
        hmc_mem_deregister(src);
        hmc_mem_deregister(dst);
        hmc_remote_release(remote);
        hmc_mem_free(ctx, dev);
        hmc_mem_free(ctx, back);
      });
}

INSTANTIATE_TEST_SUITE_P(HostPaths, StagedRemoteAccess, testing::ValuesIn(kHostPaths), path_name);

// ---- shared bounces and device IPC -----------------------------------------------------------

TEST(SharedBounces, OffOnOneSideSendsThePiecesThroughTheTransport) {
  // cuda:0 here, hip:0 in the peer, which turned shared bounces off: its messages and ours go
  // through the transport, byte-exact, and none is counted as read from shared buffers.
  const size_t size = 2 * kChunk + 9;
  run_pair(
      "hoststage/shm",
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        return check_into(ctx, peer, "hip:0", size, [&](void* dev, Verdict& v) {
          v.expect_message(ctx, peer, dev, size, 1, size, 1, "the peer's receive");
          v.expect(send_wait(peer, dev, size, 2) == HMC_SUCCESS,
                   std::string("the peer's send: ") + hmc_last_error());
        });
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void *buf, *back;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &buf), HMC_SUCCESS);
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &back), HMC_SUCCESS);
        ASSERT_TRUE(fill(ctx, buf, size, 1));
        ASSERT_EQ(send_wait(peer, buf, size, 1), HMC_SUCCESS) << hmc_last_error();
        size_t got = 0;
        ASSERT_EQ(recv_wait(peer, back, size, 2, &got), HMC_SUCCESS) << hmc_last_error();
        EXPECT_EQ(got, size);
        EXPECT_EQ(check(ctx, back, size, 1), -1);
        EXPECT_EQ(verdict_of(peer), "");
        hmc_peer_info_t info = peer_info(peer);
        EXPECT_EQ(info.shared_staged_messages, 0u);
        EXPECT_EQ(info.staged_transfers, 2u);  // the two messages (the verdict is host memory)
        hmc_mem_free(ctx, buf);
        hmc_mem_free(ctx, back);
      },
      {{"HMC_STAGE_SHARED", "0"}});
}

// Our side of the device IPC scenarios: rounds first..last of `size` bytes from cuda:0 on tag 1,
// the peer's verdict on them, then what the pair counted.
hmc_peer_info_t send_rounds_from_cuda(hmc_context_t ctx, hmc_peer_t peer, size_t size, int first,
                                      int last) {
  void* buf = nullptr;
  EXPECT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &buf), HMC_SUCCESS) << hmc_last_error();
  if (buf) send_rounds(ctx, peer, buf, size, 1, first, last);
  EXPECT_EQ(verdict_of(peer), "");
  if (buf) hmc_mem_free(ctx, buf);
  return peer_info(peer);
}

// cuda:0 in both processes: device IPC is agreed at connect. run() runs the peer's checks on
// `size` bytes of its cuda:0 memory (and reports their verdict) and ours here.
class DeviceIpc : public testing::Test {
 protected:
  using PeerChecks = std::function<void(hmc_context_t, hmc_peer_t, void* dev, Verdict&)>;
  using Ours = std::function<void(hmc_context_t, hmc_peer_t)>;

  static void run(const char* path, size_t size, const PeerChecks& checks, const Ours& ours,
                  const EnvList& peer_env = {}) {
    run_pair(
        path,
        [&](hmc_context_t ctx, hmc_peer_t peer) {
          return check_into(ctx, peer, "cuda:0", size,
                            [&](void* dev, Verdict& v) { checks(ctx, peer, dev, v); });
        },
        ours, peer_env, "cuda:0");
  }
  // The peer's checks of rounds first..last of `size` bytes on tag 1.
  static PeerChecks rounds(size_t size, int first, int last) {
    return [=](hmc_context_t ctx, hmc_peer_t peer, void* dev, Verdict& v) {
      v.expect_rounds(ctx, peer, dev, size, 1, first, last, "into cuda:0");
    };
  }
};

TEST_F(DeviceIpc, HostReceiveBufferGetsThePiecesAndIpcStaysOn) {
  // The receiver's buffer decides: host memory asks for the pieces (version 1), device memory
  // of the same vendor copies by IPC; the pair keeps IPC for later messages.
  const size_t size = 3 * kChunk + 11;
  run(
      "hoststage/shm", size,
      [&](hmc_context_t ctx, hmc_peer_t peer, void* dev, Verdict& v) {
        std::vector<uint8_t> host(size);
        v.expect_message(ctx, peer, host.data(), size, 1, size, 1, "into host memory");
        v.expect_message(ctx, peer, dev, size, 1, size, 2, "into cuda:0");
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        hmc_peer_info_t info = send_rounds_from_cuda(ctx, peer, size, 1, 2);
        EXPECT_STREQ(info.device_ipc, "cuda");
        EXPECT_EQ(info.ipc_messages, 1u);
        EXPECT_EQ(info.staged_transfers, 1u);
      });
}

TEST_F(DeviceIpc, CostModelPrefersSharedBouncesWhenDeviceCopiesAreSlow) {
  // Same vendor on both sides, so device IPC is open, but the receiver's device-to-device copies
  // run at 5 MB/s while its copies to and from host memory are unlimited (as between two GPUs
  // without a peer link). The figures it measured at connect (the sender here keeps the default
  // ones) make the sender's cost model choose shared bounces; the bytes arrive intact. The gap is
  // wide on purpose: on a machine whose cores are all busy (CI running other two-process tests
  // beside this one) the emulated host copies were measured as slow as 100 MB/s, which with
  // device copies at 50 MB/s made IPC the cheaper way.
  const size_t size = 3 * kChunk + 11;
  run(
      "hoststage/shm", size,
      [&](hmc_context_t ctx, hmc_peer_t peer, void* dev, Verdict& v) {
        v.expect_rounds(ctx, peer, dev, size, 1, 1, 2, "into cuda:0");
        hmc_device_info_t info{};
        info.struct_size = sizeof info;
        int n = 0;
        hmc_device_count(ctx, &n);
        for (int i = 0; i < n; ++i)
          if (hmc_device_info(ctx, i, &info) == HMC_SUCCESS && std::string(info.name) == "cuda:0")
            v.expect(info.copy_d2d_MBps != 0 && info.copy_d2d_MBps <= 10 &&
                         std::string(info.copy_basis) == "measured",
                     "the measured device-to-device rate is not what the fake was told");
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        EXPECT_STREQ(peer_info(peer).device_ipc, "cuda");  // open, but not chosen
        hmc_peer_info_t info = send_rounds_from_cuda(ctx, peer, size, 1, 2);
        EXPECT_EQ(info.ipc_messages, 0u);
        EXPECT_EQ(info.shared_staged_messages, 2u);
      },
      {{"FAKEGPU_CUDA_D2D_BANDWIDTH_MBPS", "5"}, {"HMC_DEVICE_COPY_CALIBRATE", "1"}});
}

TEST_F(DeviceIpc, ReceiverWhoseBufferCannotTakeIpcReadsSharedBouncesInstead) {
  // The receiver has cuda and hip devices, so device IPC is agreed for cuda; the sender's cuda
  // memory goes out with a header offering IPC and shared bounces (version 4). Into the
  // receiver's cuda:0 it crosses by IPC; into its hip:0 (IPC cannot map cuda memory there) the
  // pieces are read out of the sender's shared bounces; into host memory they come through the
  // transport. Every message arrives intact.
  const size_t size = 3 * kChunk + 17;
  const std::string hip_lib = std::string(FAKEGPU_DIR) + "/hip6/libamdhip64.so.6";
  run(
      "hoststage/shm", size,
      [&](hmc_context_t ctx, hmc_peer_t peer, void* cuda, Verdict& v) {
        void* hip;
        if (hmc_mem_alloc(ctx, "hip:0", size, &hip) != HMC_SUCCESS) {
          v.expect(false, std::string("hmc_mem_alloc hip:0: ") + hmc_last_error());
          return;
        }
        std::vector<uint8_t> host(size);
        v.expect_rounds(ctx, peer, hip, size, 1, 1, 1, "into hip:0");
        v.expect_rounds(ctx, peer, cuda, size, 1, 2, 2, "into cuda:0");
        v.expect_rounds(ctx, peer, host.data(), size, 1, 3, 3, "into host memory");
        hmc_mem_free(ctx, hip);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        EXPECT_STREQ(peer_info(peer).device_ipc, "cuda");
        hmc_peer_info_t info = send_rounds_from_cuda(ctx, peer, size, 1, 3);
        EXPECT_EQ(info.ipc_messages, 1u);            // into cuda:0
        EXPECT_EQ(info.shared_staged_messages, 1u);  // into hip:0
        EXPECT_EQ(info.staged_transfers, 2u);        // into hip:0 and into host memory
      },
      {{"HMC_DEVICE_PLUGINS", "cuda,hip"}, {"HMC_HIP_LIBRARY", hip_lib.c_str()}});
}

TEST_F(DeviceIpc, PeerThatCannotMapGetsPiecesFromThenOn) {
  // The receiver's runtime refuses every handle (as across containers): the first message is
  // sent in pieces after the refusal, the next ones without trying IPC again.
  const size_t size = 2 * kChunk + 1;
  run("hoststage/tcp", size, rounds(size, 1, 3),
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        EXPECT_STREQ(peer_info(peer).device_ipc, "cuda");
        hmc_peer_info_t info = send_rounds_from_cuda(ctx, peer, size, 1, 3);
        EXPECT_STREQ(info.device_ipc, "");
        EXPECT_EQ(info.ipc_messages, 0u);
        EXPECT_EQ(info.staged_transfers, 3u);
      },
      {{"FAKEGPU_FAIL_IPC_OPEN", "1"}});
}

TEST_F(DeviceIpc, TruncationAndACopyFailureEndOnlyTheirReceive) {
  // Message 1 is larger than its buffer: TRUNCATED. Message 2's device-to-device copy fails on
  // the receiver (its 3rd copy; piece 0 of messages 1 and 2 are the others): that receive
  // fails, the send does not. Message 3 arrives whole.
  const size_t size = 3 * kChunk + 5;
  run(
      "hoststage/shm", size,
      [&](hmc_context_t ctx, hmc_peer_t peer, void* dev, Verdict& v) {
        size_t got = 0;
        v.expect(recv_wait(peer, dev, 2 * kChunk, 1, &got) == HMC_ERR_TRUNCATED,
                 "message 1 was not truncated");
        hmc_status_t st = recv_wait(peer, dev, size, 1, &got);
        v.expect(st != HMC_SUCCESS && st != HMC_ERR_TRUNCATED,
                 std::string("message 2's failed copy was not reported: ") + hmc_status_string(st));
        v.expect_message(ctx, peer, dev, size, 1, size, 3, "message 3");
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        // The sender's view: all three went.
        EXPECT_EQ(send_rounds_from_cuda(ctx, peer, size, 1, 3).ipc_messages, 3u);
      },
      {{"FAKEGPU_FAIL_COPY_NTH", "3"}});
}

TEST_F(DeviceIpc, NewAllocationAtAFreedAddressIsNotReadThroughAStaleMapping) {
  // The receiver keeps mappings of the sender's allocations for later messages. The sender frees
  // its buffer and allocates again (the emulation may hand back the same address and file
  // descriptor): the next message must carry the new allocation's bytes.
  const size_t size = 2 * kChunk + 3;
  run("hoststage/shm", size, rounds(size, 1, 4), [&](hmc_context_t ctx, hmc_peer_t peer) {
    for (int round = 1; round <= 4; ++round) {
      void* buf;
      ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &buf), HMC_SUCCESS);
      send_rounds(ctx, peer, buf, size, 1, round, round);
      ASSERT_EQ(hmc_mem_free(ctx, buf), HMC_SUCCESS);
    }
    EXPECT_EQ(verdict_of(peer), "");
    EXPECT_EQ(peer_info(peer).ipc_messages, 4u);
  });
}

}  // namespace
