// An actor system for tests, configured as every swarmrt process configures its own.
#pragma once

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/runtime/runtime.hpp"
#include "messages/types.hpp"

namespace swarmrt::testing {

struct TestSystem {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  explicit TestSystem(bool network = false) {
    actors::configure_actor_system(cfg);
    if (network) cfg.load<caf::io::middleman>();
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

// With the middleman: two of these in one test process talk over real TCP on 127.0.0.1.
struct NetSystem : TestSystem {
  NetSystem() : TestSystem(true) {}
};

}  // namespace swarmrt::testing
