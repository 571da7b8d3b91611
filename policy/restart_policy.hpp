// When a supervisor may restart a child, and after how long (architecture §7): at most R restarts
// within T seconds (restart intensity), each after a backoff that doubles with every restart
// still inside the window. The (R+1)-th restart within T is refused: the supervisor escalates.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>

#include "config/config.hpp"

namespace swarmrt::policy {

// Its limits are the run's supervision.* keys: max_restarts within restart_window_s, and the
// backoff from backoff_ms doubling up to max_backoff_ms.
class RestartPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RestartPolicy(const config::SupervisionConfig& limits) : config_(limits) {}

  // Records a restart wanted at `now`: the delay before it, or nullopt when the intensity
  // limit is exceeded (nothing recorded then).
  std::optional<std::chrono::milliseconds> next(Clock::time_point now);

  // Restarts inside the window as of `now`.
  size_t recent(Clock::time_point now);

 private:
  config::SupervisionConfig config_;
  std::deque<Clock::time_point> restarts_;
};

}  // namespace swarmrt::policy
