#include "model/optim.hpp"

#include <torch/utils.h>
#include <cmath>

namespace swarmrt::model {

std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& module, const TrainConfig& t) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : module.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).eps(1e-8).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(t.weight_decay));
  groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<torch::optim::AdamW>(std::move(groups), torch::optim::AdamWOptions(t.lr));
}

double lr_at(int64_t step, const TrainConfig& t) {
  if (t.warmup_steps > 0 && step <= t.warmup_steps)
    return t.lr * static_cast<double>(step) / static_cast<double>(t.warmup_steps);
  if (t.schedule == Schedule::constant) return t.lr;
  const double span = static_cast<double>(std::max<int64_t>(1, t.steps - t.warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(step - t.warmup_steps) / span);
  return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + std::cos(M_PI * progress));
}

void set_lr(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
}

double grad_sqnorm(const std::vector<torch::Tensor>& params) {
  double sq = 0;
  for (const auto& p : params)
    if (p.grad().defined()) {
      const double n = p.grad().norm().item<double>();
      sq += n * n;
    }
  return sq;
}

double clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

void scale_grads(const std::vector<torch::Tensor>& params, double factor) {
  if (factor == 1.0) return;
  torch::NoGradGuard no_grad;
  for (const auto& p : params)
    if (p.grad().defined()) p.grad().mul_(factor);
}

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  const double norm = std::sqrt(grad_sqnorm(params));
  scale_grads(params, clip_coefficient(norm, max_norm));
  return norm;
}

}  // namespace swarmrt::model
