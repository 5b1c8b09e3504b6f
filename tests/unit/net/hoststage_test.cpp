// What is particular to plugins/net-hoststage (device 0 tcp over one or more streams, device 1
// shm): its socket writes, its ring and socket flow control, its handle and key layouts, its
// connection nonce, its settings and its two devices. The contract scenarios run over its
// configurations in contract_test.cpp.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>

#include "suite.h"

namespace net_test {
namespace {

constexpr int kTcp = 0;
constexpr int kShm = 1;

// The settings of the hoststage_tcp configuration (explicit eager limits).
Cfg base_cfg() {
  for (const NetConfig& c : net_configs())
    if (c.name == "hoststage_tcp") return c.cfg;
  return {};
}

// A hoststage context listening on one of its devices, for the tests of its handles and its
// sockets (inside in_child): start() through ASSERT_NO_FATAL_FAILURE, stop() at the end.
struct Listening {
  Listening(const hmc_net_plugin_v2_t* t, Cfg cfg, uint32_t timeout_ms = 5000)
      : t(t), host(std::move(cfg), timeout_ms) {}
  void start(int dev) {
    ASSERT_EQ(t->init(host.services(), &c), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(t->listen(c, dev, handle, &len, &l), HMC_PLUGIN_SUCCESS);
  }
  hmc_plugin_status_t close_listener() {
    hmc_net_listener_t* was = l;
    l = nullptr;
    return t->close_listener(was);
  }
  // Closes the listener (unless closed already) and finalizes the context.
  void stop() {
    if (l != nullptr) close_listener();
    EXPECT_EQ(t->finalize(c), HMC_PLUGIN_SUCCESS);
  }

  const hmc_net_plugin_v2_t* t;
  Host host;
  hmc_net_ctx_t* c = nullptr;
  uint8_t handle[HMC_NET_HANDLE_MAX] = {};
  size_t len = 0;
  hmc_net_listener_t* l = nullptr;
};

// The tests of single hoststage contexts, with the plugin's table in t (skipped where the plugin
// was not built).
class HoststageContext : public ::testing::Test {
 protected:
  void SetUp() override { NET_REQUIRE_PLUGIN("hoststage", &t); }
  // body on a context of settings cfg listening on device dev, in a child process; the context
  // is finalized after it.
  void listening(const Cfg& cfg, uint32_t timeout_ms, int dev,
                 const std::function<void(Listening&)>& body) {
    in_child([&] {
      Listening ls(t, cfg, timeout_ms);
      ASSERT_NO_FATAL_FAILURE(ls.start(dev));
      body(ls);
      ls.stop();
    });
  }

