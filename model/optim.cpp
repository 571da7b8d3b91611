#include "model/optim.hpp"

#include <torch/utils.h>
#include <cmath>
#include <map>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include "model/torch_features.hpp"

namespace swarmrt::model {

std::unique_ptr<torch::optim::AdamW> make_adamw(torch::nn::Module& module,
                                                const config::TrainConfig& t) {
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

double lr_at(int64_t step, const config::TrainConfig& t) {
  if (t.warmup_steps > 0 && step <= t.warmup_steps)
    return t.lr * static_cast<double>(step) / static_cast<double>(t.warmup_steps);
  if (t.schedule == config::Schedule::constant) return t.lr;
  const double span = static_cast<double>(std::max<int64_t>(1, t.steps - t.warmup_steps));
  const double progress = std::min(1.0, static_cast<double>(step - t.warmup_steps) / span);
  return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + std::cos(M_PI * progress));
}

void set_lr(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups()) group.options().set_lr(lr);
}

namespace {

// The key the optimizer's state map gives parameter p: its TensorImpl's address, as text in
// LibTorch 1.13 and as the pointer itself in later ones.
template <class Map>
typename Map::key_type state_key(const Map&, const at::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream s;
    s << p.unsafeGetTensorImpl();
    return s.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

bool fused_adamw_on(const at::Device& device) {
  return device.is_cuda() ? SWARMRT_HAS_FUSED_ADAMW_CUDA : SWARMRT_HAS_FUSED_ADAMW_CPU;
}

#if SWARMRT_HAS_FUSED_ADAMW_CUDA
// One group's step through at::_fused_adamw_: the same update as torch::optim::AdamW::step
// (decoupled weight decay, bias-corrected moments), one kernel for all of the group's
// parameters instead of about ten per parameter. Its state stays the optimizer's own, so
// checkpoints and a state handed to a peer are unchanged.
void fused_group_step(torch::optim::AdamW& opt, torch::optim::OptimizerParamGroup& group) {
  auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
  TORCH_CHECK(!o.amsgrad(), "the fused AdamW step takes no amsgrad");
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
  std::map<int64_t, at::Tensor> step_of;  // one device scalar per step count
  auto& state = opt.state();
  for (auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    auto key = state_key(state, p);
    auto it = state.find(key);
    if (it == state.end()) {
      auto fresh = std::make_unique<torch::optim::AdamWParamState>();
      fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
      fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
      it = state.emplace(key, std::move(fresh)).first;
    }
    auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
    st.step(st.step() + 1);
    auto& step = step_of[st.step()];
    if (!step.defined())
      step = at::full({}, static_cast<double>(st.step()), p.options().dtype(at::kFloat));
    params.push_back(p);
    grads.push_back(p.grad());
    exp_avgs.push_back(st.exp_avg());
    exp_avg_sqs.push_back(st.exp_avg_sq());
    steps.push_back(step);
  }
  if (params.empty()) return;
  at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, o.lr(),
                    std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps(),
                    /*amsgrad=*/false, /*maximize=*/false);
}
#endif

}  // namespace

void adamw_step(torch::optim::AdamW& opt) {
  torch::NoGradGuard no_grad;
  bool fused = false;
  for (const auto& group : opt.param_groups())
    for (const auto& p : group.params()) fused = fused || fused_adamw_on(p.device());
  if (!fused) {
    opt.step();
    return;
  }
#if SWARMRT_HAS_FUSED_ADAMW_CUDA
  for (auto& group : opt.param_groups()) fused_group_step(opt, group);
#endif
}

bool adamw_is_fused(const at::Device& device) {
  return fused_adamw_on(device);
}

