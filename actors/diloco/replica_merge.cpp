// A round's arithmetic on the worker's side (replica.hpp): Δ encoded and sent, eager's local
// outer step, and an answer merged into the fragment (θ(t), an update added to the anchor, or
// eager's mean recorded for the next round).
#include <spdlog/spdlog.h>
#include <torch/nn/module.h>

#include <algorithm>

#include "actors/diloco/replica.hpp"
#include "model/diloco.hpp"
#include "model/fragments.hpp"
#include "model/outer_round.hpp"
#include "model/topk.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors {

void DilocoReplica::send_round(Self* self, uint32_t p, uint64_t step, std::vector<at::Tensor> delta,
                               model::StageModel* module, bool last, bool mean) {
  auto& f = fragments_[p];
  const auto& d = setup_.ctx->config.diloco;
  const bool quantized = d.encoded();
  if (comm_ && !mean) ++fallbacks_;
  messages::RoundHeader rh;
  rh.round_id = f.round;
  rh.stage = setup_.stage;
  rh.fragment = p;
  rh.contributor = setup_.id;
  rh.step = step;
  rh.final = last;
  if (mean) rh.contributors = ids_;
  std::vector<at::Tensor> tensors;  // Δ_p on the host: the group keeps θ in host memory
  for (size_t k = 0; k < f.index.size(); ++k) {
    rh.tensor_names.push_back(names_[f.index[k]]);
    tensors.push_back(delta[k].to(at::kCPU));
  }
  delta.clear();
  if (setup_.outgoing) setup_.outgoing(step, tensors);
  const bool eager = d.eager && !last && module;
  const auto fresh = eager ? tensors : std::vector<at::Tensor>{};
  auto dk = d;  // this round's settings: auto may choose its density (replica_density.cpp)
  if (quantized && !mean) dk.topk_density = choose_density(self, step, tensors);
  if (d.all_gather && !mean) rh.density = carried_;  // 0 unless auto chooses: no cap
  if (quantized) {
    if (f.residual.size() != tensors.size()) f.residual.assign(tensors.size(), {});
    for (size_t k = 0; k < tensors.size(); ++k) {
      auto v = tensors[k];
      if (d.error_feedback && f.residual[k].second.defined()) v = v + f.residual[k].second;
      tensors[k] = model::encode_round(v, dk);
      if (!d.error_feedback) continue;
      try {
        f.residual[k] = {rh.tensor_names[k], v - model::decode_round(tensors[k], dk, v.sizes())};
      } catch (const std::invalid_argument&) {
        f.residual[k] = {};  // a non-finite Δ (the group refuses it): nothing to carry
      }
    }
  }
  if (eager) {
    std::vector<at::Tensor> sent;  // what the group decodes
    for (size_t k = 0; k < tensors.size(); ++k)
      sent.push_back(quantized ? model::decode_round(tensors[k], dk, fresh[k].sizes())
                               : tensors[k]);
    eager_step(p, step, fresh, sent, *module);
  }
  auto frame = messages::make_round_frame(rh, std::move(tensors));
  if (d.all_gather) {
    f.wire = frame.tensors;
    f.wire_round = f.round;
  }
  // Kept by every worker in a group mean: sent again to a restarted group.
  f.sent = frame;
  if (mean && comm_->rank() != 0) return;  // the first worker sends the mean
  const uint64_t bytes = messages::payload_bytes(frame.tensors);
  count_sent(Traffic::pseudo_gradients, frame);
  f.bytes += bytes;
  if (bytes_step_ != step) step_bytes_ = 0;
  bytes_step_ = step;
  step_bytes_ += bytes;
  // The last step's consolidation of every fragment is not a training step's traffic.
  if (!last) peak_step_bytes_ = std::max(peak_step_bytes_, step_bytes_);
  transport::send_frame(self, setup_.group, messages::FrameKind::round, std::move(frame));
}

