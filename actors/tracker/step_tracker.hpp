// The step tracker: opens step s with M micro-batches, has the loaders produce them and sends
// each to a stage-0 worker chosen by its wiring, counts every micro-batch exactly once as it
// completes, then closes the step: gradients are reduced, clipped by the norm the mode calls
// for and applied (with a DiLoCo round every H steps) before the next step opens. It also
// runs evaluations and writes one metrics record per step.
//
// Faults (architecture §7): it monitors every worker. A worker lost in the middle of a step is
// removed at once (everyone re-wires), and the micro-batches whose gradient it held or whose
// path it touched are re-run from stage 0 with attempt+1; so is a micro-batch that does not
// come back within supervision.microbatch_timeout_s (a lost hop). Before a re-run goes out,
// every live worker drops the older attempts and says whether it holds the micro-batch's
// gradient; the re-run is pinned to those holders, so each stage takes every micro-batch's
// gradient exactly once (checked per step against the routes: RunReport extra/missing
// samples). A stage left without workers pauses the pipeline until a worker of that stage
// joins. A
// restarted or joining worker asks the tracker for its starting state: a live peer's (handed
// out between steps), its DiLoCo group's θ, or the newest checkpoint's.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "actors/common/context.hpp"
#include "actors/diloco/diloco_group.hpp"
#include "actors/loader/data_loader.hpp"
#include "messages/types.hpp"
#include "model/data.hpp"
#include "model/precision.hpp"
#include "model/run_dir.hpp"
#include "policy/hop_deadline.hpp"
#include "policy/spot_check.hpp"
#include "policy/wiring.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::actors {

// What a restarted tracker continues from, kept outside the tracker actor (like a DiLoCo
// group's store) by the tracker supervisor. The tracker writes it when it opens a step, when
// it has decided a step's apply (before any worker takes it) and when it has closed a step.
// A tracker lost while a step runs or reduces opens that step again from its first
// micro-batch (no worker has applied it); one lost while the workers apply sends the same
// apply again (taken once by each worker); one lost after closing a step does what follows it.
// What a step counted and decided, as its record will say: kept together so that a restarted
// tracker takes all of it from the store (see TrackerStore).
struct StepOutcome {
  double lr = 0;
  double coef = -1;       // the step's clip coefficient (-1: each replica clips its own; kSkipStep)
  double loss_scale = 1;  // the step's micro-batches' loss scale (train.loss_scale)
  double loss = 0;        // mean micro-batch loss of the step
  int64_t completed = 0;  // its micro-batches
  int64_t duplicates = 0;  // completions seen again (see RunReport)
  int64_t extra_samples = 0, missing_samples = 0;
  std::map<uint32_t, int64_t> samples;  // per worker, samples it backpropagated
};

struct TrackerStore {
  using Clock = std::chrono::steady_clock;
  enum class Phase { none, opened, applying, closed };
  std::mutex mu;
  uint32_t incarnation = 0;  // trackers started so far; attempts start at incarnation << 16
  Phase phase = Phase::none;
  uint64_t step = 0;  // the step `phase` is about
  uint64_t first_step = 0;
  Clock::time_point run_start, step_start;
  messages::RunReport report;  // through the last closed step
  // The apply of `step` (phase applying): what the workers are told and what the step's record
  // will say.
  StepOutcome outcome;
  model::LossScaler scaler;  // as of the last applying record
  // Spot checks: the workers banned (never adopted again) and the tally, as of the last record
  // (a ban is recorded at once).
  std::map<uint32_t, std::string> banned;
  policy::SpotCheckTally tally;
};
using TrackerStorePtr = std::shared_ptr<TrackerStore>;

struct TrackerSetup {
  ContextPtr ctx;
  std::vector<loader_actor> loaders;
  std::vector<caf::actor> averagers;  // per stage; invalid where the mode has none
  std::vector<caf::actor> groups;     // per stage; invalid where the mode has none
  caf::actor metrics;                 // optional metrics sink
  std::shared_ptr<const model::Corpus> corpus;
  bool progress = true;
  model::RunDir* run = nullptr;             // periodic checkpoints go here when set
  std::vector<GroupStorePtr> group_stores;  // per stage (DiLoCo), saved in checkpoints
  std::optional<model::Checkpoint> resume;  // continue from this swarm checkpoint
  std::string resume_origin;
  // A takeover from a lost leader: the step it closed last, which the nodes may have kept the
  // states of (actors/tracker/takeover.cpp). Unset: continue from `resume` (or the start).
  std::optional<uint64_t> kept_step;
  bool kept_evaluated = false;  // the metrics log has an eval record of kept_step already
  caf::actor chaos;             // optional: told when each step starts
  TrackerStorePtr store;        // optional: where a restarted tracker continues from
  // Finds the directory (a coordinator's): a worker banned by a spot check is refused there
  // with its node. Unset or without one (a run in one process): the tracker's ban alone.
  std::shared_ptr<supervisors::Roster> roster;
};

