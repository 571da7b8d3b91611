#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include "model/checkpoint.hpp"
#include "model/optim.hpp"
#include "model/stage_model.hpp"
#include "test_util.hpp"

using namespace swarmrt::model;
using namespace swarmrt::config;

namespace {
ModelConfig testing_micro() {
  return swarmrt::testing::micro_gpt();
}
}  // namespace

TEST(Schedule, WarmupThenConstant) {
  TrainConfig t;
  t.lr = 1e-3, t.warmup_steps = 10, t.schedule = Schedule::constant, t.steps = 100;
  EXPECT_DOUBLE_EQ(lr_at(1, t), 1e-4);
  EXPECT_DOUBLE_EQ(lr_at(5, t), 5e-4);
  EXPECT_DOUBLE_EQ(lr_at(10, t), 1e-3);
  EXPECT_DOUBLE_EQ(lr_at(11, t), 1e-3);
  EXPECT_DOUBLE_EQ(lr_at(100, t), 1e-3);
}

TEST(Schedule, WarmupThenCosineToFloor) {
  TrainConfig t;
  t.lr = 1e-3, t.min_lr = 1e-4, t.warmup_steps = 10, t.schedule = Schedule::cosine, t.steps = 110;
  EXPECT_DOUBLE_EQ(lr_at(10, t), 1e-3);
  EXPECT_NEAR(lr_at(60, t), 1e-4 + 0.5 * 9e-4, 1e-12);  // halfway: cos(pi/2) = 0
  EXPECT_NEAR(lr_at(110, t), 1e-4, 1e-12);
  EXPECT_NEAR(lr_at(500, t), 1e-4, 1e-12);  // clamped past the end
  EXPECT_GT(lr_at(30, t), lr_at(31, t));
}

TEST(Schedule, NoWarmup) {
  TrainConfig t;
  t.lr = 2e-3, t.warmup_steps = 0, t.schedule = Schedule::constant;
  EXPECT_DOUBLE_EQ(lr_at(1, t), 2e-3);
}

TEST(Optim, ClipScalesToMaxNorm) {
  auto a = torch::zeros({2}, torch::requires_grad()), b = torch::zeros({2}, torch::requires_grad());
  a.mutable_grad() = torch::tensor({3.0f, 0.0f});
  b.mutable_grad() = torch::tensor({0.0f, 4.0f});
  EXPECT_NEAR(clip_grad_norm({a, b}, 1.0), 5.0, 1e-6);
  EXPECT_NEAR(a.grad()[0].item<double>(), 0.6, 1e-5);
  EXPECT_NEAR(b.grad()[1].item<double>(), 0.8, 1e-5);
  EXPECT_NEAR(clip_grad_norm({a, b}, 0.0), 1.0, 1e-5);  // 0 disables clipping, still reports
}

TEST(Optim, WeightDecayOnlyOnMatrices) {
  torch::nn::Linear lin(3, 2);
  TrainConfig t;
  auto opt = make_adamw(*lin, t);
  ASSERT_EQ(opt->param_groups().size(), 2u);
  auto& g0 = static_cast<torch::optim::AdamWOptions&>(opt->param_groups()[0].options());
  auto& g1 = static_cast<torch::optim::AdamWOptions&>(opt->param_groups()[1].options());
  EXPECT_EQ(opt->param_groups()[0].params()[0].dim(), 2);
  EXPECT_DOUBLE_EQ(g0.weight_decay(), t.weight_decay);
  EXPECT_DOUBLE_EQ(g1.weight_decay(), 0.0);
  set_lr(*opt, 0.5);
  EXPECT_DOUBLE_EQ(g0.lr(), 0.5);
  EXPECT_DOUBLE_EQ(g1.lr(), 0.5);
}

namespace {

// A small GPT's parameters with the same seeded gradients on each call.
void seeded_grads(torch::nn::Module& m, uint64_t seed) {
  torch::manual_seed(seed);
  for (auto& p : m.parameters()) p.mutable_grad() = torch::randn_like(p) * 0.1;
}

std::unique_ptr<torch::optim::AdamW> adamw_for(torch::nn::Module& m) {
  TrainConfig t;
  t.lr = 1e-2;
  return make_adamw(m, t);
}

}  // namespace

// adamw_step is torch::optim::AdamW's update whether or not this build fuses it (LibTorch 1.13
// steps with AdamW itself: equal bit for bit; a fused kernel within float32 rounding), and its
// state is the optimizer's own: saved after fused steps and loaded into a new optimizer, the
// run goes on the same.
TEST(Optim, AdamwStepIsLibTorchsAdamW) {
  auto reference = make_stage_model(testing_micro(), StageSpec{}, 3);
  auto stepped = make_stage_model(testing_micro(), StageSpec{}, 3);
  auto ref_opt = adamw_for(*reference);
  auto opt = adamw_for(*stepped);
  for (uint64_t step = 1; step <= 4; ++step) {
    seeded_grads(*reference, step);
    seeded_grads(*stepped, step);
    ref_opt->step();
    adamw_step(*opt);
  }
  const bool fused = adamw_is_fused(at::kCPU);
  auto ref = reference->named_parameters();
  for (const auto& p : stepped->named_parameters()) {
    const auto& r = ref[p.key()];
    if (fused)
      EXPECT_TRUE(torch::allclose(p.value(), r, 1e-5, 1e-7)) << p.key();
    else
      EXPECT_TRUE(torch::equal(p.value(), r)) << p.key();
    EXPECT_FALSE(torch::equal(
        p.value(), make_stage_model(testing_micro(), {}, 3)->named_parameters()[p.key()]))
        << p.key() << " did not move";
  }
  auto resumed = make_stage_model(testing_micro(), StageSpec{}, 3);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : resumed->named_parameters())
      p.value().copy_(stepped->named_parameters()[p.key()]);
  }
  auto resumed_opt = adamw_for(*resumed);
  load_optimizer_bytes(*resumed_opt, optimizer_bytes(*opt));
  seeded_grads(*stepped, 9);
  seeded_grads(*resumed, 9);
  adamw_step(*opt);
  adamw_step(*resumed_opt);
  for (const auto& p : resumed->named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), stepped->named_parameters()[p.key()])) << p.key();
}