void DilocoReplica::eager_step(uint32_t p, uint64_t step, const std::vector<at::Tensor>& delta,
                               const std::vector<at::Tensor>& sent, model::StageModel& module) {
  auto& f = fragments_[p];
  const auto& d = setup_.ctx->config.diloco;
  model::NamedTensors own, anchor;
  for (size_t k = 0; k < f.index.size(); ++k) {
    own.emplace_back(names_[f.index[k]], delta[k]);
    anchor.emplace_back(names_[f.index[k]], anchor_[f.index[k]].second.to(at::kCPU).clone());
  }
  // The last mean counts when it is of the round before this one; this worker's own Δ of that
  // round is taken out of it only if the group had it.
  const bool have_mean = f.mean_round && *f.mean_round + 1 == f.round && !f.mean.empty();
  const bool was_in = have_mean && f.own_round && *f.own_round == *f.mean_round &&
                      std::count(f.mean_of.begin(), f.mean_of.end(), setup_.id) > 0;
  const auto tilde = model::eager_delta(
      own, have_mean ? &f.mean : nullptr, f.mean_of.size(), was_in ? &f.own : nullptr,
      static_cast<size_t>(std::max<int64_t>(1, setup_.ctx->config.swarm.workers_per_stage)));
  // The group steps with the same learning rate: its round started after this step too.
  model::OuterNesterov outer(anchor, model::outer_lr_at(step, d, setup_.ctx->config.train.steps),
                             d.outer_momentum);
  if (!f.momentum.empty()) outer.restore(anchor, f.momentum);
  outer.step({&tilde});
  f.momentum = outer.momentum();
  at::NoGradGuard no_grad;
  auto params = module->named_parameters();
  for (size_t k = 0; k < f.index.size(); ++k) {
    const auto& theta = outer.theta()[k].second;
    params[names_[f.index[k]]].copy_(theta);
    anchor_[f.index[k]].second = theta.to(setup_.device).clone();
  }
  f.own.clear();
  for (size_t k = 0; k < f.index.size(); ++k) f.own.emplace_back(names_[f.index[k]], sent[k]);
  f.own_round = f.round;
}

void DilocoReplica::take_mean(uint32_t p, const messages::Frame& frame,
                              const messages::RoundHeader& h) {
  auto& f = fragments_[p];
  const auto& d = setup_.ctx->config.diloco;
  if (h.tensor_names.size() != f.index.size() || frame.tensors.size() != f.index.size())
    throw std::invalid_argument("fragment " + std::to_string(p) + " has " +
                                std::to_string(f.index.size()) + " tensors, the mean " +
                                std::to_string(frame.tensors.size()));
  if (h.contributors.empty()) throw std::invalid_argument("a mean of no worker");
  model::NamedTensors mean;
  for (size_t k = 0; k < f.index.size(); ++k) {
    const auto& [name, anchor] = anchor_[f.index[k]];
    if (h.tensor_names[k] != name)
      throw std::invalid_argument("tensor '" + h.tensor_names[k] + "' where '" + name +
                                  "' belongs");
    at::Tensor m =
        d.encoded() ? model::decode_round(frame.tensors[k], d, anchor.sizes()) : frame.tensors[k];
    if (!m.sizes().equals(anchor.sizes()) || m.scalar_type() != anchor.scalar_type())
      throw std::invalid_argument("tensor '" + name + "' has another shape or dtype");
    if (!at::isfinite(m).all().item<bool>())
      throw std::invalid_argument("tensor '" + name + "' holds NaN or Inf values");
    mean.emplace_back(name, m.to(at::kCPU).clone());
  }
  f.mean = std::move(mean);
  f.mean_round = h.round_id;
  f.mean_of = h.contributors;
}

