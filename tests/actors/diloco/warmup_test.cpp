// DiLoCo's synchronous warm-up (diloco.warmup_sync_steps = K) in whole runs: steps 1..K are
// swarm mode's, the rounds count from step K and start from θ(K), and workers, groups and
// averagers killed during the warm-up, at its end or after it leave every round applied once.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "../run_util.hpp"
#include "actors/common/tensor_list.hpp"
#include "replica_kinds.hpp"

using namespace swarmrt;
using namespace swarmrt::testing;

namespace {

config::RunConfig warmup_config(const std::string& mode, int64_t stages, Replica replica) {
  auto config = micro_run(mode, stages, 2, 12);
  config.diloco.inner_steps = 4;
  config.diloco.warmup_sync_steps = 4;
  use_replica(config, replica);
  return config;
}

// Rounds at K + 4 = 8 and the last step, 12; with 2 fragments, fragment 1 also at K + 2 = 6
// and K + 6 = 10. Nothing during the warm-up.
// The group's rounds started from θ(4): the last one leaves its θ where the workers are. (Had
// they started from θ(0), the group's θ would be off by the warm-up's steps; with quantized
// updates the workers do not notice until one restarts and takes it.)
void expect_rounds_after_the_warmup(const actors::RuntimeResult& r, int64_t stages,
                                    Replica replica) {
  expect_stage_rounds(r, stages, replica, {0, 1}, {0, 1, 2});
}

class Warmup : public ::testing::TestWithParam<Replica> {};

}  // namespace

// One stage of 2 workers, K = 4 of 12 steps, routed the same way in both runs: the losses of
// steps 1..5 (which see θ(0)..θ(4)) are swarm mode's bit for bit, step 6's is not (step 5 was a
// local step); the warm-up sent swarm mode's gradient bytes for 4 steps and none after; the
// rounds count from step 4.
TEST_P(Warmup, TheFirstKStepsAreSwarmModesAndTheRoundsCountFromK) {
  auto sync = micro_run("swarm", 1, 2, 12);
  route_deterministically(sync);
  auto config = warmup_config("diloco", 1, GetParam());
  route_deterministically(config);
  const auto a = run(sync);
  const auto b = run(config);
  ASSERT_EQ(b.report.losses.size(), 12u);
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(b.report.losses[i], a.report.losses[i]) << "step " << i + 1;
  EXPECT_NE(b.report.losses[5], a.report.losses[5]);
  expect_every_micro_batch_once(b.report, config.train.micro_batches);
  EXPECT_DOUBLE_EQ(b.bytes.at("gradients").get<double>(),
                   a.bytes.at("gradients").get<double>() * 4 / 12);
  expect_rounds_after_the_warmup(b, 1, GetParam());
  // Plain DiLoCo's workers load the group's θ(t) itself: its first round (step 8) moves them
  // on from where they are (had it started from θ(0): back, step 9's loss 5.01 against 5.00).
  if (GetParam() == Replica::plain) {
    EXPECT_LT(b.report.losses[8], b.report.losses[7]);
  }
}

INSTANTIATE_TEST_SUITE_P(Replicas, Warmup, every_replica(), ReplicaName{});

class WarmupKilled : public ReplicaKilled {};

// Two stages of 2 workers, K = 4: a worker killed during the warm-up (it takes a peer's state,
// not the group's θ(0)), as it sends θ(4) to the group, and after the warm-up (it takes the
// group's θ(4)); the group killed while θ(4) is on its way (the workers send it to the
// successor) and the gradient averager killed during the warm-up. Every micro-batch counts
// once, every round is applied once and in order, the stage's workers end equal.
TEST_P(WarmupKilled, EveryRoundAppliedOnceAndEveryMicroBatchOnce) {
  const auto& [kill, replica] = GetParam();
  const auto r = run_killed(warmup_config("diloco-swarm", 2, replica), kill, 12);
  expect_rounds_after_the_warmup(r, 2, replica);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, WarmupKilled,
    each_kill_with_each_replica({
        Kill{"WorkerInTheWarmUp", "stage1/worker1", 2, config::KillPhase::reduce},
        Kill{"WorkerAtItsEnd", "stage1/worker1", 4, config::KillPhase::apply},
        Kill{"WorkerAfterIt", "stage1/worker1", 5, config::KillPhase::start},
        Kill{"GroupAtItsEnd", "stage0/diloco", 4, config::KillPhase::apply},
        Kill{"AveragerInTheWarmUp", "stage0/averager", 3, config::KillPhase::start},
    }),
    KillAndReplicaName{});
