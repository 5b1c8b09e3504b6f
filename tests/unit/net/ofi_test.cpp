// What is particular to plugins/net-ofi (the libfabric net plugin): peer loss on RDM endpoints
// (no connection to watch), its other data-path modes (registration cache, put completion by a
// trailing read, rendezvous by read, write cutting), its handle, tag and key layouts, its
// settings and the automatic choice of providers. The contract scenarios run over its
// configurations in contract_test.cpp.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>

#include "../../../plugins/net-ofi/src/wire.h"
#include "suite.h"

namespace net_test {
namespace {

class OfiPair : public NetTest {};

// The core closes the endpoint of a dead peer before the plugin noticed (its control channel
// saw the process go): close_ep returns at once and releases the pending requests, and the
// context goes on.
TEST_P(OfiPair, CloseAfterPeerDeath) {
  run(
      [&](Side& s) {
        std::vector<uint8_t> small(64), out(256u << 10);
        ASSERT_NE(s.irecv(small.data(), small.size(), 2), nullptr);
        ASSERT_TRUE(s.signal());
        std::vector<uint8_t> ignored;
        ASSERT_FALSE(s.ctl_recv(&ignored, 10)) << "the child did not die";
        // Posts may already fail with PEER_LOST (tcp may have seen the connection break).
        for (size_t n : {out.size(), small.size()}) {
          hmc_net_request_t* r = s.isend(out.data(), n, 3);
          EXPECT_TRUE(r != nullptr || s.last_post() == HMC_PLUGIN_ERR_PEER_LOST) << s.last_post();
        }
        uint64_t c0 = mono_ns();
        s.close_ep();
        EXPECT_LT(mono_ns() - c0, 1000000000ull) << "close_ep blocked";
        EXPECT_TRUE(s.host().logged("endpoint closed: ")) << s.host().all_logs();
        uint8_t handle[HMC_NET_HANDLE_MAX];
        size_t len = 0;
        hmc_net_listener_t* l = nullptr;
        EXPECT_EQ(s.t()->listen(s.ctx(), s.dev(), handle, &len, &l), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(s.t()->close_listener(l), HMC_PLUGIN_SUCCESS);
      },
      [&](Side& s) {
        ASSERT_TRUE(s.await());
        if (::testing::Test::HasFailure()) _exit(1);
        raise(SIGKILL);
      },
      30, SIGKILL);
}

INSTANTIATE_TEST_SUITE_P(Ofi, OfiPair, ::testing::ValuesIn(net_configs_of("ofi")), config_name);

// ---------------------------------------------------------------------------------------------
// The same data paths with the plugin's other modes: local descriptors from its registration
// cache (with a cache of 2 entries, so it evicts), puts completed by a trailing read, messages
// moved by the receiver's read on tcp (where the default is the sender's write; shm has no
// FI_ORDER_SAW and always reads), and the sender's write cut into pieces of other sizes.

// The ofi configuration for provider, renamed and with more settings.
NetConfig mode(const std::string& name, const std::string& provider, const Cfg& extra) {
  NetConfig c;
  for (const NetConfig& base : net_configs())
    if (base.name == "ofi_" + provider) c = base;
  c.name = "ofi_" + name;
  for (const auto& kv : extra) c.cfg[kv.first] = kv.second;
  return c;
}

std::vector<NetConfig> modes() {
  return {
      mode("tcp_mr_local", "tcp", {{"HMC_OFI_MR_LOCAL", "1"}, {"HMC_OFI_MR_CACHE", "2"}}),
      mode("shm_mr_local", "shm", {{"HMC_OFI_MR_LOCAL", "1"}, {"HMC_OFI_MR_CACHE", "0"}}),
      mode("tcp_put_read", "tcp", {{"HMC_OFI_PUT_COMPLETION", "read"}}),
      mode("tcp_rndv_read", "tcp", {{"HMC_OFI_RNDV", "read"}}),
      // The write rendezvous in many pieces (4 KiB: sizes are not multiples of it), and in one
      // write (tcp's default is 512 KiB pieces).
      mode("tcp_write_chunk_4k", "tcp", {{"HMC_OFI_WRITE_CHUNK", "4K"}}),
      mode("tcp_write_whole", "tcp", {{"HMC_OFI_WRITE_CHUNK", "0"}}),
      mode("shm_put_read", "shm", {{"HMC_OFI_PUT_COMPLETION", "read"}}),
  };
}

class OfiPairModes : public NetTest {};

TEST_P(OfiPairModes, PutThenGet) {
  constexpr size_t kRegion = 6u << 20, kOff = 3, kLen = (4u << 20) + 3;
  run(
      [&](Side& s) {
        std::vector<uint8_t> region(kRegion, 0x11), rkey;
        hmc_net_mr_t* mr = reg(s, region.data(), kRegion, kRemoteRw, &rkey);
        send_region(s, reinterpret_cast<uintptr_t>(region.data()), rkey);
        ASSERT_TRUE(s.await());
        EXPECT_EQ(first_mismatch(region.data() + kOff, kLen, 42), -1) << "the put is not in place";
        EXPECT_EQ(region[kOff - 1], 0x11);
        EXPECT_EQ(region[kOff + kLen], 0x11);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
        EXPECT_EQ(deregister_memory(s.t(), s.ctx(), s.dev(), mr), HMC_PLUGIN_SUCCESS);
      },
      [&](Side& s) {
        RemoteRegion rr;
        hmc_net_rkey_t* k = recv_key(s, &rr);
        ASSERT_NE(k, nullptr);
        std::vector<uint8_t> src(kLen), back(kLen);
        fill(src.data(), kLen, 42);
        // Several puts of the same buffer: each must complete only once in place.
        for (int i = 0; i < 3; ++i)
          EXPECT_EQ(put(s, src.data(), kLen, rr.base + kOff, k), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
        EXPECT_EQ(get(s, back.data(), kLen, rr.base + kOff, k), HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(first_mismatch(back.data(), kLen, 42), -1);
        EXPECT_EQ(s.t()->rkey_release(k), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
      });
}

// Messages of every size class, then rendezvous messages cut short by small receives and one
// that fits: the data arrives intact and the connection stays in step whichever way it moves.
TEST_P(OfiPairModes, Messages) {
  const std::vector<size_t> sizes = {0, 1, 8, 64, 65, 4096, 4097, 64u << 10, (4u << 20) + 3};
  constexpr size_t kBig = (1u << 20) + 5;
  run(
      [&](Side& s) {
        ASSERT_NO_FATAL_FAILURE(receive_sizes(s, sizes, 100, 1000));
        std::vector<uint8_t> a(1000 + 16, 0xab), b(16, 0xab), c(kBig);
        hmc_net_request_t* ra = s.irecv(a.data(), 1000, 1);
        hmc_net_request_t* rb = s.irecv(b.data(), 0, 2);
        hmc_net_request_t* rc = s.irecv(c.data(), kBig, 3);
        ASSERT_TRUE(ra && rb && rc);
        ASSERT_TRUE(s.signal());
        std::vector<size_t> bytes;
        auto st = s.wait_all({ra, rb, rc}, &bytes);
        EXPECT_EQ(st[0], HMC_PLUGIN_ERR_TRUNCATED);
        EXPECT_EQ(bytes[0], kBig) << "a truncated receive reports the length that was sent";
        EXPECT_EQ(first_mismatch(a.data(), 1000, 1), -1) << "the buffer holds the message's start";
        EXPECT_EQ(a[1000], 0xab);
        EXPECT_EQ(st[1], HMC_PLUGIN_ERR_TRUNCATED);
        EXPECT_EQ(bytes[1], kBig);
        EXPECT_EQ(b[0], 0xab);
        EXPECT_EQ(st[2], HMC_PLUGIN_SUCCESS);
        EXPECT_EQ(bytes[2], kBig);
        EXPECT_EQ(first_mismatch(c.data(), kBig, 3), -1);
        ASSERT_TRUE(s.await());
      },
      [&](Side& s) {
        ASSERT_NO_FATAL_FAILURE(send_sizes(s, sizes, 100, 1000));
        std::vector<std::vector<uint8_t>> m(3, std::vector<uint8_t>(kBig));
        for (int i = 0; i < 3; ++i) fill(m[i].data(), kBig, i + 1);
        ASSERT_TRUE(s.await());
        std::vector<hmc_net_request_t*> reqs;
        for (int i = 0; i < 3; ++i) reqs.push_back(s.isend(m[i].data(), kBig, i + 1));
        for (auto* r : reqs) ASSERT_NE(r, nullptr);
        for (auto st : s.wait_all(reqs)) EXPECT_EQ(st, HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
      });
}

INSTANTIATE_TEST_SUITE_P(Modes, OfiPairModes, ::testing::ValuesIn(modes()), config_name);

// ---------------------------------------------------------------------------------------------
// Two contexts of one process

class OfiLocal : public NetLocal {};

// Handles of another protocol version (byte 4) or for another device (its name from byte 16)
// are invalid arguments, saying why; bit 63 of tags belongs to the plugin; packed keys
// that are not the plugin's (a wrong first byte, cut short) are refused at unpack.
TEST_P(OfiLocal, HandlesTagsAndKeysAreChecked) {
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.listen());
    p.expect_version_refused(4);
    hmc_net_ep_t* ep = nullptr;
    std::vector<uint8_t> v(p.handle, p.handle + p.handle_len);
    v[16] ^= 0x20;
    EXPECT_EQ(t->connect(p.b, p.dev, v.data(), v.size(), &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(p.hb.logged("the handle is for device"));
    EXPECT_EQ(t->connect(p.b, 7, p.handle, p.handle_len, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ep, nullptr);
    ASSERT_NO_FATAL_FAILURE(p.connect_to_listener());
    hmc_net_request_t* r = nullptr;
    uint8_t b[4] = {};
    EXPECT_EQ(t->isend(p.eb, b, 4, nullptr, uint64_t{1} << 63, &r),
              HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(t->irecv(p.ea, b, 4, nullptr, ~uint64_t{0}, &r), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(r, nullptr);
    std::vector<uint8_t> region(4096), rkey;
    hmc_net_mr_t* mr = reg(t, p.a, p.dev, region.data(), region.size(), kRemoteRw, &rkey);
    ASSERT_NE(mr, nullptr);
    ASSERT_GT(rkey.size(), 7u);
    hmc_net_rkey_t* junk = nullptr;
    std::vector<uint8_t> forged = rkey;
    forged[0] ^= 0xff;
    EXPECT_EQ(t->rkey_unpack(p.eb, forged.data(), forged.size(), &junk),
              HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(t->rkey_unpack(p.eb, rkey.data(), 7, &junk), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(junk, nullptr);
    EXPECT_EQ(deregister_memory(t, p.a, p.dev, mr), HMC_PLUGIN_SUCCESS);
  });
}

// The core's tags use bits 0 to 62 (collectives bit 62, its replies and own transfers 60 and
// 61): every one goes through, on three connections between the same two contexts (three
// slots) at once, each message to its own connection, eager and rendezvous sizes alike.
TEST_P(OfiLocal, TheCoresWholeTagSpaceOnSeveralConnections) {
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.connect());
    std::vector<std::pair<hmc_net_ep_t*, hmc_net_ep_t*>> eps = {{p.ea, p.eb}};
    for (int i = 0; i < 2; ++i) eps.push_back(p.connect_another());
    const uint64_t tags[] = {0,
                             (uint64_t{1} << 59) - 1,
                             uint64_t{1} << 60 | 7,
                             uint64_t{1} << 61 | uint64_t{1} << 59 | 12345,
                             uint64_t{1} << 62 | 0x1234567,
                             (uint64_t{1} << 63) - 1};
    for (size_t len : {size_t(24), size_t(300000)}) {
      std::vector<std::vector<uint8_t>> in, out;
      std::vector<hmc_net_request_t*> sends, recvs;
      // Every connection receives every tag; the sender fills each message with its connection
      // and tag, so a message delivered to the wrong receive shows.
      for (size_t c = 0; c < eps.size(); ++c) {
        for (size_t k = 0; k < sizeof tags / sizeof tags[0]; ++k) {
          out.emplace_back(len, 0);
          hmc_net_request_t* r = nullptr;
          ASSERT_EQ(t->irecv(eps[c].first, out.back().data(), len, nullptr, tags[k], &r),
                    HMC_PLUGIN_SUCCESS);
          recvs.push_back(r);
        }
      }
      for (size_t c = 0; c < eps.size(); ++c) {
        for (size_t k = 0; k < sizeof tags / sizeof tags[0]; ++k) {
          in.emplace_back(len, static_cast<uint8_t>(c * 16 + k + 1));
          hmc_net_request_t* r = nullptr;
          ASSERT_EQ(t->isend(eps[c].second, in.back().data(), len, nullptr, tags[k], &r),
                    HMC_PLUGIN_SUCCESS);
          sends.push_back(r);
        }
      }
      for (auto* r : sends) EXPECT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS);
      for (size_t i = 0; i < recvs.size(); ++i) {
        size_t got = 0;
        EXPECT_EQ(p.wait(recvs[i], &got), HMC_PLUGIN_SUCCESS) << "receive " << i;
        EXPECT_EQ(got, len);
        EXPECT_EQ(out[i], in[i]) << "connection " << i / 6 << ", tag " << i % 6 << ", " << len
                                 << " bytes";
      }
    }
  });
}

// Two connections' tags that meet in the provider's tag space (a tag of one XOR both slot keys:
// wire.h) are told apart: the receive that matched the other connection's message fails, saying
// so, and delivers nothing. The first connection of a fresh pair has slot 0 (key 0) on both
// sides, the second slot 1.
TEST_P(OfiLocal, CollidingTagsOfTwoConnectionsFailTheReceive) {
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.connect());
    auto second = p.connect_another();
    const uint64_t tag = 0x55;
    std::vector<uint8_t> out(64, 0), in(64, 7);
    hmc_net_request_t *rr = nullptr, *sr = nullptr;
    ASSERT_EQ(t->irecv(p.ea, out.data(), out.size(), nullptr, tag ^ hmc::ofi::slot_key(1), &rr),
              HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(t->isend(second.second, in.data(), in.size(), nullptr, tag, &sr), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(p.wait(sr), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(p.wait(rr), HMC_PLUGIN_ERR_INTERNAL);
    EXPECT_TRUE(p.ha.logged("collide in the provider's tag space"));
    EXPECT_EQ(out, std::vector<uint8_t>(64, 0));
  });
}

INSTANTIATE_TEST_SUITE_P(Ofi, OfiLocal, ::testing::ValuesIn(net_configs_of("ofi")), config_name);

// ---------------------------------------------------------------------------------------------
// Settings and devices (each in a child process: the test process initialises libfabric only
// after its forks)

TEST(OfiConfig, UnknownProviderMeansNoDevice) {
  const hmc_net_plugin_v2_t* t = nullptr;
  NET_REQUIRE_PLUGIN("ofi", &t);
  in_child([&] {
    Host host(Cfg{{"HMC_OFI_PROVIDER", "nosuchprovider"}}, 5000, HMC_LOG_ERROR);
    hmc_net_ctx_t* c = nullptr;
    EXPECT_EQ(t->init(host.services(), &c), HMC_PLUGIN_ERR_NO_DEVICE);
    EXPECT_TRUE(host.logged("nosuchprovider")) << host.all_logs();
    // A domain the provider does not have is named in the reason.
    Host h2(Cfg{{"HMC_OFI_PROVIDER", "tcp"}, {"HMC_OFI_DOMAIN", "hmcnosuchif0"}}, 5000,
            HMC_LOG_ERROR);
    EXPECT_EQ(t->init(h2.services(), &c), HMC_PLUGIN_ERR_NO_DEVICE);
    EXPECT_TRUE(h2.logged("hmcnosuchif0")) << h2.all_logs();
  });
}

// The automatic choice on this machine (no settings): device properties, and the tcp device
// first and on loopback.
TEST(OfiProps, DevicesAndProperties) {
  const hmc_net_plugin_v2_t* t = nullptr;
  NET_REQUIRE_PLUGIN("ofi", &t);
  EXPECT_STREQ(t->name, "ofi");
  in_child([&] {
    Host host(Cfg{}, 5000, HMC_LOG_WARN);
    hmc_net_ctx_t* c = nullptr;
    hmc_plugin_status_t st = t->init(host.services(), &c);
    if (st == HMC_PLUGIN_ERR_NO_DEVICE)
      skip_child("libfabric offers no provider here: " + host.all_logs());
    ASSERT_EQ(st, HMC_PLUGIN_SUCCESS);
    int n = 0;
    ASSERT_EQ(t->device_count(c, &n), HMC_PLUGIN_SUCCESS);
    ASSERT_GE(n, 1);
    bool saw_tcp = false;
    for (int d = 0; d < n; ++d) {
      hmc_net_device_props_t p{};
      p.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
      ASSERT_EQ(t->device_props(c, d, &p), HMC_PLUGIN_SUCCESS);
      ASSERT_NE(p.name, nullptr);
      std::string name = p.name;
      std::printf("[ info ] device %d: %s flags 0x%x max_inflight %u\n", d, p.name, p.flags,
                  p.max_inflight);
      EXPECT_TRUE(p.flags & HMC_NET_FLAG_TAGGED);
      EXPECT_EQ(device_mem_kinds(p).count(MemKind::kHost), 1u);
      EXPECT_FALSE(p.flags & HMC_NET_FLAG_NEEDS_REG) << "local registration is the plugin's job";
      if (name == "shm") {
        EXPECT_TRUE(p.flags & HMC_NET_FLAG_SAME_HOST);
      }
      if (name == "tcp") {
        saw_tcp = true;
        EXPECT_EQ(d, 0) << "libfabric's first network provider comes first";
        EXPECT_TRUE(p.flags & HMC_NET_FLAG_RMA);
        EXPECT_FALSE(p.flags & HMC_NET_FLAG_SAME_HOST);
        // The handle carries the endpoint's address: 127.0.0.1 (HMC_LISTEN_HOST's default).
        uint8_t handle[HMC_NET_HANDLE_MAX];
        size_t len = 0;
        hmc_net_listener_t* l = nullptr;
        ASSERT_EQ(t->listen(c, d, handle, &len, &l), HMC_PLUGIN_SUCCESS);
        const size_t addr_off = 16 + handle[5];
        ASSERT_GE(len, addr_off + sizeof(sockaddr_in));
        sockaddr_in sin{};
        std::memcpy(&sin, handle + addr_off, sizeof(sin));
        EXPECT_EQ(sin.sin_family, AF_INET);
        EXPECT_EQ(ntohl(sin.sin_addr.s_addr), 0x7f000001u) << "tcp is not on loopback";
        t->close_listener(l);
      }
    }
    EXPECT_TRUE(saw_tcp) << "the automatic choice on this machine should include tcp";
    hmc_net_device_props_t p{};
    p.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
    EXPECT_EQ(t->device_props(c, n, &p), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(t->finalize(c), HMC_PLUGIN_SUCCESS);
  });
}

}  // namespace
}  // namespace net_test
