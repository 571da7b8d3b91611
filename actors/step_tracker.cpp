#include "actors/step_tracker.hpp"

#include <spdlog/spdlog.h>
#include <cmath>
#include <nlohmann/json.hpp>

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

size_t worker_count(const tracker_state& s) {
  return s.by_id.size();
}

void write_metrics(Self* self, const nlohmann::json& record) {
  if (self->state.setup.metrics)
    self->send(self->state.setup.metrics, metrics_atom::value, record.dump());
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
  auto& bytes = *s.setup.ctx->bytes;
  bytes.add(Traffic::activations, messages::payload_bytes(m.batch.tensors));
  auto frame = messages::make_frame(std::move(h), m.batch.tensors);
  bytes.add(Traffic::control, frame.header.size());
  transport::send_frame(self, s.by_id.at(worker), messages::FrameKind::microbatch,
                        std::move(frame));
}

void dispatch_waiting(Self* self) {
  auto& s = self->state;
  while (!s.waiting.empty()) {
    const uint32_t mb = s.waiting.front();
    auto pick = s.stage0.choose(static_cast<double>(s.micro[mb].batch.tensors[0].size(0)));
    if (!pick) return;  // every stage-0 worker is at max_inflight: wait for a completion
    s.waiting.pop_front();
    send_to_stage0(self, mb, *pick);
  }
}

void start_step(Self* self);
void start_eval(Self* self);

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
  double loss = 0;
  for (const auto& m : s.micro) loss += m.loss;
  loss /= static_cast<double>(s.micro.size());
  s.report.losses.push_back(loss);
  s.report.step_seconds.push_back(secs);
  s.report.completed.push_back(static_cast<int64_t>(s.micro.size()));
  s.report.duplicates.push_back(s.duplicates);

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
                       {"bytes", s.setup.ctx->bytes->to_json()}});
  if (s.setup.progress &&
      (s.step % cfg.train.log_every == 0 || static_cast<int64_t>(s.step) == cfg.train.steps)) {
    const double eta = elapsed / static_cast<double>(s.step) *
                       static_cast<double>(cfg.train.steps - static_cast<int64_t>(s.step));
    spdlog::info("step {}/{} | loss {:.4f} | lr {:.2e} | {:.0f} tok/s | ETA {}", s.step,
                 cfg.train.steps, loss, s.lr, static_cast<double>(tokens_per_step) / secs,
                 model::format_duration(eta));
  }
  const bool last = static_cast<int64_t>(s.step) == cfg.train.steps;
  if (last || (cfg.train.eval_every > 0 && s.step % cfg.train.eval_every == 0))
    start_eval(self);
  else
    start_step(self);
}

void close_step(Self* self) {
  auto& s = self->state;
  s.phase = Phase::reducing;
  s.sqnorms.clear();
  s.samples.clear();
  for (const auto& [id, handle] : s.by_id) self->send(handle, reduce_atom::value, s.step);
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
  const auto m = std::move(*s.pending);
  s.pending.reset();
  s.members = m;
  for (const auto& stage : m.stages)
    for (const auto& w : stage)
      if (!s.by_id.count(w.id)) self->monitor(w.handle);
  s.by_id.clear();
  std::vector<uint32_t> ids0;
  for (const auto& stage : m.stages)
    for (const auto& w : stage) {
      s.by_id[w.id] = w.handle;
      s.stage_of[w.id] = w.stage;
      transport::register_endpoint(w.handle.node(), w.endpoint);
      if (w.stage == 0) ids0.push_back(w.id);
    }
  s.stage0.set_members(ids0);
  for (const auto& [id, handle] : s.by_id) self->send(handle, members_atom::value, m);
  for (const auto& a : s.setup.stage_actors) self->send(a, members_atom::value, m);
}

void start_step(Self* self) {
  auto& s = self->state;
  const auto& cfg = s.setup.ctx->config;
  adopt_membership(self);
  ++s.step;
  s.phase = Phase::running;
  s.step_start = tracker_state::Clock::now();
  s.lr = model::lr_at(static_cast<int64_t>(s.step), cfg.train);
  s.micro.assign(static_cast<size_t>(cfg.train.micro_batches), {});
  s.duplicates = 0;
  s.waiting.clear();
  const uint64_t step = s.step;
  for (uint32_t mb = 0; mb < s.micro.size(); ++mb) {
    const auto& loader = s.setup.loaders[mb % s.setup.loaders.size()];
    self->request(loader, caf::infinite, batch_atom::value, step, mb)
        .then([=](const messages::TensorList& batch) {
          auto& s = self->state;
          if (s.step != step) return;
          s.micro[mb].batch = batch;
          s.micro[mb].ready = true;
          // Keep the data order: micro-batches enter stage 0 in index order.
          s.waiting.push_back(mb);
          std::sort(s.waiting.begin(), s.waiting.end());
          dispatch_waiting(self);
        });
  }
}

