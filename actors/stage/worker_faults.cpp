#include "actors/stage/worker_faults.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <thread>

namespace swarmrt::actors {

void WorkerFaults::configure(double drop_fraction, uint64_t seed, double slow_factor,
                             int64_t nan_at_step) {
  drop_fraction_ = drop_fraction;
  rng_.seed(seed);
  slow_factor_ = slow_factor;
  nan_at_step_ = nan_at_step > 0 ? static_cast<uint64_t>(nan_at_step) : 0;
}

bool WorkerFaults::drop_hop() {
  if (drop_fraction_ <= 0 ||
      std::uniform_real_distribution<double>(0.0, 1.0)(rng_) >= drop_fraction_)
    return false;
  ++dropped_;
  return true;
}

void WorkerFaults::slow_down(Clock::time_point started) const {
  if (slow_factor_ <= 1.0) return;
  const auto spent = Clock::now() - started;
  std::this_thread::sleep_for(spent * (slow_factor_ - 1.0));
}

bool WorkerFaults::poisons_gradient(uint64_t step) const {
  return nan_at_step_ > 0 && step == nan_at_step_;
}

bool WorkerFaults::poisons_round(uint64_t step, uint64_t inner_steps) const {
  return nan_at_step_ > 0 && nan_at_step_ <= step && nan_at_step_ + inner_steps > step;
}

void WorkerFaults::set_malice(config::Malicious kind, uint64_t from_step, double scale) {
  malice_ = kind;
  malice_from_ = from_step;
  malice_scale_ = scale;
}

void WorkerFaults::misbehave(uint64_t step, std::vector<at::Tensor>& tensors) {
  if (malice_ == config::Malicious::none || malice_ == config::Malicious::stale ||
      step < malice_from_)
    return;
  at::NoGradGuard no_grad;
  if (malice_ != config::Malicious::random) {
    const double factor = malice_ == config::Malicious::sign_flip ? -malice_scale_ : malice_scale_;
    for (auto& t : tensors) t = t * factor;
    return;
  }
  // Noise as large as malicious_scale times the honest Δ, drawn from this worker's seed.
  double sq = 0;
  int64_t numel = 0;
  for (const auto& t : tensors) {
    sq += t.to(at::kDouble).pow(2).sum().item<double>();
    numel += t.numel();
  }
  const double sigma = numel > 0 ? malice_scale_ * std::sqrt(sq / static_cast<double>(numel)) : 0;
  auto gen = at::detail::createCPUGenerator(rng_());
  for (auto& t : tensors) t = at::randn(t.sizes(), gen, t.options()) * sigma;
}

void WorkerFaults::set_hop_noise(double relative, uint64_t from_step) {
  hop_noise_ = relative;
  hop_noise_from_ = from_step;
}

void WorkerFaults::noise_hop(uint64_t step, at::Tensor& hidden) {
  if (hop_noise_ <= 0 || step < hop_noise_from_ || hidden.numel() == 0) return;
  at::NoGradGuard no_grad;
  // Tensor arithmetic only: a hop on a device is not read back to size its noise.
  const auto rms = hidden.to(at::kFloat).pow(2).mean().sqrt();
  at::Tensor noise;
  if (hidden.is_cpu()) {
    auto gen = at::detail::createCPUGenerator(rng_());  // reproducible: the worker's seed
    noise = at::randn(hidden.sizes(), gen, hidden.options().dtype(at::kFloat));
  } else {
    noise = at::randn(hidden.sizes(), hidden.options().dtype(at::kFloat));
  }
  hidden = (hidden.to(at::kFloat) + noise * (rms * hop_noise_)).to(hidden.scalar_type());
}

void WorkerFaults::poison(std::vector<at::Tensor>& tensors) {
  if (tensors.empty() || tensors[0].numel() == 0) return;
  tensors[0] = tensors[0].clone();
  tensors[0].view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
}

}  // namespace swarmrt::actors
