// Who receives the next micro-batch among the workers of one stage (architecture §5).
//
// throughput (SWARM): a priority queue of (accumulated expected time, random tie-break,
// worker). The minimum is chosen and its key grows by samples / ema_throughput(worker), so a
// worker twice as fast receives twice the work. An unmeasured worker costs as much as the
// measured ones' mean throughput implies (1.0 s per sample while none is measured); a worker
// that joins enters at the current minimum key, so it is neither flooded nor starved.
// uniform: a uniformly random worker (the DiLoCo-SWARM baseline).
// Both respect max_inflight per worker (backpressure) and skip excluded (failed) workers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "policy/throughput.hpp"

namespace swarmrt::policy {

// swarm.wiring: SWARM's throughput-proportional choice, or a uniformly random one.
enum class WiringPolicy { throughput, uniform };

// A micro-batch's identity as a wiring key (Wiring::choose).
inline uint64_t route_key(uint64_t step, uint32_t micro_batch, uint32_t attempt) {
  return (step << 32) ^ (static_cast<uint64_t>(micro_batch) << 16) ^ attempt;
}

class Wiring {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Wiring(WiringPolicy policy = WiringPolicy::throughput, uint64_t seed = 0,
                  int max_inflight = 4);

  // What a completion's measured duration is taken as: by default the duration itself. A test
  // of the policy inside a whole run injects its own (a worker's cost per sample), so routing
  // does not depend on how busy the machine happens to be.
  using Measure = std::function<double(uint32_t id, double samples, double seconds)>;
  void set_measure(Measure measure) { measure_ = std::move(measure); }

  // Replaces the set of candidate workers; known workers keep their statistics.
  void set_members(const std::vector<uint32_t>& ids);
  const std::vector<uint32_t>& members() const { return ids_; }

  // Picks a worker for a task of `samples` and counts it in flight; nullopt when every
  // candidate is at max_inflight (the caller queues the task) or none is left. A `pinned`
  // candidate is the only choice while it is a member (nullopt while it is at max_inflight).
  // With uniform wiring, a `key` (the task's identity: step, micro-batch, attempt) makes the
  // pick a function of the seed, the key and the open candidates alone, not of the order tasks
  // come in (which follows the machine's timing); without one the seeded draws go in order.
  std::optional<uint32_t> choose(double samples, std::optional<uint32_t> pinned = std::nullopt,
                                 std::optional<uint64_t> key = std::nullopt);

  // A task sent to `id` at `sent` finished now. The time charged is measured from when the
  // worker could start on it (the later of `sent` and its previous completion), so queueing
  // behind its own earlier tasks is not mistaken for slowness.
  void completed(uint32_t id, double samples, Clock::time_point sent, Clock::time_point now);
  void completed(uint32_t id, double samples, double seconds);  // with a measured duration
  void release(uint32_t id);  // the task is gone without a measurement (dropped, failed)

  void exclude(uint32_t id);  // failed: no more work until set_members brings it back

  int inflight(uint32_t id) const;
  // Bias-corrected EMA of samples/s (alpha 0.1); nullopt while unmeasured.
  std::optional<double> throughput(uint32_t id) const;

 private:
  struct Stats {
    double key = 0;
    ThroughputEma rate;
    int inflight = 0;
    double tie = 0;
    Clock::time_point last_done{};
  };
  double min_key() const;
  double expected_seconds(uint32_t id, double samples) const;  // what `samples` add to its key

  WiringPolicy policy_;
  std::mt19937_64 rng_;
  uint64_t seed_ = 0;
  int max_inflight_;
  std::vector<uint32_t> ids_;
  std::map<uint32_t, Stats> stats_;
  Measure measure_;
};

}  // namespace swarmrt::policy
