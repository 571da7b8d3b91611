#include "model/outer_round.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <stdexcept>

#include "model/fragments.hpp"
#include "model/robust_mean.hpp"
#include "model/topk.hpp"

namespace swarmrt::model {

OuterRound::OuterRound(NamedTensors theta, const config::RunConfig& config)
    : d_(config.diloco),
      densities_(round_densities(config)),
      first_m_(std::max<int64_t>(1, config.swarm.workers_per_stage)),
      total_steps_(config.train.steps),
      outer_(std::move(theta), config.diloco.outer_lr, config.diloco.outer_momentum) {}

void OuterRound::restore(NamedTensors theta, NamedTensors momentum, NamedTensors residual) {
  outer_.restore(std::move(theta), std::move(momentum));
  residual_ = std::move(residual);
}

std::string OuterRound::decode(const std::vector<std::string>& names,
                               const std::vector<at::Tensor>& tensors, NamedTensors& delta,
                               bool& excuse, double* density) const {
  const auto& theta = outer_.theta();
  if (names.size() != theta.size() || tensors.size() != theta.size())
    return "wrong number of tensors";
  for (size_t i = 0; i < theta.size(); ++i) {
    if (names[i] != theta[i].first)
      return "tensor '" + names[i] + "' mismatches θ's name, shape or dtype";
    if (!d_.encoded()) {
      if (!tensors[i].sizes().equals(theta[i].second.sizes()) ||
          tensors[i].scalar_type() != theta[i].second.scalar_type())
        return "tensor '" + names[i] + "' mismatches θ's name, shape or dtype";
      delta.emplace_back(names[i], tensors[i]);
      continue;
    }
    try {
      double rung = 0;
      delta.emplace_back(names[i],
                         decode_round(tensors[i], d_, theta[i].second.sizes(), densities_, &rung));
      if (density) *density = i == 0 ? rung : std::min(*density, rung);
    } catch (const std::invalid_argument& e) {
      excuse = true;
      return "tensor '" + names[i] + "' (" + d_.encoding() + "): " + e.what();
    }
  }
  return "";
}

// Quantized answers: θ(t) − θ(t−1) in the run's encoding (with the error of the last one
// carried in), and θ(t) set to θ(t−1) plus exactly what the workers will decode.
std::vector<at::Tensor> OuterRound::encode_update(const NamedTensors& before,
                                                  const config::DilocoConfig& d) {
  NamedTensors applied;
  std::vector<at::Tensor> wire;
  const auto& after = outer_.theta();
  for (size_t k = 0; k < after.size(); ++k) {
    auto u = after[k].second - before[k].second;
    if (d.error_feedback && k < residual_.size()) u += residual_[k].second;
    auto encoded = encode_round(u, d);
    auto decoded = decode_round(encoded, d, u.sizes());
    if (d.error_feedback) {
      if (residual_.size() <= k) residual_.resize(k + 1);
      residual_[k] = {after[k].first, u - decoded};
    }
    applied.emplace_back(after[k].first, before[k].second + decoded);
    wire.push_back(encoded);
  }
  outer_.restore(std::move(applied), outer_.momentum());
  return wire;
}

// An eager group's answer: the round's mean pseudo-gradient Δ̄ in the run's encoding. Every
// worker decodes the same bits, so their eager steps use the same mean.
std::vector<at::Tensor> OuterRound::encode_mean(
    const std::map<uint32_t, NamedTensors>& contributions) const {
  std::vector<at::Tensor> wire;
  for (size_t k = 0; k < outer_.theta().size(); ++k) {
    auto mean = at::zeros_like(outer_.theta()[k].second);
    for (const auto& [id, delta] : contributions) mean.add_(delta[k].second);
    mean.div_(static_cast<double>(contributions.size()));
    wire.push_back(d_.encoded() ? encode_round(mean, d_) : mean);
  }
  return wire;
}

// Eager: each contributor's Δ̃_i as its worker stepped with it at the round's start, from the
// last round's mean (rounds are applied in order, so it is the round before this one; a
// restarted group has none and sums afresh).
std::vector<NamedTensors> OuterRound::eager_deltas(
    const std::map<uint32_t, NamedTensors>& contributions) const {
  const bool have_mean = !last_mean_.empty();
  std::vector<NamedTensors> out;
  for (const auto& [id, delta] : contributions) {
    const NamedTensors* own = nullptr;
    if (auto it = last_contributions_.find(id); have_mean && it != last_contributions_.end())
      own = &it->second;
    out.push_back(eager_delta(delta, have_mean ? &last_mean_ : nullptr,
                              have_mean ? last_contributions_.size() : 0, own,
                              static_cast<size_t>(first_m_)));
  }
  return out;
}

std::vector<at::Tensor> gathered_update(const std::vector<std::vector<at::Tensor>>& deltas,
                                        double lr) {
  if (deltas.empty()) throw std::invalid_argument("a round needs a contribution");
  std::vector<at::Tensor> update;
  for (size_t k = 0; k < deltas[0].size(); ++k) {
    auto sum = deltas[0][k].to(at::kFloat).clone();
    for (size_t i = 1; i < deltas.size(); ++i) sum.add_(deltas[i].at(k));
    update.push_back(sum.mul_(-lr / static_cast<double>(deltas.size())));
  }
  return update;
}

// All-gather: the plain mean's step from the contributions as every member decodes them; the
// answer is who was in it (apply_round sends each member the others' wires).
RoundAnswer OuterRound::apply_gathered(const std::map<uint32_t, NamedTensors>& contributions,
                                       uint64_t step) {
  RoundAnswer answer;
  std::vector<std::vector<at::Tensor>> deltas;
  for (const auto& [id, delta] : contributions) {
    answer.contributors.push_back(id);
    deltas.emplace_back();
    for (const auto& [name, t] : delta) deltas.back().push_back(t);
  }
  const auto u = gathered_update(deltas, outer_lr_at(step, d_, total_steps_));
  NamedTensors applied;
  for (size_t k = 0; k < outer_.theta().size(); ++k)
    applied.emplace_back(outer_.theta()[k].first, outer_.theta()[k].second + u[k]);
  outer_.restore(std::move(applied), outer_.momentum());
  answer.update = true;
  answer.gathered = true;
  return answer;
}

RoundAnswer OuterRound::apply(const std::map<uint32_t, NamedTensors>& contributions, uint64_t step,
                              bool final, double density) {
  if (contributions.empty()) throw std::invalid_argument("a round needs a contribution");
  if (d_.all_gather) return apply_gathered(contributions, step);
  const bool quantized = d_.encoded();
  // An eager group answers the last step's round with θ(t) itself, which every worker takes:
  // an eager worker's anchor is its own, not the group's θ(t−1) an update would be added to.
  // (Without eager every anchor is θ(t−1), and a quantized update serves as in any round.)
  const bool whole_theta = final && d_.eager;
  const bool eager = d_.eager && !whole_theta;
  RoundAnswer answer;
  if (eager) {
    answer.tensors = encode_mean(contributions);
    answer.average = true;
    for (const auto& [id, delta] : contributions) answer.contributors.push_back(id);
  }
  NamedTensors before;
  if (quantized && !eager && !whole_theta)
    for (const auto& [name, t] : outer_.theta()) before.emplace_back(name, t.clone());
  // θ is what joining and restarted workers start from, and what the last step hands every
  // worker: the exact mean's outer step, or with eager steps the mean of the workers' own.
  const auto tilde = eager ? eager_deltas(contributions) : std::vector<NamedTensors>{};
  std::vector<const NamedTensors*> deltas;
  if (eager)
    for (const auto& t : tilde) deltas.push_back(&t);
  else
    for (const auto& [id, delta] : contributions) deltas.push_back(&delta);
  outer_.set_lr(outer_lr_at(step, d_, total_steps_));
  if (d_.aggregate == config::Aggregate::mean || eager) {
    outer_.step(deltas);
  } else {
    // A robust Δ (model/robust_mean.hpp) in place of the mean: the outer step of it alone.
    const auto robust = aggregate(deltas, d_);
    outer_.step({&robust});
  }
  if (eager) {
    last_mean_.clear();
    for (size_t k = 0; k < answer.tensors.size(); ++k) {
      const auto& [name, theta] = outer_.theta()[k];
      last_mean_.emplace_back(name, quantized ? decode_round(answer.tensors[k], d_, theta.sizes())
                                              : answer.tensors[k].clone());
    }
    last_contributions_ = contributions;
  }
  if (!eager && quantized && !whole_theta) {
    auto d = d_;
    if (density > 0 && !densities_.empty()) d.topk_density = density;
    answer.tensors = encode_update(before, d);
    answer.update = true;
  } else if (!eager) {
    for (const auto& [name, t] : outer_.theta()) answer.tensors.push_back(t);
  }
  return answer;
}

}  // namespace swarmrt::model
