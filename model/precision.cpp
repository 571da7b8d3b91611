#include "model/precision.hpp"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/utils.h>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "model/torch_features.hpp"

namespace swarmrt::model {

at::ScalarType compute_dtype(config::Precision p) {
  switch (p) {
    case config::Precision::bf16:
      return at::kBFloat16;
    case config::Precision::fp16:
      return at::kHalf;
    case config::Precision::fp32:
      break;
  }
  return at::kFloat;
}

namespace {

// LibTorch 2.4 replaced the per-backend autocast calls (is_cpu_enabled, set_autocast_gpu_dtype,
// ...) by ones that take the device type, and warns on every call of the old ones: a stage
// worker enters autocast once per hop, so the old names would fill a GPU node's log.
#if SWARMRT_HAS_DEVICE_AUTOCAST
bool autocast_enabled(bool cuda) {
  return at::autocast::is_autocast_enabled(cuda ? at::kCUDA : at::kCPU);
}
void set_autocast(bool cuda, bool on) {
  at::autocast::set_autocast_enabled(cuda ? at::kCUDA : at::kCPU, on);
}
at::ScalarType autocast_dtype(bool cuda) {
  return at::autocast::get_autocast_dtype(cuda ? at::kCUDA : at::kCPU);
}
void set_autocast_dtype(bool cuda, at::ScalarType t) {
  at::autocast::set_autocast_dtype(cuda ? at::kCUDA : at::kCPU, t);
}
#else
bool autocast_enabled(bool cuda) {
  return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
void set_autocast(bool cuda, bool on) {
  if (cuda)
    at::autocast::set_enabled(on);
  else
    at::autocast::set_cpu_enabled(on);
}
at::ScalarType autocast_dtype(bool cuda) {
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
void set_autocast_dtype(bool cuda, at::ScalarType t) {
  if (cuda)
    at::autocast::set_autocast_gpu_dtype(t);
  else
    at::autocast::set_autocast_cpu_dtype(t);
}
#endif

}  // namespace

Autocast::Autocast(config::Precision p, c10::Device device) {
  if (p == config::Precision::fp32) return;
  cuda_ = device.is_cuda();
  // This LibTorch's CPU autocast takes bf16 only ("AutocastCPU only support Bfloat16"): fp16
  // is refused before a run starts (check_precision), so this is a caller's mistake.
  if (!cuda_ && p == config::Precision::fp16)
    throw std::invalid_argument("fp16 autocast needs a CUDA device");
  on_ = true;
  was_enabled_ = autocast_enabled(cuda_);
  was_dtype_ = autocast_dtype(cuda_);
  set_autocast_dtype(cuda_, compute_dtype(p));
  set_autocast(cuda_, true);
  at::autocast::increment_nesting();
}

Autocast::~Autocast() {
  if (!on_) return;
  // Leaving the outermost region drops the weights' cached casts, as torch.autocast does:
  // the next forward casts the updated weights again.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(cuda_, was_enabled_);
  set_autocast_dtype(cuda_, was_dtype_);
}

at::Tensor to_compute_dtype(const at::Tensor& x) {
  const bool cuda = x.is_cuda();
  return autocast_enabled(cuda) ? x.to(autocast_dtype(cuda)) : x;
}

bool LossScaler::update(bool finite) {
  if (!finite) {
    scale_ *= kBackoff;
    good_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_ >= kGrowthInterval) {
    scale_ *= kGrowth;
    good_ = 0;
  }
  return true;
}

bool unscale_grads(const std::vector<at::Tensor>& params, double scale) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return true;
  if (grads[0].is_cuda()) {
    // GradScaler's own kernel: unscales every gradient and flags a non-finite value, in one
    // launch, read once.
    const auto opts = grads[0].options().dtype(at::kFloat);
    auto found_inf = at::zeros({1}, opts);
    at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf,
                                                   at::full({1}, 1.0 / scale, opts));
    return found_inf.item<float>() == 0;
  }
  if (scale != 1.0) at::_foreach_mul_(grads, 1.0 / scale);
  // One read for all of them: each .item() would wait for the device.
  std::vector<at::Tensor> finite;
  finite.reserve(grads.size());
  for (const auto& g : grads) finite.push_back(at::isfinite(g).all());
  return at::stack(finite).all().item<bool>();
}

at::Tensor overflowed(const at::Tensor& loss) {
  return loss * std::numeric_limits<double>::infinity();
}

std::string check_precision(config::Precision p, const c10::Device& device) {
  if (p == config::Precision::fp16 && !device.is_cuda())
    return "train.precision = \"fp16\" needs a CUDA device: this LibTorch autocasts the CPU "
           "to bf16 only (use \"bf16\" on the CPU, or \"fp16\" with --device cuda:K)";
  return "";
}

std::string slow_bf16_reason() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    std::string w;
    while (words >> w)
      if (w == "avx512_bf16" || w == "amx_bf16") return "";
    return "this CPU has neither AVX-512 BF16 nor AMX: its bf16 GEMMs convert every element and "
           "run far below fp32 (bench/gemm_dtype.sh)";
  }
  return "";
}

}  // namespace swarmrt::model
