#include "model/diloco.hpp"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <algorithm>
#include <stdexcept>
#include <string>

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

NamedTensors eager_delta(const NamedTensors& own, const NamedTensors* prev_mean, size_t n,
                         const NamedTensors* prev_own, size_t first_m) {
  auto check = [&](const NamedTensors* other, const char* what) {
    if (!other) return;
    if (other->size() != own.size())
      throw std::invalid_argument(std::string(what) + " has " + std::to_string(other->size()) +
                                  " tensors, the pseudo-gradient " + std::to_string(own.size()));
    for (size_t k = 0; k < own.size(); ++k)
      if ((*other)[k].first != own[k].first ||
          !(*other)[k].second.sizes().equals(own[k].second.sizes()))
        throw std::invalid_argument(std::string(what) + " entry '" + (*other)[k].first +
                                    "' does not match '" + own[k].first + "'");
  };
  check(prev_mean, "the last round's mean");
  check(prev_own, "the last round's own pseudo-gradient");
  if (prev_mean && n == 0) throw std::invalid_argument("a mean over no contributor");
  const double m = !prev_mean ? static_cast<double>(std::max<size_t>(first_m, 1))
                   : prev_own ? static_cast<double>(n)
                              : static_cast<double>(n + 1);
  at::NoGradGuard no_grad;
  NamedTensors out;
  for (size_t k = 0; k < own.size(); ++k) {
    auto sum = own[k].second.clone();
    if (prev_mean) sum.add_((*prev_mean)[k].second, static_cast<double>(n));
    if (prev_mean && prev_own) sum.sub_((*prev_own)[k].second);
    out.emplace_back(own[k].first, sum.div_(m));
  }
  return out;
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
