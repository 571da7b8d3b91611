// DiLoCo's warm-up with sparse gradients (diloco.warmup_compress = topk) in whole runs: each
// warm-up step moves every worker's top-k wires to every worker and nothing more, a run resumed
// inside the warm-up continues as if it had never stopped (each worker's error feedback is in
// the checkpoint), and workers and averagers killed during it leave every micro-batch counted
// once.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "../../temp_dir.hpp"
#include "../run_util.hpp"
#include "model/checkpoint.hpp"
#include "model/run_dir.hpp"
#include "model/sparse_grads.hpp"
#include "replica_kinds.hpp"

using namespace swarmrt;
using namespace swarmrt::testing;

namespace {

// K = 4, H = 4: rounds at steps 8 and 12. 5% of each chunk of 256 values in 2 bits.
config::RunConfig sparse_config(const std::string& mode, int64_t stages, int64_t steps) {
  auto c = micro_run(mode, stages, 2, steps);
  c.diloco.inner_steps = 4;
  c.diloco.warmup_sync_steps = 4;
  c.diloco.warmup_compress = config::Compress::topk;
  c.diloco.warmup_density = 0.05;
  c.diloco.topk_chunk = 256;
  config::validate(c, "test");
  return c;
}

}  // namespace

// One stage of 2 workers, routed the same way as the dense warm-up: step 1 (θ(0)) has its
// loss, step 2 not (the sparse gradient moved θ elsewhere). Each warm-up step sent exactly two
// workers' wires up and, to each of the two, both wires and the scale: the layout's bytes, over
// 10x fewer than float32 gradients. Every micro-batch once; the rounds count from K and the
// workers end on the group's θ; the loss fell.
TEST(SparseWarmup, EachStepSendsEveryWorkersWiresToEveryWorkerAndNothingMore) {
  auto dense_config = sparse_config("diloco", 1, 12);
  dense_config.diloco.warmup_compress = config::Compress::none;
  route_deterministically(dense_config);
  auto config = sparse_config("diloco", 1, 12);
  route_deterministically(config);
  const auto dense = run(dense_config);
  const auto r = run(config);
  ASSERT_EQ(r.report.losses.size(), 12u);
  EXPECT_EQ(r.report.losses[0], dense.report.losses[0]);
  EXPECT_NE(r.report.losses[1], dense.report.losses[1]);
  expect_every_micro_batch_once(r.report, config.train.micro_batches);
  double wires = 0;  // one worker's wires for the stage's parameters
  for (const auto& [name, p] : r.params)
    wires += static_cast<double>(model::topk_bytes(p.numel(), model::warmup_topk(config.diloco)));
  const double per_step = 2 * wires + 2 * (4 + 2 * wires);
  EXPECT_DOUBLE_EQ(r.bytes.at("gradients").get<double>(), 4 * per_step);
  EXPECT_LT(r.bytes.at("gradients").get<double>(), dense.bytes.at("gradients").get<double>() / 10);
  expect_stage_rounds(r, 1, Replica::plain, {0, 1}, {});
  EXPECT_TRUE(std::isfinite(r.report.val_loss));
  EXPECT_LT(r.report.val_loss, r.report.losses.front());
}

// Checkpoints every 2 steps, resumed from step 2's, inside the warm-up: the losses of steps
// 3..8 are the uninterrupted run's to 1e-4. Each worker's error feedback ("grad/" residuals,
// 95% of each gradient's values at first) is in the checkpoint; without it step 3 would differ.
TEST(SparseWarmup, ARunResumedInsideTheWarmUpContinuesWithItsErrorFeedback) {
  auto config = sparse_config("diloco", 1, 8);
  config.checkpoint.every_steps = 2;
  config.checkpoint.keep = 10;
  // Which worker backpropagates which micro-batch decides what each one's top-k keeps: both
  // runs route the same way.
  route_deterministically(config);
  config::validate(config, "test");
  swarmrt::testing::TempDir dir;
  const auto whole = run_in(dir.path(), config).report.losses;
  ASSERT_EQ(whole.size(), 8u);
  model::CheckpointDir ckpts((dir.path() / "checkpoints").string());
  for (const auto& f : ckpts.list())
    if (f.find("step_00000002") == std::string::npos) std::filesystem::remove(f);
  const auto files = ckpts.list();
  ASSERT_EQ(files.size(), 1u);
  size_t residuals = 0;
  for (const auto& [name, t] : model::read_checkpoint(files.front()).tensors)
    if (name.find("residual/grad/") != std::string::npos) ++residuals;
  EXPECT_GT(residuals, 0u) << "no warm-up error feedback in " << files.front();
  const auto from2 = resume_in(dir.path(), config).report.losses;
  ASSERT_EQ(from2.size(), 6u);
  for (size_t i = 0; i < from2.size(); ++i)
    EXPECT_NEAR(from2[i], whole[2 + i], 1e-4) << "step " << 3 + i;
}

class SparseWarmupKilled : public ReplicaKilled {};

// Two stages of 2 workers: a worker killed as it reduces a warm-up step (its sparse gradient
// may be with the averager: the step goes on without it) and the averager killed in the
// warm-up (the workers send their wires again, from the residual they had before). Every
// micro-batch counts once, every round is applied once and in order, the stages end equal.
TEST_P(SparseWarmupKilled, EveryRoundAppliedOnceAndEveryMicroBatchOnce) {
  const auto& [kill, replica] = GetParam();
  auto config = sparse_config("diloco-swarm", 2, 12);
  use_replica(config, replica);
  const auto r = run_killed(config, kill, 12);
  expect_stage_rounds(r, 2, replica, {0, 1}, {0, 1, 2});
}

INSTANTIATE_TEST_SUITE_P(
    Faults, SparseWarmupKilled,
    each_kill_with_each_replica({
        Kill{"WorkerInTheWarmUp", "stage1/worker1", 2, config::KillPhase::reduce},
        Kill{"AveragerInTheWarmUp", "stage0/averager", 3, config::KillPhase::start},
    }),
    KillAndReplicaName{});