struct tracker_state {
  using Clock = std::chrono::steady_clock;
  struct Micro {
    messages::TensorList batch;
    uint32_t attempt = 0;
    uint32_t worker = 0;
    Clock::time_point sent;
    bool ready = false;  // the loader delivered it
    bool done = false;   // backward reached stage 0
    bool has_loss = false;
    double loss = 0;
    std::vector<uint32_t> route;  // the workers of the attempt that reached the last stage
    // Per stage, the live worker that holds this micro-batch's gradient (kNoWorker: none).
    // A re-run is pinned to them, so no stage takes the gradient twice.
    std::vector<uint32_t> pin;
    // Workers whose answer to the cancel is awaited: the re-run waits until every holder is
    // known. A worker lost meanwhile is no longer awaited.
    std::set<uint32_t> awaiting;
    // Where this attempt is, from the workers' HopReports: the worker that took it last, and
    // whether (and to whom) it handed it on; how often it moved (reports, counted), when last;
    // the waits it spent busy without moving; how often it was lost in this step.
    std::optional<uint32_t> holder;
    bool handed_on = false;
    caf::actor_addr handed_to;
    uint64_t moves = 0;
    Clock::time_point moved;
    double busy_waited_s = 0;
    int64_t losses = 0;
  };
  // What a worker is computing, since when (from its last "took" report until it hands it on).
  struct Busy {
    uint64_t step = 0;
    uint32_t micro_batch = 0, attempt = 0;
    Clock::time_point since;
  };
  struct StateRequest {
    uint32_t stage = 0, id = 0;
    caf::response_promise promise;
  };

  TrackerSetup setup;
  policy::Wiring stage0;
  policy::HopDeadline deadline{{}};  // when a micro-batch counts as lost
  std::map<uint32_t, Busy> busy;     // per worker id
  messages::Membership members;
  std::optional<messages::Membership> pending;  // adopted when the next step starts
  std::map<uint32_t, caf::actor> by_id;
  std::map<uint32_t, uint32_t> stage_of;

  uint64_t step = 0;
  Clock::time_point run_start, step_start;
  // When the open step's micro-batches were all back and when its apply went out: the step
  // record splits its time into compute, reduce and apply (where a GPU worker's time goes).
  Clock::time_point closed_at, applying_at;
  std::vector<Micro> micro;
  std::deque<uint32_t> waiting;  // micro-batches waiting for a free stage-0 slot
  std::map<uint32_t, double> sqnorms;
  std::set<uint32_t> applied;
  StepOutcome outcome;  // of the open step
  // The swarm's loss scaler (train.loss_scale): its scale goes out in every micro-batch header
  // of a step, and a step whose gradient overflowed anywhere is skipped by every worker.
  model::LossScaler scaler;
  // One behaviour per phase (actors/tracker/phases.cpp, tracker::enter); `phase` only names
  // the active one for the console's `info`:
  //
  //           run                  all micro-batches back        every norm
  //   idle ───────► running ─────────────────────────────► reducing ─────────► applying
  //     ▲             ▲  ▲                                                        │ all applied
  //     │             │  └─────────────── next step ─────────────────────────────┤
  //     │             │                                                           ▼
  //     │             └──── next step ◄──── evaluating ◄──── saving ◄──── (a checkpoint or
  //     └─────────── last step evaluated                                    evaluation due)
  //   a restarted tracker reopening a step: resetting ─► running
  enum class Phase {  // phase_name and own_handlers list them in this order
    idle,
    resetting,  // a restarted tracker: every worker drops what it did in the reopened step
    running,
    reducing,
    applying,
    saving,
    evaluating
  } phase = Phase::idle;
  uint32_t attempt_base = 0;  // first attempt of every micro-batch (see TrackerStore)
  bool reopen = false;        // the next step opened is one a lost tracker opened
  std::optional<TrackerStore::Phase> restored;  // where this (restarted) tracker continues
  std::set<uint32_t> resetting;                 // workers whose reset answer is awaited
  size_t averager_resets = 0;                   // averager answers awaited

