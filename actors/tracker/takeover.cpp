// A coordinator that took over from a lost leader (TrackerSetup::kept_step): it continues from
// the states the nodes kept when they lost the leader, when those cover every stage at the step
// the lost leader closed last (no step runs again) and, in DiLoCo, each group's journal has its
// entry of that step (θ, outer momentum, rounds); else from the newest checkpoint, as a
// resumed run does. The workers may have taken the next step already (the leader died after
// they applied it, before its record): then the run continues after that step, whose record
// the lost leader left pending (model::read_pending_step), unless a DiLoCo round starts or
// lands in it (the kept states would hold its inner step without its round). The choice is
// made when the run starts (the swarm is full, so every node that rejoined has named what it
// kept); until then the workers' first state requests wait.
#include "actors/tracker/internal.hpp"

#include <spdlog/spdlog.h>
#include "actors/diloco/group_journal.hpp"
#include "actors/tracker/swarm_checkpoint.hpp"
#include "model/fragments.hpp"
#include "model/run_dir.hpp"
#include "supervisors/entitled.hpp"
#include "transport/relay.hpp"

namespace swarmrt::actors::tracker {
using namespace swarmrt::atoms;

namespace {

// The nodes drop their kept states once nothing may ask for them: the choice was the checkpoint,
// or the first step after the kept one has closed (every worker the run started with has its
// state then), and no fetch is in flight.
void maybe_drop_kept(Self* self) {
  auto& s = self->state;
  if (s.deciding || !s.kept_fetching.empty() || s.kept_own_fetches > 0 ||
      (s.from_kept && !s.kept_released))
    return;
  for (const auto& keeper : s.keepers) self->send(keeper, drop_held_atom::value);
  s.keepers.clear();
  s.holders.clear();
  s.holders_next.clear();
  s.kept_cache.clear();
  s.kept_turn.clear();
}

// Stage `stage`'s kept state for everyone waiting for it (s.kept_fetching), from its `index`-th
// holder (the next one when a holder fails: its node may be gone again).
void fetch_kept(Self* self, uint32_t stage, size_t index) {
  auto& s = self->state;
  const auto holders = s.holders[stage];
  if (index >= holders.size()) {
    for (auto& p : s.kept_fetching[stage])
      p.deliver(caf::make_error(
          caf::sec::runtime_error,
          "no node handed out the state it kept of stage " + std::to_string(stage)));
    s.kept_fetching.erase(stage);
    return maybe_drop_kept(self);
  }
  const auto step = static_cast<int64_t>(*s.setup.kept_step);
  transport::ask<messages::WorkerState>(self, holders[index], state_timeout(s),
                                        held_state_atom::value, stage, step)
      .then(
          [=](const messages::WorkerState& st) {
            auto& s = self->state;
            s.kept_cache[stage] = st;
            for (auto& p : s.kept_fetching[stage]) p.deliver(st);
            s.kept_fetching.erase(stage);
            maybe_drop_kept(self);
          },
          [=](const caf::error& e) {
            spdlog::warn("takeover: a node did not hand out its kept state of stage {}: {}", stage,
                         self->system().render(e));
            fetch_kept(self, stage, index + 1);
          });
}

// DiLoCo: a kept state of stage `stage` for one worker, from the holder `first` (the next one
// when it fails). A holder is named once per state it keeps and hands them out in turn, so
// the workers of a stage take the states of as many of its replicas as were kept.
void fetch_own_kept(Self* self, uint32_t stage, caf::response_promise promise, size_t first,
                    size_t tried) {
  auto& s = self->state;
  const auto holders = s.holders[stage];
  if (tried >= holders.size()) {
    promise.deliver(
        caf::make_error(caf::sec::runtime_error,
                        "no node handed out the state it kept of stage " + std::to_string(stage)));
    --s.kept_own_fetches;
    return maybe_drop_kept(self);
  }
  const auto step = static_cast<int64_t>(*s.setup.kept_step);
  transport::ask<messages::WorkerState>(self, holders[(first + tried) % holders.size()],
                                        state_timeout(s), held_state_atom::value, stage, step)
      .then(
          [=](const messages::WorkerState& st) mutable {
            promise.deliver(st);
            --self->state.kept_own_fetches;
            maybe_drop_kept(self);
          },
          [=](const caf::error& e) mutable {
            spdlog::warn("takeover: a node did not hand out its kept state of stage {}: {}", stage,
                         self->system().render(e));
            fetch_own_kept(self, stage, promise, first, tried + 1);
          });
}

// Stage `stage`'s kept state for `promise`: the copy fetched already, else asked of a holder
// unless a request is out: one state per stage crosses from a node, whatever the workers (in
// grad-sync modes every worker of a stage holds the same). In DiLoCo each worker its own.
void wait_for_kept(Self* self, uint32_t stage, caf::response_promise promise) {
  auto& s = self->state;
  if (s.setup.ctx->diloco()) {
    ++s.kept_own_fetches;
    return fetch_own_kept(self, stage, std::move(promise), s.kept_turn[stage]++, 0);
  }
  if (auto it = s.kept_cache.find(stage); it != s.kept_cache.end())
    return promise.deliver(it->second);
  auto& waiting = s.kept_fetching[stage];
  waiting.push_back(std::move(promise));
  if (waiting.size() == 1) fetch_kept(self, stage, 0);
}

// Each DiLoCo group's newest journal entry at a step <= `kept` into its store, and the group
// continues from it; false (nothing changed) when a stage has none that reads back.
bool take_journal(Self* self, uint64_t kept) {
  auto& s = self->state;
  const auto& stores = s.setup.group_stores;
  std::vector<std::unique_ptr<GroupStore>> read(stores.size());
  std::string dir;
  for (uint32_t k = 0; k < stores.size(); ++k) {
    if (!stores[k]) continue;
    dir = stores[k]->journal;
    read[k] = std::make_unique<GroupStore>();
    const auto at =
        dir.empty()
            ? std::nullopt
            : GroupJournal(dir).restore(k, kept, *read[k], [](const auto& path, const auto& why) {
                spdlog::warn("takeover: refused the DiLoCo journal entry {}: {}", path, why);
              });
    if (!at) {
      spdlog::warn("takeover: DiLoCo group {} has no journal entry at step {} or before", k, kept);
      return false;
    }
    spdlog::info("takeover: DiLoCo group {} continues from its round of step {} (round {})", k, *at,
                 read[k]->last_applied);
  }
  // Entries after the kept step are the lost leader's rounds that no record says were taken.
  if (!dir.empty()) GroupJournal(dir).drop_after(static_cast<int64_t>(kept));
  for (uint32_t k = 0; k < stores.size(); ++k) {
    if (!stores[k]) continue;
    {
      std::lock_guard<std::mutex> lock(stores[k]->mu);
      auto& to = *stores[k];
      auto& from = *read[k];
      to.theta = std::move(from.theta);
      to.momentum = std::move(from.momentum);
      to.last_applied = from.last_applied;
      to.applied_rounds = std::move(from.applied_rounds);
      to.fragment_applied = std::move(from.fragment_applied);
      to.fragment_rounds = std::move(from.fragment_rounds);
      to.comm_epoch = std::max(to.comm_epoch, from.comm_epoch);
      to.warmed = from.warmed;
    }
    if (k < s.setup.groups.size() && s.setup.groups[k])
      self->send(s.setup.groups[k], reset_atom::value);
  }
  return true;
}

}  // namespace

void take_kept(Self* self, const caf::actor& keeper, const std::vector<uint32_t>& stages,
               const std::vector<int64_t>& steps) {
  auto& s = self->state;
  // Only this process's directory says who holds a state the workers would take.
  if (!supervisors::from_this_process(self))
    return supervisors::rejected(self, "the step tracker", "kept states");
  // Not a takeover, or one that has chosen already: the node need not keep them.
  if (!s.deciding) return self->send(keeper, drop_held_atom::value);
  s.keepers.push_back(keeper);
  const auto want = static_cast<int64_t>(*s.setup.kept_step);
  for (size_t i = 0; i < stages.size() && i < steps.size(); ++i) {
    if (stages[i] >= static_cast<uint32_t>(s.setup.ctx->stages())) continue;
    if (steps[i] == want) s.holders[stages[i]].push_back(keeper);
    if (steps[i] == want + 1) s.holders_next[stages[i]].push_back(keeper);
  }
}

messages::WorkerState resumed_state(Self* self, uint32_t stage, uint32_t id) {
  auto& s = self->state;
  if (s.setup.resume)
    if (auto st = saved_worker_state(*s.setup.resume, s.setup.resume_origin, id, stage)) return *st;
  return messages::WorkerState{{}, {}, {}, -1, {}, "its initialization"};
}

namespace {
size_t covered(const std::map<uint32_t, std::vector<caf::actor>>& holders, size_t stages) {
  size_t n = 0;
  for (size_t k = 0; k < stages; ++k) n += holders.count(static_cast<uint32_t>(k)) ? 1 : 0;
  return n;
}

// Whether a DiLoCo round starts or lands in `step` (or the warm-up syncs it): the workers' states
// after its inner step are not the run's state after it.
bool round_in(uint64_t step, const SwarmContext& ctx) {
  if (!ctx.diloco()) return false;
  const auto& d = ctx.config.diloco;
  if (d.warming(step) || model::round_in_flight(step - 1, d)) return true;
  for (int64_t p = 0; p < d.fragments; ++p)
    if (model::fragment_due(step, static_cast<uint32_t>(p), d)) return true;
  return false;
}

// The lost leader's pending record of step `kept` + 1 when the run may continue after that
// step: every stage's state after it was kept, and no round is in it.
std::optional<nlohmann::json> taken_next(Self* self, uint64_t kept, size_t stages) {
  auto& s = self->state;
  if (!s.setup.run || covered(s.holders_next, stages) < stages || round_in(kept + 1, *s.setup.ctx))
    return std::nullopt;
  auto pending = model::read_pending_step(s.setup.run->root());
  if (!pending || pending->at("step").get<uint64_t>() != kept + 1) return std::nullopt;
  return pending;
}
}  // namespace

void decide_takeover(Self* self) {
  auto& s = self->state;
  s.deciding = false;
  uint64_t kept = *s.setup.kept_step;
  const auto stages = static_cast<size_t>(s.setup.ctx->stages());
  auto queued = std::move(s.kept_requests);
  s.kept_requests.clear();
  bool journal = false;  // each DiLoCo group continues from its entry of step `kept`
  if (auto next = taken_next(self, kept, stages); next && take_journal(self, kept + 1)) {
    // The workers took the step after the last record: its record is written now, from the
    // lost leader's pending one, and the run continues after it.
    ++kept;
    s.setup.kept_step = kept;
    s.setup.kept_evaluated = false;
    s.holders = std::move(s.holders_next);
    (*next)["recorded_by"] = "takeover";
    write_step_record(self, std::move(*next));
    spdlog::info(
        "takeover: the workers took step {} before the lost leader recorded it: its "
        "record is written from the leader's pending one",
        kept);
    journal = true;
  }
  const size_t have = covered(s.holders, stages);
  if (have == stages && (journal || take_journal(self, kept))) {
    s.from_kept = true;
    s.step = s.first_step = kept;
    spdlog::info(
        "takeover: continuing after step {} from the states {} node(s) kept; no step runs again",
        kept, s.keepers.size());
    write_metrics(self, {{"event", "takeover"}, {"from", "kept"}, {"step", kept}});
    for (auto& r : queued) wait_for_kept(self, r.stage, std::move(r.promise));
    return;
  }
  // The steps after the checkpoint (or all of them) run again: their records go first.
  const uint64_t back = s.step;
  spdlog::warn(
      "takeover: the nodes kept the state after step {} of {} of {} stages; continuing from {}",
      kept, have, stages, s.setup.resume ? s.setup.resume_origin : "the initialization");
  try {
    if (s.setup.run) s.setup.run->metrics().drop_after(static_cast<int64_t>(back));
  } catch (const std::exception& e) {
    spdlog::error("takeover: {}", e.what());
  }
  // The run goes on from the checkpoint (or 0): so does the journal, from its stores.
  start_journal(s.setup.group_stores, back);
  write_metrics(self, {{"event", "takeover"},
                       {"from", s.setup.resume ? "checkpoint" : "initialization"},
                       {"step", back},
                       {"kept_stages", have}});
  for (auto& r : queued) {
    try {
      r.promise.deliver(resumed_state(self, r.stage, r.id));
    } catch (const std::exception& e) {
      r.promise.deliver(caf::make_error(caf::sec::runtime_error, e.what()));
    }
  }
  maybe_drop_kept(self);
}

void continue_from_kept(Self* self) {
  auto& s = self->state;
  adopt_membership(self);
  for (const auto& [id, handle] : s.by_id) s.starters.insert(handle.address());
  s.settled = s.starters;
  // What followed step `kept` under the lost leader may not have happened: its checkpoint
  // (the newest is older, or the takeover would not be here) and its evaluation (unless
  // recorded) are done now, as after any closed step.
  after_close(self);
}

void release_kept(Self* self) {
  auto& s = self->state;
  if (!s.from_kept || s.kept_released) return;
  s.kept_released = true;
  maybe_drop_kept(self);
}

caf::result<messages::WorkerState> kept_state_for(Self* self, uint32_t stage, uint32_t id) {
  auto& s = self->state;
  auto promise = self->make_response_promise<messages::WorkerState>();
  if (s.deciding) {
    s.kept_requests.push_back({stage, id, promise});
    return promise;
  }
  // Every worker the run starts with takes the kept state (not a peer's: the peers may be
  // waiting for theirs), while the nodes keep them.
  if (!s.kept_released) {
    wait_for_kept(self, stage, promise);
    return promise;
  }
  if (settled_peer(s, stage, id)) {
    serve_state_request(self, {stage, id, promise});
    return promise;
  }
  promise.deliver(resumed_state(self, stage, id));
  return promise;
}

}  // namespace swarmrt::actors::tracker
