#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <torch/nn/module.h>

#include "model/diloco.hpp"

using namespace swarmrt::model;

// Two outer rounds on hand-made tensors against the formula of architecture §6, with the momentum
// buffer carried across rounds.
TEST(OuterNesterov, MatchesTheFormulaAcrossRounds) {
  const double lr = 0.7, mu = 0.9;
  OuterNesterov outer({{"w", at::tensor({1.0, 2.0, -1.0}, at::kDouble)}}, lr, mu);
  NamedTensors d1 = {{"w", at::tensor({0.5, 0.0, 1.0}, at::kDouble)}};
  NamedTensors d2 = {{"w", at::tensor({0.1, 0.2, -1.0}, at::kDouble)}};
  outer.step({&d1, &d2});
  // Δ = (0.3, 0.1, 0); b = Δ; θ = θ − 0.7 (Δ + 0.9 b) = θ − 1.33 Δ
  const std::vector<double> theta1 = {1.0 - 1.33 * 0.3, 2.0 - 1.33 * 0.1, -1.0};
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(outer.theta()[0].second[i].item<double>(), theta1[i], 1e-12);

  NamedTensors d3 = {{"w", at::tensor({0.2, -0.4, 0.6}, at::kDouble)}};
  outer.step({&d3});
  // b = 0.9 (0.3, 0.1, 0) + (0.2, -0.4, 0.6) = (0.47, -0.31, 0.6)
  const std::vector<double> b = {0.47, -0.31, 0.6}, delta = {0.2, -0.4, 0.6};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(outer.momentum()[0].second[i].item<double>(), b[i], 1e-12);
    EXPECT_NEAR(outer.theta()[0].second[i].item<double>(), theta1[i] - lr * (delta[i] + mu * b[i]),
                1e-12);
  }
}

TEST(OuterNesterov, RefusesMismatchedContributions) {
  OuterNesterov outer({{"w", at::zeros({3})}}, 0.7, 0.9);
  NamedTensors wrong_name = {{"v", at::zeros({3})}};
  NamedTensors wrong_shape = {{"w", at::zeros({4})}};
  EXPECT_THROW(outer.step({&wrong_name}), std::invalid_argument);
  EXPECT_THROW(outer.step({&wrong_shape}), std::invalid_argument);
  EXPECT_THROW(outer.step({}), std::invalid_argument);
}

TEST(OuterNesterov, PseudoGradientIsAnchorMinusParameters) {
  torch::nn::Module m;
  auto p = m.register_parameter("p", at::tensor({1.0f, 5.0f}));
  NamedTensors anchor = {{"p", at::tensor({3.0f, 3.0f})}};
  auto d = pseudo_gradient(anchor, m);
  EXPECT_TRUE(at::equal(d[0].second, at::tensor({2.0f, -2.0f})));
  assign_parameters(m, anchor);
  EXPECT_TRUE(at::equal(p, anchor[0].second));
}
