// Notifications that carry bytes (hmc_put_notify, hmc_xfer_post_notify, hmc_notify_send,
// hmc_notify_wait_msg): the bytes arrive with the value after the data, in posting order with
// value-only notifications (which the reference path carries with the data: the mix crosses
// both channels of peer/notify_order.h), at 0 and HMC_NOTIFY_MAX_BYTES bytes; a buffer too
// small leaves the notification queued; hmc_notify_wait refuses one with bytes; bad arguments.
// Two contexts in this process over hoststage/tcp.
#include <cstring>
#include <string>
#include <vector>

#include "fixture.h"

namespace hmc_test {
namespace {

constexpr size_t kRegion = 64 * 1024;

// On hoststage/tcp, whose plugin carries value-only notifications with the data.
class NotifyBytes : public testing::Test {
 protected:
  void SetUp() override {
    env_.apply(base_environment());
    env_.apply({{"HMC_PATH", "hoststage/tcp"}, {"HMC_HOSTSTAGE_SHM", "0"}});
    hmc_status_t st = ctx_.create();
    ASSERT_EQ(st, HMC_SUCCESS) << "hmc_context_create: " << describe(st);
    ASSERT_EQ(connect_in_process(ctx(), &other_, kConnectTimeoutMs, &ours_, &theirs_), "");
    hmc_peer_info_t info{};
    info.struct_size = sizeof info;
    ASSERT_HMC_OK(hmc_peer_info(theirs_, &info));
    ASSERT_EQ(std::string(info.path), "hoststage/tcp");
    target_.assign(kRegion, 0);
    ASSERT_HMC_OK(
        region_.register_mem(ctx(), target_.data(), target_.size(), HMC_ACCESS_REMOTE_WRITE));
    std::vector<uint8_t> desc = region_.pack(&st);
    ASSERT_HMC_OK(st);
    ASSERT_HMC_OK(remote_.import(theirs_, desc));
  }
  hmc_context_t ctx() const { return ctx_.get(); }

  // The next notification at the target with its bytes.
  void take(hmc_notification_t* n, std::string* bytes) {
    std::vector<char> buf(HMC_NOTIFY_MAX_BYTES);
    size_t size = 0;
    ASSERT_HMC_OK(hmc_notify_wait_msg(ctx(), kOpTimeoutMs, n, buf.data(), buf.size(), &size));
    ASSERT_LE(size, buf.size());
    bytes->assign(buf.data(), size);
  }
  hmc_status_t put_notify(const std::vector<uint8_t>& src, uint64_t offset, uint64_t value,
                          const std::string& bytes) {
    const hmc_notify_msg_t m{value, bytes.data(), bytes.size()};
    hmc_request_t r = nullptr;
    hmc_status_t st =
        hmc_put_notify(theirs_, src.data(), src.size(), remote_.get(), offset, &m, &r);
    return st == HMC_SUCCESS ? finish(r, kOpTimeoutMs) : st;
  }
  hmc_status_t send(uint64_t value, const std::string& bytes, size_t* moved = nullptr) {
    const hmc_notify_msg_t m{value, bytes.data(), bytes.size()};
    hmc_request_t r = nullptr;
    hmc_status_t st = hmc_notify_send(theirs_, &m, &r);
    return st == HMC_SUCCESS ? finish(r, kOpTimeoutMs, moved) : st;
  }

