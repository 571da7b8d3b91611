#include "model/quantize.hpp"

#include <ATen/CPUGeneratorImpl.h>

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

// The largest code magnitude: x/m is scaled to it.
double top(config::Quantize q) {
  switch (q) {
    case config::Quantize::int8:
      return 127;
    case config::Quantize::int4:
      return 7;
    case config::Quantize::fp4:
      return 6;
    default:
      return 1;
  }
}

// The largest code of a uniform code of `bits`: 2^(bits−1) − 1 (127 for int8, 7 for int4).
double levels(int bits) {
  return (1 << (bits - 1)) - 1;
}

void check_bits(int bits) {
  if (bits < 2 || bits > 8)
    throw std::invalid_argument("uniform codes take 2 to 8 bits, not " + std::to_string(bits));
}

// Blocks of x in double with their largest magnitudes m, and x scaled so that m is `top`.
struct Scaled {
  int64_t n = 0, nb = 0;
  at::Tensor m;       // [nb]: NaN or Inf where the block holds one
  at::Tensor values;  // [nb, block]: x·top/m (zeros where m is 0; NaN where m is)
};
Scaled scale_blocks(const at::Tensor& x, int64_t block, double top) {
  const auto source = x.detach().to(at::kCPU);
  Scaled s;
  s.n = source.numel(), s.nb = blocks_of(s.n, block);
  auto padded = at::zeros({s.nb * block}, at::kDouble);
  padded.narrow(0, 0, s.n).copy_(source.reshape({-1}));
  auto blocks = padded.view({s.nb, block});
  // m per block; a NaN anywhere in a block makes its m NaN, which the receiver refuses.
  s.m = blocks.abs().amax(1);
  s.m.masked_fill_(blocks.isnan().any(1), std::nan(""));
  const auto usable = at::isfinite(s.m).logical_and(s.m > 0);
  s.values = blocks * at::where(usable, top / s.m, at::zeros_like(s.m)).unsqueeze(1);
  return s;
}

}  // namespace

at::Tensor pack_codes(const at::Tensor& codes, int bits) {
  if (bits == 8) return codes.to(at::kByte).contiguous();
  const auto longs = codes.options().dtype(at::kLong);
  const int64_t n = codes.numel(), groups = (n + 7) / 8;
  auto padded = at::zeros({groups * 8}, longs);
  padded.narrow(0, 0, n).copy_(codes.reshape({-1}));
  const auto shifts = at::arange(8, longs) * bits;
  const auto words = padded.view({groups, 8}).bitwise_left_shift(shifts).sum(1, false, at::kLong);
  const auto bytes = words.unsqueeze(1)
                         .bitwise_right_shift(at::arange(bits, longs) * 8)
                         .bitwise_and(255)
                         .to(at::kByte)
                         .reshape({-1});
  return bytes.narrow(0, 0, (n * bits + 7) / 8).contiguous();
}

at::Tensor unpack_codes(const at::Tensor& bytes, int bits, int64_t n) {
  if (bits == 8) return bytes.to(at::kLong);
  const auto longs = bytes.options().dtype(at::kLong);
  const int64_t groups = (n + 7) / 8;
  auto padded = at::zeros({groups * bits}, longs);
  padded.narrow(0, 0, bytes.numel()).copy_(bytes);
  const auto words =
      padded.view({groups, bits}).bitwise_left_shift(at::arange(bits, longs) * 8).sum(1);
  return words.unsqueeze(1)
      .bitwise_right_shift(at::arange(8, longs) * bits)
      .bitwise_and((1 << bits) - 1)
      .reshape({-1})
      .narrow(0, 0, n);
}

