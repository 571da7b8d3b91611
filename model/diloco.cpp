#include "model/diloco.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <stdexcept>

namespace swarmrt::model {

OuterNesterov::OuterNesterov(NamedTensors theta, double lr, double momentum)
    : theta_(std::move(theta)), lr_(lr), mu_(momentum) {
  for (const auto& [name, t] : theta_) momentum_.emplace_back(name, at::zeros_like(t));
}

const NamedTensors& OuterNesterov::step(const std::vector<const NamedTensors*>& deltas) {
  if (deltas.empty()) throw std::invalid_argument("outer step needs at least one pseudo-gradient");
  for (const auto* d : deltas)
    if (d->size() != theta_.size())
      throw std::invalid_argument("pseudo-gradient has " + std::to_string(d->size()) +
                                  " tensors, theta has " + std::to_string(theta_.size()));
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < theta_.size(); ++i) {
    auto& [name, theta] = theta_[i];
    auto delta = at::zeros_like(theta);
    for (const auto* d : deltas) {
      if ((*d)[i].first != name || !(*d)[i].second.sizes().equals(theta.sizes()))
        throw std::invalid_argument("pseudo-gradient entry '" + (*d)[i].first +
                                    "' does not match theta entry '" + name + "'");
      delta.add_((*d)[i].second);
    }
    delta.div_(static_cast<double>(deltas.size()));
    auto& b = momentum_[i].second;
    b.mul_(mu_).add_(delta);              // b = μ·b + Δ
    theta.sub_(lr_ * (delta + mu_ * b));  // θ = θ − η·(Δ + μ·b)
  }
  return theta_;
}

void OuterNesterov::restore(NamedTensors theta, NamedTensors momentum) {
  theta_ = std::move(theta);
  momentum_ = std::move(momentum);
}

NamedTensors pseudo_gradient(const NamedTensors& anchor, const torch::nn::Module& module) {
  NamedTensors out;
  auto params = module.named_parameters();
  for (const auto& [name, a] : anchor) {
    const auto* p = params.find(name);
    if (!p) throw std::invalid_argument("module has no parameter '" + name + "'");
    out.emplace_back(name, a - p->detach());
  }
  return out;
}

void assign_parameters(torch::nn::Module& module, const NamedTensors& values) {
  at::NoGradGuard no_grad;
  auto params = module.named_parameters();
  for (const auto& [name, v] : values) {
    auto* p = params.find(name);
    if (!p) throw std::invalid_argument("module has no parameter '" + name + "'");
    p->copy_(v);
  }
}

}  // namespace swarmrt::model
