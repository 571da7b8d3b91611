// Hop encodings: each one's error within its bound, its wire size, and refusals.
#include <gtest/gtest.h>
#include <cmath>

#include "model/hop_codec.hpp"
#include "model/hop_entropy.hpp"
#include "model/quantize.hpp"

using namespace swarmrt::model;
using namespace swarmrt::config;

namespace {
constexpr int64_t kBlock = 128;
constexpr auto kForward = HopDirection::forward;
constexpr auto kBackward = HopDirection::backward;

// Hidden-state-like values: mostly N(0, 1), one large outlier per 512 values (as residual
// streams have), drawn from a seeded generator.
at::Tensor hidden(int64_t B, int64_t T, int64_t d, uint64_t seed) {
  at::manual_seed(seed);
  auto x = at::randn({B, T, d});
  x.view({-1}).slice(0, 0, x.numel(), 512).mul_(40);
  return x;
}

// Per block of `block` values: its largest magnitude.
at::Tensor block_max(const at::Tensor& flat, int64_t block) {
  const int64_t n = flat.numel(), nb = (n + block - 1) / block;
  auto padded = at::zeros({nb * block});
  padded.narrow(0, 0, n).copy_(flat);
  return padded.view({nb, block}).abs().amax(1);
}
}  // namespace

TEST(HopCodec, NoneIsTheTensorItselfAndBf16RoundsToEightBits) {
  auto x = hidden(2, 16, 64, 1);
  auto none = encode_hop(x, HopEncoding::none, kBlock, kForward, 0);
  EXPECT_TRUE(
      at::equal(decode_hop(none, HopEncoding::none, kBlock, kForward, x.sizes(), at::kFloat), x));
  auto wire = encode_hop(x, HopEncoding::bf16, kBlock, kForward, 0);
  EXPECT_EQ(wire.scalar_type(), at::kBFloat16);
  auto back = decode_hop(wire, HopEncoding::bf16, kBlock, kForward, x.sizes(), at::kFloat);
  // Round to nearest with 8 significant bits: |x − x̂| ≤ 2⁻⁸|x|.
  EXPECT_TRUE((back - x).abs().le(x.abs() * std::ldexp(1.0, -8)).all().item<bool>());
  EXPECT_FALSE(at::equal(back, x));
}

TEST(HopCodec, Int8StaysWithinItsBlockBoundAndQuartersTheBytes) {
  auto x = hidden(2, 16, 64, 2);
  auto wire = encode_hop(x, HopEncoding::int8, kBlock, kForward, 0);
  const int64_t n = x.numel(), blocks = n / kBlock;
  EXPECT_EQ(wire.numel(), n + 4 * blocks);  // a code a value, a float32 scale a block
  EXPECT_LE(static_cast<double>(wire.numel()) / (4.0 * n), 0.26);
  auto back = decode_hop(wire, HopEncoding::int8, kBlock, kForward, x.sizes(), at::kFloat);
  auto err = (back - x).abs().view({blocks, kBlock});
  auto m = block_max(x.view({-1}), kBlock);
  for (int64_t b = 0; b < blocks; ++b)
    EXPECT_LE(err[b].max().item<double>(), error_bound(0, m[b].item<double>(), Quantize::int8))
        << "block " << b;
}

TEST(HopCodec, HadamardIsOrthonormal) {
  for (int64_t n : {1, 2, 16, 128}) {
    auto h = hadamard(n);
    EXPECT_TRUE(at::allclose(at::matmul(h, h), at::eye(n), 0, 1e-6)) << n;
    EXPECT_TRUE(at::equal(h, h.t())) << n;
  }
  EXPECT_THROW(hadamard(12), std::invalid_argument);
}

