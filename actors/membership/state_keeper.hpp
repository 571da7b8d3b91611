// What a node keeps of its workers when the coordinator's link is lost (keeps_states): each
// stage's state (parameters, AdamW moments; in DiLoCo also the anchor θ and the next round) at
// the last step its workers applied, one per (stage, step). Its next join names them; a coordinator
// that took over from the lost leader continues the run from them when they cover every stage at
// the step the lost leader closed last, so no step is run again (docs/faults.md). The keeper actor
// hands a state to the coordinator the node joined, and to no other process.
#pragma once

#include <caf/all.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "actors/common/context.hpp"
#include "messages/types.hpp"

namespace swarmrt::actors {

// Whether the nodes of a run keep their workers' states for a takeover: in the grad-sync modes,
// and in plain DiLoCo, whose group's journal holds all a group needs (actors/diloco/
// group_journal.hpp). Streaming DiLoCo's overlapped rounds, error feedback and eager means are
// in flight or in the group only: those runs resume from a checkpoint.
bool keeps_states(const SwarmContext& ctx);

class KeptStates {
 public:
  // Keeps `st` (its step says which) unless a state of that stage and step is kept already;
  // the bytes it keeps (0: it had one). `each_worker` (DiLoCo, whose replicas differ): every
  // worker's state is kept, several per stage and step.
  size_t keep(uint32_t stage, messages::WorkerState st, bool each_worker = false);
  // Names the kept states in a join: the keeper, and each state's stage and step (a pair
  // named as often as states of it are kept).
  void name_in(messages::JoinRequest& request, const caf::actor& keeper) const;
  // The first state of (stage, step).
  std::optional<messages::WorkerState> find(uint32_t stage, int64_t step) const;
  // The states of (stage, step) in turn: each call the next one (what the keeper hands out, so
  // that DiLoCo workers that ask for their stage's get one each).
  std::optional<messages::WorkerState> next(uint32_t stage, int64_t step);
  // Drops every state (the coordinator took them, or did not need them); how many there were.
  size_t clear();
  // The coordinator's process served from now on (the node is about to join it).
  void serve(const caf::node_id& coordinator);
  bool serves(const caf::node_id& sender) const;

 private:
  struct Kept {
    uint32_t stage = 0;
    messages::WorkerState state;
  };
  mutable std::mutex mu_;
  std::vector<Kept> kept_;
  std::map<std::pair<uint32_t, int64_t>, size_t> turn_;  // next() of each (stage, step)
  caf::node_id coordinator_;
};
using KeptStatesPtr = std::shared_ptr<KeptStates>;

caf::behavior state_keeper(caf::event_based_actor* self, KeptStatesPtr kept);

}  // namespace swarmrt::actors
