// Blockwise quantization of outer gradients for the wire (Streaming DiLoCo, architecture §6).
//
// A tensor is flattened and cut into blocks of `block` values; each block travels with its
// largest magnitude m (float32, exact) and one code per value:
//   int8   code = round(127·x/m)            x̂ = code·m/127       |x − x̂| ≤ m/254
//   int4   code = round(7·x/m)              x̂ = code·m/7         |x − x̂| ≤ m/14
//   fp4    E2M1 of 6·x/m (±{0,½,1,1½,2,3,4,6}), x̂ = e·m/6       |x − x̂| ≤ m/6 (half the widest
//          gap, 4..6), and ≤ m/24 for |x| ≤ m/3 (gap ½): finer where most values are
//   fp16   half(x/m)                        x̂ = h·m              |x − x̂| ≤ 2⁻¹¹|x| + 2⁻²⁵m
//   none   the float32 tensor itself
// plus the float32 rounding of x̂ (2⁻²⁴|x̂|). fp4 is E2M1, the OCP microscaling element
// format: its steps grow with magnitude, matching pseudo-gradients whose values cluster near
// zero with a few large ones, while E3M0 (powers of two only) doubles the step at every level.
// Scaling by m in double precision keeps denormal blocks exact to their scale (m/7 of a
// denormal m would round to zero in float32), and a block of zeros (m = 0) is all zeros.
//
// The wire form of a scaled encoding is one uint8 tensor: the blocks' m (float32) then the
// codes (4-bit codes two to a byte, the first in the low nibble). A NaN or Inf in x makes its
// block's m NaN or Inf: decode refuses it, as every receiver refuses non-finite numbers.
#pragma once

#include <ATen/ATen.h>
#include <cstdint>
#include <optional>

#include "config/config.hpp"

namespace swarmrt::model {

// The wire form of x (float32, any shape).
at::Tensor encode(const at::Tensor& x, config::Quantize q, int64_t block);

// x̂ as a float32 tensor of `shape`. Throws std::invalid_argument naming the problem: a wire
// tensor of the wrong dtype or size, a scale that is NaN, Inf or negative, a decoded value
// that is not finite.
at::Tensor decode(const at::Tensor& wire, config::Quantize q, int64_t block, at::IntArrayRef shape);

// Bytes of the wire form of `numel` values.
uint64_t encoded_bytes(int64_t numel, config::Quantize q, int64_t block);

// The largest |x − x̂| the encoding allows for a value of magnitude `x` in a block whose
// largest magnitude is `m` (the bounds above, float32 rounding included).
double error_bound(double x, double m, config::Quantize q);

// Uniform codes of any width from 2 to 8 bits (the hop encodings use 3, 4 and 5; int8 and int4
// above are 8 and 4, byte for byte): code = round(L·x/m) + L + 1 with L = 2^(bits−1) − 1,
// x̂ = (code − L − 1)·m/L, |x − x̂| ≤ m/2L; 8 codes fill `bits` bytes, little-endian, the
// first code in the lowest bits. With a stochastic seed, code = ⌊L·x/m + u⌋ + L + 1 with u
// uniform in [0, 1) from a generator seeded with it: x̂ is then x in expectation (no rounding
// bias that adds up over many steps), |x − x̂| < m/L, and the same seed gives the same wire.
at::Tensor encode_bits(const at::Tensor& x, int bits, int64_t block,
                       std::optional<uint64_t> stochastic_seed = std::nullopt);
at::Tensor decode_bits(const at::Tensor& wire, int bits, int64_t block, at::IntArrayRef shape);
uint64_t bits_bytes(int64_t numel, int bits, int64_t block);

// n codes of `bits` each (integers in [0, 2^bits)), packed little-endian on their own device:
// 8 codes fill `bits` bytes, the first code in the lowest bits (for 4 bits: two a byte, the
// first in the low nibble). unpack_codes reads n of them back as int64.
at::Tensor pack_codes(const at::Tensor& codes, int bits);
at::Tensor unpack_codes(const at::Tensor& bytes, int bits, int64_t n);

}  // namespace swarmrt::model
