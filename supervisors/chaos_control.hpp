// The chaos control actor, one per process, registered as "chaos" in the actor registry so a
// console or a test can find it (architecture §7: fault injection is a feature). It kills a named
// actor or a random one of a kind from the process's roster, kills its own process ("node"),
// slows a worker, and runs the [chaos] schedule: a kill when a step starts (the tracker tells
// it) and a kill every T seconds. What it cannot find here it forwards (the coordinator's
// forwards to the directory, which picks a node).
//
//   (kill_atom, target)              -> std::string: what was killed, or why nothing was
//   (slow_atom, name, factor)        -> std::string
//   (step_atom, step, phase)            the tracker reached a point of a step (schedule):
//                                       "start", "reduce", "apply"
//   (faults_atom)                    -> uint64_t kills so far
#pragma once

#include <caf/all.hpp>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "config/config.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::supervisors {

struct ChaosSetup {
  config::ChaosConfig config;
  std::shared_ptr<Roster> roster;
  caf::actor metrics;  // optional
  // Optional: where kills of absent targets go (set once the directory exists).
  std::shared_ptr<caf::actor> forward = std::make_shared<caf::actor>();
  std::function<void()> kill_self;  // "node": ends this process abruptly; unset: refused
};

struct chaos_state {
  ChaosSetup setup;
  std::mt19937_64 rng;
  uint64_t kills = 0;
  uint64_t timed = 0;
  bool killed_at_step = false;  // chaos.kill_at_step fired
  uint64_t last_step = 0;       // the newest step the tracker told of
  static inline const char* name = "chaos";
};

caf::behavior chaos_control(caf::stateful_actor<chaos_state>* self, ChaosSetup setup);

// Registers `chaos` under the name "chaos" in its system's registry.
void register_chaos(const caf::actor& chaos);

}  // namespace swarmrt::supervisors
