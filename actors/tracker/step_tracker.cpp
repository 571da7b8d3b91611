#include "actors/tracker/step_tracker.hpp"

#include <spdlog/spdlog.h>
#include <cmath>

#include "actors/tracker/internal.hpp"
#include "actors/tracker/swarm_checkpoint.hpp"
#include "model/data.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using namespace swarmrt::actors::tracker;

namespace {

// Membership and restarts, and the state a new or restarted worker starts from (any phase).
caf::message_handler membership_handlers(Self* self) {
  return {
      [=](members_atom, const messages::Membership& m) {
        auto& s = self->state;
        if (s.pending && s.pending->version > m.version) return;
        s.pending = m;
        // Between steps, or with a stage left empty mid-step (nothing to lose by changing
        // the step's workers), the new membership is taken at once.
        if (s.phase == Phase::idle ||
            (s.paused && (s.phase == Phase::running || s.phase == Phase::evaluating))) {
          const bool evaluating = s.phase == Phase::evaluating;
          adopt_membership(self);
          if (evaluating && !s.paused) start_eval(self);
          if (s.phase == Phase::running) dispatch_waiting(self);
        }
      },
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
        auto& s = self->state;
        if (kind == "loader") {
          if (k < s.setup.loaders.size())
            s.setup.loaders[k] = caf::actor_cast<loader_actor>(handle);
          return;
        }
        std::vector<caf::actor>* list = kind == "group"      ? &s.setup.groups
                                        : kind == "averager" ? &s.setup.averagers
                                                             : nullptr;
        if (!list || k >= list->size()) return;
        (*list)[k] = handle;
        self->send(handle, members_atom::value, s.members);
        for (const auto& [id, w] : s.by_id) self->send(w, replaced_atom::value, kind, k, handle);
        if (kind == "averager" && s.phase == Phase::reducing)
          spdlog::warn("averager {} restarted while reducing step {}", k, s.step);
      },
      [=](batch_retry_timer_atom, uint64_t step, uint32_t mb) {
        auto& s = self->state;
        if (s.step == step && mb < s.micro.size() && !s.micro[mb].ready) request_batch(self, mb);
      },
      [=](start_state_atom, const messages::StateRequest& r) {
        return state_for(self, r.stage, r.id, r.who.address());
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
                              {"membership_version", s.members.version},
                              {"workers", s.by_id.size()},
                              {"members", members}}
            .dump();
      },
      [=](checkpoint_atom) -> caf::result<std::string> {
        auto& s = self->state;
        if (!s.setup.run)
          return nlohmann::json{{"ok", false}, {"error", "this run has no run directory"}}.dump();
        if (s.phase == Phase::idle)
          return nlohmann::json{{"ok", false}, {"error", "the run is not training"}}.dump();
        s.checkpoint_asks.push_back(self->make_response_promise<std::string>());
        return s.checkpoint_asks.back();
      },
      [=](watch_atom, const caf::actor& supervisor) {
        self->state.watched.insert(supervisor.address());
        self->monitor(supervisor);
      },
      [=](stop_atom) {
        auto& s = self->state;
        if (s.phase == Phase::idle) return;
        spdlog::warn("step tracker: stopped at step {}", s.step);
        enter(self, Phase::idle);
        answer_checkpoint_asks(self, "", "the run stopped at step " + std::to_string(s.step));
        s.promise.deliver(
            caf::make_error(caf::sec::runtime_error, "stopped at step " + std::to_string(s.step)));
      },
      [=](run_atom) -> caf::result<messages::RunReport> {
        auto& s = self->state;
        s.promise = self->make_response_promise<messages::RunReport>();
        if (!s.restored) {
          s.run_start = tracker_state::Clock::now();
          start_step(self);
          for (const auto& [id, handle] : s.by_id) s.starters.insert(handle.address());
          s.settled = s.starters;
          return s.promise;
        }
        continue_run(self);
        return s.promise;
      },
      [=](loss_atom, const messages::LossReport& r) {
        auto& s = self->state;
        if (r.step != s.step || r.micro_batch >= s.micro.size() ||
            r.attempt != s.micro[r.micro_batch].attempt)
          return;
        auto& m = s.micro[r.micro_batch];
        if (m.has_loss) {
          ++s.outcome.duplicates;
          return;
        }
        m.has_loss = true;
        m.loss = r.loss;
        m.route = r.route;
        if (m.done) m.pin = m.route;
        maybe_close_step(self);  // the loss and the completion may arrive in either order
      },
      [=](done_atom, const messages::DoneReport& r) {
        auto& s = self->state;
        if (r.step != s.step || r.micro_batch >= s.micro.size() ||
            r.attempt != s.micro[r.micro_batch].attempt)
          return;
        auto& m = s.micro[r.micro_batch];
        if (m.done) {
          ++s.outcome.duplicates;
          return;
        }
        m.done = true;
        if (m.has_loss) m.pin = m.route;  // backward went through all of them: they hold it
        s.stage0.completed(r.worker, static_cast<double>(m.batch.tensors[0].size(0)), m.sent,
                           tracker_state::Clock::now());
        dispatch_waiting(self);
        maybe_close_step(self);
      },
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
      [=](microbatch_timer_atom, uint64_t, uint32_t, uint32_t) {},
      [=](eval_timer_atom, uint64_t, uint32_t) {},
      [=](norm_atom, const messages::NormReport&) {},
      [=](applied_atom, uint64_t, uint32_t) {},
      [=](eval_loss_atom, uint64_t, uint32_t, double) {},
  };
}

