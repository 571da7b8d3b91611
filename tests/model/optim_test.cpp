#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include "model/optim.hpp"

using namespace swarmrt::model;

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
