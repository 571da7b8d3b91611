// Recovery inside a step (architecture §7): a lost worker leaves the membership at once and the
// micro-batches whose gradient it held or whose path it touched are re-run from stage 0,
// pinned to the workers that already hold their gradient, so each is counted once.
#include "actors/tracker/internal.hpp"

#include <spdlog/spdlog.h>

namespace swarmrt::actors::tracker {
using namespace swarmrt::atoms;
using messages::Direction;

// A worker answered the cancel of (step, mb) below `attempt`: whether it had taken the
// micro-batch's gradient in this step (it takes no older attempt from now on). Once every live
// worker has answered, the holders are known and the re-run goes out pinned to them.
void on_cancelled(Self* self, uint64_t step, uint32_t mb, uint32_t attempt, uint32_t worker,
                  bool held) {
  auto& s = self->state;
  if (s.step != step || mb >= s.micro.size()) return;
  auto& m = s.micro[mb];
  if (held && s.by_id.count(worker)) {
    const uint32_t stage = s.stage_of[worker];
    if (m.pin.size() <= stage) m.pin.resize(stage + 1, messages::kNoWorker);
    if (m.pin[stage] == messages::kNoWorker) m.pin[stage] = worker;
  }
  if (attempt != m.attempt || m.awaiting.erase(worker) == 0 || !m.awaiting.empty()) return;
  s.waiting.push_back(mb);
  std::sort(s.waiting.begin(), s.waiting.end());
  dispatch_waiting(self);
}

// Sends micro-batch `mb` of the open step again, as attempt+1: every worker drops the older
// attempts and answers whether it holds the gradient (on_cancelled), then it goes out pinned.
void rerun(Self* self, uint32_t mb) {
  auto& s = self->state;
  auto& m = s.micro[mb];
  const uint64_t step = s.step;
  if (!m.done) s.stage0.release(m.worker);  // its slot, also at a restarted worker of the same id
  const uint32_t attempt = ++m.attempt;
  // A worker that took an older attempt drops it: it is no longer at work on it.
  for (auto it = s.busy.begin(); it != s.busy.end();)
    it = it->second.step == step && it->second.micro_batch == mb ? s.busy.erase(it) : std::next(it);
  m.done = false;
  m.has_loss = false;
  m.route.clear();
  for (const auto& [id, handle] : s.by_id) m.awaiting.insert(id);
  for (const auto& [id, handle] : s.by_id) {
    const uint32_t wid = id;
    self->request(handle, reply_timeout(s), cancel_atom::value, step, mb, attempt)
        .then([=](bool held) { on_cancelled(self, step, mb, attempt, wid, held); },
              [=](const caf::error&) { on_cancelled(self, step, mb, attempt, wid, false); });
  }
  if (m.awaiting.empty()) s.waiting.push_back(mb);
}

// Re-runs from stage 0, as attempt+1, every micro-batch of the open step whose gradient
// worker `lost` held or may have been about to take: a completed one whose route went through
// it (the gradient died with it), one in backward through it, or one still on its way
// forward (its path is not known yet). Every worker drops the older attempts and says whether
// it holds the gradient; the re-run is pinned to those holders, so the stages that kept the
// gradient do not take it again.
void rerun_through(Self* self, uint32_t lost) {
  auto& s = self->state;
  size_t reruns = 0;
  for (uint32_t mb = 0; mb < s.micro.size(); ++mb) {
    auto& m = s.micro[mb];
    if (!m.ready) continue;
    auto held = std::find(m.pin.begin(), m.pin.end(), lost);
    const bool lost_gradient = held != m.pin.end();
    if (lost_gradient) *held = messages::kNoWorker;
    // Not sent out yet (waiting for answers or for a slot): nothing of it is in flight. The
    // lost worker will not answer (its node may be gone: no error until the timeout).
    if (!m.awaiting.empty()) {
      if (m.awaiting.erase(lost) > 0 && m.awaiting.empty()) s.waiting.push_back(mb);
      continue;
    }
    if (std::find(s.waiting.begin(), s.waiting.end(), mb) != s.waiting.end()) continue;
    const bool on_route = std::find(m.route.begin(), m.route.end(), lost) != m.route.end();
    if (m.done && m.has_loss && !lost_gradient) continue;  // (done without a loss: route unknown)
    if (!m.done && m.has_loss && !on_route) continue;
    rerun(self, mb);
    ++reruns;
  }
  std::sort(s.waiting.begin(), s.waiting.end());
  if (reruns > 0)
    spdlog::warn("step {}: re-running {} micro-batch(es) that went through worker {}", s.step,
                 reruns, lost);
  dispatch_waiting(self);
}

// A worker went down: it leaves the membership now (everyone re-wires). What the step needed
// from it is re-run or no longer waited for by the phase's behaviour (phases.cpp).
void forget_worker(Self* self, uint32_t id, const caf::actor_addr& addr, const caf::error& why) {
  auto& s = self->state;
  s.dead.insert(addr);
  s.busy.erase(id);
  const uint32_t stage = s.stage_of[id];
  s.by_id.erase(id);
  for (auto& st : s.members.stages)
    st.erase(
        std::remove_if(st.begin(), st.end(), [&](const messages::Member& w) { return w.id == id; }),
        st.end());
  std::vector<uint32_t> ids0;
  if (!s.members.stages.empty())
    for (const auto& w : s.members.stages[0]) ids0.push_back(w.id);
  s.stage0.set_members(ids0);
  if (!s.fault_at) s.fault_at = tracker_state::Clock::now();
  const std::string reason = self->system().render(why);
  spdlog::warn("stage worker {} (stage {}) went down at step {}: {}", id, stage, s.step, reason);
  write_metrics(self, {{"event", "fault"},
                       {"kind", "worker_lost"},
                       {"worker", id},
                       {"stage", stage},
                       {"step", s.step},
                       {"reason", reason}});
  announce(self);
  if (auto k = empty_stage(s); k && !s.paused) {
    s.paused = true;
    spdlog::warn("pipeline paused at step {}: stage {} has no worker; waiting for one to join",
                 s.step, *k);
    write_metrics(
        self, {{"event", "fault"}, {"kind", "pipeline_paused"}, {"stage", *k}, {"step", s.step}});
  }
}

bool at_work(const tracker_state& s, const tracker_state::Micro& m) {
  if (m.holder && !m.handed_on) return s.by_id.count(*m.holder) > 0;
  std::optional<uint32_t> receiver;
  if (!m.holder) {
    receiver = m.worker;  // sent by the tracker into stage 0, not taken yet
  } else {
    for (const auto& [id, handle] : s.by_id)
      if (handle.address() == m.handed_to) receiver = id;
  }
  if (!receiver || s.by_id.count(*receiver) == 0) return false;
  // Busy with a current attempt of this step (work on a dropped attempt does not count).
  const auto busy = s.busy.find(*receiver);
  if (busy == s.busy.end() || busy->second.step != s.step) return false;
  const auto& b = busy->second;
  return b.micro_batch < s.micro.size() && s.micro[b.micro_batch].attempt == b.attempt;
}

// A micro-batch's wait has passed (policy/hop_deadline.hpp): waited for again when it moved
// during the wait (`moves`: its count of reports when the wait began) or a live worker is at
// work on it; else a hop was lost, and it is re-run like one that went through a lost worker
// (its holders keep their share of the gradient); lost too often, it ends the run.
void on_microbatch_timer(Self* self, uint64_t step, uint32_t mb, uint32_t attempt, uint64_t moves) {
  auto& s = self->state;
  if (s.step != step || mb >= s.micro.size()) return;
  auto& m = s.micro[mb];
  if (m.attempt != attempt || (m.done && m.has_loss) || !m.awaiting.empty()) return;
  if (std::find(s.waiting.begin(), s.waiting.end(), mb) != s.waiting.end()) return;
  const double wait = s.deadline.wait_s(m.losses);
  auto again = [&] {
    self->delayed_send(self, config::as_duration(wait), microbatch_timer_atom::value, step, mb,
                       attempt, m.moves);
  };
  if (s.paused) return again();  // nothing comes back while a stage is empty
  const bool moved = m.moves != moves;
  const bool busy = !moved && at_work(s, m);
  if (busy) m.busy_waited_s += wait;
  const auto verdict = s.deadline.judge(moved, busy, m.busy_waited_s, m.losses);
  if (verdict == policy::HopDeadline::Verdict::wait_again) return again();
  const double still = std::chrono::duration<double>(tracker_state::Clock::now() - m.moved).count();
  if (verdict == policy::HopDeadline::Verdict::give_up) {
    const auto& sv = s.setup.ctx->config.supervision;
    const std::string why = fmt::format(
        "micro-batch {} of step {} was lost {} times, the last after {:.1f} s without moving "
        "(supervision.microbatch_max_losses = {}; the waits follow the slowest hop, {:.2f} s, "
        "from supervision.microbatch_timeout_s = {} s): the swarm does not carry it",
        mb, step, m.losses + 1, still, sv.microbatch_max_losses, s.deadline.slowest_hop_s(),
        sv.microbatch_timeout_s);
    spdlog::error("step tracker: {}", why);
    write_metrics(self, {{"event", "fault"},
                         {"kind", "microbatch_lost_for_good"},
                         {"step", step},
                         {"micro_batch", mb},
                         {"losses", m.losses + 1}});
    enter(self, Phase::idle);
    s.promise.deliver(caf::make_error(caf::sec::runtime_error, why));
    return;
  }
  spdlog::warn(
      "micro-batch {} of step {} (attempt {}) still for {:.1f} s with no worker at "
      "work on it: re-running it",
      mb, step, attempt, still);
  write_metrics(self, {{"event", "fault"},
                       {"kind", "microbatch_timeout"},
                       {"step", step},
                       {"micro_batch", mb},
                       {"attempt", attempt},
                       {"still_s", still}});
  if (!s.fault_at) s.fault_at = tracker_state::Clock::now();
  ++m.losses;
  rerun(self, mb);
  std::sort(s.waiting.begin(), s.waiting.end());
  dispatch_waiting(self);
}

}  // namespace swarmrt::actors::tracker
