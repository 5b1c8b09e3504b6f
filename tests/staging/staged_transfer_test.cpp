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

// ---- scenarios beyond the echo: one pair, cuda:0 here and hip:0 in the peer, over TCP -----

// Runs `child` in a forked peer process (child_mem, hip:0 unless given) and `parent` here
// (cuda:0 memory). The child returns its exit status (0: every check held). FAKEGPU_ settings
// meant for the parent are set by it after the fork.
template <typename ChildFn, typename ParentFn>
void run_pair(const char* path, ChildFn child, ParentFn parent, const EnvList& child_env = {},
              const char* child_mem = "hip:0") {
  run_roles(
      path, "cuda:0", child_mem,
      [&](hmc_context_t ctx, hmc_peer_t peer, const char*) -> std::string {
        int rc = child(ctx, peer);
        return rc == 0 ? "" : "exit status " + std::to_string(rc);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer, const char*) -> std::string {
        parent(ctx, peer);
        return "";
      },
      child_env);
}

// The child's verdict travels back as one byte on tag 99 (0 = every check held).
int report(hmc_peer_t peer, uint8_t verdict) {
  send_wait(peer, &verdict, 1, 99);
  return verdict;
}
uint8_t verdict_of(hmc_peer_t peer) {
  uint8_t v = 0xff;
  size_t got = 0;
  EXPECT_EQ(recv_wait(peer, &v, 1, 99, &got), HMC_SUCCESS) << hmc_last_error();
  return v;
}

TEST(StagedScenarios, TruncatedMessagesLeaveTheStreamInStep) {
  // Three messages on one tag: one longer than a chunk into a one-chunk buffer, one longer than
  // a chunk into a tiny buffer (the plugin's reported length says its pieces must be skipped),
  // then a small one that must arrive intact.
  const size_t a = 3 * kChunk + 5, b = kChunk + 7, c = 100;
  run_pair(
      "hoststage/tcp",
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        if (hmc_mem_alloc(ctx, "hip:0", a, &buf) != HMC_SUCCESS) return 20;
        size_t got = 0;
        uint8_t v = 0;
        if (recv_wait(peer, buf, kChunk, 1, &got) != HMC_ERR_TRUNCATED) v |= 1;
        if (recv_wait(peer, buf, 50, 1, &got) != HMC_ERR_TRUNCATED) v |= 2;
        if (recv_wait(peer, buf, a, 1, &got) != HMC_SUCCESS || got != c)
          v |= 4;
        else if (check(ctx, buf, c, 3) != -1)
          v |= 8;
        hmc_mem_free(ctx, buf);
        return report(peer, v);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", a, &buf), HMC_SUCCESS);
        int round = 1;
        for (size_t size : {a, b, c}) {
          ASSERT_TRUE(fill(ctx, buf, size, round++));
          ASSERT_EQ(send_wait(peer, buf, size, 1), HMC_SUCCESS) << hmc_last_error();
        }
        EXPECT_EQ(verdict_of(peer), 0) << "bit 1/2: not truncated, 4: third not whole, 8: bytes";
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
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        std::vector<void*> bufs(sizes.size());
        std::vector<hmc_request_t> reqs(sizes.size());
        uint8_t v = 0;
        for (size_t i = 0; i < sizes.size(); ++i) {
          if (hmc_mem_alloc(ctx, "hip:0", max, &bufs[i]) != HMC_SUCCESS) return 20;
          if (hmc_recv(peer, bufs[i], max, i % 2 ? 6 : 5, &reqs[i]) != HMC_SUCCESS) return 21;
        }
        for (size_t i = 0; i < sizes.size(); ++i) {
          size_t got = 0;
          if (hmc_request_wait(reqs[i], kTimeoutMs, &got) != HMC_SUCCESS || got != sizes[i])
            v |= 1;
          else if (check(ctx, bufs[i], got, int(i)) != -1)
            v |= 2;
          hmc_mem_free(ctx, bufs[i]);
        }
        return report(peer, v);
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
        EXPECT_EQ(verdict_of(peer), 0) << "bit 1: wrong size or status, 2: wrong bytes";
        for (void* b : bufs) hmc_mem_free(ctx, b);
      });
}

