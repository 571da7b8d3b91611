// The DiLoCo group's side of one fragment's outer rounds, CAF-free: plain DiLoCo is Streaming
// DiLoCo with one fragment (the whole stage) and no overlap, so one class serves both. It
// holds the fragment's θ and outer momentum (OuterNesterov, diloco.hpp), checks and decodes a
// worker's pseudo-gradient Δ_i, and applies a round:
//   plain       θ(t) = outer step of the mean Δ at the outer rate of the round's step
//               (diloco.outer_lr_schedule), or of a robust Δ (diloco.aggregate,
//               model/robust_mean.hpp); the answer is θ(t)
//   quantized   the same step; the answer is θ(t) − θ(t−1) in diloco.quantize (with the last
//               answer's error carried in under diloco.error_feedback), and θ(t) becomes
//               θ(t−1) plus exactly what the workers decode, so every copy stays equal
//   eager       (Kale et al. 2025) the answer is the round's mean Δ̄ and who is in it; θ(t)
//               follows the mean of the workers' own eager steps (eager_delta), and the run's
//               last round is answered with θ(t) itself
// Who must contribute before a round applies is policy/round_quorum.hpp's; when, the group's
// (actors/diloco/diloco_group.hpp). As torchft keeps local_sgd apart from its manager.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/checkpoint.hpp"
#include "model/diloco.hpp"

namespace swarmrt::model {

// A round's answer to every member.
struct RoundAnswer {
  std::vector<at::Tensor> tensors;     // θ(t), an encoded update, or eager's encoded mean Δ̄
  bool update = false;                 // θ(t) − θ(t−1) encoded: added to the anchor
  bool average = false;                // eager: the mean Δ̄ of `contributors`
  std::vector<uint32_t> contributors;  // eager: the workers in the mean; all_gather: the round's
  bool gathered = false;  // diloco.all_gather: each member is sent the others' wires as they came
};

// diloco.all_gather's step: θ(t) − θ(t−1) = −η · (1/n) Σ Δ̂_i over a round's n contributions in
// worker order (deltas[i][k]: contribution i's tensor k, decoded from its wire). The group and
// every worker call it on the same decoded tensors, so each θ(t) agrees bit for bit.
std::vector<at::Tensor> gathered_update(const std::vector<std::vector<at::Tensor>>& deltas,
                                        double lr);

class OuterRound {
 public:
  // The fragment's θ(0) (the group's own copy) and the run's settings: diloco.*, the stage's
  // workers (eager's first round) and the run's steps (the outer rate's schedule).
  OuterRound(NamedTensors theta, const config::RunConfig& config);

  // A contribution's tensors as float32 pseudo-gradients of this fragment, decoded from the
  // run's encoding; empty when they are, else why not. `excuse`: the tensors fit θ but their
  // encoding does not decode (a non-finite scale or value): the round goes on without them.
  // `density` (sparse rounds): the sparsest of its tensors' top-k densities, any rung of
  // round_densities under swarm.compression = auto.
  std::string decode(const std::vector<std::string>& names, const std::vector<at::Tensor>& tensors,
                     NamedTensors& delta, bool& excuse, double* density = nullptr) const;

  // The round that started after the inner step of `step`, with every contribution (worker
  // id → Δ_i, decoded); `final`: the run's last step's round. Steps θ and returns the answer.
  // `density`: the round's sparsest contribution's top-k density (decode's). Under
  // swarm.compression = auto a sparse answer takes it: every member's link carried a
  // contribution that sparse in time, and an answer sparser than the contributions would hold
  // back in the group's error feedback what they delivered. Otherwise (or 0) the answer is at
  // diloco.topk_density.
  RoundAnswer apply(const std::map<uint32_t, NamedTensors>& contributions, uint64_t step,
                    bool final, double density = 0);

  const NamedTensors& theta() const { return outer_.theta(); }
  const NamedTensors& momentum() const { return outer_.momentum(); }
  // What the encoded answers have left unsent so far (error feedback), in θ's order; empty:
  // nothing carried yet.
  const NamedTensors& residual() const { return residual_; }
  // θ, the momentum and the error feedback a restarted group continues from (eager's last
  // mean, which only rounds carry, starts afresh with the object).
  void restore(NamedTensors theta, NamedTensors momentum, NamedTensors residual = {});

 private:
  std::vector<at::Tensor> encode_update(const NamedTensors& before, const config::DilocoConfig& d);
  RoundAnswer apply_gathered(const std::map<uint32_t, NamedTensors>& contributions, uint64_t step);
  std::vector<at::Tensor> encode_mean(const std::map<uint32_t, NamedTensors>& contributions) const;
  std::vector<NamedTensors> eager_deltas(
      const std::map<uint32_t, NamedTensors>& contributions) const;

  config::DilocoConfig d_;
  // The densities contributions may come in (swarm.compression = auto: policy::density_ladder;
  // else empty, the run's one).
  std::vector<double> densities_;
  int64_t first_m_ = 1;      // the stage's workers: eager's M before any mean
  int64_t total_steps_ = 0;  // train.steps
  OuterNesterov outer_;
  NamedTensors residual_;  // error feedback of the quantized updates sent
  // Eager: the last applied round's mean as the workers decode it, and who was in it: the
  // others' term of each worker's next eager step (eager_delta).
  NamedTensors last_mean_;
  std::map<uint32_t, NamedTensors> last_contributions_;
};

}  // namespace swarmrt::model
