// The swarm in one process against the reference trainer, on Brown text.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <fstream>

#include "../../model/test_util.hpp"
#include "actors/runtime/runtime.hpp"
#include "model/optim.hpp"
#include "model/trainer.hpp"

using namespace swarmrt;

#include "../run_util.hpp"

namespace {
using swarmrt::testing::micro_run;
using swarmrt::testing::run;
using swarmrt::testing::small_corpus;

std::vector<double> single_losses(const config::RunConfig& c) {
  model::TrainOptions o;
  o.progress = false;
  return model::train_single(c, small_corpus(), o).losses;
}
}  // namespace

class PipelineReproducesSingle
    : public ::testing::TestWithParam<std::tuple<config::Arch, int64_t>> {};

TEST_P(PipelineReproducesSingle, LossesMatchFor20Steps) {
  auto config = micro_run("pp", std::get<1>(GetParam()), 1, 20);
  config.model.arch = std::get<0>(GetParam());
  const auto pp = run(config).report.losses;
  config.swarm.mode = config::Mode::single;
  config.swarm.stages = 1;
  const auto single = single_losses(config);
  ASSERT_EQ(pp.size(), 20u);
  for (size_t i = 0; i < 20; ++i)
    EXPECT_NEAR(pp[i], single[i], 1e-5 * std::abs(single[i])) << "step " << i + 1;
}