namespace {

// The wire: the blocks' m as float32, then the codes.
at::Tensor wire_of(const at::Tensor& m, const at::Tensor& codes, int64_t nb) {
  auto wire = at::empty({4 * nb + codes.numel()}, at::kByte);
  auto scales = m.to(at::kFloat).contiguous();
  auto* out = wire.data_ptr<uint8_t>();
  std::memcpy(out, scales.data_ptr(), 4 * nb);
  std::memcpy(out + 4 * nb, codes.contiguous().data_ptr(), codes.numel());
  return wire;
}

// The blocks' m from a wire whose size has been checked; refuses NaN, Inf or negative ones.
at::Tensor scales_of(const at::Tensor& bytes, int64_t nb) {
  auto m = at::empty({nb}, at::kFloat);
  std::memcpy(m.data_ptr(), bytes.data_ptr(), 4 * nb);
  if (!at::isfinite(m).all().item<bool>() || m.lt(0).any().item<bool>())
    throw std::invalid_argument("a block scale is NaN, Inf or negative");
  return m;
}

// A scaled encoding's wire: one contiguous uint8 tensor of `expected` bytes, or the error.
at::Tensor checked_wire(const at::Tensor& wire, uint64_t expected) {
  if (wire.scalar_type() != at::kByte || wire.dim() != 1 ||
      static_cast<uint64_t>(wire.numel()) != expected)
    throw std::invalid_argument("expected " + std::to_string(expected) + " encoded bytes, got " +
                                std::to_string(wire.numel()));
  return wire.contiguous();
}

// values (x/m·top, n of them, double) back to float32 x̂ of `shape`, refusing non-finite ones.
at::Tensor rescale(const at::Tensor& values, const at::Tensor& m, double top, int64_t n,
                   int64_t block, at::IntArrayRef shape) {
  const int64_t nb = m.numel();
  auto padded = at::zeros({nb * block}, at::kDouble);
  padded.narrow(0, 0, n).copy_(values);
  auto out = (padded.view({nb, block}) * (m.to(at::kDouble) / top).unsqueeze(1))
                 .reshape({-1})
                 .narrow(0, 0, n)
                 .to(at::kFloat);
  if (!at::isfinite(out).all().item<bool>())
    throw std::invalid_argument("decoded values are not finite");
  return out.reshape(shape);
}

uint64_t code_bytes(int64_t n, config::Quantize q) {
  switch (q) {
    case config::Quantize::none:
      return 4 * static_cast<uint64_t>(n);
    case config::Quantize::fp16:
      return 2 * static_cast<uint64_t>(n);
    case config::Quantize::int8:
      return static_cast<uint64_t>(n);
    default:
      return static_cast<uint64_t>((n + 1) / 2);
  }
}

}  // namespace

uint64_t encoded_bytes(int64_t numel, config::Quantize q, int64_t block) {
  if (q == config::Quantize::none) return code_bytes(numel, q);
  return 4 * static_cast<uint64_t>(blocks_of(numel, block)) + code_bytes(numel, q);
}

double error_bound(double x, double m, config::Quantize q) {
  const double rounding = std::ldexp(std::abs(x) + m, -24);  // float32 rounding of x̂
  switch (q) {
    case config::Quantize::none:
      return 0;
    case config::Quantize::fp16:
      return std::ldexp(std::abs(x), -11) + std::ldexp(m, -25) + rounding;
    case config::Quantize::int8:
      return m / 254 + rounding;
    case config::Quantize::int4:
      return m / 14 + rounding;
    case config::Quantize::fp4:
      return (std::abs(x) <= m / 3 ? m / 24 : m / 6) + rounding;
  }
  return 0;
}

uint64_t bits_bytes(int64_t numel, int bits, int64_t block) {
  check_bits(bits);
  return 4 * static_cast<uint64_t>(blocks_of(numel, block)) +
         (static_cast<uint64_t>(numel) * bits + 7) / 8;
}

at::Tensor encode_bits(const at::Tensor& x, int bits, int64_t block,
                       std::optional<uint64_t> stochastic_seed) {
  at::NoGradGuard no_grad;
  check_bits(bits);
  const double top = levels(bits);
  auto s = scale_blocks(x, block, top);
  auto v = s.values.reshape({-1}).narrow(0, 0, s.n);
  if (stochastic_seed) {
    // ⌊v + u⌋ rounds up with probability v − ⌊v⌋: x̂ is x in expectation.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(*stochastic_seed);
    v = (v + at::rand(v.sizes(), gen, at::kDouble)).floor();
  } else {
    v = v.round();
  }
  const auto codes = (v.clamp(-top, top) + (top + 1)).to(at::kByte);
  return wire_of(s.m, pack_codes(codes, bits), s.nb);
}

