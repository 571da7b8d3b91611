// What a pipeline stage costs, from the model's shape alone (no tensors): the balancer's and
// the simulator's stage costs, and the bytes a peer moving to a stage downloads.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.hpp"

namespace swarmrt::model {

// Forward FLOPs per token of stage k of config.swarm.stages: 2 per weight of the block's
// matrices (GPT-2: 24 d^2; Llama: 8 d^2 + 6 d f) + 4 T d for attention per block, 2 d V for
// the head of the last stage; embeddings are lookups.
double stage_flops(const config::RunConfig& config, int64_t k);
// Parameters of stage k: ModelConfig::block_parameters() per block, the embeddings on
// stage 0, the final norm and the head on the last.
double stage_parameters(const config::RunConfig& config, int64_t k);
// Every stage's FLOPs relative to the average stage's (they average 1).
std::vector<double> stage_costs(const config::RunConfig& config);

}  // namespace swarmrt::model
