// The balancer (SWARM's rebalancing): one per swarm, beside the step tracker. Every
// balancer.period_s (jittered) it asks the tracker who serves, asks each worker its measured
// compute rate (samples/s of its forward and backward passes), plans moves with the policy
// library's plan_moves (the code `swarmrt simulate` runs) and has each moved worker's host
// retire it and start a worker of a new id on the stage it moves to. The new worker takes that
// stage's state as any joining worker does (a live peer's, or its DiLoCo group's θ and round)
// before it takes work; the micro-batches the retired worker held are re-run elsewhere by the
// tracker's recovery, each counted once. Each move is a `rebalance` event in metrics.jsonl.
#pragma once

#include <caf/all.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "actors/common/context.hpp"
#include "policy/balancer.hpp"

namespace swarmrt::actors {

struct BalancerSetup {
  ContextPtr ctx;
  caf::actor tracker;  // asked who serves (ask_members_atom)
  // Who carries a move out: every stage supervisor of the process (the one holding the worker
  // answers), or the directory, which forwards it to the worker's node.
  std::vector<caf::actor> hosts;
  caf::actor metrics;
  // Tests: the speed a worker is taken to have, given the one measured (unset: measured).
  std::function<double(uint32_t id, double measured)> speed;
};

struct balancer_state {
  using Clock = std::chrono::steady_clock;
  BalancerSetup setup;
  std::vector<double> cost;  // per stage, model::stage_costs
  policy::BalancerParams params;
  std::mt19937_64 rng;
  Clock::time_point start = Clock::now();
  std::map<uint32_t, double> moved_at;        // worker id -> when it was started by a move
  std::map<uint32_t, double> arriving;        // started by a move, not a member yet
  std::map<uint32_t, uint32_t> next_replica;  // per stage: the next new worker's replica
  bool planning = false;                      // a period's questions are out
  uint64_t periods = 0, moves = 0;
  nlohmann::json last;  // the last period: rates and the plan, for the console's `info`
  std::vector<policy::Peer> measured;  // the last period's workers, for placing newcomers
  struct Carried {
    double speed;  // samples/s at cost 1, measured before the move
    bool provisional;
  };
  std::map<uint32_t, Carried> carried;  // moved workers not measured anew yet, by new id
  static inline const char* name = "balancer";
};

caf::behavior balancer(caf::stateful_actor<balancer_state>* self, BalancerSetup setup);

}  // namespace swarmrt::actors
