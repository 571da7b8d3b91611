// Helpers shared by the model tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "../temp_dir.hpp"
#include "config/config.hpp"
#include "model/data.hpp"
#include "model/gpt.hpp"

namespace swarmrt::testing {

// A model small enough for unit tests, deep enough for 4 stages.
inline config::ModelConfig micro_gpt() {
  config::ModelConfig m;
  m.vocab_size = 256, m.block_size = 16, m.n_layer = 4, m.n_head = 2, m.n_embd = 32;
  return m;
}

// A short run's training keys: `steps` steps of `micro_batches` micro-batches of `micro_batch`
// sequences, the learning rate `lr` reached after `warmup` steps; no evaluation during the run
// and 2 batches at its end.
inline config::TrainConfig short_train(int64_t steps, int64_t micro_batch, int64_t micro_batches,
                                       int64_t warmup, double lr) {
  config::TrainConfig t;
  t.steps = steps;
  t.micro_batch = micro_batch;
  t.micro_batches = micro_batches;
  t.warmup_steps = warmup;
  t.lr = lr;
  t.eval_every = 0;
  t.eval_batches = 2;
  return t;
}

// Token ids [B, T] below 256, drawn from `seed`.
inline torch::Tensor random_ids(int64_t B, int64_t T, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(0, 256, {B, T}, torch::kLong);
}

// The ids of byte parts, as the text they came from.
inline std::string bytes_of(const model::TokenParts& parts) {
  std::string s;
  for (const auto& p : parts)
    for (int64_t i = 0; i < p.size; ++i) s.push_back(static_cast<char>(p[i]));
  return s;
}

// The Brown corpus text file fetched by scripts/fetch_data.sh.
inline std::string test_data_path() {
  const char* p = std::getenv("SWARMRT_TEST_DATA");
  std::string path = p ? p : "data/brown.txt";
  if (!std::filesystem::exists(path))
    ADD_FAILURE() << path << " is missing: run ./scripts/fetch_data.sh (./scripts/test.sh does)";
  return path;
}

}  // namespace swarmrt::testing
