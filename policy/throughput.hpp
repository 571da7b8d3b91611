// A peer's throughput as SWARM measures it: an exponential moving average of samples/s over
// its completed work (alpha 0.1), bias-corrected so the first measurements are not pulled
// towards the zero it starts from. Used by the wiring (next-stage workers, as the sender sees
// them) and by each worker for its own compute rate (the console's `info`).
#pragma once

#include <optional>

namespace swarmrt::policy {

class ThroughputEma {
 public:
  static constexpr double kAlpha = 0.1;

  // `samples` done in `seconds`; a measurement of no time is ignored.
  void add(double samples, double seconds);
  // Samples/s; nullopt until the first measurement.
  std::optional<double> value() const;
  int measurements() const { return measurements_; }

 private:
  double ema_ = 0;
  int measurements_ = 0;
};

}  // namespace swarmrt::policy
