#include "model/checks.hpp"

#include <ATen/ATen.h>

namespace swarmrt::model {

std::string nonfinite_tensor(const std::vector<at::Tensor>& tensors,
                             const std::vector<std::string>& names) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (!t.defined() || !t.is_floating_point()) continue;
    if (at::isfinite(t).all().item<bool>()) continue;
    const std::string which = i < names.size() ? "'" + names[i] + "'" : "#" + std::to_string(i);
    return "tensor " + which + " holds NaN or Inf values";
  }
  return {};
}

}  // namespace swarmrt::model
