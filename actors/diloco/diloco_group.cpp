#include "actors/diloco/diloco_group.hpp"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "actors/runtime/tensor_list.hpp"
#include "model/checks.hpp"
#include "model/fragments.hpp"
#include "model/quantize.hpp"
#include "transport/bulk.hpp"
#include "transport/comm.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using Self = caf::stateful_actor<group_state>;

namespace {

void reply_rejected(Self* self, const caf::actor& to, const messages::RoundHeader& h,
                    const std::string& why) {
  auto& s = self->state;
  ++s.rejected;
  spdlog::warn("diloco group {}: rejected contribution of worker {} for round {}: {}", s.stage,
               h.contributor, h.round_id, why);
  if (s.metrics)
    self->send(s.metrics, metrics_atom::value,
               nlohmann::json{{"event", "rejected"},
                              {"kind", "pseudo_gradient"},
                              {"stage", s.stage},
                              {"worker", h.contributor},
                              {"round", h.round_id},
                              {"reason", why}}
                   .dump());
  messages::RoundHeader r = h;
  r.status = messages::RoundStatus::rejected;
  r.reason = why;
  r.tensor_names.clear();
  r.contributors.clear();
  transport::send_frame(self, to, messages::FrameKind::round, messages::make_round_frame(r, {}));
  // A group mean waits in every worker in it: each hears the answer.
  for (auto id : h.contributors)
    if (auto m = s.members.find(id); m != s.members.end() && m->second != to)
      transport::send_frame(self, m->second, messages::FrameKind::round,
                            messages::make_round_frame(r, {}));
}

// The communicator the members share, if they can: NCCL between CUDA workers, TCP where the
// run asks for links everywhere.
std::string group_backend(const group_state& s) {
  const auto& mode = s.ctx->config.transport.links;
  if (mode == model::Links::frames || s.members.size() < 2 || s.ctx->streaming()) return "";
  bool all_cuda = true;
  for (const auto& [id, handle] : s.members) {
    auto d = s.devices.find(id);
    all_cuda = all_cuda && d != s.devices.end() && d->second.rfind("cuda", 0) == 0;
  }
  if (all_cuda && transport::comm_backend_built("nccl")) return "nccl";
  return mode == model::Links::comm ? "tcp" : "";
}

// Round `round` of the current communicator is reported per worker: the workers that said
// they were at it, and `also`, hear so.
void refuse_round(Self* self, uint64_t round, const caf::actor& also, uint64_t also_epoch) {
  auto& s = self->state;
  for (const auto& w : s.ready)
    self->send(w, group_go_atom::value, s.ready_round, s.comm_epoch, false);
  s.ready.clear();
  s.refused_round = round;
  if (also) self->send(also, group_go_atom::value, round, also_epoch, false);
}

// A worker of the communicator is at `round`. The all-reduce goes ahead only when every
// worker of the current communicator is, ready to take part; anything else, and the round is
// reported per worker by all of them.
void on_ready(Self* self, uint64_t round, uint64_t epoch, bool usable, const caf::actor& from) {
  auto& s = self->state;
  const bool member =
      std::find(s.comm_members.begin(), s.comm_members.end(), from) != s.comm_members.end();
  if (!s.ready.empty() && s.ready_round != round) refuse_round(self, s.ready_round, {}, 0);
  const char* why = epoch != s.comm_epoch               ? "holds another communicator"
                    : !usable || s.comm_backend.empty() ? "cannot all-reduce"
                    : !member                           ? "is not in the communicator"
                    : s.refused_round == round          ? ""
                                                        : nullptr;
  if (why) {
    if (*why)
      spdlog::info("diloco group {}: round {} is reported per worker: a worker {}", s.stage, round,
                   why);
    refuse_round(self, round, from, epoch);
    return;
  }
  s.ready_round = round;
  if (std::find(s.ready.begin(), s.ready.end(), from) == s.ready.end()) s.ready.push_back(from);
  if (s.ready.size() < s.comm_members.size()) return;
  for (const auto& w : s.ready) self->send(w, group_go_atom::value, round, epoch, true);
  s.ready.clear();
}

// Tells every member which communicator the group uses from now on (none: its own frames).
void announce_comm(Self* self) {
  auto& s = self->state;
  const auto backend = group_backend(s);
  if (backend.empty() && s.comm_backend.empty()) return;
  // Workers waiting on the old communicator will not all be there now.
  if (!s.ready.empty()) refuse_round(self, s.ready_round, {}, 0);
  s.refused_round.reset();
  s.comm_backend = backend;
  uint64_t epoch = 0;
  {
    std::lock_guard<std::mutex> lock(s.store->mu);
    epoch = ++s.store->comm_epoch;
  }
  std::vector<caf::actor> handles;
  std::vector<uint32_t> ids;
  for (const auto& [id, handle] : s.members) {
    ids.push_back(id);
    handles.push_back(handle);
  }
  s.comm_epoch = epoch;
  s.comm_members = backend.empty() ? std::vector<caf::actor>{} : handles;
  for (const auto& h : handles) self->send(h, group_comm_atom::value, epoch, backend, handles, ids);
  if (!backend.empty())
    spdlog::info("diloco group {}: {} workers share a {} communicator (epoch {})", s.stage,
                 ids.size(), backend, epoch);
}

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

void apply_round(Self* self, uint32_t p);

// Applies fragment p's round once every member has contributed or been refused in it (and
// at least one contributed); true when it did.
bool maybe_apply(Self* self, uint32_t p) {
  auto& s = self->state;
  auto& f = s.fragments[p];
  size_t in = 0;
  for (const auto& [id, d] : f.contributions) in += s.members.count(id);
  for (auto id : f.excused) in += s.members.count(id) && !f.contributions.count(id);
  if (f.contributions.empty() || in < s.members.size()) return false;
  apply_round(self, p);
  return true;
}

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
    s.store->theta.clear();
    s.store->momentum.clear();
    for (const auto& [name, t] : whole(s, false)) s.store->theta.emplace_back(name, t.clone());
    for (const auto& [name, t] : whole(s, true)) s.store->momentum.emplace_back(name, t.clone());
    s.store->fragment_applied.resize(s.fragments.size(), -1);
    s.store->fragment_rounds.resize(s.fragments.size());
    s.store->fragment_applied[p] = f.last_applied;
    s.store->fragment_rounds[p].push_back(f.round);
    if (p == 0) {
      s.store->last_applied = f.last_applied;
      s.store->applied_rounds.push_back(f.round);
    }
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

void on_contribution(Self* self, const messages::Frame& frame, const caf::actor& sender) {
  const uint32_t stage = self->state.stage;
  auto& s = self->state;
  messages::RoundHeader h;
  try {
    h = messages::open_round_frame(frame);
  } catch (const messages::DecodeError& e) {
    ++s.rejected;
    spdlog::warn("diloco group {}: malformed round frame: {}", stage, e.what());
    return;
  }
  if (h.status != messages::RoundStatus::contribution)
    return reply_rejected(self, sender, h, "not a contribution");
  if (h.fragment >= s.fragments.size())
    return reply_rejected(
        self, sender, h,
        "fragment " + std::to_string(h.fragment) + " of " + std::to_string(s.fragments.size()));
  const uint32_t p = h.fragment;
  auto& f = s.fragments[p];
  if (static_cast<int64_t>(h.round_id) <= f.last_applied)
    return reply_rejected(self, sender, h,
                          "round " + std::to_string(h.round_id) + " is already applied");
  if (h.round_id != f.round)
    return reply_rejected(self, sender, h,
                          "the group is collecting round " + std::to_string(f.round));
  const auto who = h.contributors.empty() ? std::vector<uint32_t>{h.contributor} : h.contributors;
  for (auto id : who)
    if (h.stage != stage || !s.members.count(id))
      return reply_rejected(
          self, sender, h,
          "worker " + std::to_string(id) + " is not a worker of stage " + std::to_string(stage));
  // A NaN or Inf would become θ's, every worker's, at this round: refused, and the round goes
  // on without these workers, as if they had failed in it. (A quantized tensor carries one as
  // its block's scale, which decoding refuses.)
  model::NamedTensors delta;
  bool excuse = false;
  auto bad = decode_contribution(s, f, h, frame, delta, excuse);
  if (bad.empty()) excuse = !(bad = model::nonfinite_tensor(frame.tensors, h.tensor_names)).empty();
  if (excuse) {
    for (auto id : who) f.excused.insert(id);
    reply_rejected(self, sender, h, bad);
    maybe_apply(self, p);
    return;
  }
  if (!bad.empty()) return reply_rejected(self, sender, h, bad);
  // A group mean counts once for every worker in it (they share its tensors).
  for (auto id : who) f.contributions[id] = delta;
  f.final |= h.final;
  if (maybe_apply(self, p)) return;
  // Waiting for the rest: after round_timeout_s a quorum of min_replicas is enough.
  if (!f.timer_armed) {
    f.timer_armed = true;
    self->delayed_send(self, model::as_duration(s.ctx->config.diloco.round_timeout_s),
                       round_timer_atom::value, f.round, p);
  }
}

void on_bulk(Self* self, const transport::BulkDelivery& d) {
  auto& s = self->state;
  if (!d.error.empty() || d.kind != messages::FrameKind::round) {
    ++s.rejected;
    spdlog::warn("diloco group {}: refused a frame: {}", s.stage,
                 d.error.empty() ? "not a round frame" : d.error);
    return;
  }
  on_contribution(self, d.frame, d.sender);
}

}  // namespace

