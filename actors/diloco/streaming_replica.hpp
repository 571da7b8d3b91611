// The replica side of Streaming DiLoCo (Douillard et al. 2025; architecture §6), one per
// stage worker when diloco.fragments > 1, diloco.overlap_steps > 0 or diloco.quantize is not
// none. The stage's parameters are split into P fragments (model/fragments.hpp); fragment p
// starts a round after the inner step of every step t ≡ ⌊p·H/P⌋ (mod H): it sends
// Δ_p = θ_p(t−1) − θ_p in diloco.quantize's encoding (with its last quantization error added
// when diloco.error_feedback) and goes on training. The group's answer is merged after the
// inner step of t + τ (τ = diloco.overlap_steps):
//   θ_p ← α·θ_p + (1 − α)·θ_p,global        (α = diloco.alpha)
// and θ_p,global becomes the fragment's anchor. An answer that has not arrived by then holds
// that step open (the tracker hears `applied` once it is merged), so a merge always lands
// exactly τ inner steps after its round started. With τ = 0 the step is held until the answer
// is in, as in plain DiLoCo.
//
// The last step syncs every fragment once more and takes the group's θ (α is not applied),
// so a run ends with every worker of a stage on the same parameters; a fragment whose round
// is still in flight then merges first and syncs after.
//
// Eager (diloco.eager, Kale et al. 2025): at a round's start the worker does not wait for the
// mean. It steps its own outer optimizer (Nesterov, its own momentum) with
// model::eager_delta: its fresh Δ_i and the others' Δ of the fragment's last round, and
// trains on from the result, which becomes the fragment's anchor. The group answers with the
// round's mean Δ̄ (and who is in it), which the merge τ steps later only records for the next
// round. The group's θ follows the mean of the workers' eager steps (actors/diloco/
// diloco_group.hpp), and the last step hands it, stepped with that round's exact mean, to every
// worker. A restarted worker's local momentum starts from zero.
//
// Faults: a refused round (the group was collecting another, the sender was not a member, a
// non-finite tensor) leaves the local fragment as it is and is counted; a round the group
// applied without this worker brings its θ from the group. Contributions not yet answered are
// sent again to a restarted group, which applies each round once.
#pragma once

#include <caf/all.hpp>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/diloco/worker_replica.hpp"
#include "messages/frame.hpp"
#include "model/checkpoint.hpp"
#include "model/stage_model.hpp"

namespace swarmrt::actors {

class StreamingReplica : public WorkerReplica {
 public:
  // The fragments of the module's parameters, and θ(t−1) from them.
  void configure(ReplicaSetup setup, const model::StageModel& module) override;
  void take_state(const messages::WorkerState& st, model::NamedTensors anchor) override;
  void give_state(messages::WorkerState& st) const override;
  // The next round of every fragment, from a handed-out state (rounds, or round for all).
  void set_rounds(const messages::WorkerState& st);
  std::vector<int64_t> rounds() const;
  uint64_t round() const { return fragments_.empty() ? 0 : fragments_[0].round; }

  // Whether the tracker waits for this replica's `applied` of a step.
  bool round_open() const override { return held_step_.has_value() || warmup_open(); }

  // After the inner step of `step`: merges the rounds that land now and starts those due.
  // False when nothing holds the step (the worker reports it applied itself).
  bool after_inner_step(Self* self, uint64_t step, model::StageModel& module) override;
  // θ of a round applied without this replica that arrived while micro-batches were in
  // flight: loaded now, after the inner step.
  void load_missed(model::StageModel& module) override;

  // A round frame from the group. `busy`: micro-batches hold autograd graphs now. False when
  // the frame was refused (counted by the worker).
  bool on_round(Self* self, const messages::Frame& frame, model::StageModel& module, bool busy,
                uint64_t step, const Reload& reload) override;
  // The group was restarted: unanswered contributions go to its successor.
  void on_group_replaced(Self* self, const caf::actor& group) override;

  uint64_t merges() const { return merges_; }
  // What the console's `info` shows: fragment 0's round, and under "streaming" per fragment
  // its round, tensors, whether a round is in flight, and the bytes its rounds sent; the most
  // sent in one step.
  nlohmann::json info() const override;
  ReplicaStats stats() const override { return {0, 0, failures_}; }

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
    bool sync_after = false;                // the last step's round starts once this merges
    uint64_t bytes = 0;                     // sent by its rounds
    // Eager: the local outer momentum; this worker's last Δ as the group decoded it, and its
    // round; the last mean answered, its round and its contributors.
    model::NamedTensors momentum;
    model::NamedTensors own;
    std::optional<uint64_t> own_round;
    model::NamedTensors mean;
    std::optional<uint64_t> mean_round;
    std::vector<uint32_t> mean_of;
  };

  // Eager: the local outer step of fragment p at its round's start, after `step` (Δ: fresh,
  // on the host; sent: what the group will decode of it).
  void eager_step(uint32_t p, uint64_t step, const std::vector<at::Tensor>& delta,
                  const std::vector<at::Tensor>& sent, model::StageModel& module);
  // Eager: an answer's mean, recorded for fragment p's next round.
  void take_mean(uint32_t p, const messages::Frame& frame, const messages::RoundHeader& h);

  void send_round(Self* self, uint32_t p, uint64_t step, model::StageModel& module, bool last);
  // Takes fragment p's answer (merge: with α unless it is the last step's round).
  void merge(uint32_t p, model::StageModel& module);
  // Fragment p's θ from a round applied without this replica.
  void take_global(uint32_t p, const messages::Frame& frame, model::StageModel& module);
  // A held step's fragment p is done: the final round starts, or the step is released.
  void settle(Self* self, uint32_t p, model::StageModel& module);
  // θ_p,global of an answer: θ(t) itself, or the anchor plus a decoded update.
  model::NamedTensors global_of(uint32_t p, const messages::Frame& frame,
                                const messages::RoundHeader& h) const;

  std::vector<std::string> names_;  // the stage's parameters, in the module's order
  std::vector<Fragment> fragments_;
  std::optional<uint64_t> held_step_;  // the step whose `applied` waits for `holding_`
  std::set<uint32_t> holding_;
  uint64_t last_step_ = 0;  // the run's last step
  uint64_t merges_ = 0, failures_ = 0;
  uint64_t step_bytes_ = 0, bytes_step_ = 0, peak_step_bytes_ = 0;
};

}  // namespace swarmrt::actors
