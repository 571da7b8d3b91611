// Goodput against a synchronous baseline (`swarmrt simulate`): what a job that keeps every peer
// in lockstep, with no fault tolerance (data-parallel training's default), keeps of the same
// failures. Any peer's failure stops it; it restarts from its last checkpoint after restart_s,
// and a failure during a restart starts the restart again (the collective needs everyone).
// Checkpoints fall every checkpoint_s seconds of progress and cost nothing here (a bound in the
// baseline's favour).
#pragma once

#include <vector>

namespace swarmrt::policy {

struct SyncBaseline {
  double checkpoint_s = 600;
  double restart_s = 120;
};

// Seconds of progress kept ÷ duration_s, for failures at `failure_times` (any order).
double sync_goodput(std::vector<double> failure_times, double duration_s, const SyncBaseline& b);

}  // namespace swarmrt::policy
