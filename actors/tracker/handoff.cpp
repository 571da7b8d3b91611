// State hand-off: what a restarted or joining worker starts from (a live peer's state between
// steps, its DiLoCo group's θ, or the newest checkpoint's).
#include "actors/tracker/internal.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <memory>
#include "actors/tracker/swarm_checkpoint.hpp"

namespace swarmrt::actors::tracker {
using namespace swarmrt::atoms;
using messages::Direction;

// A live peer of `stage` other than worker `id` that holds a state (see settled), or none.
caf::actor settled_peer(const tracker_state& s, uint32_t stage, uint32_t id) {
  for (const auto& [wid, handle] : s.by_id) {
    const auto st = s.stage_of.find(wid);
    if (st != s.stage_of.end() && st->second == stage && wid != id &&
        s.settled.count(handle.address()))
      return handle;
  }
  return {};
}

// No live peer to take a state from: the newest valid checkpoint of the run, else the
// initialization.
messages::WorkerState without_peer(Self* self, uint32_t stage, uint32_t id) {
  auto& s = self->state;
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
  return messages::WorkerState{{}, {}, {}, -1, {}, "its initialization"};
}

// Up to `n` live peers of `stage` other than worker `id` that hold a state.
std::vector<caf::actor> settled_peers(const tracker_state& s, uint32_t stage, uint32_t id,
                                      size_t n) {
  std::vector<caf::actor> out;
  for (const auto& [wid, handle] : s.by_id) {
    const auto st = s.stage_of.find(wid);
    if (out.size() < n && st != s.stage_of.end() && st->second == stage && wid != id &&
        s.settled.count(handle.address()))
      out.push_back(handle);
  }
  return out;
}

// The snapshots the peers asked have answered with, until all have (actors/recovery/).
struct SnapshotOffers {
  caf::response_promise promise;
  uint32_t stage = 0;
  size_t pending = 0;
  std::vector<std::pair<caf::actor, int64_t>> donors;  // donor, the snapshot's step
  std::string error;
};

// The offer for the asker: the donors of the step most of them snapshot (all of them between
// steps, when every peer of a stage holds the same state).
void deliver_offer(const std::shared_ptr<SnapshotOffers>& g) {
  if (g->donors.empty())
    return g->promise.deliver(
        caf::make_error(caf::sec::runtime_error, "no peer of stage " + std::to_string(g->stage) +
                                                     " took a snapshot of its state: " + g->error));
  std::map<int64_t, size_t> votes;
  for (const auto& d : g->donors) ++votes[d.second];
  const auto step = std::max_element(votes.begin(), votes.end(), [](auto& a, auto& b) {
                      return a.second < b.second;
                    })->first;
  messages::WorkerState offer;
  offer.step = step;
  for (const auto& d : g->donors)
    if (d.second == step) offer.donors.push_back(d.first);
  offer.source =
      std::to_string(offer.donors.size()) + " peers of stage " + std::to_string(g->stage);
  g->promise.deliver(std::move(offer));
}

// Has live peers of the request's stage (up to recovery.donors) snapshot their state and
// names their donors to the asker, which fetches the state from all of them at once.
void serve_state_request(Self* self, tracker_state::StateRequest r) {
  auto& s = self->state;
  const auto n = static_cast<size_t>(s.setup.ctx->config.recovery.donors);
  const auto peers = settled_peers(s, r.stage, r.id, n);
  if (peers.empty()) {
    r.promise.deliver(without_peer(self, r.stage, r.id));
    return;
  }
  auto g = std::make_shared<SnapshotOffers>();
  g->promise = r.promise;
  g->stage = r.stage;
  g->pending = peers.size();
  for (const auto& peer : peers)
    self->request(peer, state_timeout(s), snapshot_atom::value)
        .then(
            [=](const caf::actor& donor, int64_t step) {
              if (donor) g->donors.emplace_back(donor, step);
              if (--g->pending == 0) deliver_offer(g);
            },
            [=](const caf::error& e) {
              g->error = self->system().render(e);
              if (--g->pending == 0) deliver_offer(g);
            });
}

// Hands out a live peer's state to workers that asked for one (grad-sync modes): only
// between steps, when the peer's parameters and optimizer state are those of a closed step.
void serve_state_requests(Self* self) {
  auto& s = self->state;
  auto requests = std::move(s.state_requests);
  s.state_requests.clear();
  for (auto& r : requests) serve_state_request(self, std::move(r));
}

// θ and the round from stage `stage`'s DiLoCo group; a group lost on the way is being
// restarted by its supervisor, so the tracker asks its successor a little later.
void ask_group(Self* self, uint32_t stage, caf::response_promise promise, int tries) {
  self->request(self->state.setup.groups[stage], state_timeout(self->state), state_atom::value)
      .then([=](const messages::WorkerState& st) mutable { promise.deliver(st); },
            [=](const caf::error& e) mutable {
              if (tries >= 100) return promise.deliver(e);
              auto& s = self->state;
              const uint64_t key = s.next_ask++;
              s.asks.emplace(key, std::make_pair(stage, promise));
              self->delayed_send(self, retry_pause(s), ask_group_timer_atom::value, key, tries + 1);
            });
}

// What a worker (re)starting at stage `stage` loads (see the header).
caf::result<messages::WorkerState> state_for(Self* self, uint32_t stage, uint32_t id,
                                             const caf::actor_addr& sender, Handoff when) {
  auto& s = self->state;
  const auto& ctx = *s.setup.ctx;
  // The workers the run starts with (they may ask after step 1 has begun) start from the
  // resumed checkpoint or the initialization every replica shares. Being a member is not
  // enough: a worker restarted or moved between steps is adopted before it asks. (Taken as a
  // starter, a worker moved to a new stage between steps started from the initialization
  // while its peers had trained: 1 run in 5.)
  const bool initial = s.step == s.first_step || (sender && s.starters.count(sender) > 0);
  if (initial && (s.deciding || s.from_kept)) return kept_state_for(self, stage, id);
  if (s.setup.resume && initial) {
    try {
      if (auto st = saved_worker_state(*s.setup.resume, s.setup.resume_origin, id, stage))
        return *st;
    } catch (const std::exception& e) {
      return caf::make_error(caf::sec::runtime_error, e.what());
    }
  }
  // During a synchronous warm-up the group's θ is θ(0): a peer holds the stage's state.
  if (ctx.diloco() && !ctx.config.diloco.warming(s.step) && stage < s.setup.groups.size() &&
      s.setup.groups[stage]) {
    auto promise = self->make_response_promise<messages::WorkerState>();
    ask_group(self, stage, promise, 0);
    return promise;
  }
  if (initial) return messages::WorkerState{{}, {}, {}, -1, {}, "its initialization"};
  if (settled_peer(s, stage, id)) {
    auto promise = self->make_response_promise<messages::WorkerState>();
    // A member already (adopted as the step opened, before its request came): it is part of
    // this step and takes no work before it has a state, so it cannot wait for the step's
    // end. Until the step applies, a peer still holds the last closed step's state: it is
    // served now. (Queued, it held the step open until the micro-batch timeout.)
    bool member = false;
    for (const auto& [wid, handle] : s.by_id) member |= sender && handle.address() == sender;
    if (member && when != Handoff::after_apply) {
      serve_state_request(self, {stage, id, promise});
      return promise;
    }
    s.state_requests.push_back({stage, id, promise});
    if (when == Handoff::now) serve_state_requests(self);
    return promise;
  }
  return without_peer(self, stage, id);
}

}  // namespace swarmrt::actors::tracker
