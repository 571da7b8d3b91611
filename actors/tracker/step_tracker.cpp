#include "actors/tracker/step_tracker.hpp"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cmath>

#include "actors/tracker/internal.hpp"
#include "actors/tracker/swarm_checkpoint.hpp"
#include "model/data.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using namespace swarmrt::actors::tracker;

namespace tracker {

// The common handling of messages that some phases extend (phases.cpp).

bool take_membership(Self* self, const messages::Membership& m) {
  auto& s = self->state;
  if (s.pending && s.pending->version > m.version) return false;
  s.pending = m;  // adopted when the next step opens (or at once, where a phase says so)
  return true;
}

void on_replaced(Self* self, const std::string& kind, uint32_t k, const caf::actor& handle) {
  auto& s = self->state;
  if (kind == "loader") {
    if (k < s.setup.loaders.size()) s.setup.loaders[k] = caf::actor_cast<loader_actor>(handle);
    return;
  }
  std::vector<caf::actor>* list = kind == "group"      ? &s.setup.groups
                                  : kind == "averager" ? &s.setup.averagers
                                                       : nullptr;
  if (!list || k >= list->size()) return;
  (*list)[k] = handle;
  self->send(handle, members_atom::value, s.members);
  for (const auto& [id, w] : s.by_id) self->send(w, replaced_atom::value, kind, k, handle);
}

// The open step's micro-batch a report is about, or null when it is about another step or an
// attempt given up.
template <class Report>
tracker_state::Micro* current(Self* self, const Report& r) {
  auto& s = self->state;
  if (r.step != s.step || r.micro_batch >= s.micro.size() ||
      r.attempt != s.micro[r.micro_batch].attempt)
    return nullptr;
  return &s.micro[r.micro_batch];
}

bool take_loss(Self* self, const messages::LossReport& r) {
  auto& s = self->state;
  auto* current_micro = current(self, r);
  if (current_micro == nullptr) return false;
  auto& m = *current_micro;
  if (m.has_loss) {
    ++s.outcome.duplicates;
    return false;
  }
  m.has_loss = true;
  m.loss = r.loss;
  m.route = r.route;
  if (m.done) m.pin = m.route;
  return true;
}

bool take_done(Self* self, const messages::DoneReport& r) {
  auto& s = self->state;
  auto* current_micro = current(self, r);
  if (current_micro == nullptr) return false;
  auto& m = *current_micro;
  if (m.done) {
    ++s.outcome.duplicates;
    return false;
  }
  m.done = true;
  if (m.has_loss) m.pin = m.route;  // backward went through all of them: they hold it
  take_hop(self, {r.step, r.micro_batch, r.attempt, r.worker, true, {}});  // it is through
  s.stage0.completed(r.worker, static_cast<double>(m.batch.tensors[0].size(0)), m.sent,
                     tracker_state::Clock::now());
  dispatch_waiting(self);
  return true;
}

// A worker took a hop (it computes it) or handed it on: what it is busy with, how long a hop
// takes, and where the micro-batch is. Timed from when the hop happened: its report waited
// `age_s` in the worker's batch (an age that is no duration counts as none).
void take_hop(Self* self, const messages::HopReport& r) {
  auto& s = self->state;
  const double age = std::isfinite(r.age_s) ? std::clamp(r.age_s, 0.0, 60.0) : 0.0;
  const auto now =
      tracker_state::Clock::now() - std::chrono::duration_cast<tracker_state::Clock::duration>(
                                        std::chrono::duration<double>(age));
  // A take of a micro-batch whose completion came first (reports travel in batches, the
  // completion at once) is over: the worker is not at work on it.
  if (!r.passed && r.step == s.step && r.micro_batch < s.micro.size() &&
      r.attempt == s.micro[r.micro_batch].attempt && s.micro[r.micro_batch].done)
    return;
  auto busy = s.busy.find(r.worker);
  if (!r.passed) {
    s.busy[r.worker] = {r.step, r.micro_batch, r.attempt, now};
  } else if (busy != s.busy.end() && busy->second.step == r.step &&
             busy->second.micro_batch == r.micro_batch && busy->second.attempt == r.attempt) {
    s.deadline.observe_hop(std::chrono::duration<double>(now - busy->second.since).count());
    s.busy.erase(busy);
  }
  if (r.step != s.step || r.micro_batch >= s.micro.size() ||
      r.attempt != s.micro[r.micro_batch].attempt)
    return;
  auto& m = s.micro[r.micro_batch];
  m.holder = r.worker;
  m.handed_on = r.passed;
  m.handed_to = r.to;
  ++m.moves;
  m.moved = now;
  m.busy_waited_s = 0;
}

}  // namespace tracker

