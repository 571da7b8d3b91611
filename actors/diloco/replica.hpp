// The worker's side of DiLoCo (architecture §6), one per stage worker in DiLoCo modes. The
// stage worker owns the module and the inner optimizer and calls this at the same points of
// every step; this class owns everything about rounds (as torchft keeps local_sgd apart from
// its manager). Plain DiLoCo is Streaming DiLoCo (Douillard et al. 2025) with one fragment and
// no overlap, so one class runs both:
//
// The stage's parameters are split into P = diloco.fragments fragments (model/fragments.hpp);
// fragment p starts a round after the inner step of every step t ≡ ⌊p·H/P⌋ (mod H): it sends
// Δ_p = θ_p(t−1) − θ_p in diloco.quantize's encoding (with its last quantization error added
// when diloco.error_feedback) and goes on training. The group's answer is merged after the
// inner step of t + τ (τ = diloco.overlap_steps):
//   θ_p ← α·θ_p + (1 − α)·θ_p,global        (α = diloco.alpha; 0: θ_p,global itself)
// and θ_p,global becomes the fragment's anchor. An answer that has not arrived by then holds
// that step open (the tracker hears `applied` once it is merged), so a merge always lands
// exactly τ inner steps after its round started. With τ = 0 the step is held until the answer
// is in. The last step syncs every fragment once more and takes the group's θ (α is not
// applied), so a run ends with every worker of a stage on the same parameters.
//
// Eager (diloco.eager, Kale et al. 2025): at a round's start the worker steps its own outer
// optimizer (Nesterov, its own momentum) with model::eager_delta (its fresh Δ_i and the
// others' Δ of the fragment's last round) and trains on from the result, its new anchor. The
// group answers with the round's mean, which the merge τ steps later only records.
//
// The group's communicator (replica_comm.cpp): where the group announces one (NCCL between
// CUDA workers, TCP with transport.links = "comm"; only for whole-stage full-precision rounds),
// a round's pseudo-gradient waits until the group says every worker of it is at the round, is
// all-reduced among them, and only the first sends the mean. Without an answer in
// transport.comm_timeout_s, or when the all-reduce fails, the replica sends its own.
//
// Faults: a refused round leaves the local fragment as it is and is counted; a round the group
// applied without this worker brings its θ from the group, loaded once no micro-batch holds an
// autograd graph over the parameters. Contributions not yet answered are sent again to a
// restarted group, which applies each round once.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/common/context.hpp"
#include "messages/frame.hpp"
#include "messages/types.hpp"
#include "model/checkpoint.hpp"
#include "model/stage_model.hpp"
#include "policy/hop_choice.hpp"
#include "transport/comm.hpp"

namespace swarmrt::actors {

struct ReplicaSetup {
  ContextPtr ctx;
  uint32_t id = 0;     // the worker's
  uint32_t stage = 0;  // the stage the group serves
  caf::actor tracker;  // told `applied` once a round's answer is in
  caf::actor group;
  at::Device device{at::kCPU};
  transport::CommOptions comm_options;
  // What every round's tensors pass through before they leave (of the step they are sent
  // in): the worker's fault injection wraps the replica's sends here (chaos.nan_worker).
  std::function<void(uint64_t step, std::vector<at::Tensor>& tensors)> outgoing;
  // The worker's own byte counts (the console's `info`), besides the process's in ctx.
  std::shared_ptr<ByteCounters> sent;
};

// Tells the tracker that worker `id` took `step`, with what its process has sent so far: the
// coordinator counts other processes' bytes from these reports (ProcessBytes).
inline void tell_applied(caf::event_based_actor* self, const caf::actor& tracker, uint64_t step,
                         uint32_t id, const SwarmContext& ctx) {
  self->send(tracker, atoms::applied_atom::value, step, id,
             messages::ProcessBytes{ctx.process, ctx.bytes->snapshot()});
}

// Rounds all-reduced over a group communicator, sent alone although there was one, and
// failed (an all-reduce, an answer that never came, a refused or unmergeable round).
struct ReplicaStats {
  uint64_t reduces = 0, fallbacks = 0, failures = 0;
};

class DilocoReplica {
 public:
  using Self = caf::event_based_actor;
  // Loads a state handed out by the group (after a round refused as "already applied").
  using Reload = std::function<void(const messages::WorkerState&)>;

  // The setup, the fragments of the module's parameters, and θ(t−1) from them (a fresh start).
  void configure(ReplicaSetup setup, const model::StageModel& module);
  // A handed-out state: its anchor (empty: the module's parameters now) and next rounds.
  void take_state(const messages::WorkerState& st, model::NamedTensors anchor);
  // This replica's part of the worker's state for a peer: anchor, rounds.
  void give_state(messages::WorkerState& st) const;

