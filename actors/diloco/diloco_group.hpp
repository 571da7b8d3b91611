// One DiLoCo group per stage: owns the stage's global parameters θ and the outer Nesterov
// state, collects the workers' pseudo-gradients for round t, applies the round once a quorum
// has reported (all members, or min_replicas when round_timeout_s has passed) and sends θ(t)
// to every worker of the stage, including those that missed the round.
//
// Where the members can share a communicator (NCCL between CUDA workers, TCP with
// transport.links = "comm"; whole-stage float32 rounds only, diloco.whole_rounds()), the group
// announces one to them whenever its membership changes (group_comm_atom, to every member, with an
// epoch that only grows): its first member creates it and sends the others its id
// (group_join_atom). At a round each member tells the group it is there (group_ready_atom); once
// every worker of the communicator is, the group tells them to all-reduce (group_go_atom), and they
// do and the first sends the mean once, naming every worker in it; the group counts it for each of
// them. A member that cannot take part, one that speaks of an older communicator, or a membership
// change before all are there makes the group tell them all to send their own, as without: an
// all-reduce starts only when every rank is known to be at it, so none waits on a worker that will
// not come.
//
// Streaming DiLoCo (diloco.fragments, overlap_steps, quantize): the stage's θ is split into
// fragments (model/fragments.hpp), each with its own rounds, outer momentum and quorum, so
// the rounds of different fragments are collected side by side. Contributions arrive in
// diloco.quantize's encoding and are decoded to float32 before they are averaged; θ and the
// momentum stay float32. With an encoding other than none the group answers with the
// fragment's update θ(t) − θ(t−1) in that encoding and moves its own θ by exactly the decoded
// update, so every worker that applies it to θ(t−1) holds θ(t) bit for bit (its own error is
// carried to the next update with diloco.error_feedback). A member new to the stage gets θ
// itself. Such rounds never use the group communicator: each worker reports its own. The
// arithmetic of every kind of round is model/outer_round.hpp's; this actor collects and answers.
//
// Eager (diloco.eager): each worker steps its own outer optimizer with its Δ̃_i, and the group
// answers with the mean Δ̄. The group steps θ with the mean of the contributors' Δ̃_i, which it
// computes as they did; the outer step is linear, so θ stays the mean of the workers' θ (all
// of them in every round) and the last step's exact outer step starts from where the workers
// are. Stepping θ with Δ̄ instead drifts from the workers by rounds of Nesterov momentum.
#pragma once

#include <caf/all.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/common/context.hpp"
#include "messages/frame.hpp"
#include "model/outer_round.hpp"
#include "transport/transport.hpp"

namespace swarmrt::actors {

// What outlives a group actor: θ, the outer momentum and the last applied round of every
// fragment, written after every applied round. A restarted group continues from it, so a
// round is neither applied twice nor lost; checkpoints read it.
struct GroupStore {
  std::mutex mu;
  model::NamedTensors theta, momentum;  // the whole stage; empty until a round is applied
  // The encoded answers' error feedback (model::OuterRound::residual), of the fragments that
  // carry one, by name; empty: none.
  model::NamedTensors residual;
  int64_t last_applied = -1;             // fragment 0's (the whole stage without fragments)
  std::vector<uint64_t> applied_rounds;  // fragment 0's rounds, in order
  // Streaming DiLoCo: every fragment's last applied round and its rounds, in order.
  std::vector<int64_t> fragment_applied;
  std::vector<std::vector<uint64_t>> fragment_rounds;
  uint64_t comm_epoch = 0;  // the newest group communicator announced
  bool warmed = false;      // θ took the workers' θ at the synchronous warm-up's end
  // Where each applied round is also written before it is answered (group_journal.hpp), for a
  // standby that takes over; empty: nowhere (a coordinator without replicas). Its bytes so far.
  std::string journal;
  uint64_t journal_bytes = 0;
};
using GroupStorePtr = std::shared_ptr<GroupStore>;

// One fragment's outer rounds (the whole stage without Streaming DiLoCo).
struct FragmentRounds {
  std::vector<size_t> index;                 // its tensors' positions in the stage's θ
  std::unique_ptr<model::OuterRound> outer;  // θ, outer momentum and the round arithmetic
  uint64_t round = 0;                        // the round being collected
  int64_t last_applied = -1;                 // never applied twice
  std::map<uint32_t, model::NamedTensors> contributions;
  std::map<uint32_t, std::vector<at::Tensor>> wires;  // diloco.all_gather: each as it came
  std::set<uint32_t> excused;  // refused in this round (non-finite): it goes on without them
  bool timer_armed = false;
  bool final = false;  // a contribution of the run's last step: answer with θ(t)
  uint64_t step = 0;   // the step the round started after: its outer learning rate
  // swarm.compression = auto: the sparsest top-k density a contribution of the round came in,
  // the answer's (0: none yet, or the run's one density).
  double density = 0;
  // ... under diloco.all_gather: the least density the round's contributors' links carry, the
  // cap its gathered answers tell (0: none told).
  double carried = 0;
  uint64_t bytes = 0;  // its answers' payload, to every member
};

struct group_state {
  ContextPtr ctx;
  uint32_t stage = 0;
  GroupStorePtr store;
  std::vector<std::string> names;  // θ's tensor names, in the stage's order
  std::vector<FragmentRounds> fragments;
  std::map<uint32_t, caf::actor> members;
  std::map<uint32_t, std::string> devices;  // each member's device
  std::string comm_backend;                 // of the communicator announced last; empty: none
  uint64_t comm_epoch = 0;                  // its epoch
  std::vector<caf::actor> comm_members;     // its workers, by rank
  // Workers of the communicator at round `ready_round`; a round refused for the epoch stays
  // refused (every worker of it sends its own).
  std::vector<caf::actor> ready;
  uint64_t ready_round = 0;
  std::optional<uint64_t> refused_round;
  caf::actor metrics;  // `rejected` events go here when the run has a metrics log
  uint64_t rejected = 0;
  uint64_t refused_chunks = 0;
  transport::ChunkReceiver chunks;  // contributions from other processes
  bool warmed = false;  // θ is the workers' θ at the warm-up's end (diloco.warmup_sync_steps)
  static inline const char* name = "diloco_group";
};

// `theta` is the stage's initial global parameters; a store that holds a round (a restart,
// a resumed run) takes precedence.
caf::behavior diloco_group(caf::stateful_actor<group_state>* self, ContextPtr ctx, uint32_t stage,
                           model::NamedTensors theta, GroupStorePtr store, caf::actor metrics);

}  // namespace swarmrt::actors
