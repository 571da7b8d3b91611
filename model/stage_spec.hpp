// Which part of the model a stage holds (SWARM's pipeline stage), without any tensor: the
// stage cost model, the balancer and the simulator use it as the modules do.
#pragma once

#include <cstdint>
#include <utility>

namespace swarmrt::model {

// Stage `index` of `count`. The whole model is stage 0 of 1.
struct StageSpec {
  int64_t index = 0;
  int64_t count = 1;
  bool first() const { return index == 0; }
  bool last() const { return index == count - 1; }
};

// Layers [begin, end) of stage `stage.index`: contiguous, sizes differing by at most one,
// earlier stages take the extra layers (stage 0 also carries the embeddings, the last stage
// the head, so this keeps the ends from being the slowest). Throws std::invalid_argument for a
// stage count outside [1, n_layer] or an index outside [0, count).
std::pair<int64_t, int64_t> stage_layers(int64_t n_layer, StageSpec stage);

}  // namespace swarmrt::model
