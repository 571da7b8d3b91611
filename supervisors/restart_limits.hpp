// A supervisor's restart policy (policy/restart_policy.hpp) from the run's supervision keys:
// policy/ knows nothing of model/'s config, so the supervisors hand it the four it needs.
#pragma once

#include "config/config.hpp"
#include "policy/restart_policy.hpp"

namespace swarmrt::supervisors {

inline policy::RestartLimits restart_limits(const config::SupervisionConfig& c) {
  return {c.max_restarts, c.restart_window_s, c.backoff_ms, c.max_backoff_ms};
}

}  // namespace swarmrt::supervisors