model::NamedTensors DilocoReplica::global_of(uint32_t p, const messages::Frame& frame,
                                             const messages::RoundHeader& h) const {
  const auto& f = fragments_[p];
  const auto& d = setup_.ctx->config.diloco;
  if (h.gathered) return gathered_of(p, frame, h);
  if (h.tensor_names.size() != f.index.size() || frame.tensors.size() != f.index.size())
    throw std::invalid_argument("fragment " + std::to_string(p) + " has " +
                                std::to_string(f.index.size()) + " tensors, the round " +
                                std::to_string(frame.tensors.size()));
  // Under auto the group answers as sparse as the round's sparsest contribution: any rung.
  const auto densities = model::round_densities(setup_.ctx->config);
  model::NamedTensors out;
  for (size_t k = 0; k < f.index.size(); ++k) {
    const auto& [name, anchor] = anchor_[f.index[k]];
    if (h.tensor_names[k] != name)
      throw std::invalid_argument("tensor '" + h.tensor_names[k] + "' where '" + name +
                                  "' belongs");
    at::Tensor theta;
    if (h.update) {
      // θ(t) = θ(t−1) + the decoded update, summed as the group sums it: the same bits.
      theta =
          anchor.to(at::kCPU) + model::decode_round(frame.tensors[k], d, anchor.sizes(), densities);
    } else {
      theta = frame.tensors[k];
      if (!theta.sizes().equals(anchor.sizes()) || theta.scalar_type() != anchor.scalar_type())
        throw std::invalid_argument("tensor '" + name + "' has another shape or dtype");
    }
    if (!at::isfinite(theta).all().item<bool>())
      throw std::invalid_argument("tensor '" + name + "' holds NaN or Inf values");
    out.emplace_back(name, theta.to(setup_.device).clone());
  }
  return out;
}

// diloco.all_gather: θ(t) = θ(t−1) + gathered_update of the round's contributions in the
// header's order, this worker's own as it sent it and the others' as the answer carries them.
model::NamedTensors DilocoReplica::gathered_of(uint32_t p, const messages::Frame& frame,
                                               const messages::RoundHeader& h) const {
  const auto& f = fragments_[p];
  const auto& cfg = setup_.ctx->config;
  const size_t n = f.index.size();
  const bool mine = std::count(h.contributors.begin(), h.contributors.end(), setup_.id) > 0;
  const size_t others = h.contributors.size() - (mine ? 1 : 0);
  if (h.contributors.empty() || frame.tensors.size() != others * n ||
      h.tensor_names.size() != others * n)
    throw std::invalid_argument("a gathered answer of " + std::to_string(frame.tensors.size()) +
                                " tensors for " + std::to_string(others) +
                                " other contributions of " + std::to_string(n));
  if (mine && (f.wire.size() != n || f.wire_round != h.round_id))
    throw std::invalid_argument("its own contribution to round " + std::to_string(h.round_id) +
                                " is not kept here");
  const auto densities = model::round_densities(cfg);
  std::vector<std::vector<at::Tensor>> deltas;
  size_t j = 0;  // the next of the others' contributions in the frame
  for (auto id : h.contributors) {
    deltas.emplace_back();
    for (size_t k = 0; k < n; ++k) {
      const auto& [name, anchor] = anchor_[f.index[k]];
      const bool own = id == setup_.id;
      if (!own && h.tensor_names[j * n + k] != name)
        throw std::invalid_argument("tensor '" + h.tensor_names[j * n + k] + "' where '" + name +
                                    "' belongs");
      const auto& wire = own ? f.wire[k] : frame.tensors[j * n + k];
      deltas.back().push_back(model::decode_round(wire, cfg.diloco, anchor.sizes(), densities));
    }
    if (id != setup_.id) ++j;
  }
  const auto u =
      model::gathered_update(deltas, model::outer_lr_at(h.step, cfg.diloco, cfg.train.steps));
  model::NamedTensors out;
  for (size_t k = 0; k < n; ++k) {
    const auto& [name, anchor] = anchor_[f.index[k]];
    auto theta = anchor.to(at::kCPU) + u[k];
    if (!at::isfinite(theta).all().item<bool>())
      throw std::invalid_argument("tensor '" + name + "' holds NaN or Inf values");
    out.emplace_back(name, theta.to(setup_.device));
  }
  return out;
}

