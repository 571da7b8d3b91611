// The chaos soak (labelled slow): many real actor kills in one long run lose nothing.
#include <gtest/gtest.h>
#include <cmath>

#include "run_util.hpp"

using namespace swarmrt;
using swarmrt::testing::micro_run;
using swarmrt::testing::run;

// Test 7 (in one process): a chaos soak. Random actors of every supervised kind (workers,
// DiLoCo groups, loaders) are killed every 50 ms, 50 times, while diloco-swarm 2x2 trains; the
// run completes with every micro-batch of every step counted exactly once.
TEST(FaultsSoak, FiftyRandomKillsLoseNothing) {
  auto config = micro_run("diloco-swarm", 2, 2, 400);
  config.diloco.inner_steps = 10;
  config.chaos.kill = "any";
  config.chaos.kill_every_s = 0.05;
  config.chaos.kill_limit = 50;
  config.chaos.seed = 7;
  config.supervision.max_restarts = 1000;
  const auto result = run(config);
  ASSERT_EQ(result.report.losses.size(), 400u);
  EXPECT_GE(result.restarts, 50u);
  for (size_t i = 0; i < result.report.completed.size(); ++i) {
    EXPECT_EQ(result.report.completed[i], config.train.micro_batches) << "step " << i + 1;
    EXPECT_EQ(result.report.duplicates[i], 0) << "step " << i + 1;
  }
  EXPECT_TRUE(std::isfinite(result.report.val_loss));
  EXPECT_LT(result.report.losses.back(), result.report.losses.front());
}