TEST(StagedScenarios, DeviceFailureMidMessageEndsBothSidesAndTheNextMessageArrives) {
  // The sender's (the peer's) 3rd device copy fails: the 1st fills its buffer, the 2nd stages
  // piece 0, the 3rd would stage the next piece. The send ends with the device's error, the
  // receiver learns that the message was aborted, and the next message on the peer goes through.
  const size_t size = 4 * kChunk + 9;
  run_pair(
      "hoststage/tcp",
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        if (hmc_mem_alloc(ctx, "hip:0", size, &buf) != HMC_SUCCESS) return 20;
        uint8_t v = 0;
        if (!fill(ctx, buf, size, 1)) return 21;
        hmc_status_t st = send_wait(peer, buf, size, 1);
        if (st == HMC_SUCCESS || st == HMC_ERR_PEER_LOST) {
          fprintf(stderr, "child: first send: %s %s\n", hmc_status_string(st), hmc_last_error());
          v |= 1;
        }
        if (!fill(ctx, buf, size, 2)) return 22;
        if (send_wait(peer, buf, size, 2) != HMC_SUCCESS) v |= 2;
        hmc_mem_free(ctx, buf);
        return report(peer, v);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &buf), HMC_SUCCESS);
        size_t got = 0;
        EXPECT_EQ(recv_wait(peer, buf, size, 1, &got), HMC_ERR_REMOTE) << hmc_last_error();
        EXPECT_NE(strstr(hmc_last_error(), "aborted"), nullptr) << hmc_last_error();
        EXPECT_EQ(recv_wait(peer, buf, size, 2, &got), HMC_SUCCESS) << hmc_last_error();
        EXPECT_EQ(got, size);
        EXPECT_EQ(check(ctx, buf, size, 2), -1);
        EXPECT_EQ(verdict_of(peer), 0) << "bit 1: the first send did not fail as it should, "
                                          "2: the next send failed";
        hmc_mem_free(ctx, buf);
      },
      {{"FAKEGPU_FAIL_COPY_NTH", "3"}});
}

TEST(StagedScenarios, DeviceFailureBeforeAnythingLeftSendsNothing) {
  // The copy staging piece 0 fails (the 1st copy fills the buffer): the send fails and nothing
  // of it reaches the receiver, whose next message arrives whole.
  const size_t size = 2 * kChunk + 1;
  run_pair(
      "hoststage/shm",
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        if (hmc_mem_alloc(ctx, "hip:0", size, &buf) != HMC_SUCCESS) return 20;
        uint8_t v = 0;
        if (!fill(ctx, buf, size, 1)) return 21;
        hmc_status_t st = send_wait(peer, buf, size, 1);
        if (st == HMC_SUCCESS || st == HMC_ERR_PEER_LOST) v |= 1;
        if (!fill(ctx, buf, size, 2)) return 22;
        if (send_wait(peer, buf, size, 2) != HMC_SUCCESS) v |= 2;
        hmc_mem_free(ctx, buf);
        uint8_t done = 0;  // the parent looks for a stray message first
        size_t got = 0;
        if (recv_wait(peer, &done, 1, 8, &got) != HMC_SUCCESS) return 23;
        return report(peer, v);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &buf), HMC_SUCCESS);
        size_t got = 0;
        EXPECT_EQ(recv_wait(peer, buf, size, 2, &got), HMC_SUCCESS) << hmc_last_error();
        EXPECT_EQ(got, size);
        EXPECT_EQ(check(ctx, buf, size, 2), -1);
        hmc_request_t r;  // nothing arrived on tag 1 (the peer waits for our verdict)
        ASSERT_EQ(hmc_recv(peer, buf, size, 1, &r), HMC_SUCCESS);
        EXPECT_EQ(hmc_request_wait(r, 200, nullptr), HMC_ERR_TIMEOUT);
        EXPECT_EQ(hmc_request_cancel(r), HMC_SUCCESS) << hmc_last_error();
        EXPECT_EQ(hmc_request_wait(r, kTimeoutMs, nullptr), HMC_ERR_CANCELLED);
        uint8_t done = 1;
        EXPECT_EQ(send_wait(peer, &done, 1, 8), HMC_SUCCESS);
        EXPECT_EQ(verdict_of(peer), 0) << "bit 1: the first send did not fail, 2: the next did";
        hmc_mem_free(ctx, buf);
      },
      {{"FAKEGPU_FAIL_COPY_NTH", "2"}});
}

