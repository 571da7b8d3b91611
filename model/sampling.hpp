// Autoregressive sampling from a whole (single-stage) model of either architecture.
#pragma once

#include <cstdint>
#include <string>

#include "model/stage_model.hpp"

namespace swarmrt::model {

struct SampleOptions {
  int64_t tokens = 200;
  double temperature = 0.8;  // 0 means greedy
  int64_t top_k = 40;        // 0 means no cut
  uint64_t seed = 0;
};

// Continues `prompt` (bytes) by `options.tokens` bytes; returns only the continuation.
std::string generate(StageModel& model, const std::string& prompt, const SampleOptions& options);

}  // namespace swarmrt::model
