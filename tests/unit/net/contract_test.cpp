// The contract of hmc/plugin/net.h, run over every net plugin configuration (configs.cpp):
// tagged messages (sizes, ordering per tag, unexpected arrival, truncation with the sent length,
// zero bytes, cancel, many in flight, huge), one-sided operations (byte-exact put/get, bounds and
// access refusal), peer loss and close (messages kept, pending requests ended), wait_fd/arm,
// connection handles, device properties and declared settings.
#include <signal.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "suite.h"

namespace net_test {
namespace {

// The configuration's eager limit where it is known, else fallback.
size_t eager_or(const NetConfig& c, size_t fallback) {
  return c.eager != 0 ? c.eager : fallback;
}

// ---------------------------------------------------------------------------------------------
// Two processes

class NetPair : public NetTest {};

// Scenarios where the peer closes its endpoint (skipped, before the plugin is even loaded,
// where such a close is not seen).
class NetPairPeerCloseSeen : public NetPair {
 protected:
  void SetUp() override {
    require_no(kPeerCloseUnseen);
    if (!IsSkipped()) NetPair::SetUp();
  }
};

TEST_P(NetPair, SendRecvSizesBothDirections) {
  std::vector<size_t> sizes = {
      0, 1, 8, 64, 65, 4096, 4097, 64u << 10, (1u << 20) + 7, (4u << 20) + 3, config().largest};
  if (const size_t e = config().eager) sizes.insert(sizes.end(), {e - 1, e, e + 1});
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  run(
      [&](Side& s) {
        ASSERT_NO_FATAL_FAILURE(receive_sizes(s, sizes, 100, 1000));
        ASSERT_NO_FATAL_FAILURE(send_sizes(s, sizes, 200, 2000));
      },
      [&](Side& s) {
        ASSERT_NO_FATAL_FAILURE(send_sizes(s, sizes, 100, 1000));
        ASSERT_NO_FATAL_FAILURE(receive_sizes(s, sizes, 200, 2000));
      });
}

// Messages with the same tag match receives in send order, small, eager-sized and large mixed:
// receives posted before the messages (tag B), and messages that arrived before their receives
// (tag A, known to be here once the marker sent after them is). Receives for other tags posted
// in reverse order still get their own message.
TEST_P(NetPair, TagOrdering) {
  const size_t e = eager_or(config(), 8192);
  const size_t large = std::max<size_t>(3 * e, 256u << 10);
  const size_t cap = large + 64;
  constexpr int kN = 30;
  constexpr uint64_t kTagA = 5, kTagB = 6, kMarker = 7;
  auto size_of = [&](int k) -> size_t {
    return k % 3 == 0 ? large + k : (k % 3 == 1 ? 16u + k : e);
  };
  const size_t rev_large = std::max<size_t>(2 * e, 300u << 10);
  auto rev_size = [&](int t) -> size_t { return t % 2 ? rev_large : 100u + t; };
  run(
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs(kN);
        std::vector<hmc_net_request_t*> b_reqs, a_reqs;
        for (int k = 1; k < kN; k += 2) {
          bufs[k].resize(cap);
          b_reqs.push_back(s.irecv(bufs[k].data(), cap, kTagB));
          ASSERT_NE(b_reqs.back(), nullptr);
        }
        ASSERT_TRUE(s.signal());
        std::vector<size_t> bytes;
        auto st = s.wait_all(b_reqs, &bytes);
        for (size_t j = 0; j < b_reqs.size(); ++j) {
          int k = static_cast<int>(2 * j + 1);
          EXPECT_EQ(st[j], HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(bytes[j], size_of(k)) << "B receive " << j << " got the wrong message";
          EXPECT_EQ(first_mismatch(bufs[k].data(), size_of(k), 500 + k), -1) << "message " << k;
        }
        std::vector<uint8_t> marker(8);
        ASSERT_EQ(s.wait(s.irecv(marker.data(), 8, kMarker)), HMC_PLUGIN_SUCCESS);
        for (int k = 0; k < kN; k += 2) {
          bufs[k].resize(cap);
          a_reqs.push_back(s.irecv(bufs[k].data(), cap, kTagA));
          ASSERT_NE(a_reqs.back(), nullptr);
        }
        st = s.wait_all(a_reqs, &bytes);
        for (size_t j = 0; j < a_reqs.size(); ++j) {
          int k = static_cast<int>(2 * j);
          EXPECT_EQ(st[j], HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(bytes[j], size_of(k)) << "unexpected A receive " << j << " got the wrong "
                                          << "message";
          EXPECT_EQ(first_mismatch(bufs[k].data(), size_of(k), 500 + k), -1) << "message " << k;
        }
        // Receives for tags 30..21 posted in reverse; the peer sends 21..30.
        std::vector<std::vector<uint8_t>> r2(10, std::vector<uint8_t>(rev_large));
        std::vector<hmc_net_request_t*> reqs2;
        for (int t = 30; t >= 21; --t) {
          reqs2.push_back(s.irecv(r2[30 - t].data(), rev_large, t));
          ASSERT_NE(reqs2.back(), nullptr);
        }
        ASSERT_TRUE(s.signal());
        st = s.wait_all(reqs2, &bytes);
        for (int t = 30; t >= 21; --t) {
          size_t i = static_cast<size_t>(30 - t);
          EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(bytes[i], rev_size(t)) << "tag " << t;
          EXPECT_EQ(first_mismatch(r2[i].data(), rev_size(t), 900 + t), -1) << "tag " << t;
        }
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs(kN);
        std::vector<hmc_net_request_t*> reqs;
        ASSERT_TRUE(s.await());
        for (int k = 0; k < kN; ++k) {
          bufs[k].resize(size_of(k));
          fill(bufs[k].data(), size_of(k), 500 + k);
          reqs.push_back(s.isend(bufs[k].data(), size_of(k), k % 2 ? kTagB : kTagA));
          ASSERT_NE(reqs.back(), nullptr);
        }
        uint8_t marker[8] = {};
        reqs.push_back(s.isend(marker, 8, kMarker));
        ASSERT_NE(reqs.back(), nullptr);
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        std::vector<std::vector<uint8_t>> b2(31);
        std::vector<hmc_net_request_t*> reqs2;
        ASSERT_TRUE(s.await());
        for (int t = 21; t <= 30; ++t) {
          b2[t].resize(rev_size(t));
          fill(b2[t].data(), rev_size(t), 900 + t);
          reqs2.push_back(s.isend(b2[t].data(), rev_size(t), t));
          ASSERT_NE(reqs2.back(), nullptr);
        }
        for (auto st : s.wait_all(reqs2)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.await());
      });
}

// Messages sent before any receive was posted (an eager one buffered, a large one waiting in
// rendezvous) reach the receives posted later intact, and no further.
TEST_P(NetPair, UnexpectedMessages) {
  const size_t small = eager_or(config(), 1000), large = (4u << 20) + 3;
  run(
      [&](Side& s) {
        std::vector<uint8_t> marker(8), sb(small), lb(large + 100, 0xcd);
        // The marker is sent last on the same endpoint: once it is here, the other two were
        // received as unexpected messages (or announced, if large).
        ASSERT_EQ(s.wait(s.irecv(marker.data(), marker.size(), 12)), HMC_PLUGIN_SUCCESS);
        size_t b1 = 0, b2 = 0;
        hmc_net_request_t* rl = s.irecv(lb.data(), lb.size(), 11);
        hmc_net_request_t* rs = s.irecv(sb.data(), sb.size(), 10);
        ASSERT_NE(rl, nullptr);
        ASSERT_NE(rs, nullptr);
        EXPECT_EQ(s.wait(rs, &b1), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(s.wait(rl, &b2), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(b1, small);
        EXPECT_EQ(b2, large);
        EXPECT_EQ(first_mismatch(sb.data(), small, 10), -1);
        EXPECT_EQ(first_mismatch(lb.data(), large, 11), -1);
        EXPECT_EQ(lb[large], 0xcd) << "the receive wrote past the message";
        EXPECT_EQ(first_mismatch(marker.data(), 8, 12), -1);
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        std::vector<uint8_t> sb(small), lb(large), marker(8);
        fill(sb.data(), small, 10);
        fill(lb.data(), large, 11);
        fill(marker.data(), 8, 12);
        std::vector<hmc_net_request_t*> reqs = {s.isend(sb.data(), small, 10),
                                                s.isend(lb.data(), large, 11),
                                                s.isend(marker.data(), 8, 12)};
        for (auto* r : reqs) ASSERT_NE(r, nullptr);
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.await());
      });
}

// A receive buffer smaller than the message ends the receive with TRUNCATED, reporting the
// length that was sent; the buffer holds the message's first bytes and nothing past it is
// written; the send succeeds, and later messages still arrive intact. Receives posted first,
// and receives of messages that arrived first.
TEST_P(NetPair, Truncation) {
  const size_t e = eager_or(config(), 8192);
  struct Case {
    uint64_t tag;
    size_t msg;
    size_t buf;
  };
  const std::vector<Case> posted = {{1, 100, 50},
                                    {2, 1u << 20, 1000},
                                    {3, 300u << 10, 0},
                                    {4, e, e / 2},
                                    {5, 300u << 10, 300u << 10},
                                    {6, 5, 5},
                                    {11, 64u << 10, 0},
                                    {12, 2 * e, 0}};
  const std::vector<Case> late = {{7, 200, 10}, {9, 1u << 20, 10}, {13, 4 * e, 10}};
  const size_t after = 3u << 20;
  const bool prefix_kept = !config().lacks(kTruncatedDataUnset);
  run(
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs;
        std::vector<hmc_net_request_t*> reqs;
        for (const Case& c : posted) {
          bufs.emplace_back(c.buf + 64, 0xab);
          reqs.push_back(s.irecv(bufs.back().data(), c.buf, c.tag));
          ASSERT_NE(reqs.back(), nullptr);
        }
        ASSERT_TRUE(s.signal());
        std::vector<size_t> bytes;
        auto st = s.wait_all(reqs, &bytes);
        for (size_t i = 0; i < posted.size(); ++i) {
          const Case& c = posted[i];
          bool trunc = c.msg > c.buf;
          EXPECT_EQ(st[i], trunc ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS)
              << "tag " << c.tag;
          EXPECT_EQ(bytes[i], c.msg) << "tag " << c.tag << ": a truncated receive reports the "
                                     << "length that was sent";
          if (!trunc || prefix_kept) {
            EXPECT_EQ(first_mismatch(bufs[i].data(), std::min(c.msg, c.buf), 300 + c.tag), -1)
                << "tag " << c.tag;
          }
          for (size_t k = c.buf; k < bufs[i].size(); ++k)
            ASSERT_EQ(bufs[i][k], 0xab) << "tag " << c.tag << " wrote past its buffer at " << k;
        }
        std::vector<uint8_t> marker(8);
        ASSERT_EQ(s.wait(s.irecv(marker.data(), 8, 8)), HMC_PLUGIN_SUCCESS);
        for (const Case& c : late) {
          std::vector<uint8_t> b(c.buf + 16, 0xab);
          size_t n = 0;
          EXPECT_EQ(s.wait(s.irecv(b.data(), c.buf, c.tag), &n), HMC_PLUGIN_ERR_TRUNCATED)
              << "tag " << c.tag;
          EXPECT_EQ(n, c.msg) << "tag " << c.tag << ": the length that was sent";
          if (prefix_kept) {
            EXPECT_EQ(first_mismatch(b.data(), c.buf, 300 + c.tag), -1) << "tag " << c.tag;
          }
          for (size_t k = c.buf; k < b.size(); ++k)
            ASSERT_EQ(b[k], 0xab) << "tag " << c.tag << " wrote past its buffer at " << k;
        }
        // The connection is still in step.
        std::vector<uint8_t> a(after);
        size_t n = 0;
        EXPECT_EQ(s.wait(s.irecv(a.data(), a.size(), 10), &n), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(n, after);
        EXPECT_EQ(first_mismatch(a.data(), after, 310), -1);
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs;
        std::vector<hmc_net_request_t*> reqs;
        bufs.reserve(posted.size() + late.size() + 2);
        auto send = [&](uint64_t tag, size_t n) {
          bufs.emplace_back(std::max<size_t>(n, 1));
          fill(bufs.back().data(), n, 300 + tag);
          reqs.push_back(s.isend(bufs.back().data(), n, tag));
          ASSERT_NE(reqs.back(), nullptr);
        };
        ASSERT_TRUE(s.await());
        for (const Case& c : posted) send(c.tag, c.msg);
        for (const Case& c : late) send(c.tag, c.msg);
        send(8, 8);
        send(10, after);
        auto st = s.wait_all(reqs);
        for (size_t i = 0; i < st.size(); ++i) EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS) << "send " << i;
        ASSERT_TRUE(s.await());
      });
}

// An unmatched receive can be cancelled: it ends CANCELLED with 0 bytes, takes no message and
// leaves its buffer alone. Sends cannot be cancelled: they end normally.
TEST_P(NetPair, CancelUnmatchedReceive) {
  const size_t big = std::max<size_t>(4 * config().eager, 1u << 20);
  run(
      [&](Side& s) {
        std::vector<uint8_t> b1(64), b3(64);
        hmc_net_request_t* r1 = s.irecv(b1.data(), 64, 77);
        ASSERT_NE(r1, nullptr);
        ASSERT_EQ(s.t()->cancel(r1), HMC_PLUGIN_SUCCESS);
        size_t n = 99;
        EXPECT_EQ(s.wait(r1, &n, 5), HMC_PLUGIN_ERR_CANCELLED);
        EXPECT_EQ(n, 0u);
        // A message with the cancelled tag goes to the next receive, not the cancelled one.
        hmc_net_request_t* r3 = s.irecv(b3.data(), 64, 77);
        ASSERT_NE(r3, nullptr);
        std::vector<uint8_t> out(big);
        fill(out.data(), out.size(), 79);
        hmc_net_request_t* snd = s.isend(out.data(), out.size(), 79);
        ASSERT_NE(snd, nullptr);
        ASSERT_TRUE(s.signal());
        EXPECT_EQ(s.wait(r3, &n), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(n, 64u);
        EXPECT_EQ(first_mismatch(b3.data(), 64, 77), -1);
        EXPECT_EQ(b1, std::vector<uint8_t>(64, 0)) << "the cancelled receive's buffer was written";
        EXPECT_EQ(s.t()->cancel(snd), HMC_PLUGIN_ERR_NOT_SUPPORTED);
        EXPECT_EQ(s.wait(snd), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.await());
      },
      [&](Side& s) {
        std::vector<uint8_t> m(64), in(big);
        fill(m.data(), 64, 77);
        ASSERT_TRUE(s.await());
        EXPECT_EQ(s.wait(s.isend(m.data(), 64, 77)), HMC_PLUGIN_SUCCESS);
        size_t n = 0;
        EXPECT_EQ(s.wait(s.irecv(in.data(), in.size(), 79), &n), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(n, in.size());
        EXPECT_EQ(first_mismatch(in.data(), in.size(), 79), -1);
        ASSERT_TRUE(s.signal());
      });
}

// 256 sends and 256 receives in flight in each direction at once, mixed sizes (zero, eager,
// rendezvous), receives posted in reverse tag order.
TEST_P(NetPair, ManyRequestsInFlight) {
  const size_t span = config().eager != 0 ? 3 * config().eager : 200u << 10;
  constexpr int kN = 256;
  auto size_of = [span](int i) -> size_t {
    return i % 17 == 0 ? 0 : (static_cast<size_t>(i) * 7919) % span;
  };
  auto both = [&](Side& s, uint64_t my_seed, uint64_t peer_seed) {
    std::vector<std::vector<uint8_t>> rb(kN), sb(kN);
    std::vector<hmc_net_request_t*> reqs;
    for (int i = kN - 1; i >= 0; --i) {
      rb[i].resize(std::max<size_t>(size_of(i), 1));
      reqs.push_back(s.irecv(rb[i].data(), size_of(i), static_cast<uint64_t>(i)));
      ASSERT_NE(reqs.back(), nullptr) << s.last_post();
    }
    ASSERT_TRUE(s.signal());
    ASSERT_TRUE(s.await());
    for (int i = 0; i < kN; ++i) {
      sb[i].resize(std::max<size_t>(size_of(i), 1));
      fill(sb[i].data(), size_of(i), my_seed + i);
      reqs.push_back(s.isend(sb[i].data(), size_of(i), static_cast<uint64_t>(i)));
      ASSERT_NE(reqs.back(), nullptr) << s.last_post();
    }
    std::vector<size_t> bytes;
    auto st = s.wait_all(reqs, &bytes);
    for (size_t j = 0; j < reqs.size(); ++j)
      EXPECT_EQ(st[j], HMC_PLUGIN_SUCCESS) << "request " << j;
    for (int i = 0; i < kN; ++i) {
      EXPECT_EQ(bytes[kN - 1 - i], size_of(i));
      EXPECT_EQ(first_mismatch(rb[i].data(), size_of(i), peer_seed + i), -1) << "message " << i;
    }
    // Both sides are done before either closes.
    ASSERT_TRUE(s.signal());
    ASSERT_TRUE(s.await());
  };
  run([&](Side& s) { both(s, 10000, 20000); }, [&](Side& s) { both(s, 20000, 10000); });
}

// Buffers passed without an mr whose memory is unmapped and mapped again at the same address
// (munmap then mmap, free then malloc of a large block) between two transfers: the second
// transfer moves the new memory's bytes, on both ends of a message and of a put and a get. A
// plugin that keeps registrations by address and misses the unmap moves the old pages instead.
TEST_P(NetPair, BuffersRemappedBetweenTransfers) {
  constexpr size_t kLen = (1u << 20) + 4096 + 3;  // rendezvous-sized everywhere, several pages
  constexpr size_t kBlock = 8u << 20;             // malloc serves it with its own mapping
  auto map = [](void* hint) {
    void* p =
        mmap(hint, kLen, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | (hint != nullptr ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  };
  // The same address again where the kernel grants it (the point of the test), else another.
  auto remap = [&](uint8_t* old) {
    munmap(old, kLen);
    uint8_t* p = map(old);
    return p != nullptr ? p : map(nullptr);
  };
  run(
      [&](Side& s) {
        // Receives into remapped memory.
        uint8_t* r = map(nullptr);
        ASSERT_NE(r, nullptr);
        std::memset(r, 0, kLen);
        ASSERT_TRUE(s.signal());
        ASSERT_EQ(s.wait(s.irecv(r, kLen, 1)), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(r, kLen, 31), -1) << "first message";
        r = remap(r);
        ASSERT_NE(r, nullptr);
        ASSERT_TRUE(s.signal());
        ASSERT_EQ(s.wait(s.irecv(r, kLen, 2)), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(r, kLen, 32), -1) << "message into the remapped receive buffer";
        for (uint64_t tag : {3, 4}) {
          auto* m = static_cast<uint8_t*>(std::malloc(kBlock));
          ASSERT_NE(m, nullptr);
          ASSERT_TRUE(s.signal());
          ASSERT_EQ(s.wait(s.irecv(m, kBlock, tag)), HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(first_mismatch(m, kBlock, 30 + tag), -1) << "message " << tag;
          std::free(m);
        }
        // The peer puts into and gets from this region.
        std::vector<uint8_t> region(kLen);
        std::vector<uint8_t> rkey;
        hmc_net_mr_t* mr = reg(s, region.data(), kLen, HMC_NET_ACCESS_LOCAL | kRemoteRw, &rkey);
        ASSERT_NE(mr, nullptr);
        send_region(s, reinterpret_cast<uintptr_t>(region.data()), rkey);
        for (uint64_t seed : {41, 42}) {
          ASSERT_TRUE(s.await());  // its put completed
          EXPECT_EQ(first_mismatch(region.data(), kLen, seed), -1) << "put " << seed;
          ASSERT_TRUE(s.signal());
        }
        for (uint64_t seed : {43, 44}) {
          fill(region.data(), kLen, seed);
          ASSERT_TRUE(s.signal());
          ASSERT_TRUE(s.await());  // its get completed
        }
        EXPECT_EQ(deregister_memory(s.t(), s.ctx(), s.dev(), mr), HMC_PLUGIN_SUCCESS);
        munmap(r, kLen);
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        uint8_t* b = map(nullptr);
        ASSERT_NE(b, nullptr);
        fill(b, kLen, 31);
        ASSERT_TRUE(s.await());
        ASSERT_EQ(s.wait(s.isend(b, kLen, 1)), HMC_PLUGIN_SUCCESS);
        b = remap(b);
        ASSERT_NE(b, nullptr);
        fill(b, kLen, 32);
        ASSERT_TRUE(s.await());
        ASSERT_EQ(s.wait(s.isend(b, kLen, 2)), HMC_PLUGIN_SUCCESS);
        for (uint64_t tag : {3, 4}) {
          auto* m = static_cast<uint8_t*>(std::malloc(kBlock));
          ASSERT_NE(m, nullptr);
          fill(m, kBlock, 30 + tag);
          ASSERT_TRUE(s.await());
          ASSERT_EQ(s.wait(s.isend(m, kBlock, tag)), HMC_PLUGIN_SUCCESS);
          std::free(m);
        }
        RemoteRegion rr;
        hmc_net_rkey_t* k = recv_key(s, &rr);
        ASSERT_NE(k, nullptr);
        for (uint64_t seed : {41, 42}) {
          if (seed == 42) b = remap(b);
          ASSERT_NE(b, nullptr);
          fill(b, kLen, seed);
          EXPECT_EQ(put(s, b, kLen, rr.base, k), HMC_PLUGIN_SUCCESS);
          ASSERT_TRUE(s.signal());
          ASSERT_TRUE(s.await());  // the owner checked it
        }
        for (uint64_t seed : {43, 44}) {
          if (seed == 44) b = remap(b);
          ASSERT_NE(b, nullptr);
          std::memset(b, 0, kLen);
          ASSERT_TRUE(s.await());  // the owner filled the region
          EXPECT_EQ(get(s, b, kLen, rr.base, k), HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(first_mismatch(b, kLen, seed), -1) << "get " << seed;
          ASSERT_TRUE(s.signal());
        }
        EXPECT_EQ(s.t()->rkey_release(k), HMC_PLUGIN_SUCCESS);
        munmap(b, kLen);
        ASSERT_TRUE(s.await());
      });
}

// Puts land byte-exact and are in place when they complete (the owner checks right after the
// initiator's signal, without a round trip of its own); gets read them back. Several puts in
// flight at once, and zero-length puts and gets at both ends of the region.
TEST_P(NetPair, PutGetByteExact) {
  constexpr size_t kRegion = 16u << 20;
  constexpr size_t kOffA = 5, kLenA = 100;
  constexpr size_t kOffB = (1u << 20) + 1, kLenB = (8u << 20) + 3;
  constexpr size_t kOffC = 12u << 20, kLenC = 4096;
  run(
      [&](Side& s) {
        std::vector<uint8_t> region(kRegion);
        fill(region.data(), kRegion, 7);
        std::vector<uint8_t> rkey;
        hmc_net_mr_t* mr = reg(s, region.data(), kRegion, HMC_NET_ACCESS_LOCAL | kRemoteRw, &rkey);
        ASSERT_NE(mr, nullptr);
        send_region(s, reinterpret_cast<uintptr_t>(region.data()), rkey);
        ASSERT_TRUE(s.await());  // the peer's puts completed
        const uint8_t* p = region.data();
        EXPECT_EQ(first_mismatch(p, kOffA, 7), -1);
        EXPECT_EQ(first_mismatch(p + kOffA, kLenA, 8), -1) << "put A is not in place";
        EXPECT_EQ(first_mismatch(p + kOffA + kLenA, kOffB - kOffA - kLenA, 7, kOffA + kLenA), -1);
        EXPECT_EQ(first_mismatch(p + kOffB, kLenB, 9), -1) << "put B is not in place";
        EXPECT_EQ(first_mismatch(p + kOffB + kLenB, kRegion - kOffB - kLenB, 7, kOffB + kLenB), -1);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());  // the peer's gets are done
        withdraw_region(s, mr);
      },
      [&](Side& s) {
        RemoteRegion rr;
        hmc_net_rkey_t* k = recv_key(s, &rr);
        ASSERT_NE(k, nullptr);
        const hmc_net_plugin_v2_t* t = s.t();
        std::vector<uint8_t> a(kLenA), b(kLenB), c(kLenC);
        fill(a.data(), kLenA, 8);
        fill(b.data(), kLenB, 9);
        hmc_net_request_t *ra = nullptr, *rb = nullptr, *r0 = nullptr, *r1 = nullptr;
        ASSERT_EQ(t->iput(s.ep(), a.data(), kLenA, nullptr, rr.base + kOffA, k, &ra),
                  HMC_PLUGIN_SUCCESS);
        ASSERT_EQ(t->iput(s.ep(), b.data(), kLenB, nullptr, rr.base + kOffB, k, &rb),
                  HMC_PLUGIN_SUCCESS);
        ASSERT_EQ(t->iput(s.ep(), a.data(), 0, nullptr, rr.base, k, &r0), HMC_PLUGIN_SUCCESS);
        ASSERT_EQ(t->iput(s.ep(), a.data(), 0, nullptr, rr.base + kRegion, k, &r1),
                  HMC_PLUGIN_SUCCESS);
        std::vector<size_t> bytes;
        auto st = s.wait_all({ra, rb, r0, r1}, &bytes);
        for (size_t i = 0; i < st.size(); ++i) EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS) << "put " << i;
        EXPECT_EQ(bytes[1], kLenB);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
        std::fill(a.begin(), a.end(), 0);
        std::fill(b.begin(), b.end(), 0);
        EXPECT_EQ(get(s, a.data(), kLenA, rr.base + kOffA, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(get(s, b.data(), kLenB, rr.base + kOffB, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(get(s, c.data(), kLenC, rr.base + kOffC, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(get(s, c.data(), 0, rr.base + kRegion, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(a.data(), kLenA, 8), -1);
        EXPECT_EQ(first_mismatch(b.data(), kLenB, 9), -1);
        EXPECT_EQ(first_mismatch(c.data(), kLenC, 7, kOffC), -1);
        EXPECT_EQ(t->rkey_release(k), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      });
}

// Out-of-range addresses, accesses the registration did not grant, keys of deregistered
// regions and keys that are not the plugin's end with REMOTE (or are refused at unpack), the
// owner's memory is untouched, and what was granted works on the same connection afterwards.
TEST_P(NetPair, RemoteAccessChecks) {
  // Four regions with unregistered gaps between them, inside one arena.
  constexpr size_t kArena = 2560u << 10, kReg = 256u << 10;
  constexpr size_t kRw = 256u << 10, kRo = 768u << 10, kWo = 1280u << 10, kDead = 1792u << 10;
  constexpr size_t kOkOff = 100, kOkLen = 100000;  // the successful put into RW
  constexpr size_t kWoLen = 1000;                  // the successful put into WO
  const bool stale_refused = !config().lacks(kStaleKeysAccepted);
  run(
      [&](Side& s) {
        std::vector<uint8_t> arena(kArena);
        fill(arena.data(), kArena, 20);
        uint8_t* a = arena.data();
        std::vector<uint8_t> k_rw, k_ro, k_wo, k_dead;
        hmc_net_mr_t* m_rw = reg(s, a + kRw, kReg, kRemoteRw, &k_rw);
        hmc_net_mr_t* m_ro = reg(s, a + kRo, kReg, HMC_NET_ACCESS_REMOTE_READ, &k_ro);
        hmc_net_mr_t* m_wo = reg(s, a + kWo, kReg, HMC_NET_ACCESS_REMOTE_WRITE, &k_wo);
        hmc_net_mr_t* m_dead = reg(s, a + kDead, kReg, kRemoteRw, &k_dead);
        ASSERT_EQ(deregister_memory(s.t(), s.ctx(), s.dev(), m_dead), HMC_PLUGIN_SUCCESS);
        send_region(s, reinterpret_cast<uintptr_t>(a + kRw), k_rw);
        send_region(s, reinterpret_cast<uintptr_t>(a + kRo), k_ro);
        send_region(s, reinterpret_cast<uintptr_t>(a + kWo), k_wo);
        send_region(s, reinterpret_cast<uintptr_t>(a + kDead), k_dead);
        ASSERT_TRUE(s.await());
        // Everything is as filled, except the two puts that were allowed.
        auto expect_seed = [&](size_t from, size_t to, uint64_t seed, size_t pat_off) {
          EXPECT_EQ(first_mismatch(a + from, to - from, seed, pat_off), -1)
              << "arena bytes [" << from << ", " << to << ")";
        };
        expect_seed(0, kRw + kOkOff, 20, 0);
        expect_seed(kRw + kOkOff, kRw + kOkOff + kOkLen, 22, 0);
        expect_seed(kRw + kOkOff + kOkLen, kWo, 20, kRw + kOkOff + kOkLen);
        expect_seed(kWo, kWo + kWoLen, 21, 0);
        expect_seed(kWo + kWoLen, kArena, 20, kWo + kWoLen);
        for (hmc_net_mr_t* m : {m_rw, m_ro, m_wo})
          EXPECT_EQ(deregister_memory(s.t(), s.ctx(), s.dev(), m), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        const hmc_net_plugin_v2_t* t = s.t();
        RemoteRegion rw = recv_region(s), ro = recv_region(s), wo = recv_region(s),
                     dead = recv_region(s);
        hmc_net_rkey_t* k_rw = unpack(s, rw.rkey);
        hmc_net_rkey_t* k_ro = unpack(s, ro.rkey);
        hmc_net_rkey_t* k_wo = unpack(s, wo.rkey);
        hmc_net_rkey_t* k_dead = unpack(s, dead.rkey);
        ASSERT_TRUE(k_rw && k_ro && k_wo && k_dead);
        // Not a key of this plugin: refused at unpack, or by every access.
        hmc_net_rkey_t* k_junk = nullptr;
        std::vector<uint8_t> junk(40, 0x33);
        hmc_plugin_status_t junk_st = t->rkey_unpack(s.ep(), junk.data(), junk.size(), &k_junk);
        EXPECT_TRUE(junk_st == HMC_PLUGIN_ERR_INVALID_ARGUMENT || junk_st == HMC_PLUGIN_SUCCESS)
            << junk_st;

        std::vector<uint8_t> src(600000), dst(600000);
        fill(src.data(), src.size(), 99);
        const size_t small = 10, large = 200u << 10;
        struct Bad {
          const char* what;
          uint64_t addr;
          size_t len;
          hmc_net_rkey_t* key;
        };
        std::vector<Bad> bad = {
            {"before the region", rw.base - 1, small, k_rw},
            {"past the end", rw.base + kReg - 5, small, k_rw},
            {"large, past the end", rw.base + kReg - 5, large, k_rw},
            {"large, before the region", rw.base - 64, large, k_rw},
            {"larger than the region", rw.base, kReg + 1, k_rw},
            {"starts after the end", rw.base + kReg + 1, 0, k_rw},
            {"address wraps around", UINT64_MAX - 4, small, k_rw},
        };
        if (stale_refused) {
          bad.push_back({"deregistered", dead.base, small, k_dead});
          bad.push_back({"deregistered, large", dead.base, large, k_dead});
        }
        if (junk_st == HMC_PLUGIN_SUCCESS) {
          bad.push_back({"junk key", rw.base, small, k_junk});
          bad.push_back({"junk key, zero length", rw.base, 0, k_junk});
        }
        for (const Bad& b : bad) {
          EXPECT_EQ(put(s, src.data(), b.len, b.addr, b.key), HMC_PLUGIN_ERR_REMOTE)
              << "put " << b.what;
          EXPECT_EQ(get(s, dst.data(), b.len, b.addr, b.key), HMC_PLUGIN_ERR_REMOTE)
              << "get " << b.what;
        }
        // Access flags: no puts into read-only memory, no gets from write-only memory.
        EXPECT_EQ(put(s, src.data(), small, ro.base, k_ro), HMC_PLUGIN_ERR_REMOTE);
        EXPECT_EQ(put(s, src.data(), large, ro.base, k_ro), HMC_PLUGIN_ERR_REMOTE);
        EXPECT_EQ(get(s, dst.data(), small, wo.base, k_wo), HMC_PLUGIN_ERR_REMOTE);
        EXPECT_EQ(get(s, dst.data(), large, wo.base, k_wo), HMC_PLUGIN_ERR_REMOTE);
        // What the flags allow works, up to the last byte of a region.
        EXPECT_EQ(get(s, dst.data(), large, ro.base + 8, k_ro), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(dst.data(), large, 20, kRo + 8), -1);
        EXPECT_EQ(get(s, dst.data(), 16, ro.base + kReg - 16, k_ro), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(dst.data(), 16, 20, kRo + kReg - 16), -1);
        std::vector<uint8_t> w(kWoLen);
        fill(w.data(), kWoLen, 21);
        EXPECT_EQ(put(s, w.data(), kWoLen, wo.base, k_wo), HMC_PLUGIN_SUCCESS);
        std::vector<uint8_t> ok(kOkLen);
        fill(ok.data(), kOkLen, 22);
        EXPECT_EQ(put(s, ok.data(), kOkLen, rw.base + kOkOff, k_rw), HMC_PLUGIN_SUCCESS);
        for (hmc_net_rkey_t* k : {k_rw, k_ro, k_wo, k_dead})
          EXPECT_EQ(t->rkey_release(k), HMC_PLUGIN_SUCCESS);
        if (k_junk != nullptr) {
          EXPECT_EQ(t->rkey_release(k_junk), HMC_PLUGIN_SUCCESS);
        }
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      });
}

// ---------------------------------------------------------------------------------------------
// Vectored one-sided operations (optional slots iput_v/iget_v)

bool offers_vectored(const hmc_net_plugin_v2_t* t) {
  return HMC_ABI_HAS_FIELD(t, hmc_net_plugin_v2_t, iget_v) && t->iput_v != nullptr &&
         t->iget_v != nullptr;
}

// Scattered pieces of a vectored put or get: piece i moves len[i] bytes between local offset
// loc[i] and remote offset rem[i]. Remote offsets rise with gaps between pieces, local ones fall
// (the list is in no address order there), lengths vary from 0 to one piece of over 5 MiB (more
// than one step of a plugin's copy or stream), and there are more pieces than a plugin is likely
// to send in one message. `small`: pieces of 0 to
// 64 bytes only (what a plugin may carry inline).
struct Scatter {
  std::vector<size_t> loc, rem, len;
  size_t local_size = 0, remote_size = 0;
  Scatter(size_t n, bool small) {
    static const size_t kLens[] = {64, 1, 16384, 0, 1000, 7, 40000, 4096};
    static const size_t kSmallLens[] = {64, 1, 0, 7, 33};
    for (size_t i = 0; i < n; ++i)
      len.push_back(small ? kSmallLens[i % 5] : i == 5 ? (5u << 20) + 3 : kLens[i % 8]);
    for (size_t i = 0; i < n; ++i) {
      rem.push_back(remote_size);
      remote_size += len[i] + i % 5 + 1;
    }
    loc.resize(n);
    for (size_t i = n; i-- > 0;) {
      loc[i] = local_size;
      local_size += len[i] + i % 3;
    }
  }
  std::vector<hmc_net_iov_t> iov(uint8_t* local, hmc_net_mr_t* mr, uint64_t remote) const {
    std::vector<hmc_net_iov_t> v;
    for (size_t i = 0; i < len.size(); ++i)
      v.push_back({local + loc[i], len[i], mr, remote + rem[i]});
    return v;
  }
  size_t total() const {
    size_t t = 0;
    for (size_t l : len) t += l;
    return t;
  }
};

hmc_plugin_status_t wait_vec(Side& s, bool put, const std::vector<hmc_net_iov_t>& iov,
                             hmc_net_rkey_t* k, size_t* bytes = nullptr) {
  hmc_net_request_t* r = nullptr;
  hmc_plugin_status_t st = put ? s.t()->iput_v(s.ep(), iov.data(), iov.size(), k, &r)
                               : s.t()->iget_v(s.ep(), iov.data(), iov.size(), k, &r);
  return st != HMC_PLUGIN_SUCCESS ? st : s.wait(r, bytes);
}

// A vectored put lands every piece byte-exact and nothing between them, and is in place when it
// completes; a vectored get reads the pieces back into scattered local buffers (registered for
// the put, by pointer for the get). Zero pieces complete at once with zero bytes. A list with
// one piece outside the region (or a region that does not allow the access) ends with REMOTE.
TEST_P(NetPair, VectoredPutGetByteExact) {
  if (!offers_vectored(t())) GTEST_SKIP() << "the plugin offers no iput_v/iget_v";
  const Scatter sc(600, false);
  const size_t kRegion = sc.remote_size, kLocal = sc.local_size;
  run(
      [&](Side& s) {
        std::vector<uint8_t> region(kRegion);
        fill(region.data(), kRegion, 7);
        std::vector<uint8_t> rkey, ro_key;
        hmc_net_mr_t* mr = reg(s, region.data(), kRegion, HMC_NET_ACCESS_LOCAL | kRemoteRw, &rkey);
        ASSERT_NE(mr, nullptr);
        std::vector<uint8_t> ro(4096);
        fill(ro.data(), ro.size(), 30);
        hmc_net_mr_t* ro_mr = reg(s, ro.data(), ro.size(), HMC_NET_ACCESS_REMOTE_READ, &ro_key);
        ASSERT_NE(ro_mr, nullptr);
        send_region(s, reinterpret_cast<uintptr_t>(region.data()), rkey);
        send_region(s, reinterpret_cast<uintptr_t>(ro.data()), ro_key);
        ASSERT_TRUE(s.await());  // the peer's vectored put completed
        // Each piece holds the peer's local bytes at its local offset; the gaps are untouched.
        std::vector<uint8_t> want(kRegion);
        fill(want.data(), kRegion, 7);
        std::vector<uint8_t> src(kLocal);
        fill(src.data(), kLocal, 8);
        for (size_t i = 0; i < sc.len.size(); ++i)
          std::memcpy(want.data() + sc.rem[i], src.data() + sc.loc[i], sc.len[i]);
        auto diff = std::mismatch(want.begin(), want.end(), region.begin());
        EXPECT_TRUE(diff.first == want.end())
            << "region byte " << (diff.first - want.begin()) << " differs after the put";
        EXPECT_EQ(first_mismatch(ro.data(), ro.size(), 30), -1) << "read-only region written";
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());  // the peer's gets and refusals are done
        EXPECT_TRUE(std::equal(want.begin(), want.end(), region.begin()))
            << "a refused vectored put wrote into the region";
        EXPECT_EQ(deregister_memory(s.t(), s.ctx(), s.dev(), mr), HMC_PLUGIN_SUCCESS);
        withdraw_region(s, ro_mr);
      },
      [&](Side& s) {
        RemoteRegion rr, rro;
        hmc_net_rkey_t *k = recv_key(s, &rr), *k_ro = recv_key(s, &rro);
        ASSERT_TRUE(k && k_ro);
        std::vector<uint8_t> src(kLocal), dst(kLocal, 0);
        fill(src.data(), kLocal, 8);
        std::vector<uint8_t> ignored;
        hmc_net_mr_t* src_mr = reg(s, src.data(), kLocal, HMC_NET_ACCESS_LOCAL, &ignored);
        ASSERT_NE(src_mr, nullptr);
        size_t bytes = 0;
        EXPECT_EQ(wait_vec(s, true, sc.iov(src.data(), src_mr, rr.base), k, &bytes),
                  HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(bytes, sc.total());
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
        bytes = 0;
        EXPECT_EQ(wait_vec(s, false, sc.iov(dst.data(), nullptr, rr.base), k, &bytes),
                  HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(bytes, sc.total());
        // The pieces hold what the put wrote; the local gaps stay zero.
        std::vector<uint8_t> want(kLocal, 0);
        for (size_t i = 0; i < sc.len.size(); ++i)
          std::memcpy(want.data() + sc.loc[i], src.data() + sc.loc[i], sc.len[i]);
        auto diff = std::mismatch(want.begin(), want.end(), dst.begin());
        EXPECT_TRUE(diff.first == want.end())
            << "local byte " << (diff.first - want.begin()) << " differs after the get";
        // No pieces: done at once, nothing moved.
        bytes = 1;
        EXPECT_EQ(wait_vec(s, true, {}, k, &bytes), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(bytes, 0u);
        bytes = 1;
        EXPECT_EQ(wait_vec(s, false, {}, k, &bytes), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(bytes, 0u);
        // One piece past the end among good ones refuses the request; so does writing into
        // read-only memory. The put's good pieces carry other bytes: the owner checks none of
        // them landed.
        std::vector<uint8_t> other(kLocal);
        fill(other.data(), kLocal, 9);
        std::vector<hmc_net_iov_t> bad = {{other.data(), 100, nullptr, rr.base},
                                          {other.data() + 100, 64, nullptr, rr.base + kRegion - 10},
                                          {other.data() + 200, 100, nullptr, rr.base + 200}};
        EXPECT_EQ(wait_vec(s, true, bad, k), HMC_PLUGIN_ERR_REMOTE) << "put past the end";
        EXPECT_EQ(wait_vec(s, false, bad, k), HMC_PLUGIN_ERR_REMOTE) << "get past the end";
        std::vector<hmc_net_iov_t> into_ro = {{other.data(), 100, nullptr, rro.base}};
        EXPECT_EQ(wait_vec(s, true, into_ro, k_ro), HMC_PLUGIN_ERR_REMOTE) << "put into read-only";
        // The connection still works.
        std::vector<hmc_net_iov_t> ro_read = {{dst.data(), 16, nullptr, rro.base + 8},
                                              {dst.data() + 100, 8, nullptr, rro.base}};
        EXPECT_EQ(wait_vec(s, false, ro_read, k_ro), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(dst.data(), 16, 30, 8), -1);
        EXPECT_EQ(first_mismatch(dst.data() + 100, 8, 30, 0), -1);
        EXPECT_EQ(deregister_memory(s.t(), s.ctx(), s.dev(), src_mr), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(s.t()->rkey_release(k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(s.t()->rkey_release(k_ro), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      });
}

// Many small pieces (a plugin may carry them inline, in one message per chunk): put and got
// back byte-exact, nothing between them touched, in lists of one and of several messages.
TEST_P(NetPair, VectoredSmallPiecesByteExact) {
  if (!offers_vectored(t())) GTEST_SKIP() << "the plugin offers no iput_v/iget_v";
  const std::vector<Scatter> layouts = {Scatter(40, true), Scatter(700, true)};
  size_t region_size = 0;
  for (const Scatter& sc : layouts) region_size = std::max(region_size, sc.remote_size);
  run(
      [&](Side& s) {
        std::vector<uint8_t> region(region_size);
        fill(region.data(), region_size, 7);
        std::vector<uint8_t> rkey;
        hmc_net_mr_t* mr = reg(s, region.data(), region_size, kRemoteRw, &rkey);
        ASSERT_NE(mr, nullptr);
        send_region(s, reinterpret_cast<uintptr_t>(region.data()), rkey);
        std::vector<uint8_t> want(region);
        for (size_t l = 0; l < layouts.size(); ++l) {
          const Scatter& sc = layouts[l];
          ASSERT_TRUE(s.await());  // the peer's put completed
          std::vector<uint8_t> src(sc.local_size);
          fill(src.data(), src.size(), 40 + l);
          for (size_t i = 0; i < sc.len.size(); ++i)
            std::memcpy(want.data() + sc.rem[i], src.data() + sc.loc[i], sc.len[i]);
          auto diff = std::mismatch(want.begin(), want.end(), region.begin());
          EXPECT_TRUE(diff.first == want.end())
              << "layout " << l << ": region byte " << (diff.first - want.begin()) << " differs";
          ASSERT_TRUE(s.signal());
        }
        ASSERT_TRUE(s.await());
        withdraw_region(s, mr);
      },
      [&](Side& s) {
        RemoteRegion rr;
        hmc_net_rkey_t* k = recv_key(s, &rr);
        ASSERT_NE(k, nullptr);
        for (size_t l = 0; l < layouts.size(); ++l) {
          const Scatter& sc = layouts[l];
          std::vector<uint8_t> src(sc.local_size), dst(sc.local_size, 0);
          fill(src.data(), src.size(), 40 + l);
          size_t bytes = 0;
          EXPECT_EQ(wait_vec(s, true, sc.iov(src.data(), nullptr, rr.base), k, &bytes),
                    HMC_PLUGIN_SUCCESS)
              << "layout " << l;
          EXPECT_EQ(bytes, sc.total());
          ASSERT_TRUE(s.signal());
          ASSERT_TRUE(s.await());  // the owner checked it
          EXPECT_EQ(wait_vec(s, false, sc.iov(dst.data(), nullptr, rr.base), k, &bytes),
                    HMC_PLUGIN_SUCCESS)
              << "layout " << l;
          EXPECT_EQ(bytes, sc.total());
          std::vector<uint8_t> want(sc.local_size, 0);
          for (size_t i = 0; i < sc.len.size(); ++i)
            std::memcpy(want.data() + sc.loc[i], src.data() + sc.loc[i], sc.len[i]);
          auto diff = std::mismatch(want.begin(), want.end(), dst.begin());
          EXPECT_TRUE(diff.first == want.end())
              << "layout " << l << ": local byte " << (diff.first - want.begin()) << " differs";
        }
        EXPECT_EQ(s.t()->rkey_release(k), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      });
}

// ---------------------------------------------------------------------------------------------
// Peer loss and close

// The peer is SIGKILLed in the middle of sending a large message, after small messages it sent
// arrived: every pending request ends with PEER_LOST within a few seconds (detection may take
// the host's timeout, 1.5 s here), writing to the dead peer raises no SIGPIPE (the test process
// would die of it), the messages that arrived before stay receivable, a receive matching
// nothing and later sends fail with PEER_LOST when posted, and close_ep returns at once.
TEST_P(NetPair, PeerKilledMidTransfer) {
  constexpr size_t kBig = 512u << 20;
  const std::vector<size_t> arrived = {0, 8, 1000, 4000};  // eager everywhere
  const std::string lost_log = config().logs.peer_lost;
  const bool arrived_kept = !config().lacks(kArrivedDroppedOnLoss);
  const bool ready_reports_loss = !config().lacks(kReadyAfterLoss);
  // Where such a death leaves the large receive stuck, the peer dies before it starts sending
  // the large message (the receive then matches nothing).
  const bool mid_transfer = !config().lacks(kStuckReadOnDeath);
  run(
      [&](Side& s) {
        const hmc_net_plugin_v2_t* t = s.t();
        void* big = mmap(nullptr, kBig, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(big, MAP_FAILED);
        std::vector<uint8_t> small(64), out(1u << 20);
        hmc_net_request_t* r_big = s.irecv(big, kBig, 1);
        hmc_net_request_t* r_never = s.irecv(small.data(), small.size(), 2);
        hmc_net_request_t* s_never = s.isend(out.data(), out.size(), 3);  // never received
        ASSERT_TRUE(r_big && r_never && s_never);
        ASSERT_TRUE(s.signal());
        uint64_t t0 = mono_ns();
        auto st = s.wait_all({r_big, r_never, s_never}, nullptr, 10);
        double secs = static_cast<double>(mono_ns() - t0) / 1e9;
        EXPECT_EQ(st[0], HMC_PLUGIN_ERR_PEER_LOST) << "the large receive";
        EXPECT_EQ(st[1], HMC_PLUGIN_ERR_PEER_LOST) << "the unmatched receive";
        EXPECT_EQ(st[2], HMC_PLUGIN_ERR_PEER_LOST) << "the unmatched send";
        EXPECT_LT(secs, 5.0) << "peer death noticed only after " << secs << " s";
        if (!lost_log.empty()) {
          EXPECT_TRUE(s.host().logged(lost_log)) << s.host().all_logs();
        }
        // What arrived before the death is still there, in reverse order of sending.
        for (size_t i = arrived.size(); i-- > 0;) {
          std::vector<uint8_t> b(arrived[i] + 8, 0xee);
          if (!arrived_kept) {
            EXPECT_EQ(s.irecv(b.data(), arrived[i], 101 + i), nullptr);
            EXPECT_EQ(s.last_post(), HMC_PLUGIN_ERR_PEER_LOST);
            continue;
          }
          size_t n = 99;
          EXPECT_EQ(s.wait(s.irecv(b.data(), arrived[i], 101 + i), &n, 10), HMC_PLUGIN_SUCCESS)
              << "message " << i << " sent before the death";
          EXPECT_EQ(n, arrived[i]);
          EXPECT_EQ(first_mismatch(b.data(), arrived[i], 60 + i), -1) << "message " << i;
        }
        hmc_net_request_t* r = nullptr;
        EXPECT_EQ(t->irecv(s.ep(), small.data(), small.size(), nullptr, 99, &r),
                  HMC_PLUGIN_ERR_PEER_LOST);
        EXPECT_EQ(t->isend(s.ep(), small.data(), small.size(), nullptr, 4, &r),
                  HMC_PLUGIN_ERR_PEER_LOST);
        EXPECT_EQ(t->ep_ready(s.ep()),
                  ready_reports_loss ? HMC_PLUGIN_ERR_PEER_LOST : HMC_PLUGIN_SUCCESS);
        uint64_t c0 = mono_ns();
        s.close_ep();
        EXPECT_LT(mono_ns() - c0, 1000000000ull) << "close_ep blocked";
        munmap(big, kBig);
      },
      [&](Side& s) {
        // Untouched anonymous memory: nothing to fill, reads as zeros.
        void* big = mmap(nullptr, kBig, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(big, MAP_FAILED);
        ASSERT_TRUE(s.await());
        std::vector<std::vector<uint8_t>> bufs(arrived.size());
        std::vector<hmc_net_request_t*> reqs;
        for (size_t i = 0; i < arrived.size(); ++i) {
          bufs[i].resize(std::max<size_t>(arrived[i], 1));
          fill(bufs[i].data(), arrived[i], 60 + i);
          reqs.push_back(s.isend(bufs[i].data(), arrived[i], 101 + i));
          ASSERT_NE(reqs.back(), nullptr);
        }
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        if (mid_transfer) {
          hmc_net_request_t* r = s.isend(big, kBig, 1);
          ASSERT_NE(r, nullptr);
        }
        for (int i = 0; i < 20; ++i) s.t()->progress(s.ctx());
        // Anything that failed so far must not be hidden by the kill.
        if (::testing::Test::HasFailure()) _exit(1);
        raise(SIGKILL);
      },
      30, SIGKILL, 1500);
}

// close_ep with a receive and a send pending returns at once and leaves the context usable; the
// peer's pending requests end PEER_LOST and its later posts fail with it.
TEST_P(NetPair, CloseWithPendingRequests) {
  const bool peer_sees_close = !config().lacks(kPeerCloseUnseen);
  run(
      [&](Side& s) {
        std::vector<uint8_t> b(64), out(1u << 20);
        ASSERT_NE(s.irecv(b.data(), b.size(), 1), nullptr);
        ASSERT_NE(s.isend(out.data(), out.size(), 2), nullptr);  // the peer never receives it
        ASSERT_TRUE(s.await());
        uint64_t t0 = mono_ns();
        s.close_ep();
        EXPECT_LT(mono_ns() - t0, 500000000ull) << "close_ep blocked";
        // The context listens for the next peer.
        uint8_t handle[HMC_NET_HANDLE_MAX];
        size_t len = 0;
        hmc_net_listener_t* l = nullptr;
        EXPECT_EQ(s.t()->listen(s.ctx(), s.dev(), handle, &len, &l), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(s.t()->close_listener(l), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      },
      [&](Side& s) {
        std::vector<uint8_t> b(64);
        hmc_net_request_t* r = s.irecv(b.data(), b.size(), 5);
        ASSERT_NE(r, nullptr);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());  // the peer closed
        if (peer_sees_close) {
          uint64_t t0 = mono_ns();
          EXPECT_EQ(s.wait(r, nullptr, 10), HMC_PLUGIN_ERR_PEER_LOST);
          EXPECT_LT(mono_ns() - t0, 5000000000ull);
          hmc_net_request_t* r2 = nullptr;
          EXPECT_EQ(s.t()->irecv(s.ep(), b.data(), b.size(), nullptr, 6, &r2),
                    HMC_PLUGIN_ERR_PEER_LOST);
        }
        ASSERT_TRUE(s.signal());
      });
}

// A peer that sends and then closes its endpoint: everything it sent is still delivered (the
// close must not overtake data queued before it), and only then do requests fail. The receiver
// does not progress until the peer closed, so all of it is pending at once. Messages that
// arrived whole before the close can even be received after it; a receive matching nothing
// fails when posted, and so do sends.
TEST_P(NetPairPeerCloseSeen, MessagesKeptAfterPeerClosed) {
  constexpr int kN = 64;
  constexpr int kLate = 8;  // messages kN..kN+kLate-1 are received only after the close
  auto size_of = [](int i) -> size_t { return static_cast<size_t>(i) * 37; };  // all eager
  const std::vector<size_t> late_sizes = {0, 8, 1000, 4000};  // tags 200.., after the close too
  // Where the peer's sends need this side's progress, this side progresses while it waits.
  const bool sends_wait = config().lacks(kSendsWaitForPeer);
  run(
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs(kN + 1);
        std::vector<hmc_net_request_t*> reqs;
        for (int i = 0; i <= kN; ++i) {
          const int tag = i < kN ? i : 1000;  // tag 1000 is never sent
          bufs[i].resize(std::max<size_t>(size_of(i), 1));
          reqs.push_back(s.irecv(bufs[i].data(), size_of(i), static_cast<uint64_t>(tag)));
          ASSERT_NE(reqs.back(), nullptr);
        }
        ASSERT_TRUE(s.signal());
        if (sends_wait) {
          ASSERT_TRUE(s.await());  // the peer closed
        } else {
          // Block on the control socket without progressing the plugin until the peer closed.
          uint8_t buf[5];
          size_t got = 0;
          while (got < sizeof(buf)) {
            ssize_t n = recv(s.ctl(), buf + got, sizeof(buf) - got, 0);
            ASSERT_GT(n, 0);
            got += static_cast<size_t>(n);
          }
        }
        std::vector<size_t> bytes;
        uint64_t t0 = mono_ns();
        auto st = s.wait_all(reqs, &bytes);
        for (int i = 0; i < kN; ++i) {
          EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS) << "message " << i;
          EXPECT_EQ(bytes[i], size_of(i));
          EXPECT_EQ(first_mismatch(bufs[i].data(), size_of(i), 40 + i), -1) << "message " << i;
        }
        EXPECT_EQ(st[kN], HMC_PLUGIN_ERR_PEER_LOST) << "the receive the peer never matched";
        EXPECT_LT(mono_ns() - t0, 5000000000ull);
        for (int i = kN; i < kN + kLate; ++i) {
          std::vector<uint8_t> b(size_of(i));
          size_t n = 0;
          EXPECT_EQ(s.wait(s.irecv(b.data(), b.size(), static_cast<uint64_t>(i)), &n),
                    HMC_PLUGIN_SUCCESS)
              << "buffered message " << i;
          EXPECT_EQ(n, size_of(i));
          EXPECT_EQ(first_mismatch(b.data(), size_of(i), 40 + i), -1);
        }
        for (size_t i = late_sizes.size(); i-- > 0;) {
          std::vector<uint8_t> b(late_sizes[i] + 8, 0xee);
          size_t n = 99;
          EXPECT_EQ(s.wait(s.irecv(b.data(), late_sizes[i], 200 + i), &n, 10), HMC_PLUGIN_SUCCESS)
              << "message of " << late_sizes[i] << " bytes sent before the close";
          EXPECT_EQ(n, late_sizes[i]);
          EXPECT_EQ(first_mismatch(b.data(), late_sizes[i], 60 + i), -1);
          EXPECT_EQ(b[late_sizes[i]], 0xee);
        }
        std::vector<uint8_t> b(8);
        EXPECT_EQ(s.irecv(b.data(), 8, kN), nullptr) << "nothing buffered: the post must fail";
        EXPECT_EQ(s.last_post(), HMC_PLUGIN_ERR_PEER_LOST);
        EXPECT_EQ(s.isend(b.data(), 8, 5), nullptr) << "the peer is gone: the post must fail";
        EXPECT_EQ(s.last_post(), HMC_PLUGIN_ERR_PEER_LOST);
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs(kN + kLate + late_sizes.size());
        std::vector<hmc_net_request_t*> reqs;
        ASSERT_TRUE(s.await());
        for (int i = 0; i < kN + kLate; ++i) {
          bufs[i].resize(std::max<size_t>(size_of(i), 1));
          fill(bufs[i].data(), size_of(i), 40 + i);
          reqs.push_back(s.isend(bufs[i].data(), size_of(i), static_cast<uint64_t>(i)));
          ASSERT_NE(reqs.back(), nullptr);
        }
        for (size_t i = 0; i < late_sizes.size(); ++i) {
          std::vector<uint8_t>& b = bufs[kN + kLate + i];
          b.resize(std::max<size_t>(late_sizes[i], 1));
          fill(b.data(), late_sizes[i], 60 + i);
          reqs.push_back(s.isend(b.data(), late_sizes[i], 200 + i));
          ASSERT_NE(reqs.back(), nullptr);
        }
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        s.close_ep();
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());  // stays alive: the peer sees a close, not a death
      });
}

// Two connectors on one listening context, the same tags in flight on both: each endpoint's
// receives match only its own peer's messages, whether posted before (the second endpoint's
// first, so a crossed message would take them) or after the messages arrived, in both
// directions.
TEST_P(NetPair, TwoPeersOnOneContextDoNotCrossMatch) {
  constexpr int kPeers = 2, kTags = 4;
  constexpr uint64_t kShared = 42;
  constexpr size_t kLen = 70000, kSmall = 100, kLarge = 1u << 20;
  const hmc_net_plugin_v2_t* t = this->t();
  int sv[kPeers][2];
  pid_t pids[kPeers];
  for (int i = 0; i < kPeers; ++i) {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[i]), 0);
    std::fflush(stdout);
    std::fflush(stderr);
    pids[i] = ::fork();
    if (pids[i] == 0) {
      for (int j = 0; j <= i; ++j) ::close(sv[j][0]);
      int code = 100;
      {
        Side s(t, cfg(), dev(), sv[i][1]);
        std::string err = s.setup(false);
        if (err.empty()) {
          [&] {
            // Tags 0..3 both ways, then a small and a large message on the shared tag, then the
            // parent's answer on it.
            std::vector<std::vector<uint8_t>> out(kTags, std::vector<uint8_t>(kLen)), in = out;
            std::vector<hmc_net_request_t*> reqs;
            for (int g = 0; g < kTags; ++g) {
              fill(out[g].data(), kLen, 1000 * (i + 1) + g);
              reqs.push_back(s.irecv(in[g].data(), kLen, g));
            }
            for (int g = 0; g < kTags; ++g) reqs.push_back(s.isend(out[g].data(), kLen, g));
            for (auto* r : reqs) ASSERT_NE(r, nullptr);
            for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
            for (int g = 0; g < kTags; ++g)
              EXPECT_EQ(first_mismatch(in[g].data(), kLen, 5000 * (i + 1) + g), -1)
                  << "peer " << i << " got another peer's message on tag " << g;
            std::vector<uint8_t> a(kSmall), b(kLarge), answer(kLarge);
            fill(a.data(), kSmall, 10000 + i);
            fill(b.data(), kLarge, 20000 + i);
            ASSERT_TRUE(s.await());
            auto st = s.wait_all(
                {s.isend(a.data(), kSmall, kShared), s.isend(b.data(), kLarge, kShared)});
            EXPECT_EQ(st[0], HMC_PLUGIN_SUCCESS);
            EXPECT_EQ(st[1], HMC_PLUGIN_SUCCESS);
            size_t n = 0;
            EXPECT_EQ(s.wait(s.irecv(answer.data(), kLarge, kShared), &n), HMC_PLUGIN_SUCCESS);
            EXPECT_EQ(n, kLarge);
            EXPECT_EQ(first_mismatch(answer.data(), kLarge, 30000 + i), -1) << "peer " << i;
            EXPECT_TRUE(s.signal());
            EXPECT_TRUE(s.await());
          }();
          code = ::testing::Test::HasFailure() ? 1 : 0;
        } else {
          std::fprintf(stderr, "child %d setup: %s\n", i, err.c_str());
        }
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(code);
    }
    ::close(sv[i][1]);
  }
  [&] {
    // One context, one listener per peer, one endpoint per peer. The Sides carry only the
    // control channels.
    Host host(cfg());
    hmc_net_ctx_t* c = nullptr;
    hmc_plugin_status_t init = t->init(host.services(), &c);
    if (init == HMC_PLUGIN_ERR_NO_DEVICE) {
      for (auto& p : sv) ::shutdown(p[0], SHUT_RDWR);
      GTEST_SKIP() << "the " << config().plugin
                   << " plugin has no device here: " << host.all_logs();
    }
    ASSERT_EQ(init, HMC_PLUGIN_SUCCESS) << host.all_logs();
    std::vector<std::unique_ptr<Side>> ctl;
    hmc_net_ep_t* eps[kPeers] = {};
    hmc_net_listener_t* ls[kPeers] = {};
    for (int i = 0; i < kPeers; ++i) {
      ctl.emplace_back(new Side(t, cfg(), dev(), sv[i][0]));
      uint8_t handle[HMC_NET_HANDLE_MAX];
      size_t len = 0;
      ASSERT_EQ(t->listen(c, dev(), handle, &len, &ls[i]), HMC_PLUGIN_SUCCESS);
      ASSERT_TRUE(ctl[i]->ctl_send(handle, len));
    }
    uint64_t deadline = deadline_after(10);
    int accepted = 0;
    while (accepted < kPeers && mono_ns() < deadline) {
      for (int i = 0; i < kPeers; ++i) {
        if (eps[i] != nullptr) continue;
        hmc_plugin_status_t st = t->accept(ls[i], &eps[i]);
        if (st == HMC_PLUGIN_SUCCESS)
          ++accepted;
        else
          ASSERT_EQ(st, HMC_PLUGIN_IN_PROGRESS);
      }
    }
    ASSERT_EQ(accepted, kPeers) << "accept timed out";
    for (auto* l : ls) t->close_listener(l);
    // Waits on the shared context with the raw table.
    auto wait_raw = [&](hmc_net_request_t* r, size_t* n) {
      uint64_t end = deadline_after(20);
      for (;;) {
        int done = 0;
        hmc_plugin_status_t st = t->test(r, &done, n);
        if (done) return st;
        if (mono_ns() > end) return HMC_PLUGIN_IN_PROGRESS;
      }
    };
    // Tags 0..3 both ways; receives on endpoint 1 first.
    std::vector<std::vector<uint8_t>> in[kPeers], out[kPeers];
    std::vector<hmc_net_request_t*> reqs;
    for (int i : {1, 0}) {
      in[i].assign(kTags, std::vector<uint8_t>(kLen));
      out[i].assign(kTags, std::vector<uint8_t>(kLen));
      for (int g = 0; g < kTags; ++g) {
        hmc_net_request_t* r = nullptr;
        ASSERT_EQ(t->irecv(eps[i], in[i][g].data(), kLen, nullptr, g, &r), HMC_PLUGIN_SUCCESS);
        reqs.push_back(r);
        fill(out[i][g].data(), kLen, 5000 * (i + 1) + g);
        ASSERT_EQ(t->isend(eps[i], out[i][g].data(), kLen, nullptr, g, &r), HMC_PLUGIN_SUCCESS);
        reqs.push_back(r);
      }
    }
    for (size_t j = 0; j < reqs.size(); ++j)
      EXPECT_EQ(wait_raw(reqs[j], nullptr), HMC_PLUGIN_SUCCESS) << "request " << j;
    for (int i = 0; i < kPeers; ++i)
      for (int g = 0; g < kTags; ++g)
        EXPECT_EQ(first_mismatch(in[i][g].data(), kLen, 1000 * (i + 1) + g), -1)
            << "endpoint " << i << " got another peer's message on tag " << g;
    // The shared tag: the small messages' receives posted before they are sent, the large
    // ones' after they arrived (last endpoint first).
    std::vector<std::vector<uint8_t>> sbuf(kPeers, std::vector<uint8_t>(kLarge + 8)),
        lbuf(kPeers, std::vector<uint8_t>(kLarge + 8));
    std::vector<hmc_net_request_t*> first;
    for (int i = 0; i < kPeers; ++i) {
      hmc_net_request_t* r = nullptr;
      ASSERT_EQ(t->irecv(eps[i], sbuf[i].data(), sbuf[i].size(), nullptr, kShared, &r),
                HMC_PLUGIN_SUCCESS);
      first.push_back(r);
    }
    for (auto& s : ctl) ASSERT_TRUE(s->signal());
    for (int i = 0; i < kPeers; ++i) {
      size_t n = 0;
      EXPECT_EQ(wait_raw(first[i], &n), HMC_PLUGIN_SUCCESS);
      EXPECT_EQ(n, kSmall) << "endpoint " << i;
      EXPECT_EQ(first_mismatch(sbuf[i].data(), kSmall, 10000 + i), -1)
          << "endpoint " << i << " got another peer's message";
    }
    for (int i = kPeers - 1; i >= 0; --i) {
      hmc_net_request_t* r = nullptr;
      ASSERT_EQ(t->irecv(eps[i], lbuf[i].data(), lbuf[i].size(), nullptr, kShared, &r),
                HMC_PLUGIN_SUCCESS);
      size_t n = 0;
      EXPECT_EQ(wait_raw(r, &n), HMC_PLUGIN_SUCCESS);
      EXPECT_EQ(n, kLarge);
      EXPECT_EQ(first_mismatch(lbuf[i].data(), kLarge, 20000 + i), -1)
          << "endpoint " << i << " got another peer's message";
    }
    std::vector<std::vector<uint8_t>> answer(kPeers, std::vector<uint8_t>(kLarge));
    for (int i = 0; i < kPeers; ++i) {
      fill(answer[i].data(), kLarge, 30000 + i);
      hmc_net_request_t* r = nullptr;
      ASSERT_EQ(t->isend(eps[i], answer[i].data(), kLarge, nullptr, kShared, &r),
                HMC_PLUGIN_SUCCESS);
      EXPECT_EQ(wait_raw(r, nullptr), HMC_PLUGIN_SUCCESS);
    }
    // The children confirm, and stay until both endpoints are closed here.
    for (int i = 0; i < kPeers; ++i) {
      uint64_t end = deadline_after(20);
      bool got = false;
      while (!got && mono_ns() < end) {
        t->progress(c);
        pollfd p{sv[i][0], POLLIN, 0};
        if (::poll(&p, 1, 1) > 0) got = ctl[i]->await(nullptr, 1);
      }
      EXPECT_TRUE(got) << "peer " << i << " did not confirm";
    }
    for (auto* e : eps) t->close_ep(e);
    for (auto& s : ctl) s->signal();
    EXPECT_EQ(t->finalize(c), HMC_PLUGIN_SUCCESS);
  }();
  for (int i = 0; i < kPeers; ++i) {
    bool timed_out = false;
    int status = reap(pids[i], sv[i][0], 30, &timed_out);
    remove_shm_regions_of(pids[i]);
    if (IsSkipped()) continue;
    EXPECT_FALSE(timed_out) << "peer " << i;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "peer " << i << " failed";
  }
}

INSTANTIATE_TEST_SUITE_P(Net, NetPair, ::testing::ValuesIn(net_configs()), config_name);
INSTANTIATE_TEST_SUITE_P(Net, NetPairPeerCloseSeen, ::testing::ValuesIn(net_configs()),
                         config_name);

// One message of the configuration's huge size (1 GiB), byte-exact.
class NetHuge : public NetTest {};

// Anonymous memory with transparent huge pages requested and populated up front: a page fault
// per 4 KiB inside recv() is what makes 1 GiB slow on some virtual machines.
class BigBuffer {
 public:
  explicit BigBuffer(size_t len) : len_(len) {
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      madvise(p, len, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
      madvise(p, len, MADV_POPULATE_WRITE);  // best effort (Linux 5.14+)
#endif
      p_ = static_cast<uint8_t*>(p);
    }
  }
  ~BigBuffer() {
    if (p_ != nullptr) munmap(p_, len_);
  }
  BigBuffer(const BigBuffer&) = delete;
  BigBuffer& operator=(const BigBuffer&) = delete;
  uint8_t* get() const {
    return p_;
  }

 private:
  uint8_t* p_ = nullptr;
  size_t len_;
};

TEST_P(NetHuge, OneMessage) {
  const size_t size = config().huge;
  run(
      [&](Side& s) {
        BigBuffer buf(size);
        ASSERT_NE(buf.get(), nullptr);
        hmc_net_request_t* r = s.irecv(buf.get(), size, 42);
        ASSERT_NE(r, nullptr);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());  // the sender filled its buffer and posted the send
        size_t n = 0;
        uint64_t t0 = mono_ns();
        ASSERT_EQ(s.wait(r, &n, 60), HMC_PLUGIN_SUCCESS);
        double secs = static_cast<double>(mono_ns() - t0) / 1e9;
        EXPECT_EQ(n, size);
        EXPECT_EQ(first_mismatch(buf.get(), size, 4242), -1);
        std::fprintf(stderr, "[ info ] %zu MiB over %s: %.3f s (%.0f MB/s)\n", size >> 20,
                     config().name.c_str(), secs, static_cast<double>(size) / secs / 1e6);
      },
      [&](Side& s) {
        BigBuffer buf(size);
        ASSERT_NE(buf.get(), nullptr);
        fill(buf.get(), size, 4242);
        ASSERT_TRUE(s.await());
        hmc_net_request_t* r = s.isend(buf.get(), size, 42);
        ASSERT_NE(r, nullptr);
        ASSERT_TRUE(s.signal());
        size_t n = 0;
        EXPECT_EQ(s.wait(r, &n, 60), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(n, size);
      },
      120);
}

INSTANTIATE_TEST_SUITE_P(Net, NetHuge, ::testing::ValuesIn(net_configs_with_huge()), config_name);

// ---------------------------------------------------------------------------------------------
// Two contexts of one process

// wait_fd + arm: an idle armed context's fd stays quiet, also with a receive waiting for a
// message; a message from the peer wakes it, and arming again does not let the message sleep
// (arm reports the work, or the fd stays readable).
TEST_P(NetLocal, ArmAndWaitFdWakeUp) {
  const bool quiet_while_pending = !config().lacks(kTimerWaitFd);
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.connect());
    int fd_a = -1;
    ASSERT_EQ(t->wait_fd(p.a, &fd_a), HMC_PLUGIN_SUCCESS);
    ASSERT_GE(fd_a, 0);
    // No listener left waiting (a posted receive is work in flight), and connection setup
    // traffic settled on both sides.
    ASSERT_EQ(t->close_listener(p.l), HMC_PLUGIN_SUCCESS);
    p.l = nullptr;
    for (int i = 0; i < 100; ++i) {
      t->progress(p.a);
      t->progress(p.b);
    }
    ASSERT_EQ(arm_until_idle(t, p.a), HMC_PLUGIN_SUCCESS);
    EXPECT_FALSE(readable_within(fd_a, 20)) << "an idle, armed context must not look busy";
    t->progress(p.a);
    std::vector<uint8_t> rbuf(8), sbuf(8);
    fill(sbuf.data(), 8, 5);
    hmc_net_request_t* r = nullptr;
    ASSERT_EQ(t->irecv(p.ea, rbuf.data(), 8, nullptr, 1, &r), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(arm_until_idle(t, p.a), HMC_PLUGIN_SUCCESS);
    if (quiet_while_pending) {
      EXPECT_FALSE(readable_within(fd_a, 0)) << "a receive waiting for a message must not look "
                                             << "busy";
    }
    hmc_net_request_t* s = nullptr;
    ASSERT_EQ(t->isend(p.eb, sbuf.data(), 8, nullptr, 1, &s), HMC_PLUGIN_SUCCESS);
    int done = 0;
    uint64_t deadline = deadline_after(5);
    while (!done && mono_ns() < deadline) ASSERT_EQ(t->test(s, &done, nullptr), HMC_PLUGIN_SUCCESS);
    ASSERT_TRUE(done);
    EXPECT_TRUE(readable_within(fd_a, 5000)) << "the message did not wake the sleeping side";
    hmc_plugin_status_t again = t->arm(p.a);
    EXPECT_TRUE(again == HMC_PLUGIN_IN_PROGRESS ||
                (again == HMC_PLUGIN_SUCCESS && readable_within(fd_a, 0)))
        << "arm lets a waiting message sleep (arm said " << again << ")";
    EXPECT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(rbuf, sbuf);
  });
}

// A handle whose listener was closed: connect starts, ep_ready fails with PEER_LOST within the
// host's timeout (300 ms here; where nobody refuses, only then) and posts on the endpoint fail.
// Malformed handles and devices out of range are invalid arguments. One peer per listener: accept
// after the endpoint was handed out is an error, not a hang.
TEST_P(NetLocal, HandlesAreChecked) {
  const bool times_out = config().lacks(kConnectTimesOut);
  const std::string no_answer_log = config().logs.no_answer;
  local(
      [&](LocalPair& p) {
        const hmc_net_plugin_v2_t* t = p.t;
        ASSERT_NO_FATAL_FAILURE(p.listen());
        EXPECT_LE(p.handle_len, HMC_NET_HANDLE_MAX);
        ASSERT_EQ(t->close_listener(p.l), HMC_PLUGIN_SUCCESS);
        p.l = nullptr;
        hmc_net_ep_t* ep = nullptr;
        ASSERT_EQ(t->connect(p.b, p.dev, p.handle, p.handle_len, &ep), HMC_PLUGIN_SUCCESS);
        hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
        uint64_t t0 = mono_ns();
        while (st == HMC_PLUGIN_IN_PROGRESS && mono_ns() - t0 < 5000000000ull) {
          t->progress(p.a);
          st = t->ep_ready(ep);
        }
        double ms = static_cast<double>(mono_ns() - t0) / 1e6;
        EXPECT_EQ(st, HMC_PLUGIN_ERR_PEER_LOST);
        EXPECT_LT(ms, 2000);
        if (times_out) {
          EXPECT_GE(ms, 250);
        }
        if (!no_answer_log.empty()) {
          EXPECT_TRUE(p.hb.logged(no_answer_log)) << p.hb.all_logs();
        }
        p.expect_send_lost(ep);
        EXPECT_EQ(t->close_ep(ep), HMC_PLUGIN_SUCCESS);

        int devices = 0;
        ASSERT_EQ(t->device_count(p.b, &devices), HMC_PLUGIN_SUCCESS);
        ep = nullptr;
        EXPECT_EQ(t->connect(p.b, p.dev, p.handle, 3, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(t->connect(p.b, p.dev, p.handle, p.handle_len - 1, &ep),
                  HMC_PLUGIN_ERR_INVALID_ARGUMENT)
            << "a handle cut short";
        EXPECT_EQ(t->connect(p.b, devices, p.handle, p.handle_len, &ep),
                  HMC_PLUGIN_ERR_INVALID_ARGUMENT);
        EXPECT_EQ(ep, nullptr);

        ASSERT_EQ(t->listen(p.a, p.dev, p.handle, &p.handle_len, &p.l), HMC_PLUGIN_SUCCESS);
        p.expect_one_working_connection();
      },
      300);
}

// Two connections between the same two contexts: each endpoint gets only its own connection's
// messages, and closing one connection leaves the other working.
TEST_P(NetLocal, TwoConnectionsBetweenTheSameContexts) {
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.init());
    auto c1 = p.connect_another();
    auto c2 = p.connect_another();
    ASSERT_TRUE(c1.first && c1.second && c2.first && c2.second);
    std::vector<uint8_t> in1(1000), in2(1000), out1(1000), out2(1000);
    fill(out1.data(), 1000, 1);
    fill(out2.data(), 1000, 2);
    hmc_net_request_t *r2 = nullptr, *r1 = nullptr, *s1 = nullptr, *s2 = nullptr;
    // The second connection's receive is posted first: with crossed peers it would take
    // message 1.
    ASSERT_EQ(t->irecv(c2.first, in2.data(), 1000, nullptr, 9, &r2), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(t->irecv(c1.first, in1.data(), 1000, nullptr, 9, &r1), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(t->isend(c1.second, out1.data(), 1000, nullptr, 9, &s1), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(p.wait(s1), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(p.wait(r1), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(t->isend(c2.second, out2.data(), 1000, nullptr, 9, &s2), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(p.wait(s2), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(p.wait(r2), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(in1, out1);
    EXPECT_EQ(in2, out2);
    t->close_ep(c1.first);
    t->close_ep(c1.second);
    p.forget(c1.first);
    p.forget(c1.second);
    p.expect_delivery(c2.first, c2.second, 1000, 3, 1);
  });
}

// Puts complete only once the data is in place at the target (checked right at completion); a
// zero-length region registers and its key allows zero-length accesses only.
TEST_P(NetLocal, PutCompletionMeansDataInPlace) {
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.connect());
    std::vector<uint8_t> region(1u << 20, 0), rkey, rkey0;
    hmc_net_mr_t* mr = reg(t, p.a, p.dev, region.data(), region.size(), kRemoteRw, &rkey);
    ASSERT_NE(mr, nullptr);
    hmc_net_rkey_t* k = nullptr;
    ASSERT_EQ(t->rkey_unpack(p.eb, rkey.data(), rkey.size(), &k), HMC_PLUGIN_SUCCESS);
    const uint64_t base = reinterpret_cast<uintptr_t>(region.data());
    std::vector<uint8_t> src(region.size());
    fill(src.data(), src.size(), 77);
    for (size_t len : {size_t{8}, size_t{5000}, region.size()}) {
      hmc_net_request_t* r = nullptr;
      ASSERT_EQ(t->iput(p.eb, src.data(), len, nullptr, base, k, &r), HMC_PLUGIN_SUCCESS);
      EXPECT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS) << len;
      EXPECT_EQ(first_mismatch(region.data(), len, 77), -1) << "put of " << len << " bytes";
    }
    if (config().lacks(kNoEmptyRegions)) {
      hmc_net_mr_t* mr0 = nullptr;
      EXPECT_EQ(
          register_memory(t, p.a, p.dev, MemKind::kHost, region.data(), 0, kRemoteRw, &mr0, &rkey0),
          HMC_PLUGIN_ERR_INVALID_ARGUMENT);
      EXPECT_EQ(t->rkey_release(k), HMC_PLUGIN_SUCCESS);
      EXPECT_EQ(deregister_memory(t, p.a, p.dev, mr), HMC_PLUGIN_SUCCESS);
      return;
    }
    hmc_net_mr_t* mr0 = reg(t, p.a, p.dev, region.data(), 0, kRemoteRw, &rkey0);
    ASSERT_NE(mr0, nullptr);
    hmc_net_rkey_t* k0 = nullptr;
    ASSERT_EQ(t->rkey_unpack(p.eb, rkey0.data(), rkey0.size(), &k0), HMC_PLUGIN_SUCCESS);
    hmc_net_request_t* r = nullptr;
    ASSERT_EQ(t->iget(p.eb, src.data(), 0, nullptr, base, k0, &r), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(t->iget(p.eb, src.data(), 1, nullptr, base, k0, &r), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(p.wait(r), HMC_PLUGIN_ERR_REMOTE) << "one byte through a zero-length region";
    EXPECT_EQ(t->rkey_release(k0), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(t->rkey_release(k), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(deregister_memory(t, p.a, p.dev, mr0), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(deregister_memory(t, p.a, p.dev, mr), HMC_PLUGIN_SUCCESS);
  });
}

// Notifications carried with the data (iput_notify), where the plugin offers them: each reaches
// the target's notify_poll only once its put's data is in place, in the order the puts were
// posted whatever their sizes (inline, streamed, empty); a refused put carries none.
TEST_P(NetLocal, PutNotificationsFollowTheirDataInOrder) {
  const hmc_net_plugin_v2_t* tab = t();
  if (offsetof(hmc_net_plugin_v2_t, notify_poll) >= tab->hdr.struct_size ||
      tab->iput_notify == nullptr)
    GTEST_SKIP() << config().plugin << " carries no put notifications (iput_notify)";
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.connect());
    std::vector<uint8_t> region(6u << 20, 0), rkey;
    hmc_net_mr_t* mr = reg(t, p.a, p.dev, region.data(), region.size(), kRemoteRw, &rkey);
    ASSERT_NE(mr, nullptr);
    hmc_net_rkey_t* k = nullptr;
    ASSERT_EQ(t->rkey_unpack(p.eb, rkey.data(), rkey.size(), &k), HMC_PLUGIN_SUCCESS);
    const uint64_t base = reinterpret_cast<uintptr_t>(region.data());
    struct Put {
      size_t offset, len;
      uint64_t value;
      bool refused;
    };
    const std::vector<Put> puts = {{0, 4u << 20, 100, false},          // streamed, posted first
                                   {5u << 20, 8, 101, false},          // inline, overtakes nothing
                                   {region.size() - 4, 8, 999, true},  // past the region
                                   {(5u << 20) + 64, 100000, 102, false},
                                   {(5u << 20) + 200000, 0, 103, false}};
    std::vector<std::vector<uint8_t>> src;
    std::vector<hmc_net_request_t*> reqs;
    for (size_t i = 0; i < puts.size(); ++i) {
      src.emplace_back(puts[i].len + 1);
      fill(src.back().data(), puts[i].len, 200 + i);
      hmc_net_request_t* r = nullptr;
      ASSERT_EQ(t->iput_notify(p.eb, src.back().data(), puts[i].len, nullptr, base + puts[i].offset,
                               k, puts[i].value, &r),
                HMC_PLUGIN_SUCCESS)
          << "put " << i;
      reqs.push_back(r);
    }
    std::vector<uint64_t> got;
    const uint64_t deadline = deadline_after(20);
    while (got.size() < 4 && mono_ns() < deadline) {
      t->progress(p.a);
      t->progress(p.b);
      uint64_t v = 0;
      hmc_plugin_status_t st = t->notify_poll(p.ea, &v);
      if (st == HMC_PLUGIN_IN_PROGRESS) continue;
      ASSERT_EQ(st, HMC_PLUGIN_SUCCESS);
      got.push_back(v);
      for (size_t i = 0; i < puts.size(); ++i) {
        if (puts[i].value == v) {
          EXPECT_EQ(first_mismatch(region.data() + puts[i].offset, puts[i].len, 200 + i), -1)
              << "notification " << v << " came before its data";
        }
      }
    }
    EXPECT_EQ(got, (std::vector<uint64_t>{100, 101, 102, 103}));
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(p.wait(reqs[i]), puts[i].refused ? HMC_PLUGIN_ERR_REMOTE : HMC_PLUGIN_SUCCESS)
          << "put " << i;
    uint64_t v = 0;
    EXPECT_EQ(t->notify_poll(p.ea, &v), HMC_PLUGIN_IN_PROGRESS) << "a notification too many";
    EXPECT_EQ(t->rkey_release(k), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(deregister_memory(t, p.a, p.dev, mr), HMC_PLUGIN_SUCCESS);
  });
}

INSTANTIATE_TEST_SUITE_P(Net, NetLocal, ::testing::ValuesIn(net_base_configs()), config_name);

// ---------------------------------------------------------------------------------------------
// The plugin table, its devices and its settings

class NetPlugin : public NetTest {};

// The table's header and slots; every setting the plugin asks the host for (none set) is
// declared in its config_vars, with a default and a help text; and the properties of every
// device it finds with its default settings: tagged messages and one-sided operations offered,
// host memory reachable, no local registration needed, indexes out of range refused, and a
// caller compiled against a shorter struct only gets the fields that fit. Once per plugin.
TEST_P(NetPlugin, TableSettingsAndDevices) {
  const hmc_net_plugin_v2_t* t = this->t();
  EXPECT_EQ(t->hdr.abi_version, HMC_NET_ABI_VERSION);
  EXPECT_EQ(t->hdr.struct_size, sizeof(hmc_net_plugin_v2_t));
  EXPECT_EQ(std::string(t->name), config().plugin);
  EXPECT_TRUE(offers_registration(t));
  for (auto slot : {reinterpret_cast<void*>(t->isend), reinterpret_cast<void*>(t->irecv),
                    reinterpret_cast<void*>(t->rkey_unpack), reinterpret_cast<void*>(t->iput),
                    reinterpret_cast<void*>(t->iget), reinterpret_cast<void*>(t->cancel),
                    reinterpret_cast<void*>(t->progress), reinterpret_cast<void*>(t->wait_fd),
                    reinterpret_cast<void*>(t->arm)})
    EXPECT_NE(slot, nullptr);
  std::vector<std::string> declared;
  for (const hmc_config_var_t* v = t->config_vars; v != nullptr && v->name != nullptr; ++v) {
    declared.push_back(v->name);
    EXPECT_NE(v->default_value, nullptr) << v->name;
    EXPECT_NE(v->help, nullptr) << v->name;
  }
  in_child([&] {
    {
      struct Recorder {
        std::vector<std::string> asked;
      } rec;
      Host host(Cfg{});
      hmc_host_services_t svc = *host.services();
      svc.host_ctx = &rec;
      svc.log = [](void*, int, const char*) {};
      svc.log_enabled = [](void*, int) { return 0; };
      svc.config_get = [](void* h, const char* name) -> const char* {
        static_cast<Recorder*>(h)->asked.push_back(name);
        return nullptr;
      };
      hmc_net_ctx_t* c = nullptr;
      hmc_plugin_status_t st = t->init(&svc, &c);
      EXPECT_TRUE(st == HMC_PLUGIN_SUCCESS || st == HMC_PLUGIN_ERR_NO_DEVICE) << st;
      EXPECT_FALSE(rec.asked.empty());
      for (const std::string& name : rec.asked)
        EXPECT_NE(std::find(declared.begin(), declared.end(), name), declared.end())
            << name << " is read but not declared in config_vars";
      if (c != nullptr) {
        EXPECT_EQ(t->finalize(c), HMC_PLUGIN_SUCCESS);
      }
    }
    Host host(Cfg{});
    hmc_net_ctx_t* c = nullptr;
    hmc_plugin_status_t st = t->init(host.services(), &c);
    if (st == HMC_PLUGIN_ERR_NO_DEVICE) skip_child("no device here: " + host.all_logs());
    ASSERT_EQ(st, HMC_PLUGIN_SUCCESS) << host.all_logs();
    int n = 0;
    ASSERT_EQ(t->device_count(c, &n), HMC_PLUGIN_SUCCESS);
    ASSERT_GE(n, 1);
    hmc_net_device_props_t p{};
    for (int d = 0; d < n; ++d) {
      p = {};
      p.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
      ASSERT_EQ(t->device_props(c, d, &p), HMC_PLUGIN_SUCCESS);
      ASSERT_NE(p.name, nullptr);
      SCOPED_TRACE(p.name);
      EXPECT_TRUE(p.flags & HMC_NET_FLAG_TAGGED);
      EXPECT_TRUE(p.flags & HMC_NET_FLAG_RMA);
      EXPECT_FALSE(p.flags & HMC_NET_FLAG_NEEDS_REG) << "the tests pass no local registrations";
      EXPECT_EQ(device_mem_kinds(p).count(MemKind::kHost), 1u);
    }
    EXPECT_EQ(t->device_props(c, n, &p), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(t->device_props(c, -1, &p), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    p = {};
    p.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
    ASSERT_EQ(t->device_props(c, 0, &p), HMC_PLUGIN_SUCCESS);
    ASSERT_NO_FATAL_FAILURE(expect_short_device_props(t, c, HMC_NET_ABI_VERSION, p.name));
    EXPECT_EQ(t->finalize(c), HMC_PLUGIN_SUCCESS);
  });
}

INSTANTIATE_TEST_SUITE_P(Net, NetPlugin, ::testing::ValuesIn(net_plugin_firsts()), plugin_name);

// Each setting that a plugin refuses (configs.cpp) fails its init with CONFIG, alone, making no
// context, and a log line names the setting. Each runs in a child process (libfabric starts
// threads that a later fork would not carry).
class NetSettings : public ::testing::TestWithParam<RefusedSettings> {};

TEST_P(NetSettings, InvalidValuesFailInitNamingTheVariable) {
  const RefusedSettings& r = GetParam();
  const hmc_net_plugin_v2_t* t = nullptr;
  NET_REQUIRE_PLUGIN(r.plugin, &t);
  in_child([&] { expect_settings_refused(t, r.bad, r.print_level); });
}

INSTANTIATE_TEST_SUITE_P(Net, NetSettings, ::testing::ValuesIn(net_refused_settings()),
                         [](const ::testing::TestParamInfo<RefusedSettings>& info) {
                           return info.param.plugin;
                         });

}  // namespace
}  // namespace net_test
