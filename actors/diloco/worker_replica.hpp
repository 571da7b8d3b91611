// The worker's side of DiLoCo behind one interface (architecture §6): the stage worker owns the
// module and the inner optimizer and calls these at the same points of every step, whichever
// replica the run has. make_replica is the only place that chooses:
//   DilocoReplica (replica.hpp)              plain DiLoCo: the whole stage, one round every H
//                                            steps, optionally all-reduced over the group's
//                                            communicator
//   StreamingReplica (streaming_replica.hpp) Streaming DiLoCo: fragments, overlapped rounds,
//                                            quantized exchanges, eager steps
// (Streaming DiLoCo with P = 1, τ = 0 and no quantization is plain DiLoCo bit for bit; the
// plain replica stays its own class because only it shares a communicator with the group.)
#pragma once

#include <caf/all.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "actors/common/context.hpp"
#include "messages/frame.hpp"
#include "messages/types.hpp"
#include "model/checkpoint.hpp"
#include "model/stage_model.hpp"
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
// failed (an all-reduce, an answer that never came, a refused round).
struct ReplicaStats {
  uint64_t reduces = 0, fallbacks = 0, failures = 0;
};

class WorkerReplica {
 public:
  using Self = caf::event_based_actor;
  // Loads a state handed out by the group (after a round refused as "already applied").
  using Reload = std::function<void(const messages::WorkerState&)>;

  virtual ~WorkerReplica() = default;

  // The setup, and θ(t−1) from the module's parameters now (a fresh start).
  virtual void configure(ReplicaSetup setup, const model::StageModel& module) = 0;
  // A handed-out state: its anchor (empty: the module's parameters now) and next rounds.
  virtual void take_state(const messages::WorkerState& st, model::NamedTensors anchor) = 0;
  // This replica's part of the worker's state for a peer: anchor, round(s).
  virtual void give_state(messages::WorkerState& st) const = 0;

  // Whether a round is open: the tracker hears `applied` when it closes.
  virtual bool round_open() const = 0;
  // After the inner step of `step`: a round is due, sent or merged. True when the step is
  // held open (the replica reports it applied later); false when the worker reports it.
  virtual bool after_inner_step(Self* self, uint64_t step, model::StageModel& module) = 0;
  // A θ that arrived while micro-batches were in flight: loaded now, after the inner step.
  virtual void load_missed(model::StageModel& module) = 0;
  // A round frame from the group. `busy`: micro-batches hold autograd graphs now. False when
  // the frame was refused (counted by the worker).
  virtual bool on_round(Self* self, const messages::Frame& frame, model::StageModel& module,
                        bool busy, uint64_t step, const Reload& reload) = 0;
  // The group was restarted: contributions not yet answered go to the new one.
  virtual void on_group_replaced(Self* self, const caf::actor& group) = 0;

  // The group's communicator (plain DiLoCo only: Streaming rounds never use one).
  virtual void on_group_comm(Self*, const messages::GroupComm&) {}
  virtual void on_group_join(Self*, const messages::GroupJoin&) {}
  virtual void on_go(Self*, uint64_t /*round*/, uint64_t /*epoch*/, bool /*go*/) {}
  virtual void on_go_timer(Self*, uint64_t /*round*/, uint64_t /*epoch*/) {}

  // What the console's `info` shows: {"round": ..., and the replica's own figures}.
  virtual nlohmann::json info() const = 0;
  virtual ReplicaStats stats() const = 0;

  // θ(t−1) (of every fragment, in the module's order): the module's parameters now (a fresh
  // start), or a handed-out anchor; on the worker's device.
  void set_anchor(const model::StageModel& module);
  void set_anchor(model::NamedTensors anchor);
  const model::NamedTensors& anchor() const { return anchor_; }

 protected:
  ReplicaSetup setup_;
  model::NamedTensors anchor_;  // θ(t−1), the global parameters of the last round
  std::optional<messages::Frame> warmup_sent_;  // θ(K) to the group, unanswered
  uint64_t warmup_step_ = 0;

  // A round frame this worker sends: its tensors as `kind`, its header as control, in the
  // process's and the worker's own counts.
  void count_sent(Traffic kind, const messages::Frame& frame) const;

  // A round frame's header, or nullopt (logged) when it does not decode.
  std::optional<messages::RoundHeader> open_answer(const messages::Frame& frame,
                                                   uint32_t worker) const;
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
  // Whether θ(K) is on its way to the group (the step is held open).
  bool warmup_open() const { return warmup_sent_.has_value(); }
  // A restarted group gets θ(K) again while the step is held.
  void resend_warmup(Self* self, const caf::actor& group) const;

  // A contribution refused because its round was applied without it: this worker is behind
  // and takes the group's state again.
  void catch_up_if_behind(Self* self, const ReplicaSetup& setup, const messages::RoundHeader& h,
                          const Reload& reload) const;
};

// The replica a worker of this run has: none outside the DiLoCo modes.
std::unique_ptr<WorkerReplica> make_replica(const SwarmContext& ctx);

}  // namespace swarmrt::actors
