// A swarm of many peers in simulated time (`swarmrt simulate`): the placement decisions of the
// live runtime (balancer.hpp: plan_moves, place, place_fewest) on a model of everything else.
//
// The model. Peer w has a compute speed s_w (samples/s at a stage of cost 1, log-uniform over
// [min_rate, min_rate x speed_spread]) and a link. At stage k it processes
//   r_w = min(s_w / c_k,                          compute
//             link_bytes_per_s / (hops_k x sample_bytes),   its link: activations and
//                                                            gradients in and out
//             max_inflight x microbatch / (2 x latency + microbatch x c_k / s_w))   round trips
// samples/s; a stage's rate is the sum over its workers (throughput wiring) and the pipeline's
// the slowest stage's, as balancer.hpp has it. Between two events every rate is constant, so
// the samples done are rate x time exactly (a fluid model: no micro-batch is simulated one by
// one, which is what lets 10,000 peers run an hour in seconds). Events: failures (each peer at
// failures_per_hour, a Poisson clock of its own), recoveries (after an exponential time of
// mean recovery_s), joins, balancer periods (jittered) and the end of a move. A peer that
// joins, recovers or moves first downloads its stage's state (state_bytes, from up to `donors`
// serving peers of that stage at once: transfer_seconds) and does no work meanwhile. With DiLoCo
// (inner_steps H > 0) every H steps the pipeline waits for the slowest stage's round: a ring
// all-reduce of round_bytes, 2 x bytes over the link plus 2(n-1) latencies.
//
// The balancer sees each serving peer's compute speed and link bandwidth, as measured (off by
// `noise`), and models a stage's link bytes per sample as 2 or 4 x sample_bytes (balancer.hpp).
//
// The same churn (same seed) runs once with the balancer and once without (newcomers to the
// stage with the fewest workers, no moves: the directory's rule); each is compared with the
// optimal placement's throughput over the peers alive at the time, rounds included: bound.hpp's
// upper bound, with prices computed from the peers at the start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/balancer.hpp"

namespace swarmrt::policy {

struct SimParams {
  std::vector<double> cost;  // per stage, relative compute per sample
  int64_t peers = 1000;
  double duration_s = 3600;
  std::vector<double> speeds;    // explicit speeds, one per peer; empty: drawn
  double min_rate = 10;          // samples/s of the slowest peer at cost 1
  double speed_spread = 10;      // fastest / slowest
  double failures_per_hour = 0;  // per peer
  double recovery_s = 0;         // mean time to come back; 0: a failed peer stays away
  double joins_per_hour = 0;     // new peers per hour, as a fraction of `peers`
  double link_bytes_per_s = 0;   // every peer's link; 0: unlimited
  double latency_s = 0;
  double sample_bytes = 0;  // one sample's activations at a stage boundary
  int64_t max_inflight = 4;
  double microbatch = 16;           // samples per micro-batch
  std::vector<double> state_bytes;  // per stage: what a moving/joining peer downloads
  // It downloads from up to `donors` serving peers of its stage at once, each sparing
  // donor_share of its link; its own link caps the sum (transfer_seconds).
  int64_t donors = 1;
  double donor_share = 1;
  int64_t inner_steps = 0;          // DiLoCo H; 0: no rounds
  double step_samples = 0;          // samples per step (the whole pipeline)
  std::vector<double> round_bytes;  // per stage: one round's pseudo-gradient
  bool balancer = true;
  BalancerParams balance;
  double period_s = 30;
  double jitter = 0.2;   // a period lasts period_s x (1 + jitter x U(-1, 1))
  double noise = 0;      // a measured rate is off by noise x N(0, 1) (relative)
  double sample_s = 60;  // one time-series point per this many seconds
  uint64_t seed = 1;
};

struct SimPoint {
  double t = 0;
  int64_t alive = 0;  // peers serving or downloading
  double rate = 0;    // pipeline samples/s at t
  double bound = 0;   // the optimal placement's, same peers
  double window = 0;  // samples done since the previous point / bound's samples: a fraction
};

struct SimMove {
  double t = 0;
  Move move;
};

struct SimResult {
  std::vector<SimPoint> points;
  std::vector<SimMove> moves;
  double samples = 0;        // samples the pipeline completed
  double bound_samples = 0;  // the optimal placement's, same peers and times
  int64_t failures = 0, recoveries = 0, joins = 0;
  std::vector<double> failure_times;  // when each failure happened (for the baselines)
  int64_t events = 0;
  double fraction() const { return bound_samples > 0 ? samples / bound_samples : 0; }
};

// Seconds to download `bytes` of state from min(donors, holders) serving peers (at least one:
// with no holder the state comes from wherever the stage's last copy is), each sparing
// donor_share of a `link_bytes_per_s` link, the receiver's own link capping the sum; 0 where
// links are unlimited.
double transfer_seconds(double bytes, double link_bytes_per_s, int64_t donors, double donor_share,
                        int64_t holders);

// Runs one simulation; throws std::invalid_argument naming a bad parameter.
SimResult simulate(const SimParams& params);

}  // namespace swarmrt::policy
