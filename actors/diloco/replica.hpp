// The replica side of DiLoCo (architecture §6), one per stage worker in DiLoCo modes: it keeps
// θ(t−1) (the anchor) and the next round id, and after every H-th inner step sends the
// pseudo-gradient Δ_i = θ(t−1) − θ_i to the stage's DiLoCo group, then takes θ(t) when the
// group answers. The worker owns the module and the inner optimizer; this unit owns
// everything about rounds (as torchft keeps local_sgd apart from its manager), so fragments
// and overlapped rounds change this file and not the worker.
//
// Where the group announces a communicator (NCCL between CUDA workers, TCP with
// transport.links = "comm"), a round's pseudo-gradient waits until the group says every
// worker of the communicator is at the round (group_go_atom), is all-reduced among them, and
// only the first sends the mean. Without an answer in transport.comm_timeout_s, or when the
// all-reduce fails, the replica sends its own.
//
// Faults: the contribution sent and not yet answered is kept and sent again to a restarted
// group (which continues from its last applied round, so the round is applied once). θ of a
// round applied without this replica (it joined or restarted meanwhile) is loaded once no
// micro-batch holds an autograd graph over the current parameters.
#pragma once

#include <caf/all.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/diloco/worker_replica.hpp"
#include "messages/frame.hpp"
#include "model/checkpoint.hpp"
#include "model/stage_model.hpp"
#include "transport/comm.hpp"

namespace swarmrt::actors {

class DilocoReplica : public WorkerReplica {
 public:
  void configure(ReplicaSetup setup, const model::StageModel& module) override {
    setup_ = std::move(setup);
    set_anchor(module);
  }
  void take_state(const messages::WorkerState& st, model::NamedTensors anchor) override;
  void give_state(messages::WorkerState& st) const override;
  uint64_t round() const { return round_; }

  // Whether this replica's round is open: the tracker hears `applied` when it closes.
  bool round_open() const override {
    return pending_.has_value() || awaiting_go_.has_value() || warmup_open();
  }

  // After the inner step of `step`: a round is due every H steps and at the last step.
  // False when none is due (the worker reports the step applied itself).
  bool after_inner_step(Self* self, uint64_t step, model::StageModel& module) override;
  // A θ that arrived while micro-batches were in flight: loaded now, after the inner step.
  void load_missed(model::StageModel& module) override;

  // A round frame from the group. `busy`: micro-batches hold autograd graphs now. False when
  // the frame was refused (counted by the worker).
  bool on_round(Self* self, const messages::Frame& frame, model::StageModel& module, bool busy,
                uint64_t step, const Reload& reload) override;

  // The group's communicator from `epoch` on (group_comm_atom), or the id to join it by.
  void on_group_comm(Self* self, const messages::GroupComm& c) override;
  void on_group_join(Self* self, const messages::GroupJoin& j) override;
  // The group's answer for a held round (all-reduce or not), or its timer.
  void on_go(Self* self, uint64_t round, uint64_t epoch, bool go) override;
  void on_go_timer(Self* self, uint64_t round, uint64_t epoch) override;
  // The group was restarted: the held round goes alone, an unanswered one again.
  void on_group_replaced(Self* self, const caf::actor& group) override;

  nlohmann::json info() const override { return {{"round", round_}}; }
  ReplicaStats stats() const override { return {reduces_, fallbacks_, failures_}; }

 private:
  struct AwaitingGo {
    uint64_t round = 0, epoch = 0, step = 0;
    model::NamedTensors delta;
  };

  void load_global(model::StageModel& module, const messages::Frame& f,
                   const messages::RoundHeader& h);
  bool group_mean(model::NamedTensors& delta);
  void send_round(Self* self, uint64_t step, model::NamedTensors delta, bool reduce);
  void release_round(Self* self, bool reduce);

  uint64_t round_ = 0;  // the next round id
  // The contribution sent and not yet answered; sent again to a restarted group.
  std::optional<messages::Frame> pending_;
  // θ of a round applied without this replica, loaded after the next inner step.
  std::optional<messages::Frame> missed_;
  // The communicator shared with the group's other workers, the epoch the group announced it
  // in, its backend (empty: none) and the workers in it by rank.
  std::unique_ptr<transport::Comm> comm_;
  uint64_t epoch_ = 0;
  std::string backend_;
  std::vector<uint32_t> ids_;
  // A round's pseudo-gradient held while the group decides whether every worker of the
  // communicator is at the round.
  std::optional<AwaitingGo> awaiting_go_;
  uint64_t reduces_ = 0;    // rounds all-reduced over the communicator
  uint64_t fallbacks_ = 0;  // rounds sent alone although the group had a communicator
  uint64_t failures_ = 0;   // all-reduces that failed, and answers that never came
};

}  // namespace swarmrt::actors
