// The replica's rounds through a step: started when due, answered, merged when they land, and
// the held step released (replica.hpp). The arithmetic of a round is replica_merge.cpp's, the
// group's communicator replica_comm.cpp's, the warm-up replica_warmup.cpp's.
#include "actors/diloco/replica.hpp"

#include <spdlog/spdlog.h>
#include <torch/nn/module.h>

#include <algorithm>

#include "actors/common/tensor_list.hpp"
#include "model/fragments.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors {

std::unique_ptr<DilocoReplica> make_replica(const SwarmContext& ctx) {
  if (!ctx.diloco()) return nullptr;
  return std::make_unique<DilocoReplica>();
}

void DilocoReplica::configure(ReplicaSetup setup, const model::StageModel& module) {
  setup_ = std::move(setup);
  const auto& d = setup_.ctx->config.diloco;
  names_.clear();
  for (const auto& p : module->named_parameters()) names_.push_back(p.key());
  const auto of = model::assign_fragments(names_, d.fragments, d.fragment_pattern);
  fragments_.assign(static_cast<size_t>(d.fragments), Fragment{});
  for (size_t i = 0; i < of.size(); ++i) fragments_[of[i]].index.push_back(i);
  last_step_ = static_cast<uint64_t>(setup_.ctx->config.train.steps);
  set_anchor(module);
}

void DilocoReplica::take_state(const messages::WorkerState& st, model::NamedTensors anchor) {
  set_anchor(std::move(anchor));
  // Its own error feedback only (a checkpoint's entry of this worker): a peer's is the peer's.
  const bool own = st.residual_of == static_cast<int64_t>(setup_.id) && !st.residual.names.empty();
  const auto carried = own ? to_named(st.residual) : model::NamedTensors{};
  for (size_t p = 0; p < fragments_.size(); ++p) {
    auto& f = fragments_[p];
    if (st.rounds.size() == fragments_.size())
      f.round = static_cast<uint64_t>(std::max<int64_t>(0, st.rounds[p]));
    else if (st.round >= 0)
      f.round = static_cast<uint64_t>(st.round);
    f.residual.clear();
    if (!own) continue;
    for (auto i : f.index) {
      auto it = std::find_if(carried.begin(), carried.end(),
                             [&](const auto& e) { return e.first == names_[i]; });
      f.residual.emplace_back(names_[i], it == carried.end() ? at::Tensor() : it->second);
    }
  }
}

void DilocoReplica::give_state(messages::WorkerState& st) const {
  st.anchor = to_list(anchor_, /*clone=*/true);
  st.rounds.clear();
  for (const auto& f : fragments_) st.rounds.push_back(static_cast<int64_t>(f.round));
  st.round = static_cast<int64_t>(round());
  model::NamedTensors residual;
  for (const auto& f : fragments_)
    for (const auto& [name, t] : f.residual)
      if (t.defined()) residual.emplace_back(name, t);
  st.residual = to_list(residual, /*clone=*/true);
  st.residual_of = static_cast<int64_t>(setup_.id);
}

// Fragment p's round of `step` starts: its Δ_p = θ_p(t−1) − θ_p on the worker's device, sent
// (replica_merge.cpp) or, for a whole-stage round of a group with a communicator, held for the
// group's go (replica_comm.cpp).
void DilocoReplica::start_round(Self* self, uint32_t p, uint64_t step, model::StageModel& module,
                                bool last) {
  auto& f = fragments_[p];
  auto params = module->named_parameters();
  std::vector<at::Tensor> delta;
  for (auto i : f.index) delta.push_back(anchor_[i].second - params[names_[i]].detach());
  f.in_flight = f.round;
  f.answer.reset();
  f.started = step;
  f.lands = last ? step : step + static_cast<uint64_t>(setup_.ctx->config.diloco.overlap_steps);
  if (via_group() && fragments_.size() == 1)
    ask_group(self, step, std::move(delta), last);
  else
    send_round(self, p, step, std::move(delta), &module, last, false);
}

void DilocoReplica::settle(Self* self, uint32_t p, model::StageModel& module) {
  if (!held_step_ || !holding_.count(p)) return;
  auto& f = fragments_[p];
  if (f.sync_after) {
    f.sync_after = false;
    start_round(self, p, *held_step_, module, true);
    return;  // still held, for the final round now
  }
  holding_.erase(p);
  if (!holding_.empty()) return;
  tell_applied(self, setup_.tracker, *held_step_, setup_.id, *setup_.ctx);
  held_step_.reset();
}