INSTANTIATE_TEST_SUITE_P(Stages, PipelineReproducesSingle,
                         ::testing::Combine(::testing::Values(config::Arch::gpt2,
                                                              config::Arch::llama),
                                            ::testing::Values(2, 4)),
                         [](const auto& info) {
                           return config::name_of(std::get<0>(info.param)) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

// dp with W workers: every worker's reduced gradient equals the single-process gradient of
// the whole step's micro-batches (the union of what the workers saw).
TEST(Runtime, DataParallelGradientEqualsSingleOnUnionBatch) {
  for (int64_t W : {2, 3}) {
    auto config = micro_run("dp", 1, W, 1);
    config.train.micro_batches = 6;
    actors::RuntimeOptions o;
    o.keep_grads = true;
    auto result = run(config, o);
    ASSERT_EQ(result.grads.size(), static_cast<size_t>(W));

    model::GPT whole(config.model, model::StageSpec{}, static_cast<uint64_t>(config.train.seed));
    model::Windows windows(small_corpus().train(), config.model.block_size);
    model::ShardLoader loader(windows, 0, 1, static_cast<uint64_t>(config.train.seed));
    const double n = static_cast<double>(config.train.micro_batch * config.train.micro_batches);
    for (int64_t m = 0; m < config.train.micro_batches; ++m) {
      auto b = loader.next(config.train.micro_batch);
      (model::lm_loss(whole->forward(b.inputs), b.targets) * (b.samples() / n)).backward();
    }
    int64_t used = 0;
    for (const auto& [id, fwd] : result.forwards) used += fwd > 0;
    EXPECT_GE(used, 2) << "the micro-batches should be spread over several workers";
    for (const auto& [id, grads] : result.grads) {
      auto expected = whole->named_parameters();
      ASSERT_EQ(grads.size(), expected.size());
      for (const auto& [name, g] : grads)
        EXPECT_TRUE(at::allclose(g, expected[name].grad(), 1e-5, 1e-6))
            << "W=" << W << " worker " << id << " " << name;
    }
  }
}

TEST(Runtime, TrackerCountsEveryMicroBatchExactlyOnce) {
  auto config = micro_run("swarm", 2, 2, 5);
  config.train.micro_batches = 6;
  auto result = run(config);
  const auto& r = result.report;
  ASSERT_EQ(r.completed.size(), 5u);
  for (size_t s = 0; s < 5; ++s) {
    EXPECT_EQ(r.completed[s], 6) << "step " << s + 1;
    EXPECT_EQ(r.duplicates[s], 0) << "step " << s + 1;
    EXPECT_EQ(r.extra_samples[s], 0) << "step " << s + 1;
    EXPECT_EQ(r.missing_samples[s], 0) << "step " << s + 1;
  }
  int64_t stage0 = 0, stage1 = 0;
  for (const auto& [id, n] : result.forwards) (id < 1000 ? stage0 : stage1) += n;
  EXPECT_EQ(stage0, 30);
  EXPECT_EQ(stage1, 30);
  EXPECT_EQ(r.rejected_frames, 0u);
  // Replicas of a stage end identical: they took the same averaged steps.
  const auto& a = result.worker_params.at(actors::worker_id(1, 0));
  const auto& b = result.worker_params.at(actors::worker_id(1, 1));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first;
  }
}

// Worker 1 computes twice as slowly: SWARM's throughput wiring sends it about a third of the
// micro-batches; uniform wiring about half.
// The wiring inside a whole run: the tracker measures each stage-0 worker and routes by it.
// The measurements are injected (worker 1 costs twice as much per sample as worker 0), so
// what is tested is that the runtime feeds the policy and follows it, not how busy the
// machine was: with wall-clock timings under a loaded suite this share once fell to 0.177.
// Every micro-batch of a step is dispatched at once (a slot for each), so the choices depend
// only on the injected costs and the seeded tie-breaks: the shares are the same every run.
TEST(Runtime, ThroughputWiringFavoursTheFasterWorker) {
  auto share_of_slow = [](const std::string& wiring) {
    auto config = micro_run("swarm", 1, 2, 8);
    config.train.micro_batches = 12;
    config.swarm.max_inflight = 16;
    config.swarm.wiring = config::parse_choice<config::WiringPolicy>(wiring);
    const uint32_t slow_id = actors::worker_id(0, 1);
    actors::RuntimeOptions o;
    o.wiring_measure = [slow_id](uint32_t id, double samples, double) {
      return samples * (id == slow_id ? 0.02 : 0.01);
    };
    auto result = run(config, o);
    const double slow = static_cast<double>(result.forwards.at(slow_id));
    const double fast = static_cast<double>(result.forwards.at(actors::worker_id(0, 0)));
    EXPECT_EQ(slow + fast, 96);
    return slow / (slow + fast);
  };
  // Step 1 knows nothing yet and splits 6/6; from then on the slow worker's keys grow twice
  // as fast, so it gets a third of each step's 12: (6 + 7 * 4) / 96 = 0.354.
  const double throughput = share_of_slow("throughput");
  EXPECT_NEAR(throughput, 34.0 / 96.0, 1.5 / 96.0);
  EXPECT_EQ(throughput, share_of_slow("throughput"));  // deterministic
  // Uniform wiring ignores the measurements: a seeded coin per micro-batch.
  const double uniform = share_of_slow("uniform");
  EXPECT_GT(uniform, 0.38);
  EXPECT_LT(uniform, 0.62);
  EXPECT_EQ(uniform, share_of_slow("uniform"));
}

class DilocoReplicas : public ::testing::TestWithParam<config::Arch> {};

TEST_P(DilocoReplicas, AgreeAfterEachRound) {
  auto config = micro_run("diloco-swarm", 2, 2, 6);
  config.model.arch = GetParam();
  config.diloco.inner_steps = 3;
  auto result = run(config);
  EXPECT_EQ(result.report.losses.size(), 6u);
  // After the round at step 6 every worker of a stage holds θ(t), bit for bit.
  for (int64_t k = 0; k < 2; ++k) {
    const auto& a = result.worker_params.at(actors::worker_id(k, 0));
    const auto& b = result.worker_params.at(actors::worker_id(k, 1));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first;
  }
  EXPECT_LT(result.report.losses.back(), result.report.losses.front());
}

INSTANTIATE_TEST_SUITE_P(Runtime, DilocoReplicas,
                         ::testing::Values(config::Arch::gpt2, config::Arch::llama),
                         [](const auto& info) { return config::name_of(info.param); });

// transport.links = "comm" in one process: each DiLoCo group announces a TCP communicator to
// its workers, they all-reduce their pseudo-gradients over it at every round and the first
// sends the mean once. The groups apply the same rounds, and the run ends where per-worker
// reports end (the same mean, summed in another order). Uniform wiring with a slot for every
// micro-batch makes the replicas' data the same in both runs.
TEST(Runtime, DilocoGroupAllReduceAppliesTheSameRounds) {
  auto config = micro_run("diloco", 1, 3, 6);
  config.diloco.inner_steps = 3;
  config.swarm.wiring = config::WiringPolicy::uniform;
  config.swarm.max_inflight = 8;
  auto frames = run(config);
  config.transport.links = config::Links::comm;
  auto reduced = run(config);
  EXPECT_EQ(frames.group_reduces, 0u);
  EXPECT_EQ(reduced.group_reduces, 2u * 3u);  // 2 rounds, 3 workers
  EXPECT_EQ(reduced.group_fallbacks, 0u);
  EXPECT_EQ(reduced.applied_rounds, frames.applied_rounds);
  ASSERT_EQ(reduced.report.losses.size(), frames.report.losses.size());
  for (size_t i = 0; i < frames.report.losses.size(); ++i)
    EXPECT_NEAR(reduced.report.losses[i], frames.report.losses[i], 1e-4) << "step " << i + 1;
  ASSERT_EQ(reduced.params.size(), frames.params.size());
  for (size_t i = 0; i < frames.params.size(); ++i)
    EXPECT_TRUE(at::allclose(reduced.params[i].second, frames.params[i].second, 1e-4, 1e-5))
        << frames.params[i].first;
}