namespace {

// Membership and restarts, and the state a new or restarted worker starts from.
caf::message_handler membership_handlers(Self* self) {
  return {
      [=](members_atom, const messages::Membership& m) { take_membership(self, m); },
      // A supervisor restarted worker `w.id` (same id, new actor): it replaces the old one
      // in the next membership.
      [=](restarted_atom, const messages::Member& w) {
        auto& s = self->state;
        if (!w.handle) return;  // its node is gone already
        messages::Membership m = s.pending ? *s.pending : s.members;
        messages::replace_member(m, w);
        // Pending at once, not only once the message below comes back: a second restart
        // handled before then builds on this one. (Built from the same snapshot, the later of
        // two restarts at once dropped the earlier worker from the membership: its stage stayed
        // empty and the pipeline paused for good, 1 run in 20.)
        s.pending = m;
        self->send(self, members_atom::value, m);
      },
      // A supervisor restarted a core actor: loader k, or stage k's group or averager.
      [=](replaced_atom, const std::string& kind, uint32_t k, const caf::actor& handle) {
        on_replaced(self, kind, k, handle);
      },
      [=](batch_retry_timer_atom, uint64_t step, uint32_t mb) {
        auto& s = self->state;
        if (s.step == step && mb < s.micro.size() && !s.micro[mb].ready) request_batch(self, mb);
      },
      // In a step, a member of it is served at once and another worker after the step.
      [=](start_state_atom, const messages::StateRequest& r) {
        return state_for(self, r.stage, r.id, r.who.address(), Handoff::members_now);
      },
      [=](ask_group_timer_atom, uint64_t key, int tries) {
        auto& s = self->state;
        auto it = s.asks.find(key);
        if (it == s.asks.end()) return;
        auto [stage, promise] = it->second;
        s.asks.erase(it);
        ask_group(self, stage, std::move(promise), tries);
      },
      [=](ask_members_atom) { return self->state.members; },
      // A worker's reports: its hops, then its loss or completion as if each came alone (the
      // phase in force handles them; a handler may move to the next phase).
      [=](hop_atom, const messages::HopReports& batch) {
        for (const auto& r : batch.reports) take_hop(self, r);
        for (const auto& r : batch.losses) handle_now(self, loss_atom::value, r);
        for (const auto& r : batch.done) handle_now(self, done_atom::value, r);
      },
      // Spot checks (verify.cpp): only open while the step waits for them; late ones dropped.
      [=](verified_atom, uint64_t step, uint32_t mb, uint32_t attempt, uint32_t stage,
          uint32_t checked, uint32_t verifier, double difference) {
        on_verified(self, step, mb, attempt, stage, checked, verifier, difference);
      },
      [=](verify_timer_atom, uint64_t step, uint64_t round) { on_verify_timer(self, step, round); },
      // swarm.compression = auto: a worker's choice for a link, once a step and when it changes
      // (an event then). Only members are heard.
      [=](hop_choice_atom, uint32_t worker, const std::string& link, const std::string& encoding,
          double mbit_s, double compute_ms, bool changed) {
        auto& s = self->state;
        if (!s.stage_of.count(worker) || link.size() > 256 || encoding.size() > 16) return;
        s.hop_choices[{worker, link}] = {encoding, mbit_s, compute_ms};
        if (changed)
          write_metrics(self, {{"event", "hop_encoding"},
                               {"step", s.step},
                               {"worker", worker},
                               {"to", link},
                               {"encoding", encoding},
                               {"mbit_s", mbit_s},
                               {"compute_ms", compute_ms}});
      },
      // A worker lost in a step leaves it at once; what the step needed from it the phase
      // re-runs or stops waiting for.
      [=](worker_down_atom, uint32_t id, const caf::actor_addr& addr, const caf::error& why) {
        forget_worker(self, id, addr, why);
      },
  };
}

// The run itself and what is asked of it, and the micro-batches' losses and completions (a
// late duplicate is counted in any phase).
caf::message_handler run_handlers(Self* self) {
  return {
      // What the console's `info` shows of the tracker.
      [=](info_atom) {
        auto& s = self->state;
        size_t pending = 0;
        for (const auto& m : s.micro) pending += m.done && m.has_loss ? 0 : 1;
        // The workers of the adopted membership, by the address the console lists them with.
        nlohmann::json members = nlohmann::json::array();
        for (const auto& st : s.members.stages)
          for (const auto& w : st)
            members.push_back(
                {{"id", w.id}, {"stage", w.stage}, {"addr", caf::to_string(w.handle.address())}});
        return nlohmann::json{{"step", s.step},
                              {"steps", s.setup.ctx->config.train.steps},
                              {"phase", phase_name(s.phase)},
                              {"pending_microbatches", pending},
                              {"waiting_microbatches", s.waiting.size()},
                              {"paused", s.paused},
                              {"spot_checks", verify_info(s)},
                              {"membership_version", s.members.version},
                              {"workers", s.by_id.size()},
                              {"members", members}}
            .dump();
      },
      [=](checkpoint_atom) -> caf::result<std::string> {
        auto& s = self->state;
        if (!s.setup.run)
          return nlohmann::json{{"ok", false}, {"error", "this run has no run directory"}}.dump();
        s.checkpoint_asks.push_back(self->make_response_promise<std::string>());
        return s.checkpoint_asks.back();
      },
      [=](watch_atom, const caf::actor& supervisor) {
        self->state.watched.insert(supervisor.address());
        self->monitor(supervisor);
      },
      [=](stop_atom) {
        auto& s = self->state;
        spdlog::warn("step tracker: stopped at step {}", s.step);
        enter(self, Phase::idle);
        answer_checkpoint_asks(self, "", "the run stopped at step " + std::to_string(s.step));
        s.promise.deliver(
            caf::make_error(caf::sec::runtime_error, "stopped at step " + std::to_string(s.step)));
      },
      // A supervisor gave up (restart intensity exceeded): the run cannot go on.
      [=](escalated_atom, const caf::error& reason) {
        auto& s = self->state;
        const std::string why = "a supervisor escalated: " + self->system().render(reason);
        spdlog::error("step tracker: {}", why);
        enter(self, Phase::idle);
        s.promise.deliver(caf::make_error(caf::sec::runtime_error, why));
      },
      [=](run_atom) -> caf::result<messages::RunReport> {
        auto& s = self->state;
        s.promise = self->make_response_promise<messages::RunReport>();
        if (!s.restored) {
          if (s.deciding) decide_takeover(self);
          s.run_start = tracker_state::Clock::now();
          if (s.from_kept) {
            continue_from_kept(self);
            return s.promise;
          }
          start_step(self);
          for (const auto& [id, handle] : s.by_id) s.starters.insert(handle.address());
          s.settled = s.starters;
          return s.promise;
        }
        continue_run(self);
        return s.promise;
      },
      [=](held_atom, const caf::actor& keeper, const std::vector<uint32_t>& stages,
          const std::vector<int64_t>& steps) { take_kept(self, keeper, stages, steps); },
      [=](loss_atom, const messages::LossReport& r) { take_loss(self, r); },
      [=](done_atom, const messages::DoneReport& r) { take_done(self, r); },
  };
}

// Messages taken in every phase.
caf::message_handler always(Self* self) {
  return membership_handlers(self).or_else(run_handlers(self));
}

// Messages of a phase that arrive in another one (a norm after the step was decided, a timer
// of a step that closed, an evaluation loss sent twice): stale, dropped.
caf::message_handler stale() {
  return {
      [=](microbatch_timer_atom, uint64_t, uint32_t, uint32_t, uint64_t) {},
      [=](eval_timer_atom, uint64_t, uint32_t) {},
      [=](norm_atom, const messages::NormReport&) {},
      [=](applied_atom, uint64_t, uint32_t, const messages::ProcessBytes&) {},
      [=](eval_loss_atom, uint64_t, uint32_t, double) {},
      [=](reset_done_atom, uint64_t, uint32_t) {},
      [=](reset_done_atom, uint64_t) {},
      [=](saved_state_atom, uint64_t, uint32_t, const messages::WorkerState&) {},
      [=](saved_state_atom, uint64_t, uint32_t, const std::string&) {},
  };
}

}  // namespace