TEST(StagedScenarios, WhatArrivedStaysReceivableAfterTheSenderClosed) {
  // The peer sends a message and closes. A receive that matches nothing ends with PEER_LOST,
  // without taking the path down: the message that did arrive is still received, whole. Then
  // the context is destroyed promptly (nothing of the ended receive lingers).
  run_pair(
      "hoststage/tcp",
      [&](hmc_context_t, hmc_peer_t peer) {
        const char msg[] = "sent before the close";
        return send_wait(peer, msg, sizeof msg, 2) == HMC_SUCCESS ? 0 : 20;
      },
      [&](hmc_context_t, hmc_peer_t peer) {
        char buf[64] = {};
        size_t got = 0;
        EXPECT_EQ(recv_wait(peer, buf, sizeof buf, 3, &got), HMC_ERR_PEER_LOST) << hmc_last_error();
        EXPECT_EQ(recv_wait(peer, buf, sizeof buf, 2, &got), HMC_SUCCESS) << hmc_last_error();
        EXPECT_STREQ(buf, "sent before the close");
      });
}

TEST(StagedScenarios, PutAndGetMoveLocalDeviceMemoryThroughBounces) {
  // The peer exports host memory; we put from and get into cuda:0 memory, which the path cannot
  // reach: pieces go through bounce buffers. The put's notification comes after all its bytes.
  const size_t region = 3 * kChunk + 64, size = 3 * kChunk + 17, off = 5;
  for (const char* path : {"hoststage/tcp", "hoststage/shm"}) {
    SCOPED_TRACE(path);
    run_pair(
        path,
        [&](hmc_context_t ctx, hmc_peer_t peer) {
          std::vector<uint8_t> host(region, 0x5a);
          hmc_region_t reg;
          if (hmc_mem_register(ctx, host.data(), host.size(),
                               HMC_ACCESS_REMOTE_WRITE | HMC_ACCESS_REMOTE_READ,
                               &reg) != HMC_SUCCESS)
            return 20;
          uint8_t desc[512];
          size_t len = sizeof desc;
          if (hmc_region_pack(reg, desc, &len) != HMC_SUCCESS) return 21;
          if (send_wait(peer, desc, len, 7) != HMC_SUCCESS) return 22;
          uint8_t v = 0;
          hmc_notification_t n;
          if (hmc_notify_wait(ctx, kTimeoutMs, &n) != HMC_SUCCESS || n.value != 42) v |= 1;
          for (size_t i = 0; i < size && !(v & 2); ++i)
            if (host[off + i] != pattern(i, size, 1)) v |= 2;
          if (host[off - 1] != 0x5a || host[off + size] != 0x5a) v |= 4;  // nothing around it
          for (size_t i = 0; i < size; ++i) host[off + i] = pattern(i, size, 2);  // for the get
          uint8_t go = 1;
          if (send_wait(peer, &go, 1, 8) != HMC_SUCCESS) return 23;
          size_t got = 0;
          if (recv_wait(peer, &go, 1, 9, &got) != HMC_SUCCESS) return 24;  // the get is done
          hmc_mem_deregister(reg);
          return report(peer, v);
        },
        [&](hmc_context_t ctx, hmc_peer_t peer) {
          uint8_t desc[512];
          size_t len = 0;
          ASSERT_EQ(recv_wait(peer, desc, sizeof desc, 7, &len), HMC_SUCCESS) << hmc_last_error();
          hmc_remote_t remote;
          ASSERT_EQ(hmc_remote_import(peer, desc, len, &remote), HMC_SUCCESS) << hmc_last_error();
          void* dev;
          ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &dev), HMC_SUCCESS);
          ASSERT_TRUE(fill(ctx, dev, size, 1));
          hmc_request_t r;
          // Out of the region: refused before anything moves.
          EXPECT_EQ(hmc_put(peer, dev, size, remote, region - 10, 0, 0, &r), HMC_ERR_OUT_OF_BOUNDS);
          ASSERT_EQ(hmc_put(peer, dev, size, remote, off, HMC_PUT_NOTIFY, 42, &r), HMC_SUCCESS)
              << hmc_last_error();
          EXPECT_EQ(hmc_request_wait(r, kTimeoutMs, nullptr), HMC_SUCCESS) << hmc_last_error();
          uint8_t go = 0;
          size_t got = 0;
          ASSERT_EQ(recv_wait(peer, &go, 1, 8, &got), HMC_SUCCESS);
          void* back;
          ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &back), HMC_SUCCESS);
          ASSERT_EQ(hmc_get(peer, back, size, remote, off, &r), HMC_SUCCESS) << hmc_last_error();
          EXPECT_EQ(hmc_request_wait(r, kTimeoutMs, &got), HMC_SUCCESS) << hmc_last_error();
          EXPECT_EQ(got, size);
          EXPECT_EQ(check(ctx, back, size, 2), -1);
          // A device pointer with a size past its allocation is refused before anything moves.
          EXPECT_EQ(hmc_send(peer, dev, size + 1, 3, &r), HMC_ERR_OUT_OF_BOUNDS);
          EXPECT_EQ(send_wait(peer, &go, 1, 9), HMC_SUCCESS);
          EXPECT_EQ(verdict_of(peer), 0) << "bit 1: notification, 2: bytes put, 4: bytes around";
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
}