// The gradient's squared norm is read once for all parameters; it is the sum, in parameter
// order and in double, of each parameter's norm squared, as one read after another made it.
TEST(Optim, GradSqnormSumsEveryParametersNorm) {
  auto m = make_stage_model(testing_micro(), StageSpec{}, 5);
  seeded_grads(*m, 7);
  auto params = m->parameters();
  params[1].mutable_grad() = at::Tensor();  // a parameter without a gradient counts as none
  double expected = 0;
  for (const auto& p : params)
    if (p.grad().defined()) {
      const double n = p.grad().norm().item<double>();
      expected += n * n;
    }
  EXPECT_EQ(grad_sqnorm(params), expected);
  scale_grads(params, 0.5);
  EXPECT_DOUBLE_EQ(grad_sqnorm(params), expected / 4);
  EXPECT_FALSE(params[1].grad().defined());
}

// Gradients are dropped between steps, not zeroed: the next backward writes what zeros plus
// it would have been, bit for bit, and a parameter without a gradient is left alone.
TEST(Optim, ZeroGradsDropsGradientsAndTheNextBackwardIsTheSame) {
  auto dropped = make_stage_model(testing_micro(), StageSpec{}, 5);
  auto zeroed = make_stage_model(testing_micro(), StageSpec{}, 5);
  auto ids = torch::randint(0, 256, {2, 8}, torch::kLong);
  for (auto* m : {&dropped, &zeroed}) (*m)->forward(ids).sum().backward();
  auto opt = adamw_for(*dropped);
  zero_grads(*opt);
  for (const auto& p : dropped->parameters()) EXPECT_FALSE(p.grad().defined());
  for (auto& p : zeroed->parameters()) p.mutable_grad().zero_();
  for (auto* m : {&dropped, &zeroed}) (*m)->forward(ids).sum().backward();
  auto z = zeroed->named_parameters();
  for (const auto& p : dropped->named_parameters())
    EXPECT_TRUE(torch::equal(p.value().grad(), z[p.key()].grad())) << p.key();
}

// AdamW's state as tensors (a state fetched from several donors): equal on two workers that
// stepped alike, although the torch-serialized optimizer is not (it names each parameter's
// state by its address); loaded into a fresh optimizer, the next step is the same bit for bit;
// a state that does not fit is refused before anything changes.
TEST(Optim, MomentsAreEqualBetweenEqualWorkersAndResumeTheSameStep) {
  auto a = make_stage_model(testing_micro(), StageSpec{}, 3);
  auto b = make_stage_model(testing_micro(), StageSpec{}, 3);
  auto opt_a = adamw_for(*a), opt_b = adamw_for(*b);
  for (uint64_t step = 1; step <= 3; ++step) {
    seeded_grads(*a, step);
    seeded_grads(*b, step);
    adamw_step(*opt_a);
    adamw_step(*opt_b);
  }
  const auto ma = adamw_moments(*opt_a), mb = adamw_moments(*opt_b);
  ASSERT_EQ(ma.size(), 3 * a->parameters().size());
  for (size_t i = 0; i < ma.size(); ++i) {
    EXPECT_EQ(ma[i].first, mb[i].first);
    EXPECT_TRUE(torch::equal(ma[i].second, mb[i].second)) << ma[i].first;
  }
  EXPECT_EQ(ma[0].second.item<int64_t>(), 3);
  EXPECT_NE(optimizer_bytes(*opt_a), optimizer_bytes(*opt_b));

  auto resumed = make_stage_model(testing_micro(), StageSpec{}, 3);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : resumed->named_parameters()) p.value().copy_(a->named_parameters()[p.key()]);
  }
  auto resumed_opt = adamw_for(*resumed);
  auto bad = ma;
  bad.pop_back();
  EXPECT_THROW(load_adamw_moments(*resumed_opt, bad, at::kCPU), std::invalid_argument);
  bad = ma;
  bad[1].second = at::zeros({7});
  EXPECT_THROW(load_adamw_moments(*resumed_opt, bad, at::kCPU), std::invalid_argument);
  EXPECT_TRUE(resumed_opt->state().empty());  // nothing changed
  load_adamw_moments(*resumed_opt, ma, at::kCPU);
  seeded_grads(*a, 9);
  seeded_grads(*resumed, 9);
  adamw_step(*opt_a);
  adamw_step(*resumed_opt);
  for (const auto& p : resumed->named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), a->named_parameters()[p.key()])) << p.key();
  // A fresh optimizer has no state: every step is -1.
  auto fresh = adamw_for(*make_stage_model(testing_micro(), StageSpec{}, 3));
  for (size_t i = 0; i < ma.size(); i += 3)
    EXPECT_EQ(adamw_moments(*fresh)[i].second.item<int64_t>(), -1);
}
