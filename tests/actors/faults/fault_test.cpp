// Faults in one process (architecture §7): real actors are killed while a swarm trains; supervisors
// restart them, the tracker re-runs what they held, and the run ends as a fault-free run does.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "../run_util.hpp"
#include "actors/tracker/swarm_checkpoint.hpp"
#include "model/run_dir.hpp"

using namespace swarmrt;
using swarmrt::testing::expect_every_micro_batch_once;
using swarmrt::testing::lines_with;
using swarmrt::testing::micro_run;
using swarmrt::testing::route_deterministically;
using swarmrt::testing::run;
using swarmrt::testing::run_in;
using swarmrt::testing::small_corpus;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("swarmrt-fault-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

}  // namespace

// Bounds of the worker-kill comparison below, from the spread of 60 measured runs of it with
// the routing made deterministic (30 on an idle 2-core VM, 30 with two running at once), as
// faulty/clean - 1: validation loss -2.25% to -0.34% (mean -1.52%, sd 0.56), last-round loss
// -2.51% to -0.04% (mean -1.61%, sd 0.71). Each bound is more than 6 sd from the mean. (With
// throughput wiring the same comparison once measured +5.08% in a fresh-clone CI run.)
constexpr double kWorkerKillValBound = 0.05;
constexpr double kWorkerKillRoundBound = 0.06;

// Test 1: a stage worker killed in the middle of step 5 of a 20-step diloco-swarm 2x2 run.
TEST(Faults, WorkerKilledMidStepIsRestartedAndTheRunCompletes) {
  auto config = micro_run("diloco-swarm", 2, 2, 20);
  config.diloco.inner_steps = 5;
  // Seeded uniform wiring with a slot for every micro-batch: the clean run routes the same way
  // every time, and so does the faulty one outside the killed worker's step.
  route_deterministically(config);
  const auto clean = run(config);

  config.chaos.kill = "stage1/worker1";
  config.chaos.kill_at_step = 5;  // the chaos actor kills it as step 5 starts dispatching
  TempDir dir;
  const auto faulty = run_in(dir.path, config);

  ASSERT_EQ(faulty.report.losses.size(), 20u);
  expect_every_micro_batch_once(faulty.report, config.train.micro_batches);
  EXPECT_GE(faulty.restarts, 1u);
  // The training loss over the last round (one step's loss of a replica that lost its inner
  // progress varies by several percent from run to run).
  auto last_round = [](const std::vector<double>& l) {
    return std::accumulate(l.end() - 5, l.end(), 0.0) / 5;
  };
  const double val_gap = faulty.report.val_loss / clean.report.val_loss - 1;
  const double round_gap = last_round(faulty.report.losses) / last_round(clean.report.losses) - 1;
  std::printf("worker kill: val loss %.4f vs %.4f (%+.2f%%), last round %.4f vs %.4f (%+.2f%%)\n",
              faulty.report.val_loss, clean.report.val_loss, 100 * val_gap,
              last_round(faulty.report.losses), last_round(clean.report.losses), 100 * round_gap);
  EXPECT_LT(std::abs(val_gap), kWorkerKillValBound);
  EXPECT_LT(std::abs(round_gap), kWorkerKillRoundBound);
  const auto metrics = dir.path / "metrics.jsonl";
  EXPECT_FALSE(lines_with(metrics, R"("kind":"injected")").empty());
  EXPECT_FALSE(lines_with(metrics, R"("kind":"worker_lost")").empty());
  EXPECT_FALSE(
      lines_with(metrics, R"("actor":"stage1/worker1","event":"recovered","kind":"restart")")
          .empty());
  EXPECT_FALSE(lines_with(metrics, R"("event":"recovered","kind":"step")").empty());
}

// A worker whose gradient (swarm) or pseudo-gradient (diloco-swarm) of one step carries a NaN
// ([chaos] nan_worker / nan_at_step): the averager or DiLoCo group refuses it with a `rejected`
// record, that step or round goes on without the worker's contribution, and the run ends with
// a finite loss within 5% of the same run without the NaN. Both runs route identically (seeded
// uniform wiring with a slot for every micro-batch), so the bound only has to cover the one
// refused contribution. Before, a DiLoCo group applied it and θ became NaN.
class NanContribution : public ::testing::TestWithParam<std::string> {};

