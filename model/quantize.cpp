#include "model/quantize.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace swarmrt::model {
namespace {

// E2M1's magnitudes, by the 3 bits below the sign.
const double kFp4Grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

int64_t blocks_of(int64_t n, int64_t block) {
  return (n + block - 1) / block;
}

bool four_bit(Quantize q) {
  return q == Quantize::int4 || q == Quantize::fp4;
}

// The largest code magnitude: x/m is scaled to it.
double top(Quantize q) {
  switch (q) {
    case Quantize::int8:
      return 127;
    case Quantize::int4:
      return 7;
    case Quantize::fp4:
      return 6;
    default:
      return 1;
  }
}

uint64_t code_bytes(int64_t n, Quantize q) {
  switch (q) {
    case Quantize::none:
      return 4 * static_cast<uint64_t>(n);
    case Quantize::fp16:
      return 2 * static_cast<uint64_t>(n);
    case Quantize::int8:
      return static_cast<uint64_t>(n);
    default:
      return static_cast<uint64_t>((n + 1) / 2);
  }
}

}  // namespace

uint64_t encoded_bytes(int64_t numel, Quantize q, int64_t block) {
  if (q == Quantize::none) return code_bytes(numel, q);
  return 4 * static_cast<uint64_t>(blocks_of(numel, block)) + code_bytes(numel, q);
}

double error_bound(double x, double m, Quantize q) {
  const double rounding = std::ldexp(std::abs(x) + m, -24);  // float32 rounding of x̂
  switch (q) {
    case Quantize::none:
      return 0;
    case Quantize::fp16:
      return std::ldexp(std::abs(x), -11) + std::ldexp(m, -25) + rounding;
    case Quantize::int8:
      return m / 254 + rounding;
    case Quantize::int4:
      return m / 14 + rounding;
    case Quantize::fp4:
      return (std::abs(x) <= m / 3 ? m / 24 : m / 6) + rounding;
  }
  return 0;
}

at::Tensor encode(const at::Tensor& x, Quantize q, int64_t block) {
  at::NoGradGuard no_grad;
  const auto source = x.detach().to(at::kCPU);
  if (q == Quantize::none) return source.to(at::kFloat).contiguous();
  const int64_t n = source.numel(), nb = blocks_of(n, block);
  auto padded = at::zeros({nb * block}, at::kDouble);
  padded.narrow(0, 0, n).copy_(source.reshape({-1}));
  auto blocks = padded.view({nb, block});
  // m per block; a NaN anywhere in a block makes its m NaN, which the receiver refuses.
  auto m = blocks.abs().amax(1);
  m.masked_fill_(blocks.isnan().any(1), std::nan(""));
  const auto usable = at::isfinite(m).logical_and(m > 0);
  auto scaled = blocks * at::where(usable, top(q) / m, at::zeros_like(m)).unsqueeze(1);

  at::Tensor codes;  // one uint8 code per value, n of them
  switch (q) {
    case Quantize::fp16: {
      auto half = scaled.reshape({-1}).narrow(0, 0, n).to(at::kHalf).contiguous();
      codes = at::empty({static_cast<int64_t>(code_bytes(n, q))}, at::kByte);
      std::memcpy(codes.data_ptr(), half.data_ptr(), codes.numel());
      break;
    }
    case Quantize::int8:
      codes = (scaled.round().clamp(-127, 127) + 128).reshape({-1}).narrow(0, 0, n).to(at::kByte);
      break;
    case Quantize::int4:
      codes = (scaled.round().clamp(-7, 7) + 8).reshape({-1}).narrow(0, 0, n).to(at::kByte);
      break;
    case Quantize::fp4: {
      auto flat = scaled.reshape({-1}).narrow(0, 0, n);
      auto grid = at::tensor(std::vector<double>(kFp4Grid, kFp4Grid + 8), at::kDouble);
      auto nearest = (flat.abs().unsqueeze(1) - grid.unsqueeze(0)).abs().argmin(1);
      codes = (nearest + flat.lt(0).to(at::kLong) * 8).to(at::kByte);
      break;
    }
    case Quantize::none:
      break;
  }
  if (four_bit(q)) {
    if (n % 2) codes = at::cat({codes, at::zeros({1}, at::kByte)});
    auto pairs = codes.view({-1, 2});
    codes = (pairs.select(1, 0) + pairs.select(1, 1) * 16).to(at::kByte).contiguous();
  }
  auto wire = at::empty({static_cast<int64_t>(encoded_bytes(n, q, block))}, at::kByte);
  auto scales = m.to(at::kFloat).contiguous();
  auto* out = wire.data_ptr<uint8_t>();
  std::memcpy(out, scales.data_ptr(), 4 * nb);
  std::memcpy(out + 4 * nb, codes.contiguous().data_ptr(), codes.numel());
  return wire;
}

at::Tensor decode(const at::Tensor& wire, Quantize q, int64_t block, at::IntArrayRef shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  const auto expected = encoded_bytes(n, q, block);
  if (q == Quantize::none) {
    if (wire.scalar_type() != at::kFloat || static_cast<uint64_t>(wire.numel()) * 4 != expected)
      throw std::invalid_argument("expected " + std::to_string(n) + " float32 values");
    return wire.reshape(shape);
  }
  if (wire.scalar_type() != at::kByte || wire.dim() != 1 ||
      static_cast<uint64_t>(wire.numel()) != expected)
    throw std::invalid_argument("expected " + std::to_string(expected) + " encoded bytes, got " +
                                std::to_string(wire.numel()));
  const int64_t nb = blocks_of(n, block);
  const auto bytes = wire.contiguous();
  auto m = at::empty({nb}, at::kFloat);
  std::memcpy(m.data_ptr(), bytes.data_ptr(), 4 * nb);
  if (!at::isfinite(m).all().item<bool>() || m.lt(0).any().item<bool>())
    throw std::invalid_argument("a block scale is NaN, Inf or negative");
  auto codes = bytes.narrow(0, 4 * nb, bytes.numel() - 4 * nb);
  at::Tensor values;  // x/m·top, n of them, in double
  if (q == Quantize::fp16) {
    auto half = at::empty({n}, at::kHalf);
    std::memcpy(half.data_ptr(), codes.data_ptr(), 2 * n);
    values = half.to(at::kDouble);
  } else {
    if (four_bit(q))
      codes = at::stack({codes.bitwise_and(15), codes.bitwise_right_shift(4)}, 1)
                  .reshape({-1})
                  .narrow(0, 0, n);
    const auto c = codes.to(at::kLong);
    if (q == Quantize::int8) values = (c - 128).to(at::kDouble);
    if (q == Quantize::int4) values = (c - 8).to(at::kDouble);
    if (q == Quantize::fp4) {
      auto grid = at::tensor(std::vector<double>(kFp4Grid, kFp4Grid + 8), at::kDouble);
      values = grid.index_select(0, c.bitwise_and(7)) *
               at::where(c.ge(8), at::full_like(c, -1), at::ones_like(c)).to(at::kDouble);
    }
  }
  auto padded = at::zeros({nb * block}, at::kDouble);
  padded.narrow(0, 0, n).copy_(values);
  auto out = (padded.view({nb, block}) * (m.to(at::kDouble) / top(q)).unsqueeze(1))
                 .reshape({-1})
                 .narrow(0, 0, n)
                 .to(at::kFloat);
  if (!at::isfinite(out).all().item<bool>())
    throw std::invalid_argument("decoded values are not finite");
  return out.reshape(shape);
}

}  // namespace swarmrt::model
