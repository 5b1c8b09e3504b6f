// Tests for plugins/net-hoststage (the host-memory transport), driven through its C ABI only:
// the plugin is dlopened from the build tree and each connection runs its two sides in two
// processes (fork before any thread; the child reports through its exit code), or in two
// contexts of one process where that is enough. Parameterised over the tcp device (streams 1, 2
// (default), 4, and interface binding) and the shm device (with and without cross-memory attach).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hoststage/harness.h"

namespace {

using hs_test::fill;
using hs_test::first_mismatch;
using hs_test::Host;
using hs_test::mono_ns;
using hs_test::Side;

using Cfg = std::map<std::string, std::string>;

constexpr int kTcp = 0;
constexpr int kShm = 1;
constexpr size_t kTcpEager = 64 << 10;
constexpr size_t kShmEager = 16 << 10;

// The plugin's table; a missing or broken build of it ends the test process with the reason.
const hmc_net_plugin_v2_t* T() {
  std::string err;
  const hmc_net_plugin_v2_t* t = hs_test::plugin(&err);
  if (t == nullptr) {
    std::fprintf(stderr, "cannot load the hoststage plugin from %s: %s\n", HMC_TEST_PLUGIN_DIR,
                 err.c_str());
    std::abort();
  }
  return t;
}

struct Variant {
  std::string name;
  int dev;
  std::map<std::string, std::string> cfg;
  size_t eager;
};

void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.name;
}

std::map<std::string, std::string> base_cfg() {
  return {{"HMC_HOSTSTAGE_EAGER_LIMIT", std::to_string(kTcpEager)},
          {"HMC_HOSTSTAGE_SHM_EAGER_LIMIT", std::to_string(kShmEager)}};
}

Variant make_variant(const std::string& name, int dev,
                     std::map<std::string, std::string> extra = {}) {
  Variant v{name, dev, base_cfg(), dev == kTcp ? kTcpEager : kShmEager};
  for (auto& kv : extra) v.cfg[kv.first] = kv.second;
  return v;
}

std::vector<Variant> all_variants() {
  return {
      make_variant("tcp", kTcp),
      make_variant("tcp_streams1", kTcp, {{"HMC_HOSTSTAGE_STREAMS", "1"}}),
      make_variant("tcp_streams4", kTcp,
                   {{"HMC_HOSTSTAGE_STREAMS", "4"}, {"HMC_HOSTSTAGE_CHUNK", "256K"}}),
      make_variant("tcp_ifnames_lo", kTcp,
                   {{"HMC_HOSTSTAGE_STREAMS", "3"}, {"HMC_HOSTSTAGE_IFNAMES", "lo,lo"}}),
      make_variant("shm", kShm),
      make_variant("shm_nocma", kShm,
                   {{"HMC_HOSTSTAGE_SHM_CMA", "0"}, {"HMC_HOSTSTAGE_SHM_CHUNK", "256K"}}),
  };
}

int child_exit() {
  return ::testing::Test::HasFailure() ? 1 : 0;
}

class HoststagePair : public ::testing::TestWithParam<Variant> {
 protected:
  size_t eager() const { return GetParam().eager; }

  // Runs parent (listener) and child (connector) in two processes. killed_by: the signal the
  // child is meant to die of (0: it must exit cleanly).
  void run(const std::function<void(Side&)>& parent, const std::function<void(Side&)>& child,
           double timeout_s = 60, int killed_by = 0) {
    hs_test::PairResult r =
        hs_test::run_pair(GetParam().cfg, GetParam().dev, parent, child, child_exit, timeout_s);
    ASSERT_EQ(r.parent_setup_error, "");
    ASSERT_FALSE(r.child_timed_out) << "the child side did not finish within " << timeout_s << " s";
    if (killed_by != 0) {
      ASSERT_TRUE(WIFSIGNALED(r.child_status) && WTERMSIG(r.child_status) == killed_by)
          << "the child side should have died of signal " << killed_by << " (its output is above)";
      return;
    }
    ASSERT_TRUE(WIFEXITED(r.child_status))
        << "the child side died of signal " << WTERMSIG(r.child_status);
    EXPECT_EQ(WEXITSTATUS(r.child_status), 0) << "the child side failed (its output is above)";
  }
};

std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  return info.param.name;
}

// Posts receives for sizes[i] under tag base+i, signals the peer, checks pattern seed+i.
void receive_sizes(Side& s, const std::vector<size_t>& sizes, uint64_t tag_base, uint64_t seed) {
  std::vector<std::vector<uint8_t>> bufs(sizes.size());
  std::vector<hmc_net_request_t*> reqs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    bufs[i].assign(std::max<size_t>(sizes[i], 1), 0xee);
    hmc_net_request_t* r = s.irecv(bufs[i].data(), sizes[i], tag_base + i);
    ASSERT_NE(r, nullptr) << "irecv of " << sizes[i] << " bytes: " << s.last_post();
    reqs.push_back(r);
  }
  ASSERT_TRUE(s.signal());
  std::vector<size_t> bytes;
  auto st = s.wait_all(reqs, &bytes);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS) << "receive of " << sizes[i] << " bytes";
    EXPECT_EQ(bytes[i], sizes[i]);
    EXPECT_EQ(first_mismatch(bufs[i].data(), sizes[i], seed + i), -1)
        << "receive of " << sizes[i] << " bytes: data differs";
  }
}

void send_sizes(Side& s, const std::vector<size_t>& sizes, uint64_t tag_base, uint64_t seed) {
  std::vector<std::vector<uint8_t>> bufs(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    bufs[i].resize(std::max<size_t>(sizes[i], 1));
    fill(bufs[i].data(), sizes[i], seed + i);
  }
  ASSERT_TRUE(s.await());  // the peer posted its receives
  std::vector<hmc_net_request_t*> reqs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    hmc_net_request_t* r = s.isend(bufs[i].data(), sizes[i], tag_base + i);
    ASSERT_NE(r, nullptr) << "isend of " << sizes[i] << " bytes: " << s.last_post();
    reqs.push_back(r);
  }
  std::vector<size_t> bytes;
  auto st = s.wait_all(reqs, &bytes);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS) << "send of " << sizes[i] << " bytes";
    EXPECT_EQ(bytes[i], sizes[i]);
  }
}

TEST_P(HoststagePair, SendRecvSizesBothDirections) {
  const size_t e = eager();
  const std::vector<size_t> sizes = {0, 1, 8, e - 1, e, e + 1, (1u << 20) + 7, 64u << 20};
  run(
      [&](Side& s) {
        receive_sizes(s, sizes, 100, 1000);
        send_sizes(s, sizes, 200, 2000);
      },
      [&](Side& s) {
        send_sizes(s, sizes, 100, 1000);
        receive_sizes(s, sizes, 200, 2000);
      });
}

