// The replica's anchor and byte counts, the synchronous warm-up's end (θ(K) to the group) and
// what every answer goes through first (replica.hpp).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "actors/diloco/replica.hpp"
#include "model/fragments.hpp"
#include "transport/relay.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

void DilocoReplica::set_anchor(const model::StageModel& module) {
  anchor_ = model::parameters_of(*module);  // host copies: θ(t-1) lives where θ does
  for (auto& [name, t] : anchor_) t = t.to(setup_.device);
}

void DilocoReplica::set_anchor(model::NamedTensors anchor) {
  anchor_ = std::move(anchor);
  for (auto& [name, t] : anchor_) t = t.to(setup_.device).clone();
}

void DilocoReplica::count_sent(Traffic kind, const messages::Frame& frame) const {
  for (auto* bytes : {setup_.ctx->bytes.get(), setup_.sent.get()}) {
    if (!bytes) continue;
    bytes->add(kind, messages::payload_bytes(frame.tensors));
    bytes->add(Traffic::control, frame.header.size());
  }
}

bool DilocoReplica::ends_warmup(uint64_t step) const {
  const auto k = setup_.ctx->config.diloco.warmup_sync_steps;
  return k > 0 && static_cast<int64_t>(step) == k;
}

void DilocoReplica::say_when_h_changes(uint64_t step) const {
  const auto& d = setup_.ctx->config.diloco;
  if (d.inner_steps_schedule.empty()) return;
  const auto k = static_cast<uint64_t>(std::max<int64_t>(0, d.warmup_sync_steps));
  auto say = [&](uint64_t from) {
    spdlog::info("worker {}: H = {} from step {} (diloco.inner_steps_schedule)", setup_.id,
                 model::inner_steps_at(from, d), from);
  };
  if (k == 0 && step == 1) say(1);
  if (step == k ||
      (step > k && model::inner_steps_at(step + 1, d) != model::inner_steps_at(step, d)))
    say(step + 1);
}

bool DilocoReplica::start_from_warmup(Self* self, uint64_t step, const model::StageModel& module) {
  set_anchor(module);
  messages::RoundHeader h;
  h.stage = setup_.stage;
  h.contributor = setup_.id;
  h.step = step;
  h.warmup_end = true;
  std::vector<at::Tensor> tensors;
  for (const auto& [name, t] : anchor_) {
    h.tensor_names.push_back(name);
    tensors.push_back(t.to(at::kCPU));  // the group keeps θ in host memory
  }
  auto frame = messages::make_round_frame(h, std::move(tensors));
  count_sent(Traffic::parameters, frame);
  warmup_sent_ = frame;
  warmup_step_ = step;
  transport::send_frame(self, setup_.group, messages::FrameKind::round, std::move(frame));
  spdlog::info("worker {}: the synchronous warm-up ended at step {}; rounds start from here",
               setup_.id, step);
  return true;
}

bool DilocoReplica::on_warmup_answer(Self* self, const messages::RoundHeader& h) {
  if (!h.warmup_end) return false;
  if (!warmup_sent_) return true;  // an answer to a copy sent again: taken already
  if (h.status == messages::RoundStatus::rejected)
    // Not taken (it cannot be: every worker sends θ of the same stage): the group's rounds
    // would start from its θ(0). Said loudly; the step is released so the run goes on.
    spdlog::error("worker {}: the group refused θ at the warm-up's end: {}", setup_.id, h.reason);
  warmup_sent_.reset();
  tell_applied(self, setup_.tracker, warmup_step_, setup_.id, *setup_.ctx);
  return true;
}

void DilocoReplica::resend_warmup(Self* self, const caf::actor& group) const {
  if (warmup_sent_) transport::send_frame(self, group, messages::FrameKind::round, *warmup_sent_);
}

std::optional<messages::RoundHeader> DilocoReplica::open_answer(
    const messages::Frame& frame) const {
  try {
    return messages::open_round_frame(frame);
  } catch (const messages::DecodeError& e) {
    spdlog::warn("worker {} rejected a round frame: {}", setup_.id, e.what());
    return std::nullopt;
  }
}

void DilocoReplica::catch_up_if_behind(Self* self, const messages::RoundHeader& h,
                                       const Reload& reload) const {
  if (h.reason.find("already applied") == std::string::npos || !setup_.group) return;
  transport::ask<messages::WorkerState>(
      self, setup_.group, config::as_duration(setup_.ctx->config.supervision.state_timeout_s),
      state_atom::value)
      .await([=](const messages::WorkerState& st) { reload(st); }, [=](const caf::error&) {});
}

}  // namespace swarmrt::actors