  // Whether a round holds a step open: the tracker waits for this replica's `applied`.
  bool round_open() const {
    return held_step_.has_value() || awaiting_go_.has_value() || warmup_open();
  }
  // After the inner step of `step`: merges the rounds that land now and starts those due.
  // True when the step is held open (the replica reports it applied later); false when the
  // worker reports it.
  bool after_inner_step(Self* self, uint64_t step, model::StageModel& module);
  // θ of a round applied without this replica that arrived while micro-batches were in
  // flight: loaded now, after the inner step.
  void load_missed(model::StageModel& module);
  // A round frame from the group. `busy`: micro-batches hold autograd graphs now. False when
  // the frame was refused (counted by the worker).
  bool on_round(Self* self, const messages::Frame& frame, model::StageModel& module, bool busy,
                const Reload& reload);
  // The group was restarted: unanswered contributions go to its successor.
  void on_group_replaced(Self* self, const caf::actor& group);

  // The group's communicator from `epoch` on (group_comm_atom), or the id to join it by.
  void on_group_comm(Self* self, const messages::GroupComm& c);
  void on_group_join(Self* self, const messages::GroupJoin& j);
  // The group's answer for a held round (all-reduce or not), or its timer.
  void on_go(Self* self, uint64_t round, uint64_t epoch, bool go);
  void on_go_timer(Self* self, uint64_t round, uint64_t epoch);

  // Fragment 0's next round.
  uint64_t round() const { return fragments_.empty() ? 0 : fragments_[0].round; }
  // What the console's `info` shows: fragment 0's round, and under "diloco" per fragment its
  // round, tensors, whether a round is in flight and the bytes its rounds sent; the most sent
  // in one step.
  nlohmann::json info() const;
  ReplicaStats stats() const { return {reduces_, fallbacks_, failures_}; }

 private:
  struct Fragment {
    std::vector<size_t> index;  // its tensors' positions in the stage's parameters
    uint64_t round = 0;         // the next round id
    // The round in flight: its id and frame (sent again to a restarted group), the step it
    // started at and the step after whose inner step it merges; its answer, once in.
    std::optional<uint64_t> in_flight;
    std::optional<messages::Frame> sent;
    uint64_t started = 0, lands = 0;
    std::optional<messages::Frame> answer;
    std::optional<messages::Frame> missed;  // θ of a round applied without this replica
    model::NamedTensors residual;           // quantization error carried to the next round
    // diloco.all_gather: the last round's contribution as sent, and its round (the answer is
    // the others'; this worker sums them with its own).
    std::vector<at::Tensor> wire;
    std::optional<uint64_t> wire_round;
    bool sync_after = false;  // the last step's round starts once this merges
    uint64_t bytes = 0;       // sent by its rounds
    // Eager: the local outer momentum; this worker's last Δ as the group decoded it, and its
    // round; the last mean answered, its round and its contributors.
    model::NamedTensors momentum;
    model::NamedTensors own;
    std::optional<uint64_t> own_round;
    model::NamedTensors mean;
    std::optional<uint64_t> mean_round;
    std::vector<uint32_t> mean_of;
  };
  // A whole-stage round's Δ held while the group decides whether every worker of the
  // communicator is at the round (replica_comm.cpp).
  struct AwaitingGo {
    uint64_t round = 0, epoch = 0, step = 0;
    bool last = false;
    std::vector<at::Tensor> delta;  // on the worker's device
  };

  // replica.cpp: rounds started, answered, merged and released.
  void start_round(Self* self, uint32_t p, uint64_t step, model::StageModel& module, bool last);
  // A held step's fragment p is done: the final round starts, or the step is released.
  void settle(Self* self, uint32_t p, model::StageModel& module);

  // replica_merge.cpp: the round's arithmetic on the worker's side.
  // Fragment p's Δ (of `step`, on the worker's device) to the group: encoded, and eager-stepped
  // where the run says (`module`: null only for whole-stage rounds, which never are). `mean`:
  // Δ is the group communicator's all-reduced mean, which only its first worker sends.
  void send_round(Self* self, uint32_t p, uint64_t step, std::vector<at::Tensor> delta,
                  model::StageModel* module, bool last, bool mean);
  // Eager: the local outer step of fragment p at its round's start, after `step` (Δ: fresh,
  // on the host; sent: what the group will decode of it).
  void eager_step(uint32_t p, uint64_t step, const std::vector<at::Tensor>& delta,
                  const std::vector<at::Tensor>& sent, model::StageModel& module);
  // Eager: an answer's mean, recorded for fragment p's next round.
  void take_mean(uint32_t p, const messages::Frame& frame, const messages::RoundHeader& h);
  // Takes fragment p's answer (merge: with α unless it is the last step's round).
  void merge(uint32_t p, model::StageModel& module);
  // Fragment p's θ from a round applied without this replica.
  void take_global(uint32_t p, const messages::Frame& frame, model::StageModel& module);
  // θ_p,global of an answer: θ(t) itself, or the anchor plus a decoded update.
  model::NamedTensors global_of(uint32_t p, const messages::Frame& frame,
                                const messages::RoundHeader& h) const;
  model::NamedTensors gathered_of(uint32_t p, const messages::Frame& frame,
                                  const messages::RoundHeader& h) const;