  ScopedEnv env_;
  Context ctx_;
  Context other_;
  hmc_peer_t ours_ = nullptr, theirs_ = nullptr;
  std::vector<uint8_t> target_;
  Region region_;
  Remote remote_;
};

TEST_F(NotifyBytes, BytesArriveWithTheValueAfterTheData) {
  std::vector<uint8_t> src(4096, 0x5A);
  ASSERT_HMC_OK(put_notify(src, 100, 42, "request-42"));
  hmc_notification_t n{};
  std::string bytes;
  ASSERT_NO_FATAL_FAILURE(take(&n, &bytes));
  EXPECT_EQ(n.value, 42u);
  EXPECT_EQ(n.peer, ours_);
  EXPECT_EQ(bytes, "request-42");
  EXPECT_TRUE(std::equal(src.begin(), src.end(), target_.begin() + 100));
}

// Value-only puts (carried with the data by the reference path), puts with bytes, notifications
// without data and value-only lists, all posted back to back: hmc_notify_wait_msg returns them
// in posting order.
TEST_F(NotifyBytes, InPostingOrderWithValueOnlyNotifications) {
  constexpr int kRounds = 40;
  std::vector<uint8_t> src(1024, 0x11);
  const hmc_xfer_desc_t desc{0, kRegion - 1024, 1024};
  Region local;
  ASSERT_HMC_OK(local.register_mem(other_.get(), src.data(), src.size(), 0));
  hmc_xfer_list_t list = nullptr;
  ASSERT_HMC_OK(hmc_xfer_prepare(local.get(), remote_.get(), HMC_XFER_WRITE, &desc, 1, &list));
  std::vector<hmc_request_t> reqs;
  std::vector<std::pair<uint64_t, std::string>> want;
  for (int k = 0; k < kRounds; ++k) {
    const uint64_t v = uint64_t(k) * 10;
    const uint64_t off = uint64_t(k % 8) * 1024;
    hmc_request_t r = nullptr;
    ASSERT_HMC_OK(
        hmc_put(theirs_, src.data(), src.size(), remote_.get(), off, HMC_PUT_NOTIFY, v + 1, &r));
    reqs.push_back(r);
    want.push_back({v + 1, ""});
    const std::string b = "put-" + std::to_string(k);
    const hmc_notify_msg_t m{v + 2, b.data(), b.size()};
    ASSERT_HMC_OK(hmc_put_notify(theirs_, src.data(), src.size(), remote_.get(), off, &m, &r));
    reqs.push_back(r);
    want.push_back({v + 2, b});
    ASSERT_HMC_OK(
        hmc_put(theirs_, src.data(), src.size(), remote_.get(), off, HMC_PUT_NOTIFY, v + 3, &r));
    reqs.push_back(r);
    want.push_back({v + 3, ""});
    const std::string s = "alone-" + std::to_string(k);
    const hmc_notify_msg_t m2{v + 4, s.data(), s.size()};
    ASSERT_HMC_OK(hmc_notify_send(theirs_, &m2, &r));
    reqs.push_back(r);
    want.push_back({v + 4, s});
    ASSERT_HMC_OK(hmc_xfer_post(list, HMC_XFER_NOTIFY, v + 5, &r));
    reqs.push_back(r);
    want.push_back({v + 5, ""});
  }
  for (size_t i = 0; i < reqs.size(); ++i)
    ASSERT_EQ(finish(reqs[i], kOpTimeoutMs), HMC_SUCCESS)
        << "request #" << i << ": " << hmc_last_error();
  for (size_t i = 0; i < want.size(); ++i) {
    hmc_notification_t n{};
    std::string bytes;
    ASSERT_NO_FATAL_FAILURE(take(&n, &bytes));
    ASSERT_EQ(n.value, want[i].first) << "notification #" << i;
    ASSERT_EQ(bytes, want[i].second) << "notification #" << i;
  }
  hmc_notification_t extra{};
  size_t size = 0;
  EXPECT_EQ(hmc_notify_wait_msg(ctx(), 0, &extra, nullptr, 0, &size), HMC_ERR_TIMEOUT);
  ASSERT_HMC_OK(hmc_xfer_release(list));
}

TEST_F(NotifyBytes, StandaloneNotificationEndsOnceSentAndMovesNoData) {
  size_t moved = 99;
  ASSERT_HMC_OK(send(7, "abc", &moved));
  EXPECT_EQ(moved, 0u);
  hmc_notification_t n{};
  std::string bytes;
  ASSERT_NO_FATAL_FAILURE(take(&n, &bytes));
  EXPECT_EQ(n.value, 7u);
  EXPECT_EQ(n.peer, ours_);
  EXPECT_EQ(bytes, "abc");
  EXPECT_EQ(target_, std::vector<uint8_t>(kRegion, 0)) << "a notification wrote data";
}

TEST_F(NotifyBytes, NoBytesAndTheMostBytes) {
  // 0 bytes, with bytes NULL: a notification like a value-only one.
  const hmc_notify_msg_t none{5, nullptr, 0};
  hmc_request_t r = nullptr;
  ASSERT_HMC_OK(hmc_notify_send(theirs_, &none, &r));
  ASSERT_HMC_OK(finish(r, kOpTimeoutMs));
  hmc_notification_t n{};
  ASSERT_EQ(hmc_notify_wait(ctx(), kOpTimeoutMs, &n), HMC_SUCCESS)
      << "no bytes: hmc_notify_wait takes it: " << hmc_last_error();
  EXPECT_EQ(n.value, 5u);
  std::string most(HMC_NOTIFY_MAX_BYTES, '\0');
  for (size_t i = 0; i < most.size(); ++i) most[i] = char(i * 7 + 3);
  std::vector<uint8_t> src(512, 0x77);
  ASSERT_HMC_OK(put_notify(src, 0, 6, most));
  std::string bytes;
  ASSERT_NO_FATAL_FAILURE(take(&n, &bytes));
  EXPECT_EQ(n.value, 6u);
  EXPECT_EQ(bytes, most);
}

TEST_F(NotifyBytes, TooManyBytesAreRefused) {
  std::string over(HMC_NOTIFY_MAX_BYTES + 1, 'x');
  const hmc_notify_msg_t m{1, over.data(), over.size()};
  std::vector<uint8_t> src(64, 1);
  hmc_request_t r = nullptr;
  EXPECT_EQ(hmc_put_notify(theirs_, src.data(), src.size(), remote_.get(), 0, &m, &r),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hmc_last_error()).find("HMC_NOTIFY_MAX_BYTES"), std::string::npos)
      << hmc_last_error();
  EXPECT_EQ(hmc_notify_send(theirs_, &m, &r), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);
  hmc_notification_t n{};
  EXPECT_EQ(hmc_notify_wait(ctx(), 100, &n), HMC_ERR_TIMEOUT) << "a refused one was delivered";
}

TEST_F(NotifyBytes, TooSmallABufferLeavesItQueued) {
  const std::string b(100, 'q');
  ASSERT_HMC_OK(send(11, b));
  hmc_notification_t n{reinterpret_cast<hmc_peer_t>(0x1), 0xdead};
  char small[10];
  size_t size = 0;
  EXPECT_EQ(hmc_notify_wait_msg(ctx(), kOpTimeoutMs, &n, small, sizeof small, &size),
            HMC_ERR_TRUNCATED);
  EXPECT_EQ(size, b.size()) << "the bytes needed";
  EXPECT_EQ(n.value, 0xdeadu) << "*out was written";
  EXPECT_EQ(n.peer, reinterpret_cast<hmc_peer_t>(0x1));
  // hmc_notify_wait cannot take it either: it has no buffer.
  EXPECT_EQ(hmc_notify_wait(ctx(), 0, &n), HMC_ERR_TRUNCATED);
  EXPECT_NE(std::string(hmc_last_error()).find("hmc_notify_wait_msg"), std::string::npos)
      << hmc_last_error();
  EXPECT_EQ(n.value, 0xdeadu);
  std::vector<char> fit(b.size());
  size = 0;
  ASSERT_HMC_OK(hmc_notify_wait_msg(ctx(), 0, &n, fit.data(), fit.size(), &size));
  EXPECT_EQ(n.value, 11u);
  EXPECT_EQ(std::string(fit.data(), size), b);
  EXPECT_EQ(hmc_notify_wait_msg(ctx(), 0, &n, fit.data(), fit.size(), &size), HMC_ERR_TIMEOUT);
}

TEST_F(NotifyBytes, ListPostCarriesBytes) {
  std::vector<uint8_t> src(8192);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 13);
  Region local;
  ASSERT_HMC_OK(local.register_mem(other_.get(), src.data(), src.size(), 0));
  const hmc_xfer_desc_t descs[] = {{0, 4096, 1000}, {4096, 20000, 3000}, {1000, 0, 500}};
  hmc_xfer_list_t list = nullptr;
  ASSERT_HMC_OK(hmc_xfer_prepare(local.get(), remote_.get(), HMC_XFER_WRITE, descs, 3, &list));
  const std::string b = "kv-blocks-done";
  const hmc_notify_msg_t m{99, b.data(), b.size()};
  hmc_request_t r = nullptr;
  ASSERT_HMC_OK(hmc_xfer_post_notify(list, &m, &r));
  size_t moved = 0;
  ASSERT_HMC_OK(finish(r, kOpTimeoutMs, &moved));
  EXPECT_EQ(moved, 4500u);
  hmc_notification_t n{};
  std::string bytes;
  ASSERT_NO_FATAL_FAILURE(take(&n, &bytes));
  EXPECT_EQ(n.value, 99u);
  EXPECT_EQ(bytes, b);
  for (const auto& d : descs)
    EXPECT_TRUE(std::equal(src.begin() + d.local_offset, src.begin() + d.local_offset + d.size,
                           target_.begin() + d.remote_offset))
        << "range at " << d.remote_offset << " not in place";
  ASSERT_HMC_OK(hmc_xfer_release(list));
}

