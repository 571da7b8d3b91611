// Sparse rounds (model/topk.hpp): each chunk keeps exactly its k largest magnitudes within the
// stated bound, the wire's size is the layout's, error feedback sends every value in time, the
// group's sparse updates keep every copy of θ equal, and a receiver refuses a wire whose size,
// header, ranges or indices are wrong before it builds anything from it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "config/config.hpp"
#include "model/outer_round.hpp"
#include "model/topk.hpp"
#include "policy/hop_choice.hpp"

using namespace swarmrt;

namespace {

at::Tensor seeded(int64_t n, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn({n}, gen, at::kFloat);
}

// A run of sparse rounds at `density` in chunks of `chunk`, `workers` workers, 100 steps, the
// plain mean as the outer step (lr 1, no momentum: the updates are the mean's exactly).
config::RunConfig sparse_run(double density, int64_t chunk, int64_t workers) {
  config::RunConfig c;
  c.diloco.outer_lr = 1.0;
  c.diloco.outer_momentum = 0.0;
  c.diloco.compress = config::Compress::topk;
  c.diloco.topk_density = density;
  c.diloco.topk_chunk = chunk;
  c.swarm.workers_per_stage = workers;
  c.train.steps = 100;
  return c;
}

std::string thrown(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// 5 full chunks of 64 and one of 17, 10%: 7 kept of each full chunk and 2 of the last, exactly
// the largest magnitudes (found here by sorting each chunk), each within (hi − lo)/(2(L − 1))
// of its value with its sign, every other value 0; for 2 and 4 bits.
TEST(TopK, KeepsEachChunksLargestWithinTheBound) {
  const int64_t n = 5 * 64 + 17;
  const auto x = seeded(n, 7);
  for (int bits : {2, 4}) {
    const model::TopK t{0.1, bits, 64};
    const auto y = model::decode_topk(model::encode_topk(x, t), t, {n});
    const auto* xs = x.data_ptr<float>();
    const auto* ys = y.data_ptr<float>();
    const double levels = std::pow(2.0, bits - 1);
    for (int64_t c = 0; c * 64 < n; ++c) {
      const int64_t begin = c * 64, len = std::min<int64_t>(64, n - begin);
      const int64_t k = model::topk_kept(len, 0.1);
      EXPECT_EQ(k, len == 64 ? 7 : 2);
      std::vector<int64_t> order(len);
      std::iota(order.begin(), order.end(), begin);
      std::sort(order.begin(), order.end(),
                [&](int64_t a, int64_t b) { return std::abs(xs[a]) > std::abs(xs[b]); });
      const double hi = std::abs(xs[order[0]]), lo = std::abs(xs[order[k - 1]]);
      const double bound = (hi - lo) / (2 * (levels - 1)) + 1e-6 * hi;
      for (int64_t r = 0; r < len; ++r) {
        const int64_t i = order[r];
        if (r < k) {
          EXPECT_LE(std::abs(ys[i] - xs[i]), bound) << "bits " << bits << " value " << i;
          EXPECT_EQ(ys[i] < 0, xs[i] < 0) << i;
          EXPECT_NE(ys[i], 0.0f) << i;
        } else {
          EXPECT_EQ(ys[i], 0.0f) << "bits " << bits << " value " << i << " is not in the top-k";
        }
      }
    }
  }
}

// The wire's bytes are the layout's: 24 of header, 8 per chunk, ⌈log2 chunk⌉ bits per index
// and `bits` per value. 10 chunks of 4096 at 1% and 2 bits: 41 kept each, 822 bytes, about
// 200x fewer than float32's 163,840; a tensor of one value and one of none encode too.
TEST(TopK, BytesAreTheLayouts) {
  const model::TopK t{0.01, 2, 4096};
  const int64_t n = 10 * 4096;
  EXPECT_EQ(model::topk_bytes(n, t), 24u + 80u + (410u * 12 + 7) / 8 + (410u * 2 + 7) / 8);
  EXPECT_EQ(model::topk_bytes(n, t), 822u);
  EXPECT_EQ(static_cast<uint64_t>(model::encode_topk(seeded(n, 1), t).numel()), 822u);
  EXPECT_GT(4.0 * n / model::topk_bytes(n, t), 199.0);
  const auto one = at::tensor({-2.5f});
  EXPECT_TRUE(at::equal(model::decode_topk(model::encode_topk(one, t), t, {1}), one));
  const auto none = at::zeros({0});
  EXPECT_EQ(model::decode_topk(model::encode_topk(none, t), t, {0}).numel(), 0);
  config::DilocoConfig d;
  d.compress = config::Compress::topk;
  d.topk_density = 0.01;
  EXPECT_EQ(model::round_bytes(n, d), 822u);
  EXPECT_EQ(d.encoding(), "topk 1% 2-bit");
  EXPECT_TRUE(d.encoded());
  EXPECT_FALSE(d.whole_rounds());
}

// Error feedback: a constant x sent 200 times at 10% density, each round adding what the last
// left out: the values are sent in turn, so the mean of what arrived is x to within a few
// hundredths of its largest value (without error feedback 9 in 10 values would never arrive).
TEST(TopK, ErrorFeedbackSendsEveryValueInTime) {
  const model::TopK t{0.1, 2, 64};
  const auto x = seeded(256, 3);
  auto residual = at::zeros_like(x), arrived = at::zeros_like(x);
  const int rounds = 200;
  for (int r = 0; r < rounds; ++r) {
    const auto v = x + residual;
    const auto sent = model::decode_topk(model::encode_topk(v, t), t, {256});
    residual = v - sent;
    arrived += sent;
  }
  const double largest = x.abs().max().item<double>();
  EXPECT_LT((arrived / rounds - x).abs().max().item<double>(), 0.05 * largest);
  // Every value of at least a tenth of the largest has arrived (the smallest may still wait).
  EXPECT_EQ((arrived.eq(0) & x.abs().ge(0.1 * largest)).sum().item<int64_t>(), 0);
}

// The group's sparse updates: θ(t) is θ(t−1) plus exactly what a worker decodes, round after
// round, and the group's error feedback keeps the decoded sum near the exact one.
TEST(TopK, SparseUpdatesKeepEveryCopyOfThetaEqual) {
  const auto c = sparse_run(0.25, 8, 2);
  model::OuterRound round({{"w", at::zeros({16})}}, c);
  auto worker = at::zeros({16}), exact = at::zeros({16});
  for (int r = 0; r < 30; ++r) {
    const model::NamedTensors a{{"w", seeded(16, 10 + r) * 0.1}},
        b{{"w", seeded(16, 50 + r) * 0.1}};
    const auto answer = round.apply({{0, a}, {1, b}}, 10 * (r + 1), false);
    ASSERT_TRUE(answer.update);
    EXPECT_EQ(static_cast<uint64_t>(answer.tensors[0].numel()), model::round_bytes(16, c.diloco));
    worker += model::decode_round(answer.tensors[0], c.diloco, {16});
    exact -= (a[0].second + b[0].second) / 2;
    EXPECT_TRUE(at::equal(worker, round.theta()[0].second)) << "round " << r;
  }
  // What is carried is at most a few rounds' updates, not 30 rounds' worth of dropped values.
  EXPECT_LT((worker - exact).abs().max().item<float>(), 0.5f);
  EXPECT_GT(exact.abs().max().item<float>(), 0.5f);
}

// Refused before anything is built from it, with the reason: a wire of another size, another
// header (magic, chunk, kept, values), a range that is NaN or reversed, an index past the end of
// its chunk; and a NaN sent is a NaN refused.
TEST(TopK, MalformedWireRefusedWithTheReason) {
  const model::TopK t{0.1, 4, 100};  // 7-bit indices: 100..127 are past a chunk's end
  const int64_t n = 250;
  const auto good = model::encode_topk(seeded(n, 5), t);
  auto broken = [&](auto edit) {
    auto w = good.clone();
    edit(w.data_ptr<uint8_t>());
    return thrown([&] { model::decode_topk(w, t, {n}); });
  };
  EXPECT_EQ(thrown([&] { model::decode_topk(good, t, {n}); }), "");
  EXPECT_NE(thrown([&] { model::decode_topk(good.narrow(0, 0, 40), t, {n}); }).find("top-k bytes"),
            std::string::npos);
  EXPECT_NE(broken([](uint8_t* p) { p[0] ^= 1; }).find("magic"), std::string::npos);
  EXPECT_NE(broken([](uint8_t* p) { p[8] = 64; }).find("chunk"), std::string::npos);
  EXPECT_NE(broken([](uint8_t* p) { p[12] = 9; }).find("kept per chunk"), std::string::npos);
  EXPECT_NE(broken([](uint8_t* p) { p[16] = 1; }).find("values"), std::string::npos);
  const float nan = std::numeric_limits<float>::quiet_NaN(), reversed[2] = {5.0f, 1.0f};
  EXPECT_NE(broken([&](uint8_t* p) { std::memcpy(p + 24, &nan, 4); }).find("range"),
            std::string::npos);
  EXPECT_NE(broken([&](uint8_t* p) { std::memcpy(p + 24, reversed, 8); }).find("reversed"),
            std::string::npos);
  // The first index of the first chunk: 7 bits at the start of the index bytes, set to 127.
  EXPECT_NE(broken([](uint8_t* p) { p[24 + 8 * 3] |= 127; }).find("past its chunk"),
            std::string::npos);
  auto x = seeded(n, 6);
  x[3].fill_(nan);
  const auto w = model::encode_topk(x, t);
  EXPECT_NE(thrown([&] { model::decode_topk(w, t, {n}); }).find("NaN"), std::string::npos);
  EXPECT_NE(thrown([&] { model::decode_topk(good, model::TopK{0.1, 2, 100}, {n}); }), "");
}

// swarm.compression = auto: a contribution at any rung of the density ladder decodes as a
// contribution of that density does, a count of kept values no rung keeps is refused naming
// the counts it may be, and without the ladder only diloco.topk_density's is taken.
TEST(TopK, ContributionsAtAnyRungOfTheLadderDecodeAsTheirDensity) {
  config::DilocoConfig d;
  d.compress = config::Compress::topk;
  d.topk_density = 0.01;
  d.topk_bits = 2;
  d.topk_chunk = 512;
  const auto ladder = policy::density_ladder(d.topk_density);
  ASSERT_EQ(ladder.size(), 4u);
  const int64_t n = 3 * 512 + 100;
  const auto x = seeded(n, 11);
  for (double density : ladder) {
    auto dk = d;
    dk.topk_density = density;
    const auto wire = model::encode_round(x, dk);
    const auto got = model::decode_round(wire, d, {n}, ladder);
    EXPECT_TRUE(at::equal(got, model::decode_round(wire, dk, {n}))) << density;
    // Each chunk keeps its count at that density.
    EXPECT_EQ(got.ne(0).sum().item<int64_t>(),
              3 * model::topk_kept(512, density) + model::topk_kept(100, density));
    if (density != d.topk_density) {
      EXPECT_NE(thrown([&] { model::decode_round(wire, d, {n}); }).find("top-k bytes"),
                std::string::npos);
    }
  }
  auto off = d;
  off.topk_density = 0.03;  // 16 of 512: no rung's (41, 21, 11, 6)
  const auto why =
      thrown([&] { model::decode_round(model::encode_round(x, off), d, {n}, ladder); });
  EXPECT_NE(why.find("kept per chunk 16, expected one of 41, 21, 11, 6"), std::string::npos) << why;
  EXPECT_NE(thrown([&] { model::decode_round(at::zeros({10}, at::kByte), d, {n}, ladder); }), "");
}

// Under auto the group reads each contribution's density from its header and answers the
// round as sparse as its sparsest contribution (an answer at the floor would hold back in the
// group's error feedback what denser contributions delivered); the answer decodes at that rung
// on the workers' side and θ moves by exactly what they decode. Without auto the answer stays
// at diloco.topk_density whatever density is passed.
TEST(TopK, AutoAnswersAtTheRoundsSparsestContributionsDensity) {
  auto c = sparse_run(0.02, 512, 2);
  c.swarm.compression = config::Compression::automatic;
  const auto ladder = model::round_densities(c);
  ASSERT_EQ(ladder, (std::vector<double>{0.16, 0.08, 0.04, 0.02}));
  const int64_t n = 4 * 512;
  const auto zero = at::zeros({n});
  model::OuterRound round({{"w", zero.clone()}}, c);
  // Worker 0 at 16%, worker 1 at 8%: the round's answer at 8%.
  std::map<uint32_t, model::NamedTensors> in;
  double sparsest = 0;
  for (uint32_t id : {0u, 1u}) {
    auto dk = c.diloco;
    dk.topk_density = ladder[id];
    model::NamedTensors delta;
    bool excuse = false;
    double density = 0;
    const auto wire = model::encode_round(seeded(n, 40 + id), dk);
    ASSERT_EQ(round.decode({"w"}, {wire}, delta, excuse, &density), "");
    EXPECT_EQ(density, ladder[id]);
    EXPECT_TRUE(at::equal(delta[0].second, model::decode_round(wire, dk, {n})));
    sparsest = id == 0 ? density : std::min(sparsest, density);
    in[id] = delta;
  }
  const auto answer = round.apply(in, 10, false, sparsest);
  ASSERT_TRUE(answer.update);
  double got = 0;
  const auto update = model::decode_round(answer.tensors[0], c.diloco, {n}, ladder, &got);
  EXPECT_EQ(got, 0.08);
  EXPECT_EQ(update.ne(0).sum().item<int64_t>(), 4 * model::topk_kept(512, 0.08));
  EXPECT_TRUE(at::equal(round.theta()[0].second, zero + update));
  // The floor's single-density decoder refuses it: the workers need the ladder too.
  EXPECT_NE(thrown([&] { model::decode_round(answer.tensors[0], c.diloco, {n}); }), "");

  c.swarm.compression = config::Compression::fixed;
  model::OuterRound fixed({{"w", zero.clone()}}, c);
  const auto plain = fixed.apply(in, 10, false, 0.08);
  EXPECT_EQ(model::decode_round(plain.tensors[0], c.diloco, {n}).ne(0).sum().item<int64_t>(),
            4 * model::topk_kept(512, 0.02));
}

// A group restored with θ, the momentum and the error feedback answers the next round with the
// same bytes as the group it stands in for; restored without the error feedback it does not.
TEST(TopK, ARestoredGroupAnswersAsItsPredecessorWould) {
  auto c = sparse_run(0.25, 8, 1);
  c.diloco.outer_lr = config::DilocoConfig{}.outer_lr;  // with momentum to restore
  c.diloco.outer_momentum = config::DilocoConfig{}.outer_momentum;
  model::OuterRound first({{"w", at::zeros({16})}}, c);
  for (int r = 0; r < 4; ++r) first.apply({{0, {{"w", seeded(16, 20 + r)}}}}, 10 * (r + 1), false);
  ASSERT_EQ(first.residual().size(), 1u);
  auto clone = [](const model::NamedTensors& n) {
    model::NamedTensors out;
    for (const auto& [name, t] : n) out.emplace_back(name, t.clone());
    return out;
  };
  model::OuterRound restored(clone(first.theta()), c), forgetful(clone(first.theta()), c);
  restored.restore(clone(first.theta()), clone(first.momentum()), clone(first.residual()));
  forgetful.restore(clone(first.theta()), clone(first.momentum()));
  const model::NamedTensors next{{"w", seeded(16, 99)}};
  const auto want = first.apply({{0, next}}, 50, false);
  EXPECT_TRUE(at::equal(restored.apply({{0, next}}, 50, false).tensors[0], want.tensors[0]));
  EXPECT_FALSE(at::equal(forgetful.apply({{0, next}}, 50, false).tensors[0], want.tensors[0]));
}
