#include "model/hop_codec.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "model/hop_entropy.hpp"
#include "model/quantize.hpp"

namespace swarmrt::model {
namespace {

int64_t numel_of(at::IntArrayRef shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

int64_t blocks_for(int64_t n, int64_t block) {
  return (n + block - 1) / block;
}

// How a rotated encoding codes one direction: its width, whether its levels straddle zero
// (midrise: 2^bits levels, none at 0, for 2-bit gradients, where a level at 0 would leave only
// 3 of 4 codes in use), and the bytes of each block's scale (2: bfloat16, rounded up).
struct Codes {
  int bits = 0;  // 0: not a rotated encoding
  bool midrise = false;
  int scale_bytes = 4;
};

Codes rotated_codes(config::HopEncoding e, HopDirection d) {
  const bool forward = d == HopDirection::forward;
  switch (e) {
    case config::HopEncoding::int4:
      return {4, false, 4};
    case config::HopEncoding::int5_3:
      return {forward ? 5 : 3, false, 4};
    case config::HopEncoding::int3:
      return {3, false, 4};
    case config::HopEncoding::int4_2:
      return {forward ? 4 : 2, !forward, 2};
    default:
      return {};
  }
}

int rotated_bits(config::HopEncoding e, HopDirection d) {
  return rotated_codes(e, d).bits;
}

// The width of the codes on the wire (0: the encoding carries values, not codes).
int code_bits(config::HopEncoding e, HopDirection d) {
  return e == config::HopEncoding::int8 ? 8 : rotated_bits(e, d);
}

// The bytes of a wire of n coded values in blocks of `block`: the scales, then the codes.
uint64_t coded_bytes(int64_t n, const Codes& c, int64_t block) {
  return static_cast<uint64_t>(blocks_for(n, block)) * c.scale_bytes +
         (static_cast<uint64_t>(n) * c.bits + 7) / 8;
}

// x as rows of `block` float32 values on x's device, zero-padded at the end: [blocks, block].
at::Tensor blocks_of(const at::Tensor& x, int64_t block) {
  auto flat = x.detach().reshape({-1}).to(at::kFloat);
  const int64_t n = flat.numel(), nb = blocks_for(n, block);
  if (nb * block != n) flat = at::constant_pad_nd(flat, {0, nb * block - n});
  return flat.view({nb, block});
}

// A generator of uniform draws on `device`, seeded: the same seed, the same draws there.
at::Generator seeded_generator(const at::Device& device, uint64_t seed) {
  if (device.is_cpu()) return at::make_generator<at::CPUGeneratorImpl>(seed);
  auto global = at::globalContext().defaultGenerator(device);  // a handle on the device's own
  at::Generator gen;
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    gen = global.clone();
  }
  gen.set_current_seed(seed);
  return gen;
}

// m rounded up to the nearest bfloat16 (positive and finite m; NaN and Inf stay so): a
// value of the block then still lies within ±m, and m costs 2 bytes on the wire.
at::Tensor bf16_at_least(const at::Tensor& m) {
  const auto up =
      m.contiguous().view(at::kInt).add(0xFFFF).bitwise_and(static_cast<int32_t>(0xFFFF0000));
  return at::where(at::isfinite(m), up.view(at::kFloat), m);
}

// The first n values of `blocks` ([nb, block], float32) as codes of c.bits scaled by each
// block's largest magnitude m: the wire (m as float32 or bfloat16 bytes, then the packed
// codes; model/quantize.hpp's encode_bits, computed in float32 on the blocks' device).
// Uniform codes are k·m/L for k in −L..L, L = 2^(bits−1) − 1; midrise ones (2j/(K−1) − 1)·m
// for j in 0..K−1, K = 2^bits.
at::Tensor encode_blocks(const at::Tensor& blocks, int64_t n, const Codes& c,
                         std::optional<uint64_t> stochastic_seed) {
  const double top = c.midrise ? (1 << c.bits) - 1 : (1 << (c.bits - 1)) - 1;
  auto m = blocks.abs().amax(1);
  // A NaN anywhere in a block makes its m NaN, which a checking receiver refuses.
  m.masked_fill_(blocks.isnan().any(1), std::numeric_limits<float>::quiet_NaN());
  if (c.scale_bytes == 2) m = bf16_at_least(m);
  const auto usable = at::isfinite(m).logical_and(m > 0).unsqueeze(1);
  // x/m before the scaling to `top`: a denormal m cannot overflow the factor.
  auto v = at::where(usable, blocks / m.unsqueeze(1), at::zeros({}, blocks.options()));
  v = c.midrise ? (v + 1) * (top / 2) : v * top;
  v = v.reshape({-1}).narrow(0, 0, n);
  if (stochastic_seed) {
    // ⌊v + u⌋ rounds up with probability v − ⌊v⌋: x̂ is x in expectation.
    v = (v + at::rand(v.sizes(), seeded_generator(v.device(), *stochastic_seed), v.options()))
            .floor();
  } else {
    v = v.round();
  }
  const auto codes =
      c.midrise ? v.clamp(0, top).to(at::kByte) : (v.clamp(-top, top) + (top + 1)).to(at::kByte);
  const auto scales = c.scale_bytes == 2 ? m.to(at::kBFloat16) : m;
  return at::cat({scales.contiguous().view(at::kByte), pack_codes(codes, c.bits)});
}

// The blocks' scales of a wire whose size has been checked, as float32 (a copy when the bytes
// do not start on their type's boundary).
at::Tensor scales_of(const at::Tensor& wire, int64_t nb, int scale_bytes = 4) {
  auto bytes = wire.narrow(0, 0, scale_bytes * nb);
  if (!bytes.is_contiguous() || bytes.storage_offset() % scale_bytes != 0) bytes = bytes.clone();
  return scale_bytes == 2 ? bytes.view(at::kBFloat16).to(at::kFloat) : bytes.view(at::kFloat);
}

// x̂ of the n coded values of a wire ([nb·block] float32, zero-padded) on the wire's device.
at::Tensor decode_blocks(const at::Tensor& wire, const Codes& c, int64_t block, int64_t n) {
  const double top = c.midrise ? (1 << c.bits) - 1 : (1 << (c.bits - 1)) - 1;
  const int64_t nb = blocks_for(n, block), head = c.scale_bytes * nb;
  const auto m = scales_of(wire, nb, c.scale_bytes);
  auto codes = unpack_codes(wire.narrow(0, head, wire.numel() - head), c.bits, n).to(at::kFloat);
  codes = c.midrise ? codes.mul_(2 / top).sub_(1) : codes.sub_(top + 1);
  if (nb * block != n) codes = at::constant_pad_nd(codes, {0, nb * block - n});
  return codes.view({nb, block}) * (c.midrise ? m : m / top).unsqueeze(1);
}

// entropy: the step of the codes as a share of each block's RMS, by direction. Forward, the
// next stage computes on the error once: a fine step (error RMS 0.25/√12 ≈ 0.07 of the
// block's; int4's is about 0.11). Backward, rounded stochastically, the noise averages out
// over the batch like the batch's own: a coarse step (noise RMS about 0.5 of the block's;
// int3's about 0.36, int4/2's about 0.7). Chosen so that both ways together send about 10x
// fewer bytes than float32 on the tiny model's hops: 0.25 and 1.0 sent 105.6 bytes a token
// (docs/hops.md).
double entropy_step(HopDirection d) {
  return d == HopDirection::forward ? 0.25 : 1.25;
}

// The entropy wire of rotated blocks ([nb, block] float32): scales are the blocks' RMS in
// bfloat16 (a NaN or Inf anywhere makes its block's NaN or Inf), codes x/Δ rounded, Δ the
// step times the scale, clamped to ±127 (reached only when one rotated value holds nearly all
// of a long block's energy), stored as code + 128.
at::Tensor encode_entropy_codes(const at::Tensor& rotated, double step,
                                std::optional<uint64_t> stochastic_seed) {
  const auto top = rotated.abs().amax(1, true);
  // The RMS through x/max: squares of large values cannot overflow.
  auto rms = at::where(top > 0, top * (rotated / top).square().mean(1, true).sqrt(),
                       at::zeros({}, rotated.options()));
  rms.masked_fill_(rotated.isnan().any(1, true), std::numeric_limits<float>::quiet_NaN());
  rms.masked_fill_(rotated.isinf().any(1, true), std::numeric_limits<float>::infinity());
  const auto scale = rms.to(at::kBFloat16);
  const auto delta = scale.to(at::kFloat) * step;
  const auto usable = at::isfinite(delta).logical_and(delta > 0);
  auto v = at::where(usable, rotated / delta, at::zeros({}, rotated.options()));
  if (stochastic_seed) {
    v = (v + at::rand(v.sizes(), seeded_generator(v.device(), *stochastic_seed), v.options()))
            .floor();
  } else {
    v = v.round();
  }
  return pack_entropy(scale.reshape({-1}), (v.clamp(-127, 127) + 128).to(at::kByte).reshape({-1}));
}

}  // namespace

at::Tensor hadamard(int64_t n, const at::Device& device) {
  if (n < 1 || (n & (n - 1)) != 0)
    throw std::invalid_argument("a Hadamard matrix needs a power of two, not " + std::to_string(n));
  // Built once per size and device: every 4-bit hop rotates with it, in both directions.
  static std::mutex mutex;
  static std::map<std::pair<int64_t, std::string>, at::Tensor> built;
  std::lock_guard<std::mutex> lock(mutex);
  auto& cached = built[{n, device.str()}];
  if (cached.defined()) return cached;
  // Sylvester's construction: H₂ₖ = [[Hₖ, Hₖ], [Hₖ, −Hₖ]], scaled by 1/√n to be orthonormal.
  auto h = at::ones({1, 1}, at::kFloat);
  while (h.size(0) < n) h = at::cat({at::cat({h, h}, 1), at::cat({h, -h}, 1)}, 0);
  cached = (h / std::sqrt(static_cast<double>(n))).to(device);
  return cached;
}

at::ScalarType hop_wire_dtype(config::HopEncoding e, at::ScalarType compute) {
  switch (e) {
    case config::HopEncoding::bf16:
      return at::kBFloat16;
    case config::HopEncoding::int8:
    case config::HopEncoding::int4:
    case config::HopEncoding::int5_3:
    case config::HopEncoding::int3:
    case config::HopEncoding::int4_2:
    case config::HopEncoding::entropy:
      return at::kByte;
    case config::HopEncoding::none:
      break;
  }
  return compute;
}

uint64_t hop_wire_bytes(config::HopEncoding e, int64_t block, HopDirection d, at::IntArrayRef shape,
                        at::ScalarType dtype) {
  const int64_t n = numel_of(shape);
  if (e == config::HopEncoding::int8) return bits_bytes(n, 8, block);
  if (e == config::HopEncoding::entropy) return entropy_wire_bound(blocks_for(n, block), block);
  if (rotated_bits(e, d) > 0)
    return coded_bytes(blocks_for(n, block) * block, rotated_codes(e, d), block);
  return static_cast<uint64_t>(n) * c10::elementSize(hop_wire_dtype(e, dtype));
}

at::Tensor encode_hop(const at::Tensor& x, config::HopEncoding e, int64_t block, HopDirection d,
                      uint64_t seed) {
  at::NoGradGuard no_grad;
  switch (e) {
    case config::HopEncoding::none:
      return x;
    case config::HopEncoding::bf16:
      return x.to(at::kBFloat16);
    case config::HopEncoding::int8:
      return encode_blocks(blocks_of(x, block), x.numel(), Codes{8, false, 4}, std::nullopt);
    case config::HopEncoding::int4:
    case config::HopEncoding::int5_3:
    case config::HopEncoding::int3:
    case config::HopEncoding::int4_2: {
      const auto rotated = at::matmul(blocks_of(x, block), hadamard(block, x.device()));
      std::optional<uint64_t> stochastic;
      if (d == HopDirection::backward) stochastic = seed;
      return encode_blocks(rotated, rotated.numel(), rotated_codes(e, d), stochastic);
    }
    case config::HopEncoding::entropy: {
      const auto rotated = at::matmul(blocks_of(x, block), hadamard(block, x.device()));
      std::optional<uint64_t> stochastic;
      if (d == HopDirection::backward) stochastic = seed;
      return encode_entropy_codes(rotated, entropy_step(d), stochastic);
    }
  }
  return x;
}

void check_hop(const at::Tensor& wire, config::HopEncoding e, int64_t block, HopDirection d,
               at::IntArrayRef shape, at::ScalarType dtype, bool values) {
  const auto want = hop_wire_dtype(e, dtype);
  if (wire.scalar_type() != want)
    throw std::invalid_argument(std::string("a ") + config::name_of(e) + " hop carries " +
                                c10::toString(want) + ", not " + c10::toString(wire.scalar_type()));
  if (e == config::HopEncoding::entropy) {
    // Its size depends on the values, so here only its bound: decode_hop inflates the frame
    // and checks it whole as it does (once: inflating it here too cost a gpt2-small hop as
    // much again, bench/hop_latency.sh).
    const int64_t nb = blocks_for(numel_of(shape), block);
    const auto bound = entropy_wire_bound(nb, block);
    if (wire.dim() != 1 || static_cast<uint64_t>(wire.numel()) > bound)
      throw std::invalid_argument("expected at most " + std::to_string(bound) +
                                  " encoded bytes, got " + std::to_string(wire.numel()));
    return;
  }
  const auto bytes = hop_wire_bytes(e, block, d, shape, dtype);
  const auto got = static_cast<uint64_t>(wire.numel()) * c10::elementSize(wire.scalar_type());
  if (code_bits(e, d) == 0) {
    if (got != bytes)
      throw std::invalid_argument("expected " + std::to_string(numel_of(shape)) + " values, got " +
                                  std::to_string(wire.numel()));
    return;
  }
  if (wire.dim() != 1 || got != bytes)
    throw std::invalid_argument("expected " + std::to_string(bytes) + " encoded bytes, got " +
                                std::to_string(wire.numel()));
  if (!values) return;
  // The scales alone: finite ones make every decoded value finite (codes are bounded). A
  // wire on a device is read back for this, which waits for the device.
  const int64_t coded =
      code_bits(e, d) == 8 ? numel_of(shape) : blocks_for(numel_of(shape), block) * block;
  const int scale_bytes = code_bits(e, d) == 8 ? 4 : rotated_codes(e, d).scale_bytes;
  const auto m = scales_of(wire, blocks_for(coded, block), scale_bytes).to(at::kCPU);
  if (!at::isfinite(m).all().item<bool>() || m.lt(0).any().item<bool>())
    throw std::invalid_argument("a block scale is NaN, Inf or negative");
}

at::Tensor decode_hop(const at::Tensor& wire_in, config::HopEncoding e, int64_t block,
                      HopDirection d, at::IntArrayRef shape, at::ScalarType dtype,
                      bool check_values, std::optional<at::Device> on) {
  at::NoGradGuard no_grad;
  check_hop(wire_in, e, block, d, shape, dtype, check_values);
  const at::Device device = on.value_or(wire_in.device());
  const at::Tensor wire = e == config::HopEncoding::entropy || wire_in.device() == device
                              ? wire_in
                              : wire_in.to(device);
  const int64_t n = numel_of(shape);
  switch (e) {
    case config::HopEncoding::none:
    case config::HopEncoding::bf16:
      return wire.reshape(shape).to(dtype);
    case config::HopEncoding::int8:
      return decode_blocks(wire.contiguous(), Codes{8, false, 4}, block, n)
          .reshape({-1})
          .narrow(0, 0, n)
          .reshape(shape)
          .to(dtype);
    case config::HopEncoding::int4:
    case config::HopEncoding::int5_3:
    case config::HopEncoding::int3:
    case config::HopEncoding::int4_2: {
      const int64_t nb = blocks_for(n, block);
      const auto rotated = decode_blocks(wire.contiguous(), rotated_codes(e, d), block, nb * block);
      return at::matmul(rotated, hadamard(block, wire.device()))
          .reshape({-1})
          .narrow(0, 0, n)
          .reshape(shape)
          .to(dtype);
    }
    case config::HopEncoding::entropy: {
      const int64_t nb = blocks_for(n, block);  // unpack_entropy checks the frame whole
      auto [scales, codes] = unpack_entropy(wire, nb, block);
      const auto up = [&](const at::Tensor& t) {
        return device.is_cpu() ? t : t.pin_memory().to(device, /*non_blocking=*/true);
      };
      const auto steps = (up(scales) * entropy_step(d)).unsqueeze(1);
      const auto rotated = (up(codes).to(at::kFloat) - 128).view({nb, block}) * steps;
      return at::matmul(rotated, hadamard(block, device))
          .reshape({-1})
          .narrow(0, 0, n)
          .reshape(shape)
          .to(dtype);
    }
  }
  return wire;
}

}  // namespace swarmrt::model
