// The step tracker's parts, one file per job, sharing its state (step_tracker.hpp):
//   dispatch.cpp         open a step, adopt the membership, send micro-batches into stage 0
//   close_apply.cpp      close a step: reduce, clip, apply, record; what follows a step
//   recovery.cpp         a lost worker or hop inside a step: re-runs, counted once
//   restart.cpp          a restarted tracker: its store, and how the run continues
//   handoff.cpp          the state a restarted or joining worker starts from
//   eval_checkpoint.cpp  evaluations and swarm checkpoints between steps
//   step_tracker.cpp     the messages every phase takes, and which phase's behaviour is active
//   phases.cpp           one behaviour per phase: its own messages
//   verify.cpp           spot checks of stage work, and bans
// Internal to actors/tracker/: nothing outside includes this.
#pragma once

#include <nlohmann/json.hpp>

#include "actors/tracker/step_tracker.hpp"
#include "messages/metrics.hpp"

namespace swarmrt::actors::tracker {

using Self = caf::stateful_actor<tracker_state>;
using Phase = tracker_state::Phase;

// The phase as the console shows it (in the order of the enum).
inline const char* phase_name(Phase p) {
  static const char* const names[] = {"idle",     "resetting", "running",   "reducing",
                                      "applying", "saving",    "evaluating"};
  return names[static_cast<size_t>(p)];
}

inline size_t worker_count(const tracker_state& s) {
  return s.by_id.size();
}

// Whether every live worker is in `reported` (a worker lost after reporting still counts).
template <class Set>
bool all_reported(const tracker_state& s, const Set& reported) {
  for (const auto& [id, handle] : s.by_id)
    if (!reported.count(id)) return false;
  return true;
}

inline void write_metrics(Self* self, nlohmann::json record) {
  messages::send_metrics(self, self->state.setup.metrics, std::move(record));
}

// The tracker's waits (supervision.*): a micro-batch's round trip, a peer's state or a
// loader's batch, a worker's answer to cancel or reset, the pause before asking again.
// A micro-batch's wait (lost `losses` times so far) and an evaluation's: they follow the
// slowest recent hop (policy/hop_deadline.hpp).
inline std::chrono::milliseconds hop_wait(const tracker_state& s, int64_t losses) {
  return config::as_duration(s.deadline.wait_s(losses));
}
inline std::chrono::milliseconds microbatch_timeout(const tracker_state& s) {
  return hop_wait(s, 0);
}
inline std::chrono::milliseconds state_timeout(const tracker_state& s) {
  return config::as_duration(s.setup.ctx->config.supervision.state_timeout_s);
}
inline std::chrono::milliseconds reply_timeout(const tracker_state& s) {
  return config::as_duration(s.setup.ctx->config.supervision.reply_timeout_s);
}
inline std::chrono::milliseconds retry_pause(const tracker_state& s) {
  return config::as_duration(s.setup.ctx->config.supervision.retry_ms / 1000);
}

// Fault injection at named points of a step (chaos.kill_at_step, chaos.kill_at_phase).
inline void tell_chaos(Self* self, config::KillPhase phase) {
  auto& s = self->state;
  if (s.setup.chaos)
    self->send(s.setup.chaos, atoms::step_atom::value, s.step, config::name_of(phase));
}

// step_tracker.cpp: sets the phase and the behaviour that goes with it.
void enter(Self* self, Phase phase);
caf::behavior behavior_of(Self* self, Phase phase);
// Hands a message to the active phase's behaviour at once, as if it came from the mailbox: a
// reply or a down message is taken by the phase the tracker is in when it arrives. (A copy
// of the behaviour is invoked: the handler may `become` another one.)
template <class... Ts>
void handle_now(Self* self, Ts&&... xs) {
  auto msg = caf::make_message(std::forward<Ts>(xs)...);
  caf::behavior current = self->bhvr_stack().back();
  current(msg);
}
// The common handling of a message that some phases extend: whether it counted (a newer
// membership, a first loss or completion of the open step's current attempt).
bool take_membership(Self* self, const messages::Membership& m);
bool take_loss(Self* self, const messages::LossReport& r);
bool take_done(Self* self, const messages::DoneReport& r);
void take_hop(Self* self, const messages::HopReport& r);
void on_replaced(Self* self, const std::string& kind, uint32_t k, const caf::actor& handle);

// phases.cpp: the messages of one phase only.
caf::message_handler own_handlers(Self* self, Phase phase);

// dispatch.cpp
std::vector<caf::actor> stage_actors(const tracker_state& s);
void announce(Self* self);
std::optional<size_t> empty_stage(const tracker_state& s);
void adopt_membership(Self* self);
void start_step(Self* self);
void open_step(Self* self);
void request_batch(Self* self, uint32_t mb);
void send_to_stage0(Self* self, uint32_t mb, uint32_t worker);
void dispatch_waiting(Self* self);
void maybe_close_step(Self* self);

// close_apply.cpp
void close_step(Self* self);
void account_samples(tracker_state& s);
void maybe_apply(Self* self);
void send_apply(Self* self);
void maybe_finish_step(Self* self);
void finish_step(Self* self);
// A step's record into the metrics log, at once where a takeover reads it (its "wall" added).
void write_step_record(Self* self, nlohmann::json entry);
void after_close(Self* self);
void after_step(Self* self);
void finish_run(Self* self);

// recovery.cpp
// Whether a live worker is at work on micro-batch `m`: one took it and has not handed it on, or
// the worker it was handed to (or sent to, in stage 0) is computing.
bool at_work(const tracker_state& s, const tracker_state::Micro& m);
void on_microbatch_timer(Self* self, uint64_t step, uint32_t mb, uint32_t attempt, uint64_t moves);
void on_cancelled(Self* self, uint64_t step, uint32_t mb, uint32_t attempt, uint32_t worker,
                  bool held);
void rerun(Self* self, uint32_t mb);
void rerun_through(Self* self, uint32_t lost);
void forget_worker(Self* self, uint32_t id, const caf::actor_addr& addr, const caf::error& why);

// verify.cpp: spot checks of stage work between a step's last micro-batch and its reduce.
// Draws the step's checks once and sends them out: false when none is open (the step closes).
bool start_checks(Self* self);
void on_verified(Self* self, uint64_t step, uint32_t mb, uint32_t attempt, uint32_t stage,
                 uint32_t checked, uint32_t verifier, double difference);
void on_verify_timer(Self* self, uint64_t step, uint64_t round);
// Expires the open checks `lost` took part in (every open check when none is named).
void expire_checks(Self* self, std::optional<uint32_t> lost);
// What `ctl info tracker`, the status page and /metrics show of the checks.
nlohmann::json verify_info(const tracker_state& s);

// restart.cpp
void record(Self* self, TrackerStore::Phase phase);
void restore(Self* self);
void continue_run(Self* self);
void reset_averagers(Self* self);
void maybe_reset_done(Self* self);
void reset_workers(Self* self);

// handoff.cpp
// When a live peer's state is handed out: at once between steps (now); in a step, at once to a
// member of it and after the step to any other worker (members_now); after the step while the
// workers apply it (after_apply).
enum class Handoff { now, members_now, after_apply };
void serve_state_requests(Self* self);
caf::actor settled_peer(const tracker_state& s, uint32_t stage, uint32_t id);
void serve_state_request(Self* self, tracker_state::StateRequest r);
void ask_group(Self* self, uint32_t stage, caf::response_promise promise, int tries);
caf::result<messages::WorkerState> state_for(Self* self, uint32_t stage, uint32_t id,
                                             const caf::actor_addr& sender, Handoff when);

// takeover.cpp (TrackerSetup::kept_step)
// A node named the states it kept (held_atom): holders of the kept step, or told to drop them.
void take_kept(Self* self, const caf::actor& keeper, const std::vector<uint32_t>& stages,
               const std::vector<int64_t>& steps);
// At the run's start: the kept states when they cover every stage, else the checkpoint.
void decide_takeover(Self* self);
// The run's start from the kept states: what follows their step, then the next step.
void continue_from_kept(Self* self);
// The first step after the kept one closed: the nodes may drop what they kept.
void release_kept(Self* self);
// The first state of a worker the run starts with, in a takeover that continues from the
// kept states (or has not chosen yet).
caf::result<messages::WorkerState> kept_state_for(Self* self, uint32_t stage, uint32_t id);
// A starting worker's state in a resumed run: the checkpoint's, else the initialization.
messages::WorkerState resumed_state(Self* self, uint32_t stage, uint32_t id);

// eval_checkpoint.cpp
void start_saving(Self* self);
void write_saved(Self* self);
// Answers the consoles waiting for a checkpoint: its path, or why there is none.
void answer_checkpoint_asks(Self* self, const std::string& path, const std::string& error);
void send_eval(Self* self);
void start_eval(Self* self);

}  // namespace swarmrt::actors::tracker
