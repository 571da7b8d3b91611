#include "policy/bound.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace swarmrt::policy {
namespace {

TEST(Bound, WithoutCapsTheBoundIsAllSpeedOverAllCostAndDescentKeepsItExactly) {
  // r_wk = s_w / c_k: speeds 4, 1, 4, 1 over costs 1 and 3: 10 / 4.
  const std::vector<double> cost = {1, 3};
  std::vector<double> rate;
  for (double s : {4.0, 1.0, 4.0, 1.0})
    for (double c : cost) rate.push_back(s / c);
  const auto b = placement_bound(rate, cost);
  EXPECT_EQ(b.value, 2.5);
  EXPECT_EQ(b.prices, (std::vector<double>{0.25, 0.75}));
}

TEST(Bound, ACapTightensItToTheLinearProgramsOptimum) {
  // Two workers of 4 samples/s, capped at 1 in stage 1. Splitting their time (x in stage 1):
  // P = min(x, 4 (2 - x)), best at x = 8/5: P = 1.6; prices (0.2, 0.8) prove it. The bound
  // without the cap's prices (sum s / sum c) says 4.
  const std::vector<double> rate = {4, 1, 4, 1}, cost = {1, 1};
  EXPECT_EQ(placement_bound(rate, cost, 0).value, 4);
  const auto b = placement_bound(rate, cost);
  EXPECT_GE(b.value, 1.6 - 1e-12);
  EXPECT_LE(b.value, 1.6 * 1.005);  // 2000 steps of descent: within 0.2%
  EXPECT_NEAR(b.prices[0], 0.2, 0.01);
}

TEST(Bound, NoPlacementBeatsIt) {
  // Every placement of 7 workers on 3 stages, rates drawn with caps: the best's P stays
  // under the bound, and the bound is within a few percent of it.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> speed(1, 10);
  const std::vector<double> cost = {1.0, 0.5, 1.5}, cap = {6, 3, 6};
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> rate;
    for (int w = 0; w < 7; ++w) {
      const double s = speed(rng);
      for (size_t k = 0; k < 3; ++k) rate.push_back(std::min(s / cost[k], cap[k]));
    }
    double best = 0;
    for (int code = 0; code < 3 * 3 * 3 * 3 * 3 * 3 * 3; ++code) {
      double r[3] = {0, 0, 0};
      for (int w = 0, c = code; w < 7; ++w, c /= 3) r[c % 3] += rate[size_t(w * 3 + c % 3)];
      best = std::max(best, std::min({r[0], r[1], r[2]}));
    }
    const auto b = placement_bound(rate, cost);
    EXPECT_GE(b.value, best * (1 - 1e-9)) << "trial " << trial;
    EXPECT_LE(b.value, best * 1.25) << "trial " << trial;
    double priced = 0;
    for (int w = 0; w < 7; ++w) priced += priced_rate(&rate[size_t(w * 3)], b.prices);
    EXPECT_DOUBLE_EQ(priced, b.value);
  }
}

}  // namespace
}  // namespace swarmrt::policy