namespace tracker {

// One behaviour per phase (the state diagram is in step_tracker.hpp): the phase's own
// messages first (phases.cpp), then those of every phase, then the stale ones.
void enter(Self* self, Phase phase) {
  self->state.phase = phase;
  self->become(behavior_of(self, phase));
}

caf::behavior behavior_of(Self* self, Phase phase) {
  return caf::behavior(own_handlers(self, phase).or_else(always(self)).or_else(stale()));
}

}  // namespace tracker

caf::behavior step_tracker(Self* self, TrackerSetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  const auto& cfg = s.setup.ctx->config;
  s.stage0 = policy::Wiring(wiring_policy(cfg.swarm.wiring), static_cast<uint64_t>(cfg.train.seed),
                            static_cast<int>(cfg.swarm.max_inflight));
  s.stage0.set_measure(s.setup.ctx->wiring_measure);
  s.deadline = policy::HopDeadline(
      {cfg.supervision.microbatch_timeout_s, cfg.supervision.microbatch_timeout_factor,
       cfg.supervision.microbatch_timeout_max_s, cfg.supervision.microbatch_max_losses});
  {
    model::Windows val(s.setup.corpus->val(), cfg.model.block_size);
    s.val = model::validation_batches(val, cfg.train.eval_batches, cfg.train.micro_batch);
  }
  if (s.setup.resume) {
    s.step = swarm_checkpoint_step(*s.setup.resume, s.setup.resume_origin);
    s.first_step = s.step;
  }
  s.scaler = model::LossScaler(cfg.train.scales_loss() ? config::Precision::fp16
                                                       : config::Precision::fp32);
  // A takeover chooses where it continues when the run starts (a tracker restarted after that
  // continues from its store).
  s.deciding = s.setup.kept_step.has_value();
  if (s.setup.store) restore(self);
  // A worker that goes down leaves the swarm and the step goes on without it; its supervisor
  // (if any) restarts it and it comes back through a membership update. What the loss means
  // depends on the phase: the down message is handed to the phase's behaviour.
  self->set_down_handler([=](const caf::down_msg& down) {
    auto& s = self->state;
    if (s.watched.count(down.source)) {
      if (down.reason) handle_now(self, escalated_atom::value, down.reason);
      return;
    }
    for (const auto& [id, handle] : s.by_id)
      if (handle.address() == down.source)
        return handle_now(self, worker_down_atom::value, uint32_t{id}, down.source, down.reason);
  });
  s.phase = Phase::idle;
  return behavior_of(self, Phase::idle);
}

}  // namespace swarmrt::actors
