// Mixed precision through the actor runtime: pipelines in bf16 against the single-process
// trainer in bf16, the hop bytes bf16 saves, and the loss scaler's skip in every kind of swarm.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <cmath>

#include "../../model/test_util.hpp"
#include "actors/runtime/runtime.hpp"
#include "model/precision.hpp"
#include "model/trainer.hpp"

using namespace swarmrt;

#include "../run_util.hpp"

namespace {
using swarmrt::testing::micro_run;
using swarmrt::testing::run;
using swarmrt::testing::small_corpus;

model::TrainResult single_of(config::RunConfig c) {
  c.swarm.mode = config::Mode::single;
  c.swarm.stages = 1;
  c.swarm.workers_per_stage = 1;
  model::TrainOptions o;
  o.progress = false;
  return model::train_single(c, small_corpus(), o);
}
}  // namespace

// pp and swarm in bf16 against single in bf16, both architectures. Each micro-batch's forward
// and backward are the same bf16 operations on the same operands in every mode: the residual
// stream is bf16 from the embedding on (model/precision.hpp), so a stage boundary rounds
// nothing that one process does not round too. What differs is the float32 part: swarm sums
// its replicas' gradients in the averager in another order. The bound is therefore the fp32
// pipeline test's, 1e-5 relative (PipelineReproducesSingle); a difference in what is rounded
// to bf16 would exceed it, as fp32 against bf16 does (checked below).
class Bf16ReproducesSingle
    : public ::testing::TestWithParam<std::tuple<config::Arch, std::string>> {};

TEST_P(Bf16ReproducesSingle, LossesMatchFor10Steps) {
  const auto& [arch, mode] = GetParam();
  auto config = micro_run(mode, 2, mode == "pp" ? 1 : 2, 10);
  config.model.arch = arch;
  config.train.precision = config::Precision::bf16;
  const auto swarm = run(config);
  const auto single = single_of(config);
  ASSERT_EQ(swarm.report.losses.size(), 10u);
  for (size_t i = 0; i < 10; ++i)
    EXPECT_NEAR(swarm.report.losses[i], single.losses[i], 1e-5 * std::abs(single.losses[i]))
        << "step " << i + 1;
  EXPECT_EQ(swarm.report.rejected_frames, 0u);
  // And it is bf16: fp32 computes another loss by more than the bound.
  config.train.precision = config::Precision::fp32;
  const auto fp32 = single_of(config);
  EXPECT_GT(std::abs(fp32.losses.back() - single.losses.back()),
            1e-5 * std::abs(single.losses.back()));
}

INSTANTIATE_TEST_SUITE_P(Modes, Bf16ReproducesSingle,
                         ::testing::Combine(::testing::Values(config::Arch::gpt2,
                                                              config::Arch::llama),
                                            ::testing::Values("pp", "swarm")),
                         [](const auto& info) {
                           return config::name_of(std::get<0>(info.param)) + "_" +
                                  std::get<1>(info.param);
                         });

// Activations forward and their gradients back travel in the compute dtype: bf16 hops carry
// half of fp32's hidden-state bytes, by the byte counters of the same pipeline.
// - gradients: only the input gradients of backward hops, [B, T, d] each: exactly half.
// - activations: the tracker's sends to stage 0 (int64 ids and targets; a 1-stage run of the
//   same steps counts exactly these), then per forward hop between the stages (training and
//   the final evaluation) the hidden states [B, T, d] and the targets [B, T] (int64).
TEST(Precision, Bf16HalvesTheHopBytesBetweenStages) {
  auto bytes_of = [](config::Precision p, int64_t stages) {
    auto c = micro_run("pp", stages, 1, 3);
    c.train.precision = p;
    return run(c).bytes;
  };
  const auto one = bytes_of(config::Precision::fp32, 1);
  const auto fp32 = bytes_of(config::Precision::fp32, 2);
  const auto bf16 = bytes_of(config::Precision::bf16, 2);
  const auto c = micro_run("pp", 2, 1, 3);
  const double positions = static_cast<double>(c.train.micro_batch * c.model.block_size);
  const double targets = positions * 8, hidden32 = positions * c.model.n_embd * 4;
  const double to_stage0 = one.at("activations").get<double>();
  const double hops = (fp32.at("activations").get<double>() - to_stage0) / (hidden32 + targets);
  ASSERT_GE(hops, 12) << "3 steps x 4 micro-batches forward, and the evaluation's";
  ASSERT_EQ(hops, std::floor(hops)) << fp32.dump();
  EXPECT_EQ(bf16.at("activations").get<double>() - to_stage0, hops * (hidden32 / 2 + targets))
      << bf16.dump();
  EXPECT_EQ(fp32.at("gradients").get<double>(), 12 * hidden32) << fp32.dump();
  EXPECT_EQ(bf16.at("gradients").get<double>(), 12 * hidden32 / 2) << bf16.dump();
}

// chaos.overflow_at_step with the loss scaler on (train.loss_scale = dynamic; on a GPU fp16
// turns it on itself) in each kind of swarm: the step is skipped by every worker, recorded,
// and the run goes on. Every replica's parameters after the skipped step equal those before
// it: checked against a run that stops one step earlier.
class OverflowSkips : public ::testing::TestWithParam<std::string> {};

TEST_P(OverflowSkips, TheStepIsSkippedEverywhereAndTheRunGoesOn) {
  const std::string mode = GetParam();
  auto config = micro_run(mode, 2, mode == "pp" ? 1 : 2, 3);
  config.train.loss_scale = config::LossScale::dynamic;
  config.diloco.inner_steps = 10;  // no round within these steps
  config.chaos.overflow_at_step = 3;
  // Two micro-batches a step, so that no worker sums more than two gradients: a worker adds
  // each micro-batch's gradient as its backward arrives, and at stage 0 that order follows
  // how fast the next stage's workers answered. a + b is b + a in floating point, but
  // (a + b) + c is not (a + c) + b: with four micro-batches a diloco-swarm worker given three
  // of them differed from the shorter run in the last bit in 5 of 30 runs.
  config.train.micro_batches = 2;
  // The same routes in both runs, so that their gradients are summed alike.
  swarmrt::testing::route_deterministically(config);
  config::validate(config, "test");
  const auto with = run(config);
  EXPECT_EQ(with.report.skipped, std::vector<int64_t>{3});
  ASSERT_EQ(with.report.losses.size(), 3u);
  for (double l : with.report.losses) EXPECT_TRUE(std::isfinite(l));
  config.train.steps = 2;
  config.chaos.overflow_at_step = 0;
  const auto before = run(config);
  EXPECT_TRUE(before.report.skipped.empty());
  ASSERT_EQ(with.worker_params.size(), before.worker_params.size());
  for (const auto& [id, params] : with.worker_params) {
    const auto& old = before.worker_params.at(id);
    ASSERT_EQ(params.size(), old.size());
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_TRUE(at::equal(params[i].second, old[i].second))
          << mode << " worker " << id << " " << params[i].first;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, OverflowSkips, ::testing::Values("pp", "swarm", "diloco-swarm"),
                         [](const auto& info) {
                           auto name = info.param;
                           for (auto& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });
