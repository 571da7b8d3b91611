// Closing a step: every worker reduces (grad-sync) and reports its gradient's norm, the tracker
// decides the clip coefficient and has every worker apply, then writes the step's record and
// goes on to a checkpoint, an evaluation or the next step.
#include "actors/tracker/internal.hpp"
#include "model/fragments.hpp"

#include <spdlog/spdlog.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include "model/optim.hpp"
#include "model/run_dir.hpp"
#include "model/trainer.hpp"

namespace swarmrt::actors::tracker {
using namespace swarmrt::atoms;
using messages::Direction;

void close_step(Self* self) {
  auto& s = self->state;
  enter(self, Phase::reducing);
  s.closed_at = tracker_state::Clock::now();
  s.sqnorms.clear();
  s.outcome.samples.clear();
  for (const auto& [id, handle] : s.by_id) self->send(handle, reduce_atom::value, s.step);
  tell_chaos(self, config::KillPhase::reduce);
}

// Each micro-batch's counted attempt names one worker per stage (its route); each of those
// workers must have backpropagated its samples exactly once, and no other worker of the stage.
void account_samples(tracker_state& s) {
  std::map<uint32_t, int64_t> expected;
  for (const auto& m : s.micro) {
    const int64_t n = m.batch.tensors.empty() ? 0 : m.batch.tensors[0].size(0);
    for (uint32_t w : m.route) expected[w] += n;
  }
  s.outcome.extra_samples = s.outcome.missing_samples = 0;
  for (const auto& [id, got] : s.outcome.samples) {
    const int64_t want = expected[id];
    s.outcome.extra_samples += std::max<int64_t>(0, got - want);
    s.outcome.missing_samples += std::max<int64_t>(0, want - got);
  }
  if (s.outcome.extra_samples > 0 || s.outcome.missing_samples > 0)
    spdlog::error("step {}: workers backpropagated {} sample(s) twice and missed {}", s.step,
                  s.outcome.extra_samples, s.outcome.missing_samples);
}

void maybe_apply(Self* self) {
  auto& s = self->state;
  if (!all_reported(s, s.sqnorms)) return;
  const auto& cfg = s.setup.ctx->config;
  double coef = -1;  // DiLoCo replicas clip their own gradient (after any warm-up)
  if (s.setup.ctx->syncs_gradients(s.step)) {
    // Replicas of a stage hold the same reduced gradient: one norm per stage, summed
    // over stages, is the norm of the whole model's gradient.
    std::map<uint32_t, double> per_stage;
    for (const auto& [id, sq] : s.sqnorms)
      if (s.by_id.count(id)) per_stage.emplace(s.stage_of[id], sq);
    double total = 0;
    for (const auto& [k, sq] : per_stage) total += sq;
    coef = model::clip_coefficient(std::sqrt(total), cfg.train.grad_clip);
  }
  s.outcome.loss_scale = s.scaler.scale();
  if (cfg.train.scales_loss()) {
    // The loss scaler: one worker's overflowed gradient (an infinite norm) skips the step for
    // the whole swarm, and the scale backs off for the next one.
    bool finite = true;
    for (const auto& [id, sq] : s.sqnorms) finite = finite && std::isfinite(sq);
    if (!s.scaler.update(finite)) {
      coef = kSkipStep;
      spdlog::warn("step {}: the gradient overflowed at loss scale {}: step skipped, scale now {}",
                   s.step, s.outcome.loss_scale, s.scaler.scale());
    }
  }
  account_samples(s);
  s.outcome.loss = 0;
  for (const auto& m : s.micro) s.outcome.loss += m.loss;
  s.outcome.loss /= static_cast<double>(s.micro.size());
  s.outcome.completed = static_cast<int64_t>(s.micro.size());
  s.outcome.coef = coef;
  // Written before any worker takes the step: a restarted tracker sends this apply again.
  record(self, TrackerStore::Phase::applying);
  send_apply(self);
}

namespace {
// The step's record as far as the tracker knows it now (finish_step adds the traffic).
nlohmann::json step_record(const tracker_state& s, tracker_state::Clock::time_point now);

// chaos.kill = "coordinator" at kill_at_phase = "applied": this process ends here, after every
// worker took the step and before its record (a message to the chaos actor would arrive after
// the record). Other targets are the chaos actor's.
void chaos_at_applied(Self* self) {
  auto& s = self->state;
  const auto& c = s.setup.ctx->config.chaos;
  if (c.kill != "coordinator") return tell_chaos(self, config::KillPhase::applied);
  if (c.kill_at_phase != config::KillPhase::applied || c.kill_at_step <= 0 ||
      s.step != static_cast<uint64_t>(c.kill_at_step) || !s.setup.run)
    return;
  spdlog::warn(
      "chaos: killing this coordinator process (chaos.kill_at_step = {}, applied of the step)",
      s.step);
  std::fflush(nullptr);
  std::_Exit(137);
}
}  // namespace

void send_apply(Self* self) {
  auto& s = self->state;
  enter(self, Phase::applying);
  s.applying_at = tracker_state::Clock::now();
  s.applied.clear();
  // The workers may take the step and this leader die before its record: the leader taking
  // over reads it here (actors/tracker/takeover.cpp).
  if (s.setup.run) model::write_pending_step(s.setup.run->root(), step_record(s, s.applying_at));
  for (const auto& [id, handle] : s.by_id)
    self->send(handle, apply_atom::value, s.step, s.outcome.lr, s.outcome.coef);
  tell_chaos(self, config::KillPhase::apply);
  // With no worker left (every stage's last one lost while the step reduced), no answer
  // would ever close the step: it closes now, and the restarted workers take the next one.
  maybe_finish_step(self);
}

void maybe_finish_step(Self* self) {
  auto& s = self->state;
  if (!all_reported(s, s.applied)) return;
  chaos_at_applied(self);
  finish_step(self);
}

namespace {
// The step's time by phase: until every micro-batch was back, the reduce (norms) and the apply
// (the inner step). A phase a restarted tracker did not see is left out.
nlohmann::json phase_seconds(const tracker_state& s, tracker_state::Clock::time_point now) {
  auto secs = [](auto from, auto to) { return std::chrono::duration<double>(to - from).count(); };
  nlohmann::json out = nlohmann::json::object();
  if (s.closed_at < s.step_start || s.applying_at < s.closed_at) return out;
  out["compute"] = secs(s.step_start, s.closed_at);
  out["reduce"] = secs(s.closed_at, s.applying_at);
  out["apply"] = secs(s.applying_at, now);
  return out;
}

nlohmann::json step_record(const tracker_state& s, tracker_state::Clock::time_point now) {
  const auto& cfg = s.setup.ctx->config;
  const double secs = std::chrono::duration<double>(now - s.step_start).count();
  const int64_t tokens_per_step = cfg.tokens_per_step();
  nlohmann::json stages = nlohmann::json::array();
  for (int64_t k = 0; k < cfg.swarm.stages; ++k) {
    int64_t n = 0;
    for (const auto& [id, samples] : s.outcome.samples)
      if (auto it = s.stage_of.find(id); it != s.stage_of.end() && it->second == k) n += samples;
    stages.push_back({{"stage", k}, {"samples_per_s", static_cast<double>(n) / secs}});
  }
  nlohmann::json r = {{"event", "step"},
                      {"step", s.step},
                      {"loss", s.outcome.loss},
                      {"bpb", s.setup.corpus->train_bits_per_byte(s.outcome.loss)},
                      {"lr", s.outcome.lr},
                      {"tokens", static_cast<int64_t>(s.step) * tokens_per_step},
                      {"tokens_per_s", static_cast<double>(tokens_per_step) / secs},
                      {"time_s", std::chrono::duration<double>(now - s.run_start).count()},
                      {"phases_s", phase_seconds(s, now)},
                      {"stages", stages},
                      {"duplicates", s.outcome.duplicates},
                      {"extra_samples", s.outcome.extra_samples},
                      {"missing_samples", s.outcome.missing_samples}};
  if (cfg.verify.fraction > 0) r["spot_checks"] = verify_info(s);
  if (cfg.swarm.compression == config::Compression::automatic) {
    auto& hops = r["hop_encodings"] = nlohmann::json::array();
    for (const auto& [key, c] : s.hop_choices)
      hops.push_back({{"worker", key.first},
                      {"to", key.second},
                      {"encoding", c.encoding},
                      {"mbit_s", c.mbit_s},
                      {"compute_ms", c.compute_ms}});
  }
  if (cfg.train.scales_loss()) {
    r["loss_scale"] = s.outcome.loss_scale;
    r["skipped"] = s.outcome.coef == kSkipStep;
    r["skipped_steps"] = s.scaler.skipped();
  }
  return r;
}

}  // namespace

void write_step_record(Self* self, nlohmann::json entry) {
  auto& s = self->state;
  if (s.setup.run && s.setup.metrics) {
    // Logged here, flushed before the next step opens: a coordinator taking over reads the
    // last step record as the step its predecessor closed last (actors/tracker/takeover.cpp),
    // and the sink's queue may die with this process.
    entry["wall"] = model::wall_clock_s();
    s.setup.run->metrics().write(entry);
    self->send(s.setup.metrics, metrics_atom::value, entry.dump(), true);
  } else {
    write_metrics(self, std::move(entry));
  }
}

void finish_step(Self* self) {
  auto& s = self->state;
  const auto& cfg = s.setup.ctx->config;
  const auto now = tracker_state::Clock::now();
  const double secs = std::chrono::duration<double>(now - s.step_start).count();
  const double loss = s.outcome.loss;
  s.report.losses.push_back(loss);
  s.report.step_seconds.push_back(secs);
  s.report.completed.push_back(s.outcome.completed);
  s.report.duplicates.push_back(s.outcome.duplicates);
  if (s.outcome.coef == kSkipStep) s.report.skipped.push_back(static_cast<int64_t>(s.step));
  s.report.extra_samples.push_back(s.outcome.extra_samples);
  s.report.missing_samples.push_back(s.outcome.missing_samples);

  const int64_t tokens_per_step = cfg.tokens_per_step();
  const double elapsed = std::chrono::duration<double>(now - s.run_start).count();
  const auto bytes = s.setup.ctx->swarm_bytes();  // every process's, not only this one's
  const double sync = bytes.value("gradients", 0.0) + bytes.value("pseudo_gradients", 0.0) +
                      bytes.value("parameters", 0.0);
  const double step_sync = sync - s.sync_bytes_sent;
  s.sync_bytes_sent = sync;
  s.peak_sync_bytes = std::max(s.peak_sync_bytes, step_sync);
  auto entry = step_record(s, now);
  entry["bytes"] = bytes;
  entry["sync_bytes"] = step_sync;
  entry["peak_sync_bytes"] = s.peak_sync_bytes;
  write_step_record(self, std::move(entry));
  if (s.setup.progress &&
      (s.step % cfg.train.log_every == 0 || static_cast<int64_t>(s.step) == cfg.train.steps)) {
    const double eta = elapsed / static_cast<double>(s.step) *
                       static_cast<double>(cfg.train.steps - static_cast<int64_t>(s.step));
    spdlog::info("step {}/{} | loss {:.4f} | bpb {} | lr {:.2e} | {:.0f} tok/s | ETA {}", s.step,
                 cfg.train.steps, loss,
                 model::format_bpb(s.setup.corpus->train_bits_per_byte(loss)), s.outcome.lr,
                 static_cast<double>(tokens_per_step) / secs, model::format_duration(eta));
  }
  if (s.fault_at) {
    // The step a fault hit has completed: the time from the fault to here is its recovery.
    const double took = std::chrono::duration<double>(now - *s.fault_at).count();
    write_metrics(self, {{"event", "recovered"},
                         {"kind", "step"},
                         {"step", s.step},
                         {"seconds", took},
                         {"workers", worker_count(s)}});
    spdlog::info("step {} completed {:.2f} s after the fault", s.step, took);
    s.fault_at.reset();
  }
  record(self, TrackerStore::Phase::closed);
  release_kept(self);
  after_close(self);
}

// What follows a closed step: a periodic checkpoint, an evaluation, the next step.
void after_close(Self* self) {
  auto& s = self->state;
  const auto& cfg = s.setup.ctx->config;
  // The last step is saved with the swarm's state too, so a finished run can be extended
  // with --resume and a larger train.steps.
  const bool last = static_cast<int64_t>(s.step) == cfg.train.steps;
  // Never with a Streaming round in flight (its merge lands in a later step): a run resumed
  // from such a checkpoint could not repeat the round. Asked ones wait too.
  const bool streaming =
      cfg.swarm.mode == config::Mode::diloco || cfg.swarm.mode == config::Mode::diloco_swarm;
  const bool in_flight = streaming && model::round_in_flight(s.step, cfg.diloco);
  if (s.setup.run &&
      (last || (!s.checkpoint_asks.empty() && !in_flight) ||
       model::checkpoint_due(s.step, cfg.checkpoint.every_steps, cfg.diloco, streaming)))
    return start_saving(self);
  after_step(self);
}

void after_step(Self* self) {
  auto& s = self->state;
  const auto& cfg = s.setup.ctx->config;
  const bool last = static_cast<int64_t>(s.step) == cfg.train.steps;
  // A takeover from kept states whose step the lost leader had evaluated already: not again.
  const bool evaluated = s.from_kept && s.setup.kept_evaluated && s.step == s.first_step;
  if (!evaluated && (last || (cfg.train.eval_every > 0 && s.step % cfg.train.eval_every == 0)))
    start_eval(self);
  else
    start_step(self);
}

void finish_run(Self* self) {
  auto& s = self->state;
  enter(self, Phase::idle);
  s.promise.deliver(s.report);
}

}  // namespace swarmrt::actors::tracker
