#include "actors/step_tracker.hpp"

#include <spdlog/spdlog.h>
#include <cmath>
#include <nlohmann/json.hpp>

#include "actors/swarm_checkpoint.hpp"
#include "messages/frame.hpp"
#include "model/optim.hpp"
#include "model/trainer.hpp"
#include "transport/bulk.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;
using messages::Direction;
using Self = caf::stateful_actor<tracker_state>;
using Phase = tracker_state::Phase;

namespace {

// A micro-batch's deadline (supervision.microbatch_timeout_s): (step, mb, attempt).
using overdue_atom = caf::atom_constant<caf::atom("overdue")>;
// The evaluation's deadline (the same timeout): (step, send-out).
using eval_overdue_atom = caf::atom_constant<caf::atom("evaloverdu")>;

size_t worker_count(const tracker_state& s) {
  return s.by_id.size();
}

// Whether every live worker is in `reported` (a worker lost after reporting still counts).
template <class Set>
bool all_reported(const tracker_state& s, const Set& reported) {
  for (const auto& [id, handle] : s.by_id)
    if (!reported.count(id)) return false;
  return true;
}

// Stamped here, when it happens, not when the metrics sink gets to it.
void write_metrics(Self* self, nlohmann::json record) {
  record["wall"] = model::wall_clock_s();
  if (self->state.setup.metrics)
    self->send(self->state.setup.metrics, metrics_atom::value, record.dump());
}

std::vector<caf::actor> stage_actors(const tracker_state& s) {
  std::vector<caf::actor> out;
  for (const auto* list : {&s.setup.averagers, &s.setup.groups})
    for (const auto& a : *list)
      if (a) out.push_back(a);
  return out;
}

// Announces the current membership to every worker and stage actor: they re-wire at once.
void announce(Self* self) {
  auto& s = self->state;
  for (const auto& [id, handle] : s.by_id) self->send(handle, members_atom::value, s.members);
  for (const auto& a : stage_actors(s)) self->send(a, members_atom::value, s.members);
}

// The first stage without a worker, if any.
std::optional<size_t> empty_stage(const tracker_state& s) {
  for (size_t k = 0; k < static_cast<size_t>(s.setup.ctx->stages()); ++k)
    if (k >= s.members.stages.size() || s.members.stages[k].empty()) return k;
  return std::nullopt;
}

std::chrono::milliseconds microbatch_timeout(const tracker_state& s) {
  return std::chrono::milliseconds(
      static_cast<int64_t>(s.setup.ctx->config.supervision.microbatch_timeout_s * 1000));
}

void send_to_stage0(Self* self, uint32_t mb, uint32_t worker) {
  auto& s = self->state;
  auto& m = s.micro[mb];
  m.worker = worker;
  m.sent = tracker_state::Clock::now();
  messages::MicroBatchHeader h;
  h.run_id = s.setup.ctx->run_id;
  h.step = s.step;
  h.micro_batch = mb;
  h.attempt = m.attempt;
  h.stage = 0;
  h.direction = Direction::forward;
  h.samples = static_cast<uint32_t>(m.batch.tensors[0].size(0));
  h.pin = m.pin;
  auto& bytes = *s.setup.ctx->bytes;
  bytes.add(Traffic::activations, messages::payload_bytes(m.batch.tensors));
  auto frame = messages::make_frame(std::move(h), m.batch.tensors);
  bytes.add(Traffic::control, frame.header.size());
  transport::send_frame(self, s.by_id.at(worker), messages::FrameKind::microbatch,
                        std::move(frame));
  self->delayed_send(self, microbatch_timeout(s), overdue_atom::value, s.step, mb, m.attempt);
}

void dispatch_waiting(Self* self) {
  auto& s = self->state;
  // In index order; one whose pinned worker is at max_inflight waits without holding up
  // the others.
  for (auto it = s.waiting.begin(); it != s.waiting.end();) {
    const uint32_t mb = *it;
    const auto& m = s.micro[mb];
    std::optional<uint32_t> pinned;
    if (!m.pin.empty() && m.pin[0] != messages::kNoWorker) pinned = m.pin[0];
    auto pick = s.stage0.choose(static_cast<double>(m.batch.tensors[0].size(0)), pinned);
    if (!pick) {
      if (!pinned) return;  // every stage-0 worker is at max_inflight: wait for a completion
      ++it;
      continue;
    }
    it = s.waiting.erase(it);
    send_to_stage0(self, mb, *pick);
  }
}

void start_step(Self* self);
void start_eval(Self* self);
void start_saving(Self* self);
void after_step(Self* self);
void after_close(Self* self);
void send_apply(Self* self);

// Writes where a restarted tracker would continue (see TrackerStore).
void record(Self* self, TrackerStore::Phase phase) {
  auto& s = self->state;
  if (!s.setup.store) return;
  auto& st = *s.setup.store;
  std::lock_guard<std::mutex> lock(st.mu);
  st.phase = phase;
  st.step = s.step;
  st.first_step = s.first_step;
  st.run_start = s.run_start;
  st.step_start = s.step_start;
  if (phase == TrackerStore::Phase::closed) st.report = s.report;
  if (phase == TrackerStore::Phase::applying) {
    st.lr = s.lr;
    st.loss = s.step_loss;
    st.completed = s.step_completed;
    st.duplicates = s.duplicates;
    st.extra_samples = s.extra_samples;
    st.missing_samples = s.missing_samples;
    st.samples = s.samples;
  }
}

// Fault injection at named points of a step (chaos.kill_at_step, chaos.kill_at_phase).
void tell_chaos(Self* self, const char* phase) {
  auto& s = self->state;
  if (s.setup.chaos) self->send(s.setup.chaos, step_atom::value, s.step, std::string(phase));
}

void finish_run(Self* self) {
  auto& s = self->state;
  s.phase = Phase::idle;
  s.promise.deliver(s.report);
}

void finish_step(Self* self) {
  auto& s = self->state;
  const auto& cfg = s.setup.ctx->config;
  const auto now = tracker_state::Clock::now();
  const double secs = std::chrono::duration<double>(now - s.step_start).count();
  const double loss = s.step_loss;
  s.report.losses.push_back(loss);
  s.report.step_seconds.push_back(secs);
  s.report.completed.push_back(s.step_completed);
  s.report.duplicates.push_back(s.duplicates);
  s.report.extra_samples.push_back(s.extra_samples);
  s.report.missing_samples.push_back(s.missing_samples);

  const int64_t tokens_per_step = cfg.tokens_per_step();
  const double elapsed = std::chrono::duration<double>(now - s.run_start).count();
  nlohmann::json stages = nlohmann::json::array();
  for (int64_t k = 0; k < cfg.swarm.stages; ++k) {
    int64_t n = 0;
    for (const auto& [id, samples] : s.samples)
      if (s.stage_of[id] == k) n += samples;
    stages.push_back({{"stage", k}, {"samples_per_s", static_cast<double>(n) / secs}});
  }
  write_metrics(self, {{"event", "step"},
                       {"step", s.step},
                       {"loss", loss},
                       {"lr", s.lr},
                       {"tokens", static_cast<int64_t>(s.step) * tokens_per_step},
                       {"tokens_per_s", static_cast<double>(tokens_per_step) / secs},
                       {"time_s", elapsed},
                       {"stages", stages},
                       {"duplicates", s.duplicates},
                       {"extra_samples", s.extra_samples},
                       {"missing_samples", s.missing_samples},
                       {"bytes", s.setup.ctx->bytes->to_json()}});
  if (s.setup.progress &&
      (s.step % cfg.train.log_every == 0 || static_cast<int64_t>(s.step) == cfg.train.steps)) {
    const double eta = elapsed / static_cast<double>(s.step) *
                       static_cast<double>(cfg.train.steps - static_cast<int64_t>(s.step));
    spdlog::info("step {}/{} | loss {:.4f} | lr {:.2e} | {:.0f} tok/s | ETA {}", s.step,
                 cfg.train.steps, loss, s.lr, static_cast<double>(tokens_per_step) / secs,
                 model::format_duration(eta));
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
  after_close(self);
}

// What follows a closed step: a periodic checkpoint, an evaluation, the next step.
void after_close(Self* self) {
  auto& s = self->state;
  const auto& cfg = s.setup.ctx->config;
  // The last step is saved with the swarm's state too, so a finished run can be extended
  // with --resume and a larger train.steps.
  const bool last = static_cast<int64_t>(s.step) == cfg.train.steps;
  if (s.setup.run && (last || (cfg.checkpoint.every_steps > 0 &&
                               s.step % static_cast<uint64_t>(cfg.checkpoint.every_steps) == 0)))
    return start_saving(self);
  after_step(self);
}

void after_step(Self* self) {
  auto& s = self->state;
  const auto& cfg = s.setup.ctx->config;
  const bool last = static_cast<int64_t>(s.step) == cfg.train.steps;
  if (last || (cfg.train.eval_every > 0 && s.step % cfg.train.eval_every == 0))
    start_eval(self);
  else
    start_step(self);
}

// Periodic checkpoint: every worker's state, gathered between steps, and the groups' stores.
void write_saved(Self* self) {
  auto& s = self->state;
  std::vector<SavedWorker> workers;
  for (const auto& [id, st] : s.saving) workers.push_back({id, s.stage_of[id], st});
  try {
    auto ckpt = make_swarm_checkpoint(s.setup.ctx->config, s.step, workers, s.setup.group_stores);
    const auto path = s.setup.run->checkpoints().save(static_cast<int64_t>(s.step), ckpt,
                                                      s.setup.ctx->config.checkpoint.keep);
    spdlog::info("checkpoint {} ({} workers)", path, workers.size());
  } catch (const std::exception& e) {
    spdlog::error("checkpoint of step {} failed: {}", s.step, e.what());
  }
  s.saving.clear();
  after_step(self);
}

void start_saving(Self* self) {
  auto& s = self->state;
  s.phase = Phase::saving;
  s.saving.clear();
  s.saving_wanted = worker_count(s);
  const uint64_t step = s.step;
  for (const auto& [id, handle] : s.by_id) {
    const uint32_t wid = id;
    self->request(handle, std::chrono::seconds(60), state_atom::value)
        .then(
            [=](const messages::WorkerState& st) {
              auto& s = self->state;
              if (s.phase != Phase::saving || s.step != step) return;
              s.saving[wid] = st;
              if (s.saving.size() >= s.saving_wanted) write_saved(self);
            },
            [=](const caf::error& e) {
              auto& s = self->state;
              if (s.phase != Phase::saving || s.step != step) return;
              spdlog::warn("checkpoint of step {}: worker {} did not answer: {}", step, wid,
                           self->system().render(e));
              if (--s.saving_wanted <= s.saving.size()) write_saved(self);
            });
  }
  if (s.saving_wanted == 0) write_saved(self);
}

void close_step(Self* self) {
  auto& s = self->state;
  s.phase = Phase::reducing;
  s.sqnorms.clear();
  s.samples.clear();
  for (const auto& [id, handle] : s.by_id) self->send(handle, reduce_atom::value, s.step);
  tell_chaos(self, "reduce");
}

// Each micro-batch's counted attempt names one worker per stage (its route); each of those
// workers must have backpropagated its samples exactly once, and no other worker of the stage.
void account_samples(tracker_state& s) {
  std::map<uint32_t, int64_t> expected;
  for (const auto& m : s.micro) {
    const int64_t n = m.batch.tensors.empty() ? 0 : m.batch.tensors[0].size(0);
    for (uint32_t w : m.route) expected[w] += n;
  }
  s.extra_samples = s.missing_samples = 0;
  for (const auto& [id, got] : s.samples) {
    const int64_t want = expected[id];
    s.extra_samples += std::max<int64_t>(0, got - want);
    s.missing_samples += std::max<int64_t>(0, want - got);
  }
  if (s.extra_samples > 0 || s.missing_samples > 0)
    spdlog::error("step {}: workers backpropagated {} sample(s) twice and missed {}", s.step,
                  s.extra_samples, s.missing_samples);
}

void maybe_apply(Self* self) {
  auto& s = self->state;
  if (s.phase != Phase::reducing || !all_reported(s, s.sqnorms)) return;
  const auto& cfg = s.setup.ctx->config;
  double coef = -1;  // DiLoCo replicas clip their own gradient
  if (s.setup.ctx->grad_sync()) {
    // Replicas of a stage hold the same reduced gradient: one norm per stage, summed
    // over stages, is the norm of the whole model's gradient.
    std::map<uint32_t, double> per_stage;
    for (const auto& [id, sq] : s.sqnorms)
      if (s.by_id.count(id)) per_stage.emplace(s.stage_of[id], sq);
    double total = 0;
    for (const auto& [k, sq] : per_stage) total += sq;
    coef = model::clip_coefficient(std::sqrt(total), cfg.train.grad_clip);
  }
  account_samples(s);
  s.step_loss = 0;
  for (const auto& m : s.micro) s.step_loss += m.loss;
  s.step_loss /= static_cast<double>(s.micro.size());
  s.step_completed = static_cast<int64_t>(s.micro.size());
  s.coef = coef;
  // Written before any worker takes the step: a restarted tracker sends this apply again.
  record(self, TrackerStore::Phase::applying);
  send_apply(self);
}

void send_apply(Self* self) {
  auto& s = self->state;
  s.phase = Phase::applying;
  s.applied.clear();
  for (const auto& [id, handle] : s.by_id)
    self->send(handle, apply_atom::value, s.step, s.lr, s.coef);
  tell_chaos(self, "apply");
}

void maybe_finish_step(Self* self) {
  auto& s = self->state;
  if (s.phase == Phase::applying && all_reported(s, s.applied)) finish_step(self);
}

// Closes the step once every micro-batch has both its loss and its completion.
void maybe_close_step(Self* self) {
  auto& s = self->state;
  if (s.phase != Phase::running) return;
  for (const auto& x : s.micro)
    if (!x.done || !x.has_loss) return;
  close_step(self);
}

// Takes the newest membership and announces it to every worker and stage actor. Called only
// between steps (and before the first), so no step ever changes its set of workers midway:
// every worker that computes in a step is asked to reduce and apply it.
void adopt_membership(Self* self) {
  auto& s = self->state;
  if (!s.pending) return;
  auto m = std::move(*s.pending);
  s.pending.reset();
  // An announcement may still list a worker that has gone down since: it stays out.
  for (auto& stage : m.stages)
    stage.erase(std::remove_if(stage.begin(), stage.end(),
                               [&](const messages::Member& w) {
                                 return !w.handle || s.dead.count(w.handle.address()) > 0;
                               }),
                stage.end());
  s.members = m;
  const auto before = std::move(s.by_id);
  s.by_id.clear();
  for (const auto& stage : m.stages)
    for (const auto& w : stage) {
      auto old = before.find(w.id);
      if (old != before.end() && old->second == w.handle) continue;
      self->monitor(w.handle);
      // A new actor (joined or restarted) was set up with the handles of its start: the
      // stage's group or averager may have been restarted since.
      const auto& c = s.setup;
      if (w.stage < c.groups.size() && c.groups[w.stage])
        self->send(w.handle, replaced_atom::value, std::string("group"), w.stage,
                   c.groups[w.stage]);
      if (w.stage < c.averagers.size() && c.averagers[w.stage])
        self->send(w.handle, replaced_atom::value, std::string("averager"), w.stage,
                   c.averagers[w.stage]);
    }
  std::vector<uint32_t> ids0;
  for (const auto& stage : m.stages)
    for (const auto& w : stage) {
      s.by_id[w.id] = w.handle;
      s.stage_of[w.id] = w.stage;
      transport::register_endpoint(w.handle.node(), w.endpoint);
      if (w.stage == 0) ids0.push_back(w.id);
    }
  s.stage0.set_members(ids0);
  announce(self);
  if (s.paused && !empty_stage(s)) {
    s.paused = false;
    spdlog::info("pipeline resumed at step {}: every stage has a worker again", s.step);
    write_metrics(self, {{"event", "recovered"}, {"kind", "pipeline"}, {"step", s.step}});
  }
}

// Hands out a live peer's state to workers that asked for one (grad-sync modes): only
// between steps, when the peer's parameters and optimizer state are those of a closed step.
void serve_state_requests(Self* self) {
  auto& s = self->state;
  auto requests = std::move(s.state_requests);
  s.state_requests.clear();
  for (auto& r : requests) {
    caf::actor peer;
    for (const auto& [id, handle] : s.by_id)
      if (s.stage_of[id] == r.stage && id != r.id) {
        peer = handle;
        break;
      }
    if (!peer) {
      r.promise.deliver(messages::WorkerState{{}, {}, {}, -1, "its initialization"});
      continue;
    }
    auto promise = r.promise;
    self->request(peer, std::chrono::seconds(60), state_atom::value)
        .then([=](const messages::WorkerState& st) mutable { promise.deliver(st); },
              [=](const caf::error& e) mutable { promise.deliver(e); });
  }
}

// θ and the round from stage `stage`'s DiLoCo group; a group lost on the way is being
// restarted by its supervisor, so the tracker asks its successor a little later.
void ask_group(Self* self, uint32_t stage, caf::response_promise promise, int tries) {
  self->request(self->state.setup.groups[stage], std::chrono::seconds(60), state_atom::value)
      .then([=](const messages::WorkerState& st) mutable { promise.deliver(st); },
            [=](const caf::error& e) mutable {
              if (tries >= 100) return promise.deliver(e);
              auto& s = self->state;
              const uint64_t key = s.next_ask++;
              s.asks.emplace(key, std::make_pair(stage, promise));
              self->delayed_send(self, std::chrono::milliseconds(100), state_atom::value, key,
                                 tries + 1);
            });
}

// What a worker (re)starting at stage `stage` loads (see the header).
caf::result<messages::WorkerState> state_for(Self* self, uint32_t stage, uint32_t id,
                                             const caf::actor_addr& sender) {
  auto& s = self->state;
  const auto& ctx = *s.setup.ctx;
  // The workers the run starts with (they may ask after step 1 has begun: they are members
  // already) start from the resumed checkpoint or the initialization every replica shares.
  bool member = false;
  for (const auto& [wid, handle] : s.by_id) member |= sender && handle.address() == sender;
  const bool initial = s.step == s.first_step || member;
  if (s.setup.resume && initial) {
    try {
      if (auto st = saved_worker_state(*s.setup.resume, s.setup.resume_origin, id, stage))
        return *st;
    } catch (const std::exception& e) {
      return caf::make_error(caf::sec::runtime_error, e.what());
    }
  }
  if (ctx.diloco() && stage < s.setup.groups.size() && s.setup.groups[stage]) {
    auto promise = self->make_response_promise<messages::WorkerState>();
    ask_group(self, stage, promise, 0);
    return promise;
  }
  if (initial) return messages::WorkerState{{}, {}, {}, -1, "its initialization"};
  bool peer = false;
  for (const auto& [wid, handle] : s.by_id) peer |= (s.stage_of[wid] == stage && wid != id);
  if (peer) {
    auto promise = self->make_response_promise<messages::WorkerState>();
    s.state_requests.push_back({stage, id, promise});
    if (s.phase == Phase::idle) serve_state_requests(self);
    return promise;
  }
  // No live peer: the newest valid checkpoint of the run, else the initialization.
  if (s.setup.run) {
    auto found = s.setup.run->checkpoints().newest_valid(
        [](const auto& p, const auto& why) { spdlog::warn("refusing checkpoint {}: {}", p, why); });
    if (found) {
      try {
        if (auto st = saved_worker_state(found->second, found->first, id, stage)) return *st;
      } catch (const std::exception& e) {
        spdlog::warn("{}", e.what());
      }
    }
  }
  spdlog::warn(
      "worker {} (stage {}) has no live peer and no checkpoint: it starts from the "
      "initialization",
      id, stage);
  return messages::WorkerState{{}, {}, {}, -1, "its initialization"};
}

void request_batch(Self* self, uint32_t mb);
void open_step(Self* self);

// Every worker drops what it did in the step a lost tracker had opened, then every
// averager its partial sum (after the workers: a gradient a worker sent before its reset
// reaches the averager before the averager's reset), then the step opens again.
void reset_averagers(Self* self) {
  auto& s = self->state;
  const uint64_t step = s.step;
  s.averager_resets = 0;
  for (const auto& a : s.setup.averagers)
    if (a) ++s.averager_resets;
  if (s.averager_resets == 0) return open_step(self);
  auto answered = [=] {
    auto& s = self->state;
    if (s.phase == Phase::resetting && s.step == step && --s.averager_resets == 0) open_step(self);
  };
  for (const auto& a : s.setup.averagers)
    if (a)
      self->request(a, std::chrono::seconds(30), reset_atom::value, step)
          .then([=](bool) { answered(); }, [=](const caf::error&) { answered(); });
}

void maybe_reset_done(Self* self) {
  auto& s = self->state;
  if (s.phase == Phase::resetting && s.resetting.empty() && s.averager_resets == 0)
    reset_averagers(self);
}

void reset_workers(Self* self) {
  auto& s = self->state;
  s.phase = Phase::resetting;
  const uint64_t step = s.step;
  spdlog::warn("step tracker (restarted): opening step {} again from its first micro-batch", step);
  s.resetting.clear();
  s.averager_resets = 0;
  for (const auto& [id, handle] : s.by_id) s.resetting.insert(id);
  for (const auto& [id, handle] : s.by_id) {
    const uint32_t wid = id;
    auto answered = [=] {
      auto& s = self->state;
      if (s.phase != Phase::resetting || s.step != step || s.resetting.erase(wid) == 0) return;
      maybe_reset_done(self);
    };
    self->request(handle, std::chrono::seconds(30), reset_atom::value, step, s.attempt_base)
        .then([=](bool) { answered(); }, [=](const caf::error&) { answered(); });
  }
  maybe_reset_done(self);
}

void start_step(Self* self) {
  auto& s = self->state;
  serve_state_requests(self);  // before the peers take this step
  adopt_membership(self);
  ++s.step;
  s.step_start = tracker_state::Clock::now();
  record(self, TrackerStore::Phase::opened);
  if (s.reopen) {
    s.reopen = false;
    return reset_workers(self);
  }
  open_step(self);
}

void open_step(Self* self) {
  auto& s = self->state;
  const auto& cfg = s.setup.ctx->config;
  tell_chaos(self, "start");
  s.phase = Phase::running;
  s.step_start = tracker_state::Clock::now();
  s.lr = model::lr_at(static_cast<int64_t>(s.step), cfg.train);
  s.micro.assign(static_cast<size_t>(cfg.train.micro_batches), {});
  for (auto& m : s.micro) m.attempt = s.attempt_base;
  s.duplicates = 0;
  s.waiting.clear();
  for (uint32_t mb = 0; mb < s.micro.size(); ++mb) request_batch(self, mb);
}

void request_batch(Self* self, uint32_t mb) {
  auto& s = self->state;
  const uint64_t step = s.step;
  const auto& loader = s.setup.loaders[mb % s.setup.loaders.size()];
  self->request(loader, std::chrono::seconds(60), batch_atom::value, step, mb)
      .then(
          [=](const messages::TensorList& batch) {
            auto& s = self->state;
            if (s.step != step || s.micro[mb].ready) return;
            s.micro[mb].batch = batch;
            s.micro[mb].ready = true;
            // Keep the data order: micro-batches enter stage 0 in index order.
            s.waiting.push_back(mb);
            std::sort(s.waiting.begin(), s.waiting.end());
            dispatch_waiting(self);
          },
          [=](const caf::error& e) {
            // A loader lost on the way: its supervisor restarts it and the tracker asks the
            // new one (see replaced_atom); batches are a function of (step, mb).
            auto& s = self->state;
            if (s.step != step) return;
            spdlog::warn("micro-batch {} of step {}: loader did not answer ({}); asking again", mb,
                         step, self->system().render(e));
            self->delayed_send(self, std::chrono::milliseconds(100), batch_atom::value, step, mb);
          });
}

// Sends the validation batches not answered yet through the first worker of every stage, and
// sets a deadline: an evaluation hop can be lost like a training one.
void send_eval(Self* self) {
  auto& s = self->state;
  const auto& first = s.members.stages.at(0).at(0);
  for (uint32_t i = 0; i < s.val.size(); ++i) {
    if (s.val_have[i]) continue;
    messages::MicroBatchHeader h;
    h.run_id = s.setup.ctx->run_id;
    h.step = s.step;
    h.micro_batch = i;
    h.stage = 0;
    h.direction = Direction::eval;
    h.samples = static_cast<uint32_t>(s.val[i].samples());
    transport::send_frame(self, first.handle, messages::FrameKind::microbatch,
                          messages::make_frame(std::move(h), {s.val[i].inputs, s.val[i].targets}));
  }
  self->delayed_send(self, microbatch_timeout(s), eval_overdue_atom::value, s.step, ++s.eval_sends);
}

void start_eval(Self* self) {
  auto& s = self->state;
  s.phase = Phase::evaluating;
  s.val_losses.assign(s.val.size(), 0.0);
  s.val_have.assign(s.val.size(), false);
  if (empty_stage(s)) return;  // paused: evaluation starts when a worker joins
  send_eval(self);
}

// A worker answered the cancel of (step, mb) below `attempt`: whether it had taken the
// micro-batch's gradient in this step (it takes no older attempt from now on). Once every live
// worker has answered, the holders are known and the re-run goes out pinned to them.
void on_cancelled(Self* self, uint64_t step, uint32_t mb, uint32_t attempt, uint32_t worker,
                  bool held) {
  auto& s = self->state;
  if (s.step != step || mb >= s.micro.size()) return;
  auto& m = s.micro[mb];
  if (held && s.by_id.count(worker)) {
    const uint32_t stage = s.stage_of[worker];
    if (m.pin.size() <= stage) m.pin.resize(stage + 1, messages::kNoWorker);
    if (m.pin[stage] == messages::kNoWorker) m.pin[stage] = worker;
  }
  if (attempt != m.attempt || m.awaiting.erase(worker) == 0 || !m.awaiting.empty()) return;
  s.waiting.push_back(mb);
  std::sort(s.waiting.begin(), s.waiting.end());
  dispatch_waiting(self);
}

// Sends micro-batch `mb` of the open step again, as attempt+1: every worker drops the older
// attempts and answers whether it holds the gradient (on_cancelled), then it goes out pinned.
void rerun(Self* self, uint32_t mb) {
  auto& s = self->state;
  auto& m = s.micro[mb];
  const uint64_t step = s.step;
  if (!m.done) s.stage0.release(m.worker);  // its slot, also at a restarted worker of the same id
  const uint32_t attempt = ++m.attempt;
  m.done = false;
  m.has_loss = false;
  m.route.clear();
  for (const auto& [id, handle] : s.by_id) m.awaiting.insert(id);
  for (const auto& [id, handle] : s.by_id) {
    const uint32_t wid = id;
    self->request(handle, std::chrono::seconds(30), cancel_atom::value, step, mb, attempt)
        .then([=](bool held) { on_cancelled(self, step, mb, attempt, wid, held); },
              [=](const caf::error&) { on_cancelled(self, step, mb, attempt, wid, false); });
  }
  if (m.awaiting.empty()) s.waiting.push_back(mb);
}

// Re-runs from stage 0, as attempt+1, every micro-batch of the open step whose gradient
// worker `lost` held or may have been about to take: a completed one whose route went through
// it (the gradient died with it), one in backward through it, or one still on its way
// forward (its path is not known yet). Every worker drops the older attempts and says whether
// it holds the gradient; the re-run is pinned to those holders, so the stages that kept the
// gradient do not take it again.
void rerun_through(Self* self, uint32_t lost) {
  auto& s = self->state;
  size_t reruns = 0;
  for (uint32_t mb = 0; mb < s.micro.size(); ++mb) {
    auto& m = s.micro[mb];
    if (!m.ready) continue;
    auto held = std::find(m.pin.begin(), m.pin.end(), lost);
    const bool lost_gradient = held != m.pin.end();
    if (lost_gradient) *held = messages::kNoWorker;
    // Not sent out yet (waiting for answers or for a slot): nothing of it is in flight. The
    // lost worker will not answer (its node may be gone: no error until the timeout).
    if (!m.awaiting.empty()) {
      if (m.awaiting.erase(lost) > 0 && m.awaiting.empty()) s.waiting.push_back(mb);
      continue;
    }
    if (std::find(s.waiting.begin(), s.waiting.end(), mb) != s.waiting.end()) continue;
    const bool on_route = std::find(m.route.begin(), m.route.end(), lost) != m.route.end();
    if (m.done && m.has_loss && !lost_gradient) continue;  // (done without a loss: route unknown)
    if (!m.done && m.has_loss && !on_route) continue;
    rerun(self, mb);
    ++reruns;
  }
  std::sort(s.waiting.begin(), s.waiting.end());
  if (reruns > 0)
    spdlog::warn("step {}: re-running {} micro-batch(es) that went through worker {}", s.step,
                 reruns, lost);
  dispatch_waiting(self);
}

// A worker went down: it leaves the membership now (everyone re-wires), and whatever the
// step needed from it is re-run or no longer waited for.
void on_worker_lost(Self* self, uint32_t id, const caf::actor_addr& addr, const caf::error& why) {
  auto& s = self->state;
  s.dead.insert(addr);
  const uint32_t stage = s.stage_of[id];
  s.by_id.erase(id);
  for (auto& st : s.members.stages)
    st.erase(
        std::remove_if(st.begin(), st.end(), [&](const messages::Member& w) { return w.id == id; }),
        st.end());
  std::vector<uint32_t> ids0;
  if (!s.members.stages.empty())
    for (const auto& w : s.members.stages[0]) ids0.push_back(w.id);
  s.stage0.set_members(ids0);
  if (!s.fault_at) s.fault_at = tracker_state::Clock::now();
  const std::string reason = self->system().render(why);
  spdlog::warn("stage worker {} (stage {}) went down at step {}: {}", id, stage, s.step, reason);
  write_metrics(self, {{"event", "fault"},
                       {"kind", "worker_lost"},
                       {"worker", id},
                       {"stage", stage},
                       {"step", s.step},
                       {"reason", reason}});
  announce(self);
  if (auto k = empty_stage(s); k && !s.paused) {
    s.paused = true;
    spdlog::warn("pipeline paused at step {}: stage {} has no worker; waiting for one to join",
                 s.step, *k);
    write_metrics(
        self, {{"event", "fault"}, {"kind", "pipeline_paused"}, {"stage", *k}, {"step", s.step}});
  }
  switch (s.phase) {
    case Phase::running:
      rerun_through(self, id);
      break;
    case Phase::reducing:
      maybe_apply(self);
      break;
    case Phase::applying:
      maybe_finish_step(self);
      break;
    case Phase::saving:
      break;  // its request fails and the checkpoint goes on without it
    case Phase::evaluating:
      start_eval(self);  // again, through live workers
      break;
    case Phase::resetting:
      s.resetting.erase(id);
      maybe_reset_done(self);
      break;
    case Phase::idle:
      break;
  }
}

// A tracker started by its supervisor after its predecessor was lost takes the run's
// progress from the store (see TrackerStore); the membership comes from the supervisor.
void restore(Self* self) {
  auto& s = self->state;
  auto& st = *s.setup.store;
  std::lock_guard<std::mutex> lock(st.mu);
  s.attempt_base = st.incarnation++ << 16;
  if (st.phase == TrackerStore::Phase::none) return;
  s.restored = st.phase;
  s.step = st.step;
  s.first_step = st.first_step;
  s.run_start = st.run_start;
  s.step_start = st.step_start;
  s.report = st.report;
  if (st.phase == TrackerStore::Phase::applying) {
    s.lr = st.lr;
    s.coef = st.coef;
    s.step_loss = st.loss;
    s.step_completed = st.completed;
    s.duplicates = st.duplicates;
    s.extra_samples = st.extra_samples;
    s.missing_samples = st.missing_samples;
    s.samples = st.samples;
  }
}

// Continues the run where the lost tracker was (see TrackerStore).
void continue_run(Self* self) {
  auto& s = self->state;
  const auto phase = *s.restored;
  s.restored.reset();
  s.fault_at = tracker_state::Clock::now();
  switch (phase) {
    case TrackerStore::Phase::opened:
      spdlog::warn("step tracker (restarted): step {} was open", s.step);
      --s.step;
      s.reopen = true;
      start_step(self);
      break;
    case TrackerStore::Phase::applying:
      spdlog::warn("step tracker (restarted): the workers were applying step {}: sent again",
                   s.step);
      adopt_membership(self);
      send_apply(self);
      maybe_finish_step(self);
      break;
    case TrackerStore::Phase::closed:
      spdlog::warn("step tracker (restarted): step {} was closed", s.step);
      adopt_membership(self);
      after_close(self);
      break;
    case TrackerStore::Phase::none:
      break;
  }
}

}  // namespace

caf::behavior step_tracker(Self* self, TrackerSetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  const auto& cfg = s.setup.ctx->config;
  s.stage0 = Wiring(cfg.swarm.wiring, static_cast<uint64_t>(cfg.train.seed),
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
      s.phase = Phase::idle;
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
        ++m.version;
        if (m.stages.size() <= w.stage) m.stages.resize(w.stage + 1);
        for (auto& st : m.stages)
          st.erase(std::remove_if(st.begin(), st.end(),
                                  [&](const messages::Member& x) { return x.id == w.id; }),
                   st.end());
        m.stages[w.stage].push_back(w);
        self->send(self, members_atom::value, m);
      },
      // A supervisor restarted a core actor: loader k, or stage k's group or averager.
      [=](replaced_atom, const std::string& kind, uint32_t k, const caf::actor& handle) {
        auto& s = self->state;
        std::vector<caf::actor>* list = kind == "loader"     ? &s.setup.loaders
                                        : kind == "group"    ? &s.setup.groups
                                        : kind == "averager" ? &s.setup.averagers
                                                             : nullptr;
        if (!list || k >= list->size()) return;
        (*list)[k] = handle;
        if (kind == "loader") return;
        self->send(handle, members_atom::value, s.members);
        for (const auto& [id, w] : s.by_id) self->send(w, replaced_atom::value, kind, k, handle);
        if (kind == "averager" && s.phase == Phase::reducing)
          spdlog::warn("averager {} restarted while reducing step {}", k, s.step);
      },
      // A micro-batch did not come back in time: a hop was lost. Re-run it like one that went
      // through a lost worker (its holders keep their share of the gradient).
      [=](overdue_atom, uint64_t step, uint32_t mb, uint32_t attempt) {
        auto& s = self->state;
        if (s.step != step || s.phase != Phase::running || mb >= s.micro.size()) return;
        auto& m = s.micro[mb];
        if (m.attempt != attempt || (m.done && m.has_loss) || !m.awaiting.empty()) return;
        if (std::find(s.waiting.begin(), s.waiting.end(), mb) != s.waiting.end()) return;
        const double timeout = s.setup.ctx->config.supervision.microbatch_timeout_s;
        if (s.paused) {  // nothing comes back while a stage is empty: wait again
          self->delayed_send(self, std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)),
                             overdue_atom::value, step, mb, attempt);
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
      // Validation losses missing after the timeout: their hops were lost. Only those go again
      // (a late answer of the earlier send-out is taken as well: the parameters are the same).
      [=](eval_overdue_atom, uint64_t step, uint32_t sends) {
        auto& s = self->state;
        if (s.step != step || s.phase != Phase::evaluating || sends != s.eval_sends) return;
        if (empty_stage(s)) return;  // paused: the evaluation starts again when a worker joins
        const auto missing = std::count(s.val_have.begin(), s.val_have.end(), false);
        spdlog::warn("evaluation of step {}: {} loss(es) not back after {} s: sending them again",
                     step, missing, s.setup.ctx->config.supervision.microbatch_timeout_s);
        write_metrics(
            self,
            {{"event", "fault"}, {"kind", "eval_timeout"}, {"step", step}, {"missing", missing}});
        send_eval(self);
      },
      [=](batch_atom, uint64_t step, uint32_t mb) {
        auto& s = self->state;
        if (s.step == step && mb < s.micro.size() && !s.micro[mb].ready) request_batch(self, mb);
      },
      [=](state_atom, uint32_t stage, uint32_t id) {
        return state_for(self, stage, id, caf::actor_cast<caf::actor_addr>(self->current_sender()));
      },
      // The same, asked by the tracker supervisor for worker `who`.
      [=](state_atom, uint32_t stage, uint32_t id, const caf::actor& who) {
        return state_for(self, stage, id, who.address());
      },
      [=](state_atom, uint64_t key, int tries) {
        auto& s = self->state;
        auto it = s.asks.find(key);
        if (it == s.asks.end()) return;
        auto [stage, promise] = it->second;
        s.asks.erase(it);
        ask_group(self, stage, std::move(promise), tries);
      },
      [=](members_atom) { return self->state.members; },
      [=](watch_atom, const caf::actor& supervisor) {
        self->state.watched.insert(supervisor.address());
        self->monitor(supervisor);
      },
      [=](stop_atom) {
        auto& s = self->state;
        if (s.phase == Phase::idle) return;
        spdlog::warn("step tracker: stopped at step {}", s.step);
        s.phase = Phase::idle;
        s.promise.deliver(
            caf::make_error(caf::sec::runtime_error, "stopped at step " + std::to_string(s.step)));
      },
      [=](run_atom) -> caf::result<messages::RunReport> {
        auto& s = self->state;
        s.promise = self->make_response_promise<messages::RunReport>();
        if (!s.restored) {
          s.run_start = tracker_state::Clock::now();
          start_step(self);
          return s.promise;
        }
        continue_run(self);
        return s.promise;
      },
      [=](loss_atom, uint64_t step, uint32_t mb, uint32_t attempt, double loss,
          const std::vector<uint32_t>& route) {
        auto& s = self->state;
        if (step != s.step || mb >= s.micro.size() || attempt != s.micro[mb].attempt) return;
        auto& m = s.micro[mb];
        if (m.has_loss) {
          ++s.duplicates;
          return;
        }
        m.has_loss = true;
        m.loss = loss;
        m.route = route;
        if (m.done) m.pin = m.route;
        maybe_close_step(self);  // the loss and the completion may arrive in either order
      },
      [=](done_atom, uint64_t step, uint32_t mb, uint32_t attempt, uint32_t worker) {
        auto& s = self->state;
        if (step != s.step || mb >= s.micro.size() || attempt != s.micro[mb].attempt) return;
        auto& m = s.micro[mb];
        if (m.done) {
          ++s.duplicates;
          return;
        }
        m.done = true;
        if (m.has_loss) m.pin = m.route;  // backward went through all of them: they hold it
        s.stage0.completed(worker, static_cast<double>(m.batch.tensors[0].size(0)), m.sent,
                           tracker_state::Clock::now());
        dispatch_waiting(self);
        maybe_close_step(self);
      },
      [=](norm_atom, uint64_t step, uint32_t stage, uint32_t worker, double sqnorm,
          int64_t samples) {
        auto& s = self->state;
        if (step != s.step || s.phase != Phase::reducing) return;
        (void)stage;
        s.sqnorms[worker] = sqnorm;
        s.samples[worker] = samples;
        maybe_apply(self);
      },
      [=](applied_atom, uint64_t step, uint32_t worker) {
        auto& s = self->state;
        if (step != s.step || s.phase != Phase::applying) return;
        s.applied.insert(worker);
        maybe_finish_step(self);
      },
      [=](eval_loss_atom, uint64_t step, uint32_t idx, double loss) {
        auto& s = self->state;
        if (step != s.step || s.phase != Phase::evaluating || idx >= s.val_losses.size()) return;
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
  };
}

}  // namespace swarmrt::actors
