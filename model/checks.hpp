// Checks of numbers that came from a peer, before they are used (architecture §8): a NaN or Inf in
// a gradient or pseudo-gradient would spread to every replica's parameters at the next step or
// round, so such a contribution is refused, never applied.
#pragma once

#include <ATen/core/Tensor.h>
#include <string>
#include <vector>

namespace swarmrt::model {

// Empty when every tensor holds only finite values; otherwise which one does not, named from
// `names` when given (same order) or by its index.
std::string nonfinite_tensor(const std::vector<at::Tensor>& tensors,
                             const std::vector<std::string>& names = {});

}  // namespace swarmrt::model
