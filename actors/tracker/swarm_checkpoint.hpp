// Checkpoints of a swarm (every mode but single): the whole model under its parameter names
// (so `swarmrt sample` reads it like any checkpoint), and the state to continue from under
// "state/": every worker's parameters, DiLoCo anchor, AdamW state and round, and every DiLoCo
// group's θ, outer momentum and last applied round. Data positions are a function of the step
// (see data_loader), so the step is all the loaders need.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "actors/diloco/diloco_group.hpp"
#include "config/config.hpp"
#include "messages/types.hpp"
#include "model/checkpoint.hpp"

namespace swarmrt::actors {

struct SavedWorker {
  uint32_t id = 0;
  uint32_t stage = 0;
  messages::WorkerState state;
};

model::Checkpoint make_swarm_checkpoint(const config::RunConfig& config, uint64_t step,
                                        const std::vector<SavedWorker>& workers,
                                        const std::vector<GroupStorePtr>& groups);

// Throws model::CheckpointError when `ckpt` cannot be resumed from: no or incomplete swarm
// state, or optimizer state that does not deserialize (CheckpointDir::newest_valid's check).
void check_swarm_checkpoint(const std::string& origin, const model::Checkpoint& ckpt);

// The step a swarm checkpoint was written after; throws CheckpointError naming `origin` for a
// checkpoint without swarm state (a single-mode run).
uint64_t swarm_checkpoint_step(const model::Checkpoint& ckpt, const std::string& origin);

// Worker `id`'s saved state; a worker the checkpoint does not know (the swarm changed shape)
// gets the first saved worker of its stage. Empty when the stage has none.
std::optional<messages::WorkerState> saved_worker_state(const model::Checkpoint& ckpt,
                                                        const std::string& origin, uint32_t id,
                                                        uint32_t stage);

// Fills `store` with group `stage`'s saved θ, momentum and last applied round; false when the
// checkpoint holds none for it.
bool restore_group(const model::Checkpoint& ckpt, uint32_t stage, GroupStore& store);

}  // namespace swarmrt::actors