  const hmc_net_plugin_v2_t* t = nullptr;
};
class HoststageConnect : public HoststageContext {};
class HoststageConfig : public HoststageContext {};
class HoststageProps : public HoststageContext {};

class HoststagePair : public NetTest {};

// Sending into a connection whose peer process died without reading: no SIGPIPE (the test
// process would die of it), PEER_LOST.
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
          st = s.t()->isend(s.ep(), buf.data(), buf.size(), nullptr, 1, &r);
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

// Where the kernel refuses cross-memory attach, every transfer still arrives byte-exact (it
// streams over the Unix socket), and each context says so once, at warn level, with the reason.
TEST_P(HoststagePair, RefusedCrossMemoryAttachFallsBackOnceWithAWarning) {
  if (config().refused_syscalls.empty()) GTEST_SKIP() << "cross-memory attach is not refused";
  const std::vector<size_t> sizes = {(256u << 10) + 1, (1u << 20) + 7, 3u << 20};
  const std::string warning = "bulk data on shm endpoints now streams over the Unix socket";
  auto warnings = [&](Side& s) {
    size_t n = 0;
    for (const std::string& l : s.host().logs()) n += l.find(warning) != std::string::npos;
    return n;
  };
  run(
      [&](Side& s) {
        ASSERT_NO_FATAL_FAILURE(receive_sizes(s, sizes, 100, 1000));
        ASSERT_NO_FATAL_FAILURE(send_sizes(s, sizes, 200, 2000));
        EXPECT_EQ(warnings(s), 1u) << s.host().all_logs();
        EXPECT_TRUE(s.host().logged("Operation not permitted")) << s.host().all_logs();
      },
      [&](Side& s) {
        ASSERT_NO_FATAL_FAILURE(send_sizes(s, sizes, 100, 1000));
        ASSERT_NO_FATAL_FAILURE(receive_sizes(s, sizes, 200, 2000));
        EXPECT_EQ(warnings(s), 1u) << s.host().all_logs();
      });
}

// The initiator of a large get dies while the owner is moving the bytes (shm: pushing them into
// the dead process with process_vm_writev; tcp: streaming them): the owner notices within a few
// seconds, ends its pending requests with PEER_LOST, refuses later posts with it, and closes the
// endpoint and deregisters the region at once.
TEST_P(HoststagePair, InitiatorKilledMidGetLeavesTheOwnerClean) {
  constexpr size_t kBig = 512u << 20;
  run(
      [&](Side& s) {
        const hmc_net_plugin_v2_t* t = s.t();
        // Untouched anonymous memory reads as zeros: nothing to fill.
        void* region =
            mmap(nullptr, kBig, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(region, MAP_FAILED);
        std::vector<uint8_t> rkey;
        hmc_net_mr_t* mr = reg(s, region, kBig, HMC_NET_ACCESS_LOCAL | kRemoteRw, &rkey);
        ASSERT_NE(mr, nullptr);
        std::vector<uint8_t> small(64);
        hmc_net_request_t* r_never = s.irecv(small.data(), small.size(), 7);
        ASSERT_NE(r_never, nullptr);
        send_region(s, reinterpret_cast<uintptr_t>(region), rkey);
        ASSERT_TRUE(s.await());  // the get is posted
        // A few progress calls move at most a few chunks of it; then the initiator dies.
        for (int i = 0; i < 8; ++i) t->progress(s.ctx());
        ASSERT_TRUE(s.signal());
        uint64_t t0 = mono_ns();
        EXPECT_EQ(s.wait(r_never, nullptr, 10), HMC_PLUGIN_ERR_PEER_LOST);
        double secs = static_cast<double>(mono_ns() - t0) / 1e9;
        EXPECT_LT(secs, 5.0) << "the initiator's death noticed only after " << secs << " s";
        hmc_net_request_t* r = nullptr;
        EXPECT_EQ(t->isend(s.ep(), small.data(), small.size(), nullptr, 8, &r),
                  HMC_PLUGIN_ERR_PEER_LOST);
        uint64_t c0 = mono_ns();
        s.close_ep();
        EXPECT_LT(mono_ns() - c0, 1000000000ull) << "close_ep blocked";
        EXPECT_EQ(deregister_memory(t, s.ctx(), s.dev(), mr), HMC_PLUGIN_SUCCESS);
        munmap(region, kBig);
      },
      [&](Side& s) {
        RemoteRegion rr;
        hmc_net_rkey_t* k = recv_key(s, &rr);
        ASSERT_NE(k, nullptr);
        void* dst = mmap(nullptr, kBig, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(dst, MAP_FAILED);
        hmc_net_request_t* r = nullptr;
        ASSERT_EQ(s.t()->iget(s.ep(), dst, kBig, nullptr, rr.base, k, &r), HMC_PLUGIN_SUCCESS);
        ASSERT_TRUE(s.signal());
        ASSERT_TRUE(s.await());
        if (::testing::Test::HasFailure()) _exit(1);
        raise(SIGKILL);
      },
      30, SIGKILL, 1500);
}

INSTANTIATE_TEST_SUITE_P(Hoststage, HoststagePair, ::testing::ValuesIn(net_configs_of("hoststage")),
                         config_name);

class HoststageLocal : public NetLocal {};

// A message that arrived for an armed context makes arm report work (IN_PROGRESS); a producer
// blocked on a full ring (shm) or full socket buffers (tcp) is woken when the consumer drains
// them.
TEST_P(HoststageLocal, ArmAndWaitFdWakeUps) {
  const size_t msg = config().eager;
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.connect());
    int fd_a = -1, fd_b = -1;
    ASSERT_EQ(t->wait_fd(p.a, &fd_a), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(t->wait_fd(p.b, &fd_b), HMC_PLUGIN_SUCCESS);
    std::vector<uint8_t> rbuf(8), sbuf(8);
    fill(sbuf.data(), 8, 5);
    hmc_net_request_t* r = nullptr;
    ASSERT_EQ(t->irecv(p.ea, rbuf.data(), 8, nullptr, 1, &r), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(arm_until_idle(t, p.a), HMC_PLUGIN_SUCCESS);
    EXPECT_FALSE(readable_within(fd_a, 0)) << "an idle, armed context must not look busy";
    hmc_net_request_t* s = nullptr;
    ASSERT_EQ(t->isend(p.eb, sbuf.data(), 8, nullptr, 1, &s), HMC_PLUGIN_SUCCESS);
    int done = 0;
    for (int i = 0; i < 1000 && !done; ++i)
      ASSERT_EQ(t->test(s, &done, nullptr), HMC_PLUGIN_SUCCESS);
    ASSERT_TRUE(done);
    EXPECT_TRUE(readable_within(fd_a, 5000)) << "the message did not wake the sleeping side";
    EXPECT_EQ(t->arm(p.a), HMC_PLUGIN_IN_PROGRESS) << "arm must report the waiting message";
    size_t n = 0;
    EXPECT_EQ(p.wait(r, &n), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(first_mismatch(rbuf.data(), 8, 5), -1);

    // Flood a with unexpected eager messages until b's sends stop completing (ring or socket
    // buffers full), then let b sleep: a draining its side must wake b.
    std::vector<uint8_t> big(msg);
    std::vector<hmc_net_request_t*> pending;
    for (int i = 0; i < 4096 && pending.size() < 4; ++i) {
      hmc_net_request_t* q = nullptr;
      ASSERT_EQ(t->isend(p.eb, big.data(), msg, nullptr, 9, &q), HMC_PLUGIN_SUCCESS);
      int d = 0;
      t->test(q, &d, nullptr);
      if (!d) pending.push_back(q);
    }
    ASSERT_FALSE(pending.empty()) << "b's sends never blocked";
    ASSERT_EQ(arm_until_idle(t, p.b), HMC_PLUGIN_SUCCESS);
    EXPECT_FALSE(readable_within(fd_b, 0));
    for (int i = 0; i < 100; ++i) t->progress(p.a);
    EXPECT_TRUE(readable_within(fd_b, 5000)) << "draining did not wake the blocked producer";
    for (hmc_net_request_t* q : pending) EXPECT_EQ(p.wait(q, nullptr, 10), HMC_PLUGIN_SUCCESS);
  });
}

// A stream presenting the wrong nonce (handle bytes 4..11) is closed (the connector fails,
// the listener logs why), and the listener still accepts the right peer afterwards.
TEST_P(HoststageLocal, WrongNonceRefusedThenRightPeerAccepted) {
  local([&](LocalPair& p) {
    hmc_net_ep_t* bad = nullptr;
    ASSERT_NO_FATAL_FAILURE(p.connect_forged(4, &bad));
    EXPECT_EQ(p.await_refusal(bad, 10), HMC_PLUGIN_ERR_PEER_LOST);
    EXPECT_TRUE(p.ha.logged("wrong connection nonce"));
    p.t->close_ep(bad);
    p.expect_one_working_connection();
  });
}

// The owner checks the key bytes (8..15 of the packed key) before touching its memory: a
// forged key ends every access with REMOTE, whatever its length.
TEST_P(HoststageLocal, ForgedKeyRefusedByTheOwner) {
  const size_t large = 2 * config().eager;
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.connect());
    std::vector<uint8_t> region(4 * config().eager), rkey;
    fill(region.data(), region.size(), 20);
    hmc_net_mr_t* mr = reg(t, p.a, p.dev, region.data(), region.size(), kRemoteRw, &rkey);
    ASSERT_NE(mr, nullptr);
    ASSERT_GE(rkey.size(), 16u);
    std::vector<uint8_t> forged = rkey;
    forged[8] ^= 0x5a;
    forged[15] ^= 0xa5;
    hmc_net_rkey_t* k = nullptr;
    ASSERT_EQ(t->rkey_unpack(p.eb, forged.data(), forged.size(), &k), HMC_PLUGIN_SUCCESS);
    const uint64_t base = reinterpret_cast<uintptr_t>(region.data());
    std::vector<uint8_t> src(large), dst(large);
    fill(src.data(), src.size(), 99);
    for (size_t len : {size_t{10}, large, size_t{0}}) {
      hmc_net_request_t* r = nullptr;
      ASSERT_EQ(t->iput(p.eb, src.data(), len, nullptr, base, k, &r), HMC_PLUGIN_SUCCESS);
      EXPECT_EQ(p.wait(r), HMC_PLUGIN_ERR_REMOTE) << "put of " << len << " bytes";
      ASSERT_EQ(t->iget(p.eb, dst.data(), len, nullptr, base, k, &r), HMC_PLUGIN_SUCCESS);
      EXPECT_EQ(p.wait(r), HMC_PLUGIN_ERR_REMOTE) << "get of " << len << " bytes";
    }
    EXPECT_EQ(first_mismatch(region.data(), region.size(), 20), -1) << "the region was written";
    EXPECT_EQ(t->rkey_release(k), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(deregister_memory(t, p.a, p.dev, mr), HMC_PLUGIN_SUCCESS);
  });
}

// Device memory registered through a dma-buf the CPU can map (a memfd stands in for the
// exporter): puts and gets reach the dma-buf's bytes, not the registered address, on both the
// target's side (the region) and the initiator's (a local buffer passed with its mr); an fd that
// cannot be mapped is refused as NOT_SUPPORTED, so that the core stages that region instead.
TEST_P(HoststageLocal, DmabufRegionIsReadAndWrittenThroughItsMapping) {
  const size_t len = 3 * config().eager + 4096 + 17;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  local([&](LocalPair& p) {
    const hmc_net_plugin_v2_t* t = p.t;
    ASSERT_NO_FATAL_FAILURE(p.connect());
    // Two "dma-bufs" with their data at an offset inside; the registered addresses are
    // unrelated placeholders the plugin must never touch (PROT_NONE).
    auto make = [&](uint8_t** view, int* fd) {
      *fd = memfd_create("hmc-test-dmabuf", MFD_CLOEXEC);
      ASSERT_GE(*fd, 0);
      ASSERT_EQ(ftruncate(*fd, static_cast<off_t>(len + page)), 0);
      void* v = mmap(nullptr, len + page, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
      ASSERT_NE(v, MAP_FAILED);
      *view = static_cast<uint8_t*>(v) + 100;  // the data starts 100 bytes into the buffer
    };
    uint8_t *target_view = nullptr, *local_view = nullptr;
    int target_fd = -1, local_fd = -1;
    ASSERT_NO_FATAL_FAILURE(make(&target_view, &target_fd));
    ASSERT_NO_FATAL_FAILURE(make(&local_view, &local_fd));
    void* fake = mmap(nullptr, 2 * (len + page), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(fake, MAP_FAILED);
    uint8_t* target_addr = static_cast<uint8_t*>(fake);
    uint8_t* local_addr = target_addr + len + page;
    fill(target_view, len, 1);
    std::vector<uint8_t> rkey, unused;
    hmc_net_mr_t* tmr = nullptr;
    ASSERT_EQ(register_memory(t, p.a, p.dev, MemKind::kDmabuf, target_addr, len, kRemoteRw, &tmr,
                              &rkey, target_fd, 100),
              HMC_PLUGIN_SUCCESS);
    hmc_net_mr_t* lmr = nullptr;
    ASSERT_EQ(register_memory(t, p.b, p.dev, MemKind::kDmabuf, local_addr, len,
                              HMC_NET_ACCESS_LOCAL, &lmr, &unused, local_fd, 100),
              HMC_PLUGIN_SUCCESS);
    // The mappings hold their own reference: the fds may go.
    close(target_fd);
    close(local_fd);
    hmc_net_rkey_t* k = nullptr;
    ASSERT_EQ(t->rkey_unpack(p.eb, rkey.data(), rkey.size(), &k), HMC_PLUGIN_SUCCESS);
    const uint64_t base = reinterpret_cast<uintptr_t>(target_addr);
    for (size_t n : {size_t{10}, len - 1}) {
      fill(local_view, n, 7);
      hmc_net_request_t* r = nullptr;
      ASSERT_EQ(t->iput(p.eb, local_addr, n, lmr, base + 1, k, &r), HMC_PLUGIN_SUCCESS);
      ASSERT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS) << "put of " << n << " bytes";
      EXPECT_EQ(first_mismatch(target_view + 1, n, 7), -1) << "put of " << n << " bytes";
      fill(target_view, len, 3);
      ASSERT_EQ(t->iget(p.eb, local_addr, n, lmr, base + 1, k, &r), HMC_PLUGIN_SUCCESS);
      ASSERT_EQ(p.wait(r), HMC_PLUGIN_SUCCESS) << "get of " << n << " bytes";
      std::vector<uint8_t> want(target_view + 1, target_view + 1 + n);
      EXPECT_EQ(std::vector<uint8_t>(local_view, local_view + n), want) << "get of " << n;
    }
    EXPECT_EQ(t->rkey_release(k), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(deregister_memory(t, p.a, p.dev, tmr), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(deregister_memory(t, p.b, p.dev, lmr), HMC_PLUGIN_SUCCESS);
    // An fd that cannot be mapped (a pipe) is not a dma-buf this plugin reads.
    int pipefd[2];
    ASSERT_EQ(pipe(pipefd), 0);
    hmc_net_mr_t* bad = nullptr;
    EXPECT_EQ(register_memory(t, p.a, p.dev, MemKind::kDmabuf, target_addr, len, kRemoteRw, &bad,
                              &unused, pipefd[0], 0),
              HMC_PLUGIN_ERR_NOT_SUPPORTED);
    close(pipefd[0]);
    close(pipefd[1]);
    munmap(fake, 2 * (len + page));
    munmap(target_view - 100, len + page);
    munmap(local_view - 100, len + page);
  });
}

INSTANTIATE_TEST_SUITE_P(Hoststage, HoststageLocal,
                         ::testing::ValuesIn(net_configs_of("hoststage", false)), config_name);

// ---------------------------------------------------------------------------------------------
// Connection handles

// A peer that accepts the connection at the socket level but never answers the hello: ep_ready
// fails within the host's timeout, and posts fail.
TEST_F(HoststageConnect, SilentPeerTimesOut) {
  for (int dev : {kTcp, kShm}) {
    SCOPED_TRACE(dev == kTcp ? "tcp" : "shm");
    // A real handle gives the format; its address is replaced by a socket nobody serves.
    listening(base_cfg(), 300, dev, [&](Listening& ls) {
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
        ASSERT_EQ(ls.handle[12], 1);  // one address: ip at 13..16, port at 17..18 (network order)
        std::memcpy(ls.handle + 17, &a.sin_port, 2);
      } else {
        silent = socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un u{};
        u.sun_family = AF_UNIX;
        // Same length as the real name, so the handle layout stays valid.
        size_t nlen = ls.handle[16];
        std::string name(nlen, 'z');
        std::memcpy(u.sun_path + 1, name.data(), nlen);
        ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&u),
                       static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + nlen)),
                  0);
        ASSERT_EQ(listen(silent, 16), 0);
        std::memcpy(ls.handle + 17, name.data(), nlen);
      }
      hmc_net_ep_t* ep = nullptr;
      ASSERT_EQ(t->connect(ls.c, dev, ls.handle, ls.len, &ep), HMC_PLUGIN_SUCCESS);
      uint64_t t0 = mono_ns();
      hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
      while (st == HMC_PLUGIN_IN_PROGRESS && mono_ns() - t0 < 5000000000ull) st = t->ep_ready(ep);
      double ms = static_cast<double>(mono_ns() - t0) / 1e6;
      EXPECT_EQ(st, HMC_PLUGIN_ERR_PEER_LOST);
      EXPECT_GE(ms, 250);
      EXPECT_LT(ms, 2000);
      hmc_net_request_t* r = nullptr;
      uint8_t b[4];
      EXPECT_EQ(t->isend(ep, b, 4, nullptr, 1, &r), HMC_PLUGIN_ERR_PEER_LOST);
      t->close_ep(ep);
      close(silent);
    });
  }
}

// A connector waiting in the backlog while the process is out of descriptors (accept4 fails
// with EMFILE; hmc-soak's fdlimit fault): the listening socket is left unwatched a while, so
// an idle context looks idle (arm succeeds) instead of reporting the socket on every pass (a
// busy loop of the progress thread: 560,000 failed accept4 calls in 3 s before). Once
// descriptors are back the connector is accepted (its garbage hello is then refused: closed).
TEST_F(HoststageConnect, OutOfDescriptorsListenerDoesNotSpin) {
  listening(base_cfg(), 1000, kTcp, [&](Listening& ls) {
    ASSERT_EQ(ls.handle[12], 1);  // one address: ip at 13..16, port at 17..18 (network order)
    sockaddr_in a{};
    a.sin_family = AF_INET;
    std::memcpy(&a.sin_addr.s_addr, ls.handle + 13, 4);
    std::memcpy(&a.sin_port, ls.handle + 17, 2);
    int cli = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(cli, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);  // in the backlog
    // No descriptor free: the limit at the highest one in use, the holes below it filled.
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    int top = dup(0);
    ASSERT_GE(top, 0);
    rlimit low = old;
    low.rlim_cur = rlim_t(top) + 1;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    std::vector<int> holes;
    for (int fd; (fd = dup(0)) >= 0;) holes.push_back(fd);
    ASSERT_EQ(errno, EMFILE);
    int idle = 0;
    for (int i = 0; i < 200; ++i) {
      t->progress(ls.c);
      if (t->arm(ls.c) == HMC_PLUGIN_SUCCESS) ++idle;
    }
    EXPECT_GT(idle, 150) << "the listener out of descriptors kept the context busy";
    for (int fd : holes) close(fd);
    close(top);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
    std::vector<uint8_t> junk(256, 0xee);
    ASSERT_EQ(send(cli, junk.data(), junk.size(), MSG_NOSIGNAL), ssize_t(junk.size()));
    bool closed = false;
    uint64_t t0 = mono_ns();
    while (!closed && mono_ns() - t0 < 5000000000ull) {
      t->progress(ls.c);
      char b;
      ssize_t r = recv(cli, &b, 1, MSG_DONTWAIT);
      closed = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
      usleep(1000);
    }
    EXPECT_TRUE(closed) << "the connector was never accepted once descriptors were back";
    close(cli);
  });
}

// A port nobody listens on refuses; a handle of another protocol version (byte 0) or for the
// other device is an invalid argument.
TEST_F(HoststageConnect, RefusedAndMalformedHandles) {
  listening(base_cfg(), 2000, kTcp, [&](Listening& ls) {
    ASSERT_EQ(ls.close_listener(), HMC_PLUGIN_SUCCESS);
    hmc_net_ep_t* ep = nullptr;
    ASSERT_EQ(t->connect(ls.c, kTcp, ls.handle, ls.len, &ep), HMC_PLUGIN_SUCCESS);
    hmc_plugin_status_t st = HMC_PLUGIN_IN_PROGRESS;
    uint64_t t0 = mono_ns();
    while (st == HMC_PLUGIN_IN_PROGRESS && mono_ns() - t0 < 5000000000ull) st = t->ep_ready(ep);
    EXPECT_EQ(st, HMC_PLUGIN_ERR_PEER_LOST);
    t->close_ep(ep);
    ep = nullptr;
    EXPECT_EQ(t->connect(ls.c, kShm, ls.handle, ls.len, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    std::vector<uint8_t> v(ls.handle, ls.handle + ls.len);
    v[0] = 99;  // protocol version
    EXPECT_EQ(t->connect(ls.c, kTcp, v.data(), v.size(), &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(ls.host.logged("protocol version"));
    EXPECT_EQ(t->connect(ls.c, 7, ls.handle, ls.len, &ep), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ep, nullptr);
  });
}

// ---------------------------------------------------------------------------------------------
// Settings and devices

TEST_F(HoststageConfig, ValidSpellingsAreAccepted) {
  in_child([&] {
    // Valid spellings are accepted.
    Host ok(Cfg{{"HMC_HOSTSTAGE_STREAMS", "4"},
                {"HMC_HOSTSTAGE_EAGER_LIMIT", "32k"},
                {"HMC_HOSTSTAGE_SHM", "off"},
                {"HMC_HOSTSTAGE_IFNAMES", " lo "},
                {"HMC_HOSTSTAGE_SOCKBUF", "0"},
                {"HMC_HOSTSTAGE_INJECT_ERRORS", "1000"}});
    hmc_net_ctx_t* c = nullptr;
    ASSERT_EQ(t->init(ok.services(), &c), HMC_PLUGIN_SUCCESS);
    int n = 0;
    EXPECT_EQ(t->device_count(c, &n), HMC_PLUGIN_SUCCESS);
    EXPECT_EQ(n, 1) << "HMC_HOSTSTAGE_SHM=off must hide the shm device";
    EXPECT_EQ(t->finalize(c), HMC_PLUGIN_SUCCESS);
  });
}

TEST_F(HoststageConfig, InterfaceListGivesOneAddressEach) {
  listening(Cfg{{"HMC_HOSTSTAGE_IFNAMES", "lo,lo"}}, 5000, kTcp, [&](Listening& ls) {
    ASSERT_EQ(ls.handle[12], 2) << "one advertised address per listed interface";
    ASSERT_EQ(ls.len, 13u + 2 * 6);
    for (int i = 0; i < 2; ++i) {
      uint32_t ip = 0;
      uint16_t port = 0;
      std::memcpy(&ip, ls.handle + 13 + 6 * i, 4);
      std::memcpy(&port, ls.handle + 17 + 6 * i, 2);
      EXPECT_EQ(ip, htonl(INADDR_LOOPBACK));
      EXPECT_NE(port, 0);
    }
  });
}

TEST_F(HoststageConfig, ListenAnyAdvertisesAConcreteAddress) {
  listening(Cfg{{"HMC_LISTEN_HOST", "0.0.0.0"}}, 5000, kTcp, [&](Listening& ls) {
    ASSERT_GE(ls.len, 19u);
    uint32_t ip = 0;
    std::memcpy(&ip, ls.handle + 13, 4);
    EXPECT_NE(ip, 0u) << "0.0.0.0 must not be advertised";
  });
}

// Two devices, tcp and shm, host memory only, no message size limit.
TEST_F(HoststageProps, DevicesAndProperties) {
  EXPECT_STREQ(t->name, "hoststage");
  in_child([&] {
    Host host(base_cfg());
    hmc_net_ctx_t* c = nullptr;
    ASSERT_EQ(t->init(host.services(), &c), HMC_PLUGIN_SUCCESS);
    int n = 0;
    ASSERT_EQ(t->device_count(c, &n), HMC_PLUGIN_SUCCESS);
    ASSERT_EQ(n, 2);
    hmc_net_device_props_t p{};
    p.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
    ASSERT_EQ(t->device_props(c, kTcp, &p), HMC_PLUGIN_SUCCESS);
    EXPECT_STREQ(p.name, "tcp");
    EXPECT_EQ(p.flags, HMC_NET_FLAG_RMA | HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_DMABUF);
    EXPECT_EQ(device_mem_kinds(p), (std::set<MemKind>{MemKind::kHost, MemKind::kDmabuf}));
    EXPECT_EQ(p.max_msg_size, 0u);
    ASSERT_EQ(t->device_props(c, kShm, &p), HMC_PLUGIN_SUCCESS);
    EXPECT_STREQ(p.name, "shm");
    EXPECT_EQ(p.flags, HMC_NET_FLAG_RMA | HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_DMABUF |
                           HMC_NET_FLAG_SAME_HOST);
    EXPECT_EQ(t->device_props(c, 2, &p), HMC_PLUGIN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(t->finalize(c), HMC_PLUGIN_SUCCESS);
  });
}

}  // namespace
}  // namespace net_test