NamedTensors adamw_moments(torch::optim::AdamW& opt) {
  NamedTensors out;
  auto& state = opt.state();
  size_t i = 0;
  for (const auto& group : opt.param_groups())
    for (const auto& p : group.params()) {
      const auto name = std::to_string(i++);
      auto it = state.find(state_key(state, p));
      if (it == state.end()) {
        out.emplace_back(name + ".step", at::full({}, int64_t{-1}, at::kLong));
        out.emplace_back(name + ".exp_avg", at::empty({0}));
        out.emplace_back(name + ".exp_avg_sq", at::empty({0}));
        continue;
      }
      auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
      TORCH_CHECK(!st.max_exp_avg_sq().defined(), "amsgrad's state is not carried");
      out.emplace_back(name + ".step", at::full({}, st.step(), at::kLong));
      out.emplace_back(name + ".exp_avg", st.exp_avg().detach().to(at::kCPU).clone());
      out.emplace_back(name + ".exp_avg_sq", st.exp_avg_sq().detach().to(at::kCPU).clone());
    }
  return out;
}

void load_adamw_moments(torch::optim::AdamW& opt, const NamedTensors& moments,
                        const at::Device& device) {
  std::vector<at::Tensor> params;
  for (const auto& group : opt.param_groups())
    for (const auto& p : group.params()) params.push_back(p);
  if (moments.size() != 3 * params.size())
    throw std::invalid_argument("an optimizer state of " + std::to_string(moments.size()) +
                                " tensors for " + std::to_string(params.size()) + " parameters");
  // Checked whole before anything changes, so a state refused leaves the optimizer as it was.
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [sname, step] = moments[3 * i];
    const auto name = std::to_string(i);
    if (sname != name + ".step" || moments[3 * i + 1].first != name + ".exp_avg" ||
        moments[3 * i + 2].first != name + ".exp_avg_sq" || step.numel() != 1 ||
        step.scalar_type() != at::kLong)
      throw std::invalid_argument("optimizer state entry " + sname + " is out of place");
    if (step.item<int64_t>() < 0) continue;
    for (int k = 1; k <= 2; ++k)
      if (moments[3 * i + k].second.sizes() != params[i].sizes())
        throw std::invalid_argument("optimizer state " + moments[3 * i + k].first + " has shape " +
                                    c10::str(moments[3 * i + k].second.sizes()) +
                                    ", its parameter " + c10::str(params[i].sizes()));
  }
  auto& state = opt.state();
  state.clear();
  for (size_t i = 0; i < params.size(); ++i) {
    const int64_t step = moments[3 * i].second.item<int64_t>();
    if (step < 0) continue;
    auto fresh = std::make_unique<torch::optim::AdamWParamState>();
    const auto options = params[i].options().device(device);
    fresh->step(step);
    fresh->exp_avg(moments[3 * i + 1].second.to(options, /*non_blocking=*/false, /*copy=*/true));
    fresh->exp_avg_sq(moments[3 * i + 2].second.to(options, false, true));
    state.emplace(state_key(state, params[i]), std::move(fresh));
  }
}

void zero_grads(torch::optim::Optimizer& opt) {
  // Dropped rather than zeroed: the next backward writes the gradient instead of adding to
  // zeros, one pass over every parameter less, and the sum is the same bit for bit.
  for (auto& group : opt.param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) p.mutable_grad().reset();
}

namespace {

std::vector<at::Tensor> defined_grads(const std::vector<torch::Tensor>& params) {
  std::vector<at::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return grads;
}

}  // namespace

double grad_sqnorm(const std::vector<torch::Tensor>& params) {
  const auto grads = defined_grads(params);
  if (grads.empty()) return 0;
  // Every norm in one launch and one read: a read per parameter waits for the device each
  // time. Summed on the host in parameter order, in double, as one norm after another was.
  const auto norms = at::stack(at::_foreach_norm(grads, 2)).to(at::kDouble).to(at::kCPU);
  const auto* n = norms.data_ptr<double>();
  double sq = 0;
  for (int64_t i = 0; i < norms.numel(); ++i) sq += n[i] * n[i];
  return sq;
}

double clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

void scale_grads(const std::vector<torch::Tensor>& params, double factor) {
  if (factor == 1.0) return;
  torch::NoGradGuard no_grad;
  auto grads = defined_grads(params);
  if (!grads.empty()) at::_foreach_mul_(grads, factor);
}

double clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  const double norm = std::sqrt(grad_sqnorm(params));
  scale_grads(params, clip_coefficient(norm, max_norm));
  return norm;
}

}  // namespace swarmrt::model
