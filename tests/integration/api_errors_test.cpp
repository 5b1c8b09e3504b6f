// Misuse of the public API and bad configuration, seen from a real libhmc.so in one process:
// each returns its documented status with a non-empty hmc_last_error(). A few on purpose; the
// unit tests cover the rest.
#include <chrono>
#include <thread>

#include "fixture.h"

namespace hmc_test {
namespace {

// Checks status and that a failure left a message.
#define EXPECT_HMC(want, expr)                                                              \
  do {                                                                                      \
    hmc_status_t st_ = (expr);                                                              \
    std::string msg_ = hmc_last_error();                                                    \
    EXPECT_EQ(st_, want) << #expr << ": " << msg_;                                          \
    if (st_ != HMC_SUCCESS && st_ != HMC_IN_PROGRESS) {                                     \
      EXPECT_NE(msg_, "") << #expr << " returned " << hmc_status_string(st_) << " with an " \
                          << "empty hmc_last_error()";                                      \
    }                                                                                       \
  } while (0)

// A NULL handle is both a NULL pointer (INVALID_ARGUMENT) and not a live handle
// (INVALID_HANDLE); either is acceptable.
#define EXPECT_HMC_BAD_HANDLE(expr)                                               \
  do {                                                                            \
    hmc_status_t st_ = (expr);                                                    \
    std::string msg_ = hmc_last_error();                                          \
    EXPECT_TRUE(st_ == HMC_ERR_INVALID_ARGUMENT || st_ == HMC_ERR_INVALID_HANDLE) \
        << #expr << " returned " << hmc_status_string(st_) << ": " << msg_;       \
    EXPECT_NE(msg_, "") << #expr << " left an empty hmc_last_error()";            \
  } while (0)

using ApiErrors = ContextTest;

TEST_F(ApiErrors, NullPointersAreInvalidArguments) {
  EXPECT_HMC(HMC_ERR_INVALID_ARGUMENT, hmc_context_create(nullptr, nullptr));
  uint8_t buf[64];
  hmc_region_t region = nullptr;
  EXPECT_HMC(HMC_ERR_INVALID_ARGUMENT,
             hmc_mem_register(ctx(), nullptr, 64, HMC_ACCESS_REMOTE_READ, &region));
  EXPECT_HMC(HMC_ERR_INVALID_ARGUMENT,
             hmc_mem_register(ctx(), buf, sizeof buf, HMC_ACCESS_REMOTE_READ, nullptr));
  size_t len = 16;
  EXPECT_HMC(HMC_ERR_INVALID_ARGUMENT, hmc_address(ctx(), nullptr, &len));
  EXPECT_HMC(HMC_ERR_INVALID_ARGUMENT, hmc_notify_wait(ctx(), 0, nullptr));
  hmc_request_t req = nullptr;
  EXPECT_HMC_BAD_HANDLE(hmc_send(nullptr, buf, sizeof buf, 1, &req));
  EXPECT_HMC_BAD_HANDLE(hmc_request_wait(nullptr, 0, nullptr));
  EXPECT_HMC_BAD_HANDLE(hmc_mem_deregister(nullptr));
}

TEST_F(ApiErrors, ZeroSizeOrUnknownAccessFlagsAreNotRegistered) {
  uint8_t buf[64];
  hmc_region_t region = nullptr;
  EXPECT_HMC(HMC_ERR_INVALID_ARGUMENT,
             hmc_mem_register(ctx(), buf, 0, HMC_ACCESS_REMOTE_READ, &region));
  EXPECT_HMC(HMC_ERR_INVALID_ARGUMENT, hmc_mem_register(ctx(), buf, sizeof buf, 1u << 30, &region));
  EXPECT_EQ(region, nullptr) << "an output was set by a failed call";
}

TEST_F(ApiErrors, RegionPackIntoASmallBufferSaysHowMuchItNeeds) {
  std::vector<uint8_t> mem(4096);
  Region r;
  hmc_status_t st = r.register_mem(ctx(), mem.data(), mem.size(), HMC_ACCESS_REMOTE_READ);
  ASSERT_EQ(st, HMC_SUCCESS) << describe(st);
  uint8_t tiny[1];
  size_t len = sizeof tiny;
  EXPECT_HMC(HMC_ERR_INVALID_ARGUMENT, hmc_region_pack(r.get(), tiny, &len));
  ASSERT_GT(len, sizeof tiny) << "*len must say the bytes needed";
  std::vector<uint8_t> desc(len);
  size_t len2 = desc.size();
  EXPECT_HMC(HMC_SUCCESS, hmc_region_pack(r.get(), desc.data(), &len2));
  EXPECT_EQ(len2, len);
}

TEST_F(ApiErrors, NotifyWaitWithNothingPendingTimesOut) {
  hmc_notification_t n{};
  EXPECT_HMC(HMC_ERR_TIMEOUT, hmc_notify_wait(ctx(), 0, &n));
  auto t0 = Clock::now();
  EXPECT_HMC(HMC_ERR_TIMEOUT, hmc_notify_wait(ctx(), 50, &n));
  EXPECT_GE(ms_since(t0), 45) << "hmc_notify_wait returned before its timeout";
  EXPECT_LT(ms_since(t0), 5000);
}

TEST_F(ApiErrors, MemoryCallsRefuseUnknownDevicesAndForeignPointers) {
  void* p = nullptr;
  EXPECT_HMC(HMC_ERR_NOT_FOUND, hmc_mem_alloc(ctx(), "no-such-device:7", 64, &p));
  EXPECT_EQ(p, nullptr);
  std::vector<uint8_t> foreign(64);
  EXPECT_HMC(HMC_ERR_INVALID_HANDLE, hmc_mem_free(ctx(), foreign.data()));
}

// The other side closed: a pending receive ends with HMC_ERR_PEER_LOST, and so does a send.
TEST_F(ApiErrors, SendToAPeerThatClosedEndsWithPeerLost) {
  Context other;
  hmc_peer_t ours = nullptr, theirs = nullptr;
  ASSERT_NO_FATAL_FAILURE(connect_pair(&other, &ours, &theirs));
  uint64_t v = 0;
  hmc_request_t pending = nullptr;
  ASSERT_HMC_OK(hmc_recv(ours, &v, sizeof v, 5, &pending));
  ASSERT_HMC_OK(hmc_peer_close(theirs));
  EXPECT_HMC(HMC_ERR_PEER_LOST, finish(pending, kOpTimeoutMs));
  EXPECT_HMC(HMC_ERR_PEER_LOST, send_wait(ours, &v, sizeof v, 5, kOpTimeoutMs));
}

// Our own closed peer handle. The header allows use-after-close detection to be best effort;
// this pins down that libhmc does detect it here.
TEST_F(ApiErrors, SendOnALocallyClosedPeerIsAnInvalidHandle) {
  Context other;
  hmc_peer_t ours = nullptr, theirs = nullptr;
  ASSERT_NO_FATAL_FAILURE(connect_pair(&other, &ours, &theirs));
  ASSERT_HMC_OK(hmc_peer_close(ours));
  uint64_t v = 0;
  hmc_request_t req = nullptr;
  EXPECT_HMC(HMC_ERR_INVALID_HANDLE, hmc_send(ours, &v, sizeof v, 1, &req));
}

// Requests point at their peer without owning it (the context keeps closed peers): a request
// still running when its own peer is closed ends cancelled, and its wait touches no freed peer
// (the sanitizer build would see it).
TEST_F(ApiErrors, RequestsOfALocallyClosedPeerEndCancelled) {
  Context other;
  hmc_peer_t ours = nullptr, theirs = nullptr;
  ASSERT_NO_FATAL_FAILURE(connect_pair(&other, &ours, &theirs));
  uint64_t a = 0, b = 0;
  hmc_request_t r1 = nullptr, r2 = nullptr;
  ASSERT_HMC_OK(hmc_recv(ours, &a, sizeof a, 7, &r1));
  ASSERT_HMC_OK(hmc_recv(ours, &b, sizeof b, 8, &r2));
  ASSERT_HMC_OK(hmc_peer_close(ours));
  EXPECT_HMC(HMC_ERR_CANCELLED, finish(r1, kOpTimeoutMs));
  // The other one through hmc_request_test, within the same bound.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kOpTimeoutMs);
  size_t bytes = 1;
  hmc_status_t st;
  while ((st = hmc_request_test(r2, &bytes)) == HMC_IN_PROGRESS &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_EQ(st, HMC_ERR_CANCELLED) << hmc_last_error();
}

// Destroying a context with a request still running releases the request: its handle is stale
// afterwards, not a pointer into the destroyed context's peers.
TEST_F(ApiErrors, RequestsDieWithTheirContext) {
  Context other;
  hmc_peer_t ours = nullptr, theirs = nullptr;
  ASSERT_NO_FATAL_FAILURE(connect_pair(&other, &ours, &theirs));
  uint64_t v = 0, w = 0;
  hmc_request_t pending = nullptr, ours_pending = nullptr;
  ASSERT_HMC_OK(hmc_recv(theirs, &v, sizeof v, 9, &pending));
  ASSERT_HMC_OK(hmc_recv(ours, &w, sizeof w, 9, &ours_pending));
  ASSERT_HMC_OK(other.reset());
  EXPECT_HMC(HMC_ERR_INVALID_HANDLE, hmc_request_wait(pending, 0, nullptr));
  // Our side sees the peer go: its receive ends rather than hangs.
  EXPECT_HMC(HMC_ERR_PEER_LOST, finish(ours_pending, kOpTimeoutMs));
}

// A request is released by the wait that returns its final status; waiting on it again is
// detected (best effort by the header, expected of libhmc).
TEST_F(ApiErrors, WaitOnAFinishedRequestIsAnInvalidHandle) {
  Context other;
  hmc_peer_t ours = nullptr, theirs = nullptr;
  ASSERT_NO_FATAL_FAILURE(connect_pair(&other, &ours, &theirs));
  uint64_t out = 0x1234, in = 0;
  hmc_request_t s = nullptr, r = nullptr;
  ASSERT_HMC_OK(hmc_recv(theirs, &in, sizeof in, 9, &r));
  ASSERT_HMC_OK(hmc_send(ours, &out, sizeof out, 9, &s));
  EXPECT_HMC(HMC_SUCCESS, finish(s, kOpTimeoutMs));
  size_t got = 0;
  EXPECT_HMC(HMC_SUCCESS, finish(r, kOpTimeoutMs, &got));
  EXPECT_EQ(got, sizeof in);
  EXPECT_EQ(in, out);
  EXPECT_HMC(HMC_ERR_INVALID_HANDLE, hmc_request_wait(s, 0, nullptr));
  EXPECT_HMC(HMC_ERR_INVALID_HANDLE, hmc_request_test(r, nullptr));
}

// Configuration errors surface at hmc_context_create, naming the variable and its value.
TEST(ConfigErrors, NonNumericTimeoutIsAConfigError) {
  std::string msg;
  hmc_status_t st = create_context_with("HMC_TIMEOUT_MS", "abc", &msg);
  EXPECT_EQ(st, HMC_ERR_CONFIG) << msg;
  EXPECT_NE(msg.find("HMC_TIMEOUT_MS"), std::string::npos) << "the message: " << msg;
  EXPECT_NE(msg.find("abc"), std::string::npos) << "the message: " << msg;
}

TEST(ConfigErrors, BadBooleanIsAConfigError) {
  std::string msg;
  hmc_status_t st = create_context_with("HMC_PROGRESS_THREAD", "maybe", &msg);
  EXPECT_EQ(st, HMC_ERR_CONFIG) << msg;
  EXPECT_NE(msg.find("HMC_PROGRESS_THREAD"), std::string::npos) << "the message: " << msg;
}

// A plugin's own variable is configuration too: a bad value stops the context, naming the
// plugin, the variable and the value, instead of quietly leaving the plugin out.
TEST(ConfigErrors, BadPluginVariableIsAConfigError) {
  std::string msg;
  hmc_status_t st = create_context_with("HMC_HOSTSTAGE_STREAMS", "many", &msg);
  EXPECT_EQ(st, HMC_ERR_CONFIG) << msg;
  EXPECT_NE(msg.find("hoststage"), std::string::npos) << "the message: " << msg;
  EXPECT_NE(msg.find("HMC_HOSTSTAGE_STREAMS"), std::string::npos) << "the message: " << msg;
  EXPECT_NE(msg.find("many"), std::string::npos) << "the message: " << msg;
}

}  // namespace
}  // namespace hmc_test
