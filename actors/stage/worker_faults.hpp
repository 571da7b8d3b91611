// Fault injection on a stage worker (architecture §7: a feature, not a test hack), kept apart
// from its compute and its sends: hops lost on purpose (chaos.drop_fraction), compute
// stretched by a factor (chaos.slow_factor, the console's `slow`), and the sends of one step
// carrying a NaN (chaos.nan_worker, chaos.nan_at_step) so that peers must refuse them, and a
// malicious worker's pseudo-gradients and gradients (chaos.malicious) and its noisy hops
// (chaos.hop_noise). With no key set every call is a no-op.
#pragma once

#include <ATen/core/Tensor.h>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "config/config.hpp"

namespace swarmrt::actors {

class WorkerFaults {
 public:
  using Clock = std::chrono::steady_clock;

  // The draw of lost hops is seeded per worker, so a run's losses are reproducible.
  void configure(double drop_fraction, uint64_t seed, double slow_factor, int64_t nan_at_step);

  // Whether the hop about to be sent is lost (counted in dropped()).
  bool drop_hop();
  // Sleeps so that the compute begun at `started` takes slow_factor times as long.
  void slow_down(Clock::time_point started) const;
  void set_slow_factor(double factor) { slow_factor_ = factor; }
  double slow_factor() const { return slow_factor_; }
  // The console's `drop`: from now on this fraction of the hops it sends is lost.
  void set_drop_fraction(double fraction) { drop_fraction_ = fraction; }
  double drop_fraction() const { return drop_fraction_; }

  // Whether gradients of `step` carry a NaN; and a round's pseudo-gradient sent at `step`
  // (any of the H steps from nan_at_step on, so the round that follows it is poisoned).
  bool poisons_gradient(uint64_t step) const;
  bool poisons_round(uint64_t step, uint64_t inner_steps) const;
  // The first tensor carries a NaN; a copy, so the worker's own tensors stay finite.
  static void poison(std::vector<at::Tensor>& tensors);

  // chaos.malicious for this worker (config::ChaosConfig::is_malicious): from `from_step` on,
  // the pseudo-gradients it sends are sign-flipped and scaled, scaled, or noise; or (stale) it
  // takes no optimizer step, so its parameters stay those of that step.
  void set_malice(config::Malicious kind, uint64_t from_step, double scale);
  bool malicious() const { return malice_ != config::Malicious::none; }
  // Whether this worker keeps its parameters at `step` instead of taking the step (stale).
  bool stale(uint64_t step) const {
    return malice_ == config::Malicious::stale && step >= malice_from_;
  }
  // A round's pseudo-gradient sent at `step` (float32 on the host), replaced by what this
  // worker sends instead when it misbehaves then.
  void misbehave(uint64_t step, std::vector<at::Tensor>& tensors);
  // chaos.hop_noise: from `from_step` on, the activations and input gradients this worker
  // sends in training carry Gaussian noise of `relative` times their RMS.
  void set_hop_noise(double relative, uint64_t from_step);
  // A training hop's tensor about to be sent at `step`: noisy when this worker adds noise then
  // (a new tensor; the worker's own stays as computed, on its device).
  void noise_hop(uint64_t step, at::Tensor& hidden);
  // Either of the two above is set.
  bool misbehaving() const { return malicious() || hop_noise_ > 0; }

  uint64_t dropped() const { return dropped_; }

 private:
  double drop_fraction_ = 0;
  double slow_factor_ = 1.0;
  uint64_t nan_at_step_ = 0;  // 0: never
  std::mt19937_64 rng_;
  uint64_t dropped_ = 0;
  config::Malicious malice_ = config::Malicious::none;
  uint64_t malice_from_ = 0;
  double malice_scale_ = 1.0;
  double hop_noise_ = 0;
  uint64_t hop_noise_from_ = 0;
};

}  // namespace swarmrt::actors
