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
inline model::GPTConfig micro_gpt() {
  return {256, 16, 4, 2, 32};
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