caf::behavior diloco_group(Self* self, ContextPtr ctx, uint32_t stage, model::NamedTensors theta,
                           GroupStorePtr store, caf::actor metrics) {
  auto& s = self->state;
  s.metrics = std::move(metrics);
  s.ctx = std::move(ctx);
  s.stage = stage;
  s.store = std::move(store);
  const auto& d = s.ctx->config.diloco;
  for (const auto& [name, t] : theta) s.names.push_back(name);
  // Fragments of the stage (one: the whole stage); a stage with fewer blocks than fragments
  // was refused by the config's validation.
  const auto of = model::assign_fragments(s.names, d.fragments, d.fragment_pattern);
  s.fragments.resize(static_cast<size_t>(d.fragments));
  for (size_t i = 0; i < of.size(); ++i) s.fragments[of[i]].index.push_back(i);
  {
    std::lock_guard<std::mutex> lock(s.store->mu);
    const bool stored = !s.store->theta.empty();
    for (uint32_t p = 0; p < s.fragments.size(); ++p) {
      auto& f = s.fragments[p];
      if (!stored) {
        f.outer = std::make_unique<model::OuterNesterov>(slice(theta, f.index), d.outer_lr,
                                                         d.outer_momentum);
        continue;
      }
      model::NamedTensors t, m;
      for (const auto& [name, x] : slice(s.store->theta, f.index)) t.emplace_back(name, x.clone());
      for (const auto& [name, x] : slice(s.store->momentum, f.index))
        m.emplace_back(name, x.clone());
      f.outer = std::make_unique<model::OuterNesterov>(t, d.outer_lr, d.outer_momentum);
      f.outer->restore(std::move(t), std::move(m));
      f.last_applied = p < s.store->fragment_applied.size() ? s.store->fragment_applied[p]
                       : p == 0                             ? s.store->last_applied
                                                            : -1;
      f.round = static_cast<uint64_t>(f.last_applied + 1);
    }
  }
  return {
      [=](members_atom, const messages::Membership& m) {
        auto& s = self->state;
        auto before = std::move(s.members);
        s.members.clear();
        if (stage < m.stages.size())
          for (const auto& w : m.stages[stage]) {
            if (!w.handle) continue;  // its node went down before this message was read
            s.members[w.id] = w.handle;
            s.devices[w.id] = w.device;
            transport::register_endpoint(w.handle.node(), w.endpoint);
            // A worker new to the stage may have taken its state before the last round was
            // applied: it gets that round's θ (it ignores a round it already has).
            auto old = before.find(w.id);
            if (old == before.end() || old->second != w.handle) send_theta(self, w.handle);
          }
        if (s.members != before) announce_comm(self);
        // A member lost while a round was collected: the survivors may all be in.
        for (uint32_t p = 0; p < s.fragments.size(); ++p) maybe_apply(self, p);
      },
      [=](round_atom, const messages::Frame& frame) {
        on_contribution(self, frame, caf::actor_cast<caf::actor>(self->current_sender()));
      },
      [=](group_ready_atom, uint64_t round, uint64_t epoch, bool usable) {
        on_ready(self, round, epoch, usable, caf::actor_cast<caf::actor>(self->current_sender()));
      },
      [=](transport::bulk_atom, uint64_t id) {
        if (auto d = transport::claim_bulk(self, id)) on_bulk(self, *d);
      },
      [=](transport::bulk_ready_atom, uint64_t id) {
        if (auto d = transport::take_bulk(id)) on_bulk(self, *d);
      },
      [=](chunk_atom, const std::vector<uint8_t>& chunk) {
        auto& s = self->state;
        auto complete = s.chunks.add(chunk, "diloco group " + std::to_string(stage));
        if (!complete) {
          s.rejected += s.chunks.refused() - s.refused_chunks;
          s.refused_chunks = s.chunks.refused();
          return;
        }
        if (complete->kind != messages::FrameKind::round) {
          ++s.rejected;
          spdlog::warn("diloco group {}: refused a micro-batch frame", stage);
          return;
        }
        on_contribution(self, complete->frame, caf::actor_cast<caf::actor>(self->current_sender()));
      },
      [=](round_timer_atom, uint64_t round, uint32_t p) {
        auto& s = self->state;
        auto& f = s.fragments.at(p);
        if (round != f.round || f.contributions.empty()) return;
        if (static_cast<int64_t>(f.contributions.size()) >= s.ctx->config.diloco.min_replicas) {
          spdlog::warn(
              "diloco group {}: round {} of fragment {} applied with {} of {} workers after the "
              "timeout",
              stage, round, p, f.contributions.size(), s.members.size());
          apply_round(self, p);
        } else {
          f.timer_armed = false;
        }
      },
      [=](stats_atom) {
        auto& s = self->state;
        const auto& f = s.fragments[0];
        return messages::GroupStats{f.last_applied, s.rejected, f.round,
                                    static_cast<uint64_t>(f.contributions.size())};
      },
      [=](params_atom) { return to_list(whole(self->state, false), /*clone=*/true); },
      // What the console's `info` shows of a group: fragment 0's round (the whole stage's
      // without fragments) and, with fragments, every fragment's.
      [=](info_atom) {
        auto& s = self->state;
        const auto& f0 = s.fragments[0];
        nlohmann::json info{{"stage", s.stage},
                            {"round", f0.round},
                            {"last_applied", f0.last_applied},
                            {"contributions", f0.contributions.size()},
                            {"members", s.members.size()},
                            {"rejected", s.rejected},
                            {"communicator", s.comm_backend.empty() ? "none" : s.comm_backend}};
        if (s.ctx->streaming()) {
          info["quantize"] = model::name_of(s.ctx->config.diloco.quantize);
          for (uint32_t p = 0; p < s.fragments.size(); ++p) {
            const auto& f = s.fragments[p];
            info["fragments"].push_back({{"fragment", p},
                                         {"tensors", f.index.size()},
                                         {"round", f.round},
                                         {"last_applied", f.last_applied},
                                         {"contributions", f.contributions.size()},
                                         {"bytes_sent", f.bytes}});
          }
        }
        return info.dump();
      },
      // The state a restarted or joining worker of this stage starts from: θ and the next round
      // of every fragment.
      [=](state_atom) {
        auto& s = self->state;
        messages::WorkerState st;
        st.params = to_list(whole(s, false), /*clone=*/true);
        st.anchor = st.params;
        for (const auto& f : s.fragments) st.rounds.push_back(f.last_applied + 1);
        st.round = st.rounds[0];
        st.source = "DiLoCo group " + std::to_string(stage) + " (round " +
                    std::to_string(s.fragments[0].last_applied) + ")";
        return st;
      },
  };
}

}  // namespace swarmrt::actors
