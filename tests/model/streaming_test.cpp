// Streaming DiLoCo's algorithm parts: fragments of a stage, their schedule, and the
// quantizers of outer gradients (model/fragments.*, model/quantize.*).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <torch/nn/module.h>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "model/diloco.hpp"
#include "model/fragments.hpp"
#include "model/quantize.hpp"
#include "model/stage_model.hpp"

using namespace swarmrt::model;
using namespace swarmrt::config;

namespace {

std::vector<std::string> stage_names(int64_t index, int64_t count, Arch arch = Arch::gpt2) {
  ModelConfig c;  // tiny: 4 blocks
  c.arch = arch;
  auto stage = make_stage_model(c, StageSpec{index, count}, 1);
  std::vector<std::string> names;
  for (const auto& p : stage->named_parameters()) names.push_back(p.key());
  return names;
}

bool starts(const std::string& name, const char* prefix) {
  return name.rfind(prefix, 0) == 0;
}

int64_t block_of(const std::string& name) {
  if (starts(name, "h.")) return std::stoll(name.substr(2));
  if (starts(name, "layers.")) return std::stoll(name.substr(7));
  return -1;
}

}  // namespace

// Every parameter of every stage lands in exactly one fragment (one entry per name, in
// range), every fragment holds a block, a block's tensors stay together, and the tensors
// outside blocks ride with the stage's first (embeddings) or last (ln_f, head) block.
TEST(Fragments, PartitionEveryStageExactlyOnce) {
  for (auto arch : {Arch::gpt2, Arch::llama})
    for (auto pattern : {FragmentPattern::strided, FragmentPattern::sequential})
      for (int64_t stages : {1, 2})
        for (int64_t P : std::vector<int64_t>{1, 2, 4 / stages}) {
          for (int64_t k = 0; k < stages; ++k) {
            const auto names = stage_names(k, stages, arch);
            const auto f = assign_fragments(names, P, pattern);
            ASSERT_EQ(f.size(), names.size());
            std::set<uint32_t> used;
            std::map<int64_t, uint32_t> of_block;
            for (size_t i = 0; i < names.size(); ++i) {
              ASSERT_LT(f[i], P) << names[i];
              used.insert(f[i]);
              if (auto b = block_of(names[i]); b >= 0) {
                auto [it, fresh] = of_block.emplace(b, f[i]);
                EXPECT_EQ(it->second, f[i]) << "block " << b << " split across fragments";
              }
            }
            EXPECT_EQ(used.size(), static_cast<size_t>(P)) << "an empty fragment";
            const auto first = of_block.begin()->second, last = of_block.rbegin()->second;
            for (size_t i = 0; i < names.size(); ++i) {
              if (starts(names[i], "wte.") || starts(names[i], "wpe.") ||
                  starts(names[i], "tok_embeddings.")) {
                EXPECT_EQ(f[i], first) << names[i];
              }
              if (starts(names[i], "ln_f.") || starts(names[i], "lm_head.") ||
                  starts(names[i], "norm.") || starts(names[i], "output.")) {
                EXPECT_EQ(f[i], last) << names[i];
              }
            }
            // The patterns' rules, on the stage's blocks numbered from 0.
            uint32_t local = 0;
            const auto blocks = static_cast<int64_t>(of_block.size());
            for (const auto& [b, frag] : of_block) {
              const auto want =
                  pattern == FragmentPattern::strided ? local % P : local * P / blocks;
              EXPECT_EQ(frag, want) << "block " << b;
              ++local;
            }
          }
        }
}

TEST(Fragments, RefuseMoreFragmentsThanBlocks) {
  try {
    assign_fragments(stage_names(0, 2), 3, FragmentPattern::strided);
    FAIL() << "3 fragments of 2 blocks accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the stage's 2 blocks"), std::string::npos)
        << e.what();
  }
}

