// The DiLoCo group's round arithmetic: θ assembled from its fragments, the quorum
// (policy/round_quorum.hpp), the outer step, the answer's encoding (θ(t), a quantized update,
// or an eager mean) and the store a restarted group continues from
// (actors/diloco/diloco_group.hpp).
#include <spdlog/spdlog.h>

#include "actors/diloco/group_internal.hpp"
#include "actors/diloco/group_journal.hpp"
#include "model/fragments.hpp"
#include "model/quantize.hpp"
#include "policy/round_quorum.hpp"

namespace swarmrt::actors::group {
using namespace swarmrt::atoms;

// Fragment p's tensors of `all` (the stage's θ or momentum), in θ's order.
model::NamedTensors slice(const model::NamedTensors& all, const std::vector<size_t>& index) {
  model::NamedTensors out;
  for (auto i : index) out.push_back(all[i]);
  return out;
}

// The whole stage's θ (or outer momentum), assembled from its fragments.
model::NamedTensors whole(const group_state& s, bool momentum) {
  model::NamedTensors out(s.names.size());
  for (const auto& f : s.fragments) {
    const auto& part = momentum ? f.outer->momentum() : f.outer->theta();
    for (size_t k = 0; k < f.index.size(); ++k) out[f.index[k]] = part[k];
  }
  return out;
}

// θ and the outer momentum of every fragment into the store (its lock held).
void store_theta(group_state& s) {
  s.store->theta.clear();
  s.store->momentum.clear();
  for (const auto& [name, t] : whole(s, false)) s.store->theta.emplace_back(name, t.clone());
  for (const auto& [name, t] : whole(s, true)) s.store->momentum.emplace_back(name, t.clone());
}

void journal_store(group_state& s, uint64_t step) {
  if (s.store->journal.empty()) return;
  const GroupJournal journal(s.store->journal);
  try {
    s.store->journal_bytes += journal.write(s.stage, step, *s.store);
  } catch (const std::exception& e) {
    spdlog::error("diloco group {}: {}; a takeover will resume from a checkpoint", s.stage,
                  e.what());
    journal.forget(s.stage);
  }
}

// Every applied fragment's θ as an `applied` round frame, for `to` (a worker new to the
// stage, which ignores a round it already has).
void send_theta(Self* self, const caf::actor& to) {
  auto& s = self->state;
  for (uint32_t p = 0; p < s.fragments.size(); ++p) {
    const auto& f = s.fragments[p];
    if (f.last_applied < 0) continue;
    messages::RoundHeader h;
    h.round_id = static_cast<uint64_t>(f.last_applied);
    h.stage = s.stage;
    h.fragment = p;
    h.status = messages::RoundStatus::applied;
    std::vector<at::Tensor> tensors;
    for (const auto& [name, t] : f.outer->theta()) {
      h.tensor_names.push_back(name);
      tensors.push_back(t);
    }
    s.ctx->bytes->add(Traffic::parameters, messages::payload_bytes(tensors));
    transport::send_frame(self, to, messages::FrameKind::round,
                          messages::make_round_frame(h, std::move(tensors)));
  }
}

// Applies fragment p's round once every member has contributed or been refused in it (and
// at least one contributed); true when it did.
bool maybe_apply(Self* self, uint32_t p) {
  auto& s = self->state;
  auto& f = s.fragments[p];
  std::set<uint32_t> members, contributed;
  for (const auto& [id, handle] : s.members) members.insert(id);
  for (const auto& [id, d] : f.contributions) contributed.insert(id);
  if (!quorum(s).complete(members, contributed, f.excused)) return false;
  apply_round(self, p);
  return true;
}

policy::RoundQuorum quorum(const group_state& s) {
  return policy::RoundQuorum{s.ctx->config.diloco.min_replicas};
}

namespace {

// Quantized answers: θ(t) − θ(t−1) in the run's encoding (with the error of the last one
// carried in), and θ(t) set to θ(t−1) plus exactly what the workers will decode.
std::vector<at::Tensor> encode_update(group_state& s, FragmentRounds& f,
                                      const model::NamedTensors& before) {
  const auto& d = s.ctx->config.diloco;
  model::NamedTensors applied;
  std::vector<at::Tensor> wire;
  const auto& after = f.outer->theta();
  for (size_t k = 0; k < after.size(); ++k) {
    auto u = after[k].second - before[k].second;
    if (d.error_feedback && k < f.residual.size()) u += f.residual[k].second;
    auto encoded = model::encode(u, d.quantize, d.quant_block);
    auto decoded = model::decode(encoded, d.quantize, d.quant_block, u.sizes());
    if (d.error_feedback) {
      if (f.residual.size() <= k) f.residual.resize(k + 1);
      f.residual[k] = {after[k].first, u - decoded};
    }
    applied.emplace_back(after[k].first, before[k].second + decoded);
    wire.push_back(encoded);
  }
  f.outer->restore(std::move(applied), f.outer->momentum());
  return wire;
}

// An eager group's answer: the round's mean pseudo-gradient Δ̄ in the run's encoding. Every
// worker decodes the same bits, so their eager steps use the same mean.
std::vector<at::Tensor> encode_mean(const group_state& s, const FragmentRounds& f) {
  const auto& d = s.ctx->config.diloco;
  std::vector<at::Tensor> wire;
  for (size_t k = 0; k < f.outer->theta().size(); ++k) {
    auto mean = at::zeros_like(f.outer->theta()[k].second);
    for (const auto& [id, delta] : f.contributions) mean.add_(delta[k].second);
    mean.div_(static_cast<double>(f.contributions.size()));
    wire.push_back(d.quantize == model::Quantize::none
                       ? mean
                       : model::encode(mean, d.quantize, d.quant_block));
  }
  return wire;
}

// Eager: each contributor's Δ̃_i as its worker stepped with it at the round's start, from the
// last round's mean (rounds are applied in order, so it is the round before this one; a
// restarted group has none and sums afresh).
std::vector<model::NamedTensors> eager_deltas(const group_state& s, const FragmentRounds& f) {
  const bool have_mean = !f.last_mean.empty();
  const auto first_m =
      static_cast<size_t>(std::max<int64_t>(1, s.ctx->config.swarm.workers_per_stage));
  std::vector<model::NamedTensors> out;
  for (const auto& [id, delta] : f.contributions) {
    const model::NamedTensors* own = nullptr;
    if (auto it = f.last_contributions.find(id); have_mean && it != f.last_contributions.end())
      own = &it->second;
    out.push_back(model::eager_delta(delta, have_mean ? &f.last_mean : nullptr,
                                     have_mean ? f.last_contributions.size() : 0, own, first_m));
  }
  return out;
}

}  // namespace

void apply_round(Self* self, uint32_t p) {
  auto& s = self->state;
  auto& f = s.fragments[p];
  const auto& d = s.ctx->config.diloco;
  const bool quantized = d.quantize != model::Quantize::none;
  // An eager group answers the last step's round with θ(t) itself, which every worker takes:
  // an eager worker's anchor is its own, not the group's θ(t−1) an update would be added to.
  // (Without eager every anchor is θ(t−1), and a quantized update serves as in any round.)
  const bool whole_theta = f.final && d.eager;
  const bool eager = d.eager && !whole_theta;
  std::vector<at::Tensor> tensors;
  messages::RoundHeader h;
  if (eager) {
    tensors = encode_mean(s, f);
    h.average = true;
    for (const auto& [id, delta] : f.contributions) h.contributors.push_back(id);
  }
  model::NamedTensors before;
  if (quantized && !eager && !whole_theta)
    for (const auto& [name, t] : f.outer->theta()) before.emplace_back(name, t.clone());
  // θ is what joining and restarted workers start from, and what the last step hands every
  // worker: the exact mean's outer step, or with eager steps the mean of the workers' own.
  const auto tilde = eager ? eager_deltas(s, f) : std::vector<model::NamedTensors>{};
  std::vector<const model::NamedTensors*> deltas;
  if (eager)
    for (const auto& t : tilde) deltas.push_back(&t);
  else
    for (const auto& [id, delta] : f.contributions) deltas.push_back(&delta);
  f.outer->set_lr(model::outer_lr_at(f.step, d, s.ctx->config.train.steps));
  f.outer->step(deltas);
  if (eager) {
    f.last_mean.clear();
    for (size_t k = 0; k < tensors.size(); ++k) {
      const auto& [name, theta] = f.outer->theta()[k];
      f.last_mean.emplace_back(
          name, quantized ? model::decode(tensors[k], d.quantize, d.quant_block, theta.sizes())
                          : tensors[k].clone());
    }
    f.last_contributions = f.contributions;
  }
  if (!eager && quantized && !whole_theta) {
    tensors = encode_update(s, f, before);
    h.update = true;
  } else if (!eager) {
    for (const auto& [name, t] : f.outer->theta()) tensors.push_back(t);
  }
  f.last_applied = static_cast<int64_t>(f.round);
  {
    std::lock_guard<std::mutex> lock(s.store->mu);
    store_theta(s);
    s.store->fragment_applied.resize(s.fragments.size(), -1);
    s.store->fragment_rounds.resize(s.fragments.size());
    s.store->fragment_applied[p] = f.last_applied;
    s.store->fragment_rounds[p].push_back(f.round);
    if (p == 0) {
      s.store->last_applied = f.last_applied;
      s.store->applied_rounds.push_back(f.round);
    }
    // On disk before any worker holds θ(t): a standby that continues after this step has it.
    journal_store(s, f.step);
  }
  h.round_id = f.round;
  h.stage = s.stage;
  h.fragment = p;
  h.status = messages::RoundStatus::applied;
  for (const auto& [name, t] : f.outer->theta()) h.tensor_names.push_back(name);
  const uint64_t bytes = messages::payload_bytes(tensors);
  for (const auto& [id, handle] : s.members) {
    s.ctx->bytes->add(Traffic::parameters, bytes);
    f.bytes += bytes;
    // Workers copy θ(t) into their own parameters; the group's θ is never aliased.
    transport::send_frame(self, handle, messages::FrameKind::round,
                          messages::make_round_frame(h, tensors));
  }
  ++f.round;
  f.contributions.clear();
  f.excused.clear();
  f.timer_armed = false;
  f.final = false;
  f.step = 0;
}

// A contribution's tensors as float32 pseudo-gradients of fragment f, or why not; `excuse`
// when the tensors fit θ but their encoding does not decode (a non-finite scale or value):
// the round goes on without the sender, as with a non-finite float32 tensor.
std::string decode_contribution(const group_state& s, const FragmentRounds& f,
                                const messages::RoundHeader& h, const messages::Frame& frame,
                                model::NamedTensors& delta, bool& excuse) {
  const auto& theta = f.outer->theta();
  const auto& d = s.ctx->config.diloco;
  if (h.tensor_names.size() != theta.size() || frame.tensors.size() != theta.size())
    return "wrong number of tensors";
  for (size_t i = 0; i < theta.size(); ++i) {
    if (h.tensor_names[i] != theta[i].first)
      return "tensor '" + h.tensor_names[i] + "' mismatches θ's name, shape or dtype";
    if (d.quantize == model::Quantize::none) {
      if (!frame.tensors[i].sizes().equals(theta[i].second.sizes()) ||
          frame.tensors[i].scalar_type() != theta[i].second.scalar_type())
        return "tensor '" + h.tensor_names[i] + "' mismatches θ's name, shape or dtype";
      delta.emplace_back(h.tensor_names[i], frame.tensors[i]);
      continue;
    }
    try {
      delta.emplace_back(h.tensor_names[i], model::decode(frame.tensors[i], d.quantize,
                                                          d.quant_block, theta[i].second.sizes()));
    } catch (const std::invalid_argument& e) {
      excuse = true;
      return "tensor '" + h.tensor_names[i] + "' (" + model::name_of(d.quantize) + "): " + e.what();
    }
  }
  return "";
}

}  // namespace swarmrt::actors::group
