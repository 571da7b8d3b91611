// Where workers should serve (SWARM's rebalancing; Petals' block selection for servers).
//
// A pipeline runs as fast as its slowest stage, and a stage as fast as its workers together:
// throughput wiring (wiring.hpp) gives each worker work in proportion to its speed, and
// backpressure does the same when every worker is busy. So with stage costs c_k (compute per
// sample, relative) and worker speeds s_w (samples/s at a stage of cost 1):
//
//   stage rate   R_k = sum over the workers w of stage k of s_w / c_k
//   pipeline     P   = min_k R_k
//   bound        P*  = sum_w s_w / sum_k c_k   (every stage equally fast: no placement beats it)
//
// Each period the balancer plans moves one at a time: each is the move that raises the slowest
// stages most (P first; on a tie the second-slowest stage, then the third, so that two stages
// equally slow are raised one after the other), never leaves a stage with fewer than
// min_workers, and never moves a worker again within cooldown_s. It makes the plan (at most
// max_moves moves) when together they raise P by more than min_gain: one move in a swarm of
// 1000 peers changes P by a fraction of a percent, a plan of a few changes it measurably. A
// newcomer goes where it raises P the most. Pure functions: the live balancer actor and
// `swarmrt simulate` call the same ones.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace swarmrt::policy {

struct Peer {
  uint32_t id = 0;
  uint32_t stage = 0;
  // Samples/s at a stage of cost 1 (its measured rate at its stage times that stage's cost);
  // <= 0: not measured yet (it counts with the mean of the measured ones and is not moved).
  double speed = 0;
  double moved_at = -std::numeric_limits<double>::infinity();  // balancer clock, seconds
};

struct BalancerParams {
  double min_gain = 0.05;  // a plan must raise P by more than this fraction
  int64_t min_workers = 1;
  double cooldown_s = 120;
  int64_t max_moves = 1;  // moves in one plan at most
};

struct Move {
  uint32_t worker = 0;
  uint32_t from = 0;
  uint32_t to = 0;
  double before = 0;  // P before this move, samples/s
  double after = 0;   // P once the worker serves `to`
  double gain = 0;    // after / before - 1 of the plan it belongs to; infinite when a stage
                      // had no worker
  std::string reason;
};

// R_k for every stage (cost.size() stages); unmeasured peers count with the measured mean.
std::vector<double> stage_rates(const std::vector<Peer>& peers, const std::vector<double>& cost);
double pipeline_rate(const std::vector<Peer>& peers, const std::vector<double>& cost);
double optimal_bound(const std::vector<Peer>& peers, const std::vector<double>& cost);

// The plan for this period: at most params.max_moves moves, in order, each the best single
// move after the ones before it (ties: the lowest worker id, then the lowest stage); empty
// unless together they raise P by more than params.min_gain (any P > 0 when a stage has none).
std::vector<Move> plan_moves(const std::vector<Peer>& peers, const std::vector<double>& cost,
                             const BalancerParams& params, double now);

// The first move of a plan of one.
std::optional<Move> best_move(const std::vector<Peer>& peers, const std::vector<double>& cost,
                              BalancerParams params, double now);

// The stage a newcomer of `speed` (<= 0: unknown, the measured mean) should serve: where P
// becomes largest; ties: the stage with the lowest rate, then the lowest index.
uint32_t place(const std::vector<Peer>& peers, const std::vector<double>& cost, double speed);

// Without a balancer (the directory's rule): the stage with the fewest workers, lowest first.
uint32_t place_fewest(const std::vector<Peer>& peers, size_t stages);

}  // namespace swarmrt::policy
