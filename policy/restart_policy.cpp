#include "policy/restart_policy.hpp"

#include <algorithm>
#include <cmath>

namespace swarmrt::policy {

size_t RestartPolicy::recent(Clock::time_point now) {
  const auto window = std::chrono::duration<double>(config_.restart_window_s);
  while (!restarts_.empty() && now - restarts_.front() > window) restarts_.pop_front();
  return restarts_.size();
}

std::optional<std::chrono::milliseconds> RestartPolicy::next(Clock::time_point now) {
  const size_t n = recent(now);
  if (static_cast<int64_t>(n) >= config_.max_restarts) return std::nullopt;
  restarts_.push_back(now);
  const double ms =
      std::min(config_.max_backoff_ms, config_.backoff_ms * std::pow(2.0, static_cast<double>(n)));
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

}  // namespace swarmrt::policy