  std::vector<model::Batch> val;
  std::vector<double> val_losses;
  std::vector<bool> val_have;
  uint32_t eval_sends = 0;  // evaluation send-outs: a deadline is for the latest only

  std::set<caf::actor_addr> dead;            // workers seen going down: never re-adopted
  std::set<caf::actor_addr> watched;         // supervisors whose escalation ends the run
  std::vector<StateRequest> state_requests;  // grad-sync: served between steps
  std::map<uint64_t, std::pair<uint32_t, caf::response_promise>> asks;  // group asks to retry
  uint64_t next_ask = 0;
  bool paused = false;                        // a stage has no worker
  std::optional<Clock::time_point> fault_at;  // the first unrecovered fault of the step
  // Sync bytes (gradients, pseudo-gradients, parameters) this process's actors had sent by the
  // last step's end, and the most sent in one step (Streaming DiLoCo's peak bandwidth).
  double sync_bytes_sent = 0, peak_sync_bytes = 0;
  uint64_t first_step = 0;  // the step a resumed run continues after
  // The workers the run started with (their first state is the initialization or the resumed
  // checkpoint, even when they ask after step 1 has begun). A worker that joins later, even
  // one adopted before it asks, takes a live peer's state.
  std::set<caf::actor_addr> starters;
  // A takeover (setup.kept_step): choosing until the run starts, with the first state requests
  // waiting; the nodes that named kept states, the ones holding each stage's at the kept step
  // (and at the step after it, which the workers may have taken before the lost leader wrote
  // its record); whether the run continues from them, and who waits for each stage's.
  bool deciding = false;
  bool from_kept = false;
  std::vector<caf::actor> keepers;
  std::map<uint32_t, std::vector<caf::actor>> holders, holders_next;
  std::vector<StateRequest> kept_requests;
  std::map<uint32_t, std::vector<caf::response_promise>> kept_fetching;  // per stage
  std::map<uint32_t, messages::WorkerState> kept_cache;                  // per stage, once fetched
  // DiLoCo: each worker fetches a kept state of its own (replicas differ), the holders of its
  // stage taken in turn; how many such fetches are out.
  std::map<uint32_t, size_t> kept_turn;
  size_t kept_own_fetches = 0;
  bool kept_released = false;  // the first step after the kept one closed: the nodes drop them
  // Workers known to hold a state: the starters and every worker that has taken a step. Only
  // they hand theirs out (a worker still waiting for its own would answer only once it has
  // one: two workers of a stage restarted at once would each wait for the other).
  std::set<caf::actor_addr> settled;
  std::map<uint32_t, messages::WorkerState> saving;  // checkpoint being gathered
  size_t saving_wanted = 0;
  // Consoles that asked for a checkpoint (`swarmrt ctl ... checkpoint`): the next closed step
  // is saved and each is answered with its path.
  std::vector<caf::typed_response_promise<std::string>> checkpoint_asks;

  // Spot checks of stage work (verify.cpp, verify.fraction): drawn once the step's
  // micro-batches are all back, answered before it is reduced. Each names who computed the
  // checked output, who received it (the checker), whose hop it was computed from (none: stage
  // 0, the tracker's batch) and who computes it again; after a mismatch, the first verifier.
  struct Check {
    uint32_t micro_batch = 0, stage = 0, attempt = 0;
    uint32_t checked = 0, checker = 0, verifier = 0;
    std::optional<uint32_t> upstream;
    std::optional<uint32_t> first;
    double first_difference = 0;
  };
  std::vector<Check> checks;     // open checks of the step
  uint64_t checked_step = 0;     // the step whose checks were drawn (once a step)
  uint64_t check_round = 0;      // which draw a verify_timer_atom belongs to
  uint64_t verify_seed = 0;      // what is checked is drawn from it (never sent to workers)
  bool rerun_after_ban = false;  // a worker of the step was banned: the step runs again
  policy::SpotCheckTally tally;
  std::map<uint32_t, std::string> banned;  // worker id -> why; never adopted again
  // swarm.compression = auto: each worker's latest choice for each link it sends on (its
  // endpoint), as the workers told it; in every step record.
  struct HopChoice {
    std::string encoding;
    double mbit_s = 0, compute_ms = 0;
  };
  std::map<std::pair<uint32_t, std::string>, HopChoice> hop_choices;

  messages::RunReport report;
  caf::response_promise promise;
  static inline const char* name = "step_tracker";
};

caf::behavior step_tracker(caf::stateful_actor<tracker_state>* self, TrackerSetup setup);

}  // namespace swarmrt::actors