// int4 after the rotation: per block, ‖x − x̂‖₂ ≤ √block · m′/14 with m′ the rotated block's
// largest magnitude (the rotation preserves the error's norm). And the rotation is why int4
// is usable: with outliers, plain int4's error is several times larger.
TEST(HopCodec, Int4RotatedStaysWithinItsBoundAndBeatsPlainInt4OnOutliers) {
  auto x = hidden(4, 32, 64, 3);
  const int64_t n = x.numel(), blocks = n / kBlock;
  auto wire = encode_hop(x, HopEncoding::int4, kBlock, kForward, 0);
  EXPECT_EQ(wire.numel(), n / 2 + 4 * blocks);
  EXPECT_LE(static_cast<double>(wire.numel()) / (4.0 * n), 0.14);
  auto back = decode_hop(wire, HopEncoding::int4, kBlock, kForward, x.sizes(), at::kFloat);
  auto rotated = at::matmul(x.view({blocks, kBlock}), hadamard(kBlock));
  auto m = rotated.abs().amax(1);
  auto err = (back - x).view({blocks, kBlock}).norm(2, 1);
  for (int64_t b = 0; b < blocks; ++b)
    EXPECT_LE(err[b].item<double>(), std::sqrt(static_cast<double>(kBlock)) *
                                         error_bound(0, m[b].item<double>(), Quantize::int4))
        << "block " << b;
  auto plain = decode(encode(x, Quantize::int4, kBlock), Quantize::int4, kBlock, x.sizes());
  const double rotated_err = (back - x).norm().item<double>();
  const double plain_err = (plain - x).norm().item<double>();
  EXPECT_LT(rotated_err * 2, plain_err) << "rotated " << rotated_err << " plain " << plain_err;
}

TEST(HopCodec, ABf16ComputeDtypeIsKeptAndMalformedWiresAreRefused) {
  auto x = hidden(2, 8, 32, 4).to(at::kBFloat16);
  for (auto e : {HopEncoding::none, HopEncoding::bf16, HopEncoding::int8, HopEncoding::int4,
                 HopEncoding::int5_3}) {
    auto back = decode_hop(encode_hop(x, e, kBlock, kForward, 0), e, kBlock, kForward, x.sizes(),
                           at::kBFloat16);
    EXPECT_EQ(back.scalar_type(), at::kBFloat16) << name_of(e);
    EXPECT_TRUE(back.sizes().equals(x.sizes())) << name_of(e);
  }
  auto wire = encode_hop(x, HopEncoding::int8, kBlock, kForward, 0);
  EXPECT_THROW(decode_hop(wire.narrow(0, 0, wire.numel() - 1), HopEncoding::int8, kBlock, kForward,
                          x.sizes(), at::kBFloat16),
               std::invalid_argument);
  EXPECT_THROW(decode_hop(x, HopEncoding::int8, kBlock, kForward, x.sizes(), at::kBFloat16),
               std::invalid_argument);  // not the uint8 an int8 hop carries
  EXPECT_THROW(
      decode_hop(x.to(at::kFloat), HopEncoding::bf16, kBlock, kForward, x.sizes(), at::kBFloat16),
      std::invalid_argument);
  auto nan = x.to(at::kFloat);
  nan[0][0][0] = NAN;
  EXPECT_THROW(decode_hop(encode_hop(nan, HopEncoding::int8, kBlock, kForward, 0),
                          HopEncoding::int8, kBlock, kForward, x.sizes(), at::kFloat),
               std::invalid_argument);
}

