#include <gtest/gtest.h>

#include <limits>

#include "policy/hop_deadline.hpp"

using swarmrt::policy::HopDeadline;
using Verdict = HopDeadline::Verdict;

namespace {
// A floor of 30 s, 4 x the slowest hop, a ceiling of an hour, at most 2 losses.
HopDeadline::Limits limits() {
  return {30, 4, 3600, 2};
}
}  // namespace

TEST(HopDeadline, TheWaitIsTheFloorUntilHopsAreSlowerThanItAllows) {
  HopDeadline d(limits());
  EXPECT_EQ(d.wait_s(0), 30);  // nothing measured yet
  d.observe_hop(2);
  EXPECT_EQ(d.wait_s(0), 30);  // 4 x 2 s is under the floor
  d.observe_hop(50);           // a micro-batch of a large model: 50 s on one stage
  d.observe_hop(10);
  EXPECT_EQ(d.slowest_hop_s(), 50);
  EXPECT_EQ(d.wait_s(0), 200);
  d.observe_hop(5000);
  EXPECT_EQ(d.wait_s(0), 3600);  // the ceiling
}

TEST(HopDeadline, EachLossDoublesTheWaitUpToTheCeiling) {
  HopDeadline d(limits());
  EXPECT_EQ(d.wait_s(1), 60);
  EXPECT_EQ(d.wait_s(2), 120);
  EXPECT_EQ(d.wait_s(40), 3600);
}

TEST(HopDeadline, AMicroBatchThatMovedDuringTheWaitIsWaitedForAgain) {
  HopDeadline d(limits());
  EXPECT_EQ(d.judge(true, false, 0, 0), Verdict::wait_again);
  EXPECT_EQ(d.judge(true, false, 0, 2), Verdict::wait_again);  // even after losses
}

TEST(HopDeadline, ABusyHolderIsWaitedForUpToTheCeiling) {
  HopDeadline d(limits());
  EXPECT_EQ(d.judge(false, true, 30, 0), Verdict::wait_again);
  EXPECT_EQ(d.judge(false, true, 3570, 0), Verdict::wait_again);
  EXPECT_EQ(d.judge(false, true, 3600, 0), Verdict::lost);
}

TEST(HopDeadline, AStillMicroBatchWithNobodyAtWorkIsLostAndTooManyLossesEndTheRun) {
  HopDeadline d(limits());
  EXPECT_EQ(d.judge(false, false, 0, 0), Verdict::lost);
  EXPECT_EQ(d.judge(false, false, 0, 1), Verdict::lost);
  EXPECT_EQ(d.judge(false, false, 0, 2), Verdict::give_up);  // lost twice already: max_losses
}

TEST(HopDeadline, NonsenseMeasurementsAreIgnored) {
  HopDeadline d(limits());
  d.observe_hop(-1);
  d.observe_hop(std::numeric_limits<double>::infinity());
  d.observe_hop(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(d.slowest_hop_s(), 0);
  EXPECT_EQ(d.wait_s(0), 30);
}
