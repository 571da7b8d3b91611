// An actor system for tests, with swarmrt's message types registered.
#pragma once

#include <caf/all.hpp>

#include "messages/types.hpp"

namespace swarmrt::testing {

struct TestSystem {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  TestSystem() {
    messages::register_types(cfg);
    cfg.set("scheduler.max-threads", 2);
    cfg.set("logger.verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
  }
};

}  // namespace swarmrt::testing