// Gradients backward round stochastically: each draw stays within √block · m′/7 per rotated
// block (one int4 step, not half of one), the same seed gives the same wire and another seed
// another, and over many seeds the mean comes to x, where rounding to nearest keeps its error
// however often it is repeated (the bias that cost int4 gradients 0.89% of validation loss
// over 800 steps, model/hop_codec.hpp).
TEST(HopCodec, Int4GradientsRoundStochasticallyAndWithoutBias) {
  auto x = hidden(2, 16, 64, 5);
  const int64_t n = x.numel(), blocks = n / kBlock;
  auto rotated = at::matmul(x.view({blocks, kBlock}), hadamard(kBlock));
  auto m = rotated.abs().amax(1);
  const auto nearest = decode_hop(encode_hop(x, HopEncoding::int4, kBlock, kForward, 0),
                                  HopEncoding::int4, kBlock, kForward, x.sizes(), at::kFloat);
  auto sum = at::zeros_like(x, at::kDouble);
  const int draws = 400;
  for (int seed = 1; seed <= draws; ++seed) {
    auto wire = encode_hop(x, HopEncoding::int4, kBlock, kBackward, seed);
    EXPECT_EQ(wire.numel(), n / 2 + 4 * blocks);  // int4's bytes either way
    auto back = decode_hop(wire, HopEncoding::int4, kBlock, kBackward, x.sizes(), at::kFloat);
    auto err = (back - x).view({blocks, kBlock}).norm(2, 1);
    for (int64_t b = 0; b < blocks; ++b)
      ASSERT_LT(err[b].item<double>(),
                std::sqrt(static_cast<double>(kBlock)) * (m[b].item<double>() / 7 + 1e-5))
          << "seed " << seed << " block " << b;
    sum += back.to(at::kDouble);
    if (seed == 1) {
      EXPECT_TRUE(at::equal(wire, encode_hop(x, HopEncoding::int4, kBlock, kBackward, 1)));
      EXPECT_FALSE(at::equal(wire, encode_hop(x, HopEncoding::int4, kBlock, kBackward, 2)));
    }
  }
  const double mean_err = (sum / draws - x.to(at::kDouble)).norm().item<double>();
  const double nearest_err = (nearest - x).norm().item<double>();
  // The mean of 400 draws errs by about 1/20 of one draw: well under a third of nearest's.
  EXPECT_LT(mean_err * 3, nearest_err) << "mean " << mean_err << " nearest " << nearest_err;
}

// int5/3: 5 bits forward and 3 backward, int4's bytes over the pair; each direction within
// its bound, and a wire decoded as the other direction is refused (its size is not that one's).
TEST(HopCodec, Int53SpendsInt4sBytesFiveBitsForwardAndThreeBack) {
  auto x = hidden(4, 32, 64, 6);
  const int64_t n = x.numel(), blocks = n / kBlock;
  auto rotated = at::matmul(x.view({blocks, kBlock}), hadamard(kBlock));
  auto m = rotated.abs().amax(1);
  auto forward = encode_hop(x, HopEncoding::int5_3, kBlock, kForward, 0);
  auto backward = encode_hop(x, HopEncoding::int5_3, kBlock, kBackward, 9);
  EXPECT_EQ(forward.numel(), 5 * n / 8 + 4 * blocks);
  EXPECT_EQ(backward.numel(), 3 * n / 8 + 4 * blocks);
  EXPECT_EQ(forward.numel() + backward.numel(),
            2 * encode_hop(x, HopEncoding::int4, kBlock, kForward, 0).numel());
  const std::pair<HopDirection, double> sides[] = {{kForward, 30}, {kBackward, 3}};
  for (const auto& [d, per_m] : sides) {
    const auto& wire = d == kForward ? forward : backward;
    auto back = decode_hop(wire, HopEncoding::int5_3, kBlock, d, x.sizes(), at::kFloat);
    auto err = (back - x).view({blocks, kBlock}).norm(2, 1);
    for (int64_t b = 0; b < blocks; ++b)
      EXPECT_LE(err[b].item<double>(),
                std::sqrt(static_cast<double>(kBlock)) * (m[b].item<double>() / per_m + 1e-5))
          << (d == kForward ? "forward" : "backward") << " block " << b;
  }
  EXPECT_THROW(decode_hop(forward, HopEncoding::int5_3, kBlock, kBackward, x.sizes(), at::kFloat),
               std::invalid_argument);
  EXPECT_THROW(decode_hop(backward, HopEncoding::int5_3, kBlock, kForward, x.sizes(), at::kFloat),
               std::invalid_argument);
}

// Why a block must stay inside one position (config/values.cpp refuses hop_block that does not
// divide model.n_embd): with blocks of 256 over positions of 128 values, changing the second
// position's values changes the first position's decoded hop; with blocks of 128 it does not.
TEST(HopCodec, ABlockSpanningTwoPositionsLeaksTheLaterIntoTheEarlier) {
  auto x = hidden(1, 2, 128, 12);
  auto later = x.clone();
  later[0][1] *= 3;
  for (auto e : {HopEncoding::int8, HopEncoding::int4, HopEncoding::int3}) {
    const auto first = [&](const at::Tensor& t, int64_t block) {
      return decode_hop(encode_hop(t, e, block, kForward, 0), e, block, kForward, t.sizes(),
                        at::kFloat)[0][0];
    };
    EXPECT_TRUE(at::equal(first(x, 128), first(later, 128))) << name_of(e);
    EXPECT_FALSE(at::equal(first(x, 256), first(later, 256))) << name_of(e);
  }
}

