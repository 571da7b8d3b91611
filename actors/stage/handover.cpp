// A worker's side of recovery (actors/recovery/): the snapshot it donates to joiners of its
// stage, and the fetch of its own state from donors when it is the joiner.
#include <spdlog/spdlog.h>

#include "actors/recovery/state_donor.hpp"
#include "actors/recovery/state_fetcher.hpp"
#include "actors/stage/worker_internal.hpp"
#include "transport/bulk.hpp"

namespace swarmrt::actors::worker {
using namespace swarmrt::atoms;

namespace {

caf::actor donor_of(Self* self) {
  auto& s = self->state;
  if (!s.donor) {
    const auto& cfg = s.setup.ctx->config;
    recovery::DonorLimits limits;
    limits.max_joiners = static_cast<uint32_t>(cfg.recovery.max_joiners);
    limits.linger = config::as_duration(6 * cfg.recovery.chunk_timeout_s);
    s.donor =
        self->spawn(recovery::state_donor, caf::actor_cast<caf::actor>(self), s.snapshots, limits);
  }
  return s.donor;
}

}  // namespace

std::pair<caf::actor, int64_t> take_snapshot(Self* self) {
  auto& s = self->state;
  const auto step = static_cast<int64_t>(s.applied_step);
  if (!s.snapshots->holds(step)) {
    const auto chunk = static_cast<uint32_t>(s.setup.ctx->config.recovery.chunk_mib) << 20;
    s.snapshots->put(recovery::make_snapshot(self->system(), state_of(self, true), chunk));
  }
  return {donor_of(self), step};
}

void fetch_state(Self* self, const messages::WorkerState& offer) {
  auto& s = self->state;
  const auto& cfg = s.setup.ctx->config;
  recovery::FetchSettings fs;
  fs.window = static_cast<uint32_t>(cfg.recovery.window);
  fs.chunk_timeout = config::as_duration(cfg.recovery.chunk_timeout_s);
  fs.deadline = config::as_duration(cfg.supervision.start_timeout_s);
  fs.max_bytes = transport::max_message();
  fs.endpoint = transport::bulk_endpoint();
  fs.who = "worker " + std::to_string(s.setup.id);
  auto fetcher = self->spawn(recovery::state_fetcher, offer.donors, offer.step, fs, nullptr);
  // Awaited like the tracker's answer: the worker takes no work before it has a state.
  self->request(fetcher, caf::infinite, fetch_state_atom::value)
      .await([=](const messages::WorkerState& st) { load_state(self, st); },
             [=](const caf::error& e) { throw std::runtime_error(self->system().render(e)); });
}

}  // namespace swarmrt::actors::worker