at::Tensor decode_bits(const at::Tensor& wire, int bits, int64_t block, at::IntArrayRef shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  const auto expected = bits_bytes(n, bits, block);
  const int64_t nb = blocks_of(n, block);
  const auto bytes = checked_wire(wire, expected);
  const auto m = scales_of(bytes, nb);
  const double top = levels(bits);
  const auto codes = unpack_codes(bytes.narrow(0, 4 * nb, bytes.numel() - 4 * nb), bits, n);
  return rescale((codes - static_cast<int64_t>(top + 1)).to(at::kDouble), m, top, n, block, shape);
}

at::Tensor encode(const at::Tensor& x, config::Quantize q, int64_t block) {
  at::NoGradGuard no_grad;
  switch (q) {
    case config::Quantize::none:
      return x.detach().to(at::kCPU).to(at::kFloat).contiguous();
    case config::Quantize::int8:
      return encode_bits(x, 8, block);
    case config::Quantize::int4:
      return encode_bits(x, 4, block);
    case config::Quantize::fp16: {
      auto s = scale_blocks(x, block, top(q));
      auto half = s.values.reshape({-1}).narrow(0, 0, s.n).to(at::kHalf).contiguous();
      auto codes = at::empty({static_cast<int64_t>(code_bytes(s.n, q))}, at::kByte);
      std::memcpy(codes.data_ptr(), half.data_ptr(), codes.numel());
      return wire_of(s.m, codes, s.nb);
    }
    case config::Quantize::fp4: {
      auto s = scale_blocks(x, block, top(q));
      auto flat = s.values.reshape({-1}).narrow(0, 0, s.n);
      auto grid = at::tensor(std::vector<double>(kFp4Grid, kFp4Grid + 8), at::kDouble);
      auto nearest = (flat.abs().unsqueeze(1) - grid.unsqueeze(0)).abs().argmin(1);
      return wire_of(s.m, pack_codes(nearest + flat.lt(0).to(at::kLong) * 8, 4), s.nb);
    }
  }
  throw std::invalid_argument("unknown quantization");
}

at::Tensor decode(const at::Tensor& wire, config::Quantize q, int64_t block,
                  at::IntArrayRef shape) {
  if (q == config::Quantize::int8) return decode_bits(wire, 8, block, shape);
  if (q == config::Quantize::int4) return decode_bits(wire, 4, block, shape);
  int64_t n = 1;
  for (auto d : shape) n *= d;
  const auto expected = encoded_bytes(n, q, block);
  if (q == config::Quantize::none) {
    if (wire.scalar_type() != at::kFloat || static_cast<uint64_t>(wire.numel()) * 4 != expected)
      throw std::invalid_argument("expected " + std::to_string(n) + " float32 values");
    return wire.reshape(shape);
  }
  const int64_t nb = blocks_of(n, block);
  const auto bytes = checked_wire(wire, expected);
  const auto m = scales_of(bytes, nb);
  const auto codes = bytes.narrow(0, 4 * nb, bytes.numel() - 4 * nb);
  at::Tensor values;  // x/m·top, n of them, in double
  if (q == config::Quantize::fp16) {
    auto half = at::empty({n}, at::kHalf);
    std::memcpy(half.data_ptr(), codes.data_ptr(), 2 * n);
    values = half.to(at::kDouble);
  } else {  // fp4
    const auto c = unpack_codes(codes, 4, n);
    auto grid = at::tensor(std::vector<double>(kFp4Grid, kFp4Grid + 8), at::kDouble);
    values = grid.index_select(0, c.bitwise_and(7)) *
             at::where(c.ge(8), at::full_like(c, -1), at::ones_like(c)).to(at::kDouble);
  }
  return rescale(values, m, top(q), n, block, shape);
}

}  // namespace swarmrt::model
