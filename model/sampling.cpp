#include "model/sampling.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>

namespace swarmrt::model {

std::unique_ptr<tokens::Tokenizer> open_tokenizer(const std::string& tokenizer_file) {
  return tokenizer_file.empty() ? tokens::byte_tokenizer()
                                : tokens::load_sentencepiece(tokenizer_file);
}

std::string generate(StageModel& model, const tokens::Tokenizer& tokenizer,
                     const std::string& prompt, const SampleOptions& options) {
  TORCH_CHECK(model->stage().count == 1, "sampling needs the whole model, not a stage");
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  auto gen = at::detail::createCPUGenerator(options.seed);
  std::vector<int64_t> ids;
  for (uint32_t id : tokenizer.encode(prompt.empty() ? std::string("\n") : prompt))
    ids.push_back(id);
  std::vector<uint32_t> out;
  // A vocabulary padded above the tokenizer's pieces has rows no text maps to.
  const int64_t pieces = std::min<int64_t>(tokenizer.size(), model->config().vocab_size);
  const int64_t block = model->config().block_size;
  for (int64_t i = 0; i < options.tokens; ++i) {
    const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(ids.size()) - block);
    auto context = torch::tensor(std::vector<int64_t>(ids.begin() + start, ids.end())).unsqueeze(0);
    auto logits = model->forward(context).select(1, -1).squeeze(0).narrow(0, 0, pieces);  // [V]
    int64_t next;
    if (options.temperature <= 0) {
      next = logits.argmax().item<int64_t>();
    } else {
      logits = logits / options.temperature;
      if (options.top_k > 0 && options.top_k < logits.size(0)) {
        auto kth = std::get<0>(logits.topk(options.top_k)).min();
        logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
      }
      next = torch::multinomial(torch::softmax(logits, -1), 1, false, gen).item<int64_t>();
    }
    ids.push_back(next);
    out.push_back(static_cast<uint32_t>(next));
  }
  if (was_training) model->train();
  return tokenizer.decode(out);
}

}  // namespace swarmrt::model
