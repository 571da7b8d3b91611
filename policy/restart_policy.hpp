// When a supervisor may restart a child, and after how long (architecture §7): at most R restarts
// within T seconds (restart intensity), each after a backoff that doubles with every restart
// still inside the window. The (R+1)-th restart within T is refused: the supervisor escalates.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>

namespace swarmrt::policy {

// The supervision.* keys it needs (config/config.hpp's SupervisionConfig holds them).
struct RestartLimits {
  int64_t max_restarts = 10;
  double restart_window_s = 10.0;
  double backoff_ms = 20;
  double max_backoff_ms = 2000;
};

class RestartPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RestartPolicy(const RestartLimits& limits) : config_(limits) {}

  // Records a restart wanted at `now`: the delay before it, or nullopt when the intensity
  // limit is exceeded (nothing recorded then).
  std::optional<std::chrono::milliseconds> next(Clock::time_point now);

  // Restarts inside the window as of `now`.
  size_t recent(Clock::time_point now);

 private:
  RestartLimits config_;
  std::deque<Clock::time_point> restarts_;
};

}  // namespace swarmrt::policy
