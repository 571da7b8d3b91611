#include "actors/diloco/diloco_group.hpp"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "actors/diloco/group_internal.hpp"
#include "model/checks.hpp"
#include "model/fragments.hpp"
#include "model/topk.hpp"
#include "transport/relay.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using namespace swarmrt::actors::group;

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
  // An anonymous sender (a message from no actor) hears nothing; the refusal is still counted.
  if (to)
    transport::send_frame(self, to, messages::FrameKind::round, messages::make_round_frame(r, {}));
  // A group mean waits in every worker in it: each hears the answer.
  for (auto id : h.contributors)
    if (auto m = s.members.find(id); m != s.members.end() && m->second != to)
      transport::send_frame(self, m->second, messages::FrameKind::round,
                            messages::make_round_frame(r, {}));
}

// A worker's θ at the end of the synchronous warm-up (diloco.warmup_sync_steps = K): the rounds
// start from it, with the outer momentum at zero. Every worker sends the same θ (the warm-up
// averaged their gradients): the first is taken, and every sender hears that it was.
void on_warmup_end(Self* self, const messages::RoundHeader& h, const messages::Frame& frame,
                   const caf::actor& sender) {
  auto& s = self->state;
  const auto& d = s.ctx->config.diloco;
  if (static_cast<int64_t>(h.step) != d.warmup_sync_steps)
    return reply_rejected(self, sender, h,
                          "the warm-up ends at step " + std::to_string(d.warmup_sync_steps) +
                              ", not " + std::to_string(h.step));
  if (h.stage != s.stage || !s.members.count(h.contributor))
    return reply_rejected(self, sender, h,
                          "worker " + std::to_string(h.contributor) + " is not a worker of stage " +
                              std::to_string(s.stage));
  if (!s.warmed) {
    if (h.tensor_names != s.names)
      return reply_rejected(self, sender, h, "its tensors are not the stage's parameters");
    const auto current = whole(s, false);
    for (size_t i = 0; i < current.size(); ++i)
      if (frame.tensors[i].scalar_type() != at::kFloat ||
          !frame.tensors[i].sizes().equals(current[i].second.sizes()))
        return reply_rejected(self, sender, h,
                              "tensor " + s.names[i] + " is not float32 of θ's shape");
    if (auto bad = model::nonfinite_tensor(frame.tensors, h.tensor_names); !bad.empty())
      return reply_rejected(self, sender, h, bad);
    model::NamedTensors theta;
    for (size_t i = 0; i < current.size(); ++i)
      theta.emplace_back(s.names[i], frame.tensors[i].clone());
    for (auto& f : s.fragments) {
      f.outer = std::make_unique<model::OuterRound>(slice(theta, f.index), s.ctx->config);
    }
    {
      std::lock_guard<std::mutex> lock(s.store->mu);
      store_theta(s);
      s.store->warmed = true;
      journal_store(s, h.step);
    }
    s.warmed = true;
    spdlog::info("diloco group {}: rounds start from worker {}'s θ at step {}, the warm-up's end",
                 s.stage, h.contributor, h.step);
  }
  messages::RoundHeader r;
  r.stage = s.stage;
  r.contributor = h.contributor;
  r.step = h.step;
  r.status = messages::RoundStatus::applied;
  r.warmup_end = true;
  if (sender)
    transport::send_frame(self, sender, messages::FrameKind::round,
                          messages::make_round_frame(r, {}));
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
  if (h.warmup_end) return on_warmup_end(self, h, frame, sender);
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
  double density = 0;
  auto bad = f.outer->decode(h.tensor_names, frame.tensors, delta, excuse, &density);
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
  if (s.ctx->config.diloco.all_gather)
    for (auto id : who) f.wires[id] = frame.tensors;
  f.density = f.density > 0 ? std::min(f.density, density) : density;
  if (h.density > 0) f.carried = f.carried > 0 ? std::min(f.carried, h.density) : h.density;
  f.final |= h.final;
  f.step = std::max(f.step, h.step);
  if (maybe_apply(self, p)) return;
  // Waiting for the rest: after round_timeout_s a quorum of min_replicas is enough.
  if (!f.timer_armed) {
    f.timer_armed = true;
    self->delayed_send(self, config::as_duration(s.ctx->config.diloco.round_timeout_s),
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

namespace {

void take_store(Self* self, const model::NamedTensors& theta);

// θ and the outer state of every fragment: from `theta`, or from the store a restarted group
// continues from.
void set_up_diloco_group(Self* self, ContextPtr ctx, uint32_t stage, model::NamedTensors theta,
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
  take_store(self, theta);
}

// Every fragment's θ, outer momentum and next round from the store when it holds a round, else
// from `theta` (θ(0)).
void take_store(Self* self, const model::NamedTensors& theta) {
  auto& s = self->state;
  {
    std::lock_guard<std::mutex> lock(s.store->mu);
    const bool stored = !s.store->theta.empty();
    s.warmed = s.store->warmed;
    for (uint32_t p = 0; p < s.fragments.size(); ++p) {
      auto& f = s.fragments[p];
      if (!stored) {
        f.outer = std::make_unique<model::OuterRound>(slice(theta, f.index), s.ctx->config);
        continue;
      }
      model::NamedTensors t, m;
      for (const auto& [name, x] : slice(s.store->theta, f.index)) t.emplace_back(name, x.clone());
      for (const auto& [name, x] : slice(s.store->momentum, f.index))
        m.emplace_back(name, x.clone());
      f.outer = std::make_unique<model::OuterRound>(t, s.ctx->config);
      f.outer->restore(std::move(t), std::move(m),
                       residual_of(s.store->residual, f.index, s.names));
      f.last_applied = p < s.store->fragment_applied.size() ? s.store->fragment_applied[p]
                       : p == 0                             ? s.store->last_applied
                                                            : -1;
      f.round = static_cast<uint64_t>(f.last_applied + 1);
    }
  }
}

// Membership, contributions (however they travel), readiness for an all-reduce, the round timer.
caf::message_handler round_handlers(Self* self) {
  return {
      [=](members_atom, const messages::Membership& m) {
        auto& s = self->state;
        auto before = std::move(s.members);
        s.members.clear();
        if (self->state.stage < m.stages.size())
          for (const auto& w : m.stages[self->state.stage]) {
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
        auto complete = s.chunks.add(chunk, "diloco group " + std::to_string(self->state.stage));
        if (!complete) {
          s.rejected += s.chunks.refused() - s.refused_chunks;
          s.refused_chunks = s.chunks.refused();
          return;
        }
        if (complete->kind != messages::FrameKind::round) {
          ++s.rejected;
          spdlog::warn("diloco group {}: refused a micro-batch frame", self->state.stage);
          return;
        }
        on_contribution(self, complete->frame, caf::actor_cast<caf::actor>(self->current_sender()));
      },
      [=](round_timer_atom, uint64_t round, uint32_t p) {
        auto& s = self->state;
        auto& f = s.fragments.at(p);
        if (round != f.round || f.contributions.empty()) return;
        if (quorum(s).enough_after_timeout(f.contributions.size())) {
          spdlog::warn(
              "diloco group {}: round {} of fragment {} applied with {} of {} workers after the "
              "timeout",
              self->state.stage, round, p, f.contributions.size(), s.members.size());
          apply_round(self, p);
        } else {
          f.timer_armed = false;
        }
      },
  };
}

// What others ask: counters, θ, the console's info, a new worker's starting state.
caf::message_handler query_handlers(Self* self) {
  return {
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
        info["quantize"] = s.ctx->config.diloco.encoding();
        for (uint32_t p = 0; p < s.fragments.size(); ++p) {
          const auto& f = s.fragments[p];
          info["fragments"].push_back({{"fragment", p},
                                       {"tensors", f.index.size()},
                                       {"round", f.round},
                                       {"last_applied", f.last_applied},
                                       {"contributions", f.contributions.size()},
                                       {"bytes_sent", f.bytes}});
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
        st.source = "DiLoCo group " + std::to_string(self->state.stage) + " (round " +
                    std::to_string(s.fragments[0].last_applied) + ")";
        return st;
      },
      // The same, asked from another process (relay.hpp): answered in slices.
      [=](relay_atom, const caf::actor& to, uint64_t ms, state_atom a) {
        transport::relay<messages::WorkerState>(self, to, ms, a);
      },
      // The store was replaced before the run started (a takeover that continues from the
      // journal, tracker/takeover.cpp): the group continues from it. Its own process only.
      [=](reset_atom) {
        auto& s = self->state;
        const auto& sender = self->current_sender();
        if (!sender || sender->node() != self->node()) {
          ++s.rejected;
          spdlog::warn("rejected: diloco group {} dropped a reset from another process", s.stage);
          return;
        }
        for (auto& f : s.fragments) {
          f.contributions.clear();
          f.wires.clear();
          f.excused.clear();
          f.final = false;
          f.timer_armed = false;  // a timer of the old round finds it no more
          f.step = 0;
          f.density = 0;
          f.carried = 0;
        }
        take_store(self, whole(s, false));
      },
  };
}

}  // namespace

caf::behavior diloco_group(Self* self, ContextPtr ctx, uint32_t stage, model::NamedTensors theta,
                           GroupStorePtr store, caf::actor metrics) {
  set_up_diloco_group(self, std::move(ctx), stage, std::move(theta), std::move(store),
                      std::move(metrics));
  return caf::behavior(round_handlers(self).or_else(query_handlers(self)));
}

}  // namespace swarmrt::actors
