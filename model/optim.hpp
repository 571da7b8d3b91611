// Inner optimizer (AdamW), learning-rate schedule and gradient clipping.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/adamw.h>
#include <memory>

#include "config/config.hpp"
#include "model/checkpoint.hpp"

namespace swarmrt::model {

// AdamW over `module`'s parameters with the config's betas; weight decay applies to
// matrices and embeddings only (dim >= 2), never to biases or LayerNorm gains.
std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& module,
                                                const config::TrainConfig& t);

// Learning rate at 1-based step `step`: linear warmup to train.lr over warmup_steps, then
// constant, or cosine decay to train.min_lr at train.steps.
double lr_at(int64_t step, const config::TrainConfig& t);

void set_lr(torch::optim::Optimizer& opt, double lr);

// One AdamW step: torch::optim::AdamW's own, or where this LibTorch fuses AdamW on the
// parameters' device (torch_features.hpp: CUDA from 2.0, the CPU from 2.4) the same update as
// one fused kernel per parameter group, on the optimizer's own state.
void adamw_step(torch::optim::AdamW& opt);
// Whether adamw_step fuses for parameters on `device` in this build.
bool adamw_is_fused(const at::Device& device);

// AdamW's state as plain named tensors, parameter by parameter in the optimizer's order:
// "<i>.step" (an int64 scalar; -1 where the parameter has no state yet), "<i>.exp_avg" and
// "<i>.exp_avg_sq" (empty then). Equal on any two workers that hold equal states, where the
// torch-serialized optimizer (optimizer_bytes) is not: it names each parameter's state by the
// tensor's address in memory. A state fetched from several donors is assembled from bytes
// that must match between them (actors/recovery/).
NamedTensors adamw_moments(torch::optim::AdamW& opt);
// Sets AdamW's state from adamw_moments' tensors (moved to `device`); throws
// std::invalid_argument naming the first entry that does not fit this optimizer.
void load_adamw_moments(torch::optim::AdamW& opt, const NamedTensors& moments,
                        const at::Device& device);

// Drops every parameter's gradient (the next backward writes a fresh one).
void zero_grads(torch::optim::Optimizer& opt);

// Scales gradients so their global L2 norm is at most max_norm (0 disables); returns the
// norm before clipping. Built from the three pieces below, which a pipeline uses to clip by
// the norm over all of its stages.
double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

// Sum of squares of all gradients (accumulated in double).
double grad_sqnorm(const std::vector<torch::Tensor>& params);
// The factor clipping multiplies gradients by: min(1, max_norm / (norm + 1e-6)); 1 if disabled.
double clip_coefficient(double norm, double max_norm);
void scale_grads(const std::vector<torch::Tensor>& params, double factor);

}  // namespace swarmrt::model