// int3: 3 bits both ways, at a block of 256 more than 10x fewer bytes than float32; each
// direction within its bound (half a step forward, a step back, L = 3 levels a side).
TEST(HopCodec, Int3IsTenTimesSmallerThanFloat32AndWithinItsBounds) {
  constexpr int64_t kBig = 256;
  auto x = hidden(4, 32, 64, 11);
  const int64_t n = x.numel(), blocks = n / kBig;
  auto rotated = at::matmul(x.view({blocks, kBig}), hadamard(kBig));
  auto m = rotated.abs().amax(1);
  const std::pair<HopDirection, double> sides[] = {{kForward, 6}, {kBackward, 3}};
  for (const auto& [d, per_m] : sides) {
    auto wire = encode_hop(x, HopEncoding::int3, kBig, d, 7);
    EXPECT_EQ(wire.numel(), 3 * n / 8 + 4 * blocks);
    EXPECT_GE(4.0 * n / wire.numel(), 10.0);
    auto back = decode_hop(wire, HopEncoding::int3, kBig, d, x.sizes(), at::kFloat);
    auto err = (back - x).view({blocks, kBig}).norm(2, 1);
    for (int64_t b = 0; b < blocks; ++b)
      EXPECT_LE(err[b].item<double>(),
                std::sqrt(static_cast<double>(kBig)) * (m[b].item<double>() / per_m + 1e-5))
          << (d == kForward ? "forward" : "backward") << " block " << b;
    // Not a copy of x: 3 bits lose more than int4 does (its forward error is at most m′/14).
    EXPECT_GT((back - x).norm().item<double>(),
              (decode_hop(encode_hop(x, HopEncoding::int4, kBig, kForward, 0), HopEncoding::int4,
                          kBig, kForward, x.sizes(), at::kFloat) -
               x)
                  .norm()
                  .item<double>());
  }
  // A wire of another block size is refused by its size.
  EXPECT_THROW(decode_hop(encode_hop(x, HopEncoding::int3, kBlock, kForward, 0), HopEncoding::int3,
                          kBig, kForward, x.sizes(), at::kFloat),
               std::invalid_argument);
}

// The uniform codes under the hop encodings, at every width: within half a step of x rounded to
// nearest (m/2L, L = 2^(bits−1) − 1), within one step stochastically, in ⌈n·bits/8⌉ bytes after
// the scales; and 4 and 8 bits are int4's and int8's wires byte for byte (Streaming DiLoCo's
// receivers read them), the first 4-bit code in the low nibble.
TEST(HopCodec, UniformCodesOfEveryWidth) {
  at::manual_seed(8);
  auto x = at::randn({1001});
  const int64_t block = 128, nb = 8;
  auto m = block_max(x, block);
  for (int bits = 2; bits <= 8; ++bits) {
    const double L = (1 << (bits - 1)) - 1;
    for (bool stochastic : {false, true}) {
      auto wire = stochastic ? encode_bits(x, bits, block, 17) : encode_bits(x, bits, block);
      ASSERT_EQ(wire.numel(), 4 * nb + (1001 * bits + 7) / 8) << bits;
      EXPECT_EQ(static_cast<uint64_t>(wire.numel()), bits_bytes(1001, bits, block));
      auto back = decode_bits(wire, bits, block, x.sizes());
      for (int64_t i = 0; i < 1001; ++i) {
        const double step = m[i / block].item<double>() / L;
        ASSERT_LE(std::abs(back[i].item<double>() - x[i].item<double>()),
                  (stochastic ? step : step / 2) + 1e-6)
            << bits << " bits, value " << i << (stochastic ? ", stochastic" : "");
      }
    }
  }
  EXPECT_TRUE(at::equal(encode_bits(x, 4, block), encode(x, Quantize::int4, block)));
  EXPECT_TRUE(at::equal(encode_bits(x, 8, block), encode(x, Quantize::int8, block)));
  auto four = encode_bits(at::tensor({7.0f, -7.0f, 0.0f, 1.0f}), 4, 4);
  ASSERT_EQ(four.numel(), 4 + 2);
  EXPECT_EQ(four[4].item<int>(), 15 | (1 << 4));  // codes 15 (7) and 1 (−7)
  EXPECT_EQ(four[5].item<int>(), 8 | (9 << 4));   // codes 8 (0) and 9 (1)
  EXPECT_THROW(encode_bits(x, 9, block), std::invalid_argument);
  EXPECT_THROW(decode_bits(encode_bits(x, 5, block), 3, block, x.sizes()), std::invalid_argument);
}

