// A peer's throughput EMA: exact from the first measurement on (bias correction), following a
// change of speed at the rate alpha sets, and blind to measurements of no time.
#include <gtest/gtest.h>

#include "policy/throughput.hpp"

namespace swarmrt::policy {

TEST(ThroughputEma, UnmeasuredUntilTheFirstCompletedWork) {
  ThroughputEma rate;
  EXPECT_FALSE(rate.value().has_value());
  rate.add(8, 0);  // no time: no measurement
  rate.add(8, -1);
  EXPECT_FALSE(rate.value().has_value());
  EXPECT_EQ(rate.measurements(), 0);
}

TEST(ThroughputEma, BiasCorrectedSoAConstantRateReadsExactly) {
  ThroughputEma rate;
  rate.add(8, 2);  // 4 samples/s
  ASSERT_TRUE(rate.value().has_value());
  EXPECT_NEAR(*rate.value(), 4.0, 1e-12);
  for (int i = 0; i < 20; ++i) rate.add(4, 1);
  EXPECT_NEAR(*rate.value(), 4.0, 1e-12);
  EXPECT_EQ(rate.measurements(), 21);
}

TEST(ThroughputEma, FollowsAChangeOfSpeedAtRateAlpha) {
  ThroughputEma rate;
  for (int i = 0; i < 200; ++i) rate.add(10, 1);  // 10 samples/s, bias gone
  rate.add(20, 1);                                // one measurement at 20
  EXPECT_NEAR(*rate.value(), 10 + ThroughputEma::kAlpha * 10, 1e-6);
  for (int i = 0; i < 200; ++i) rate.add(20, 1);
  EXPECT_NEAR(*rate.value(), 20.0, 1e-6);
}

}  // namespace swarmrt::policy
