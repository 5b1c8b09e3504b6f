// Put notifications carried by the net plugin and sent on the control plane, ordered as the
// initiator's puts (peer/notify_order.h), and the Notify message's appended count.
#include "peer/notify_order.h"

#include <gtest/gtest.h>

#include <vector>

#include "control/wire.h"
#include "peer/messages.h"

namespace hmc {
namespace {

using Values = std::vector<uint64_t>;

TEST(NotifyReceiver, CarriedOnlyGoStraightThrough) {
  NotifyReceiver r;
  Values out;
  r.carried(1, &out);
  r.carried(2, &out);
  EXPECT_EQ(out, (Values{1, 2}));
  EXPECT_EQ(r.control_delivered(), 0u);
}

TEST(NotifyReceiver, ANotifyWaitsForTheCarriedOnesBeforeIt) {
  NotifyReceiver r;
  Values out;
  // Puts 1 and 2 carried, put 3 on the control plane; its Notify arrives first.
  r.control(3, 2, &out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(r.held(), 1u);
  r.carried(1, &out);
  EXPECT_EQ(out, (Values{1}));
  r.carried(2, &out);
  EXPECT_EQ(out, (Values{1, 2, 3}));
  EXPECT_EQ(r.control_delivered(), 1u);
  EXPECT_EQ(r.held(), 0u);
}

TEST(NotifyReceiver, NotifiesInARowReleaseTogetherInOrder) {
  NotifyReceiver r;
  Values out;
  r.control(2, 1, &out);
  r.control(3, 1, &out);
  EXPECT_TRUE(out.empty());
  r.carried(1, &out);
  EXPECT_EQ(out, (Values{1, 2, 3}));
  EXPECT_EQ(r.control_delivered(), 2u);
  // A Notify that follows no more carried ones than arrived goes at once.
  r.control(4, 1, &out);
  EXPECT_EQ(out, (Values{1, 2, 3, 4}));
}

TEST(NotifyReceiver, DrainGivesWhatIsHeldInOrder) {
  NotifyReceiver r;
  Values out;
  r.control(5, 3, &out);
  r.control(6, 3, &out);
  r.drain(&out);
  EXPECT_EQ(out, (Values{5, 6}));
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

TEST(NotifyMessages, CountRoundTripsAndIsZeroFromAnOlderPeer) {
  control::Writer w;
  msg::encode_notify({0xfeed, 7}, &w);
  msg::Notify back;
  ASSERT_TRUE(msg::decode_notify(w.data().data(), w.size(), &back));
  EXPECT_EQ(back.value, 0xfeedu);
  EXPECT_EQ(back.carried_before, 7u);
  // An older peer's Notify is the value alone.
  ASSERT_TRUE(msg::decode_notify(w.data().data(), 8, &back));
  EXPECT_EQ(back.value, 0xfeedu);
  EXPECT_EQ(back.carried_before, 0u);
  EXPECT_FALSE(msg::decode_notify(w.data().data(), 12, &back)) << "a count cut short";
  EXPECT_FALSE(msg::decode_notify(w.data().data(), 4, &back));
  control::Writer a;
  msg::encode_notify_ack(3, &a);
  uint64_t delivered = 0;
  ASSERT_TRUE(msg::decode_notify_ack(a.data().data(), a.size(), &delivered));
  EXPECT_EQ(delivered, 3u);
  EXPECT_FALSE(msg::decode_notify_ack(a.data().data(), 7, &delivered));
}

}  // namespace
}  // namespace hmc