// Fragment p syncs at steps ≡ ⌊p·H/P⌋ (mod H); P = 1 is plain DiLoCo's every H steps, and
// at most one fragment is due in any step (the peak bandwidth is one fragment's).
TEST(Fragments, StaggeredSchedule) {
  for (uint64_t t = 1; t <= 40; ++t) EXPECT_EQ(fragment_due(t, 0, 8, 1), t % 8 == 0) << t;
  std::vector<uint64_t> due1, due3;
  for (uint64_t t = 1; t <= 24; ++t) {
    if (fragment_due(t, 1, 8, 4)) due1.push_back(t);
    if (fragment_due(t, 3, 8, 4)) due3.push_back(t);
    int n = 0;
    for (uint32_t p = 0; p < 4; ++p) n += fragment_due(t, p, 8, 4);
    EXPECT_LE(n, 1) << "step " << t;
  }
  EXPECT_EQ(due1, (std::vector<uint64_t>{2, 10, 18}));
  EXPECT_EQ(due3, (std::vector<uint64_t>{6, 14, 22}));
  EXPECT_EQ(fragment_offset(2, 10, 3), 6);  // ⌊2·10/3⌋
}

// After a synchronous warm-up of K steps the schedule is the same, counted from step K: no
// round during the warm-up or at its last step, and fragment p's rounds at K + ⌊p·H/P⌋ + nH.
TEST(Fragments, ScheduleCountsFromTheWarmUpsEnd) {
  DilocoConfig w;
  w.inner_steps = 8;
  w.fragments = 4;
  w.warmup_sync_steps = 5;
  std::vector<uint64_t> due0, due1;
  for (uint64_t t = 1; t <= 30; ++t) {
    if (fragment_due(t, 0, w)) due0.push_back(t);
    if (fragment_due(t, 1, w)) due1.push_back(t);
  }
  EXPECT_EQ(due0, (std::vector<uint64_t>{13, 21, 29}));
  EXPECT_EQ(due1, (std::vector<uint64_t>{7, 15, 23}));
  for (uint64_t t = 1; t <= 5; ++t)
    for (uint32_t p = 0; p < 4; ++p) EXPECT_FALSE(fragment_due(t, p, w)) << t << " " << p;
  // Checkpoints still wait for a round in flight: fragment 1 of 2 starts at 5 + 5 = 10 and
  // lands at 12 (τ = 2), so the checkpoint of step 10 is taken at 12.
  DilocoConfig d;
  d.inner_steps = 10;
  d.fragments = 2;
  d.overlap_steps = 2;
  d.warmup_sync_steps = 5;
  EXPECT_TRUE(round_in_flight(10, d) && round_in_flight(11, d) && !round_in_flight(12, d));
  EXPECT_FALSE(round_in_flight(5, d));
  EXPECT_FALSE(checkpoint_due(10, 10, d, true));
  EXPECT_TRUE(checkpoint_due(12, 10, d, true));
}

