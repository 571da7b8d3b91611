// Mixed precision: autocast, the residual stream's dtype, the loss scaler, and bf16 training
// against fp32 on Brown text.
#include <gtest/gtest.h>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "model/precision.hpp"
#include "model/stage_model.hpp"
#include "model/trainer.hpp"
#include "test_util.hpp"

using namespace swarmrt::model;
using namespace swarmrt::config;
using swarmrt::testing::short_train;
using swarmrt::testing::TempDir;

namespace {
const c10::Device kCpu(c10::kCPU);

ModelConfig micro(Arch arch) {
  ModelConfig m{"tiny", 4, 2, 32, 32, 256};
  m.arch = arch;
  return m;
}

// A short run of the micro model: `steps` steps of `micro_batches` x 4 sequences, evaluated
// only at the end, no checkpoints.
RunConfig short_run(Arch arch, int64_t steps, int64_t micro_batches) {
  RunConfig c;
  c.model = micro(arch);
  c.train = short_train(steps, 4, micro_batches, 1, 2e-3);
  c.checkpoint.every_steps = 0;
  return c;
}

Corpus brown(size_t bytes) {
  std::ifstream in(swarmrt::testing::test_data_path(), std::ios::binary);
  std::string s(bytes, '\0');
  in.read(s.data(), static_cast<std::streamsize>(bytes));
  s.resize(static_cast<size_t>(in.gcount()));
  return Corpus::from_text(s, 0.05);
}
}  // namespace

TEST(Precision, AutocastComputesLinearsInBf16AndRestoresTheThreadsState) {
  auto w = torch::randn({8, 4});
  auto x = torch::randn({3, 4});
  {
    Autocast on(Precision::bf16, kCpu);
    EXPECT_EQ(torch::linear(x, w).scalar_type(), at::kBFloat16);
    EXPECT_EQ(to_compute_dtype(x).scalar_type(), at::kBFloat16);
    {
      Autocast off(Precision::fp32, kCpu);  // fp32 changes nothing, even nested
      EXPECT_EQ(torch::linear(x, w).scalar_type(), at::kBFloat16);
    }
  }
  EXPECT_EQ(torch::linear(x, w).scalar_type(), at::kFloat);
  EXPECT_EQ(to_compute_dtype(x).scalar_type(), at::kFloat);
}

TEST(Precision, Fp16IsRefusedOnTheCpuWithTheSettingNamed) {
  const auto why = check_precision(Precision::fp16, kCpu);
  EXPECT_NE(why.find("train.precision"), std::string::npos) << why;
  EXPECT_NE(why.find("bf16"), std::string::npos) << why;
  EXPECT_EQ(check_precision(Precision::bf16, kCpu), "");
  EXPECT_EQ(check_precision(Precision::fp32, kCpu), "");
  EXPECT_EQ(check_precision(Precision::fp16, c10::Device("cuda:0")), "");
  EXPECT_THROW(Autocast(Precision::fp16, kCpu), std::invalid_argument);
}

// What crosses a stage boundary is in the compute dtype (half the bytes of fp32), the loss is
// float32, and the parameters and their gradients stay float32 for both architectures.
TEST(Precision, StagesHandOnTheComputeDtypeAndGradientsStayFloat32) {
  for (auto arch : {Arch::gpt2, Arch::llama}) {
    auto first = make_stage_model(micro(arch), StageSpec{0, 2}, 1);
    auto last = make_stage_model(micro(arch), StageSpec{1, 2}, 1);
    auto ids = swarmrt::testing::random_ids(2, 16, 3);
    torch::Tensor hidden, loss;
    {
      Autocast autocast(Precision::bf16, kCpu);
      hidden = first->forward(ids);
      loss = lm_loss(last->forward(hidden), ids);
    }
    EXPECT_EQ(hidden.scalar_type(), at::kBFloat16) << name_of(arch);
    EXPECT_EQ(loss.scalar_type(), at::kFloat) << name_of(arch);
    loss.backward();
    for (auto* stage : {&first, &last})
      for (const auto& p : (*stage)->parameters()) {
        EXPECT_EQ(p.scalar_type(), at::kFloat);
        ASSERT_TRUE(p.grad().defined());
        EXPECT_EQ(p.grad().scalar_type(), at::kFloat);
        EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
      }
  }
}

// bf16 is the same model: its loss is fp32's to within bf16's rounding of the activations
// (8 significant bits, 2^-8 relative per value), which averaged over 512 positions moves the loss
// far less than the 1% allowed here; it must move it, or bf16 did not run.
TEST(Precision, Bf16LossAtInitializationIsFp32sWithinOnePercent) {
  for (auto arch : {Arch::gpt2, Arch::llama}) {
    auto model = make_stage_model(micro(arch), StageSpec{}, 7);
    auto ids = swarmrt::testing::random_ids(16, 32, 5);
    const double fp32 = lm_loss(model->forward(ids), ids).item<double>();
    Autocast autocast(Precision::bf16, kCpu);
    const double bf16 = lm_loss(model->forward(ids), ids).item<double>();
    EXPECT_NE(fp32, bf16) << "bf16 should compute differently";
    EXPECT_NEAR(bf16, fp32, 0.01 * fp32) << name_of(arch);
  }
}

TEST(Precision, LossScalerSkipsOverflowsBacksOffAndGrowsAfterAnInterval) {
  LossScaler off(Precision::bf16);
  EXPECT_EQ(off.scale(), 1.0);
  LossScaler s(Precision::fp16);
  EXPECT_EQ(s.scale(), LossScaler::kInitScale);
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), LossScaler::kInitScale / 2);
  EXPECT_EQ(s.skipped(), 1);
  for (int64_t i = 0; i < LossScaler::kGrowthInterval - 1; ++i) EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), LossScaler::kInitScale / 2);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), LossScaler::kInitScale);
  EXPECT_EQ(s.skipped(), 1);
}