void start_eval(Self* self) {
  auto& s = self->state;
  s.phase = Phase::evaluating;
  s.val_losses.assign(s.val.size(), 0.0);
  s.val_received = 0;
  const auto& first = s.members.stages.at(0).at(0);
  for (uint32_t i = 0; i < s.val.size(); ++i) {
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
}

}  // namespace

caf::behavior step_tracker(Self* self, TrackerSetup setup) {
  auto& s = self->state;
  s.setup = std::move(setup);
  const auto& cfg = s.setup.ctx->config;
  s.stage0 = Wiring(cfg.swarm.wiring, static_cast<uint64_t>(cfg.train.seed),
                    static_cast<int>(cfg.swarm.max_inflight));
  {
    model::Windows val(&s.setup.corpus->val(), cfg.model.block_size);
    s.val = model::validation_batches(val, cfg.train.eval_batches, cfg.train.micro_batch);
  }
  // A worker that goes down ends the run with a clear error rather than a hang; restarting
  // and re-wiring is the supervisors' job.
  self->set_down_handler([=](const caf::down_msg& down) {
    auto& s = self->state;
    for (const auto& [id, handle] : s.by_id)
      if (handle.address() == down.source) {
        if (s.phase == Phase::idle) return;  // between runs workers may stop
        const std::string why = "stage worker " + std::to_string(id) + " went down at step " +
                                std::to_string(s.step) + ": " + self->system().render(down.reason);
        spdlog::error("{}", why);
        {
          s.phase = Phase::idle;
          s.promise.deliver(caf::make_error(caf::sec::runtime_error, why));
        }
        return;
      }
  });
  return {
      [=](members_atom, const messages::Membership& m) {
        auto& s = self->state;
        if (s.pending && s.pending->version > m.version) return;
        s.pending = m;
        if (s.phase == Phase::idle) adopt_membership(self);
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
        s.run_start = tracker_state::Clock::now();
        start_step(self);
        return s.promise;
      },
      [=](loss_atom, uint64_t step, uint32_t mb, uint32_t attempt, double loss) {
        auto& s = self->state;
        if (step != s.step || mb >= s.micro.size() || attempt != s.micro[mb].attempt) return;
        auto& m = s.micro[mb];
        if (m.has_loss) {
          ++s.duplicates;
          return;
        }
        m.has_loss = true;
        m.loss = loss;
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
        if (s.sqnorms.size() < worker_count(s)) return;
        const auto& cfg = s.setup.ctx->config;
        double coef = -1;  // DiLoCo replicas clip their own gradient
        if (s.setup.ctx->grad_sync()) {
          // Replicas of a stage hold the same reduced gradient: one norm per stage, summed
          // over stages, is the norm of the whole model's gradient.
          std::map<uint32_t, double> per_stage;
          for (const auto& [id, sq] : s.sqnorms) per_stage.emplace(s.stage_of[id], sq);
          double total = 0;
          for (const auto& [k, sq] : per_stage) total += sq;
          coef = model::clip_coefficient(std::sqrt(total), cfg.train.grad_clip);
        }
        s.phase = Phase::applying;
        s.applied.clear();
        for (const auto& [id, handle] : s.by_id)
          self->send(handle, apply_atom::value, s.step, s.lr, coef);
      },
      [=](applied_atom, uint64_t step, uint32_t worker) {
        auto& s = self->state;
        if (step != s.step || s.phase != Phase::applying) return;
        s.applied.insert(worker);
        if (s.applied.size() == worker_count(s)) finish_step(self);
      },
      [=](eval_loss_atom, uint64_t step, uint32_t idx, double loss) {
        auto& s = self->state;
        if (step != s.step || s.phase != Phase::evaluating || idx >= s.val_losses.size()) return;
        s.val_losses[idx] = loss;
        if (++s.val_received < s.val_losses.size()) return;
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