caf::message_handler running(Self* self) {
  return {
      // A micro-batch did not come back in time: a hop was lost. Re-run it like one that went
      // through a lost worker (its holders keep their share of the gradient).
      [=](microbatch_timer_atom, uint64_t step, uint32_t mb, uint32_t attempt) {
        auto& s = self->state;
        if (s.step != step || mb >= s.micro.size()) return;
        auto& m = s.micro[mb];
        if (m.attempt != attempt || (m.done && m.has_loss) || !m.awaiting.empty()) return;
        if (std::find(s.waiting.begin(), s.waiting.end(), mb) != s.waiting.end()) return;
        const double timeout = s.setup.ctx->config.supervision.microbatch_timeout_s;
        if (s.paused) {  // nothing comes back while a stage is empty: wait again
          self->delayed_send(self, microbatch_timeout(s), microbatch_timer_atom::value, step, mb,
                             attempt);
          return;
        }
        spdlog::warn("micro-batch {} of step {} (attempt {}) not back after {} s: re-running it",
                     mb, step, attempt, timeout);
        write_metrics(self, {{"event", "fault"},
                             {"kind", "microbatch_timeout"},
                             {"step", step},
                             {"micro_batch", mb},
                             {"attempt", attempt}});
        if (!s.fault_at) s.fault_at = tracker_state::Clock::now();
        rerun(self, mb);
        std::sort(s.waiting.begin(), s.waiting.end());
        dispatch_waiting(self);
      },
  };
}

caf::message_handler reducing(Self* self) {
  return {
      [=](norm_atom, const messages::NormReport& r) {
        auto& s = self->state;
        if (r.step != s.step) return;
        s.sqnorms[r.worker] = r.sqnorm;
        s.outcome.samples[r.worker] = r.samples;
        maybe_apply(self);
      },
  };
}

caf::message_handler applying(Self* self) {
  return {
      [=](applied_atom, uint64_t step, uint32_t worker) {
        auto& s = self->state;
        if (step != s.step) return;
        s.applied.insert(worker);
        if (auto it = s.by_id.find(worker); it != s.by_id.end())
          s.settled.insert(it->second.address());
        maybe_finish_step(self);
      },
  };
}

