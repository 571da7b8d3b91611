#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "policy/spot_check.hpp"

namespace swarmrt::policy {
namespace {

TEST(SpotCheck, DrawsTheAskedFractionAndRepeatsIt) {
  for (double fraction : {0.05, 0.3}) {
    int checked = 0;
    const int n = 40000;
    for (int i = 0; i < n; ++i) {
      const bool c = spot_checked(7, static_cast<uint64_t>(i / 8), i % 8, 0, fraction);
      EXPECT_EQ(c, spot_checked(7, static_cast<uint64_t>(i / 8), i % 8, 0, fraction));
      checked += c ? 1 : 0;
    }
    // Binomial: 5 standard deviations either way.
    const double mean = n * fraction, sd = std::sqrt(n * fraction * (1 - fraction));
    EXPECT_NEAR(checked, mean, 5 * sd) << fraction;
  }
  EXPECT_FALSE(spot_checked(7, 1, 0, 0, 0.0));
  EXPECT_TRUE(spot_checked(7, 1, 0, 0, 1.0));
}

TEST(SpotCheck, AnotherSeedDrawsOtherMicroBatches) {
  int differ = 0;
  for (uint32_t mb = 0; mb < 1000; ++mb)
    differ += spot_checked(1, 5, mb, 0, 0.5) != spot_checked(2, 5, mb, 0, 0.5) ? 1 : 0;
  EXPECT_GT(differ, 400);  // independent draws differ half the time
  int stages = 0;
  for (uint32_t mb = 0; mb < 1000; ++mb)
    stages += spot_checked(1, 5, mb, 0, 0.5) != spot_checked(1, 5, mb, 1, 0.5) ? 1 : 0;
  EXPECT_GT(stages, 400);
}

TEST(SpotCheck, TheVerifierIsNeverExcludedAndEveryOtherIsDrawn) {
  const std::vector<uint32_t> stage{3, 1, 2, 0};
  std::set<uint32_t> drawn;
  for (uint64_t key = 0; key < 200; ++key) {
    auto v = pick_verifier(stage, {1}, key);
    ASSERT_TRUE(v);
    EXPECT_NE(*v, 1u);
    drawn.insert(*v);
    // The membership's order does not change the pick.
    EXPECT_EQ(v, pick_verifier({0, 1, 2, 3}, {1}, key));
  }
  EXPECT_EQ(drawn, (std::set<uint32_t>{0, 2, 3}));
  EXPECT_EQ(pick_verifier({4, 5}, {4, 5}, 9), std::nullopt);
  EXPECT_EQ(pick_verifier({4, 5}, {4}, 9), 5u);
}

TEST(SpotCheck, TwoAgainstOneDecidesAndOneAccuserNeverBans) {
  EXPECT_EQ(after_verifier(true, true), CheckVerdict::agreed);
  EXPECT_EQ(after_verifier(true, false), CheckVerdict::agreed);
  EXPECT_EQ(after_verifier(false, true), CheckVerdict::settle);
  EXPECT_EQ(after_verifier(false, false), CheckVerdict::unsettled);
  EXPECT_EQ(after_third(true), CheckVerdict::verifier_wrong);
  EXPECT_EQ(after_third(false), CheckVerdict::checked_wrong);
  EXPECT_STREQ(verdict_name(CheckVerdict::checked_wrong), "checked_wrong");
}

}  // namespace
}  // namespace swarmrt::policy
