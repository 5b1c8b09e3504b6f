// Put notifications carried by the net plugin and sent on the control plane, ordered as the
// initiator's puts (peer/notify_order.h), with the bytes of those that carry some, and the
// Notify message's fields.
#include "peer/notify_order.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/wire.h"
#include "hmc/hmc.h"
#include "peer/messages.h"

namespace hmc {
namespace {

using Values = std::vector<uint64_t>;
using Notes = std::vector<Note>;

Values values(const Notes& notes) {
  Values v;
  for (const Note& n : notes) v.push_back(n.value);
  return v;
}

TEST(NotifyReceiver, CarriedOnlyGoStraightThrough) {
  NotifyReceiver r;
  Notes out;
  r.carried(1, &out);
  r.carried(2, &out);
  EXPECT_EQ(values(out), (Values{1, 2}));
  EXPECT_EQ(r.control_delivered(), 0u);
}

TEST(NotifyReceiver, ANotifyWaitsForTheCarriedOnesBeforeIt) {
  NotifyReceiver r;
  Notes out;
  // Puts 1 and 2 carried, put 3 on the control plane; its Notify arrives first.
  r.control({3, {}}, 2, &out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(r.held(), 1u);
  r.carried(1, &out);
  EXPECT_EQ(values(out), (Values{1}));
  r.carried(2, &out);
  EXPECT_EQ(values(out), (Values{1, 2, 3}));
  EXPECT_EQ(r.control_delivered(), 1u);
  EXPECT_EQ(r.held(), 0u);
}

TEST(NotifyReceiver, NotifiesInARowReleaseTogetherInOrder) {
  NotifyReceiver r;
  Notes out;
  r.control({2, {}}, 1, &out);
  r.control({3, {}}, 1, &out);
  EXPECT_TRUE(out.empty());
  r.carried(1, &out);
  EXPECT_EQ(values(out), (Values{1, 2, 3}));
  EXPECT_EQ(r.control_delivered(), 2u);
  // A Notify that follows no more carried ones than arrived goes at once.
  r.control({4, {}}, 1, &out);
  EXPECT_EQ(values(out), (Values{1, 2, 3, 4}));
}

TEST(NotifyReceiver, DrainGivesWhatIsHeldInOrder) {
  NotifyReceiver r;
  Notes out;
  r.control({5, {}}, 3, &out);
  r.control({6, {}}, 3, &out);
  r.drain(&out);
  EXPECT_EQ(values(out), (Values{5, 6}));
  EXPECT_EQ(r.held(), 0u);
}

TEST(NotifySender, CarriesOnlyWhenEveryNotifyWasDelivered) {
  NotifySender s;
  EXPECT_FALSE(s.may_carry(true)) << "not offered by the path";
  s.carry_offered = true;
  EXPECT_TRUE(s.may_carry(true));
  EXPECT_FALSE(s.may_carry(false)) << "an earlier put waits for its Notify";
  s.carried_landed();
  s.carried_landed();
  EXPECT_EQ(s.control_sending(), 2u) << "the Notify follows two carried notifications";
  EXPECT_FALSE(s.may_carry(true)) << "that Notify is not acknowledged yet";
  s.acked(1);
  EXPECT_TRUE(s.may_carry(true));
  s.acked(0);  // an older acknowledgement changes nothing
  EXPECT_TRUE(s.may_carry(true));
}

TEST(NotifyMessages, EveryFieldRoundTripsAndIsRequired) {
  control::Writer w;
  msg::encode_notify({0xfeed, 7, "request-7"}, &w);
  msg::Notify back;
  ASSERT_TRUE(msg::decode_notify(w.data().data(), w.size(), &back));
  EXPECT_EQ(back.value, 0xfeedu);
  EXPECT_EQ(back.carried_before, 7u);
  EXPECT_EQ(back.bytes, "request-7");
  // value, count, then the u32 length and the bytes: every cut is refused.
  ASSERT_EQ(w.size(), 8u + 8u + 4u + 9u);
  for (size_t n = 0; n < w.size(); ++n)
    EXPECT_FALSE(msg::decode_notify(w.data().data(), n, &back)) << "cut at " << n;
  control::Writer none;
  msg::encode_notify({1, 0, ""}, &none);
  ASSERT_TRUE(msg::decode_notify(none.data().data(), none.size(), &back));
  EXPECT_EQ(back.bytes, "");
  control::Writer a;
  msg::encode_notify_ack(3, &a);
  uint64_t delivered = 0;
  ASSERT_TRUE(msg::decode_notify_ack(a.data().data(), a.size(), &delivered));
  EXPECT_EQ(delivered, 3u);
  EXPECT_FALSE(msg::decode_notify_ack(a.data().data(), 7, &delivered));
}

TEST(NotifyMessages, MoreBytesThanTheMostAreMalformed) {
  control::Writer most;
  msg::encode_notify({1, 0, std::string(HMC_NOTIFY_MAX_BYTES, 'm')}, &most);
  msg::Notify back;
  ASSERT_TRUE(msg::decode_notify(most.data().data(), most.size(), &back));
  EXPECT_EQ(back.bytes.size(), HMC_NOTIFY_MAX_BYTES);
  control::Writer over;
  msg::encode_notify({1, 0, std::string(HMC_NOTIFY_MAX_BYTES + 1, 'm')}, &over);
  EXPECT_FALSE(msg::decode_notify(over.data().data(), over.size(), &back));
}

// Carried value-only notifications and Notify messages with bytes, interleaved as the
// initiator posted them (1 carried, 2 with bytes, 3 carried, 4 with bytes, 5 carried), with the
// Notify messages arriving before the carried ones they follow: released in posting order,
// each with its bytes.
TEST(NotifyReceiver, BytesOfNotifyMessagesStayWithThemInOrder) {
  NotifyReceiver r;
  Notes out;
  r.control({2, "two"}, 1, &out);
  r.control({4, "four"}, 2, &out);
  EXPECT_TRUE(out.empty());
  r.carried(1, &out);
  ASSERT_EQ(values(out), (Values{1, 2}));
  EXPECT_EQ(out[1].bytes, "two");
  r.carried(3, &out);
  r.carried(5, &out);
  ASSERT_EQ(values(out), (Values{1, 2, 3, 4, 5}));
  EXPECT_EQ(out[0].bytes, "");
  EXPECT_EQ(out[2].bytes, "");
  EXPECT_EQ(out[3].bytes, "four");
  EXPECT_EQ(out[4].bytes, "");
  EXPECT_EQ(r.control_delivered(), 2u);
}

}  // namespace
}  // namespace hmc
