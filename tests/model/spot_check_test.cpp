// The numbers a spot check of stage work compares (model/checks.hpp): how far a verifier's
// output is from the checked worker's, and what the run's precision and hop encoding allow
// between two honest workers.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "model/checks.hpp"
#include "model/hop_codec.hpp"

using namespace swarmrt;

namespace {

at::Tensor hidden(uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randn({2, 16, 64}, gen, at::kFloat);
}

TEST(SpotCheckNumbers, EqualIsZeroAndNoiseIsItsSize) {
  const auto y = hidden(1);
  EXPECT_EQ(model::relative_difference(y, y.clone()), 0.0);
  auto gen = at::detail::createCPUGenerator(2);
  for (double size : {0.1, 0.3, 1.0}) {
    const auto noisy = y + at::randn(y.sizes(), gen, at::kFloat) * y.pow(2).mean().sqrt() * size;
    EXPECT_NEAR(model::relative_difference(noisy, y), size, 0.1 * size) << size;
  }
  EXPECT_TRUE(std::isinf(model::relative_difference(y.slice(1, 0, 8), y)));
  EXPECT_TRUE(std::isinf(model::relative_difference(y, at::zeros_like(y))));
  EXPECT_EQ(model::relative_difference(at::zeros_like(y), at::zeros_like(y)), 0.0);
  auto nan = y.clone();
  nan[0][0][0] = std::nan("");
  EXPECT_TRUE(std::isinf(model::relative_difference(nan, y)));
}

// Two honest workers' outputs of one input differ by their arithmetic's rounding; sent in the
// run's hop encoding, both are rounded to its grid. What the tolerance allows covers that and
// stays below noise of a tenth of the RMS (a third for int4).
TEST(SpotCheckNumbers, HonestRoundingPassesAndNoiseDoesNot) {
  using config::HopEncoding;
  const auto y = hidden(3);
  const auto rms = y.pow(2).mean().sqrt();
  auto gen = at::detail::createCPUGenerator(4);
  const auto other_order = y + at::randn(y.sizes(), gen, at::kFloat) * rms * 1e-6;
  for (auto enc : {HopEncoding::none, HopEncoding::bf16, HopEncoding::int8, HopEncoding::int4,
                   HopEncoding::int3}) {
    auto wire = [&](const at::Tensor& t) {
      if (enc == HopEncoding::none) return t;
      return model::decode_hop(model::encode_hop(t, enc, 64, model::HopDirection::forward, 0), enc,
                               64, model::HopDirection::forward, t.sizes(), at::kFloat, true);
    };
    const double tol = model::spot_check_tolerance(config::Precision::fp32, enc, 0);
    EXPECT_LE(model::relative_difference(wire(other_order), wire(y)), tol) << config::name_of(enc);
    const double noise = enc == HopEncoding::int3 ? 0.6 : enc == HopEncoding::int4 ? 0.3 : 0.1;
    const auto noisy = y + at::randn(y.sizes(), gen, at::kFloat) * rms * noise;
    EXPECT_GT(model::relative_difference(wire(noisy), wire(y)), tol) << config::name_of(enc);
  }
  EXPECT_GT(model::spot_check_tolerance(config::Precision::bf16, HopEncoding::none, 0),
            model::spot_check_tolerance(config::Precision::fp32, HopEncoding::none, 0));
  EXPECT_EQ(model::spot_check_tolerance(config::Precision::bf16, HopEncoding::int4, 0.25), 0.25);
}

}  // namespace