// The hop codecs compute in float32 on the tensor's device where they once computed in double
// on the host (model/quantize.hpp's encode_bits, which DiLoCo's rounds still use). Same format:
// the scales are the same bytes, and the old decoder reads the new wire to within float32
// rounding of the new decoder. A code may land one step away where x·L/m sits on a rounding
// boundary in one precision and not the other: rarely (under 0.1% of values here).
TEST(HopCodec, Float32CodecsWriteTheDoublePathsWire) {
  auto x = hidden(4, 32, 64, 10);
  const int64_t n = x.numel(), nb = n / kBlock;
  auto blocks = x.view({nb, kBlock});
  const std::tuple<HopEncoding, int, at::Tensor> cases[] = {
      {HopEncoding::int8, 8, x.reshape({-1})},
      {HopEncoding::int4, 4, at::matmul(blocks, hadamard(kBlock)).reshape({-1})},
      {HopEncoding::int5_3, 5, at::matmul(blocks, hadamard(kBlock)).reshape({-1})},
      {HopEncoding::int3, 3, at::matmul(blocks, hadamard(kBlock)).reshape({-1})}};
  for (const auto& [e, bits, coded] : cases) {
    auto wire = encode_hop(x, e, kBlock, kForward, 0);
    auto old = encode_bits(coded, bits, kBlock);
    ASSERT_EQ(wire.numel(), old.numel()) << name_of(e);
    EXPECT_TRUE(at::equal(wire.narrow(0, 0, 4 * nb), old.narrow(0, 0, 4 * nb))) << name_of(e);
    auto codes = unpack_codes(wire.narrow(0, 4 * nb, wire.numel() - 4 * nb), bits, n);
    auto old_codes = unpack_codes(old.narrow(0, 4 * nb, old.numel() - 4 * nb), bits, n);
    EXPECT_LE((codes - old_codes).abs().max().item<int64_t>(), 1) << name_of(e);
    EXPECT_LT(codes.ne(old_codes).sum().item<int64_t>(), n / 1000 + 1) << name_of(e);
    auto read_old = decode_bits(wire, bits, kBlock, {n});
    auto read_new = decode_hop(wire, e, kBlock, kForward, x.sizes(), at::kFloat).reshape({-1});
    if (e == HopEncoding::int8)
      EXPECT_TRUE(at::allclose(read_new, read_old, 1e-6, 1e-6)) << name_of(e);
    else  // the old decoder leaves the values rotated
      EXPECT_TRUE(at::allclose(
          read_new, at::matmul(read_old.view({nb, kBlock}), hadamard(kBlock)).reshape({-1}), 1e-5,
          1e-5))
          << name_of(e);
  }
}