  // replica_density.cpp: swarm.compression = auto with sparse rounds. The density of the
  // contribution `tensors` (on the host) of `step`, chosen for the link to the group and told
  // to the tracker; diloco.topk_density when auto does not choose it.
  double choose_density(Self* self, uint64_t step, const std::vector<at::Tensor>& tensors);

  // replica_comm.cpp: the group's communicator.
  // Whether rounds go through the group's communicator now (the group announced one).
  bool via_group() const { return !backend_.empty(); }
  // Fragment 0's round of `step` with the communicator: held for the group's go.
  void ask_group(Self* self, uint64_t step, std::vector<at::Tensor> delta, bool last);
  // `delta` becomes the mean of the group's, all-reduced over its communicator; false (the
  // communicator dropped) when there is none or the all-reduce fails.
  bool group_mean(std::vector<at::Tensor>& delta);
  // The round held for the group's answer goes out now, all-reduced or (reduce = false) alone.
  void release_round(Self* self, bool reduce);

  // replica_warmup.cpp: the anchor, counts, the synchronous warm-up, answers and catching up.
  void set_anchor(const model::StageModel& module);
  void set_anchor(model::NamedTensors anchor);
  // A round frame this worker sends: its tensors as `kind`, its header as control, in the
  // process's and the worker's own counts.
  void count_sent(Traffic kind, const messages::Frame& frame) const;
  // A round frame's header, or nullopt (logged) when it does not decode.
  std::optional<messages::RoundHeader> open_answer(const messages::Frame& frame) const;
  // The synchronous warm-up (diloco.warmup_sync_steps = K > 0) ends after the inner step of
  // step K: every worker holds the same θ(K) (the warm-up averaged its gradients).
  bool ends_warmup(uint64_t step) const;
  // Logs the H of the steps from step + 1 on where diloco.inner_steps_schedule changes it
  // (and at the warm-up's end), once a step.
  void say_when_h_changes(uint64_t step) const;
  // θ(K) becomes the anchor and goes to the group, whose rounds start from it (its outer
  // momentum from zero). The step is held until the group has taken it, so that no worker
  // restarted after step K starts from the group's θ(0). Returns true: the step is held.
  bool start_from_warmup(Self* self, uint64_t step, const model::StageModel& module);
  // The group's answer to it releases the held step. True when `h` was that answer.
  bool on_warmup_answer(Self* self, const messages::RoundHeader& h);
  bool warmup_open() const { return warmup_sent_.has_value(); }
  // A restarted group gets θ(K) again while the step is held.
  void resend_warmup(Self* self, const caf::actor& group) const;
  // A contribution refused because its round was applied without it: this worker is behind
  // and takes the group's state again.
  void catch_up_if_behind(Self* self, const messages::RoundHeader& h, const Reload& reload) const;

  ReplicaSetup setup_;
  std::vector<std::string> names_;  // the stage's parameters, in the module's order
  model::NamedTensors anchor_;      // θ(t−1) of every fragment, the last rounds' global θ
  std::vector<Fragment> fragments_;
  std::optional<uint64_t> held_step_;  // the step whose `applied` waits for `holding_`
  std::set<uint32_t> holding_;
  uint64_t last_step_ = 0;                      // the run's last step
  std::optional<messages::Frame> warmup_sent_;  // θ(K) to the group, unanswered
  uint64_t warmup_step_ = 0;
  // The communicator shared with the group's other workers, the epoch the group announced it
  // in, its backend (empty: none) and the workers in it by rank; a round held for its go.
  std::unique_ptr<transport::Comm> comm_;
  uint64_t epoch_ = 0;
  std::string backend_;
  std::vector<uint32_t> ids_;
  std::optional<AwaitingGo> awaiting_go_;
  uint64_t merges_ = 0, reduces_ = 0, fallbacks_ = 0, failures_ = 0;
  uint64_t step_bytes_ = 0, bytes_step_ = 0, peak_step_bytes_ = 0;
  // swarm.compression = auto: the chooser of this worker's link to the group, and the step
  // and time its last contribution left (the compute a contribution hides under is measured
  // between them), less the seconds since spent waiting for answers (without overlap).
  policy::HopChooser density_choice_{policy::HopChooser::kRoundDwell};
  std::optional<std::pair<uint64_t, std::chrono::steady_clock::time_point>> last_sent_at_;
  double waited_s_ = 0;
  // ... under diloco.all_gather: the density this worker's link carries (told to the group with
  // each contribution), the least of the last round's (its gathered answer's cap), and the
  // rung the last contribution went at (the chooser's, or the cap's below it).
  double carried_ = 0, round_cap_ = 0;
  size_t sent_rung_ = SIZE_MAX;
};

// The replica a worker of this run has: none outside the DiLoCo modes.
std::unique_ptr<DilocoReplica> make_replica(const SwarmContext& ctx);

}  // namespace swarmrt::actors
