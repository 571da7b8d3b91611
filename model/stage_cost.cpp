#include "model/stage_cost.hpp"

#include "model/gpt.hpp"

namespace swarmrt::model {

double stage_flops(const RunConfig& c, int64_t k) {
  const double d = double(c.model.n_embd), T = double(c.model.block_size),
               V = double(c.model.vocab_size);
  const auto [begin, end] = stage_layers(c.model.n_layer, StageSpec{k, c.swarm.stages});
  double flops = double(end - begin) * (24 * d * d + 4 * T * d);
  if (k + 1 == c.swarm.stages) flops += 2 * d * V;
  return flops;
}

double stage_parameters(const RunConfig& c, int64_t k) {
  const double d = double(c.model.n_embd), T = double(c.model.block_size),
               V = double(c.model.vocab_size);
  const auto [begin, end] = stage_layers(c.model.n_layer, StageSpec{k, c.swarm.stages});
  double params = double(end - begin) * (12 * d * d + 13 * d);
  if (k == 0) params += V * d + T * d;
  if (k + 1 == c.swarm.stages) params += 2 * d + V * d;
  return params;
}

std::vector<double> stage_costs(const RunConfig& c) {
  std::vector<double> flops;
  double total = 0;
  for (int64_t k = 0; k < c.swarm.stages; ++k) {
    flops.push_back(stage_flops(c, k));
    total += flops.back();
  }
  for (auto& f : flops) f *= double(c.swarm.stages) / total;
  return flops;
}

}  // namespace swarmrt::model
