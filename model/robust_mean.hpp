// How a DiLoCo round combines its workers' pseudo-gradients Δ_1..Δ_n (diloco.aggregate) when
// some of them may be anything: a broken or malicious worker holding the cluster credential
// (docs/security.md). The mean follows any one Δ_i as far as it is sent; these do not.
//
//   centered_clip (Karimireddy, He & Jaggi 2021; BTARD's aggregator, Gorbunov et al. 2022):
//     v_0     = the coordinate-wise median of the Δ_i
//     τ_l     = diloco.clip_radius, or (0) the median of ‖Δ_i − v_l‖
//     v_{l+1} = v_l + (1/n) Σ_i (Δ_i − v_l) · min(1, τ_l / ‖Δ_i − v_l‖)
//   for diloco.clip_iterations steps; a worker moves the result by at most τ_l/n a step, and
//   a worker far away keeps that pull to the end: the result sits about τ/(n − 1) from the
//   others' mean, toward it. With diloco.clip_drop = c > 0 the contributions farther from v
//   than c times the median distance are then dropped, and the result is the others' mean.
//   trimmed_mean: per coordinate, the mean of the values left after dropping the
//     diloco.trim largest and smallest (fewer when too few contributions came: at least one
//     value stays).
// ‖·‖ is over the whole contribution (every tensor of the stage or fragment), so a worker is
// clipped as one, not per tensor. CAF-free, as torchft keeps local_sgd apart from its manager.
#pragma once

#include <vector>

#include "config/config.hpp"
#include "model/checkpoint.hpp"

namespace swarmrt::model {

// The round's Δ from its contributions under diloco.aggregate (its mean when that is "mean").
// Every contribution must have the first's names and shapes.
NamedTensors aggregate(const std::vector<const NamedTensors*>& deltas,
                       const config::DilocoConfig& d);

}  // namespace swarmrt::model