// A wire is checked for its size and dtype always, and for its scales unless the worker says it
// encoded the wire itself on a device (reading them would wait for the device): a NaN scale is
// then decoded as NaN, as a `none` hop would carry it. Scales of a denormal block survive the
// float32 path.
TEST(HopCodec, ValuesAreCheckedUnlessTheWorkerSkipsThem) {
  auto x = hidden(2, 8, 32, 11);
  auto nan = x.clone();
  nan[0][0][0] = NAN;
  for (auto e : {HopEncoding::int8, HopEncoding::int4}) {
    auto wire = encode_hop(nan, e, kBlock, kForward, 0);
    EXPECT_THROW(check_hop(wire, e, kBlock, kForward, x.sizes(), at::kFloat, true),
                 std::invalid_argument)
        << name_of(e);
    EXPECT_NO_THROW(check_hop(wire, e, kBlock, kForward, x.sizes(), at::kFloat, false))
        << name_of(e);
    auto back = decode_hop(wire, e, kBlock, kForward, x.sizes(), at::kFloat, false);
    EXPECT_TRUE(back.isnan().any().item<bool>()) << name_of(e);
    EXPECT_THROW(decode_hop(wire.narrow(0, 0, wire.numel() - 1), e, kBlock, kForward, x.sizes(),
                            at::kFloat, false),
                 std::invalid_argument)
        << name_of(e);
  }
  auto tiny = x * 1e-41;  // float32 denormals
  auto back = decode_hop(encode_hop(tiny, HopEncoding::int8, kBlock, kForward, 0),
                         HopEncoding::int8, kBlock, kForward, x.sizes(), at::kFloat);
  EXPECT_TRUE(at::isfinite(back).all().item<bool>());
  EXPECT_EQ(hop_wire_bytes(HopEncoding::int8, kBlock, kForward, x.sizes(), at::kFloat),
            static_cast<uint64_t>(encode_hop(x, HopEncoding::int8, kBlock, kForward, 0).numel()));
  EXPECT_EQ(hop_wire_bytes(HopEncoding::none, kBlock, kForward, x.sizes(), at::kBFloat16),
            static_cast<uint64_t>(2 * x.numel()));
}

// int4/2: 4 bits forward, 2 back on a midrise grid (±m/3, ±m), each block's scale a bfloat16
// rounded up: over the pair 10.2x fewer bytes than float32. The scale is never below the
// block's largest magnitude (no value clips) and within one bfloat16 step of it; forward stays
// within int4's bound, each gradient value within one step (2m/3) of itself, and gradients
// come to x in expectation with all four codes in use.
TEST(HopCodec, Int42SendsFourBitsForwardTwoBackAndBf16Scales) {
  auto x = hidden(4, 32, 64, 13);
  const int64_t n = x.numel(), blocks = n / kBlock;
  auto rotated = at::matmul(x.view({blocks, kBlock}), hadamard(kBlock));
  auto m = rotated.abs().amax(1);
  auto forward = encode_hop(x, HopEncoding::int4_2, kBlock, kForward, 0);
  EXPECT_EQ(forward.numel(), n / 2 + 2 * blocks);
  EXPECT_EQ(encode_hop(x, HopEncoding::int4_2, kBlock, kBackward, 1).numel(), n / 4 + 2 * blocks);
  EXPECT_LT((n / 2 + n / 4 + 4.0 * blocks) / (2 * 4.0 * n), 0.1);
  auto scales = forward.narrow(0, 0, 2 * blocks).clone().view(at::kBFloat16).to(at::kFloat);
  EXPECT_TRUE(scales.ge(m).all().item<bool>());
  EXPECT_TRUE(scales.le(m * (1 + std::ldexp(1.0, -7))).all().item<bool>());
  auto back = decode_hop(forward, HopEncoding::int4_2, kBlock, kForward, x.sizes(), at::kFloat);
  auto err = (back - x).view({blocks, kBlock}).norm(2, 1);
  for (int64_t b = 0; b < blocks; ++b)
    EXPECT_LE(err[b].item<double>(),
              std::sqrt(static_cast<double>(kBlock)) * (scales[b].item<double>() / 14 + 1e-5))
        << "block " << b;
  auto sum = at::zeros_like(x, at::kDouble);
  const int draws = 400;
  double one_draw = 0;
  for (int seed = 1; seed <= draws; ++seed) {
    auto wire = encode_hop(x, HopEncoding::int4_2, kBlock, kBackward, seed);
    auto grad = decode_hop(wire, HopEncoding::int4_2, kBlock, kBackward, x.sizes(), at::kFloat);
    auto step = (scales * 2 / 3).unsqueeze(1);
    auto rotated_err = at::matmul((grad - x).view({blocks, kBlock}), hadamard(kBlock)).abs();
    ASSERT_TRUE(rotated_err.le(step + 1e-5).all().item<bool>()) << "seed " << seed;
    if (seed == 1) {
      auto codes = unpack_codes(wire.narrow(0, 2 * blocks, n / 4), 2, n);
      for (int c = 0; c < 4; ++c) EXPECT_GT(codes.eq(c).sum().item<int64_t>(), n / 20) << c;
      one_draw = (grad - x).norm().item<double>();
    }
    sum += grad.to(at::kDouble);
  }
  // 400 draws: the mean errs by about 1/20 of one draw.
  EXPECT_LT((sum / draws - x.to(at::kDouble)).norm().item<double>() * 5, one_draw);
  EXPECT_THROW(decode_hop(forward, HopEncoding::int4_2, kBlock, kBackward, x.sizes(), at::kFloat),
               std::invalid_argument);
  auto nan = x.clone();
  nan[0][0][0] = NAN;
  EXPECT_THROW(decode_hop(encode_hop(nan, HopEncoding::int4_2, kBlock, kBackward, 3),
                          HopEncoding::int4_2, kBlock, kBackward, x.sizes(), at::kFloat),
               std::invalid_argument);
}

