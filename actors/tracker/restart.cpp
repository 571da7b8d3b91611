// A restarted tracker: what it writes to its store as the run goes, what it takes back from it,
// and how it continues (see TrackerStore).
#include "actors/tracker/internal.hpp"

#include <spdlog/spdlog.h>

namespace swarmrt::actors::tracker {
using namespace swarmrt::atoms;
using messages::Direction;

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
  st.banned = s.banned;
  st.tally = s.tally;
  if (phase == TrackerStore::Phase::applying) {
    st.outcome = s.outcome;
    st.scaler = s.scaler;
  }
}

// A tracker started by its supervisor after its predecessor was lost takes the run's
// progress from the store (see TrackerStore); the membership comes from the supervisor.
void restore(Self* self) {
  auto& s = self->state;
  auto& st = *s.setup.store;
  std::lock_guard<std::mutex> lock(st.mu);
  s.attempt_base = st.incarnation++ << 16;
  // Before the phase's check: a ban may come before the first step's record.
  s.banned = st.banned;
  s.tally = st.tally;
  if (st.phase == TrackerStore::Phase::none) return;
  s.restored = st.phase;
  s.deciding = false;  // the lost tracker chose already: its first step is in the store
  s.step = st.step;
  s.first_step = st.first_step;
  s.run_start = st.run_start;
  s.step_start = st.step_start;
  s.report = st.report;
  if (st.phase == TrackerStore::Phase::applying) s.outcome = st.outcome;
  if (st.phase != TrackerStore::Phase::none) s.scaler = st.scaler;
}

// Continues the run where the lost tracker was (see TrackerStore).
void continue_run(Self* self) {
  auto& s = self->state;
  const auto phase = *s.restored;
  s.restored.reset();
  s.fault_at = tracker_state::Clock::now();
  // The workers its predecessor had have trained with it: they hold a state to hand out.
  adopt_membership(self);
  for (const auto& [id, handle] : s.by_id) s.settled.insert(handle.address());
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
  auto answered = [=] { handle_now(self, reset_done_atom::value, step); };
  for (const auto& a : s.setup.averagers)
    if (a)
      self->request(a, reply_timeout(s), reset_atom::value, step, s.attempt_base)
          .then([=](bool) { answered(); }, [=](const caf::error&) { answered(); });
}

void maybe_reset_done(Self* self) {
  auto& s = self->state;
  if (s.resetting.empty() && s.averager_resets == 0) reset_averagers(self);
}

void reset_workers(Self* self) {
  auto& s = self->state;
  enter(self, Phase::resetting);
  const uint64_t step = s.step;
  spdlog::warn("step tracker: opening step {} again from its first micro-batch", step);
  s.resetting.clear();
  s.averager_resets = 0;
  for (const auto& [id, handle] : s.by_id) s.resetting.insert(id);
  for (const auto& [id, handle] : s.by_id) {
    const uint32_t wid = id;
    auto answered = [=] { handle_now(self, reset_done_atom::value, step, wid); };
    self->request(handle, reply_timeout(s), reset_atom::value, step, s.attempt_base)
        .then([=](bool) { answered(); }, [=](const caf::error&) { answered(); });
  }
  maybe_reset_done(self);
}

}  // namespace swarmrt::actors::tracker