TEST(StagedScenarios, TransferListsMoveLocalDeviceMemoryThroughBounces) {
  // The peer exports host memory; a list writes scattered blocks of our cuda:0 memory into it
  // (pieces through bounce buffers), notifying after the last byte, and another list reads
  // them back into a second cuda:0 buffer in another order.
  const size_t block = kChunk / 2 + 5, blocks = 6, size = block * blocks;
  std::vector<hmc_xfer_desc_t> writes, reads;
  for (size_t k = 0; k < blocks; ++k)
    writes.push_back({k * block, ((k * 5) % blocks) * block, block});
  for (size_t k = 0; k < blocks; ++k) reads.push_back({(blocks - 1 - k) * block, k * block, block});
  for (const char* path : {"hoststage/tcp", "hoststage/shm"}) {
    SCOPED_TRACE(path);
    run_pair(
        path,
        [&](hmc_context_t ctx, hmc_peer_t peer) {
          std::vector<uint8_t> host(size, 0x5a);
          hmc_region_t reg;
          if (hmc_mem_register(ctx, host.data(), host.size(),
                               HMC_ACCESS_REMOTE_WRITE | HMC_ACCESS_REMOTE_READ,
                               &reg) != HMC_SUCCESS)
            return 20;
          uint8_t desc[512];
          size_t len = sizeof desc;
          if (hmc_region_pack(reg, desc, &len) != HMC_SUCCESS) return 21;
          if (send_wait(peer, desc, len, 7) != HMC_SUCCESS) return 22;
          uint8_t v = 0;
          hmc_notification_t n;
          if (hmc_notify_wait(ctx, kTimeoutMs, &n) != HMC_SUCCESS || n.value != 43) v |= 1;
          for (const auto& d : writes)
            for (size_t j = 0; j < d.size && !(v & 2); ++j)
              if (host[d.remote_offset + j] != pattern(d.local_offset + j, size, 1)) v |= 2;
          uint8_t go = 1;
          if (send_wait(peer, &go, 1, 8) != HMC_SUCCESS) return 23;
          size_t got = 0;
          if (recv_wait(peer, &go, 1, 9, &got) != HMC_SUCCESS) return 24;  // the read is done
          hmc_mem_deregister(reg);
          return report(peer, v);
        },
        [&](hmc_context_t ctx, hmc_peer_t peer) {
          uint8_t desc[512];
          size_t len = 0;
          ASSERT_EQ(recv_wait(peer, desc, sizeof desc, 7, &len), HMC_SUCCESS) << hmc_last_error();
          hmc_remote_t remote;
          ASSERT_EQ(hmc_remote_import(peer, desc, len, &remote), HMC_SUCCESS) << hmc_last_error();
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
          uint8_t go = 0;
          ASSERT_EQ(recv_wait(peer, &go, 1, 8, &got), HMC_SUCCESS);
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
          EXPECT_EQ(send_wait(peer, &go, 1, 9), HMC_SUCCESS);
          EXPECT_EQ(verdict_of(peer), 0) << "bit 1: notification, 2: bytes written";
          hmc_mem_deregister(src);
          hmc_mem_deregister(dst);
          hmc_remote_release(remote);
          hmc_mem_free(ctx, dev);
          hmc_mem_free(ctx, back);
        });
  }
}

