#include "policy/goodput.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace swarmrt::policy {

double sync_goodput(std::vector<double> failure_times, double duration_s, const SyncBaseline& b) {
  if (!(duration_s > 0) || !(b.checkpoint_s > 0) || !(b.restart_s >= 0))
    throw std::invalid_argument(
        "sync_goodput: the duration and checkpoint period must be > 0, the restart >= 0");
  std::sort(failure_times.begin(), failure_times.end());
  double progress = 0;  // seconds of work kept
  double up_at = 0;     // when the job runs again
  for (const double f : failure_times) {
    if (f >= duration_s) break;
    if (f >= up_at) {
      // Work since the last checkpoint is lost.
      progress = std::floor((progress + (f - up_at)) / b.checkpoint_s) * b.checkpoint_s;
    }
    up_at = f + b.restart_s;
  }
  if (up_at < duration_s) progress += duration_s - up_at;
  return progress / duration_s;
}

}  // namespace swarmrt::policy
