// Worker ids: stage k, replica r -> k * 1000 + r. Every process names a worker the same way
// (the console's "stage1/worker2", the directory's assignments, the balancer's moves).
#pragma once

#include <cstdint>

namespace swarmrt::actors {

inline uint32_t worker_id(int64_t stage, int64_t replica) {
  return static_cast<uint32_t>(stage * 1000 + replica);
}

}  // namespace swarmrt::actors
