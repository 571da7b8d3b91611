// DiLoCo's schedules in whole runs: diloco.inner_steps_schedule (H small early, then
// diloco.inner_steps) and diloco.outer_lr_schedule, after a synchronous warm-up, in plain,
// Streaming and eager DiLoCo; workers and groups killed before, at and after a change of H
// leave every round applied once, in the schedule's number.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "../run_util.hpp"
#include "replica_kinds.hpp"

using namespace swarmrt;
using namespace swarmrt::testing;

namespace {

// 16 steps: a warm-up of 2, H = 4 for steps 3..10, then H = 8; the outer learning rate decays
// from 0.7 to 0.1 over steps 2..16.
config::RunConfig schedule_config(const std::string& mode, int64_t stages, Replica replica) {
  auto config = micro_run(mode, stages, 2, 16);
  config.diloco.warmup_sync_steps = 2;
  config.diloco.inner_steps = 8;
  config.diloco.inner_steps_schedule = "4:8";
  config.diloco.outer_lr_schedule = config::Schedule::cosine;
  config.diloco.outer_min_lr = 0.1;
  use_replica(config, replica);
  return config;
}

// Plain: rounds at 6 and 10 (H = 4 from step 2), none at 18 (H = 8 from step 10), and the last
// step's: 3 rounds, where H = 8 throughout would hold 2. Two fragments: fragment 0 at 6, 10
// and 16; fragment 1 (offset ⌊H/2⌋) at 4, 8, then 14 (offset 4 from step 10) and 16.
void expect_the_schedules_rounds(const actors::RuntimeResult& r, int64_t stages, Replica replica) {
  expect_stage_rounds(r, stages, replica, {0, 1, 2}, {0, 1, 2, 3});
}

class Schedules : public ::testing::TestWithParam<Replica> {};

}  // namespace

// One stage of 2 workers: the rounds fall where each phase's H puts them, the stage ends on
// the group's θ, and the outer learning rate's decay changes the run (the same run with a
// constant one ends elsewhere) while both train.
TEST_P(Schedules, RoundsFollowEachPhasesHAndTheOuterRateDecays) {
  auto config = schedule_config("diloco", 1, GetParam());
  route_deterministically(config);
  const auto r = run(config);
  ASSERT_EQ(r.report.losses.size(), 16u);
  expect_every_micro_batch_once(r.report, config.train.micro_batches);
  expect_the_schedules_rounds(r, 1, GetParam());
  EXPECT_LT(r.report.val_loss, r.report.losses.front());

  auto constant = config;
  constant.diloco.outer_lr_schedule = config::Schedule::constant;
  const auto c = run(constant);
  expect_the_schedules_rounds(c, 1, GetParam());
  // The first round (step 4 or 6) already steps at a decayed rate, so θ differs from there on.
  const auto& a = r.worker_params.at(actors::worker_id(0, 0));
  const auto& b = c.worker_params.at(actors::worker_id(0, 0));
  bool differ = false;
  for (size_t i = 0; i < a.size(); ++i) differ |= !at::equal(a[i].second, b[i].second);
  EXPECT_TRUE(differ);
  EXPECT_TRUE(std::isfinite(c.report.val_loss));
}

INSTANTIATE_TEST_SUITE_P(Replicas, Schedules, every_replica(), ReplicaName{});

class SchedulesKilled : public ReplicaKilled {};

// Two stages of 2 workers: a worker killed in the first phase (it takes the group's θ and goes
// on at H = 4), at the change of H (step 10: its last H = 4 round on its way) and in the second
// phase; the group killed at the change of H and in the second phase (its successor takes the
// round from the workers). Every micro-batch counts once, every round of the schedule is
// applied once and in order, and each stage ends on its group's θ.
TEST_P(SchedulesKilled, EveryRoundOfTheScheduleAppliedOnce) {
  const auto& [kill, replica] = GetParam();
  const auto r = run_killed(schedule_config("diloco-swarm", 2, replica), kill, 16);
  expect_the_schedules_rounds(r, 2, replica);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, SchedulesKilled,
    each_kill_with_each_replica({
        Kill{"WorkerInTheFirstPhase", "stage1/worker1", 7, config::KillPhase::start},
        Kill{"WorkerAtTheChange", "stage1/worker1", 10, config::KillPhase::apply},
        Kill{"WorkerInTheSecondPhase", "stage1/worker1", 12, config::KillPhase::start},
        Kill{"GroupAtTheChange", "stage0/diloco", 10, config::KillPhase::apply},
        Kill{"GroupInTheSecondPhase", "stage0/diloco", 14, config::KillPhase::apply},
    }),
    KillAndReplicaName{});