caf::message_handler evaluating(Self* self) {
  return {
      [=](eval_loss_atom, uint64_t step, uint32_t idx, double loss) {
        auto& s = self->state;
        if (step != s.step || idx >= s.val_losses.size()) return;
        s.val_losses[idx] = loss;
        s.val_have[idx] = true;
        for (bool have : s.val_have)
          if (!have) return;
        double sum = 0;
        for (double l : s.val_losses) sum += l;
        const double val = sum / static_cast<double>(s.val_losses.size());
        s.report.val_loss = val;
        write_metrics(
            self,
            {{"event", "eval"}, {"step", s.step}, {"val_loss", val}, {"val_ppl", std::exp(val)}});
        if (s.setup.progress)
          spdlog::info("eval step {} | val_loss {:.4f} | val_ppl {:.2f}", s.step, val,
                       std::exp(val));
        if (static_cast<int64_t>(s.step) == s.setup.ctx->config.train.steps)
          finish_run(self);
        else
          start_step(self);
      },

      // Validation losses missing after the timeout: their hops were lost. Only those go again
      // (a late answer of the earlier send-out is taken as well: the parameters are the same).
      [=](eval_timer_atom, uint64_t step, uint32_t sends) {
        auto& s = self->state;
        if (s.step != step || sends != s.eval_sends) return;
        if (empty_stage(s)) return;  // paused: the evaluation starts again when a worker joins
        const auto missing = std::count(s.val_have.begin(), s.val_have.end(), false);
        spdlog::warn("evaluation of step {}: {} loss(es) not back after {} s: sending them again",
                     step, missing, s.setup.ctx->config.supervision.microbatch_timeout_s);
        write_metrics(
            self,
            {{"event", "fault"}, {"kind", "eval_timeout"}, {"step", step}, {"missing", missing}});
        send_eval(self);
      },
  };
}

}  // namespace

namespace tracker {

// One behaviour per phase (the state diagram is in step_tracker.hpp): the phase's own
// messages first, then those of every phase, then the stale ones.
void enter(Self* self, Phase phase) {
  self->state.phase = phase;
  const caf::message_handler own = phase == Phase::running      ? running(self)
                                   : phase == Phase::reducing   ? reducing(self)
                                   : phase == Phase::applying   ? applying(self)
                                   : phase == Phase::evaluating ? evaluating(self)
                                                                : caf::message_handler{};
  const caf::message_handler handler = own.or_else(always(self)).or_else(stale());
  self->become(caf::behavior(handler));
}

}  // namespace tracker

caf::behavior step_tracker(Self* self, TrackerSetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  const auto& cfg = s.setup.ctx->config;
  s.stage0 = policy::Wiring(wiring_policy(cfg.swarm.wiring), static_cast<uint64_t>(cfg.train.seed),
                            static_cast<int>(cfg.swarm.max_inflight));
  s.stage0.set_measure(s.setup.ctx->wiring_measure);
  {
    model::Windows val(&s.setup.corpus->val(), cfg.model.block_size);
    s.val = model::validation_batches(val, cfg.train.eval_batches, cfg.train.micro_batch);
  }
  if (s.setup.resume) {
    s.step = swarm_checkpoint_step(*s.setup.resume, s.setup.resume_origin);
    s.first_step = s.step;
  }
  if (s.setup.store) restore(self);
  // A worker that goes down leaves the swarm and the step goes on without it; its supervisor
  // (if any) restarts it and it comes back through a membership update.
  self->set_down_handler([=](const caf::down_msg& down) {
    auto& s = self->state;
    if (s.watched.count(down.source)) {
      // A supervisor gave up (restart intensity exceeded): the run cannot go on.
      if (!down.reason || s.phase == Phase::idle) return;
      const std::string why = "a supervisor escalated: " + self->system().render(down.reason);
      spdlog::error("step tracker: {}", why);
      enter(self, Phase::idle);
      s.promise.deliver(caf::make_error(caf::sec::runtime_error, why));
      return;
    }
    for (const auto& [id, handle] : s.by_id)
      if (handle.address() == down.source) {
        if (s.phase == Phase::idle) {  // between runs workers may stop
          s.dead.insert(down.source);
          // A restarted tracker learns its membership before the run goes on: a worker of it
          // that is gone already stays out.
          if (s.restored) on_worker_lost(self, id, down.source, down.reason);
          return;
        }
        return on_worker_lost(self, id, down.source, down.reason);
      }
  });
  const caf::message_handler idle = always(self).or_else(stale());
  return caf::behavior(idle);
}

}  // namespace swarmrt::actors
