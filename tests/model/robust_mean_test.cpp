// diloco.aggregate's arithmetic (model/robust_mean.hpp) on seeded tensors: what one worker that
// sends anything can do to a round under the mean, CenteredClip and the trimmed mean, and what
// they give when every worker is honest.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "config/config.hpp"
#include "model/outer_round.hpp"
#include "model/robust_mean.hpp"

using namespace swarmrt;
using model::NamedTensors;

namespace {

// n honest pseudo-gradients around one true direction (a stage of two tensors), seeded.
std::vector<NamedTensors> honest(int n, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  auto truth_w = at::randn({8, 4}, gen, at::kFloat), truth_b = at::randn({4}, gen, at::kFloat);
  std::vector<NamedTensors> out;
  for (int i = 0; i < n; ++i)
    out.push_back({{"w", truth_w + 0.1 * at::randn({8, 4}, gen, at::kFloat)},
                   {"b", truth_b + 0.1 * at::randn({4}, gen, at::kFloat)}});
  return out;
}

double distance(const NamedTensors& a, const NamedTensors& b) {
  double sq = 0;
  for (size_t k = 0; k < a.size(); ++k)
    sq += (a[k].second - b[k].second).pow(2).sum().item<double>();
  return std::sqrt(sq);
}

NamedTensors scaled(const NamedTensors& a, double by) {
  NamedTensors out;
  for (const auto& [name, t] : a) out.emplace_back(name, t * by);
  return out;
}

std::vector<const NamedTensors*> pointers(const std::vector<NamedTensors>& v) {
  std::vector<const NamedTensors*> out;
  for (const auto& x : v) out.push_back(&x);
  return out;
}

config::DilocoConfig with(config::Aggregate a) {
  config::DilocoConfig d;
  d.aggregate = a;
  return d;
}

}  // namespace

// 3 honest workers and one sending its Δ sign-flipped x10: the mean lands far from the honest
// mean (about 3x its size away); CenteredClip and the trimmed mean stay within a fraction of
// the honest spread of it. Over 30 seeds.
TEST(RobustMean, OneSignFlippedWorkerMovesTheMeanButNotCenteredClipOrTheTrimmedMean) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    auto all = honest(4, seed);
    const auto truth =
        model::aggregate(pointers({all[0], all[1], all[2]}), with(config::Aggregate::mean));
    const double size = distance(truth, scaled(truth, 0));
    all[3] = scaled(all[3], -10);
    const auto mean = model::aggregate(pointers(all), with(config::Aggregate::mean));
    const auto clip = model::aggregate(pointers(all), with(config::Aggregate::centered_clip));
    const auto trim = model::aggregate(pointers(all), with(config::Aggregate::trimmed_mean));
    EXPECT_GT(distance(mean, truth), 2.0 * size) << "seed " << seed;
    EXPECT_LT(distance(clip, truth), 0.25 * size) << "seed " << seed;
    EXPECT_LT(distance(trim, truth), 0.25 * size) << "seed " << seed;
  }
}

// diloco.clip_drop: after CenteredClip, a contribution far from its result is dropped and the
// result is the others' mean: the sign-flipped worker then costs nothing (the honest mean to
// float precision), where CenteredClip alone keeps its τ/(n − 1) pull.
TEST(RobustMean, ClipDropTakesTheMeanOfTheContributionsNearTheCenteredClip) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    auto all = honest(4, seed);
    const auto truth =
        model::aggregate(pointers({all[0], all[1], all[2]}), with(config::Aggregate::mean));
    all[3] = scaled(all[3], -10);
    auto d = with(config::Aggregate::centered_clip);
    const double alone = distance(model::aggregate(pointers(all), d), truth);
    d.clip_drop = 3;
    const double dropped = distance(model::aggregate(pointers(all), d), truth);
    EXPECT_LT(dropped, 1e-5) << "seed " << seed;
    EXPECT_GT(alone, 100 * dropped) << "seed " << seed;
  }
  // Every contribution within the bound: the plain mean of all of them.
  const auto all = honest(5, 3);
  auto d = with(config::Aggregate::centered_clip);
  d.clip_drop = 100;
  EXPECT_LT(distance(model::aggregate(pointers(all), d),
                     model::aggregate(pointers(all), with(config::Aggregate::mean))),
            1e-5);
}