// ---- device IPC: cuda:0 in both processes ----------------------------------------------------

hmc_peer_info_t peer_info(hmc_peer_t peer) {
  hmc_peer_info_t info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(hmc_peer_info(peer, &info), HMC_SUCCESS) << hmc_last_error();
  return info;
}

// Receives rounds first..last of `size` bytes on tag into dev and checks each against its
// round's pattern. Returns verdict bits: 1 a message not received whole, 2 bytes that differ.
uint8_t receive_rounds(hmc_context_t ctx, hmc_peer_t peer, void* dev, size_t size, uint64_t tag,
                       int first, int last) {
  uint8_t v = 0;
  for (int round = first; round <= last; ++round) {
    size_t got = 0;
    if (recv_wait(peer, dev, size, tag, &got) != HMC_SUCCESS || got != size)
      v |= 1;
    else if (check(ctx, dev, size, round) != -1)
      v |= 2;
  }
  return v;
}

// Sends rounds first..last of `size` bytes from buf on tag, each filled with its pattern.
void send_rounds(hmc_context_t ctx, hmc_peer_t peer, void* buf, size_t size, uint64_t tag,
                 int first, int last) {
  for (int round = first; round <= last; ++round) {
    ASSERT_TRUE(fill(ctx, buf, size, round));
    ASSERT_EQ(send_wait(peer, buf, size, tag), HMC_SUCCESS) << hmc_last_error();
  }
}

TEST(SharedBounces, OffOnOneSideSendsThePiecesThroughTheTransport) {
  // cuda:0 here, hip:0 in the peer, which turned shared bounces off: its messages and ours go
  // through the transport, byte-exact, and none is counted as read from shared buffers.
  const size_t size = 2 * kChunk + 9;
  run_pair(
      "hoststage/shm",
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* dev;
        if (hmc_mem_alloc(ctx, "hip:0", size, &dev) != HMC_SUCCESS) return 20;
        uint8_t v = 0;
        size_t got = 0;
        if (recv_wait(peer, dev, size, 1, &got) != HMC_SUCCESS || got != size)
          v |= 1;
        else if (check(ctx, dev, size, 1) != -1)
          v |= 2;
        if (send_wait(peer, dev, size, 2) != HMC_SUCCESS) v |= 4;
        hmc_mem_free(ctx, dev);
        return report(peer, v);
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
        EXPECT_EQ(verdict_of(peer), 0) << "bit 1/2: the peer's receive, 4: its send";
        hmc_peer_info_t info = peer_info(peer);
        EXPECT_EQ(info.shared_staged_messages, 0u);
        EXPECT_EQ(info.staged_transfers, 2u);  // the two messages (the verdict is host memory)
        hmc_mem_free(ctx, buf);
        hmc_mem_free(ctx, back);
      },
      {{"HMC_STAGE_SHARED", "0"}});
}