TEST(Precision, UnscalingDividesTheGradientsAndFindsAnOverflow) {
  auto a = torch::ones({3}, torch::requires_grad());
  auto b = torch::ones({2}, torch::requires_grad());
  (a.sum() * 1024 + b.sum() * 512).backward();
  EXPECT_TRUE(unscale_grads({a, b}, 512));
  EXPECT_TRUE(torch::equal(a.grad(), torch::full({3}, 2.0)));
  EXPECT_TRUE(torch::equal(b.grad(), torch::ones({2})));
  b.mutable_grad()[1] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(unscale_grads({a, b}, 1));
}

// The fp16 scaler as the trainer runs it (the CPU computes bf16; train.loss_scale = dynamic
// runs the same scaler): the injected overflow skips exactly that step, the scale halves, the
// parameters do not move in it, and training goes on and learns.
TEST(Precision, AnOverflowingStepIsSkippedRecordedAndTheRunGoesOn) {
  auto corpus = brown(300'000);
  auto c = short_run(Arch::gpt2, 8, 2);
  c.train.precision = Precision::bf16;
  c.train.loss_scale = LossScale::dynamic;
  c.chaos.overflow_at_step = 4;
  validate(c, "test");
  TempDir dir;
  RunDir run(dir.str() + "/run", c, RunStart::fresh);
  TrainOptions o;
  o.run = &run;
  o.progress = false;
  auto r = train_single(c, corpus, o);
  ASSERT_EQ(r.losses.size(), 8u);
  EXPECT_EQ(r.skipped_steps, std::vector<int64_t>{4});
  for (double l : r.losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(r.losses.back(), r.losses.front());
  // The records: step 4 skipped at the initial scale, the scale halved from step 5 on.
  std::ifstream in(dir.str() + "/run/metrics.jsonl");
  int steps = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.value("event", "") != "step") continue;
    ++steps;
    const auto step = j.at("step").get<int64_t>();
    EXPECT_EQ(j.at("skipped").get<bool>(), step == 4) << line;
    EXPECT_EQ(j.at("loss_scale").get<double>(),
              step <= 4 ? LossScaler::kInitScale : LossScaler::kInitScale / 2)
        << line;
    EXPECT_EQ(j.at("skipped_steps").get<int64_t>(), step < 4 ? 0 : 1) << line;
    EXPECT_EQ(j.at("grad_norm").is_null(), step == 4) << line;
  }
  EXPECT_EQ(steps, 8);
}

// A skipped step leaves the parameters (and AdamW's state) where they were: 3 steps whose
// third overflows end exactly where 2 steps end. fp32 with the scaler: scaling by a power of
// two and back is exact, so the first two steps are the same in both runs.
TEST(Precision, ASkippedStepLeavesTheParametersUntouched) {
  auto corpus = brown(300'000);
  auto c = short_run(Arch::llama, 2, 1);
  c.train.loss_scale = LossScale::dynamic;
  TrainOptions o;
  o.progress = false;
  auto two = train_single(c, corpus, o);
  c.train.steps = 3;
  c.chaos.overflow_at_step = 3;
  validate(c, "test");
  auto three = train_single(c, corpus, o);
  EXPECT_EQ(three.skipped_steps, std::vector<int64_t>{3});
  auto a = two.model->named_parameters();
  for (const auto& item : three.model->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), a[item.key()])) << item.key();
}

TEST(Precision, ConfigNamesTheKeysAndRefusesAnOverflowWithoutTheScaler) {
  RunConfig c;
  c.chaos.overflow_at_step = 3;
  try {
    validate(c, "run.toml");
    FAIL() << "an overflow with no loss scaler should be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("chaos.overflow_at_step"), std::string::npos) << e.what();
  }
  c.train.precision = Precision::fp16;
  EXPECT_NO_THROW(validate(c, "run.toml"));
  EXPECT_TRUE(c.train.scales_loss());
  c.train.loss_scale = LossScale::off;
  EXPECT_FALSE(c.train.scales_loss());
  EXPECT_THROW(parse_choice<Precision>("fp8"), ConfigError);
}

// bf16 against fp32 over 300 steps of training on Brown text: the validation loss within 1%.
// The model is the unit tests' micro model (4 layers, d 32, context 32), not the tiny preset:
// this CPU has no bf16 GEMM (docs/results.md), and 300 tiny steps in bf16 take minutes. The
// tiny preset's 300 steps are in bench/precision.sh. Both runs draw the same data and start
// from the same weights; the bound is the issue's, the runs this was written with differed by
// less than 0.3%.
TEST(Precision, Bf16TrainsWithinOnePercentOfFp32Over300Steps) {
  auto corpus = brown(400'000);
  auto c = short_run(Arch::gpt2, 300, 1);
  c.train.warmup_steps = 20;
  c.train.lr = 3e-3;
  c.train.schedule = Schedule::cosine;
  c.train.min_lr = 3e-4;
  c.train.eval_batches = 8;
  TrainOptions o;
  o.progress = false;
  const double fp32 = train_single(c, corpus, o).val_loss;
  c.train.precision = Precision::bf16;
  const double bf16 = train_single(c, corpus, o).val_loss;
  std::printf("validation loss after 300 steps: fp32 %.5f, bf16 %.5f (%+.3f%%)\n", fp32, bf16,
              100 * (bf16 / fp32 - 1));
  EXPECT_NE(fp32, bf16);
  EXPECT_NEAR(bf16, fp32, 0.01 * fp32);
  EXPECT_LT(bf16, 2.8) << "it should have learned (unigram entropy of Brown is ~3.0 nats)";
}
