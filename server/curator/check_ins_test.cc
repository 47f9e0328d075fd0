#include "server/curator/check_ins.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::curator {
namespace {

using ::testing::HasSubstr;

CheckInDesk::Options Desk(double rate, double jitter = 0) {
  CheckInDesk::Options o;
  o.num_nodes = 100;
  o.max_per_second = rate;
  o.interval = absl::Seconds(60);
  o.jitter = jitter;
  return o;
}

TEST(CheckInDeskTest, NoLimitAdmitsEveryCheckInAndCountsDistinctDevices) {
  CheckInDesk desk(Desk(0));
  const absl::Time t = absl::FromUnixSeconds(1000);
  absl::Duration retry;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(desk.Admit({static_cast<uint32_t>(i % 7)}, t, &retry));
    desk.Finish(i % 2 ? CheckInDesk::Outcome::kServed
                      : CheckInDesk::Outcome::kIdle);
  }
  const auto c = desk.counters();
  EXPECT_EQ(c.check_ins, 50u);
  EXPECT_EQ(c.devices_seen, 7u);
  EXPECT_EQ(c.served, 25u);
  EXPECT_EQ(c.idle, 25u);
  EXPECT_EQ(c.paced, 0u);
}

// At R per second: a second's burst is admitted, then each paced device is
// given the next slot of a queue draining at R, 1/R apart, so that the
// paced devices come back at exactly the rate the desk admits.
TEST(CheckInDeskTest, PacesBeyondTheRateIntoSlotsOneOverRApart) {
  CheckInDesk desk(Desk(10));
  const absl::Time t = absl::FromUnixSeconds(1000);
  absl::Duration retry;
  for (uint32_t v = 0; v < 10; ++v) EXPECT_TRUE(desk.Admit({v}, t, &retry)) << v;
  for (int k = 1; k <= 5; ++k) {
    ASSERT_FALSE(desk.Admit({static_cast<uint32_t>(10 + k)}, t, &retry));
    EXPECT_EQ(retry, absl::Milliseconds(100) * k);
  }
  // A paced device back at its slot finds a token.
  EXPECT_TRUE(desk.Admit({11}, t + absl::Milliseconds(100), &retry));
  EXPECT_FALSE(desk.Admit({12}, t + absl::Milliseconds(100), &retry));
  // A quiet second refills the bucket to its burst, no more.
  const absl::Time later = t + absl::Seconds(5);
  int admitted = 0;
  for (uint32_t v = 0; v < 30; ++v) admitted += desk.Admit({v}, later, &retry);
  EXPECT_EQ(admitted, 10);
  EXPECT_EQ(desk.counters().paced, 5u + 1u + 20u);
}

TEST(CheckInDeskTest, IntervalsAreJitteredWithinTheirBounds) {
  CheckInDesk exact(Desk(0, 0));
  EXPECT_EQ(exact.Finish(CheckInDesk::Outcome::kIdle), absl::Seconds(60));
  CheckInDesk jittered(Desk(0, 0.25));
  absl::Duration lo = absl::InfiniteDuration(), hi = absl::ZeroDuration();
  for (int i = 0; i < 2000; ++i) {
    const absl::Duration d = jittered.Finish(CheckInDesk::Outcome::kIdle);
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_GE(lo, absl::Seconds(45));
  EXPECT_LE(hi, absl::Seconds(75));
  // Spread over the range, not stuck at one end.
  EXPECT_LT(lo, absl::Seconds(47));
  EXPECT_GT(hi, absl::Seconds(73));
}

TEST(CheckInDeskTest, ValidateNamesTheOptionOutOfRange) {
  CheckInDesk::Options o = Desk(-1);
  EXPECT_THAT(o.Validate().message(), HasSubstr("rate must be >= 0"));
  o = Desk(1, 1.0);
  EXPECT_THAT(o.Validate().message(), HasSubstr("jitter must be in [0, 1)"));
  o = Desk(1);
  o.interval = absl::ZeroDuration();
  EXPECT_THAT(o.Validate().message(), HasSubstr("interval must be > 0"));
  EXPECT_TRUE(Desk(5, 0.5).Validate().ok());
}

}  // namespace
}  // namespace ldpgraph::curator