void DilocoReplica::merge(uint32_t p, model::StageModel& module) {
  auto& f = fragments_[p];
  // Without overlap the worker waited for this answer since its contribution left: not compute.
  if (setup_.ctx->config.diloco.overlap_steps == 0 && last_sent_at_)
    waited_s_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - last_sent_at_->second)
            .count();
  auto answer = std::move(*f.answer);
  f.answer.reset();
  f.in_flight.reset();
  f.sent.reset();
  const auto h = messages::open_round_frame(answer);
  if (h.gathered) round_cap_ = h.density;
  if (h.average) {
    // Eager: the fragment moved at the round's start; the mean waits for its next round.
    try {
      take_mean(p, answer, h);
      f.round = h.round_id + 1;
      ++merges_;
    } catch (const std::exception& e) {
      ++failures_;
      f.mean.clear();
      spdlog::warn("worker {}: fragment {} round {}'s mean refused: {}", setup_.id, p, h.round_id,
                   e.what());
    }
    return;
  }
  model::NamedTensors global;
  try {
    global = global_of(p, answer, h);
  } catch (const std::exception& e) {
    ++failures_;
    spdlog::warn("worker {}: fragment {} round {} not merged, its parameters stay local: {}",
                 setup_.id, p, h.round_id, e.what());
    return;
  }
  // α mixes the local progress of the τ overlapped steps into θ_global; the last step's round
  // takes θ_global, so the run ends with the stage's workers agreeing.
  const double alpha = f.started >= last_step_ ? 0.0 : setup_.ctx->config.diloco.alpha;
  at::NoGradGuard no_grad;
  auto params = module->named_parameters();
  for (size_t k = 0; k < f.index.size(); ++k) {
    auto& param = params[global[k].first];
    if (alpha == 0)
      param.copy_(global[k].second);
    else
      param.mul_(alpha).add_(global[k].second, 1 - alpha);
    anchor_[f.index[k]].second = global[k].second;
  }
  f.round = h.round_id + 1;
  ++merges_;
}

void DilocoReplica::take_global(uint32_t p, const messages::Frame& frame,
                                model::StageModel& module) {
  auto& f = fragments_[p];
  const auto h = messages::open_round_frame(frame);
  if (h.round_id + 1 <= f.round) return;
  if (h.gathered) round_cap_ = h.density;
  if (h.average) {
    // Eager: a mean of a round without this worker moves nothing here; it is the others' term
    // of its next round.
    try {
      take_mean(p, frame, h);
      f.round = h.round_id + 1;
    } catch (const std::exception& e) {
      ++failures_;
      spdlog::warn("worker {}: fragment {} round {}'s mean refused: {}", setup_.id, p, h.round_id,
                   e.what());
    }
    return;
  }
  if (h.update && h.round_id != f.round) {
    // An update is relative to θ(t−1); this replica's anchor is older: it has missed rounds
    // and takes the fragment from the group's state at the next chance.
    spdlog::warn("worker {}: fragment {} missed rounds before {}; it reloads the fragment",
                 setup_.id, p, h.round_id);
    ++failures_;
    return;
  }
  try {
    auto global = global_of(p, frame, h);
    model::assign_parameters(*module, global);
    for (size_t k = 0; k < f.index.size(); ++k) anchor_[f.index[k]].second = global[k].second;
    f.round = h.round_id + 1;
  } catch (const std::exception& e) {
    ++failures_;
    spdlog::warn("worker {}: fragment {} θ of round {} refused: {}", setup_.id, p, h.round_id,
                 e.what());
  }
}

}  // namespace swarmrt::actors