// entropy: each rotated block in steps of a share of its RMS (0.25 forward, rounded to
// nearest; 1.25 back, stochastically), Huffman-coded (zlib). Forward within half a step of each
// rotated value; gradients within a step and right in expectation; each wire within 6% of its
// codes' entropy (its size depends on the values: on the tiny model's hops both ways together are
// 10.1x fewer bytes than float32, docs/hops.md).
TEST(HopCodec, EntropyCodesStepsOfEachBlocksRmsNearTheirEntropy) {
  auto x = hidden(4, 32, 128, 14);
  const int64_t n = x.numel(), blocks = n / kBlock;
  auto rotated = at::matmul(x.view({blocks, kBlock}), hadamard(kBlock));
  auto rms = rotated.square().mean(1).sqrt();
  auto forward = encode_hop(x, HopEncoding::entropy, kBlock, kForward, 0);
  auto scales = forward.narrow(0, 0, 2 * blocks).clone().view(at::kBFloat16).to(at::kFloat);
  EXPECT_TRUE(at::allclose(scales, rms, std::ldexp(1.0, -8), 0));
  auto back = decode_hop(forward, HopEncoding::entropy, kBlock, kForward, x.sizes(), at::kFloat);
  auto err = at::matmul((back - x).view({blocks, kBlock}), hadamard(kBlock)).abs();
  EXPECT_TRUE(err.le((scales * 0.125).unsqueeze(1) + 1e-5).all().item<bool>());
  auto backward = encode_hop(x, HopEncoding::entropy, kBlock, kBackward, 1);
  // Huffman codes spend within 6% of the codes' entropy (−Σ p log₂ p over their frequencies),
  // plus the frame's header, table and checksum.
  for (const auto& wire : {forward, backward}) {
    const auto counts =
        at::bincount(unpack_entropy(wire, blocks, kBlock).second.to(at::kLong)).to(at::kDouble);
    const auto p = counts.index({counts > 0}) / static_cast<double>(n);
    const double entropy_bytes = -(p * p.log2()).sum().item<double>() * n / 8;
    const double frame = static_cast<double>(wire.numel() - 2 * blocks);
    EXPECT_LE(frame, 1.06 * entropy_bytes + 64) << frame << " bytes, entropy " << entropy_bytes;
    EXPECT_GE(frame, entropy_bytes);
  }
  EXPECT_LE(static_cast<uint64_t>(forward.numel()),
            hop_wire_bytes(HopEncoding::entropy, kBlock, kForward, x.sizes(), at::kFloat));
  auto sum = at::zeros_like(x, at::kDouble);
  const int draws = 200;
  double one_draw = 0;
  for (int seed = 1; seed <= draws; ++seed) {
    auto wire = encode_hop(x, HopEncoding::entropy, kBlock, kBackward, seed);
    auto grad = decode_hop(wire, HopEncoding::entropy, kBlock, kBackward, x.sizes(), at::kFloat);
    auto e = at::matmul((grad - x).view({blocks, kBlock}), hadamard(kBlock)).abs();
    ASSERT_TRUE(e.le(scales.unsqueeze(1) * 1.25 + 1e-5).all().item<bool>()) << "seed " << seed;
    if (seed == 1) {
      one_draw = (grad - x).norm().item<double>();
      EXPECT_TRUE(at::equal(wire, backward));
    }
    sum += grad.to(at::kDouble);
  }
  // 200 draws: the mean errs by about 1/14 of one draw.
  EXPECT_LT((sum / draws - x.to(at::kDouble)).norm().item<double>() * 5, one_draw);
}