// diloco.inner_steps_schedule = "4:8,8:16" after a warm-up of 2 steps, then H = 16, P = 2:
// each phase's rounds fall where a run of its H would put them from step 1, counted from the
// phase's start (steps 2, 10, 26), so fragment 0 syncs at 6, 10 | 18, 26 | 42, ... and fragment 1
// (offset ⌊H/2⌋) at 4, 8 | 14, 22 | 34, 50. No round is missed or doubled at a change of H,
// every round lands before the fragment's next starts (τ = 1 < H/P in every phase), and an empty
// schedule is the constant-H schedule bit for bit.
TEST(Fragments, InnerStepsScheduleRunsEachPhaseFromItsStart) {
  DilocoConfig d;
  d.inner_steps = 16;
  d.fragments = 2;
  d.overlap_steps = 1;
  d.warmup_sync_steps = 2;
  d.inner_steps_schedule = "4:8,8:16";
  std::vector<uint64_t> due0, due1;
  for (uint64_t t = 1; t <= 60; ++t) {
    if (fragment_due(t, 0, d)) due0.push_back(t);
    if (fragment_due(t, 1, d)) due1.push_back(t);
    EXPECT_FALSE(fragment_due(t, 0, d) && fragment_due(t, 1, d)) << t;
  }
  EXPECT_EQ(due0, (std::vector<uint64_t>{6, 10, 18, 26, 42, 58}));
  EXPECT_EQ(due1, (std::vector<uint64_t>{4, 8, 14, 22, 34, 50}));
  EXPECT_EQ(inner_steps_at(1, d), 4);  // the warm-up's steps take the first phase's H
  EXPECT_EQ(inner_steps_at(10, d), 4);
  EXPECT_EQ(inner_steps_at(11, d), 8);
  EXPECT_EQ(inner_steps_at(26, d), 8);
  EXPECT_EQ(inner_steps_at(27, d), 16);
  // A round started at 10 (fragment 0, the first phase's last) is in flight at 10 only.
  EXPECT_TRUE(round_in_flight(10, d));
  EXPECT_FALSE(round_in_flight(11, d));
  d.inner_steps_schedule.clear();
  for (uint64_t t = 1; t <= 60; ++t)
    for (uint32_t p = 0; p < 2; ++p)
      EXPECT_EQ(fragment_due(t, p, d), t > 2 && fragment_due(t - 2, p, 16, 2)) << t << " " << p;
  EXPECT_EQ(inner_steps_at(5, d), 16);
}

// diloco.outer_lr_schedule = cosine: outer_lr for a round at the warm-up's end, outer_min_lr at
// the run's last step, their mean halfway; constant: outer_lr throughout.
TEST(Fragments, OuterLearningRateDecaysFromTheWarmUpsEnd) {
  DilocoConfig d;
  d.outer_lr = 0.8;
  d.outer_min_lr = 0.2;
  d.warmup_sync_steps = 100;
  EXPECT_DOUBLE_EQ(outer_lr_at(700, d, 1100), 0.8);  // constant
  d.outer_lr_schedule = Schedule::cosine;
  EXPECT_DOUBLE_EQ(outer_lr_at(50, d, 1100), 0.8);
  EXPECT_DOUBLE_EQ(outer_lr_at(100, d, 1100), 0.8);
  EXPECT_NEAR(outer_lr_at(600, d, 1100), 0.5, 1e-12);
  EXPECT_NEAR(outer_lr_at(350, d, 1100), 0.2 + 0.3 * (1 + std::cos(M_PI / 4)), 1e-12);
  EXPECT_DOUBLE_EQ(outer_lr_at(1100, d, 1100), 0.2);
  EXPECT_LT(outer_lr_at(601, d, 1100), outer_lr_at(600, d, 1100));
}

// A periodic checkpoint never lands while a Streaming round is in flight (started at t, merged
// with step t + τ): it moves to the step the merge lands in, so a run resumed from it repeats
// nothing half-done. H = 10, P = 2 (fragments due at 5, 10, 15, ...), τ = 2.
TEST(Fragments, CheckpointsWaitForRoundsInFlight) {
  DilocoConfig d;
  d.inner_steps = 10;
  d.fragments = 2;
  d.overlap_steps = 2;
  auto due = [&](int64_t every, bool streaming) {
    std::vector<uint64_t> out;
    for (uint64_t t = 1; t <= 30; ++t)
      if (checkpoint_due(t, every, d, streaming)) out.push_back(t);
    return out;
  };
  EXPECT_TRUE(round_in_flight(10, d) && round_in_flight(11, d) && !round_in_flight(12, d));
  EXPECT_EQ(due(10, true), (std::vector<uint64_t>{12, 22}));
  EXPECT_EQ(due(5, true), (std::vector<uint64_t>{7, 12, 17, 22, 27}));
  EXPECT_EQ(due(4, true), (std::vector<uint64_t>{4, 8, 12, 17, 22, 24, 28}));
  EXPECT_EQ(due(10, false), (std::vector<uint64_t>{10, 20, 30}));  // pp, swarm, ...: no rounds
  d.overlap_steps = 0;  // a round merges in the step it starts
  EXPECT_EQ(due(10, true), (std::vector<uint64_t>{10, 20, 30}));
  EXPECT_TRUE(due(0, true).empty());
}

