// A micro-batch is lost when it stops moving with no live worker at work on it, not after one
// fixed wait (policy/hop_deadline.hpp). Reproduced first: with the fixed wait, a stage slower
// than supervision.microbatch_timeout_s had its micro-batches re-run again and again (a
// gpt2-small pipeline on this machine: 32 microbatch_timeout faults in 7.5 minutes, no step).
#include <gtest/gtest.h>

#include "../run_util.hpp"
#include "actors/common/worker_id.hpp"

using namespace swarmrt;
using namespace swarmrt::testing;  // micro_run, run_in, TempDir, lines_with, ...

// Stage 1's worker computes each hop 500 times slower than it could (chaos.slow_factor: one to
// a few seconds here), the least wait is 0.3 s: every step outlasts several waits, the tracker
// sees the worker at work each time, and no micro-batch is re-run.
TEST(SlowStage, AStageFarSlowerThanTheLeastWaitCompletesWithNoTimeout) {
  auto config = micro_run("pp", 2, 1, 3);
  config.train.micro_batch = 4;
  config.train.micro_batches = 2;
  config.supervision.microbatch_timeout_s = 0.3;
  config.supervision.microbatch_timeout_factor = 1;  // the wait stays near the slowest hop
  config.chaos.slow_worker = actors::worker_id(1, 0);
  config.chaos.slow_factor = 500;
  config::validate(config, "test");
  TempDir dir;
  const auto result = run_in(dir.str(), config);
  ASSERT_EQ(result.report.losses.size(), 3u);
  expect_every_micro_batch_once(result.report, config.train.micro_batches);
  // Stage 1 computes the step's two micro-batches one after the other: a step longer than two
  // least waits had a hop longer than one, which the fixed wait declared lost.
  for (double s : result.report.step_seconds) EXPECT_GT(s, 2 * 0.3);
  EXPECT_TRUE(lines_with(dir / "metrics.jsonl", R"("kind":"microbatch_timeout")").empty());
}

// Hops lost for good (half of every worker's hops dropped, seeded) with no loss allowed: the run
// ends at the first lost micro-batch with a message naming the setting, not a loop of re-runs.
TEST(SlowStage, AMicroBatchLostMoreOftenThanAllowedEndsTheRunNamingTheSetting) {
  auto config = micro_run("pp", 2, 1, 3);
  config.chaos.drop_fraction = 0.5;  // drawn from chaos.seed: the same drops every run
  config.supervision.microbatch_max_losses = 0;
  config.supervision.microbatch_timeout_s = 0.2;
  config::validate(config, "test");
  TempDir dir;
  try {
    run_in(dir.str(), config);
    FAIL() << "the run went on";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("supervision.microbatch_max_losses = 0"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(lines_with(dir / "metrics.jsonl", R"("kind":"microbatch_lost_for_good")").empty());
}
