#include "policy/hop_deadline.hpp"

#include <algorithm>
#include <cmath>

namespace swarmrt::policy {

void HopDeadline::observe_hop(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  hops_.push_back(seconds);
  if (hops_.size() > kWindow) hops_.pop_front();
}

double HopDeadline::slowest_hop_s() const {
  return hops_.empty() ? 0.0 : *std::max_element(hops_.begin(), hops_.end());
}

double HopDeadline::wait_s(int64_t losses) const {
  const double measured = limits_.factor * slowest_hop_s();
  double wait = std::clamp(measured, limits_.floor_s, std::max(limits_.floor_s, limits_.ceiling_s));
  // Each loss of the same micro-batch doubles its wait (capped: 2^20 is beyond any ceiling).
  wait *= std::ldexp(1.0, static_cast<int>(std::min<int64_t>(std::max<int64_t>(losses, 0), 20)));
  return std::min(wait, std::max(limits_.floor_s, limits_.ceiling_s));
}

HopDeadline::Verdict HopDeadline::judge(bool moved, bool busy, double busy_for_s,
                                        int64_t losses) const {
  if (moved) return Verdict::wait_again;  // it is on its way
  // At work on it, or handed to a worker at work: waited for, but not beyond the ceiling (a
  // compute that never ends is as lost as a hop that never arrives).
  if (busy && busy_for_s < limits_.ceiling_s) return Verdict::wait_again;
  return losses >= limits_.max_losses ? Verdict::give_up : Verdict::lost;
}

double report_window_s(double least_wait_s) {
  return std::min(0.05, std::max(0.0, least_wait_s) / 10);
}

bool report_at_once(std::optional<double> expected_s, double since_sent_s, double least_wait_s) {
  const double window = report_window_s(least_wait_s);
  return !expected_s || !(*expected_s <= window) || !(since_sent_s < window);
}

}  // namespace swarmrt::policy
