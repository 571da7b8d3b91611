// The step tracker's phases, one behaviour each (the state diagram is in step_tracker.hpp):
// a phase's own messages, and what it does beyond the common handling (step_tracker.cpp) with a
// message every phase takes. The phase the tracker is in is the behaviour that is active
// (tracker::enter); nothing tests the Phase enum, which only names the phase for `info`.
#include "actors/tracker/internal.hpp"

#include <spdlog/spdlog.h>
#include <cmath>

namespace swarmrt::actors::tracker {
using namespace swarmrt::atoms;

namespace {

// Between runs and before the first step: nothing is in flight.
caf::message_handler idle(Self* self) {
  return {
      // No step to keep its workers: a new membership is taken at once.
      [=](members_atom, const messages::Membership& m) {
        if (take_membership(self, m)) adopt_membership(self);
      },
      [=](start_state_atom, const messages::StateRequest& r) {
        return state_for(self, r.stage, r.id, r.who.address(), Handoff::now);
      },
      [=](checkpoint_atom) {
        const char* why =
            self->state.setup.run ? "the run is not training" : "this run has no run directory";
        return nlohmann::json{{"ok", false}, {"error", why}}.dump();
      },
      [=](stop_atom) {},
      [=](escalated_atom, const caf::error&) {},
      // Between runs workers may stop. A restarted tracker learns its membership before the
      // run goes on: a worker of it that is gone already stays out.
      [=](worker_down_atom, uint32_t id, const caf::actor_addr& addr, const caf::error& why) {
        auto& s = self->state;
        s.dead.insert(addr);
        if (s.restored) forget_worker(self, id, addr, why);
      },
  };
}

// A restarted tracker reopening a step: every worker, then every averager, drops what it did
// in it (restart.cpp) before the step opens again.
caf::message_handler resetting(Self* self) {
  return {
      [=](reset_done_atom, uint64_t step, uint32_t worker) {
        auto& s = self->state;
        if (s.step != step || s.resetting.erase(worker) == 0) return;
        maybe_reset_done(self);
      },
      [=](reset_done_atom, uint64_t step) {
        auto& s = self->state;
        if (s.step == step && --s.averager_resets == 0) open_step(self);
      },
      [=](worker_down_atom, uint32_t id, const caf::actor_addr& addr, const caf::error& why) {
        forget_worker(self, id, addr, why);
        self->state.resetting.erase(id);
        maybe_reset_done(self);
      },
  };
}

// A worker's restart may be announced before its predecessor's down arrives (they come from
// different processes): mid-step it waits for the next step. Once the down empties the stage
// and pauses the pipeline, no other membership need ever come, so the waiting one is taken
// now (left waiting, the pipeline stayed paused for good).
bool adopt_if_paused(Self* self) {
  auto& s = self->state;
  if (!s.paused || !s.pending) return false;
  adopt_membership(self);
  return true;
}

caf::message_handler running(Self* self) {
  return {
      // With a stage left empty mid-step there is nothing to lose by changing the step's
      // workers: the new membership is taken at once.
      [=](members_atom, const messages::Membership& m) {
        if (!take_membership(self, m) || !self->state.paused) return;
        adopt_membership(self);
        dispatch_waiting(self);
      },
      // The loss and the completion may arrive in either order: the step closes on the later.
      [=](loss_atom, const messages::LossReport& r) {
        if (take_loss(self, r)) maybe_close_step(self);
      },
      [=](done_atom, const messages::DoneReport& r) {
        if (take_done(self, r)) maybe_close_step(self);
      },
      [=](microbatch_timer_atom, uint64_t step, uint32_t mb, uint32_t attempt, uint64_t moves) {
        on_microbatch_timer(self, step, mb, attempt, moves);
      },
      [=](worker_down_atom, uint32_t id, const caf::actor_addr& addr, const caf::error& why) {
        forget_worker(self, id, addr, why);
        rerun_through(self, id);
        expire_checks(self, id);
        if (adopt_if_paused(self)) dispatch_waiting(self);
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
      [=](replaced_atom, const std::string& kind, uint32_t k, const caf::actor& handle) {
        on_replaced(self, kind, k, handle);
        if (kind == "averager")
          spdlog::warn("averager {} restarted while reducing step {}", k, self->state.step);
      },
      [=](worker_down_atom, uint32_t id, const caf::actor_addr& addr, const caf::error& why) {
        forget_worker(self, id, addr, why);
        maybe_apply(self);  // it is no longer waited for
      },
  };
}

caf::message_handler applying(Self* self) {
  return {
      [=](applied_atom, uint64_t step, uint32_t worker, const messages::ProcessBytes& sent) {
        auto& s = self->state;
        // Another process's counters, for the swarm's totals (this process counts its own).
        const auto& ctx = *s.setup.ctx;
        if (!sent.process.empty() && sent.process != ctx.process)
          ctx.remote_bytes->report(sent.process, sent.sent);
        if (step != s.step) return;
        s.applied.insert(worker);
        if (auto it = s.by_id.find(worker); it != s.by_id.end())
          s.settled.insert(it->second.address());
        maybe_finish_step(self);
      },
      // A peer may be halfway through the step: its state is handed out after it.
      [=](start_state_atom, const messages::StateRequest& r) {
        return state_for(self, r.stage, r.id, r.who.address(), Handoff::after_apply);
      },
      [=](worker_down_atom, uint32_t id, const caf::actor_addr& addr, const caf::error& why) {
        forget_worker(self, id, addr, why);
        maybe_finish_step(self);  // it is no longer waited for
      },
  };
}

// Gathering every worker's state for a checkpoint (eval_checkpoint.cpp). A worker lost
// meanwhile fails its request, and the checkpoint goes on without it.
caf::message_handler saving(Self* self) {
  return {
      [=](saved_state_atom, uint64_t step, uint32_t worker, const messages::WorkerState& st) {
        auto& s = self->state;
        if (s.step != step) return;
        s.saving[worker] = st;
        if (s.saving.size() >= s.saving_wanted) write_saved(self);
      },
      [=](saved_state_atom, uint64_t step, uint32_t worker, const std::string& error) {
        auto& s = self->state;
        if (s.step != step) return;
        spdlog::warn("checkpoint of step {}: worker {} did not answer: {}", step, worker, error);
        if (--s.saving_wanted <= s.saving.size()) write_saved(self);
      },
  };
}

caf::message_handler evaluating(Self* self) {
  return {
      // As while running: a stage left empty takes its new workers at once, and the
      // evaluation starts again through them.
      [=](members_atom, const messages::Membership& m) {
        if (!take_membership(self, m) || !self->state.paused) return;
        adopt_membership(self);
        if (!self->state.paused) start_eval(self);
      },
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
        const double bpb = s.setup.corpus->bits_per_byte(val);
        write_metrics(self, {{"event", "eval"},
                             {"step", s.step},
                             {"val_loss", val},
                             {"val_bpb", bpb},
                             {"val_ppl", std::exp(val)}});
        if (s.setup.progress)
          spdlog::info("eval step {} | val_loss {:.4f} | val_bpb {} | val_ppl {:.2f}", s.step, val,
                       model::format_bpb(bpb), std::exp(val));
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
      [=](worker_down_atom, uint32_t id, const caf::actor_addr& addr, const caf::error& why) {
        forget_worker(self, id, addr, why);
        adopt_if_paused(self);
        start_eval(self);  // again, through live workers
      },
  };
}

}  // namespace

caf::message_handler own_handlers(Self* self, Phase phase) {
  // In the order of the enum.
  using Handlers = caf::message_handler (*)(Self*);
  static const Handlers by_phase[] = {idle,     resetting, running,   reducing,
                                      applying, saving,    evaluating};
  return by_phase[static_cast<size_t>(phase)](self);
}

}  // namespace swarmrt::actors::tracker
