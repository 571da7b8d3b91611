// The chaos soak (labelled slow): many real actor kills in one long run lose nothing.
#include <gtest/gtest.h>
#include <cmath>

#include "../run_util.hpp"

using namespace swarmrt;
using swarmrt::testing::micro_run;
using swarmrt::testing::run;

// Test 7 (in one process; the node kills are net.chaos_soak): random actors of every
// supervised kind (workers, DiLoCo groups, loaders) are killed every 50 ms, 50 times, while
// diloco-swarm 2x2 trains; every kill is restarted, and the run completes with every
// micro-batch of every step counted exactly once.
class FaultsSoak : public ::testing::TestWithParam<int> {};

TEST_P(FaultsSoak, FiftyRandomKillsLoseNothing) {
  auto config = micro_run("diloco-swarm", 2, 2, 400);
  config.diloco.inner_steps = 10;
  config.chaos.kill = "any";
  config.chaos.kill_every_s = 0.05;
  config.chaos.kill_limit = 50;
  config.chaos.seed = GetParam();
  config.supervision.max_restarts = 1000;
  config.supervision.max_backoff_ms = 100;  // every restart done long before the run ends
  const auto result = run(config);
  ASSERT_EQ(result.report.losses.size(), 400u);
  EXPECT_EQ(result.kills, 50u);
  EXPECT_EQ(result.restarts, result.kills);
  for (size_t i = 0; i < result.report.completed.size(); ++i) {
    EXPECT_EQ(result.report.completed[i], config.train.micro_batches) << "step " << i + 1;
    EXPECT_EQ(result.report.duplicates[i], 0) << "step " << i + 1;
    EXPECT_EQ(result.report.extra_samples[i], 0) << "step " << i + 1;
    EXPECT_EQ(result.report.missing_samples[i], 0) << "step " << i + 1;
  }
  // Rounds are applied once each and in order, by every stage's group.
  ASSERT_EQ(result.applied_rounds.size(), 2u);
  for (const auto& rounds : result.applied_rounds)
    for (size_t i = 0; i < rounds.size(); ++i) EXPECT_EQ(rounds[i], i);
  EXPECT_TRUE(std::isfinite(result.report.val_loss));
  EXPECT_LT(result.report.losses.back(), result.report.losses.front());
}

INSTANTIATE_TEST_SUITE_P(Seeds, FaultsSoak, ::testing::Values(7, 8));
