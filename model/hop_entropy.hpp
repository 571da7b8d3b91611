// Entropy-coded hops (swarm.hop_encoding = "entropy"): each Hadamard-rotated block of a hop is
// coded in steps of a fixed fraction of its own RMS, and the codes are Huffman coded (zlib).
//
// Why: a fixed-width code must reach the block's largest value, so 4 bits over ±m put a step at
// m/7 (about 0.39 of the RMS after the rotation), and 2 bits at 2m/3 (1.8 RMS). Rotated blocks
// are close to Gaussian, whose values sit mostly near 0: a code in steps of the RMS has few
// likely values, and an entropy coder spends about −log₂ p bits on a value of probability p.
// At the same bytes that buys a step about half as wide both ways (rate–distortion: uniform
// steps entropy coded come within 0.25 bit of the best any code can do at these rates).
//
// The wire (uint8): each block's scale s (its RMS, bfloat16), then one zlib frame of one code
// byte a value (code + 128, the code round(x/Δ), or ⌊x/Δ + u⌋ with u uniform in [0, 1) when
// rounded stochastically, Δ = step · s). A value never exceeds √block · s, so codes stay
// within ±127 for steps ≥ √block/127 of the RMS. A NaN or Inf makes its block's scale NaN or
// Inf, which the receiver refuses. Its size depends on the values: the receiver checks it
// against a bound, and inflates the frame into exactly the values the shape needs (its
// Adler-32 checked) before it builds anything from it.
#pragma once

#include <ATen/ATen.h>
#include <cstdint>
#include <utility>

namespace swarmrt::model {

// The wire of nb blocks: their scales (bfloat16, [nb]) and one code byte a value (uint8,
// [nb · block]), either on any device; the wire is a host tensor (zlib runs on the host).
at::Tensor pack_entropy(const at::Tensor& scales, const at::Tensor& codes);

// The scales ([nb] float32) and codes ([nb · block] uint8) of a wire, on the host. Throws
// std::invalid_argument naming the problem when `wire` cannot be nb blocks of `block` values:
// its dtype or shape, its size against the bound, a frame that holds more or fewer values or
// is corrupt (checksum), a scale that is NaN, Inf or negative.
std::pair<at::Tensor, at::Tensor> unpack_entropy(const at::Tensor& wire, int64_t nb, int64_t block);

// The most bytes a wire of nb blocks of `block` values may take (zlib's bound on its frame).
uint64_t entropy_wire_bound(int64_t nb, int64_t block);

}  // namespace swarmrt::model
