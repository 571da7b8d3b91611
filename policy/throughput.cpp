#include "policy/throughput.hpp"

#include <cmath>

namespace swarmrt::policy {

void ThroughputEma::add(double samples, double seconds) {
  if (!(seconds > 0)) return;
  ema_ = kAlpha * (samples / seconds) + (1 - kAlpha) * ema_;
  ++measurements_;
}

std::optional<double> ThroughputEma::value() const {
  if (measurements_ == 0) return std::nullopt;
  // The EMA starts at 0: dividing by 1 - (1 - alpha)^n removes that pull.
  return ema_ / (1 - std::pow(1 - kAlpha, measurements_));
}

}  // namespace swarmrt::policy