// Messages with the same tag match receives in send order, across eager and rendezvous sizes,
// whether the receive was posted before or after the message arrived.
TEST_P(HoststagePair, SameTagFifoAndOutOfOrderTags) {
  const size_t e = eager();
  constexpr int kN = 30;
  constexpr uint64_t kTagA = 5, kTagB = 6;
  auto size_of = [e](int k) -> size_t {
    return k % 3 == 0 ? 3 * e + k : (k % 3 == 1 ? 16 + k : e);
  };
  run(
      [&](Side& s) {
        // Phase 1: post all B receives first; the A messages arrive unexpected meanwhile.
        std::vector<std::vector<uint8_t>> bufs(kN);
        std::vector<hmc_net_request_t*> b_reqs, a_reqs;
        for (int k = 1; k < kN; k += 2) {
          bufs[k].resize(4 * e);
          b_reqs.push_back(s.irecv(bufs[k].data(), bufs[k].size(), kTagB));
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
        for (int k = 0; k < kN; k += 2) {
          bufs[k].resize(4 * e);
          a_reqs.push_back(s.irecv(bufs[k].data(), bufs[k].size(), kTagA));
        }
        st = s.wait_all(a_reqs, &bytes);
        for (size_t j = 0; j < a_reqs.size(); ++j) {
          int k = static_cast<int>(2 * j);
          EXPECT_EQ(st[j], HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(bytes[j], size_of(k)) << "A receive " << j << " got the wrong message";
          EXPECT_EQ(first_mismatch(bufs[k].data(), size_of(k), 500 + k), -1) << "message " << k;
        }
        // Phase 2: receives for tags 30..21 posted in reverse; the peer sends 21..30.
        std::vector<std::vector<uint8_t>> r2(10, std::vector<uint8_t>(2 * e));
        std::vector<hmc_net_request_t*> reqs2;
        for (int t = 30; t >= 21; --t) reqs2.push_back(s.irecv(r2[30 - t].data(), 2 * e, t));
        ASSERT_TRUE(s.signal());
        st = s.wait_all(reqs2, &bytes);
        for (int t = 30; t >= 21; --t) {
          size_t i = static_cast<size_t>(30 - t);
          size_t want = t % 2 ? 2 * e : 100;
          EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS);
          EXPECT_EQ(bytes[i], want) << "tag " << t;
          EXPECT_EQ(first_mismatch(r2[i].data(), want, 900 + t), -1) << "tag " << t;
        }
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
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        std::vector<std::vector<uint8_t>> b2(31);
        std::vector<hmc_net_request_t*> reqs2;
        ASSERT_TRUE(s.await());
        for (int t = 21; t <= 30; ++t) {
          size_t n = t % 2 ? 2 * e : 100;
          b2[t].resize(n);
          fill(b2[t].data(), n, 900 + t);
          reqs2.push_back(s.isend(b2[t].data(), n, t));
        }
        for (auto st : s.wait_all(reqs2)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
      });
}

// Messages sent before any receive was posted: eager data is buffered, a rendezvous request
// waits; the receives posted later get them intact.
TEST_P(HoststagePair, UnexpectedMessages) {
  const size_t e = eager();
  const size_t big = 256 << 10;
  run(
      [&](Side& s) {
        std::vector<uint8_t> marker(8), small(e), large(big + 1);
        hmc_net_request_t* m = s.irecv(marker.data(), marker.size(), 12);
        ASSERT_NE(m, nullptr);
        // The marker travels behind both on the ordered control channel: once it is here, the
        // other two were already received as unexpected messages.
        ASSERT_EQ(s.wait(m), HMC_PLUGIN_SUCCESS);
        size_t b1 = 0, b2 = 0;
        hmc_net_request_t* rl = s.irecv(large.data(), large.size(), 11);
        hmc_net_request_t* rs = s.irecv(small.data(), small.size(), 10);
        ASSERT_NE(rl, nullptr);
        ASSERT_NE(rs, nullptr);
        EXPECT_EQ(s.wait(rs, &b1), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(s.wait(rl, &b2), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(b1, e);
        EXPECT_EQ(b2, big);
        EXPECT_EQ(first_mismatch(small.data(), e, 10), -1);
        EXPECT_EQ(first_mismatch(large.data(), big, 11), -1);
        EXPECT_EQ(first_mismatch(marker.data(), 8, 12), -1);
      },
      [&](Side& s) {
        std::vector<uint8_t> small(e), large(big), marker(8);
        fill(small.data(), e, 10);
        fill(large.data(), big, 11);
        fill(marker.data(), 8, 12);
        std::vector<hmc_net_request_t*> reqs = {s.isend(small.data(), e, 10),
                                                s.isend(large.data(), big, 11),
                                                s.isend(marker.data(), 8, 12)};
        for (auto* r : reqs) ASSERT_NE(r, nullptr);
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
      });
}

// A receive buffer smaller than the message ends the receive with TRUNCATED (the buffer holds
// the message's first bytes), the send succeeds, and later messages still arrive intact.
TEST_P(HoststagePair, Truncation) {
  const size_t e = eager();
  struct Case {
    uint64_t tag;
    size_t msg;
    size_t buf;
  };
  const std::vector<Case> posted = {{1, 100, 50},  {2, 1 << 20, 1000},        {3, 2 * e, 0},
                                    {4, e, e / 2}, {5, 300 << 10, 300 << 10}, {6, 5, 5}};
  const std::vector<Case> late = {{7, 200, 10}, {9, 4 * e, 10}};  // unexpected, then truncated
  run(
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs;
        std::vector<hmc_net_request_t*> reqs;
        for (const Case& c : posted) {
          bufs.emplace_back(std::max<size_t>(c.buf, 1) + 64, 0xab);
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
          // A truncated receive reports the length that was sent (net.h).
          EXPECT_EQ(bytes[i], c.msg) << "tag " << c.tag;
          EXPECT_EQ(first_mismatch(bufs[i].data(), std::min(c.msg, c.buf), 300 + c.tag), -1);
          // Nothing past the posted length was written.
          for (size_t k = c.buf; k < bufs[i].size(); ++k)
            ASSERT_EQ(bufs[i][k], 0xab) << "tag " << c.tag << " wrote past its buffer at " << k;
        }
        std::vector<uint8_t> marker(8);
        ASSERT_EQ(s.wait(s.irecv(marker.data(), 8, 8)), HMC_PLUGIN_SUCCESS);
        for (const Case& c : late) {
          std::vector<uint8_t> b(c.buf + 16, 0xab);
          size_t n = 0;
          EXPECT_EQ(s.wait(s.irecv(b.data(), c.buf, c.tag), &n), HMC_PLUGIN_ERR_TRUNCATED);
          EXPECT_EQ(n, c.msg);  // the length that was sent
          EXPECT_EQ(first_mismatch(b.data(), c.buf, 300 + c.tag), -1);
          EXPECT_EQ(b[c.buf], 0xab);
        }
        // The stream is still in sync.
        std::vector<uint8_t> after(3 * e);
        size_t n = 0;
        EXPECT_EQ(s.wait(s.irecv(after.data(), after.size(), 10), &n), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(n, 3 * e);
        EXPECT_EQ(first_mismatch(after.data(), 3 * e, 310), -1);
      },
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs;
        std::vector<hmc_net_request_t*> reqs;
        auto send = [&](uint64_t tag, size_t n) {
          bufs.emplace_back(std::max<size_t>(n, 1));
          fill(bufs.back().data(), n, 300 + tag);
          reqs.push_back(s.isend(bufs.back().data(), n, tag));
          ASSERT_NE(reqs.back(), nullptr);
        };
        bufs.reserve(16);
        ASSERT_TRUE(s.await());
        for (const Case& c : posted) send(c.tag, c.msg);
        for (const Case& c : late) send(c.tag, c.msg);
        send(8, 8);
        send(10, 3 * e);
        std::vector<size_t> bytes;
        auto st = s.wait_all(reqs, &bytes);
        for (size_t i = 0; i < st.size(); ++i) EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS) << "send " << i;
      });
}

TEST_P(HoststagePair, CancelUnmatchedReceive) {
  const size_t e = eager();
  run(
      [&](Side& s) {
        std::vector<uint8_t> b1(64), b3(64);
        hmc_net_request_t* r1 = s.irecv(b1.data(), 64, 77);
        ASSERT_NE(r1, nullptr);
        ASSERT_EQ(T()->cancel(r1), HMC_PLUGIN_SUCCESS);
        size_t n = 99;
        EXPECT_EQ(s.wait(r1, &n), HMC_PLUGIN_ERR_CANCELLED);
        EXPECT_EQ(n, 0u);
        // A message with the cancelled tag goes to the next receive, not the cancelled one.
        hmc_net_request_t* r3 = s.irecv(b3.data(), 64, 77);
        ASSERT_NE(r3, nullptr);
        std::vector<uint8_t> big(4 * e);
        fill(big.data(), big.size(), 79);
        hmc_net_request_t* snd = s.isend(big.data(), big.size(), 79);
        ASSERT_NE(snd, nullptr);
        ASSERT_TRUE(s.signal());
        EXPECT_EQ(s.wait(r3, &n), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(n, 64u);
        EXPECT_EQ(first_mismatch(b3.data(), 64, 77), -1);
        // Sends cannot be cancelled: they end normally.
        EXPECT_EQ(T()->cancel(snd), HMC_PLUGIN_ERR_NOT_SUPPORTED);
        EXPECT_EQ(s.wait(snd), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.await());
      },
      [&](Side& s) {
        std::vector<uint8_t> m(64), big(4 * e);
        fill(m.data(), 64, 77);
        ASSERT_TRUE(s.await());
        EXPECT_EQ(s.wait(s.isend(m.data(), 64, 77)), HMC_PLUGIN_SUCCESS);
        size_t n = 0;
        EXPECT_EQ(s.wait(s.irecv(big.data(), big.size(), 79), &n), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(n, big.size());
        EXPECT_EQ(first_mismatch(big.data(), big.size(), 79), -1);
        ASSERT_TRUE(s.signal());
      });
}

// 256 sends and 256 receives in flight in each direction at once, mixed sizes, receives posted
// in reverse tag order.
TEST_P(HoststagePair, ManyRequestsInFlight) {
  const size_t e = eager();
  constexpr int kN = 256;
  auto size_of = [e](int i) -> size_t {
    return i % 17 == 0 ? 0 : (static_cast<size_t>(i) * 7919) % (3 * e);
  };
  auto both = [&](Side& s, uint64_t my_seed, uint64_t peer_seed) {
    std::vector<std::vector<uint8_t>> rb(kN), sb(kN);
    std::vector<hmc_net_request_t*> reqs;
    for (int i = kN - 1; i >= 0; --i) {
      rb[i].resize(std::max<size_t>(size_of(i), 1));
      reqs.push_back(s.irecv(rb[i].data(), size_of(i), static_cast<uint64_t>(i)));
      ASSERT_NE(reqs.back(), nullptr);
    }
    ASSERT_TRUE(s.signal());
    ASSERT_TRUE(s.await());
    for (int i = 0; i < kN; ++i) {
      sb[i].resize(std::max<size_t>(size_of(i), 1));
      fill(sb[i].data(), size_of(i), my_seed + i);
      reqs.push_back(s.isend(sb[i].data(), size_of(i), static_cast<uint64_t>(i)));
      ASSERT_NE(reqs.back(), nullptr);
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

// Registration shipped to the peer as {base address, packed rkey}.
struct RemoteRegion {
  uint64_t base;
  std::vector<uint8_t> rkey;
};

void send_region(Side& s, uint64_t base, const uint8_t* rkey, size_t len) {
  ASSERT_TRUE(s.send_value(base));
  ASSERT_TRUE(s.ctl_send(rkey, len));
}

RemoteRegion recv_region(Side& s) {
  RemoteRegion r{};
  EXPECT_TRUE(s.recv_value(&r.base));
  EXPECT_TRUE(s.ctl_recv(&r.rkey));
  return r;
}

hmc_net_mr_t* reg(Side& s, void* addr, size_t len, uint32_t access, std::vector<uint8_t>* rkey) {
  hmc_net_mem_desc_t d{};
  d.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_mem_desc_t);
  d.addr = addr;
  d.len = len;
  d.iface = HMC_MEM_IFACE_HOST;
  d.access = access;
  d.dmabuf_fd = -1;
  d.device_ordinal = -1;
  hmc_net_mr_t* mr = nullptr;
  rkey->assign(HMC_NET_RKEY_MAX, 0);
  size_t n = 0;
  EXPECT_EQ(T()->reg_mr(s.ctx(), s.dev(), &d, &mr, rkey->data(), &n), HMC_PLUGIN_SUCCESS);
  EXPECT_GT(n, 0u);
  EXPECT_LE(n, HMC_NET_RKEY_MAX);
  rkey->resize(n);
  return mr;
}

hmc_net_rkey_t* unpack(Side& s, const std::vector<uint8_t>& packed) {
  hmc_net_rkey_t* k = nullptr;
  EXPECT_EQ(T()->rkey_unpack(s.ep(), packed.data(), packed.size(), &k), HMC_PLUGIN_SUCCESS);
  return k;
}

hmc_plugin_status_t put(Side& s, const void* buf, size_t len, uint64_t addr, hmc_net_rkey_t* k) {
  hmc_net_request_t* r = nullptr;
  hmc_plugin_status_t st = T()->iput(s.ep(), buf, len, nullptr, addr, k, &r);
  return st != HMC_PLUGIN_SUCCESS ? st : s.wait(r);
}

hmc_plugin_status_t get(Side& s, void* buf, size_t len, uint64_t addr, hmc_net_rkey_t* k) {
  hmc_net_request_t* r = nullptr;
  hmc_plugin_status_t st = T()->iget(s.ep(), buf, len, nullptr, addr, k, &r);
  return st != HMC_PLUGIN_SUCCESS ? st : s.wait(r);
}

TEST_P(HoststagePair, PutGetByteExact) {
  constexpr size_t kRegion = 16 << 20;
  constexpr size_t kOffA = 5, kLenA = 100;
  constexpr size_t kOffB = (1 << 20) + 1, kLenB = (8 << 20) + 3;
  constexpr size_t kOffC = 12 << 20, kLenC = 4096;
  run(
      [&](Side& s) {
        std::vector<uint8_t> region(kRegion);
        fill(region.data(), kRegion, 7);
        std::vector<uint8_t> rkey;
        hmc_net_mr_t* mr = reg(
            s, region.data(), kRegion,
            HMC_NET_ACCESS_LOCAL | HMC_NET_ACCESS_REMOTE_READ | HMC_NET_ACCESS_REMOTE_WRITE, &rkey);
        ASSERT_NE(mr, nullptr);
        send_region(s, reinterpret_cast<uintptr_t>(region.data()), rkey.data(), rkey.size());
        ASSERT_TRUE(s.await());  // the peer's puts and gets are done
        const uint8_t* p = region.data();
        EXPECT_EQ(first_mismatch(p, kOffA, 7), -1);
        EXPECT_EQ(first_mismatch(p + kOffA, kLenA, 8), -1);
        EXPECT_EQ(first_mismatch(p + kOffA + kLenA, kOffB - kOffA - kLenA, 7, kOffA + kLenA), -1);
        EXPECT_EQ(first_mismatch(p + kOffB, kLenB, 9), -1);
        EXPECT_EQ(first_mismatch(p + kOffB + kLenB, kRegion - kOffB - kLenB, 7, kOffB + kLenB), -1);
        EXPECT_EQ(T()->dereg_mr(s.ctx(), mr), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        RemoteRegion rr = recv_region(s);
        hmc_net_rkey_t* k = unpack(s, rr.rkey);
        ASSERT_NE(k, nullptr);
        std::vector<uint8_t> a(kLenA), b(kLenB), c(kLenC);
        fill(a.data(), kLenA, 8);
        fill(b.data(), kLenB, 9);
        // Several in flight at once, plus a zero-length put.
        hmc_net_request_t *ra = nullptr, *rb = nullptr, *r0 = nullptr;
        ASSERT_EQ(T()->iput(s.ep(), a.data(), kLenA, nullptr, rr.base + kOffA, k, &ra),
                  HMC_PLUGIN_SUCCESS);
        ASSERT_EQ(T()->iput(s.ep(), b.data(), kLenB, nullptr, rr.base + kOffB, k, &rb),
                  HMC_PLUGIN_SUCCESS);
        ASSERT_EQ(T()->iput(s.ep(), a.data(), 0, nullptr, rr.base, k, &r0), HMC_PLUGIN_SUCCESS);
        std::vector<size_t> bytes;
        auto st = s.wait_all({ra, rb, r0}, &bytes);
        EXPECT_EQ(st[0], HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(st[1], HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(st[2], HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(bytes[1], kLenB);
        // Read everything back.
        std::fill(a.begin(), a.end(), 0);
        std::fill(b.begin(), b.end(), 0);
        EXPECT_EQ(get(s, a.data(), kLenA, rr.base + kOffA, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(get(s, b.data(), kLenB, rr.base + kOffB, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(get(s, c.data(), kLenC, rr.base + kOffC, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(get(s, c.data(), 0, rr.base + kRegion, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(a.data(), kLenA, 8), -1);
        EXPECT_EQ(first_mismatch(b.data(), kLenB, 9), -1);
        EXPECT_EQ(first_mismatch(c.data(), kLenC, 7, kOffC), -1);
        EXPECT_EQ(T()->rkey_release(k), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      });
}

// The owner refuses out-of-bounds ranges, unknown or deregistered keys and accesses the region
// does not allow, with REMOTE at the initiator, and never touches its memory for them.
TEST_P(HoststagePair, RemoteAccessChecks) {
  const size_t e = eager();
  // Four regions with unregistered gaps between them, inside one arena.
  constexpr size_t kArena = 2560 << 10, kReg = 256 << 10;
  constexpr size_t kRw = 256 << 10, kRo = 768 << 10, kWo = 1280 << 10, kDead = 1792 << 10;
  const size_t put_ok_off = 100, put_ok_len = 2 * e;  // the successful put into RW
  constexpr size_t kWoLen = 1000;                     // the successful put into WO
  run(
      [&](Side& s) {
        std::vector<uint8_t> arena(kArena);
        fill(arena.data(), kArena, 20);
        uint8_t* a = arena.data();
        std::vector<uint8_t> k_rw, k_ro, k_wo, k_dead;
        using A = uint32_t;
        A rw = HMC_NET_ACCESS_REMOTE_READ | HMC_NET_ACCESS_REMOTE_WRITE;
        hmc_net_mr_t* m_rw = reg(s, a + kRw, kReg, rw, &k_rw);
        hmc_net_mr_t* m_ro = reg(s, a + kRo, kReg, HMC_NET_ACCESS_REMOTE_READ, &k_ro);
        hmc_net_mr_t* m_wo = reg(s, a + kWo, kReg, HMC_NET_ACCESS_REMOTE_WRITE, &k_wo);
        hmc_net_mr_t* m_dead = reg(s, a + kDead, kReg, rw, &k_dead);
        ASSERT_EQ(T()->dereg_mr(s.ctx(), m_dead), HMC_PLUGIN_SUCCESS);
        send_region(s, reinterpret_cast<uintptr_t>(a + kRw), k_rw.data(), k_rw.size());
        send_region(s, reinterpret_cast<uintptr_t>(a + kRo), k_ro.data(), k_ro.size());
        send_region(s, reinterpret_cast<uintptr_t>(a + kWo), k_wo.data(), k_wo.size());
        send_region(s, reinterpret_cast<uintptr_t>(a + kDead), k_dead.data(), k_dead.size());
        ASSERT_TRUE(s.await());
        // Everything is as filled, except the two puts that were allowed.
        auto expect_seed = [&](size_t from, size_t to, uint64_t seed, size_t pat_off) {
          EXPECT_EQ(first_mismatch(a + from, to - from, seed, pat_off), -1)
              << "arena bytes [" << from << ", " << to << ")";
        };
        expect_seed(0, kRw + put_ok_off, 20, 0);
        expect_seed(kRw + put_ok_off, kRw + put_ok_off + put_ok_len, 22, 0);
        expect_seed(kRw + put_ok_off + put_ok_len, kWo, 20, kRw + put_ok_off + put_ok_len);
        expect_seed(kWo, kWo + kWoLen, 21, 0);
        expect_seed(kWo + kWoLen, kArena, 20, kWo + kWoLen);
        for (hmc_net_mr_t* m : {m_rw, m_ro, m_wo})
          EXPECT_EQ(T()->dereg_mr(s.ctx(), m), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
      },
      [&](Side& s) {
        RemoteRegion rw = recv_region(s), ro = recv_region(s), wo = recv_region(s),
                     dead = recv_region(s);
        hmc_net_rkey_t* k_rw = unpack(s, rw.rkey);
        hmc_net_rkey_t* k_ro = unpack(s, ro.rkey);
        hmc_net_rkey_t* k_wo = unpack(s, wo.rkey);
        hmc_net_rkey_t* k_dead = unpack(s, dead.rkey);
        std::vector<uint8_t> forged = rw.rkey;
        forged[8] ^= 0x5a;  // the key bytes of the packed rkey
        forged[15] ^= 0xa5;
        hmc_net_rkey_t* k_bad = unpack(s, forged);
        ASSERT_TRUE(k_rw && k_ro && k_wo && k_dead && k_bad);

        std::vector<uint8_t> src(4 * e + 64), dst(4 * e + 64);
        fill(src.data(), src.size(), 99);
        const size_t small = 10, large = 2 * e;
        struct Bad {
          const char* what;
          uint64_t addr;
          size_t len;
          hmc_net_rkey_t* key;
        };
        const std::vector<Bad> bad = {
            {"before the region", rw.base - 1, small, k_rw},
            {"past the end", rw.base + kReg - 5, small, k_rw},
            {"large, past the end", rw.base + kReg - 5, large, k_rw},
            {"large, before the region", rw.base - 64, large, k_rw},
            {"address wraps around", UINT64_MAX - 4, small, k_rw},
            {"wrong key", rw.base, small, k_bad},
            {"wrong key, large", rw.base, large, k_bad},
            {"wrong key, zero length", rw.base, 0, k_bad},
            {"deregistered", dead.base, small, k_dead},
            {"deregistered, large", dead.base, large, k_dead},
        };
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
        // What the flags allow works.
        EXPECT_EQ(get(s, dst.data(), large, ro.base + 8, k_ro), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(dst.data(), large, 20, kRo + 8), -1);
        std::vector<uint8_t> w(kWoLen);
        fill(w.data(), kWoLen, 21);
        EXPECT_EQ(put(s, w.data(), kWoLen, wo.base, k_wo), HMC_PLUGIN_SUCCESS);
        std::vector<uint8_t> ok(put_ok_len);
        fill(ok.data(), put_ok_len, 22);
        EXPECT_EQ(put(s, ok.data(), put_ok_len, rw.base + put_ok_off, k_rw), HMC_PLUGIN_SUCCESS);
        for (hmc_net_rkey_t* k : {k_rw, k_ro, k_wo, k_dead, k_bad})
          EXPECT_EQ(T()->rkey_release(k), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
      });
}

// The peer is SIGKILLed in the middle of sending a large message: every pending request ends
// with PEER_LOST within the timeout, later posts fail with it, and writing to the dead
// connection raises no SIGPIPE (the test process would die of it).
TEST_P(HoststagePair, PeerKilledMidTransfer) {
  const size_t e = eager();
  constexpr size_t kBig = 512u << 20;
  run(
      [&](Side& s) {
        void* big = mmap(nullptr, kBig, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(big, MAP_FAILED);
        std::vector<uint8_t> small(64), out(4 * e);
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
        EXPECT_LT(secs, 6.0) << "peer death noticed only after " << secs << " s";
        // Later posts fail with PEER_LOST (at post time, or as the request's result).
        hmc_net_request_t* r = nullptr;
        hmc_plugin_status_t post = T()->isend(s.ep(), small.data(), small.size(), nullptr, 4, &r);
        if (post == HMC_PLUGIN_SUCCESS) post = s.wait(r);
        EXPECT_EQ(post, HMC_PLUGIN_ERR_PEER_LOST);
        munmap(big, kBig);
      },
      [&](Side& s) {
        // Untouched anonymous memory: nothing to fill, reads as zeros.
        void* big = mmap(nullptr, kBig, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(big, MAP_FAILED);
        ASSERT_TRUE(s.await());
        hmc_net_request_t* r = s.isend(big, kBig, 1);
        ASSERT_NE(r, nullptr);
        for (int i = 0; i < 5; ++i) T()->progress(s.ctx());
        // Anything that failed so far must not be hidden by the kill.
        if (::testing::Test::HasFailure()) _exit(1);
        raise(SIGKILL);
      },
      30, SIGKILL);
}

// Sending into a connection whose peer process died without reading: no SIGPIPE, PEER_LOST.
TEST_P(HoststagePair, WritesToDeadPeerFailCleanly) {
  run(
      [&](Side& s) {
        ASSERT_TRUE(s.await());  // the child is about to die
        // Its end of the control socket closing tells us it is gone.
        std::vector<uint8_t> ignored;
        EXPECT_FALSE(s.ctl_recv(&ignored, 10));
        std::vector<uint8_t> buf(1024, 1);
        hmc_plugin_status_t st = HMC_PLUGIN_SUCCESS;
        for (int i = 0; i < 10000 && st == HMC_PLUGIN_SUCCESS; ++i) {
          hmc_net_request_t* r = nullptr;
          st = T()->isend(s.ep(), buf.data(), buf.size(), nullptr, 1, &r);
          if (st == HMC_PLUGIN_SUCCESS) st = s.wait(r, nullptr, 10);
        }
        EXPECT_EQ(st, HMC_PLUGIN_ERR_PEER_LOST);
      },
      [&](Side& s) {
        if (!s.signal()) _exit(1);
        raise(SIGKILL);
      },
      30, SIGKILL);
}

// close_ep with requests pending returns at once; the peer's pending requests end PEER_LOST.
TEST_P(HoststagePair, CloseWithPendingRequests) {
  const size_t e = eager();
  run(
      [&](Side& s) {
        std::vector<uint8_t> b(64), out(4 * e);
        ASSERT_NE(s.irecv(b.data(), b.size(), 1), nullptr);
        ASSERT_NE(s.isend(out.data(), out.size(), 2), nullptr);
        ASSERT_TRUE(s.await());
        uint64_t t0 = mono_ns();
        s.close_ep();
        EXPECT_LT(mono_ns() - t0, 500000000ull) << "close_ep blocked";
        ASSERT_TRUE(s.await());
      },
      [&](Side& s) {
        std::vector<uint8_t> b(64);
        hmc_net_request_t* r = s.irecv(b.data(), b.size(), 5);
        ASSERT_NE(r, nullptr);
        ASSERT_TRUE(s.signal());
        EXPECT_EQ(s.wait(r, nullptr, 10), HMC_PLUGIN_ERR_PEER_LOST);
        hmc_net_request_t* r2 = nullptr;
        EXPECT_EQ(T()->irecv(s.ep(), b.data(), b.size(), nullptr, 6, &r2),
                  HMC_PLUGIN_ERR_PEER_LOST);
        ASSERT_TRUE(s.signal());
      });
}

// A peer that sends and then closes at once: everything it sent is still delivered (the EOF of
// one stream must not overtake data queued on another), and only then do requests fail. The
// receiver does not progress until the peer is gone, so all of it is pending at once. Messages
// that arrived whole before the end can even be received after it.
TEST_P(HoststagePair, SendThenCloseDeliversEverything) {
  constexpr int kN = 64;
  constexpr int kLate = 8;  // messages kN..kN+kLate-1 are received only after the peer is gone
  auto size_of = [](int i) -> size_t { return static_cast<size_t>(i) * 37; };  // all eager
  run(
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs(kN + kLate + 1);
        std::vector<hmc_net_request_t*> reqs;
        for (int i = 0; i <= kN; ++i) {
          const int tag = i < kN ? i : 1000;  // tag 1000 is never sent
          bufs[i].resize(std::max<size_t>(size_of(i), 1));
          reqs.push_back(s.irecv(bufs[i].data(), size_of(i), static_cast<uint64_t>(tag)));
          ASSERT_NE(reqs.back(), nullptr);
        }
        ASSERT_TRUE(s.signal());
        // Block on the control socket without progressing the plugin until the peer closed.
        uint8_t buf[5];
        size_t got = 0;
        while (got < sizeof(buf)) {
          ssize_t n = recv(s.ctl(), buf + got, sizeof(buf) - got, 0);
          ASSERT_GT(n, 0);
          got += static_cast<size_t>(n);
        }
        std::vector<size_t> bytes;
        auto st = s.wait_all(reqs, &bytes);
        for (int i = 0; i < kN; ++i) {
          EXPECT_EQ(st[i], HMC_PLUGIN_SUCCESS) << "message " << i;
          EXPECT_EQ(bytes[i], size_of(i));
          EXPECT_EQ(first_mismatch(bufs[i].data(), size_of(i), 40 + i), -1) << "message " << i;
        }
        EXPECT_EQ(st[kN], HMC_PLUGIN_ERR_PEER_LOST) << "the receive the peer never matched";
        for (int i = kN; i < kN + kLate; ++i) {
          std::vector<uint8_t> b(size_of(i));
          size_t n = 0;
          EXPECT_EQ(s.wait(s.irecv(b.data(), b.size(), static_cast<uint64_t>(i)), &n),
                    HMC_PLUGIN_SUCCESS)
              << "buffered message " << i;
          EXPECT_EQ(n, size_of(i));
          EXPECT_EQ(first_mismatch(b.data(), size_of(i), 40 + i), -1);
        }
        std::vector<uint8_t> b(8);
        EXPECT_EQ(s.irecv(b.data(), 8, kN), nullptr) << "nothing buffered: the post must fail";
        EXPECT_EQ(s.last_post(), HMC_PLUGIN_ERR_PEER_LOST);
      },
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs(kN + kLate);
        std::vector<hmc_net_request_t*> reqs;
        ASSERT_TRUE(s.await());
        for (int i = 0; i < kN + kLate; ++i) {
          bufs[i].resize(std::max<size_t>(size_of(i), 1));
          fill(bufs[i].data(), size_of(i), 40 + i);
          reqs.push_back(s.isend(bufs[i].data(), size_of(i), static_cast<uint64_t>(i)));
          ASSERT_NE(reqs.back(), nullptr);
        }
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        s.close_ep();
        ASSERT_TRUE(s.signal());
      });
}

INSTANTIATE_TEST_SUITE_P(Devices, HoststagePair, ::testing::ValuesIn(all_variants()), variant_name);

// A 1 GiB message, byte-exact, over the default tcp and shm configurations.
class HoststageHuge : public HoststagePair {};

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
  uint8_t* get() const { return p_; }

 private:
  uint8_t* p_ = nullptr;
  size_t len_;
};

TEST_P(HoststageHuge, OneGiBMessage) {
  constexpr size_t kSize = size_t{1} << 30;
  run(
      [&](Side& s) {
        BigBuffer buf(kSize);
        ASSERT_NE(buf.get(), nullptr);
        hmc_net_request_t* r = s.irecv(buf.get(), kSize, 42);
        ASSERT_NE(r, nullptr);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());  // the sender filled its buffer and posted the send
        size_t n = 0;
        uint64_t t0 = mono_ns();
        ASSERT_EQ(s.wait(r, &n, 60), HMC_PLUGIN_SUCCESS);
        double secs = static_cast<double>(mono_ns() - t0) / 1e9;
        EXPECT_EQ(n, kSize);
        EXPECT_EQ(first_mismatch(buf.get(), kSize, 4242), -1);
        std::fprintf(stderr, "[ info ] 1 GiB over %s: %.3f s (%.0f MB/s)\n",
                     GetParam().name.c_str(), secs, static_cast<double>(kSize) / secs / 1e6);
      },
      [&](Side& s) {
        BigBuffer buf(kSize);
        ASSERT_NE(buf.get(), nullptr);
        fill(buf.get(), kSize, 4242);
        ASSERT_TRUE(s.await());
        hmc_net_request_t* r = s.isend(buf.get(), kSize, 42);
        ASSERT_NE(r, nullptr);
        ASSERT_TRUE(s.signal());
        size_t n = 0;
        EXPECT_EQ(s.wait(r, &n, 60), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(n, kSize);
      },
      120);
}

INSTANTIATE_TEST_SUITE_P(Devices, HoststageHuge,
                         ::testing::Values(make_variant("tcp", kTcp), make_variant("shm", kShm)),
                         variant_name);

// ---------------------------------------------------------------------------------------------
// Single-process tests: two contexts driven alternately by one thread.

struct LocalPair {
  explicit LocalPair(int dev, std::map<std::string, std::string> cfg = base_cfg(),
                     uint32_t timeout_ms = 5000)
      : ha(cfg, timeout_ms), hb(cfg, timeout_ms), dev(dev) {}
  ~LocalPair() {
    if (ea) T()->close_ep(ea);
    if (eb) T()->close_ep(eb);
    if (l) T()->close_listener(l);
    if (a) T()->finalize(a);
    if (b) T()->finalize(b);
  }
  // Listens on a, connects b; both endpoints ready, or a test failure.
  void connect() {
    ASSERT_EQ(T()->init(ha.services(), &a), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(T()->init(hb.services(), &b), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(T()->listen(a, dev, handle, &handle_len, &l), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(T()->connect(b, dev, handle, handle_len, &eb), HMC_PLUGIN_SUCCESS);
    uint64_t deadline = mono_ns() + 10000000000ull;
    hmc_plugin_status_t sa = HMC_PLUGIN_IN_PROGRESS, sb = HMC_PLUGIN_IN_PROGRESS;
    while ((sa != HMC_PLUGIN_SUCCESS || sb != HMC_PLUGIN_SUCCESS) && mono_ns() < deadline) {
      if (sa != HMC_PLUGIN_SUCCESS) sa = T()->accept(l, &ea);
      if (sb != HMC_PLUGIN_SUCCESS) sb = T()->ep_ready(eb);
      ASSERT_TRUE(sa == HMC_PLUGIN_SUCCESS || sa == HMC_PLUGIN_IN_PROGRESS) << sa;
      ASSERT_TRUE(sb == HMC_PLUGIN_SUCCESS || sb == HMC_PLUGIN_IN_PROGRESS) << sb;
    }
    ASSERT_EQ(sa, HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(sb, HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(T()->ep_ready(ea), HMC_PLUGIN_SUCCESS);
  }
  // Tests r (on either side) while progressing both contexts.
  hmc_plugin_status_t wait(hmc_net_request_t* r, size_t* bytes = nullptr, double timeout_s = 10) {
    uint64_t deadline = mono_ns() + static_cast<uint64_t>(timeout_s * 1e9);
    while (mono_ns() < deadline) {
      int done = 0;
      size_t n = 0;
      hmc_plugin_status_t st = T()->test(r, &done, &n);
      if (done) {
        if (bytes) *bytes = n;
        return st;
      }
      T()->progress(a);
      T()->progress(b);
    }
    return HMC_PLUGIN_IN_PROGRESS;
  }

  Host ha, hb;
  int dev;
  hmc_net_ctx_t *a = nullptr, *b = nullptr;
  hmc_net_listener_t* l = nullptr;
  hmc_net_ep_t *ea = nullptr, *eb = nullptr;
  uint8_t handle[HMC_NET_HANDLE_MAX];
  size_t handle_len = 0;
};

bool readable_within(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

// Arms until the context agrees that sleeping is safe (a few progress calls at most).
hmc_plugin_status_t arm_until_idle(hmc_net_ctx_t* c) {
  hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
  for (int i = 0; i < 1000 && st == HMC_PLUGIN_IN_PROGRESS; ++i) {
    st = T()->arm(c);
    if (st == HMC_PLUGIN_IN_PROGRESS) T()->progress(c);
  }
  return st;
}

class HoststageLocal : public ::testing::TestWithParam<int> {};

// wait_fd + arm: an idle armed context's fd stays quiet; a message from the peer wakes it; a
// producer blocked on a full ring (or socket) is woken when the consumer drains it.
TEST_P(HoststageLocal, ArmAndWaitFdWakeUps) {
  LocalPair p(GetParam());
  ASSERT_NO_FATAL_FAILURE(p.connect());
  int fd_a = -1, fd_b = -1;
  ASSERT_EQ(T()->wait_fd(p.a, &fd_a), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->wait_fd(p.b, &fd_b), HMC_PLUGIN_SUCCESS);
  std::vector<uint8_t> rbuf(8), sbuf(8);
  fill(sbuf.data(), 8, 5);
  hmc_net_request_t* r = nullptr;
  ASSERT_EQ(T()->irecv(p.ea, rbuf.data(), 8, nullptr, 1, &r), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(arm_until_idle(p.a), HMC_PLUGIN_SUCCESS);
  EXPECT_FALSE(readable_within(fd_a, 0)) << "an idle, armed context must not look busy";
  hmc_net_request_t* s = nullptr;
  ASSERT_EQ(T()->isend(p.eb, sbuf.data(), 8, nullptr, 1, &s), HMC_PLUGIN_SUCCESS);
  int done = 0;
  for (int i = 0; i < 1000 && !done; ++i)
    ASSERT_EQ(T()->test(s, &done, nullptr), HMC_PLUGIN_SUCCESS);
  ASSERT_TRUE(done);
  EXPECT_TRUE(readable_within(fd_a, 5000)) << "the message did not wake the sleeping side";
  EXPECT_EQ(T()->arm(p.a), HMC_PLUGIN_IN_PROGRESS) << "arm must report the waiting message";
  size_t n = 0;
  EXPECT_EQ(p.wait(r, &n), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(first_mismatch(rbuf.data(), 8, 5), -1);

  // Flood a with unexpected eager messages until b's sends stop completing (ring or socket
  // buffers full), then let b sleep: a draining its side must wake b.
  const size_t msg = GetParam() == kShm ? kShmEager : kTcpEager;
  std::vector<uint8_t> big(msg);
  std::vector<hmc_net_request_t*> pending;
  for (int i = 0; i < 4096 && pending.size() < 4; ++i) {
    hmc_net_request_t* q = nullptr;
    ASSERT_EQ(T()->isend(p.eb, big.data(), msg, nullptr, 9, &q), HMC_PLUGIN_SUCCESS);
    int d = 0;
    T()->test(q, &d, nullptr);
    if (!d) pending.push_back(q);
  }
  ASSERT_FALSE(pending.empty()) << "b's sends never blocked";
  ASSERT_EQ(arm_until_idle(p.b), HMC_PLUGIN_SUCCESS);
  EXPECT_FALSE(readable_within(fd_b, 0));
  for (int i = 0; i < 100; ++i) T()->progress(p.a);
  EXPECT_TRUE(readable_within(fd_b, 5000)) << "draining did not wake the blocked producer";
  for (hmc_net_request_t* q : pending) EXPECT_EQ(p.wait(q), HMC_PLUGIN_SUCCESS);
}

// A stream presenting the wrong nonce is closed (the connector fails), and the listener still
// accepts the right peer afterwards.
TEST_P(HoststageLocal, WrongNonceRefusedThenRightPeerAccepted) {
  LocalPair p(GetParam());
  ASSERT_EQ(T()->init(p.ha.services(), &p.a), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->init(p.hb.services(), &p.b), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->listen(p.a, p.dev, p.handle, &p.handle_len, &p.l), HMC_PLUGIN_SUCCESS);
  std::vector<uint8_t> forged(p.handle, p.handle + p.handle_len);
  forged[4] ^= 0xff;  // nonce bytes 4..11
  hmc_net_ep_t* bad = nullptr;
  ASSERT_EQ(T()->connect(p.b, p.dev, forged.data(), forged.size(), &bad), HMC_PLUGIN_SUCCESS);
  hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
  uint64_t deadline = mono_ns() + 10000000000ull;
  while (st == HMC_PLUGIN_IN_PROGRESS && mono_ns() < deadline) {
    EXPECT_EQ(T()->accept(p.l, &p.ea), HMC_PLUGIN_IN_PROGRESS);
    st = T()->ep_ready(bad);
  }
  EXPECT_EQ(st, HMC_PLUGIN_ERR_PEER_LOST);
  EXPECT_TRUE(p.ha.logged("wrong connection nonce"));
  T()->close_ep(bad);
  ASSERT_EQ(T()->connect(p.b, p.dev, p.handle, p.handle_len, &p.eb), HMC_PLUGIN_SUCCESS);
  hmc_plugin_status_t sa = HMC_PLUGIN_IN_PROGRESS, sb = HMC_PLUGIN_IN_PROGRESS;
  deadline = mono_ns() + 10000000000ull;
  while ((sa != HMC_PLUGIN_SUCCESS || sb != HMC_PLUGIN_SUCCESS) && mono_ns() < deadline) {
    if (sa != HMC_PLUGIN_SUCCESS) sa = T()->accept(p.l, &p.ea);
    if (sb != HMC_PLUGIN_SUCCESS) sb = T()->ep_ready(p.eb);
  }
  ASSERT_EQ(sa, HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(sb, HMC_PLUGIN_SUCCESS);
  std::vector<uint8_t> x(100), y(100);
  fill(x.data(), 100, 3);
  hmc_net_request_t *r = nullptr, *s = nullptr;
  ASSERT_EQ(T()->irecv(p.ea, y.data(), 100, nullptr, 1, &r), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(T()->isend(p.eb, x.data(), 100, nullptr, 1, &s), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(p.wait(s), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(x, y);
  // One peer per listener: accept after handing out the endpoint is an error, not a hang.
  hmc_net_ep_t* again = nullptr;
  EXPECT_EQ(T()->accept(p.l, &again), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
}

INSTANTIATE_TEST_SUITE_P(Devices, HoststageLocal, ::testing::Values(kTcp, kShm),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string(i.param == kTcp ? "tcp" : "shm");
                         });

// A peer that accepts the connection at the socket level but never answers the hello: ep_ready
// fails within the host's timeout.
TEST(HoststageConnect, SilentPeerTimesOut) {
  for (int dev : {kTcp, kShm}) {
    SCOPED_TRACE(dev == kTcp ? "tcp" : "shm");
    Host host(base_cfg(), 300);
    hmc_net_ctx_t* c = nullptr;
    ASSERT_EQ(T()->init(host.services(), &c), HMC_PLUGIN_SUCCESS);
    // A real handle gives the format; its address is replaced by a socket nobody serves.
    uint8_t handle[HMC_NET_HANDLE_MAX];
    size_t len = 0;
    hmc_net_listener_t* l = nullptr;
    ASSERT_EQ(T()->listen(c, dev, handle, &len, &l), HMC_PLUGIN_SUCCESS);
    int silent = -1;
    if (dev == kTcp) {
      silent = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t al = sizeof(a);
      ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
      ASSERT_EQ(listen(silent, 16), 0);
      ASSERT_EQ(getsockname(silent, reinterpret_cast<sockaddr*>(&a), &al), 0);
      ASSERT_EQ(handle[12], 1);  // one address: ip at 13..16, port at 17..18 (network order)
      std::memcpy(handle + 17, &a.sin_port, 2);
    } else {
      silent = socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un u{};
      u.sun_family = AF_UNIX;
      // Same length as the real name, so the handle layout stays valid.
      size_t nlen = handle[16];
      std::string name(nlen, 'z');
      std::memcpy(u.sun_path + 1, name.data(), nlen);
      ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&u),
                     static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + nlen)),
                0);
      ASSERT_EQ(listen(silent, 16), 0);
      std::memcpy(handle + 17, name.data(), nlen);
    }
    hmc_net_ep_t* ep = nullptr;
    ASSERT_EQ(T()->connect(c, dev, handle, len, &ep), HMC_PLUGIN_SUCCESS);
    uint64_t t0 = mono_ns();
    hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
    while (st == HMC_PLUGIN_IN_PROGRESS && mono_ns() - t0 < 5000000000ull) st = T()->ep_ready(ep);
    double ms = static_cast<double>(mono_ns() - t0) / 1e6;
    EXPECT_EQ(st, HMC_PLUGIN_ERR_PEER_LOST);
    EXPECT_GE(ms, 250);
    EXPECT_LT(ms, 2000);
    hmc_net_request_t* r = nullptr;
    uint8_t b[4];
    EXPECT_EQ(T()->isend(ep, b, 4, nullptr, 1, &r), HMC_PLUGIN_ERR_PEER_LOST);
    T()->close_ep(ep);
    T()->close_listener(l);
    close(silent);
    EXPECT_EQ(T()->finalize(c), HMC_PLUGIN_SUCCESS);
  }
}

TEST(HoststageConnect, RefusedAndMalformedHandles) {
  Host host(base_cfg(), 2000);
  hmc_net_ctx_t* c = nullptr;
  ASSERT_EQ(T()->init(host.services(), &c), HMC_PLUGIN_SUCCESS);
  uint8_t handle[HMC_NET_HANDLE_MAX];
  size_t len = 0;
  hmc_net_listener_t* l = nullptr;
  ASSERT_EQ(T()->listen(c, kTcp, handle, &len, &l), HMC_PLUGIN_SUCCESS);
  EXPECT_LE(len, HMC_NET_HANDLE_MAX);
  // Nobody listens once the listener is closed: the port refuses.
  ASSERT_EQ(T()->close_listener(l), HMC_PLUGIN_SUCCESS);
  hmc_net_ep_t* ep = nullptr;
  ASSERT_EQ(T()->connect(c, kTcp, handle, len, &ep), HMC_PLUGIN_SUCCESS);
  hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
  uint64_t t0 = mono_ns();
  while (st == HMC_PLUGIN_IN_PROGRESS && mono_ns() - t0 < 5000000000ull) st = T()->ep_ready(ep);
  EXPECT_EQ(st, HMC_PLUGIN_ERR_PEER_LOST);
  T()->close_ep(ep);
  // Malformed handles and a handle for the other device are invalid arguments.
  ep = nullptr;
  EXPECT_EQ(T()->connect(c, kTcp, handle, 3, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(T()->connect(c, kShm, handle, len, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  std::vector<uint8_t> v(handle, handle + len);
  v[0] = 99;  // protocol version
  EXPECT_EQ(T()->connect(c, kTcp, v.data(), v.size(), &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(host.logged("protocol version"));
  EXPECT_EQ(T()->connect(c, 7, handle, len, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ep, nullptr);
  EXPECT_EQ(T()->finalize(c), HMC_PLUGIN_SUCCESS);
}

// ---------------------------------------------------------------------------------------------
// Configuration and properties

TEST(HoststageConfig, InvalidValuesFailInitNamingTheVariable) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"HMC_HOSTSTAGE_STREAMS", "abc"},
      {"HMC_HOSTSTAGE_STREAMS", "0"},
      {"HMC_HOSTSTAGE_STREAMS", "65"},
      {"HMC_HOSTSTAGE_STREAMS", "2x"},
      {"HMC_HOSTSTAGE_SHM", "maybe"},
      {"HMC_HOSTSTAGE_SHM_CMA", "2"},
      {"HMC_HOSTSTAGE_EAGER_LIMIT", "-1"},
      {"HMC_HOSTSTAGE_EAGER_LIMIT", "2M"},
      {"HMC_HOSTSTAGE_SHM_RING", "100K"},
      {"HMC_HOSTSTAGE_SHM_EAGER_LIMIT", "1M"},
      {"HMC_HOSTSTAGE_CHUNK", "1"},
      {"HMC_HOSTSTAGE_CHUNK", "4Q"},
      {"HMC_HOSTSTAGE_SHM_CHUNK", "2G"},
      {"HMC_HOSTSTAGE_SOCKBUF", "lots"},
      {"HMC_HOSTSTAGE_IFNAMES", "lo,,lo"},
      {"HMC_HOSTSTAGE_IFNAMES", "hmcnosuchif0"},
      {"HMC_LISTEN_HOST", "not a host name!"},
  };
  for (const auto& kv : bad) {
    SCOPED_TRACE(kv.first + "=" + kv.second);
    Host host(Cfg{{kv.first, kv.second}}, 5000, HMC_LOG_ERROR - 1);
    hmc_net_ctx_t* c = nullptr;
    EXPECT_EQ(T()->init(host.services(), &c), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(c, nullptr);
    EXPECT_TRUE(host.logged(kv.first)) << "no log message names " << kv.first;
  }
  // Valid spellings are accepted.
  Host ok(Cfg{{"HMC_HOSTSTAGE_STREAMS", "4"},
              {"HMC_HOSTSTAGE_EAGER_LIMIT", "32k"},
              {"HMC_HOSTSTAGE_SHM", "off"},
              {"HMC_HOSTSTAGE_IFNAMES", " lo "},
              {"HMC_HOSTSTAGE_SOCKBUF", "0"}});
  hmc_net_ctx_t* c = nullptr;
  ASSERT_EQ(T()->init(ok.services(), &c), HMC_PLUGIN_SUCCESS);
  int n = 0;
  EXPECT_EQ(T()->device_count(c, &n), HMC_PLUGIN_SUCCESS);
  EXPECT_EQ(n, 1) << "HMC_HOSTSTAGE_SHM=off must hide the shm device";
  EXPECT_EQ(T()->finalize(c), HMC_PLUGIN_SUCCESS);
}

TEST(HoststageConfig, DeclaresEveryVariableItReads) {
  std::vector<std::string> declared;
  for (const hmc_config_var_t* v = T()->config_vars; v != nullptr && v->name != nullptr; ++v) {
    declared.push_back(v->name);
    EXPECT_NE(v->default_value, nullptr);
    EXPECT_NE(v->help, nullptr);
  }
  // Every name the plugin asks config_get for must be declared.
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
  svc.now_ns = [](void*) { return mono_ns(); };
  hmc_net_ctx_t* c = nullptr;
  ASSERT_EQ(T()->init(&svc, &c), HMC_PLUGIN_SUCCESS);
  ASSERT_FALSE(rec.asked.empty());
  for (const std::string& name : rec.asked)
    EXPECT_NE(std::find(declared.begin(), declared.end(), name), declared.end())
        << name << " is read but not declared in config_vars";
  EXPECT_EQ(T()->finalize(c), HMC_PLUGIN_SUCCESS);
}

TEST(HoststageConfig, InterfaceListGivesOneAddressEach) {
  Host host(Cfg{{"HMC_HOSTSTAGE_IFNAMES", "lo,lo"}});
  hmc_net_ctx_t* c = nullptr;
  ASSERT_EQ(T()->init(host.services(), &c), HMC_PLUGIN_SUCCESS);
  uint8_t handle[HMC_NET_HANDLE_MAX];
  size_t len = 0;
  hmc_net_listener_t* l = nullptr;
  ASSERT_EQ(T()->listen(c, kTcp, handle, &len, &l), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(handle[12], 2) << "one advertised address per listed interface";
  ASSERT_EQ(len, 13u + 2 * 6);
  for (int i = 0; i < 2; ++i) {
    uint32_t ip = 0;
    uint16_t port = 0;
    std::memcpy(&ip, handle + 13 + 6 * i, 4);
    std::memcpy(&port, handle + 17 + 6 * i, 2);
    EXPECT_EQ(ip, htonl(INADDR_LOOPBACK));
    EXPECT_NE(port, 0);
  }
  T()->close_listener(l);
  EXPECT_EQ(T()->finalize(c), HMC_PLUGIN_SUCCESS);
}

TEST(HoststageConfig, ListenAnyAdvertisesAConcreteAddress) {
  Host host(Cfg{{"HMC_LISTEN_HOST", "0.0.0.0"}});
  hmc_net_ctx_t* c = nullptr;
  ASSERT_EQ(T()->init(host.services(), &c), HMC_PLUGIN_SUCCESS);
  uint8_t handle[HMC_NET_HANDLE_MAX];
  size_t len = 0;
  hmc_net_listener_t* l = nullptr;
  ASSERT_EQ(T()->listen(c, kTcp, handle, &len, &l), HMC_PLUGIN_SUCCESS);
  ASSERT_GE(len, 19u);
  uint32_t ip = 0;
  std::memcpy(&ip, handle + 13, 4);
  EXPECT_NE(ip, 0u) << "0.0.0.0 must not be advertised";
  T()->close_listener(l);
  EXPECT_EQ(T()->finalize(c), HMC_PLUGIN_SUCCESS);
}

TEST(HoststageProps, DevicesAndProperties) {
  std::string err;
  ASSERT_NE(hs_test::plugin(&err), nullptr) << err;
  const hmc_net_plugin_v2_t* t = T();
  EXPECT_EQ(t->hdr.abi_version, HMC_NET_ABI_VERSION);
  EXPECT_EQ(t->hdr.struct_size, sizeof(hmc_net_plugin_v2_t));
  EXPECT_STREQ(t->name, "hoststage");
  for (auto slot : {reinterpret_cast<void*>(t->reg_mr), reinterpret_cast<void*>(t->isend),
                    reinterpret_cast<void*>(t->iput), reinterpret_cast<void*>(t->cancel),
                    reinterpret_cast<void*>(t->progress), reinterpret_cast<void*>(t->wait_fd),
                    reinterpret_cast<void*>(t->arm)})
    EXPECT_NE(slot, nullptr);
  Host host(base_cfg());
  hmc_net_ctx_t* c = nullptr;
  ASSERT_EQ(t->init(host.services(), &c), HMC_PLUGIN_SUCCESS);
  int n = 0;
  ASSERT_EQ(t->device_count(c, &n), HMC_PLUGIN_SUCCESS);
  ASSERT_EQ(n, 2);
  hmc_net_device_props_t p{};
  p.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
  ASSERT_EQ(t->device_props(c, 0, &p), HMC_PLUGIN_SUCCESS);
  EXPECT_STREQ(p.name, "tcp");
  EXPECT_EQ(p.flags, HMC_NET_FLAG_RMA | HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_DMABUF);
  EXPECT_EQ(p.mem_ifaces, HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST));
  EXPECT_EQ(p.max_msg_size, 0u);
  ASSERT_EQ(t->device_props(c, 1, &p), HMC_PLUGIN_SUCCESS);
  EXPECT_STREQ(p.name, "shm");
  EXPECT_EQ(p.flags,
            HMC_NET_FLAG_RMA | HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_DMABUF | HMC_NET_FLAG_SAME_HOST);
  EXPECT_EQ(t->device_props(c, 2, &p), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
  // A caller compiled against a shorter struct only gets the fields that fit.
  struct Short {
    hmc_abi_header_t hdr;
    const char* name;
  } s{};
  s.hdr.struct_size = sizeof(s);
  s.hdr.abi_version = 1;
  struct Guarded {
    Short s;
    uint64_t canary;
  } g{s, 0x1122334455667788ull};
  ASSERT_EQ(t->device_props(c, 0, reinterpret_cast<hmc_net_device_props_t*>(&g.s)),
            HMC_PLUGIN_SUCCESS);
  EXPECT_STREQ(g.s.name, "tcp");
  EXPECT_EQ(g.canary, 0x1122334455667788ull);
  EXPECT_EQ(t->finalize(c), HMC_PLUGIN_SUCCESS);
}

}  // namespace
