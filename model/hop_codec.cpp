#include "model/hop_codec.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

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

// The width of the rotated codes, by encoding and direction (0: not a rotated encoding).
int rotated_bits(config::HopEncoding e, HopDirection d) {
  if (e == config::HopEncoding::int4) return 4;
  if (e == config::HopEncoding::int5_3) return d == HopDirection::forward ? 5 : 3;
  if (e == config::HopEncoding::int3) return 3;
  return 0;
}

// The width of the codes on the wire (0: the encoding carries values, not codes).
int code_bits(config::HopEncoding e, HopDirection d) {
  return e == config::HopEncoding::int8 ? 8 : rotated_bits(e, d);
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

// The first n values of `blocks` ([nb, block], float32) as uniform codes of `bits` scaled
// by each block's largest magnitude m: the wire (m as float32 bytes, then the packed codes;
// model/quantize.hpp's encode_bits, computed in float32 on the blocks' device).
at::Tensor encode_blocks(const at::Tensor& blocks, int64_t n, int bits,
                         std::optional<uint64_t> stochastic_seed) {
  const double top = (1 << (bits - 1)) - 1;
  auto m = blocks.abs().amax(1);
  // A NaN anywhere in a block makes its m NaN, which a checking receiver refuses.
  m.masked_fill_(blocks.isnan().any(1), std::numeric_limits<float>::quiet_NaN());
  const auto usable = at::isfinite(m).logical_and(m > 0).unsqueeze(1);
  // x/m before the scaling to `top`: a denormal m cannot overflow the factor.
  auto v = at::where(usable, blocks / m.unsqueeze(1), at::zeros({}, blocks.options())) * top;
  v = v.reshape({-1}).narrow(0, 0, n);
  if (stochastic_seed) {
    // ⌊v + u⌋ rounds up with probability v − ⌊v⌋: x̂ is x in expectation.
    v = (v + at::rand(v.sizes(), seeded_generator(v.device(), *stochastic_seed), v.options()))
            .floor();
  } else {
    v = v.round();
  }
  const auto codes = (v.clamp(-top, top) + (top + 1)).to(at::kByte);
  return at::cat({m.contiguous().view(at::kByte), pack_codes(codes, bits)});
}

// The blocks' scales of a wire whose size has been checked, as float32 (a copy when the bytes
// do not start on a float32 boundary).
at::Tensor scales_of(const at::Tensor& wire, int64_t nb) {
  auto bytes = wire.narrow(0, 0, 4 * nb);
  if (!bytes.is_contiguous() || bytes.storage_offset() % 4 != 0) bytes = bytes.clone();
  return bytes.view(at::kFloat);
}

// x̂ of the n coded values of a wire ([nb·block] float32, zero-padded) on the wire's device.
at::Tensor decode_blocks(const at::Tensor& wire, int bits, int64_t block, int64_t n) {
  const double top = (1 << (bits - 1)) - 1;
  const int64_t nb = blocks_for(n, block);
  const auto m = scales_of(wire, nb);
  auto codes = unpack_codes(wire.narrow(0, 4 * nb, wire.numel() - 4 * nb), bits, n)
                   .to(at::kFloat)
                   .sub_(top + 1);
  if (nb * block != n) codes = at::constant_pad_nd(codes, {0, nb * block - n});
  return codes.view({nb, block}) * (m / top).unsqueeze(1);
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
  if (rotated_bits(e, d) > 0)
    return bits_bytes(blocks_for(n, block) * block, rotated_bits(e, d), block);
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
      return encode_blocks(blocks_of(x, block), x.numel(), 8, std::nullopt);
    case config::HopEncoding::int4:
    case config::HopEncoding::int5_3:
    case config::HopEncoding::int3: {
      const auto rotated = at::matmul(blocks_of(x, block), hadamard(block, x.device()));
      std::optional<uint64_t> stochastic;
      if (d == HopDirection::backward) stochastic = seed;
      return encode_blocks(rotated, rotated.numel(), rotated_bits(e, d), stochastic);
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
  const auto m = scales_of(wire, blocks_for(coded, block)).to(at::kCPU);
  if (!at::isfinite(m).all().item<bool>() || m.lt(0).any().item<bool>())
    throw std::invalid_argument("a block scale is NaN, Inf or negative");
}

at::Tensor decode_hop(const at::Tensor& wire, config::HopEncoding e, int64_t block, HopDirection d,
                      at::IntArrayRef shape, at::ScalarType dtype, bool check_values) {
  at::NoGradGuard no_grad;
  check_hop(wire, e, block, d, shape, dtype, check_values);
  const int64_t n = numel_of(shape);
  switch (e) {
    case config::HopEncoding::none:
    case config::HopEncoding::bf16:
      return wire.reshape(shape).to(dtype);
    case config::HopEncoding::int8:
      return decode_blocks(wire.contiguous(), 8, block, n)
          .reshape({-1})
          .narrow(0, 0, n)
          .reshape(shape)
          .to(dtype);
    case config::HopEncoding::int4:
    case config::HopEncoding::int5_3:
    case config::HopEncoding::int3: {
      const int64_t nb = blocks_for(n, block);
      const auto rotated = decode_blocks(wire.contiguous(), rotated_bits(e, d), block, nb * block);
      return at::matmul(rotated, hadamard(block, wire.device()))
          .reshape({-1})
          .narrow(0, 0, n)
          .reshape(shape)
          .to(dtype);
    }
  }
  return wire;
}

}  // namespace swarmrt::model