TEST(DeviceIpc, HostReceiveBufferGetsThePiecesAndIpcStaysOn) {
  // The receiver's buffer decides: host memory asks for the pieces (version 1), device memory
  // of the same vendor copies by IPC; the pair keeps IPC for later messages.
  const size_t size = 3 * kChunk + 11;
  run_pair(
      "hoststage/shm",
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        std::vector<uint8_t> host(size);
        void* dev;
        if (hmc_mem_alloc(ctx, "cuda:0", size, &dev) != HMC_SUCCESS) return 20;
        size_t got = 0;
        uint8_t v = 0;
        if (recv_wait(peer, host.data(), size, 1, &got) != HMC_SUCCESS || got != size)
          v |= 1;
        else if (check(ctx, host.data(), size, 1) != -1)
          v |= 2;
        if (recv_wait(peer, dev, size, 1, &got) != HMC_SUCCESS || got != size)
          v |= 4;
        else if (check(ctx, dev, size, 2) != -1)
          v |= 8;
        hmc_mem_free(ctx, dev);
        return report(peer, v);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &buf), HMC_SUCCESS);
        for (int round : {1, 2}) {
          ASSERT_TRUE(fill(ctx, buf, size, round));
          ASSERT_EQ(send_wait(peer, buf, size, 1), HMC_SUCCESS) << hmc_last_error();
        }
        EXPECT_EQ(verdict_of(peer), 0) << "bits 1/2: host receive, 4/8: device receive";
        hmc_peer_info_t info = peer_info(peer);
        EXPECT_STREQ(info.device_ipc, "cuda");
        EXPECT_EQ(info.ipc_messages, 1u);
        EXPECT_EQ(info.staged_transfers, 1u);
        hmc_mem_free(ctx, buf);
      },
      {}, "cuda:0");
}

TEST(DeviceIpc, CostModelPrefersSharedBouncesWhenDeviceCopiesAreSlow) {
  // Same vendor on both sides, so device IPC is open, but the receiver's device-to-device copies
  // run at 5 MB/s while its copies to and from host memory are unlimited (as between two GPUs
  // without a peer link). The figures it measured at connect (the sender here keeps the default
  // ones) make the sender's cost model choose shared bounces; the bytes arrive intact. The gap is
  // wide on purpose: on a machine whose cores are all busy (CI running other two-process tests
  // beside this one) the emulated host copies were measured as slow as 100 MB/s, which with
  // device copies at 50 MB/s made IPC the cheaper way.
  const size_t size = 3 * kChunk + 11;
  run_pair(
      "hoststage/shm",
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* dev;
        if (hmc_mem_alloc(ctx, "cuda:0", size, &dev) != HMC_SUCCESS) return 20;
        uint8_t v = receive_rounds(ctx, peer, dev, size, 1, 1, 2);
        hmc_device_info_t info{};
        info.struct_size = sizeof info;
        int n = 0;
        hmc_device_count(ctx, &n);
        for (int i = 0; i < n; ++i)
          if (hmc_device_info(ctx, i, &info) == HMC_SUCCESS && std::string(info.name) == "cuda:0" &&
              (info.copy_d2d_MBps == 0 || info.copy_d2d_MBps > 10 ||
               std::string(info.copy_basis) != "measured"))
            v |= 4;  // the measured device-to-device rate is what the fake was told
        hmc_mem_free(ctx, dev);
        return report(peer, v);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &buf), HMC_SUCCESS);
        EXPECT_STREQ(peer_info(peer).device_ipc, "cuda");  // open, but not chosen
        send_rounds(ctx, peer, buf, size, 1, 1, 2);
        EXPECT_EQ(verdict_of(peer), 0)
            << "bit 1: not received whole, 2: bytes differ, 4: copy figures not as set";
        hmc_peer_info_t info = peer_info(peer);
        EXPECT_EQ(info.ipc_messages, 0u);
        EXPECT_EQ(info.shared_staged_messages, 2u);
        hmc_mem_free(ctx, buf);
      },
      {{"FAKEGPU_CUDA_D2D_BANDWIDTH_MBPS", "5"}, {"HMC_DEVICE_COPY_CALIBRATE", "1"}}, "cuda:0");
}