namespace {

const Quantize kScaled[] = {Quantize::fp16, Quantize::int8, Quantize::int4, Quantize::fp4};

// Every value of x̂ = decode(encode(x)) within the derived bound of its block, and the wire
// exactly encoded_bytes long.
void expect_within_bound(const at::Tensor& x, Quantize q, int64_t block) {
  const auto wire = encode(x, q, block);
  ASSERT_EQ(static_cast<uint64_t>(wire.numel() * wire.element_size()),
            encoded_bytes(x.numel(), q, block));
  const auto y = decode(wire, q, block, x.sizes());
  ASSERT_EQ(y.sizes(), x.sizes());
  ASSERT_EQ(y.scalar_type(), at::kFloat);
  const auto xf = x.reshape({-1}).to(at::kDouble), yf = y.reshape({-1}).to(at::kDouble);
  const auto* xs = xf.data_ptr<double>();
  const auto* ys = yf.data_ptr<double>();
  const int64_t n = x.numel();
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    double m = 0;
    for (int64_t i = b0; i < std::min(n, b0 + block); ++i) m = std::max(m, std::abs(xs[i]));
    for (int64_t i = b0; i < std::min(n, b0 + block); ++i)
      ASSERT_LE(std::abs(xs[i] - ys[i]), error_bound(xs[i], m, q))
          << name_of(q) << " value " << i << ": " << xs[i] << " -> " << ys[i] << " (m " << m << ")";
  }
}

}  // namespace

TEST(Quantize, RoundTripWithinTheBlockwiseBound) {
  at::manual_seed(7);
  for (auto q : kScaled) {
    expect_within_bound(at::randn({1000}), q, 128);  // last block partial
    expect_within_bound(at::randn({33, 17}) * 1e-3, q, 64);
    expect_within_bound(at::randn({7}), q, 128);    // one short block, odd count
    expect_within_bound(at::zeros({256}), q, 128);  // m = 0: all zeros back
    auto outlier = at::randn({512}) * 1e-2;         // one huge value in one block
    outlier[300] = 3e30;
    expect_within_bound(outlier, q, 128);
    auto denormal = at::full({200}, std::numeric_limits<float>::denorm_min());
    denormal.narrow(0, 0, 100).mul_(-37);
    expect_within_bound(denormal, q, 128);
    expect_within_bound(at::full({64}, std::numeric_limits<float>::max()), q, 32);
  }
  // none is the float32 tensor itself.
  auto x = at::randn({5, 5});
  EXPECT_TRUE(at::equal(decode(encode(x, Quantize::none, 128), Quantize::none, 128, x.sizes()), x));
}

