// The DiLoCo group's round arithmetic (model/outer_round.hpp) on hand-made tensors, as torchft
// tests its local_sgd apart from its manager: the plain outer step and its answer, quantized
// updates that leave every copy of θ equal (with error feedback carried to the next round),
// eager's mean and its last round, the outer rate's schedule, and contributions refused by
// name, shape or an encoding that does not decode.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "config/config.hpp"
#include "model/outer_round.hpp"
#include "model/quantize.hpp"
#include "model/topk.hpp"

using namespace swarmrt;
using model::NamedTensors;

namespace {

config::RunConfig settings(double lr = 0.7, double mu = 0.9) {
  config::RunConfig c;
  c.diloco.outer_lr = lr;
  c.diloco.outer_momentum = mu;
  c.swarm.workers_per_stage = 2;
  c.train.steps = 100;
  return c;
}

NamedTensors named(std::vector<float> w) {
  return {{"w", at::tensor(w, at::kFloat)}};
}

float at_(const at::Tensor& t, int64_t i) {
  return t[i].item<float>();
}

}  // namespace

// Plain DiLoCo: θ(t) = θ − η (Δ̄ + μ b), b = μ b + Δ̄, over two rounds; the answer is θ(t).
TEST(OuterRound, PlainRoundsStepWithTheMeanAndAnswerTheta) {
  model::OuterRound round(named({1, 2, -1}), settings());
  auto a = round.apply({{0, named({0.5f, 0, 1})}, {1, named({0.1f, 0.2f, -1})}}, 10, false);
  EXPECT_FALSE(a.update);
  EXPECT_FALSE(a.average);
  ASSERT_EQ(a.tensors.size(), 1u);
  // Δ̄ = (0.3, 0.1, 0); b = Δ̄; θ = θ − 0.7 · 1.9 Δ̄
  const float theta1[3] = {1 - 1.33f * 0.3f, 2 - 1.33f * 0.1f, -1};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(at_(a.tensors[0], i), theta1[i], 1e-6);
    EXPECT_NEAR(at_(round.theta()[0].second, i), theta1[i], 1e-6);
  }
  a = round.apply({{0, named({0.2f, -0.4f, 0.6f})}}, 20, false);
  const float b[3] = {0.47f, -0.31f, 0.6f}, d[3] = {0.2f, -0.4f, 0.6f};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(at_(round.momentum()[0].second, i), b[i], 1e-6);
    EXPECT_NEAR(at_(a.tensors[0], i), theta1[i] - 0.7f * (d[i] + 0.9f * b[i]), 1e-6);
  }
}

// Quantized answers: θ(t) − θ(t−1) encoded; the group's θ(t) is θ(t−1) plus exactly what a
// worker decodes, round after round, and error feedback carries what one round's encoding lost
// into the next (the sum of decoded updates tracks the sum of exact ones).
TEST(OuterRound, QuantizedUpdatesKeepEveryCopyOfThetaEqual) {
  auto c = settings(1.0, 0.0);
  c.diloco.quantize = config::Quantize::int4;
  c.diloco.quant_block = 4;
  c.diloco.error_feedback = true;
  model::OuterRound round(named({0, 0, 0, 0}), c);
  auto worker = at::zeros({4});
  auto exact = at::zeros({4});
  for (int r = 0; r < 5; ++r) {
    const auto delta = named({0.013f * (r + 1), -0.4f, 0.27f, 0.9f});
    const auto before = round.theta()[0].second.clone();
    const auto a = round.apply({{0, delta}}, 10 * (r + 1), false);
    ASSERT_TRUE(a.update);
    worker += model::decode(a.tensors[0], c.diloco.quantize, c.diloco.quant_block, {4});
    exact -= delta[0].second;  // η = 1, μ = 0: θ(t) = θ(t−1) − Δ
    EXPECT_TRUE(at::equal(worker, round.theta()[0].second)) << "round " << r;
    EXPECT_FALSE(at::equal(before, round.theta()[0].second));
  }
  // int4 over a block of 4 loses up to a step of max/7 each round; carried, what is lost stays
  // one round's error (the last residual, |u| <= 0.9 plus what was carried) instead of adding up.
  EXPECT_LT((worker - exact).abs().max().item<float>(), 1.2f / 7);
}

// Eager: every round but the last is answered with the mean Δ̄ and its contributors; θ follows
// the mean of the workers' eager steps; the last round is answered with θ(t) itself.
TEST(OuterRound, EagerAnswersTheMeanAndThetaAtTheEnd) {
  auto c = settings(1.0, 0.0);
  c.diloco.eager = true;
  model::OuterRound round(named({0, 0}), c);
  auto a = round.apply({{3, named({1, 2})}, {5, named({3, 4})}}, 10, false);
  EXPECT_TRUE(a.average);
  EXPECT_FALSE(a.update);
  EXPECT_EQ(a.contributors, (std::vector<uint32_t>{3, 5}));
  EXPECT_NEAR(at_(a.tensors[0], 0), 2, 1e-6);
  EXPECT_NEAR(at_(a.tensors[0], 1), 3, 1e-6);
  // First round, no mean yet: Δ̃_i = Δ_i / M (M = 2 workers), θ = −mean(Δ̃) = −(1, 1.5).
  EXPECT_NEAR(at_(round.theta()[0].second, 0), -1, 1e-6);
  EXPECT_NEAR(at_(round.theta()[0].second, 1), -1.5, 1e-6);
  a = round.apply({{3, named({0, 0})}, {5, named({0, 0})}}, 20, true);
  EXPECT_FALSE(a.average);
  EXPECT_TRUE(a.contributors.empty());
  EXPECT_TRUE(at::equal(a.tensors[0], round.theta()[0].second));
}