TEST_F(NotifyBytes, NullArgumentsAreRefused) {
  std::vector<uint8_t> src(64, 1);
  const hmc_notify_msg_t ok{1, "x", 1};
  const hmc_notify_msg_t no_bytes{1, nullptr, 3};
  hmc_request_t r = nullptr;
  EXPECT_EQ(hmc_put_notify(theirs_, src.data(), src.size(), remote_.get(), 0, nullptr, &r),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_put_notify(theirs_, src.data(), src.size(), remote_.get(), 0, &ok, nullptr),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_put_notify(nullptr, src.data(), src.size(), remote_.get(), 0, &ok, &r),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_put_notify(theirs_, src.data(), src.size(), remote_.get(), 0, &no_bytes, &r),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_xfer_post_notify(nullptr, &ok, &r), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_notify_send(theirs_, nullptr, &r), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_notify_send(theirs_, &ok, nullptr), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_notify_send(nullptr, &ok, &r), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_notify_send(theirs_, &no_bytes, &r), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);
  hmc_notification_t n{};
  size_t size = 0;
  char buf[4];
  EXPECT_EQ(hmc_notify_wait_msg(ctx(), 0, &n, buf, sizeof buf, nullptr), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_notify_wait_msg(ctx(), 0, nullptr, buf, sizeof buf, &size),
            HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_notify_wait_msg(ctx(), 0, &n, nullptr, 4, &size), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_notify_wait_msg(nullptr, 0, &n, buf, sizeof buf, &size), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hmc_notify_wait_msg(ctx(), -2, &n, buf, sizeof buf, &size), HMC_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace hmc_test
