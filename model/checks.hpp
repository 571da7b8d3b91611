// Checks of numbers that came from a peer, before they are used (architecture §8): a NaN or Inf in
// a gradient or pseudo-gradient would spread to every replica's parameters at the next step or
// round, so such a contribution is refused, never applied.
#pragma once

#include <ATen/core/Tensor.h>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace swarmrt::model {

// Empty when every tensor holds only finite values; otherwise which one does not, named from
// `names` when given (same order) or by its index.
std::string nonfinite_tensor(const std::vector<at::Tensor>& tensors,
                             const std::vector<std::string>& names = {});

// Spot checks of stage work (docs/security.md): how far `got` is from `want`, as the RMS of
// their difference over the RMS of `want`, computed in float32 (0 when both are all zeros,
// infinite when `want` is and `got` is not, or when their shapes differ).
double relative_difference(const at::Tensor& got, const at::Tensor& want);

// The relative difference a spot check allows between two honest workers' outputs of the same
// input: `configured` when above 0, else what the run's compute precision and hop encoding
// leave between them (sums taken in another order on other hardware, a quantization step
// rounded the other way). Noise of a tenth of a tensor's RMS and more stands out in all of
// them except int4 and int3 hops.
double spot_check_tolerance(config::Precision precision, config::HopEncoding encoding,
                            double configured);

}  // namespace swarmrt::model