// The bound is tight where it should be: int4 of a block {m, m/14 + ε} rounds the second to 0
// or m/7 and errs by about m/14; zeros stay exactly zero.
TEST(Quantize, BoundsAreTightAndZerosExact) {
  auto x = at::tensor({7.0f, 0.49f, 0.0f, -7.0f});
  auto y = decode(encode(x, Quantize::int4, 4), Quantize::int4, 4, x.sizes());
  EXPECT_FLOAT_EQ(y[0].item<float>(), 7.0f);
  EXPECT_FLOAT_EQ(y[1].item<float>(), 0.0f);  // 0.49 < 0.5 = m/14
  EXPECT_FLOAT_EQ(y[2].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(y[3].item<float>(), -7.0f);
  auto f = at::tensor({6.0f, 5.0f, 0.7f, -0.2f});
  auto g = decode(encode(f, Quantize::fp4, 4), Quantize::fp4, 4, f.sizes());
  EXPECT_FLOAT_EQ(g[1].item<float>(), 4.0f);  // 5 is nearest 4 or 6: the tie goes to 4
  EXPECT_FLOAT_EQ(g[2].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(g[3].item<float>(), 0.0f);
}

// The wire sizes of the encodings, counted by hand: 1000 values in blocks of 128 (8 scales).
TEST(Quantize, BytesOfEachEncoding) {
  EXPECT_EQ(encoded_bytes(1000, Quantize::none, 128), 4000u);
  EXPECT_EQ(encoded_bytes(1000, Quantize::fp16, 128), 32u + 2000u);
  EXPECT_EQ(encoded_bytes(1000, Quantize::int8, 128), 32u + 1000u);
  EXPECT_EQ(encoded_bytes(1000, Quantize::int4, 128), 32u + 500u);
  EXPECT_EQ(encoded_bytes(1001, Quantize::fp4, 128), 32u + 501u);
}

// A NaN or Inf in a pseudo-gradient travels as a NaN or Inf scale, and the receiver refuses
// it by name; so does a wire tensor of the wrong size or dtype.
TEST(Quantize, NonFiniteAndMalformedWireRefused) {
  for (auto q : kScaled) {
    for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
      auto x = at::randn({300});
      x[200] = bad;
      const auto wire = encode(x, q, 128);
      try {
        decode(wire, q, 128, x.sizes());
        FAIL() << name_of(q) << " decoded a " << bad;
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("NaN, Inf"), std::string::npos) << e.what();
      }
    }
    const auto wire = encode(at::randn({300}), q, 128);
    EXPECT_THROW(decode(wire.narrow(0, 0, wire.numel() - 1), q, 128, {300}), std::invalid_argument);
    EXPECT_THROW(decode(wire.to(at::kFloat), q, 128, {300}), std::invalid_argument);
  }
}

// The eager pseudo-gradient: worker 1 of three, whose Δ the last round's mean held:
// Δ̃ = (Δ_1(r) + Δ_0(r−1) + Δ_2(r−1)) / 3, from the mean and its own last Δ; a worker that
// was not in the mean counts itself as one more; before any mean, the others' term is zero.
TEST(Eager, DeltaIsTheFreshOwnPlusTheOthersLastRound) {
  const auto named = [](float v) { return NamedTensors{{"w", at::full({2, 3}, v)}}; };
  const NamedTensors prev0 = named(1.0f), prev1 = named(2.0f), prev2 = named(6.0f);
  const NamedTensors mean = named(3.0f);  // (1 + 2 + 6) / 3
  const NamedTensors fresh = named(4.0f);
  auto tilde = eager_delta(fresh, &mean, 3, &prev1, 4);
  EXPECT_TRUE(at::allclose(tilde[0].second, at::full({2, 3}, (4.0f + 1.0f + 6.0f) / 3), 0, 1e-6));
  // Not in the last mean: the three others' sum over four workers.
  tilde = eager_delta(fresh, &mean, 3, nullptr, 4);
  EXPECT_TRUE(at::allclose(tilde[0].second, at::full({2, 3}, (4.0f + 9.0f) / 4), 0, 1e-6));
  // The first round: Δ_i / M with M the stage's workers.
  tilde = eager_delta(fresh, nullptr, 0, nullptr, 4);
  EXPECT_TRUE(at::allclose(tilde[0].second, at::full({2, 3}, 1.0f), 0, 1e-6));
  // One worker alone is plain DiLoCo: its own Δ.
  const NamedTensors alone = named(4.0f);
  tilde = eager_delta(fresh, &alone, 1, &alone, 1);
  EXPECT_TRUE(at::equal(tilde[0].second, fresh[0].second));
  // The inputs are left as they were, and mismatched tensors are refused.
  EXPECT_TRUE(at::equal(fresh[0].second, at::full({2, 3}, 4.0f)));
  const NamedTensors other{{"v", at::zeros({2, 3})}};
  EXPECT_THROW(eager_delta(fresh, &other, 3, nullptr, 4), std::invalid_argument);
  EXPECT_THROW(eager_delta(fresh, &mean, 0, nullptr, 4), std::invalid_argument);
}
