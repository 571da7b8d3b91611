// Between steps: periodic checkpoints of the whole swarm, and evaluations on the validation
// batches sent through the pipeline like training micro-batches.
#include "actors/tracker/internal.hpp"

#include <spdlog/spdlog.h>
#include <cmath>
#include "actors/tracker/swarm_checkpoint.hpp"
#include "messages/frame.hpp"
#include "model/trainer.hpp"
#include "transport/relay.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors::tracker {
using namespace swarmrt::atoms;
using messages::Direction;

void start_saving(Self* self) {
  auto& s = self->state;
  enter(self, Phase::saving);
  s.saving.clear();
  s.saving_wanted = worker_count(s);
  const uint64_t step = s.step;
  for (const auto& [id, handle] : s.by_id) {
    const uint32_t wid = id;
    transport::ask<messages::WorkerState>(self, handle, state_timeout(s), state_atom::value)
        .then(
            [=](const messages::WorkerState& st) {
              handle_now(self, saved_state_atom::value, step, wid, st);
            },
            [=](const caf::error& e) {
              handle_now(self, saved_state_atom::value, step, wid, self->system().render(e));
            });
  }
  if (s.saving_wanted == 0) {
    write_saved(self);
    return;
  }
  tell_chaos(self, config::KillPhase::save);
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
    answer_checkpoint_asks(self, path, "");
  } catch (const std::exception& e) {
    spdlog::error("checkpoint of step {} failed: {}", s.step, e.what());
    answer_checkpoint_asks(self, "", e.what());
  }
  s.saving.clear();
  after_step(self);
}

void answer_checkpoint_asks(Self* self, const std::string& path, const std::string& error) {
  auto& s = self->state;
  const auto answer = error.empty() ? nlohmann::json{{"ok", true},
                                                     {"step", s.step},
                                                     {"path", path},
                                                     {"workers", s.saving.size()}}
                                    : nlohmann::json{{"ok", false}, {"error", error}};
  for (auto& p : s.checkpoint_asks) p.deliver(answer.dump());
  s.checkpoint_asks.clear();
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
  self->delayed_send(self, microbatch_timeout(s), eval_timer_atom::value, s.step, ++s.eval_sends);
}

void start_eval(Self* self) {
  auto& s = self->state;
  enter(self, Phase::evaluating);
  s.val_losses.assign(s.val.size(), 0.0);
  s.val_have.assign(s.val.size(), false);
  if (empty_stage(s)) return;  // paused: evaluation starts when a worker joins
  send_eval(self);
  tell_chaos(self, config::KillPhase::eval);
}

}  // namespace swarmrt::actors::tracker
