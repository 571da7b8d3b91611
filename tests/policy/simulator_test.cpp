#include "policy/simulator.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace swarmrt::policy {
namespace {

// Two equal stages, four peers of speeds 4, 1, 4, 1 placed as the directory does (fewest
// workers first: 0 and 2 in stage 0, 1 and 3 in stage 1), a balancer every 20 s, a move takes
// 10 s (10 bytes of state over a 1 byte/s link), 100 s in all.
SimParams hand_case() {
  SimParams p;
  p.cost = {1.0, 1.0};
  p.speeds = {4, 1, 4, 1};
  p.duration_s = 100;
  p.period_s = 20;
  p.jitter = 0;
  p.state_bytes = {10, 10};
  p.link_bytes_per_s = 1;
  p.sample_s = 50;
  p.balance.cooldown_s = 120;
  return p;
}

// Four equal stages of `peers` peers that fail `failures_per_hour` each and come back after
// `recovery_s` on average, their measurements 5% off.
SimParams churned(int64_t peers, double failures_per_hour, double recovery_s) {
  SimParams p;
  p.cost = {1.0, 1.0, 1.0, 1.0};
  p.peers = peers;
  p.failures_per_hour = failures_per_hour;
  p.recovery_s = recovery_s;
  p.noise = 0.05;
  return p;
}

TEST(Simulator, ReproducesAHandComputedCaseExactly) {
  // By hand: stage rates 8 and 2, P = 2 until t = 20; worker 0 moves to stage 1 (the lowest id
  // of the two best moves, P would be 4) and downloads until 30: P = min(4, 2) = 2; then 4.
  // At 40 worker 0 is cooling down; worker 1 moves to stage 0 (5 and 5), arriving at 50. From
  // then on P = 5 = the bound (10 samples/s over 2 stages); nothing moves at 60, 80 or 100.
  // Samples: 20x2 + 10x2 + 10x4 + 10x4 + 50x5 = 390; the bound's 100x5 = 500.
  const auto r = simulate(hand_case());
  ASSERT_EQ(r.moves.size(), 2u);
  EXPECT_EQ(r.moves[0].t, 20);
  EXPECT_EQ(r.moves[0].move.worker, 0u);
  EXPECT_EQ(r.moves[0].move.to, 1u);
  EXPECT_EQ(r.moves[0].move.before, 2);
  EXPECT_EQ(r.moves[0].move.after, 4);
  EXPECT_EQ(r.moves[1].t, 40);
  EXPECT_EQ(r.moves[1].move.worker, 1u);
  EXPECT_EQ(r.moves[1].move.to, 0u);
  EXPECT_EQ(r.moves[1].move.after, 5);
  EXPECT_EQ(r.samples, 390);
  EXPECT_EQ(r.bound_samples, 500);
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_EQ(r.points[0].t, 50);
  EXPECT_EQ(r.points[0].window, 140.0 / 250.0);
  EXPECT_EQ(r.points[1].rate, 5);
  EXPECT_EQ(r.points[1].window, 1.0);
}

TEST(Simulator, WithoutTheBalancerNothingMoves) {
  auto p = hand_case();
  p.balancer = false;
  const auto r = simulate(p);
  EXPECT_TRUE(r.moves.empty());
  EXPECT_EQ(r.samples, 200);
  EXPECT_EQ(r.bound_samples, 500);
}

TEST(Simulator, LinksAndDilocoRoundsCapTheRate) {
  SimParams p;
  p.cost = {1.0, 1.0};
  p.speeds = {100, 100};
  p.duration_s = 10;
  p.balancer = false;
  // Each boundary stage sends and receives 100 bytes per sample over 1000 bytes/s: 5 samples/s.
  p.link_bytes_per_s = 1000;
  p.sample_bytes = 100;
  EXPECT_EQ(simulate(p).samples, 50);
  // Every 10 steps of 5 samples, a round of 100 bytes (2 x 100 / 1000 = 0.2 s) stalls it.
  p.inner_steps = 10;
  p.step_samples = 5;
  p.round_bytes = {100, 0};
  EXPECT_DOUBLE_EQ(simulate(p).samples, 10 * 50.0 / (50.0 / 5 + 0.2));
}

TEST(Simulator, OneSeedOneRunAndTheSameChurnWithAndWithoutTheBalancer) {
  auto p = churned(200, 0.5, 600);
  p.joins_per_hour = 0.1;
  const auto a = simulate(p), b = simulate(p);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.moves.size(), b.moves.size());
  EXPECT_GT(a.failures, 50);
  p.balancer = false;
  const auto c = simulate(p);
  EXPECT_EQ(c.failures, a.failures);
  EXPECT_EQ(c.recoveries, a.recoveries);
  EXPECT_EQ(c.joins, a.joins);
}

TEST(Simulator, AThousandPeersWithChurnHoldNinetyPercentWithTheBalancer) {
  // The case: 1000 peers, 4 stages, speeds spread 10x, 10% failing per hour (back
  // after 10 minutes on average), measurements 5% off; plans of up to 16 moves every 30 s.
  // Seeded: the same figures every run.
  auto p = churned(1000, 0.1, 600);
  p.balance.min_gain = 0.01;
  p.balance.max_moves = 16;
  p.balance.cooldown_s = 300;
  const auto with = simulate(p);
  p.balancer = false;
  const auto without = simulate(p);
  EXPECT_GE(with.fraction(), 0.90);
  EXPECT_GT(with.fraction(), without.fraction());
  EXPECT_FALSE(with.moves.empty());
}

// Peers that fail and come back download their stage's state: from four donors each sparing
// a quarter of its link they are back sooner than from one, and the swarm completes more;
// every failure's time is recorded. Seeded: the same figures every run.
TEST(Simulator, MoreDonorsBringFailedPeersBackSooner) {
  auto p = churned(200, 1, 60);
  p.state_bytes = {4e9, 4e9, 4e9, 4e9};
  p.link_bytes_per_s = 1.25e8;  // 1 Gbit/s: 32 s for the state over a whole link
  p.donor_share = 0.25;
  p.balancer = false;
  p.donors = 1;
  const auto one = simulate(p);
  p.donors = 4;
  const auto four = simulate(p);
  EXPECT_GT(one.failures, 100);
  EXPECT_EQ(one.failures, four.failures);  // the same churn
  EXPECT_EQ(one.failure_times.size(), static_cast<size_t>(one.failures));
  EXPECT_GT(four.samples, one.samples * 1.01);
  p.donors = 0;
  EXPECT_THROW(simulate(p), std::invalid_argument);
}

TEST(Simulator, RefusesBadParametersByName) {
  auto p = hand_case();
  p.cost = {1.0, 0.0};
  EXPECT_THROW(simulate(p), std::invalid_argument);
  p = hand_case();
  p.state_bytes = {1};
  try {
    simulate(p);
    FAIL() << "accepted one state size for two stages";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("state_bytes"), std::string::npos) << e.what();
  }
  p = hand_case();
  p.jitter = 1;
  EXPECT_THROW(simulate(p), std::invalid_argument);
}

}  // namespace
}  // namespace swarmrt::policy
