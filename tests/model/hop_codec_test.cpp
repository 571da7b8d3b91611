// Hop encodings: each one's error within its bound, its wire size, and refusals.
#include <gtest/gtest.h>
#include <cmath>

#include "model/hop_codec.hpp"
#include "model/quantize.hpp"

using namespace swarmrt::model;

namespace {
constexpr int64_t kBlock = 128;

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
  auto none = encode_hop(x, HopEncoding::none, kBlock);
  EXPECT_TRUE(at::equal(decode_hop(none, HopEncoding::none, kBlock, x.sizes(), at::kFloat), x));
  auto wire = encode_hop(x, HopEncoding::bf16, kBlock);
  EXPECT_EQ(wire.scalar_type(), at::kBFloat16);
  auto back = decode_hop(wire, HopEncoding::bf16, kBlock, x.sizes(), at::kFloat);
  // Round to nearest with 8 significant bits: |x − x̂| ≤ 2⁻⁸|x|.
  EXPECT_TRUE((back - x).abs().le(x.abs() * std::ldexp(1.0, -8)).all().item<bool>());
  EXPECT_FALSE(at::equal(back, x));
}

TEST(HopCodec, Int8StaysWithinItsBlockBoundAndQuartersTheBytes) {
  auto x = hidden(2, 16, 64, 2);
  auto wire = encode_hop(x, HopEncoding::int8, kBlock);
  const int64_t n = x.numel(), blocks = n / kBlock;
  EXPECT_EQ(wire.numel(), n + 4 * blocks);  // a code a value, a float32 scale a block
  EXPECT_LE(static_cast<double>(wire.numel()) / (4.0 * n), 0.26);
  auto back = decode_hop(wire, HopEncoding::int8, kBlock, x.sizes(), at::kFloat);
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
  auto wire = encode_hop(x, HopEncoding::int4, kBlock);
  EXPECT_EQ(wire.numel(), n / 2 + 4 * blocks);
  EXPECT_LE(static_cast<double>(wire.numel()) / (4.0 * n), 0.14);
  auto back = decode_hop(wire, HopEncoding::int4, kBlock, x.sizes(), at::kFloat);
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
  for (auto e : {HopEncoding::none, HopEncoding::bf16, HopEncoding::int8, HopEncoding::int4}) {
    auto back = decode_hop(encode_hop(x, e, kBlock), e, kBlock, x.sizes(), at::kBFloat16);
    EXPECT_EQ(back.scalar_type(), at::kBFloat16) << name_of(e);
    EXPECT_TRUE(back.sizes().equals(x.sizes())) << name_of(e);
  }
  auto wire = encode_hop(x, HopEncoding::int8, kBlock);
  EXPECT_THROW(decode_hop(wire.narrow(0, 0, wire.numel() - 1), HopEncoding::int8, kBlock, x.sizes(),
                          at::kBFloat16),
               std::invalid_argument);
  EXPECT_THROW(decode_hop(x, HopEncoding::int8, kBlock, x.sizes(), at::kBFloat16),
               std::invalid_argument);  // not the uint8 an int8 hop carries
  EXPECT_THROW(decode_hop(x.to(at::kFloat), HopEncoding::bf16, kBlock, x.sizes(), at::kBFloat16),
               std::invalid_argument);
  auto nan = x.to(at::kFloat);
  nan[0][0][0] = NAN;
  EXPECT_THROW(decode_hop(encode_hop(nan, HopEncoding::int8, kBlock), HopEncoding::int8, kBlock,
                          x.sizes(), at::kFloat),
               std::invalid_argument);
}
