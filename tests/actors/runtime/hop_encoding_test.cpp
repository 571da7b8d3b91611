// swarm.hop_encoding through the actor runtime: the hop bytes each encoding sends, by the
// byte counters, and a pipeline with int8 or int4 hops against the same pipeline with none.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "../../model/test_util.hpp"
#include "actors/runtime/runtime.hpp"
#include "model/quantize.hpp"

using namespace swarmrt;

#include "../run_util.hpp"

namespace {
using swarmrt::testing::micro_run;
using swarmrt::testing::run;

config::RunConfig pipeline(config::HopEncoding e, int64_t steps, int64_t seed = 1337) {
  auto c = micro_run("pp", 2, 1, steps);
  c.swarm.hop_encoding = e;
  c.swarm.hop_block = 128;
  c.train.seed = seed;
  return c;
}

// The largest relative difference between the step losses of `a` and `b`.
double max_relative_gap(const std::vector<double>& a, const std::vector<double>& b) {
  double gap = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    gap = std::max(gap, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return gap;
}
}  // namespace

// Input gradients backward are [B, T, d] hidden-state gradients only: each encoding's bytes
// are exactly its wire size (model/quantize.hpp: a code a value, a float32 scale a block of
// 128; int5/3 sends 5-bit codes forward and 3-bit ones back; int4/2 4-bit codes forward and
// 2-bit ones back, each with a bfloat16 scale a block). The micro model's hops
// (2 x 32 x 32 = 2048 values) make 16 blocks.
TEST(HopEncoding, EachEncodingSendsItsWireSizeByTheCounters) {
  const auto none = run(pipeline(config::HopEncoding::none, 3)).bytes;
  const double n = 2 * 32 * 32, hops = 12;  // 3 steps x 4 micro-batches back
  EXPECT_EQ(none.at("gradients").get<double>(), hops * 4 * n);
  struct Sizes {
    config::HopEncoding e;
    double forward, backward;  // bytes of one hop's wire
  };
  const Sizes expected[] = {
      {config::HopEncoding::bf16, 2 * n, 2 * n},
      {config::HopEncoding::int8, n + 4 * n / 128, n + 4 * n / 128},
      {config::HopEncoding::int4, n / 2 + 4 * n / 128, n / 2 + 4 * n / 128},
      {config::HopEncoding::int5_3, 5 * n / 8 + 4 * n / 128, 3 * n / 8 + 4 * n / 128},
      {config::HopEncoding::int3, 3 * n / 8 + 4 * n / 128, 3 * n / 8 + 4 * n / 128},
      {config::HopEncoding::int4_2, n / 2 + 2 * n / 128, n / 4 + 2 * n / 128}};
  // entropy's wire depends on the values: Huffman codes of steps of each block's RMS, about 2
  // bits a gradient value here (0.068 of none's bytes back, measured). A byte a code, uncoded,
  // would be a quarter; a gradient that was not counted, nothing.
  const auto entropy = run(pipeline(config::HopEncoding::entropy, 3));
  const double coded = entropy.bytes.at("gradients").get<double>() / (hops * 4 * n);
  EXPECT_GT(coded, 1.0 / 25);
  EXPECT_LT(coded, 1.0 / 8);
  EXPECT_EQ(entropy.report.rejected_frames, 0u);
  for (const auto& [e, forward, backward] : expected) {
    const auto r = run(pipeline(e, 3));
    EXPECT_EQ(r.bytes.at("gradients").get<double>(), hops * backward) << config::name_of(e);
    EXPECT_EQ(r.report.rejected_frames, 0u) << config::name_of(e);
    // Forward: the same number of hops, each the wire beside the int64 targets.
    const double forward_none = none.at("activations").get<double>();
    const double saved = forward_none - r.bytes.at("activations").get<double>();
    const double forward_hops = saved / (4 * n - forward);
    EXPECT_GE(forward_hops, 12) << config::name_of(e);
    EXPECT_EQ(forward_hops, std::floor(forward_hops)) << config::name_of(e);
    if (e == config::HopEncoding::int8) {
      EXPECT_LE((forward + backward) / (8 * n), 0.26);
    } else if (e != config::HopEncoding::bf16) {
      EXPECT_LE((forward + backward) / (8 * n), 0.14) << config::name_of(e);
    }
    if (e == config::HopEncoding::int4_2) {
      EXPECT_LT((forward + backward) / (8 * n), 0.1);
    }
  }
}

// swarm.compression = auto in one process: a hop to a worker of the same process crosses no
// wire, so it goes as it is, whatever the floor: the same bytes and the same losses as none.
TEST(HopEncoding, AutoSendsHopsInOneProcessAsTheyAre) {
  const auto none = run(pipeline(config::HopEncoding::none, 3));
  auto c = pipeline(config::HopEncoding::int4, 3);
  c.swarm.compression = config::Compression::automatic;
  const auto automatic = run(c);
  EXPECT_EQ(automatic.bytes.at("gradients"), none.bytes.at("gradients"));
  EXPECT_EQ(automatic.bytes.at("activations"), none.bytes.at("activations"));
  EXPECT_EQ(automatic.report.losses, none.report.losses);
  EXPECT_EQ(automatic.report.rejected_frames, 0u);
}

// A pipeline with quantized hops against the same pipeline with none, 20 steps of the micro
// model on Brown text: the largest relative gap between their step losses. Each run is
// deterministic (one route, seeded data, gradients' stochastic rounding seeded by the run's
// seed and the hop), so the comparison is too; the bounds come from 10 seeds (1..10) measured
// with SWARMRT_HOP_SEEDS=10 (the test runs seed 1 by default):
//   int8:   gaps 0.00002 .. 0.00019 (mean 0.00007) -> bound 0.001
//   int4:   gaps 0.00040 .. 0.00222 (mean 0.00111) -> bound 0.006
//   int5/3: gaps 0.00034 .. 0.00311 (mean 0.00101) -> bound 0.008
//   int3:   gaps 0.00180 .. 0.00591 (mean 0.00339) -> bound 0.015 (2026-11-30, the same run:
//           int8 0.00002 .. 0.00020, int4 0.00057 .. 0.00256, int5/3 0.00024 .. 0.00208)
//   int4/2: gaps 0.00079 .. 0.00598 (mean 0.00251) -> bound 0.015
//   entropy: gaps 0.00042 .. 0.00297 (mean 0.00171) -> bound 0.008 (2026-11-30, both; the same
//           run gave int3 0.00180 .. 0.00591 as before)
// and with none the gap must be 0 (bit for bit: `none` sends the tensor itself).
TEST(HopEncoding, QuantizedHopsTrainWithinTheirMeasuredGapOfNone) {
  const char* env = std::getenv("SWARMRT_HOP_SEEDS");
  const int seeds = env ? std::atoi(env) : 1;
  double worst8 = 0, worst4 = 0, worst53 = 0, worst3 = 0, worst42 = 0, worst_entropy = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    const auto none = run(pipeline(config::HopEncoding::none, 20, seed)).report.losses;
    const auto again = run(pipeline(config::HopEncoding::none, 20, seed)).report.losses;
    EXPECT_EQ(max_relative_gap(again, none), 0.0) << "seed " << seed;
    const auto gap = [&](config::HopEncoding e) {
      return max_relative_gap(run(pipeline(e, 20, seed)).report.losses, none);
    };
    const double gap8 = gap(config::HopEncoding::int8), gap4 = gap(config::HopEncoding::int4),
                 gap53 = gap(config::HopEncoding::int5_3), gap3 = gap(config::HopEncoding::int3),
                 gap42 = gap(config::HopEncoding::int4_2),
                 gap_entropy = gap(config::HopEncoding::entropy);
    std::printf(
        "seed %d: int8 gap %.5f, int4 gap %.5f, int5/3 gap %.5f, int3 gap %.5f, "
        "int4/2 gap %.5f, entropy gap %.5f\n",
        seed, gap8, gap4, gap53, gap3, gap42, gap_entropy);
    worst8 = std::max(worst8, gap8);
    worst4 = std::max(worst4, gap4);
    worst53 = std::max(worst53, gap53);
    worst3 = std::max(worst3, gap3);
    worst42 = std::max(worst42, gap42);
    worst_entropy = std::max(worst_entropy, gap_entropy);
    EXPECT_GT(gap8, 0.0) << "int8 hops should change the computation";
  }
  EXPECT_LE(worst8, 0.001);
  EXPECT_LE(worst4, 0.006);
  EXPECT_LE(worst53, 0.008);
  EXPECT_LE(worst3, 0.015);
  EXPECT_LE(worst42, 0.015);
  EXPECT_LE(worst_entropy, 0.008);
}

// Encodings compose with train.precision: a bf16 pipeline with int8 hops trains (finite,
// falling losses) and refuses nothing.
TEST(HopEncoding, Int8HopsOfABf16Pipeline) {
  auto c = pipeline(config::HopEncoding::int8, 10);
  c.train.precision = config::Precision::bf16;
  const auto r = run(c);
  ASSERT_EQ(r.report.losses.size(), 10u);
  for (double l : r.report.losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(r.report.losses.back(), r.report.losses.front());
  EXPECT_EQ(r.report.rejected_frames, 0u);
}
