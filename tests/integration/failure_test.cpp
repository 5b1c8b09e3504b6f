// Failures between processes, over every data path: a peer that dies in the middle of a large
// transfer (every pending request ends with HMC_ERR_PEER_LOST in time, we survive, other peers
// keep working), a transfer list reading from a peer that dies under it, and the HMC_AUTH_TOKEN
// challenge.
#include "fixture.h"

namespace hmc_test {
namespace {

class PeerDeath : public LoopbackTest {};
HMC_INSTANTIATE_OVER_PATHS(PeerDeath);

constexpr int kDeathTimeoutMs = 3000;  // HMC_TIMEOUT_MS of both processes in this test

TEST_P(PeerDeath, PendingRequestsEndWithPeerLostAndOtherPeersKeepWorking) {
  ASSERT_NO_FATAL_FAILURE(open({{"HMC_TIMEOUT_MS", std::to_string(kDeathTimeoutMs)}}));
  struct sigaction pipe_action {};
  sigaction(SIGPIPE, nullptr, &pipe_action);
  if (pipe_action.sa_handler != SIG_DFL)
    std::cerr << "[ NOTE     ] SIGPIPE is not at its default disposition after "
                 "hmc_context_create; this test cannot see a stray SIGPIPE\n";
  // The survivor connects first, so that it is in place while the other one dies.
  Child survivor, victim;
  ASSERT_NO_FATAL_FAILURE(start(&survivor, scenario::kEcho));
  // 1 GiB (256 MiB under ASan): the peer kills itself 20 ms into sending it.
  const size_t big = HMC_TEST_ASAN ? 256 * kMiB : kGiB;
  ASSERT_NO_FATAL_FAILURE(start(&victim, scenario::kDieMidSend, {"size=" + std::to_string(big)}));

  // malloc: only the pages the transfer reaches are ever touched.
  HostBuffer in(big), other(64);
  ASSERT_TRUE(in) << "malloc of " << big << " bytes";
  Requests rq;
  size_t r_big = rq.post([&](hmc_request_t* posted) {
    return hmc_recv(victim.peer, in.data(), big, kTagData, posted);
  });
  size_t r_other = rq.post([&](hmc_request_t* posted) {
    return hmc_recv(victim.peer, other.data(), 64, kTagData + 1, posted);
  });
  ASSERT_NO_FATAL_FAILURE(send_ctrl(victim.peer, kTagCtrl, kCtrlGo));

  ExitInfo e = victim.proc.wait(kPeerExitTimeoutMs);
  auto t_dead = Clock::now();
  ASSERT_TRUE(!e.exited && e.signal == SIGKILL)
      << "the peer was to kill itself mid-transfer; it " << e.describe();

  const auto& big_end = rq.wait(r_big, kDeathTimeoutMs + 5000);
  int64_t ms = ms_since(t_dead);
  EXPECT_EQ(big_end.status, HMC_ERR_PEER_LOST)
      << "the receive of the interrupted " << big << "-byte message: " << big_end.error;
  EXPECT_LE(ms, kDeathTimeoutMs + 1000)
      << "the interrupted receive ended " << ms << " ms after the peer died; HMC_TIMEOUT_MS is "
      << kDeathTimeoutMs;
  EXPECT_EQ(big_end.error.find(kNoMessage), std::string::npos) << big_end.error;
  const auto& other_end = rq.wait(r_other, kDeathTimeoutMs + 5000);
  EXPECT_EQ(other_end.status, HMC_ERR_PEER_LOST) << "another pending receive: " << other_end.error;

  // Later operations on the dead peer fail the same way (at post or at wait) and do not kill
  // us with SIGPIPE (we leave SIGPIPE at its default: it would end this test process).
  {
    uint64_t v = 7;
    hmc_status_t st = send_wait(victim.peer, &v, sizeof v, kTagData + 2, kDeathTimeoutMs + 5000);
    EXPECT_EQ(st, HMC_ERR_PEER_LOST) << "send to the dead peer: " << describe(st);
    size_t got = 0;
    st = recv_wait(victim.peer, &v, sizeof v, kTagData + 3, kDeathTimeoutMs + 5000, &got);
    EXPECT_EQ(st, HMC_ERR_PEER_LOST) << "receive from the dead peer: " << describe(st);
  }
  hmc_peer_info_t info{};
  info.struct_size = sizeof info;
  hmc_status_t st = hmc_peer_info(victim.peer, &info);
  EXPECT_EQ(st, HMC_SUCCESS) << describe(st);
  EXPECT_EQ(info.alive, 0) << "hmc_peer_info of the dead peer";

  // The survivor is untouched: a value and a 1 MiB + 3 message there and back.
  ASSERT_NO_FATAL_FAILURE(send_ctrl(survivor.peer, kTagCtrl, 99));
  uint64_t v = 0;
  ASSERT_NO_FATAL_FAILURE(recv_ctrl(survivor.peer, kTagCtrl + 1, &v));
  EXPECT_EQ(v, 100u);
  HostBuffer out(kMiB + 3), back(kMiB + 3);
  pattern_fill(out.data(), out.size(), kSeedParent);
  std::string err;
  ASSERT_EQ(send_wait(survivor.peer, out.data(), out.size(), kTagData, kOpTimeoutMs, &err),
            HMC_SUCCESS)
      << err;
  size_t got = 0;
  ASSERT_EQ(recv_wait(survivor.peer, back.data(), back.size(), kTagReply, kOpTimeoutMs, &got, &err),
            HMC_SUCCESS)
      << err;
  EXPECT_EQ(got, back.size());
  EXPECT_EQ(pattern_check(back.data(), back.size(), kSeedChild), "");
  expect_exit_ok(&survivor);
}

// HMC_AUTH_TOKEN: the same on both sides connects; any difference, including a token on one
// side only, fails hmc_connect (in the peer) with HMC_ERR_AUTH, and the refused connector is
// counted here (hmc_accept_stats) instead of coming out of hmc_accept. The
// challenge happens on the control plane before a data path is chosen: reference paths only.
struct AuthCase {
  const char* name;
  std::optional<std::string> ours, theirs;
};

class Auth : public LoopbackTest {
 protected:
  void run(const AuthCase& a) {
    SCOPED_TRACE(a.name);
    ASSERT_NO_FATAL_FAILURE(open({{"HMC_AUTH_TOKEN", a.ours}}));
    const bool same = a.ours == a.theirs;
    const hmc_status_t want = same ? HMC_SUCCESS : HMC_ERR_AUTH;
    Child c;
    ASSERT_NO_FATAL_FAILURE(spawn(&c, scenario::kConnectExpect,
                                  {"status=" + std::to_string(static_cast<int>(want))},
                                  {{"HMC_AUTH_TOKEN", a.theirs}}));
    if (same) {
      ASSERT_NO_FATAL_FAILURE(accept(&c));
      ASSERT_NO_FATAL_FAILURE(send_ctrl(c.peer, kTagCtrl, 1));
      uint64_t v = 0;
      ASSERT_NO_FATAL_FAILURE(recv_ctrl(c.peer, kTagCtrl + 1, &v));
      EXPECT_EQ(v, 2u);
    } else {
      // A refused connector never comes out of hmc_accept: it is counted, with its reason.
      hmc_accept_stats_t s{};
      s.struct_size = sizeof s;
      auto t0 = Clock::now();
      while (ms_since(t0) < kConnectTimeoutMs) {
        ASSERT_EQ(hmc_accept_stats(ctx(), &s), HMC_SUCCESS) << describe(HMC_ERR_INTERNAL);
        if (s.failed > 0) break;
        usleep(5000);
      }
      EXPECT_EQ(s.failed, 1u) << "no refused connector counted within " << kConnectTimeoutMs
                              << " ms";
      EXPECT_EQ(s.last_failure_status, HMC_ERR_AUTH) << s.last_failure;
      std::string msg = s.last_failure;
      EXPECT_NE(msg.find("HMC_AUTH_TOKEN"), std::string::npos) << msg;
      EXPECT_EQ(msg.find(a.ours.value_or("\x01")), std::string::npos)
          << "the error message shows our token";
      hmc_peer_t peer = nullptr;
      EXPECT_EQ(hmc_accept(ctx(), 0, &peer), HMC_ERR_TIMEOUT);
    }
    expect_exit_ok(&c);
  }
};
HMC_INSTANTIATE_OVER_REFERENCE_PATHS(Auth);

TEST_P(Auth, SameTokenConnects) {
  run({"same", "s3cret-token", "s3cret-token"});
}
TEST_P(Auth, DifferentTokensAreRefused) {
  run({"different", "s3cret-token", "other-token"});
}
TEST_P(Auth, TokenOnlyOnTheAcceptorIsRefused) {
  run({"acceptor only", "s3cret-token", {}});
}
TEST_P(Auth, TokenOnlyOnTheConnectorIsRefused) {
  run({"connector only", {}, "s3cret-token"});
}

// A transfer list reading from a peer that dies under it: the request ends with
// HMC_ERR_PEER_LOST within HMC_TIMEOUT_MS (never hangs), and later posts fail the same way.
TEST_P(PeerDeath, ListReadFromAPeerThatDiesEndsWithPeerLost) {
  ASSERT_NO_FATAL_FAILURE(open({{"HMC_TIMEOUT_MS", std::to_string(kDeathTimeoutMs)}}));
  const size_t size = HMC_TEST_ASAN ? 64 * kMiB : 256 * kMiB, block = 16 * 1024;
  Child victim;
  ASSERT_NO_FATAL_FAILURE(
      start(&victim, scenario::kXferTargetDie, {"size=" + std::to_string(size)}));
  std::vector<uint8_t> desc;
  std::string err;
  ASSERT_EQ(recv_blob(victim.peer, kTagDesc, &desc, kOpTimeoutMs, &err), HMC_SUCCESS) << err;
  Remote rem;
  ASSERT_EQ(rem.import(victim.peer, desc), HMC_SUCCESS) << hmc_last_error();
  HostBuffer local(size);
  ASSERT_TRUE(local) << "malloc of " << size << " bytes";
  Region reg;
  ASSERT_EQ(reg.register_mem(ctx(), local.data(), size, 0), HMC_SUCCESS) << hmc_last_error();
  std::vector<hmc_xfer_desc_t> blocks;
  for (size_t b = 0; b + 1 < size / block; b += 2) {  // pair-swapped: nothing merges
    blocks.push_back({(b + 1) * block, (b + 1) * block, block});
    blocks.push_back({b * block, b * block, block});
  }
  hmc_xfer_list_t list = nullptr;
  ASSERT_EQ(
      hmc_xfer_prepare(reg.get(), rem.get(), HMC_XFER_READ, blocks.data(), blocks.size(), &list),
      HMC_SUCCESS)
      << hmc_last_error();
  ASSERT_NO_FATAL_FAILURE(send_ctrl(victim.peer, kTagCtrl, kCtrlGo));
  auto t_go = Clock::now();
  hmc_status_t last = HMC_SUCCESS;
  std::string last_error;
  int posts = 0;
  while (last == HMC_SUCCESS && posts < 1000) {
    hmc_request_t req = nullptr;
    last = hmc_xfer_post(list, 0, 0, &req);
    if (last == HMC_SUCCESS) last = hmc_request_wait(req, kDeathTimeoutMs + 5000, nullptr);
    if (last != HMC_SUCCESS) last_error = hmc_last_error();
    ++posts;
  }
  int64_t ms = ms_since(t_go);
  // libfabric's tcp provider ends a read on a connection that broke with FI_ECANCELED, which
  // net-ofi cannot tell from a refusal by a live target (plugins/net-ofi/README.md, "Where
  // access is enforced"): the request still ends in time, as HMC_ERR_REMOTE.
  const bool cancelled_as_refusal = GetParam().name == "ofi/tcp" && last == HMC_ERR_REMOTE;
  if (cancelled_as_refusal)
    std::cerr << "[ NOTE     ] ofi/tcp: the read under the dying peer ended with HMC_ERR_REMOTE ("
              << last_error << ")\n";
  else
    EXPECT_EQ(last, HMC_ERR_PEER_LOST) << "after " << posts << " posts: " << last_error;
  EXPECT_LE(ms, kDeathTimeoutMs + 3000)
      << "the read list under the dying peer ended " << ms << " ms after it was told to die; "
      << "HMC_TIMEOUT_MS is " << kDeathTimeoutMs;
  ExitInfo e = victim.proc.wait(kPeerExitTimeoutMs);
  EXPECT_TRUE(!e.exited && e.signal == SIGKILL)
      << "the peer was to kill itself; it " << e.describe();
  hmc_request_t req = nullptr;
  hmc_status_t st = hmc_xfer_post(list, 0, 0, &req);
  if (st == HMC_SUCCESS) st = hmc_request_wait(req, kDeathTimeoutMs + 5000, nullptr);
  if (!(cancelled_as_refusal && st == HMC_ERR_REMOTE))
    EXPECT_EQ(st, HMC_ERR_PEER_LOST) << "a list posted to the dead peer: " << describe(st);
  EXPECT_EQ(hmc_xfer_release(list), HMC_SUCCESS);
  victim.reported = true;  // killed; what it printed is of no interest
}

}  // namespace
}  // namespace hmc_test
