// Every atom of swarmrt, declared once (CAF 0.17: at most 10 characters). The payload that
// goes with each is written beside it; the message types themselves are in types.hpp.
#pragma once

#include <caf/atom.hpp>

namespace swarmrt::atoms {
// Atoms are named for what they ask or announce (CAF 0.17: at most 10 characters).
using run_atom = caf::atom_constant<caf::atom("run")>;      // tracker: run all steps
using batch_atom = caf::atom_constant<caf::atom("batch")>;  // loader: next micro-batch
using frame_atom = caf::atom_constant<caf::atom("frame")>;  // a micro-batch hop
using loss_atom = caf::atom_constant<caf::atom("loss")>;    // last stage -> tracker
using done_atom = caf::atom_constant<caf::atom("done")>;    // stage 0 -> tracker
using hop_atom = caf::atom_constant<caf::atom("hop")>;      // worker -> tracker: HopReports
using flush_atom = caf::atom_constant<caf::atom("flush")>;  // worker -> itself: send them
// worker -> tracker: (worker, link, encoding, mbit_s, compute_ms, changed), a link's hops'
// encoding (swarm.compression = auto), once a step and when it changes
using hop_choice_atom = caf::atom_constant<caf::atom("hopchoice")>;
using eval_loss_atom = caf::atom_constant<caf::atom("evalloss")>;    // last stage -> tracker
using reduce_atom = caf::atom_constant<caf::atom("reduce")>;         // tracker: sync gradients
using grads_atom = caf::atom_constant<caf::atom("grads")>;           // worker -> its averager
using grad_sum_atom = caf::atom_constant<caf::atom("gradsum")>;      // averager -> worker: the sum
using last_grads_atom = caf::atom_constant<caf::atom("lastgrads")>;  // a worker's last gradient
using norm_atom = caf::atom_constant<caf::atom("norm")>;             // worker -> tracker
using apply_atom = caf::atom_constant<caf::atom("apply")>;           // tracker: take the step
// apply's (step, lr, coef): coef >= 0 scales the gradient, -1 has each worker clip its own
// (DiLoCo), kSkipStep has it drop the gradient and take no optimizer step (the loss scaler
// found it overflowed somewhere in the swarm).
constexpr double kSkipStep = -2.0;
using applied_atom = caf::atom_constant<caf::atom("applied")>;  // worker -> tracker: ProcessBytes
using round_atom = caf::atom_constant<caf::atom("round")>;      // DiLoCo round frame
using members_atom = caf::atom_constant<caf::atom("members")>;  // (Membership): it changed
using ask_members_atom = caf::atom_constant<caf::atom("askmembers")>;  // () -> Membership
using params_atom = caf::atom_constant<caf::atom("params")>;           // ask for parameters
using stats_atom = caf::atom_constant<caf::atom("stats")>;             // ask for counters
using metrics_atom = caf::atom_constant<caf::atom("metrics")>;         // a metrics.jsonl record
using chunk_atom = caf::atom_constant<caf::atom("chunk")>;             // a frame chunk from afar
using join_atom = caf::atom_constant<caf::atom("join")>;               // node -> coordinator
// node -> directory: () -> vector<string>, the HOST:PORT of every coordinator replica of the run
using replicas_atom = caf::atom_constant<caf::atom("replicas")>;
using workers_atom = caf::atom_constant<caf::atom("workers")>;  // node: my workers are up
using ready_atom = caf::atom_constant<caf::atom("ready")>;      // wait for a full swarm
using stop_atom = caf::atom_constant<caf::atom("stop")>;        // stop this node / swarm
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;    // tracker: drop old attempts
using state_atom = caf::atom_constant<caf::atom("state")>;      // () -> WorkerState: your own state
// (StateRequest) -> WorkerState: the state a new worker starts from, asked of the tracker.
using start_state_atom = caf::atom_constant<caf::atom("startstate")>;
using restarted_atom = caf::atom_constant<caf::atom("restarted")>;  // supervisor: new handle
using replaced_atom = caf::atom_constant<caf::atom("replaced")>;    // a core actor restarted
using kill_atom = caf::atom_constant<caf::atom("kill")>;            // chaos: kill by name/kind
using slow_atom = caf::atom_constant<caf::atom("slow")>;            // (name, factor): slow a worker
using faults_atom = caf::atom_constant<caf::atom("faults")>;        // ask for fault counters
using step_atom = caf::atom_constant<caf::atom("step")>;            // tracker: a step starts
using watch_atom = caf::atom_constant<caf::atom("watch")>;          // tracker: watch a supervisor
using reset_atom = caf::atom_constant<caf::atom("reset")>;          // (step, attempt floor): reopen
using link_atom = caf::atom_constant<caf::atom("link")>;            // a communicator link: join it
using comm_atom = caf::atom_constant<caf::atom("comm")>;  // a hop whose tensors are on a link
using group_comm_atom = caf::atom_constant<caf::atom("grpcomm")>;  // group: your communicator
using group_join_atom = caf::atom_constant<caf::atom("grpjoin")>;  // its rank 0: join it
// A worker of the group's communicator is at round r (and whether it can all-reduce); the
// group answers all-reduce (every worker of the communicator is) or report your own.
using group_ready_atom = caf::atom_constant<caf::atom("grpready")>;
using group_go_atom = caf::atom_constant<caf::atom("grpgo")>;
// A GPU worker -> itself: do what waited for its device (a loss to report, a frame to send).
using device_ready_atom = caf::atom_constant<caf::atom("devready")>;

// The console (architecture §9, `swarmrt ctl`). A console asks the directory for the
// coordinator's inspector (inspector_atom -> caf::actor), then sends it commands
// (console_atom, ConsoleRequest) -> std::string (JSON); that inspector runs each command's
// part in every process (inspect_atom, ConsoleRequest) -> std::string.
using inspector_atom = caf::atom_constant<caf::atom("inspector")>;
using console_atom = caf::atom_constant<caf::atom("console")>;
using inspect_atom = caf::atom_constant<caf::atom("inspect")>;
using info_atom = caf::atom_constant<caf::atom("info")>;      // () -> std::string: JSON about you
using events_atom = caf::atom_constant<caf::atom("events")>;  // (since) -> JSON: events after it
using drop_atom = caf::atom_constant<caf::atom("drop")>;  // (name, fraction): lose a worker's hops
// (kind, scale): a worker lies from now on (chaos.malicious's kinds, "noise" for its hops, or
// "none"); the console's `misbehave`.
using misbehave_atom = caf::atom_constant<caf::atom("misbehave")>;
// Step tracker: () -> std::string (JSON): save a swarm checkpoint once the open step closes.
using checkpoint_atom = caf::atom_constant<caf::atom("checkpoint")>;
// The balancer (actors/balancer): (move_atom, worker id, to stage, new id) -> int64_t: the host
// of that worker (a stage supervisor, or the directory across processes) retires it and starts
// a worker of the new id on stage `to` in its place, answering the new id (-1: not here).
using move_atom = caf::atom_constant<caf::atom("move")>;
// (place_atom, n, Membership serving) -> std::vector<uint32_t>: the stages the balancer would
// give n workers that join now beside those serving (empty: it has measured nothing yet).
using place_atom = caf::atom_constant<caf::atom("place")>;

// Frames of another process that arrived on a frame link (transport/bulk.hpp): the receiver's
// inbox is told one came (bulk_ready_atom) and takes it by id (bulk_atom, id).
using bulk_atom = caf::atom_constant<caf::atom("bulk")>;
using bulk_ready_atom = caf::atom_constant<caf::atom("bulkready")>;

// Timers: a message an actor sends itself with delayed_send. They never cross a process.
// Step tracker: the wait of micro-batch (step, mb, attempt) has passed; `moves`, its count of
// reports when the wait began, tells whether it moved meanwhile (policy/hop_deadline.hpp).
using microbatch_timer_atom = caf::atom_constant<caf::atom("mbtimer")>;
// Step tracker: validation losses of (step, send-out) not back within the same timeout.
using eval_timer_atom = caf::atom_constant<caf::atom("evaltimer")>;
// DiLoCo group: round r's contributions not all in within diloco.round_timeout_s.
using round_timer_atom = caf::atom_constant<caf::atom("roundtimer")>;
// Stage worker: no answer from the group on a round's all-reduce within transport.comm_timeout_s.
using go_timer_atom = caf::atom_constant<caf::atom("gotimer")>;
// Node agent: ask the directory for the coordinator replicas' addresses again.
using replicas_timer_atom = caf::atom_constant<caf::atom("reptimer")>;
// Chaos control: the next fault of its schedule.
using chaos_timer_atom = caf::atom_constant<caf::atom("chaostimer")>;
// Step tracker: ask stage k's DiLoCo group for a worker's state again (its supervisor is
// restarting it): (key, tries).
using ask_group_timer_atom = caf::atom_constant<caf::atom("asktimer")>;
// Step tracker: ask a loader for micro-batch (step, mb) again (the one asked did not answer).
using batch_retry_timer_atom = caf::atom_constant<caf::atom("batchretry")>;
// Step tracker, inside one actor: a reply or a down message, handed at once to the behaviour of
// the phase the tracker is in (tracker::handle_now); never sent.
// A worker (step, id) or an averager (step) answered the reset of a reopened step.
using reset_done_atom = caf::atom_constant<caf::atom("resetdone")>;
// A worker's state for the checkpoint of (step, id): (WorkerState) or (error text).
using saved_state_atom = caf::atom_constant<caf::atom("savedstate")>;
// A monitored worker went down: (id, address, reason).
using worker_down_atom = caf::atom_constant<caf::atom("workerdown")>;
// A watched supervisor gave up: (reason).
using escalated_atom = caf::atom_constant<caf::atom("escalated")>;
// Inspector: a trace of (id) has run its time.
using trace_timer_atom = caf::atom_constant<caf::atom("tracetimer")>;
// Supervisors: child i's restart after its backoff: (i).
using restart_timer_atom = caf::atom_constant<caf::atom("rsttimer")>;
// The balancer's period.
using balance_timer_atom = caf::atom_constant<caf::atom("baltimer")>;
// A node's inspector, from its own process once the node has joined: the run's
// (supervision.query_timeout_s, supervision.answer_lead_ms), which it did not know at start.
using timeouts_atom = caf::atom_constant<caf::atom("timeouts")>;
// A big reply across processes in slices (transport/relay.hpp): to the asked actor
// (collector, timeout_ms, the request...); the asker to its collector (): the reply; the asked
// actor to the collector (index, count, total bytes, slice bytes) or (why it failed).
using relay_atom = caf::atom_constant<caf::atom("relay")>;
using collect_atom = caf::atom_constant<caf::atom("collect")>;
using relay_slice_atom = caf::atom_constant<caf::atom("relayslice")>;
using relay_fail_atom = caf::atom_constant<caf::atom("relayfail")>;
using relay_timeout_atom = caf::atom_constant<caf::atom("relaytime")>;
using relay_value_atom = caf::atom_constant<caf::atom("relayvalue")>;
// A big one-way message across processes in slices (transport/parcel.hpp):
// (parcel id, index, count, total bytes, slice bytes).
using parcel_atom = caf::atom_constant<caf::atom("parcel")>;
// A node's keeper of stage states kept when its coordinator was lost: to the tracker, through
// the directory (keeper, stages, steps); the tracker asks it for (stage, step)'s state; it
// drops them all when the tracker is done with them.
using held_atom = caf::atom_constant<caf::atom("held")>;
using held_state_atom = caf::atom_constant<caf::atom("heldstate")>;
using drop_held_atom = caf::atom_constant<caf::atom("dropheld")>;
// State from many donors (actors/recovery/): the tracker asks each live peer of a stage to
// snapshot its state (-> its donor actor, the snapshot's step); a joiner's fetcher asks a
// donor for the manifest (registering as one of its joiners), then for chunks (sent back as
// frames), and says when it is done; the fetcher's stall check; the worker asks its fetcher.
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;
using manifest_atom = caf::atom_constant<caf::atom("manifest")>;
using state_chunk_atom = caf::atom_constant<caf::atom("statechunk")>;
using fetch_done_atom = caf::atom_constant<caf::atom("fetchdone")>;
using fetch_tick_atom = caf::atom_constant<caf::atom("fetchtick")>;
using fetch_state_atom = caf::atom_constant<caf::atom("fetchstate")>;
using donor_tick_atom = caf::atom_constant<caf::atom("donortick")>;
// Spot checks (actors/tracker/verify.cpp): the tracker asks the upstream worker of a checked
// stage to send that stage's input again (step, micro-batch, attempt, verifier id, checker id);
// the checker answers the tracker (step, micro-batch, attempt, stage, checked id, verifier id,
// relative difference); the tracker bans a worker found wrong at the directory (id, why); a
// check not answered in time expires (step, check index).
using verify_atom = caf::atom_constant<caf::atom("verify")>;
using verified_atom = caf::atom_constant<caf::atom("verified")>;
using ban_atom = caf::atom_constant<caf::atom("ban")>;
using verify_timer_atom = caf::atom_constant<caf::atom("verifytime")>;
}  // namespace swarmrt::atoms
