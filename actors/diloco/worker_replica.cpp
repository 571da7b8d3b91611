#include "actors/diloco/worker_replica.hpp"

#include <spdlog/spdlog.h>

#include "actors/diloco/replica.hpp"
#include "actors/diloco/streaming_replica.hpp"
#include "transport/relay.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

std::unique_ptr<WorkerReplica> make_replica(const SwarmContext& ctx) {
  if (!ctx.diloco()) return nullptr;
  if (ctx.streaming()) return std::make_unique<StreamingReplica>();
  return std::make_unique<DilocoReplica>();
}

void WorkerReplica::set_anchor(const model::StageModel& module) {
  anchor_ = model::parameters_of(*module);  // host copies: θ(t-1) lives where θ does
  for (auto& [name, t] : anchor_) t = t.to(setup_.device);
}

void WorkerReplica::set_anchor(model::NamedTensors anchor) {
  anchor_ = std::move(anchor);
  for (auto& [name, t] : anchor_) t = t.to(setup_.device).clone();
}

std::optional<messages::RoundHeader> WorkerReplica::open_answer(const messages::Frame& frame,
                                                                uint32_t worker) const {
  try {
    return messages::open_round_frame(frame);
  } catch (const messages::DecodeError& e) {
    spdlog::warn("worker {} rejected a round frame: {}", worker, e.what());
    return std::nullopt;
  }
}

void WorkerReplica::catch_up_if_behind(Self* self, const ReplicaSetup& setup,
                                       const messages::RoundHeader& h, const Reload& reload) const {
  if (h.reason.find("already applied") == std::string::npos || !setup.group) return;
  transport::ask<messages::WorkerState>(
      self, setup.group, model::as_duration(setup.ctx->config.supervision.state_timeout_s),
      state_atom::value)
      .await([=](const messages::WorkerState& st) { reload(st); }, [=](const caf::error&) {});
}

}  // namespace swarmrt::actors
