#include "actors/recovery/state_donor.hpp"

#include <spdlog/spdlog.h>

#include "messages/atoms.hpp"
#include "transport/bulk.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors::recovery {
using namespace swarmrt::atoms;
using Clock = std::chrono::steady_clock;
using DonorSelf = caf::stateful_actor<donor_state>;

namespace {

void forget_joiner(DonorSelf* self, const caf::actor_addr& who) {
  auto& s = self->state;
  if (s.joiners.erase(who) > 0) self->demonitor(who);
  s.last_use = Clock::now();
}

// Joiners silent past `linger` lose their turn; a snapshot nobody used for as long goes.
void sweep(DonorSelf* self) {
  auto& s = self->state;
  const auto now = Clock::now();
  for (auto it = s.joiners.begin(); it != s.joiners.end();)
    it = now - it->second > s.limits.linger ? s.joiners.erase(it) : std::next(it);
  if (s.joiners.empty() && now - s.last_use > s.limits.linger)
    if (auto snap = s.store->get()) s.store->drop(snap->manifest.step);
}

caf::result<messages::StateManifest> manifest_for(DonorSelf* self, int64_t step,
                                                  const std::string& endpoint) {
  auto& s = self->state;
  auto snap = s.store->get();
  if (!snap || snap->manifest.step != step)
    return caf::make_error(caf::sec::runtime_error,
                           "holds no snapshot of step " + std::to_string(step));
  const auto who = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (!s.joiners.count(who) && s.joiners.size() >= s.limits.max_joiners)
    return caf::make_error(caf::sec::runtime_error,
                           "busy: serving " + std::to_string(s.joiners.size()) + " joiners");
  if (!s.joiners.count(who)) self->monitor(who);
  s.joiners[who] = Clock::now();
  s.last_use = Clock::now();
  if (who && who.node() != self->node()) transport::register_endpoint(who.node(), endpoint);
  return snap->manifest;
}

void serve_chunk(DonorSelf* self, int64_t step, uint32_t index) {
  auto& s = self->state;
  auto to = caf::actor_cast<caf::actor>(self->current_sender());
  auto snap = s.store->get();
  auto joiner = s.joiners.find(caf::actor_cast<caf::actor_addr>(self->current_sender()));
  std::string why;
  if (joiner == s.joiners.end())
    why = "not a registered joiner";
  else if (!snap || snap->manifest.step != step)
    why = "holds no snapshot of step " + std::to_string(step);
  else if (index >= snap->manifest.crcs.size())
    why = "no chunk " + std::to_string(index);
  if (!why.empty()) {
    if (to) self->send(to, state_chunk_atom::value, step, index, why);
    return;
  }
  joiner->second = Clock::now();
  s.last_use = joiner->second;
  const auto [offset, length] = chunk_range(snap->manifest, index);
  transport::send_frame(self, to, messages::FrameKind::round,
                        chunk_frame(step, index, snap->bytes.data() + offset, length));
  if (s.limits.die_after_chunks > 0 && ++s.served >= s.limits.die_after_chunks) {
    spdlog::warn("state donor: ends as killed after {} chunks (fault injection)", s.served);
    self->quit(caf::exit_reason::kill);
  }
}

}  // namespace

caf::behavior state_donor(DonorSelf* self, caf::actor worker, std::shared_ptr<SnapshotStore> store,
                          DonorLimits limits) {
  auto& s = self->state;
  s.store = std::move(store);
  s.limits = limits;
  self->monitor(worker);
  self->set_down_handler([=](caf::down_msg& dm) {
    if (dm.source == worker.address()) return self->quit(dm.reason);
    forget_joiner(self, dm.source);
  });
  self->delayed_send(self, limits.linger / 4, donor_tick_atom::value);
  return {
      [=](manifest_atom, int64_t step, const std::string& endpoint) {
        return manifest_for(self, step, endpoint);
      },
      [=](state_chunk_atom, int64_t step, uint32_t index) { serve_chunk(self, step, index); },
      [=](fetch_done_atom) {
        forget_joiner(self, caf::actor_cast<caf::actor_addr>(self->current_sender()));
      },
      [=](donor_tick_atom) {
        sweep(self);
        self->delayed_send(self, self->state.limits.linger / 4, donor_tick_atom::value);
      },
  };
}

}  // namespace swarmrt::actors::recovery
