#include "model/stage_cost.hpp"

#include "model/stage_spec.hpp"

namespace swarmrt::model {

double stage_flops(const config::RunConfig& c, int64_t k) {
  const double d = double(c.model.n_embd), T = double(c.model.block_size),
               V = double(c.model.vocab_size), f = double(c.model.ffn_hidden());
  const double mlp_matrices = c.model.arch == config::Arch::gpt2 ? 2 : 3;
  const auto [begin, end] = stage_layers(c.model.n_layer, StageSpec{k, c.swarm.stages});
  double flops = double(end - begin) * (2 * (4 * d * d + mlp_matrices * d * f) + 4 * T * d);
  if (k + 1 == c.swarm.stages) flops += 2 * d * V;
  return flops;
}

double stage_parameters(const config::RunConfig& c, int64_t k) {
  const auto& m = c.model;
  const double d = double(m.n_embd), V = double(m.vocab_size);
  const auto [begin, end] = stage_layers(m.n_layer, StageSpec{k, c.swarm.stages});
  double params = double(end - begin) * double(m.block_parameters());
  // Stage 0 holds the embeddings, the last stage the final norm and the head; together they
  // are the model's outer parameters (a tied head is the embedding of the one stage).
  const double head = m.tie_embeddings ? 0 : V * d;
  const double last = (m.arch == config::Arch::gpt2 ? 2 * d : d) + head;
  if (k == 0)
    params += double(m.outer_parameters()) - (k + 1 == c.swarm.stages ? 0 : last);
  else if (k + 1 == c.swarm.stages)
    params += last;
  return params;
}

std::vector<double> stage_costs(const config::RunConfig& c) {
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
