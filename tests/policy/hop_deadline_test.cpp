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

// A worker holds a take report back only while doing so cannot make a busy micro-batch look
// lost: the hop must be known to be short and the last send recent, both within a tenth of the
// least wait (50 ms at most).
TEST(HopReports, AreHeldOnlyForShortHopsWithinTheWindow) {
  using swarmrt::policy::report_at_once;
  EXPECT_DOUBLE_EQ(swarmrt::policy::report_window_s(30), 0.05);
  EXPECT_DOUBLE_EQ(swarmrt::policy::report_window_s(0.3), 0.03);
  EXPECT_FALSE(report_at_once(0.006, 0.01, 30));     // a 6 ms hop, sent 10 ms ago: held
  EXPECT_TRUE(report_at_once(std::nullopt, 0, 30));  // no rate yet (its first hop)
  EXPECT_TRUE(report_at_once(2.0, 0, 0.3));          // a slowed stage: seconds against 0.3 s
  EXPECT_TRUE(report_at_once(0.006, 0.06, 30));      // the window has passed since the last send
  EXPECT_TRUE(report_at_once(0.04, 0, 0.3));         // longer than the window (30 ms)
  // A rate that is no number is no estimate.
  EXPECT_TRUE(report_at_once(std::numeric_limits<double>::quiet_NaN(), 0, 30));
  EXPECT_TRUE(report_at_once(0.001, std::numeric_limits<double>::quiet_NaN(), 30));
}