// diloco.outer_lr_schedule = cosine: the same contribution moves θ less late in the run.
TEST(OuterRound, OuterRateFollowsItsSchedule) {
  auto c = settings(1.0, 0.0);
  c.diloco.outer_lr_schedule = config::Schedule::cosine;
  c.diloco.outer_min_lr = 0.1;
  model::OuterRound early(named({0}), c), late(named({0}), c);
  early.apply({{0, named({1})}}, 1, false);
  late.apply({{0, named({1})}}, 100, false);
  EXPECT_NEAR(at_(early.theta()[0].second, 0), -1, 0.01);
  EXPECT_NEAR(at_(late.theta()[0].second, 0), -0.1, 0.01);
}

// A contribution with θ's names and shapes decodes; one with another count, name or shape is
// refused by name; a quantized one whose scale is not finite is excused (the round goes on).
TEST(OuterRound, RefusesContributionsThatDoNotFitTheta) {
  model::OuterRound plain(named({0, 0}), settings());
  NamedTensors delta;
  bool excuse = false;
  EXPECT_EQ(plain.decode({"w"}, {at::ones({2})}, delta, excuse), "");
  ASSERT_EQ(delta.size(), 1u);
  delta.clear();
  EXPECT_EQ(plain.decode({"w", "b"}, {at::ones({2}), at::ones({2})}, delta, excuse),
            "wrong number of tensors");
  EXPECT_NE(plain.decode({"v"}, {at::ones({2})}, delta, excuse).find("tensor 'v' mismatches"),
            std::string::npos);
  EXPECT_NE(plain.decode({"w"}, {at::ones({3})}, delta, excuse).find("mismatches"),
            std::string::npos);
  EXPECT_FALSE(excuse);

  auto c = settings();
  c.diloco.quantize = config::Quantize::int8;
  c.diloco.quant_block = 2;
  model::OuterRound quantized(named({0, 0}), c);
  auto wire = model::encode(at::ones({2}), c.diloco.quantize, c.diloco.quant_block);
  delta.clear();
  EXPECT_EQ(quantized.decode({"w"}, {wire}, delta, excuse), "");
  EXPECT_TRUE(at::allclose(delta[0].second, at::ones({2}), 1e-2, 1e-2));
  // The scale rides in the wire's first bytes: make it NaN.
  auto bad = wire.clone();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bad.data_ptr(), &nan, sizeof(nan));
  delta.clear();
  EXPECT_NE(quantized.decode({"w"}, {bad}, delta, excuse), "");
  EXPECT_TRUE(excuse);
}

// diloco.all_gather: the group steps θ by −η times the plain mean of the contributions as
// decoded from their wires, answers with who was in the round and encodes nothing (no error
// feedback of its own), and a worker that sums the same wires with gathered_update lands on the
// group's θ(t) bit for bit, round after round.
TEST(OuterRound, AllGatherStepsByTheMeanOfTheWiresAsEveryWorkerSumsThem) {
  auto c = settings(2.0, 0.0);
  c.diloco.compress = config::Compress::topk;
  c.diloco.topk_density = 0.25;
  c.diloco.topk_chunk = 8;
  c.diloco.all_gather = true;
  at::manual_seed(7);
  const auto theta0 = at::randn({16});
  model::OuterRound round({{"w", theta0.clone()}}, c);
  auto worker = theta0.clone();  // a worker's anchor
  for (int r = 0; r < 3; ++r) {
    std::map<uint32_t, NamedTensors> contributions;
    std::vector<std::vector<at::Tensor>> decoded;
    for (uint32_t id : {3u, 5u}) {
      const auto wire = model::encode_round(at::randn({16}), c.diloco);
      NamedTensors delta;
      bool excuse = false;
      ASSERT_EQ(round.decode({"w"}, {wire}, delta, excuse), "");
      contributions[id] = delta;
      decoded.push_back({model::decode_round(wire, c.diloco, {16})});
    }
    const auto before = round.theta()[0].second.clone();
    const auto a = round.apply(contributions, 10 * (r + 1), false);
    EXPECT_TRUE(a.gathered);
    EXPECT_TRUE(a.update);
    EXPECT_TRUE(a.tensors.empty());
    EXPECT_EQ(a.contributors, (std::vector<uint32_t>{3, 5}));
    EXPECT_TRUE(round.residual().empty());
    worker = worker + model::gathered_update(decoded, 2.0)[0];
    EXPECT_TRUE(at::equal(worker, round.theta()[0].second)) << "round " << r;
    const auto mean = (decoded[0][0] + decoded[1][0]) / 2;
    EXPECT_TRUE(at::allclose(round.theta()[0].second, before - 2.0 * mean, 1e-6, 1e-6));
    EXPECT_GT((round.theta()[0].second - before).abs().sum().item<float>(), 0.f);
  }
}
