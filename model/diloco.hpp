// DiLoCo's outer optimizer (Douillard et al. 2023): SGD with Nesterov momentum applied to
// the average pseudo-gradient of the replicas that reported in time.
//
//   Δ_i  = θ(t-1) − θ_i                 pseudo-gradient of replica i
//   Δ    = (1/|Q|) Σ_{i∈Q} Δ_i
//   b    = μ·b + Δ
//   θ(t) = θ(t-1) − η·(Δ + μ·b)
#pragma once

#include <vector>

#include "model/checkpoint.hpp"

namespace torch::nn {
class Module;
}

namespace swarmrt::model {

class OuterNesterov {
 public:
  OuterNesterov(NamedTensors theta, double lr, double momentum);

  // Applies one outer round to θ and returns θ(t). Every delta must have θ's names and shapes.
  const NamedTensors& step(const std::vector<const NamedTensors*>& deltas);

  // The learning rate of the steps from here on (diloco.outer_lr_schedule).
  void set_lr(double lr) { lr_ = lr; }

  const NamedTensors& theta() const { return theta_; }
  const NamedTensors& momentum() const { return momentum_; }
  void restore(NamedTensors theta, NamedTensors momentum);

 private:
  NamedTensors theta_, momentum_;
  double lr_, mu_;
};

// The eager pseudo-gradient (Kale et al. 2025) worker i steps with at the start of round r,
// while its own Δ_i(r) is still on the wire:
//   Δ̃_i = (Δ_i(r) + Σ_{j≠i} Δ_j(r−1)) / M
// The others' term comes from the last round's mean Δ̄(r−1) over its n contributors:
// Σ_{j≠i} Δ_j(r−1) = n·Δ̄(r−1) − Δ_i(r−1) when i was one of them (prev_own), n·Δ̄(r−1)
// otherwise (prev_own null), and M = n, or n + 1 when i was not. With no mean yet (prev_mean
// null: the first round) the others' term is zero and M = first_m, the stage's workers.
NamedTensors eager_delta(const NamedTensors& own, const NamedTensors* prev_mean, size_t n,
                         const NamedTensors* prev_own, size_t first_m);

// Δ_i = anchor − θ_i for the module's parameters (anchor: the θ(t-1) the replica started from).
NamedTensors pseudo_gradient(const NamedTensors& anchor, const torch::nn::Module& module);

// Copies named tensors into the module's parameters of the same names.
void assign_parameters(torch::nn::Module& module, const NamedTensors& values);

}  // namespace swarmrt::model