// Honest workers only: CenteredClip and the trimmed mean are close to the mean (the spread of
// the contributions, 0.1 per value, bounds how far), and each keeps the names and shapes.
TEST(RobustMean, HonestWorkersGetCloseToTheMean) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    const auto all = honest(5, seed);
    const auto mean = model::aggregate(pointers(all), with(config::Aggregate::mean));
    for (auto a : {config::Aggregate::centered_clip, config::Aggregate::trimmed_mean}) {
      const auto got = model::aggregate(pointers(all), with(a));
      ASSERT_EQ(got.size(), 2u);
      EXPECT_EQ(got[0].first, "w");
      EXPECT_TRUE(got[0].second.sizes().equals({8, 4}));
      EXPECT_LT(distance(got, mean), 0.1 * std::sqrt(36.0))
          << config::name_of(a) << " seed " << seed;
    }
  }
}

// The trimmed mean drops the `trim` largest and smallest values of each coordinate; with too
// few contributions for the trim, at least the median stays.
TEST(RobustMean, TheTrimmedMeanDropsTheExtremesOfEachCoordinate) {
  auto one = [](float a, float b) { return NamedTensors{{"w", at::tensor({a, b}, at::kFloat)}}; };
  std::vector<NamedTensors> v = {one(1, 100), one(2, -100), one(3, 5), one(1000, 6), one(4, 7)};
  auto d = with(config::Aggregate::trimmed_mean);
  d.trim = 1;
  auto got = model::aggregate(pointers(v), d)[0].second;
  EXPECT_FLOAT_EQ(got[0].item<float>(), 3.0f);  // mean of 2, 3, 4
  EXPECT_FLOAT_EQ(got[1].item<float>(), 6.0f);  // mean of 5, 6, 7
  d.trim = 5;
  got = model::aggregate(pointers(v), d)[0].second;
  EXPECT_FLOAT_EQ(got[0].item<float>(), 3.0f);  // the median alone
  EXPECT_FLOAT_EQ(got[1].item<float>(), 6.0f);
}

// A fixed radius bounds how far one worker moves the result: τ/n per iteration.
TEST(RobustMean, AFixedClipRadiusBoundsOneWorkersPull) {
  std::vector<NamedTensors> v(4, NamedTensors{{"w", at::zeros({3})}});
  v[3] = {{"w", at::full({3}, 1e6f)}};
  auto d = with(config::Aggregate::centered_clip);
  d.clip_radius = 0.5;
  d.clip_iterations = 3;
  const auto got = model::aggregate(pointers(v), d)[0].second;
  EXPECT_LE(got.norm().item<double>(), 3 * 0.5 / 4 + 1e-6);
  EXPECT_GT(got.norm().item<double>(), 0.0);
}

// Contributions that do not match are refused with the entry named.
TEST(RobustMean, RefusesContributionsOfOtherShapes) {
  std::vector<NamedTensors> v = {{{"w", at::zeros({3})}}, {{"w", at::zeros({4})}}};
  try {
    model::aggregate(pointers(v), with(config::Aggregate::centered_clip));
    FAIL() << "mismatched shapes were taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
}

// The group's round (OuterRound) steps with the robust Δ: with one sign-flipped worker x10,
// θ under centered_clip ends where the honest workers' mean would take it, not the mean's.
TEST(RobustMean, TheOuterRoundStepsWithTheRobustAggregate) {
  config::RunConfig c;
  c.diloco.outer_lr = 0.7;
  c.diloco.outer_momentum = 0.0;
  c.swarm.workers_per_stage = 4;
  c.train.steps = 100;
  auto all = honest(4, 7);
  // θ is stepped in place and answered as it is: each round its own copy, each answer cloned.
  auto theta = [] { return NamedTensors{{"w", at::zeros({8, 4})}, {"b", at::zeros({4})}}; };
  auto cloned = [](std::vector<at::Tensor> v) {
    for (auto& t : v) t = t.clone();
    return v;
  };
  std::map<uint32_t, NamedTensors> honest_only, attacked;
  for (uint32_t i = 0; i < 3; ++i) honest_only[i] = attacked[i] = all[i];
  attacked[3] = scaled(all[3], -10);
  model::OuterRound reference(theta(), c);
  const auto want = cloned(reference.apply(honest_only, 10, false).tensors);
  c.diloco.aggregate = config::Aggregate::centered_clip;
  model::OuterRound robust(theta(), c);
  const auto got = cloned(robust.apply(attacked, 10, false).tensors);
  c.diloco.aggregate = config::Aggregate::mean;
  model::OuterRound plain(theta(), c);
  const auto ruined = cloned(plain.apply(attacked, 10, false).tensors);
  auto dist = [](const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    double sq = 0;
    for (size_t k = 0; k < a.size(); ++k) sq += (a[k] - b[k]).pow(2).sum().item<double>();
    return std::sqrt(sq);
  };
  EXPECT_LT(dist(got, want), 0.2 * dist(ruined, want));
}
