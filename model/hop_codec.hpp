// Hop encodings (swarm.hop_encoding): how a stage's activations forward and input gradients
// backward travel between stages. The sender encodes, the receiver decodes, in one process as
// across processes, so a pipeline computes the same with every transport:
//   none   the compute dtype itself (fp32 or bf16, train.precision): bit for bit
//   bf16   bfloat16                                  |x − x̂| ≤ 2⁻⁸|x|
//   int8   blockwise int8 (model/quantize.hpp)       |x − x̂| ≤ m/254 per value, m the block's max
//   int4   a Hadamard rotation of each block, then 4-bit uniform codes (model/quantize.hpp),
//          rotated back on arrival: ‖x − x̂‖₂ ≤ √block · m′/14 per block forward, m′ the
//          rotated block's max; backward rounds stochastically: ‖x − x̂‖₂ < √block · m′/7
//   int5/3 the same rotation, 5 bits forward (‖x − x̂‖₂ ≤ √block · m′/30) and 3 bits backward,
//          stochastic (‖x − x̂‖₂ < √block · m′/3): int4's bytes, spent where they count
//   int3   the same rotation in 3 bits both ways (‖x − x̂‖₂ ≤ √block · m′/6 forward, < √block ·
//          m′/3 back, stochastic): with hop_block 256, 3/8 + 4/256 bytes a value, 10.2x fewer
//          than float32
//   int4/2 4 bits forward as int4, 2 bits backward on a midrise grid (±m/3, ±m: all 4 codes in
//          use, no level at 0), stochastic (‖x − x̂‖₂ < √block · 2m′/3), each block's scale a
//          bfloat16 rounded up: 1/2 + 2/128 forward, 1/4 + 2/128 back, 10.2x fewer than
//          float32 over the pair with blocks of 128
// The rotation (an orthonormal Walsh–Hadamard matrix, its own inverse) spreads an outlier over
// its block, so m′ is near the block's RMS instead of its largest value: 4 bits then keep the
// many small values that plain int4 rounds to zero (TAH-Quant's idea).
// Why gradients round stochastically: rounding to nearest errs the same way for the same
// value, and that bias enters every step's gradient, so it adds up over a long run; a
// stochastic rounding is right in expectation, and its noise averages out like the batch's.
// Hidden states forward are noise the next stage sees once, not a sum: there a smaller error
// counts, which is why int5/3 moves a bit from the gradients to the hidden states. What each
// cost over 800 steps is in docs/hops.md.
#pragma once

#include <ATen/ATen.h>
#include <cstdint>
#include <optional>
#include <string>

#include "config/config.hpp"

namespace swarmrt::model {

// Which way a hop goes: hidden states forward, their gradients backward.
enum class HopDirection { forward, backward };

// The wire form of a hidden state or its gradient `x` (any shape, the compute dtype), computed
// on x's device in float32 (a GPU worker's hops never go through host memory to be encoded).
// `seed` draws the stochastic rounding of gradients: the same seed on the same kind of
// device, the same wire.
at::Tensor encode_hop(const at::Tensor& x, config::HopEncoding e, int64_t block, HopDirection d,
                      uint64_t seed);

// Throws std::invalid_argument naming the problem when `wire` is not what the encoding writes
// for that shape and direction (dtype, size) or, with `values`, when a block scale is NaN, Inf
// or negative. Reading a device wire's scales waits for the device; a host wire's cost nothing.
// An entropy wire's size is checked against its bound only: decode_hop checks its frame and
// scales whole as it inflates them, and throws the same way.
void check_hop(const at::Tensor& wire, config::HopEncoding e, int64_t block, HopDirection d,
               at::IntArrayRef shape, at::ScalarType dtype, bool values);

// x̂ of `shape` in `dtype` (the compute dtype), after check_hop, on `on` (default: the wire's
// device). A worker skips the values for a wire one of its own process's workers encoded on
// the device (as it reads no hidden state of `none` for finiteness either): the check would
// wait for the device on every hop. An entropy wire is inflated on the host: given one in host
// memory and a GPU `on`, only its codes (a byte a value) and scales go there, from pinned
// memory and without waiting for the device (a wire on the device would be read back first,
// which waits for everything queued before it).
at::Tensor decode_hop(const at::Tensor& wire, config::HopEncoding e, int64_t block, HopDirection d,
                      at::IntArrayRef shape, at::ScalarType dtype, bool check_values = true,
                      std::optional<at::Device> on = std::nullopt);

// The dtype of the wire tensor an encoding writes (for `none`: the compute dtype).
at::ScalarType hop_wire_dtype(config::HopEncoding e, at::ScalarType compute);
// The bytes of that wire for a hop of `shape` in the compute dtype `dtype`.
uint64_t hop_wire_bytes(config::HopEncoding e, int64_t block, HopDirection d, at::IntArrayRef shape,
                        at::ScalarType dtype);

// The orthonormal Walsh–Hadamard matrix of size n (a power of two) on `device`: H = Hᵀ = H⁻¹.
// Built once per size and device and shared: read it, never write to it.
at::Tensor hadamard(int64_t n, const at::Device& device = at::kCPU);

}  // namespace swarmrt::model
