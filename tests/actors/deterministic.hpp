// An actor system on CAF's deterministic test scheduler, configured as every swarmrt process
// configures its own (message types, ...): a test delivers messages with sched->run() and
// moves the clock with sched->advance_time(), so each message lands exactly when it decides.
#pragma once

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <memory>

#include "actors/runtime/runtime.hpp"

namespace swarmrt::testing {

struct DeterministicSystem {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  caf::scheduler::test_coordinator* sched = nullptr;

  DeterministicSystem() {
    actors::configure_actor_system(cfg);
    cfg.set("scheduler.policy", caf::atom("testing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    sched = &dynamic_cast<caf::scheduler::test_coordinator&>(sys->scheduler());
  }
};

}  // namespace swarmrt::testing