TEST(DeviceIpc, ReceiverWhoseBufferCannotTakeIpcReadsSharedBouncesInstead) {
  // The receiver has cuda and hip devices, so device IPC is agreed for cuda; the sender's cuda
  // memory goes out with a header offering IPC and shared bounces (version 4). Into the
  // receiver's cuda:0 it crosses by IPC; into its hip:0 (IPC cannot map cuda memory there) the
  // pieces are read out of the sender's shared bounces; into host memory they come through the
  // transport. Every message arrives intact.
  const size_t size = 3 * kChunk + 17;
  const std::string hip_lib = std::string(FAKEGPU_DIR) + "/hip6/libamdhip64.so.6";
  run_pair(
      "hoststage/shm",
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void *hip, *cuda;
        std::vector<uint8_t> host(size);
        if (hmc_mem_alloc(ctx, "hip:0", size, &hip) != HMC_SUCCESS) return 20;
        if (hmc_mem_alloc(ctx, "cuda:0", size, &cuda) != HMC_SUCCESS) return 21;
        uint8_t v = receive_rounds(ctx, peer, hip, size, 1, 1, 1);
        v |= receive_rounds(ctx, peer, cuda, size, 1, 2, 2) << 2;
        v |= receive_rounds(ctx, peer, host.data(), size, 1, 3, 3) << 4;
        hmc_mem_free(ctx, hip);
        hmc_mem_free(ctx, cuda);
        return report(peer, v);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &buf), HMC_SUCCESS);
        EXPECT_STREQ(peer_info(peer).device_ipc, "cuda");
        send_rounds(ctx, peer, buf, size, 1, 1, 3);
        EXPECT_EQ(verdict_of(peer), 0)
            << "bits 1/2: into hip:0, 4/8: into cuda:0, 16/32: into host (not whole / bytes "
               "differ)";
        hmc_peer_info_t info = peer_info(peer);
        EXPECT_EQ(info.ipc_messages, 1u);            // into cuda:0
        EXPECT_EQ(info.shared_staged_messages, 1u);  // into hip:0
        EXPECT_EQ(info.staged_transfers, 2u);        // into hip:0 and into host memory
        hmc_mem_free(ctx, buf);
      },
      {{"HMC_DEVICE_PLUGINS", "cuda,hip"}, {"HMC_HIP_LIBRARY", hip_lib.c_str()}}, "cuda:0");
}

TEST(DeviceIpc, PeerThatCannotMapGetsPiecesFromThenOn) {
  // The receiver's runtime refuses every handle (as across containers): the first message is
  // sent in pieces after the refusal, the next ones without trying IPC again.
  const size_t size = 2 * kChunk + 1;
  run_pair(
      "hoststage/tcp",
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* dev;
        if (hmc_mem_alloc(ctx, "cuda:0", size, &dev) != HMC_SUCCESS) return 20;
        uint8_t v = receive_rounds(ctx, peer, dev, size, 1, 1, 3);
        hmc_mem_free(ctx, dev);
        return report(peer, v);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &buf), HMC_SUCCESS);
        EXPECT_STREQ(peer_info(peer).device_ipc, "cuda");
        send_rounds(ctx, peer, buf, size, 1, 1, 3);
        EXPECT_EQ(verdict_of(peer), 0) << "bit 1: not received whole, 2: bytes differ";
        hmc_peer_info_t info = peer_info(peer);
        EXPECT_STREQ(info.device_ipc, "");
        EXPECT_EQ(info.ipc_messages, 0u);
        EXPECT_EQ(info.staged_transfers, 3u);
        hmc_mem_free(ctx, buf);
      },
      {{"FAKEGPU_FAIL_IPC_OPEN", "1"}}, "cuda:0");
}

