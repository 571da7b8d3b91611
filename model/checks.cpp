#include "model/checks.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

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

double relative_difference(const at::Tensor& got, const at::Tensor& want) {
  if (!got.sizes().equals(want.sizes())) return std::numeric_limits<double>::infinity();
  const auto w = want.detach().to(at::kFloat);
  const double diff = (got.detach().to(at::kFloat) - w).pow(2).mean().sqrt().item<double>();
  const double scale = w.pow(2).mean().sqrt().item<double>();
  if (!std::isfinite(diff)) return std::numeric_limits<double>::infinity();
  if (scale == 0) return diff == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return diff / scale;
}

double spot_check_tolerance(config::Precision precision, config::HopEncoding encoding,
                            double configured) {
  if (configured > 0) return configured;
  // fp32: equal on equal kernels, 1e-6-ish across devices; bf16 keeps 8 bits of mantissa.
  double tolerance = precision == config::Precision::fp32   ? 1e-3
                     : precision == config::Precision::fp16 ? 1e-2
                                                            : 3e-2;
  switch (encoding) {
    case config::HopEncoding::none:
    case config::HopEncoding::bf16:
      break;
    case config::HopEncoding::int8:
      tolerance = std::max(tolerance, 2e-2);
      break;
    case config::HopEncoding::int4:
    case config::HopEncoding::int5_3:
    case config::HopEncoding::entropy:  // steps of 0.25 RMS forward: finer than int4's
      tolerance = std::max(tolerance, 0.1);
      break;
    case config::HopEncoding::int3:    // a 3-bit step is twice a 4-bit one
    case config::HopEncoding::int4_2:  // 2-bit gradients: a step of 2m/3
      tolerance = std::max(tolerance, 0.25);
      break;
  }
  return tolerance;
}

}  // namespace swarmrt::model
