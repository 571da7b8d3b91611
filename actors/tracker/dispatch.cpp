// Opening a step and sending its micro-batches into stage 0: the membership is adopted between
// steps, the loaders produce the batches, the wiring picks a stage-0 worker for each.
#include "actors/tracker/internal.hpp"

#include <spdlog/spdlog.h>
#include "messages/frame.hpp"
#include "model/optim.hpp"
#include "transport/bulk.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors::tracker {
using namespace swarmrt::atoms;
using messages::Direction;

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
                                 return !w.handle || s.dead.count(w.handle.address()) > 0 ||
                                        s.banned.count(w.id) > 0;
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
  tell_chaos(self, config::KillPhase::start);
  enter(self, Phase::running);
  s.busy.clear();  // what workers reported of the last step
  s.step_start = tracker_state::Clock::now();
  s.outcome.lr = model::lr_at(static_cast<int64_t>(s.step), cfg.train);
  s.micro.assign(static_cast<size_t>(cfg.train.micro_batches), {});
  for (auto& m : s.micro) m.attempt = s.attempt_base;
  s.outcome.duplicates = 0;
  s.waiting.clear();
  for (uint32_t mb = 0; mb < s.micro.size(); ++mb) request_batch(self, mb);
}

void request_batch(Self* self, uint32_t mb) {
  auto& s = self->state;
  const uint64_t step = s.step;
  const auto& loader = s.setup.loaders[mb % s.setup.loaders.size()];
  self->request(loader, state_timeout(s), batch_atom::value, step, mb)
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
            self->delayed_send(self, retry_pause(s), batch_retry_timer_atom::value, step, mb);
          });
}

void send_to_stage0(Self* self, uint32_t mb, uint32_t worker) {
  auto& s = self->state;
  auto& m = s.micro[mb];
  m.worker = worker;
  m.sent = tracker_state::Clock::now();
  m.holder.reset();
  m.handed_on = false;
  ++m.moves;
  m.moved = m.sent;
  m.busy_waited_s = 0;
  messages::MicroBatchHeader h;
  h.run_id = s.setup.ctx->run_id;
  h.step = s.step;
  h.micro_batch = mb;
  h.attempt = m.attempt;
  h.stage = 0;
  h.direction = Direction::forward;
  h.samples = static_cast<uint32_t>(m.batch.tensors[0].size(0));
  h.pin = m.pin;
  h.loss_scale = s.scaler.scale();
  auto& bytes = *s.setup.ctx->bytes;
  bytes.add(Traffic::activations, messages::payload_bytes(m.batch.tensors));
  auto frame = messages::make_frame(std::move(h), m.batch.tensors);
  bytes.add(Traffic::control, frame.header.size());
  transport::send_frame(self, s.by_id.at(worker), messages::FrameKind::microbatch,
                        std::move(frame));
  self->delayed_send(self, hop_wait(s, m.losses), microbatch_timer_atom::value, s.step, mb,
                     m.attempt, m.moves);
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
    auto pick = s.stage0.choose(static_cast<double>(m.batch.tensors[0].size(0)), pinned,
                                policy::route_key(s.step, mb, m.attempt));
    if (!pick) {
      if (!pinned) return;  // every stage-0 worker is at max_inflight: wait for a completion
      ++it;
      continue;
    }
    it = s.waiting.erase(it);
    send_to_stage0(self, mb, *pick);
  }
}

// Closes the step once every micro-batch has both its loss and its completion (and the step's
// spot checks are answered).
void maybe_close_step(Self* self) {
  auto& s = self->state;
  for (const auto& x : s.micro)
    if (!x.done || !x.has_loss) return;
  // Spot checks, where drawn, are answered before the step is reduced (verify.cpp).
  if (!s.checks.empty() || start_checks(self)) return;
  close_step(self);
}

}  // namespace swarmrt::actors::tracker