// Decoding onto a given device (the worker's) computes what decoding on the wire's does: here
// the host's, bit for bit, for every encoding (tests/gpu checks an entropy wire onto a GPU).
TEST(HopCodec, DecodesOntoTheGivenDeviceAsOnTheWires) {
  auto x = hidden(2, 16, 128, 21);
  for (auto e : {HopEncoding::bf16, HopEncoding::int8, HopEncoding::int4, HopEncoding::entropy}) {
    const auto wire = encode_hop(x, e, kBlock, kForward, 0);
    const auto here = decode_hop(wire, e, kBlock, kForward, x.sizes(), at::kFloat);
    const auto onto =
        decode_hop(wire, e, kBlock, kForward, x.sizes(), at::kFloat, true, at::Device(at::kCPU));
    EXPECT_TRUE(at::equal(here, onto)) << name_of(e);
  }
}

// An entropy wire is checked before anything is built from it: its dtype, its size against
// the bound, a frame holding more or fewer values than the shape, a corrupt frame, and the scales.
TEST(HopCodec, MalformedEntropyWiresAreRefusedWithTheReason) {
  auto x = hidden(2, 16, 128, 15);
  const int64_t blocks = x.numel() / kBlock;
  const auto wire = encode_hop(x, HopEncoding::entropy, kBlock, kForward, 0);
  const auto refused = [&](const at::Tensor& w, at::IntArrayRef shape) -> std::string {
    try {
      decode_hop(w, HopEncoding::entropy, kBlock, kForward, shape, at::kFloat);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(refused(wire, x.sizes()), "");
  EXPECT_NE(refused(wire.narrow(0, 0, wire.numel() - 1), x.sizes()), "");
  EXPECT_NE(refused(wire.narrow(0, 0, 2 * blocks), x.sizes()).find("bytes"), std::string::npos);
  EXPECT_NE(refused(wire.to(at::kChar), x.sizes()).find("carries"), std::string::npos);
  EXPECT_NE(refused(wire, {4, 16, 128}), "");  // other blocks: the frame starts elsewhere
  const auto ones = at::ones({blocks});
  const auto short_codes = at::full({x.numel() - 5}, 128, at::kByte);
  EXPECT_NE(refused(pack_entropy(ones, short_codes), x.sizes()).find("the shape needs"),
            std::string::npos);
  const auto long_codes = at::full({x.numel() + 5}, 128, at::kByte);
  EXPECT_NE(refused(pack_entropy(ones, long_codes), x.sizes()).find("more than"),
            std::string::npos);
  auto flipped = wire.clone();
  flipped[wire.numel() - 9].bitwise_xor_(0x5a);  // inside the compressed codes, before the checksum
  EXPECT_NE(refused(flipped, x.sizes()), "");
  auto grown =
      at::cat({wire, at::zeros({static_cast<int64_t>(hop_wire_bytes(
                                   HopEncoding::entropy, kBlock, kForward, x.sizes(), at::kFloat))},
                               at::kByte)});
  EXPECT_NE(refused(grown, x.sizes()).find("at most"), std::string::npos);
  auto nan = x.clone();
  nan[1][3][7] = NAN;
  EXPECT_NE(refused(encode_hop(nan, HopEncoding::entropy, kBlock, kForward, 0), x.sizes())
                .find("NaN, Inf or negative"),
            std::string::npos);
}
