// Where workers should serve (SWARM's rebalancing; Petals' block selection for servers).
//
// A pipeline runs as fast as its slowest stage, and a stage as fast as its workers together:
// throughput wiring (wiring.hpp) gives each worker work in proportion to its speed, and
// backpressure does the same when every worker is busy. So with stage costs c_k (compute per
// sample, relative) and worker speeds s_w (samples/s at a stage of cost 1):
//
//   stage rate   R_k = sum over the workers w of stage k of s_w / c_k
//                      (with M micro-batches a step: M / the step's makespan, stage_rate)
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
//
// Links. A worker's link caps it too: at stage k it moves b_k bytes per sample (activations
// and gradients, in and out: twice as many in a middle stage as at either end), so a worker
// of measured link bandwidth l_w serves r_wk = min(s_w / c_k, l_w / b_k). A fast worker whose
// link caps it in a middle stage is fast at an end stage, and the balancer sees it only when
// it knows both figures: speed alone would call it slow everywhere. Once every stage is near
// P no single move helps such a worker (each slows the stage it leaves), so a plan also
// weighs exchanges: two workers of two stages trading places, counted as two moves. Without b
// (the live runtime's workers do not measure their links yet) or l_w, r_wk = s_w / c_k as
// above, and an exchange trades a fast worker for one at least 2x slower (a slow worker
// sharing the limiting stage with a fast one, where it adds little: see stage_rate).
//
// Measurements. A worker's speed from its first few micro-batches is provisional: used only
// by a plan that more than doubles P. A moved worker keeps its speed until it has measured
// itself at its new stage (the live balancer carries it over).
#pragma once

#include <cstdint>
#include <initializer_list>
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
  double link = 0;  // bytes/s its link carries, measured; <= 0: not measured (no cap)
  // `speed` comes from a worker's first few micro-batches: a plan counts it only when it
  // promises BalancerParams::provisional_gain (otherwise it is taken as unmeasured).
  bool provisional = false;
};

// The stages as the balancer models them. Converts from a vector of costs (no link model).
struct Stages {
  std::vector<double> cost;   // relative compute per sample
  std::vector<double> bytes;  // per sample over a worker's link; empty: links not modelled
  // Micro-batches a step (each stage does them all, then the step ends); 0: work flows
  // without steps and a stage's rate is its workers' sum.
  int64_t micro_batches = 0;
  Stages(std::vector<double> c, std::vector<double> b = {},  // NOLINT: implicit on purpose
         int64_t m = 0)
      : cost(std::move(c)), bytes(std::move(b)), micro_batches(m) {}
  Stages(std::initializer_list<double> c) : cost(c) {}
  size_t size() const { return cost.size(); }
};

// A stage's samples/s from its workers' r_wk: their sum, or with M micro-batches a step, M
// over the step's makespan when each micro-batch goes to the worker that would finish it first
// (optimal for equal tasks on workers of different speeds). A 4x slow worker beside a fast
// one adds nothing at M = 4 (the fast one does all four in the time the slow one does one)
// where the sum says 25%.
double stage_rate(const std::vector<double>& worker_rates, int64_t micro_batches);

// r_wk: samples/s of `p` serving stage k (an unmeasured speed: `mean`).
double rate_at(const Peer& p, const Stages& stages, size_t k, double mean);

struct BalancerParams {
  double min_gain = 0.05;  // a plan must raise P by more than this fraction
  int64_t min_workers = 1;
  double cooldown_s = 120;
  int64_t max_moves = 1;  // moves in one plan at most
  // A plan that needs a provisional speed must raise P by more than this (1: double it). A
  // starved worker measures slowly: in a 3 + 1 start with the lone stage-1 worker 4x slow, each
  // stage-0 worker does a third of its stage's few micro-batches and took 11 s to reach the
  // measurements the balancer trusts, while a rate from 3 of them is close enough to see a
  // fivefold imbalance; noise of that size it is not.
  double provisional_gain = 1.0;
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

// R_k for every stage; unmeasured peers count with the measured mean.
std::vector<double> stage_rates(const std::vector<Peer>& peers, const Stages& stages);
double pipeline_rate(const std::vector<Peer>& peers, const Stages& stages);
// No placement of these peers beats it (bound.hpp; sum s / sum c without links).
double optimal_bound(const std::vector<Peer>& peers, const Stages& stages);

// The plan for this period: at most params.max_moves moves, in order, each the best single
// move after the ones before it (ties: the lowest worker id, then the lowest stage); empty
// unless together they raise P by more than params.min_gain (any P > 0 when a stage has none).
// Provisional speeds count as unmeasured, unless no plan comes without them and one with them
// raises P by more than params.provisional_gain.
std::vector<Move> plan_moves(const std::vector<Peer>& peers, const Stages& stages,
                             const BalancerParams& params, double now);

// The first move of a plan of one.
std::optional<Move> best_move(const std::vector<Peer>& peers, const Stages& stages,
                              BalancerParams params, double now);

// The stage a newcomer of `speed` (<= 0: unknown, the measured mean) and `link` (<= 0:
// unknown) should serve: where P becomes largest; ties: the stage with the lowest rate, then
// the lowest index.
uint32_t place(const std::vector<Peer>& peers, const Stages& stages, double speed, double link = 0);

// The peers a newcomer is placed among, from the last period's measurements (`measured`) and
// who serves now (`serving`: worker id and stage): each measured worker that still serves, at
// the stage it serves now, and each one not measured yet (speed 0: the mean). The period's
// snapshot alone still counts a worker whose node has gone since: the node that comes back a
// moment later was then placed as if its old worker still served, beside it in the other
// stage, and the pipeline ran short of its first stage until the next move.
std::vector<Peer> serving_peers(const std::vector<Peer>& measured,
                                const std::vector<std::pair<uint32_t, uint32_t>>& serving);

// Without a balancer (the directory's rule): the stage with the fewest workers, lowest first.
uint32_t place_fewest(const std::vector<Peer>& peers, size_t stages);

// The stages of newcomers `placed` (one each), changed so that a stage with no worker
// (`assigned`: workers per stage before them) takes one first, as long as a newcomer can be
// spared: one from a stage that keeps a worker without it, the latest such newcomer first.
std::vector<uint32_t> fill_empty_stages(std::vector<uint32_t> placed,
                                        const std::vector<uint32_t>& assigned);

}  // namespace swarmrt::policy
