// What the DiLoCo group's files share: its state and behaviour (diloco_group.cpp), its round
// arithmetic and encoding (group_round.cpp) and its communicator (group_comm.cpp).
#pragma once

#include <string>
#include <vector>

#include "actors/common/tensor_list.hpp"
#include "actors/diloco/diloco_group.hpp"
#include "policy/round_quorum.hpp"
#include "transport/bulk.hpp"

namespace swarmrt::actors::group {

using Self = caf::stateful_actor<group_state>;

// group_round.cpp
// Fragment p's tensors of `all` (the stage's θ or momentum), in θ's order.
model::NamedTensors slice(const model::NamedTensors& all, const std::vector<size_t>& index);
// Fragment `index`'s error feedback from the store's (by name), in θ's order: all of its
// tensors, or none when the store lacks any (a fragment's answers carry all or nothing).
model::NamedTensors residual_of(const model::NamedTensors& stored, const std::vector<size_t>& index,
                                const std::vector<std::string>& names);
// The whole stage's θ (or outer momentum), assembled from its fragments.
model::NamedTensors whole(const group_state& s, bool momentum);
// θ and the outer momentum of every fragment into the store (the caller holds its lock).
void store_theta(group_state& s);
// The store as of `step` into the journal, when the run keeps one (the caller holds its lock);
// a write that fails leaves no entry of the stage: a takeover then resumes from a checkpoint.
void journal_store(group_state& s, uint64_t step);
// Every applied fragment's θ as an `applied` round frame, for a worker new to the stage.
void send_theta(Self* self, const caf::actor& to);
// The run's quorum rule (diloco.min_replicas).
policy::RoundQuorum quorum(const group_state& s);
// Applies fragment p's round once every member has contributed or been refused in it (and at
// least one contributed); true when it did.
bool maybe_apply(Self* self, uint32_t p);
// Steps fragment p's θ with the round's contributions and answers every member.
void apply_round(Self* self, uint32_t p);

// group_comm.cpp
// A worker of the communicator is at `round`: the all-reduce goes ahead once every worker of
// the current communicator is, else the round is reported per worker.
void on_ready(Self* self, uint64_t round, uint64_t epoch, bool usable, const caf::actor& from);
// Tells every member which communicator the group uses from now on (none: its own frames).
void announce_comm(Self* self);

}  // namespace swarmrt::actors::group
