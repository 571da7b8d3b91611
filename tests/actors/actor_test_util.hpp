// An actor system for tests, configured as every swarmrt process configures its own.
#pragma once

#include <caf/all.hpp>

#include "actors/runtime/runtime.hpp"
#include "messages/types.hpp"

namespace swarmrt::testing {

struct TestSystem {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  TestSystem() {
    actors::configure_actor_system(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

}  // namespace swarmrt::testing
