// Autoregressive sampling from a whole (single-stage) model of either architecture.
#pragma once

#include <cstdint>
#include <string>

#include "model/stage_model.hpp"
#include "tokens/tokenizer.hpp"

namespace swarmrt::model {

struct SampleOptions {
  int64_t tokens = 200;
  double temperature = 0.8;  // 0 means greedy
  int64_t top_k = 40;        // 0 means no cut
  uint64_t seed = 0;
};

// Continues `prompt` by `options.tokens` tokens of `tokenizer` (bytes, or BPE pieces); returns
// only the continuation, as text. Ids the tokenizer has no piece for are never drawn.
std::string generate(StageModel& model, const tokens::Tokenizer& tokenizer,
                     const std::string& prompt, const SampleOptions& options);

// The tokenizer of a run's data: bytes where `tokenizer_file` is empty, else that model.
std::unique_ptr<tokens::Tokenizer> open_tokenizer(const std::string& tokenizer_file);

}  // namespace swarmrt::model