TEST(DeviceIpc, TruncationAndACopyFailureEndOnlyTheirReceive) {
  // Message 1 is larger than its buffer: TRUNCATED. Message 2's device-to-device copy fails on
  // the receiver (its 3rd copy; piece 0 of messages 1 and 2 are the others): that receive
  // fails, the send does not. Message 3 arrives whole.
  const size_t size = 3 * kChunk + 5;
  run_pair(
      "hoststage/shm",
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* dev;
        if (hmc_mem_alloc(ctx, "cuda:0", size, &dev) != HMC_SUCCESS) return 20;
        size_t got = 0;
        uint8_t v = 0;
        if (recv_wait(peer, dev, 2 * kChunk, 1, &got) != HMC_ERR_TRUNCATED) v |= 1;
        hmc_status_t st = recv_wait(peer, dev, size, 1, &got);
        if (st == HMC_SUCCESS || st == HMC_ERR_TRUNCATED) v |= 2;
        if (recv_wait(peer, dev, size, 1, &got) != HMC_SUCCESS || got != size)
          v |= 4;
        else if (check(ctx, dev, size, 3) != -1)
          v |= 8;
        hmc_mem_free(ctx, dev);
        return report(peer, v);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* buf;
        ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &buf), HMC_SUCCESS);
        send_rounds(ctx, peer, buf, size, 1, 1, 3);
        EXPECT_EQ(verdict_of(peer), 0)
            << "bit 1: not truncated, 2: failed copy not reported, 4/8: third message";
        EXPECT_EQ(peer_info(peer).ipc_messages, 3u);  // the sender's view: all three went
        hmc_mem_free(ctx, buf);
      },
      {{"FAKEGPU_FAIL_COPY_NTH", "3"}}, "cuda:0");
}

TEST(DeviceIpc, NewAllocationAtAFreedAddressIsNotReadThroughAStaleMapping) {
  // The receiver keeps mappings of the sender's allocations for later messages. The sender frees
  // its buffer and allocates again (the emulation may hand back the same address and file
  // descriptor): the next message must carry the new allocation's bytes.
  const size_t size = 2 * kChunk + 3;
  run_pair(
      "hoststage/shm",
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        void* dev;
        if (hmc_mem_alloc(ctx, "cuda:0", size, &dev) != HMC_SUCCESS) return 20;
        uint8_t v = receive_rounds(ctx, peer, dev, size, 1, 1, 4);
        hmc_mem_free(ctx, dev);
        return report(peer, v);
      },
      [&](hmc_context_t ctx, hmc_peer_t peer) {
        for (int round = 1; round <= 4; ++round) {
          void* buf;
          ASSERT_EQ(hmc_mem_alloc(ctx, "cuda:0", size, &buf), HMC_SUCCESS);
          send_rounds(ctx, peer, buf, size, 1, round, round);
          ASSERT_EQ(hmc_mem_free(ctx, buf), HMC_SUCCESS);
        }
        EXPECT_EQ(verdict_of(peer), 0) << "bit 1: not received whole, 2: stale bytes";
        EXPECT_EQ(peer_info(peer).ipc_messages, 4u);
      },
      {}, "cuda:0");
}

TEST(StagedLarge, QuarterGibibyteBothWaysByteExact) {
  // 256 MiB and 3 bytes (1025 pieces) each way, cuda <-> hip over shared memory and
  // mlu <-> musa over TCP.
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "half a minute or more under AddressSanitizer; the normal build runs it";
#endif
  const size_t big = (256u << 20) + 3;
  {
    SCOPED_TRACE("cuda:0 <-> hip:0 over hoststage/shm");
    echo_sizes(Pair{"cuda:0", "hip:0", "hoststage/shm"}, {big});
  }
  {
    SCOPED_TRACE("mlu:0 <-> musa:0 over hoststage/tcp");
    echo_sizes(Pair{"mlu:0", "musa:0", "hoststage/tcp"}, {big});
  }
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

}  // namespace
