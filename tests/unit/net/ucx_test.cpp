// What is particular to plugins/net-ucx (a net plugin over UCX's UCP API): wide tags (hashed on
// the wire), its connection nonce and hello, its handle and key layouts, its settings and its
// one device. The contract scenarios run over its configurations in contract_test.cpp.
//
// The throwaway benchmarks at the end are DISABLED_ (never part of CTest); run them with
//   net_test --gtest_also_run_disabled_tests --gtest_filter='UcxBench*'
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "suite.h"

namespace net_test {
namespace {

class UcxPair : public NetTest {};

// Tags at and above 2^47 (which travel hashed, see plugins/net-ucx/src/tags.h) and tags that
// differ only in their top bits still match exactly.
TEST_P(UcxPair, WideTagsMatchExactly) {
  const std::vector<uint64_t> tags = {
      1ull << 47, (1ull << 47) + 1, (1ull << 60) - 1, ~0ull, (1ull << 63) | 5,
      5,          (1ull << 48) | 5, (1ull << 62) | 5};
  run(
      [&](Side& s) {
        std::vector<std::vector<uint8_t>> bufs(tags.size(), std::vector<uint8_t>(128));
        std::vector<hmc_net_request_t*> reqs;
        for (size_t i = tags.size(); i-- > 0;)
          reqs.push_back(s.irecv(bufs[i].data(), 128, tags[i]));
        ASSERT_TRUE(s.signal());
        std::vector<size_t> bytes;
        auto st = s.wait_all(reqs, &bytes);
        for (size_t j = 0; j < reqs.size(); ++j) {
          size_t i = tags.size() - 1 - j;
          EXPECT_EQ(st[j], HMC_PLUGIN_SUCCESS) << "tag " << tags[i];
          EXPECT_EQ(bytes[j], 64 + i) << "tag " << tags[i];
          EXPECT_EQ(first_mismatch(bufs[i].data(), 64 + i, 40 + i), -1) << "tag " << tags[i];
        }
      },
      [&](Side& s) {
        ASSERT_TRUE(s.await());
        std::vector<std::vector<uint8_t>> bufs(tags.size());
        std::vector<hmc_net_request_t*> reqs;
        for (size_t i = 0; i < tags.size(); ++i) {
          bufs[i].resize(64 + i);
          fill(bufs[i].data(), 64 + i, 40 + i);
          reqs.push_back(s.isend(bufs[i].data(), 64 + i, tags[i]));
        }
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
      });
}

INSTANTIATE_TEST_SUITE_P(Ucx, UcxPair, ::testing::ValuesIn(net_configs_of("ucx")), config_name);

class UcxLocal : public NetLocal {
 protected:
  // body on a pair whose b connected to a's listener with a handle whose nonce (bytes 8..15) is
  // not the listener's: b's endpoint `bad`.
  void local_with_wrong_nonce(const std::function<void(LocalPair&, hmc_net_ep_t* bad)>& body,
                              uint32_t timeout_ms) {
    local(
        [&](LocalPair& p) {
          hmc_net_ep_t* bad = nullptr;
          ASSERT_NO_FATAL_FAILURE(p.connect_forged(8, &bad));
          body(p, bad);
        },
        timeout_ms);
  }
};

// A connector presenting the wrong nonce is ignored (and times out: nobody answers it), the
// listener still accepts the right peer afterwards, and accept after the endpoint was handed
// out is an error.
TEST_P(UcxLocal, WrongNonceIgnoredThenRightPeerAccepted) {
  local_with_wrong_nonce(
      [&](LocalPair& p, hmc_net_ep_t* bad) {
        const hmc_net_plugin_v2_t* t = p.t;
        uint64_t t0 = mono_ns();
        hmc_plugin_status_t st = p.await_refusal(bad, 5);
        double ms = static_cast<double>(mono_ns() - t0) / 1e6;
        EXPECT_EQ(st, HMC_PLUGIN_ERR_PEER_LOST);
        EXPECT_GE(ms, 250);
        EXPECT_LT(ms, 2000);
        EXPECT_TRUE(p.ha.logged("wrong connection nonce"));
        EXPECT_TRUE(p.hb.logged("no answer from the listener"));
        p.expect_send_lost(bad);
        t->close_ep(bad);
        p.expect_one_working_connection();
      },
      300);
}

// A hello whose nonce is not the listener's is refused and leaves the listener waiting.
TEST_P(UcxLocal, CarriedHelloWithTheWrongNonceIsRefused) {
  local_with_wrong_nonce(
      [&](LocalPair& p, hmc_net_ep_t* bad) {
        const hmc_net_plugin_v2_t* t = p.t;
        std::vector<uint8_t> hello(HMC_NET_HELLO_MAX);
        size_t len = hello.size();
        ASSERT_EQ(t->connect_hello(bad, hello.data(), &len), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(t->accept_hello(p.l, hello.data(), len), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
        EXPECT_TRUE(p.ha.logged("wrong connection nonce"));
        EXPECT_EQ(t->accept(p.l, &p.ea), HMC_PLUGIN_IN_PROGRESS);
        t->close_ep(bad);
      },
      300);
}

// The connector's hello carried outside UCX (connect_hello/accept_hello, as the core does over
// its control plane): the listener makes its endpoint from it, the connection completes and
// carries data, the connector's hello is handed over once, and the listener refuses garbage and
// a second hello once it made its endpoint.
TEST_P(UcxLocal, HelloCarriedOutsideUcx) {
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.init());
    ASSERT_TRUE(HMC_ABI_HAS_FIELD(t, hmc_net_plugin_v2_t, accept_hello));
    ASSERT_NE(t->connect_hello, nullptr);
    ASSERT_NE(t->accept_hello, nullptr);
    ASSERT_EQ(t->listen(p.a, p.dev, p.handle, &p.handle_len, &p.l), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(t->connect(p.b, p.dev, p.handle, p.handle_len, &p.eb), HMC_PLUGIN_SUCCESS);
    std::vector<uint8_t> hello(HMC_NET_HELLO_MAX);
    size_t len = 4;  // too small a buffer: refused, the hello stays with the endpoint
    EXPECT_EQ(t->connect_hello(p.eb, hello.data(), &len), HMC_PLUGIN_ERR_NO_MEMORY);
    len = hello.size();
    ASSERT_EQ(t->connect_hello(p.eb, hello.data(), &len), HMC_PLUGIN_SUCCESS);
    ASSERT_GT(len, 16u);
    hello.resize(len);
    size_t again = HMC_NET_HELLO_MAX;
    std::vector<uint8_t> second(again);
    EXPECT_EQ(t->connect_hello(p.eb, second.data(), &again), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(again, 0u) << "the hello is handed over once";
    // Nothing reaches the listener over UCX: accept stays in progress however long both run.
    for (int i = 0; i < 200; ++i) {
      EXPECT_EQ(t->accept(p.l, &p.ea), HMC_PLUGIN_IN_PROGRESS);
      EXPECT_EQ(t->ep_ready(p.eb), HMC_PLUGIN_IN_PROGRESS);
    }
    uint8_t junk[3] = {1, 2, 3};
    EXPECT_EQ(t->accept_hello(p.l, junk, sizeof junk), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(p.ha.logged("invalid hello"));
    ASSERT_EQ(t->accept_hello(p.l, hello.data(), hello.size()), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(t->accept_hello(p.l, hello.data(), hello.size()), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    ASSERT_NO_FATAL_FAILURE(p.finish_connect());
    p.expect_delivery(p.eb, p.ea, 1000, 2, 9);
  });
}

// A handle of another protocol version (byte 4) is an invalid argument, and the log says why;
// so is device 1 (the plugin has one).
TEST_P(UcxLocal, MalformedHandles) {
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.listen());
    p.expect_version_refused(4);
    hmc_net_ep_t* ep = nullptr;
    EXPECT_EQ(t->connect(p.b, 1, p.handle, p.handle_len, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ep, nullptr);
  });
}

// The initiator checks accesses against the region packed in the key: a key claiming more than
// was registered (its length, byte 20), or whose UCX part is corrupt, ends accesses with REMOTE
// and leaves the memory alone; bytes that are not a key of this plugin are refused at unpack; a
// key works only on the endpoint it was unpacked on; a registration is released once.
TEST_P(UcxLocal, ForgedKeysAreRefused) {
  constexpr size_t kReg = 256u << 10;
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.connect());
    std::vector<uint8_t> region(2 * kReg), rkey;
    fill(region.data(), region.size(), 20);
    hmc_net_mr_t* mr = reg(t, p.a, p.dev, region.data(), kReg, kRemoteRw, &rkey);
    ASSERT_NE(mr, nullptr);
    ASSERT_GT(rkey.size(), 21u);
    std::vector<uint8_t> forged = rkey, corrupt = rkey;
    forged[20] ^= 0x01;
    corrupt.back() ^= 0x5a;
    hmc_net_rkey_t *k_forged = nullptr, *k_corrupt = nullptr, *k_junk = nullptr;
    ASSERT_EQ(t->rkey_unpack(p.eb, forged.data(), forged.size(), &k_forged), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(t->rkey_unpack(p.eb, corrupt.data(), corrupt.size(), &k_corrupt), HMC_PLUGIN_SUCCESS);
    std::vector<uint8_t> junk(40, 0x33);
    EXPECT_EQ(t->rkey_unpack(p.eb, junk.data(), junk.size(), &k_junk),
              HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    const uint64_t base = reinterpret_cast<uintptr_t>(region.data());
    std::vector<uint8_t> src(64), dst(64);
    fill(src.data(), src.size(), 99);
    struct Bad {
      const char* what;
      uint64_t addr;
      size_t len;
      hmc_net_rkey_t* key;
    };
    const std::vector<Bad> bad = {
        {"forged length", base + kReg, 10, k_forged},
        {"forged length, in range", base, 10, k_forged},
        {"corrupt UCX key", base, 10, k_corrupt},
        {"corrupt key, zero length", base, 0, k_corrupt},
    };
    for (const Bad& b : bad) {
      for (bool is_put : {true, false}) {
        hmc_net_request_t* r = nullptr;
        hmc_plugin_status_t st = is_put
                                     ? t->iput(p.eb, src.data(), b.len, nullptr, b.addr, b.key, &r)
                                     : t->iget(p.eb, dst.data(), b.len, nullptr, b.addr, b.key, &r);
        if (st == HMC_PLUGIN_SUCCESS) st = p.wait(r);
        EXPECT_EQ(st, HMC_PLUGIN_ERR_REMOTE) << (is_put ? "put " : "get ") << b.what;
      }
    }
    EXPECT_EQ(first_mismatch(region.data(), region.size(), 20), -1) << "the region was written";
    hmc_net_rkey_t* k = nullptr;
    ASSERT_EQ(t->rkey_unpack(p.eb, rkey.data(), rkey.size(), &k), HMC_PLUGIN_SUCCESS);
    hmc_net_request_t* r = nullptr;
    EXPECT_EQ(t->iget(p.ea, dst.data(), 8, nullptr, base, k, &r), HMC_PLUGIN_ERR_INVALID_ARGUMENT)
        << "a key used on another endpoint than the one it was unpacked on";
    EXPECT_EQ(t->rkey_release(k), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(t->rkey_release(k_forged), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(t->rkey_release(k_corrupt), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(deregister_memory(t, p.a, p.dev, mr), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(deregister_memory(t, p.a, p.dev, mr), HMC_PLUGIN_ERR_INVALID_ARGUMENT) << "twice";
  });
}

// One device named "ucx": same-host only with shared-memory transports, host memory only, a
// shorter props struct filled only as far as it goes; memory the plugin cannot access directly
// is refused, not mis-registered.
TEST_P(UcxLocal, DevicesAndProperties) {
  const bool shm = cfg().at("HMC_UCX_TLS") == "posix,cma,self";
  const hmc_net_plugin_v2_t* t = this->t();
  EXPECT_STREQ(t->name, "ucx");
  in_child([&] {
    Host host(cfg(), 5000, HMC_LOG_INFO);
    hmc_net_ctx_t* c = nullptr;
    hmc_plugin_status_t st = t->init(host.services(), &c);
    if (st == HMC_PLUGIN_ERR_NO_DEVICE) skip_child("UCX cannot run here: " + host.all_logs());
    ASSERT_EQ(st, HMC_PLUGIN_SUCCESS);
    EXPECT_TRUE(host.logged("ready: transports")) << host.all_logs();
    int n = 0;
    ASSERT_EQ(t->device_count(c, &n), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(n, 1);
    hmc_net_device_props_t p{};
    p.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
    ASSERT_EQ(t->device_props(c, 0, &p), HMC_PLUGIN_SUCCESS);
    EXPECT_STREQ(p.name, "ucx");
    EXPECT_EQ(p.flags,
              HMC_NET_FLAG_RMA | HMC_NET_FLAG_TAGGED | (shm ? HMC_NET_FLAG_SAME_HOST : 0u));
    const std::set<MemKind> kinds = device_mem_kinds(p);
    EXPECT_EQ(kinds.count(MemKind::kHost), 1u);
    EXPECT_EQ(kinds.count(MemKind::kDmabuf), 0u);
    EXPECT_EQ(p.max_msg_size, 0u);
    EXPECT_EQ(t->device_props(c, 1, &p), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    // A caller compiled against a shorter struct only gets the fields that fit.
    ASSERT_NO_FATAL_FAILURE(expect_short_device_props(t, c, 1, "ucx"));
    uint8_t buf[64];
    hmc_net_mr_t* mr = nullptr;
    std::vector<uint8_t> rkey;
    EXPECT_EQ(register_memory(t, c, 0, MemKind::kDmabuf, buf, sizeof(buf), HMC_NET_ACCESS_LOCAL,
                              &mr, &rkey),
              HMC_PLUGIN_ERR_NOT_SUPPORTED);
    if (kinds.count(MemKind::kCuda) == 0) {
      EXPECT_EQ(register_memory(t, c, 0, MemKind::kCuda, buf, sizeof(buf), HMC_NET_ACCESS_LOCAL,
                                &mr, &rkey),
                HMC_PLUGIN_ERR_NOT_SUPPORTED);
    }
    EXPECT_EQ(t->finalize(c), HMC_PLUGIN_SUCCESS);
  });
}

INSTANTIATE_TEST_SUITE_P(Ucx, UcxLocal, ::testing::ValuesIn(net_configs_of("ucx")), config_name);

// ---------------------------------------------------------------------------------------------
// Settings

// Transports UCX does not have leave the plugin with nothing to drive: NO_DEVICE, with a reason.
TEST(UcxConfig, UnknownTransportsMeanNoDevice) {
  const hmc_net_plugin_v2_t* t = nullptr;
  NET_REQUIRE_PLUGIN("ucx", &t);
  in_child([&] {
    Host host(Cfg{{"HMC_UCX_TLS", "hmc_no_such_transport"}}, 5000, 0);
    hmc_net_ctx_t* c = nullptr;
    hmc_plugin_status_t st = t->init(host.services(), &c);
    EXPECT_EQ(st, HMC_PLUGIN_ERR_NO_DEVICE) << host.all_logs();
    if (st == HMC_PLUGIN_SUCCESS) t->finalize(c);
    EXPECT_TRUE(host.logged("not used")) << host.all_logs();
  });
}

// ---------------------------------------------------------------------------------------------
// Benchmarks (DISABLED_: run by hand, see the top of the file). They print one line per figure;
// compare with `bash /work/shared/bench/peers.sh` on the same machine and UCX_TLS. They also pass
// HMC_UCX_WAKEUP and HMC_UCX_ERROR_MODE from the environment, to compare settings.

Cfg bench_cfg(const NetConfig& v) {
  Cfg c = v.cfg;
  for (const char* name : {"HMC_UCX_WAKEUP", "HMC_UCX_ERROR_MODE"})
    if (const char* w = getenv(name)) c[name] = w;
  return c;
}

// Keeps `window` operations in flight: posts until the window is full, then waits for the
// oldest and posts the next (as ucx_perftest's tag_bw does, so the pipe never drains mid-run).
template <typename Post>
void sliding_window(Side& s, int iters, int window, Post post) {
  std::vector<hmc_net_request_t*> ring(window, nullptr);
  for (int i = 0; i < iters + window; ++i) {
    hmc_net_request_t*& slot = ring[i % window];
    if (slot != nullptr) {
      ASSERT_EQ(s.wait(slot), HMC_PLUGIN_SUCCESS);
      slot = nullptr;
    }
    if (i < iters) {
      slot = post();
      ASSERT_NE(slot, nullptr);
    }
  }
}

void bench_bw(const hmc_net_plugin_v2_t* t, const NetConfig& v, size_t size, int iters,
              int window) {
  run_pair(
      t, bench_cfg(v), v.dev,
      [&](Side& s) {
        s.set_spin_only(true);
        std::vector<uint8_t> buf(size);
        uint8_t ack = 0;
        for (int round = 0; round < 2; ++round) {  // round 0 warms up
          ASSERT_TRUE(s.signal());
          sliding_window(s, iters, window, [&] { return s.irecv(buf.data(), size, 1); });
          ASSERT_EQ(s.wait(s.isend(&ack, 1, 2)), HMC_PLUGIN_SUCCESS);
        }
      },
      [&](Side& s) {
        s.set_spin_only(true);
        std::vector<uint8_t> buf(size, 1);
        uint8_t ack = 0;
        for (int round = 0; round < 2; ++round) {
          ASSERT_TRUE(s.await());
          uint64_t t0 = mono_ns();
          sliding_window(s, iters, window, [&] { return s.isend(buf.data(), size, 1); });
          ASSERT_EQ(s.wait(s.irecv(&ack, 1, 2)), HMC_PLUGIN_SUCCESS);
          double secs = static_cast<double>(mono_ns() - t0) / 1e9;
          if (round == 1)
            std::printf("net-ucx.%s.tag_bw size %zu window %d: %.1f MB/s\n", v.name.c_str(), size,
                        window, static_cast<double>(size) * iters / secs / 1e6);
        }
      },
      [] { return ::testing::Test::HasFailure() ? 1 : 0; }, 300);
}

void bench_lat(const hmc_net_plugin_v2_t* t, const NetConfig& v, size_t size, int iters) {
  run_pair(
      t, bench_cfg(v), v.dev,
      [&](Side& s) {
        s.set_spin_only(true);
        std::vector<uint8_t> buf(size);
        for (int i = 0; i < iters + iters / 10; ++i) {
          ASSERT_EQ(s.wait(s.irecv(buf.data(), size, 1)), HMC_PLUGIN_SUCCESS);
          ASSERT_EQ(s.wait(s.isend(buf.data(), size, 1)), HMC_PLUGIN_SUCCESS);
        }
      },
      [&](Side& s) {
        s.set_spin_only(true);
        std::vector<uint8_t> buf(size);
        uint64_t t0 = 0;
        for (int i = 0; i < iters + iters / 10; ++i) {
          if (i == iters / 10) t0 = mono_ns();
          hmc_net_request_t* r = s.irecv(buf.data(), size, 1);
          ASSERT_EQ(s.wait(s.isend(buf.data(), size, 1)), HMC_PLUGIN_SUCCESS);
          ASSERT_EQ(s.wait(r), HMC_PLUGIN_SUCCESS);
        }
        double us = static_cast<double>(mono_ns() - t0) / 1e3 / iters / 2;
        std::printf("net-ucx.%s.tag_lat size %zu: %.3f us (one way, half round trip)\n",
                    v.name.c_str(), size, us);
      },
      [] { return ::testing::Test::HasFailure() ? 1 : 0; }, 300);
}

// Two contexts in one process, one thread: the CPU cost per message of the plugin (plus UCX)
// without the scheduling noise of two processes on a busy machine. Compare with the same loop
// over raw UCP calls (plugins/net-ucx/README.md, "Performance").
TEST(UcxBench, DISABLED_InProcessPingPong) {
  const hmc_net_plugin_v2_t* t = nullptr;
  NET_REQUIRE_PLUGIN("ucx", &t);
  for (const NetConfig& v : net_configs_of("ucx")) {
    in_child([&] {
      LocalPair p(t, bench_cfg(v), v.dev);
      ASSERT_NO_FATAL_FAILURE(p.connect());
      uint8_t buf[8] = {};
      auto one = [&](hmc_net_ep_t* from, hmc_net_ctx_t* from_ctx, hmc_net_ep_t* to) {
        hmc_net_request_t *r = nullptr, *s = nullptr;
        t->irecv(to, buf, 8, nullptr, 1, &r);
        t->isend(from, buf, 8, nullptr, 1, &s);
        int rd = 0, sd = 0;
        while (!rd || !sd) {
          if (!rd) t->test(r, &rd, nullptr);
          if (!sd)
            t->test(s, &sd, nullptr);
          else
            t->progress(from_ctx);
        }
      };
      for (int i = 0; i < 2000; ++i) {
        one(p.eb, p.b, p.ea);
        one(p.ea, p.a, p.eb);
      }
      double best = 1e9;
      for (int rep = 0; rep < 7; ++rep) {
        const int n = 20000;
        uint64_t t0 = mono_ns();
        for (int i = 0; i < n; ++i) {
          one(p.eb, p.b, p.ea);
          one(p.ea, p.a, p.eb);
        }
        best = std::min(best, static_cast<double>(mono_ns() - t0) / 1e3 / (2.0 * n));
      }
      std::printf("net-ucx in-process %s: %.3f us per message (best of 7)\n", v.name.c_str(), best);
    });
  }
}

TEST(UcxBench, DISABLED_TagBandwidth4MiB) {
  const hmc_net_plugin_v2_t* t = nullptr;
  NET_REQUIRE_PLUGIN("ucx", &t);
  for (const NetConfig& v : net_configs_of("ucx")) bench_bw(t, v, 4u << 20, 300, 16);
}

TEST(UcxBench, DISABLED_TagLatency8B) {
  const hmc_net_plugin_v2_t* t = nullptr;
  NET_REQUIRE_PLUGIN("ucx", &t);
  for (const NetConfig& v : net_configs_of("ucx")) bench_lat(t, v, 8, 20000);
}

}  // namespace
}  // namespace net_test