bool DilocoReplica::after_inner_step(Self* self, uint64_t step, model::StageModel& module) {
  const auto& d = setup_.ctx->config.diloco;
  say_when_h_changes(step);
  if (ends_warmup(step)) return start_from_warmup(self, step, module);
  const bool last = step >= last_step_;
  std::set<uint32_t> hold;
  // Rounds that land now (every one in flight, at the last step): merged, or waited for.
  for (uint32_t p = 0; p < fragments_.size(); ++p) {
    auto& f = fragments_[p];
    if (!f.in_flight || (f.lands > step && !last)) continue;
    if (f.answer)
      merge(p, module);
    else
      hold.insert(p);
  }
  for (uint32_t p = 0; p < fragments_.size(); ++p) {
    if (!last && !model::fragment_due(step, p, d)) continue;
    auto& f = fragments_[p];
    if (f.in_flight) {
      f.sync_after = true;  // the last step: after the round in flight lands
      continue;
    }
    start_round(self, p, step, module, last);
    if (f.lands <= step) hold.insert(p);
  }
  if (hold.empty()) return false;
  held_step_ = step;
  holding_ = std::move(hold);
  return true;
}

void DilocoReplica::load_missed(model::StageModel& module) {
  for (uint32_t p = 0; p < fragments_.size(); ++p) {
    auto& f = fragments_[p];
    if (!f.missed) continue;
    auto frame = std::move(*f.missed);
    f.missed.reset();
    take_global(p, frame, module);
  }
}

bool DilocoReplica::on_round(Self* self, const messages::Frame& frame, model::StageModel& module,
                             bool busy, const Reload& reload) {
  const auto opened = open_answer(frame);
  if (!opened) return false;
  const auto& h = *opened;
  if (on_warmup_answer(self, h)) return true;
  if (h.fragment >= fragments_.size()) {
    spdlog::warn("worker {} rejected a round frame of fragment {} (it has {})", setup_.id,
                 h.fragment, fragments_.size());
    return false;
  }
  const uint32_t p = h.fragment;
  auto& f = fragments_[p];
  // Only the answer to the round in flight answers it: θ of an earlier round (a restarted group
  // sends every member θ of the last round it applied) would send the worker back a round and
  // release its step with the round still open.
  if (f.in_flight && f.sent && h.round_id == *f.in_flight) {
    if (h.status == messages::RoundStatus::rejected) {
      // The local fragment stays as it is; a round applied without this worker left its
      // anchor behind: it takes the group's θ (all fragments' rounds) at the next inner step.
      ++failures_;
      spdlog::warn("worker {}: fragment {} round {} refused: {}", setup_.id, p, h.round_id,
                   h.reason);
      f.in_flight.reset();
      f.sent.reset();
      catch_up_if_behind(self, h, reload);
      settle(self, p, module);
      return true;
    }
    if (h.status != messages::RoundStatus::applied) return false;
    f.answer = frame;
    f.sent.reset();
    if (held_step_ && holding_.count(p) && f.lands <= *held_step_) {
      merge(p, module);
      settle(self, p, module);
    }
    return true;
  }
  // θ of a round applied without this replica (it joined or restarted meanwhile). An in-place
  // copy would break the backward of a micro-batch in flight: then it waits for the inner step.
  if (h.status == messages::RoundStatus::applied && !f.in_flight && h.round_id + 1 > f.round) {
    if (busy)
      f.missed = frame;
    else
      take_global(p, frame, module);
  }
  return true;
}

void DilocoReplica::on_group_replaced(Self* self, const caf::actor& group) {
  setup_.group = group;
  // Contributions the dead group had not applied go to its successor, which continues from the
  // last round it applied: each round is applied once, not lost.
  for (auto& f : fragments_)
    if (f.sent) transport::send_frame(self, group, messages::FrameKind::round, *f.sent);
  // The dead group took the workers' readiness with it: a held round goes alone.
  release_round(self, false);
  resend_warmup(self, group);
}

nlohmann::json DilocoReplica::info() const {
  nlohmann::json j{{"merges", merges_},
                   {"eager", setup_.ctx->config.diloco.eager},
                   {"failures", failures_},
                   {"peak_step_bytes", peak_step_bytes_},
                   {"fragments", nlohmann::json::array()}};
  for (uint32_t p = 0; p < fragments_.size(); ++p) {
    const auto& f = fragments_[p];
    j["fragments"].push_back({{"fragment", p},
                              {"tensors", f.index.size()},
                              {"round", f.round},
                              {"in_flight", f.in_flight.has_value()},
                              {"bytes", f.bytes}});
  }
  return {{"round", round()}, {"diloco", j}};
}

}  // namespace swarmrt::actors
