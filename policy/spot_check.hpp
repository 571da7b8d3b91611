// Spot checks of stage work (docs/security.md): which stages' work on which micro-batches of a
// step is done again, by whom, and what the answers mean. The tracker draws them once the
// step's micro-batches are all back, from a seed the workers are not given, so no worker can
// tell while it computes whether this micro-batch will be checked.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace swarmrt::policy {

// Whether stage `stage`'s work on micro-batch `micro_batch` of `step` is checked: a draw of
// probability `fraction`, the same for the same arguments on every machine.
bool spot_checked(uint64_t seed, uint64_t step, uint32_t micro_batch, uint32_t stage,
                  double fraction);

// A worker of `stage_workers` that is not in `exclude`, drawn from `key`; none when none is
// left. The checked worker never checks itself, and a settlement takes a third worker.
std::optional<uint32_t> pick_verifier(const std::vector<uint32_t>& stage_workers,
                                      const std::vector<uint32_t>& exclude, uint64_t key);

// What a check's answers mean. A verifier recomputes the checked worker's output from the same
// input; where the two differ, nobody can tell yet which one computed wrong, so a third worker
// recomputes it: agreeing with the checked worker, it finds the first verifier wrong, else (two
// workers against one) the checked worker. With no third worker the mismatch stays unsettled
// and nobody is banned: a single accuser never bans.
enum class CheckVerdict { agreed, settle, unsettled, checked_wrong, verifier_wrong };
CheckVerdict after_verifier(bool agrees, bool third_available);
CheckVerdict after_third(bool agrees_with_checked);
const char* verdict_name(CheckVerdict v);

// The run's checks so far, by outcome (the step records, `ctl info tracker`, /metrics).
struct SpotCheckTally {
  uint64_t checks = 0;      // checks started
  uint64_t agreed = 0;      // the verifier's output matched
  uint64_t mismatches = 0;  // it did not (each then settled, unsettled or expired)
  uint64_t unsettled = 0;   // a mismatch with no third worker to settle it
  uint64_t expired = 0;     // an answer did not come in time (a worker lost, a hop dropped)
  uint64_t bans = 0;        // workers found wrong
};

}  // namespace swarmrt::policy
