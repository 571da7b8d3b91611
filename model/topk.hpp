// Top-k sparsification of outer gradients for the wire (SparseLoCo, Sarfi et al. 2025;
// docs/streaming.md), and the one place a round's tensor is encoded under the run's settings.
//
// A tensor is flattened and cut into chunks of `chunk` values (the last may be shorter). Each
// chunk keeps its k = ⌈density·len⌉ largest magnitudes (at least one) and sends
//   lo and hi: its smallest and largest kept magnitude (float32, exact);
//   each kept value's index in the chunk, in ⌈log2 chunk⌉ bits;
//   each kept value's code in `bits` bits: its sign, and the nearest of the L = 2^(bits−1)
//   magnitudes lo + j·(hi − lo)/(L − 1), so |x − x̂| ≤ (hi − lo)/(2(L − 1)).
// Every other value decodes as 0: what a round leaves out waits in the sender's error feedback
// (diloco.error_feedback) for a later one. At density 1% in chunks of 4096 and 2 bits a value
// costs 0.16 bits against float32's 32: 205x fewer bytes.
//
// The wire is one uint8 tensor: a 24-byte header (magic "TOPK", version, bits, chunk, k,
// numel), the chunks' lo and hi, the indices (the low byte of each, then the bits above it),
// then the codes. A receiver knows every header field from its own settings and the tensor's
// shape: it checks the size and the header before it allocates, and refuses a lo or hi that is
// NaN, Inf, negative or out of order, and an index past its chunk's end.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace swarmrt::model {

struct TopK {
  double density = 0.01;
  int bits = 2;
  int64_t chunk = 4096;
};
TopK topk_of(const config::DilocoConfig& d);

// The values a chunk of `len` keeps: ⌈density·len⌉, at least one (none of none).
int64_t topk_kept(int64_t len, double density);

at::Tensor encode_topk(const at::Tensor& x, const TopK& t);
// x̂ as a float32 tensor of `shape`; std::invalid_argument naming what is wrong with the wire.
at::Tensor decode_topk(const at::Tensor& wire, const TopK& t, at::IntArrayRef shape);
uint64_t topk_bytes(int64_t numel, const TopK& t);
// The values a wire's header says it holds, read before decode_topk checks the rest;
// std::invalid_argument when it is no top-k wire at all.
int64_t topk_numel(const at::Tensor& wire);

// A round's tensor on the wire under the run's settings: sparse (diloco.compress), quantized
// (diloco.quantize, model/quantize.hpp) or float32.
at::Tensor encode_round(const at::Tensor& x, const config::DilocoConfig& d);
at::Tensor decode_round(const at::Tensor& wire, const config::DilocoConfig& d,
                        at::IntArrayRef shape);
uint64_t round_bytes(int64_t numel, const config::DilocoConfig& d);
// A sparse round sent at any of `densities` (round_densities): the header's kept-per-chunk
// names which (written to *density when given), and a count no rung keeps is refused before
// anything is allocated. Fewer than two densities: decode_round above.
at::Tensor decode_round(const at::Tensor& wire, const config::DilocoConfig& d,
                        at::IntArrayRef shape, const std::vector<double>& densities,
                        double* density = nullptr);
// The densities a run's sparse rounds may come in: with swarm.compression = auto and
// diloco.compress = topk, policy::density_ladder's rungs above diloco.topk_density; else
// none (the run's one density).
std::vector<double> round_densities(const config::RunConfig& config);

}  // namespace swarmrt::model