TEST_P(NanContribution, IsRefusedAndTheRunGoesOn) {
  const auto mode = GetParam();
  auto config = micro_run(mode, 2, 2, 9);
  config.diloco.inner_steps = 3;
  route_deterministically(config);
  const auto clean = run(config);
  config.chaos.nan_worker = actors::worker_id(1, 0);
  config.chaos.nan_at_step = 3;  // DiLoCo: the pseudo-gradient of the round at step 3
  TempDir dir;
  const auto poisoned = run_in(dir.path, config);
  ASSERT_EQ(poisoned.report.losses.size(), 9u);
  for (double l : poisoned.report.losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_TRUE(std::isfinite(poisoned.report.val_loss));
  EXPECT_NEAR(poisoned.report.val_loss, clean.report.val_loss, 0.05 * clean.report.val_loss);
  for (const auto& [name, t] : poisoned.params)
    EXPECT_TRUE(at::isfinite(t).all().item<bool>()) << name;
  const auto refused = lines_with(dir.path / "metrics.jsonl", R"("event":"rejected")");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(
      refused[0].find(mode == "swarm" ? R"("kind":"gradient")" : R"("kind":"pseudo_gradient")"),
      std::string::npos)
      << refused[0];
  EXPECT_NE(refused[0].find("NaN or Inf"), std::string::npos) << refused[0];
  EXPECT_NE(refused[0].find(R"("worker":)" + std::to_string(actors::worker_id(1, 0))),
            std::string::npos)
      << refused[0];
}

INSTANTIATE_TEST_SUITE_P(Modes, NanContribution, ::testing::Values("swarm", "diloco-swarm"));

// A gradient averager (swarm mode) killed as step 3 starts: its supervisor restarts it, the
// workers waiting for the stage's sum send their gradients to the new one, and the run is the
// fault-free run (the sum does not depend on which averager made it).
TEST(Faults, AveragerKilledIsRestartedAndTheRunIsUnchanged) {
  auto config = micro_run("swarm", 2, 2, 8);
  const auto clean = run(config);
  config.chaos.kill = "stage1/averager";
  config.chaos.kill_at_step = 3;
  const auto faulty = run(config);
  EXPECT_GE(faulty.restarts, 1u);
  ASSERT_EQ(faulty.report.losses.size(), clean.report.losses.size());
  for (size_t i = 0; i < clean.report.losses.size(); ++i)
    EXPECT_NEAR(faulty.report.losses[i], clean.report.losses[i], 1e-4) << "step " << i + 1;
  expect_every_micro_batch_once(faulty.report, config.train.micro_batches);
  const auto& a = faulty.worker_params.at(actors::worker_id(1, 0));
  const auto& b = faulty.worker_params.at(actors::worker_id(1, 1));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first;
}

// The step tracker killed at a named point of step 3 (as the step starts, once every
// micro-batch has completed, as the workers are told to apply): its supervisor starts a new
// tracker, which continues from the tracker store: it opens the step again (no worker has
// applied it) or sends the same apply again (each worker takes it once). In swarm mode the
// step's gradient does not depend on routing, so the run equals the fault-free one.
class TrackerKilled : public ::testing::TestWithParam<std::string> {};

TEST_P(TrackerKilled, RunIsUnchanged) {
  auto config = micro_run("swarm", 2, 2, 6);
  // Unclipped: a reopened step's gradient taken on top of the first one (the same gradient)
  // would change the update; clipped to the same norm, it would not.
  config.train.grad_clip = 0;
  const auto clean = run(config);
  config.chaos.kill = "tracker";
  config.chaos.kill_at_step = 3;
  config.chaos.kill_at_phase = config::parse_choice<config::KillPhase>(GetParam());
  TempDir dir;
  const auto faulty = run_in(dir.path, config);
  EXPECT_EQ(faulty.kills, 1u);
  EXPECT_GE(faulty.restarts, 1u);
  ASSERT_EQ(faulty.report.losses.size(), clean.report.losses.size());
  for (size_t i = 0; i < clean.report.losses.size(); ++i)
    EXPECT_NEAR(faulty.report.losses[i], clean.report.losses[i], 1e-4) << "step " << i + 1;
  EXPECT_NEAR(faulty.report.val_loss, clean.report.val_loss, 1e-4);
  expect_every_micro_batch_once(faulty.report, config.train.micro_batches);
  // The parameters, too (Adam's update hides a doubled gradient from the losses).
  ASSERT_EQ(faulty.params.size(), clean.params.size());
  double worst = 0;
  for (size_t i = 0; i < clean.params.size(); ++i)
    worst = std::max(worst,
                     (faulty.params[i].second - clean.params[i].second).abs().max().item<double>());
  std::cerr << "largest parameter difference to the fault-free run: " << worst << "\n";
  EXPECT_LT(worst, 1e-5);
  for (uint32_t stage = 0; stage < 2; ++stage)
    swarmrt::testing::expect_stage_workers_equal(faulty, stage);
  const auto metrics = dir.path / "metrics.jsonl";
  EXPECT_EQ(lines_with(metrics, R"("kind":"tracker")").size(), 1u);
  EXPECT_EQ(lines_with(metrics, R"("actor":"tracker","event":"recovered","kind":"restart")").size(),
            1u);
  // One record per step: the step the lost tracker had open is recorded once.
  EXPECT_EQ(lines_with(metrics, R"("event":"step")").size(), 6u);
}

INSTANTIATE_TEST_SUITE_P(Phases, TrackerKilled, ::testing::Values("start", "reduce", "apply"));

// The tracker killed while the workers apply the step that closes DiLoCo round 0: every
// group applies each round once, in order, and the replicas agree after the rounds.
TEST(Faults, TrackerKilledWhileARoundIsAppliedAppliesItOnce) {
  auto config = micro_run("diloco-swarm", 2, 2, 8);
  config.diloco.inner_steps = 4;
  // Deterministic routing (seeded uniform wiring, a slot per micro-batch). The restarted
  // tracker's wiring starts its seeded draws anew, so the routes after the kill differ from
  // the clean run's, the same way every time: the last loss measured 0.69% lower in 10 of 10
  // runs (4.9785 against 5.0132), well inside the 2% bound.
  route_deterministically(config);
  const auto clean = run(config);
  config.chaos.kill = "tracker";
  config.chaos.kill_at_step = 4;
  config.chaos.kill_at_phase = config::KillPhase::apply;
  const auto faulty = run(config);
  EXPECT_EQ(faulty.kills, 1u);
  EXPECT_GE(faulty.restarts, 1u);
  ASSERT_EQ(faulty.report.losses.size(), 8u);
  expect_every_micro_batch_once(faulty.report, config.train.micro_batches);
  EXPECT_EQ(faulty.applied_rounds.at(0), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(faulty.applied_rounds.at(1), (std::vector<uint64_t>{0, 1}));
  for (uint32_t stage = 0; stage < 2; ++stage)
    swarmrt::testing::expect_stage_workers_equal(faulty, stage);
  EXPECT_NEAR(faulty.report.losses.back(), clean.report.losses.back(),
              0.02 * clean.report.losses.back());
}

// Lost messages ([chaos] drop_fraction): micro-batch hops between workers vanish on the way.
// The tracker re-runs each micro-batch that does not come back in time, pinned to the
// workers that kept its gradient, and every step still counts each micro-batch once.
TEST(Faults, DroppedHopsAreReRunAndCountedOnce) {
  auto config = micro_run("diloco-swarm", 2, 2, 12);
  config.diloco.inner_steps = 4;
  config.chaos.drop_fraction = 0.1;
  config.chaos.seed = 3;
  config.supervision.microbatch_timeout_s = 0.5;
  // Evaluation hops are dropped too: 6 evaluations of 12 batches, 72 hops at 10% (the chance
  // that none is lost is below 1e-3).
  config.train.eval_every = 2;
  config.train.eval_batches = 12;
  TempDir dir;
  const auto result = run_in(dir.path, config);
  ASSERT_EQ(result.report.losses.size(), 12u);
  EXPECT_GT(result.dropped, 0u);
  expect_every_micro_batch_once(result.report, config.train.micro_batches);
  const auto metrics = dir.path / "metrics.jsonl";
  // A lost hop leaves its micro-batch overdue: it is re-run after the timeout.
  EXPECT_GE(lines_with(metrics, R"("kind":"microbatch_timeout")").size(), 1u);
  // A lost evaluation hop leaves a validation loss missing: it is sent again.
  EXPECT_GE(lines_with(metrics, R"("kind":"eval_timeout")").size(), 1u);
  EXPECT_EQ(lines_with(metrics, R"("event":"eval")").size(), 6u);
  EXPECT_TRUE(std::isfinite(result.report.val_loss));
}

// Test 2: the DiLoCo group of stage 0 is killed as the step that closes round 0 starts (the
// workers' contributions for the round go to its successor). The restarted group applies each
// round exactly once, and after the next round the stage's workers agree bit for bit.
TEST(Faults, GroupKilledDuringARoundAppliesItOnce) {
  auto config = micro_run("diloco-swarm", 2, 2, 6);
  config.diloco.inner_steps = 3;
  config.chaos.kill = "stage0/diloco";
  config.chaos.kill_at_step = 3;
  const auto result = run(config);
  EXPECT_GE(result.restarts, 1u);
  EXPECT_EQ(result.applied_rounds.at(0), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(result.applied_rounds.at(1), (std::vector<uint64_t>{0, 1}));
  expect_every_micro_batch_once(result.report, config.train.micro_batches);
  const auto& a = result.worker_params.at(actors::worker_id(0, 0));
  const auto& b = result.worker_params.at(actors::worker_id(0, 1));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first;
}

// DiLoCo group communicators under faults (transport.links = "comm"): a worker killed as the
// step that closes a round starts, and the group killed then. Every round is applied once, the
// workers end on the same θ, and no group all-reduce fails or waits for an answer that never
// comes: an all-reduce starts only when the group has heard every worker of the communicator
// is at the round.
TEST(Faults, WorkerKilledAtARoundWithAGroupCommunicator) {
  auto config = micro_run("diloco", 1, 3, 6);
  config.diloco.inner_steps = 3;
  config.transport.links = config::Links::comm;
  config.chaos.kill = "stage0/worker2";
  config.chaos.kill_at_step = 3;
  // Restarted at once: with the default 20 ms backoff the three remaining steps of this tiny
  // run could all close before the successor was adopted, and the last round went ahead with
  // the two survivors (16 runs in 30 under a loaded suite). The swarm does not wait for a
  // restart; this test is about the round the successor joins.
  config.supervision.backoff_ms = 0;
  const auto result = run(config);
  ASSERT_EQ(result.report.losses.size(), 6u);
  EXPECT_GE(result.restarts, 1u);
  expect_every_micro_batch_once(result.report, config.train.micro_batches);
  EXPECT_EQ(result.applied_rounds.at(0), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(result.group_failures, 0u);
  EXPECT_GE(result.group_reduces, 3u);  // the last round at least: all three again
  const auto& a = result.worker_params.at(actors::worker_id(0, 0));
  for (int64_t j = 1; j < 3; ++j) {
    const auto& b = result.worker_params.at(actors::worker_id(0, j));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << "worker " << j << " " << a[i].first;
  }
}

TEST(Faults, GroupKilledAtARoundWithAGroupCommunicator) {
  auto config = micro_run("diloco-swarm", 2, 2, 6);
  config.diloco.inner_steps = 3;
  config.transport.links = config::Links::comm;
  config.chaos.kill = "stage0/diloco";
  config.chaos.kill_at_step = 3;
  const auto result = run(config);
  EXPECT_GE(result.restarts, 1u);
  EXPECT_EQ(result.applied_rounds.at(0), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(result.applied_rounds.at(1), (std::vector<uint64_t>{0, 1}));
  expect_every_micro_batch_once(result.report, config.train.micro_batches);
  EXPECT_EQ(result.group_failures, 0u);
  EXPECT_GE(result.group_reduces, 2u);  // stage 1's group was never killed
  for (int64_t k = 0; k < 2; ++k) {
    const auto& a = result.worker_params.at(actors::worker_id(k, 0));
    const auto& b = result.worker_params.at(actors::worker_id(k, 1));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << "stage " << k << " " << a[i].first;
  }
}

// Tests 5 and 6: a swarm resumed from its periodic checkpoints continues as if it had never
// stopped: the losses of the steps after the checkpoint match the uninterrupted run to 1e-4.
// A corrupt newest checkpoint is refused and the one before it is used.
class ResumeMatches : public ::testing::TestWithParam<std::tuple<std::string, int64_t>> {};

TEST_P(ResumeMatches, UninterruptedRun) {
  const auto& [mode, workers] = GetParam();
  auto config = micro_run(mode, 2, workers, 12);
  config.diloco.inner_steps = 3;
  config.checkpoint.every_steps = 4;
  TempDir dir;
  std::vector<double> whole;
  {
    whole =
        run_in(dir.path, config).report.losses;  // checkpoints after steps 4, 8 and the last, 12
  }
  ASSERT_EQ(whole.size(), 12u);
  model::CheckpointDir ckpts((dir.path / "checkpoints").string());
  // A run that died after step 8 has no step-12 checkpoint.
  auto drop_last = [&] {
    const auto files = ckpts.list();
    ASSERT_FALSE(files.empty());
    ASSERT_NE(files.front().find("step_00000012"), std::string::npos) << files.front();
    fs::remove(files.front());
  };
  drop_last();
  auto resume = [&] {
    model::RunDir rd(dir.path.string(), config, model::RunStart::resume);
    actors::RuntimeOptions o;
    o.run = &rd;
    o.resume = true;
    return run(config, o).report.losses;
  };
  const auto from8 = resume();
  ASSERT_EQ(from8.size(), 4u);
  for (size_t i = 0; i < from8.size(); ++i)
    EXPECT_NEAR(from8[i], whole[8 + i], 1e-4) << "step " << 9 + i;

  // Corrupt the newest file once the resumed run's step-12 one is gone: step 8.
  drop_last();
  const auto files = ckpts.list();
  ASSERT_GE(files.size(), 2u);
  ASSERT_NE(files.front().find("step_00000008"), std::string::npos) << files.front();
  {
    std::fstream f(files.front(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(files.front()) / 2));
    f.put('\x5a');
    f.put('\xa5');
  }
  const auto from4 = resume();
  ASSERT_EQ(from4.size(), 8u) << "the corrupt step-8 checkpoint must be refused";
  for (size_t i = 0; i < from4.size(); ++i)
    EXPECT_NEAR(from4[i], whole[4 + i], 1e-4) << "step " << 5 + i;
}

// A finished run can be extended: its last step is saved with the swarm's state, so
// --resume with a larger train.steps goes on from there (before, the end-of-run checkpoint
// held only the whole model and resuming refused it: "holds no swarm state").
TEST(Resume, AFinishedRunIsExtended) {
  auto config = micro_run("diloco-swarm", 2, 1, 6);
  config.diloco.inner_steps = 3;
  config.checkpoint.every_steps = 4;  // the last step, 6, is not a multiple: saved all the same
  TempDir dir;
  { ASSERT_EQ(run_in(dir.path, config).report.losses.size(), 6u); }
  model::CheckpointDir ckpts((dir.path / "checkpoints").string());
  ASSERT_TRUE(ckpts.has(6));
  config.train.steps = 9;
  model::RunDir rd(dir.path.string(), config, model::RunStart::resume);
  actors::RuntimeOptions o;
  o.run = &rd;
  o.resume = true;
  const auto more = run(config, o).report.losses;
  ASSERT_EQ(more.size(), 3u) << "steps 7 to 9 after the finished run's step 6";
  for (double l : more) EXPECT_TRUE(std::isfinite(l));
  EXPECT_TRUE(ckpts.has(9));
}

// A checkpoint whose checksum is fine but whose optimizer state LibTorch cannot read back is
// as unusable as a corrupt one: --resume refuses it with the reason and takes the one before
// (before, the deserialization error escaped the fallback).
TEST(Resume, OptimizerStateThatDoesNotDeserializeFallsBack) {
  auto config = micro_run("pp", 2, 1, 8);
  config.checkpoint.every_steps = 4;
  TempDir dir;
  {
    run_in(dir.path, config);  // checkpoints after steps 4 and 8
  }
  model::CheckpointDir ckpts((dir.path / "checkpoints").string());
  const auto files = ckpts.list();
  ASSERT_EQ(files.size(), 2u);
  auto newest = model::read_checkpoint(files[0]);
  size_t spoiled = 0;
  for (auto& [name, bytes] : newest.blobs)
    if (name.rfind("optimizer/", 0) == 0) {
      bytes = "not a zip archive";
      ++spoiled;
    }
  ASSERT_GT(spoiled, 0u);
  model::write_checkpoint(files[0], newest);  // a valid checksum around it
  config.train.steps = 10;
  model::RunDir rd(dir.path.string(), config, model::RunStart::resume);
  actors::RuntimeOptions o;
  o.run = &rd;
  o.resume = true;
  EXPECT_EQ(run(config, o).report.losses.size(), 6u) << "resumed from step 4, not 8";
}

INSTANTIATE_TEST_SUITE_P(Modes, ResumeMatches,
                         ::testing::Values(std::make_tuple("pp", 1),
                                           std::make_tuple("diloco-swarm", 1),
                                           std::make_tuple("swarm", 2)));

// The restart-intensity limit: more kills than supervision.max_restarts within the window
// and the supervisor gives up; the run fails with that reason instead of restarting forever.
TEST(Faults, RestartIntensityExceededEndsTheRun) {
  auto config = micro_run("diloco-swarm", 2, 2, 400);
  config.chaos.kill = "stage0/worker1";
  config.chaos.kill_every_s = 0.02;
  config.supervision.max_restarts = 3;
  config.supervision.restart_window_s = 60;
  try {
    run(config);
    FAIL() << "the run must fail once the supervisor gives up";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 3 restarts within 60 s"), std::string::npos)
        << e.what();
  }
}
