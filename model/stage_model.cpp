#include "model/stage_model.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/loss.h>
#include <torch/utils.h>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "model/gpt.hpp"
#include "model/llama.hpp"
#include "model/torch_features.hpp"

namespace swarmrt::model {

std::pair<int64_t, int64_t> stage_layers(int64_t n_layer, StageSpec stage) {
  if (stage.count < 1 || stage.count > n_layer)
    throw std::invalid_argument("stage count " + std::to_string(stage.count) +
                                " must be in [1, n_layer=" + std::to_string(n_layer) + "]");
  if (stage.index < 0 || stage.index >= stage.count)
    throw std::invalid_argument("stage index " + std::to_string(stage.index) +
                                " out of range for " + std::to_string(stage.count) + " stages");
  const int64_t base = n_layer / stage.count, extra = n_layer % stage.count;
  const int64_t begin = stage.index * base + std::min(stage.index, extra);
  const int64_t size = base + (stage.index < extra ? 1 : 0);
  return {begin, begin + size};
}

StageModelImpl::StageModelImpl(const config::ModelConfig& config, StageSpec stage)
    : config_(config), stage_(stage), layers_(stage_layers(config.n_layer, stage)) {
  TORCH_CHECK(!config.tie_embeddings || (stage.first() && stage.last()),
              "tied embeddings need the embedding and the head in one stage");
}

void StageModelImpl::check_input(const torch::Tensor& input) const {
  if (stage_.first()) {
    TORCH_CHECK(input.dim() == 2 && input.scalar_type() == torch::kLong,
                "stage 0 expects int64 token ids [B, T], got ", input.sizes(), " ",
                input.scalar_type());
    TORCH_CHECK(input.size(1) <= config_.block_size, "sequence length ", input.size(1),
                " exceeds block_size ", config_.block_size);
  } else {
    TORCH_CHECK(input.dim() == 3 && input.size(2) == config_.n_embd, "stage ", stage_.index,
                " expects hidden states [B, T, ", config_.n_embd, "], got ", input.sizes());
  }
}

int64_t StageModelImpl::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

StageModel make_stage_model(const config::ModelConfig& config, StageSpec stage, uint64_t seed) {
  std::shared_ptr<StageModelImpl> impl;
  if (config.arch == config::Arch::llama)
    impl = std::make_shared<LlamaImpl>(config, stage, seed);
  else
    impl = std::make_shared<GPTImpl>(config, stage, seed);
  return StageModel(std::move(impl));
}

torch::Tensor causal_attention_math(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, const torch::Tensor& future) {
  const int64_t T = q.size(2);
  auto att =
      torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(q.size(3))));
  att = att.masked_fill(future.slice(0, 0, T).slice(1, 0, T),
                        -std::numeric_limits<float>::infinity());
  return torch::matmul(torch::softmax(att, -1), v);
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& future) {
#if SWARMRT_HAS_SDPA
  // One kernel that never holds the [T, T] scores: flash or memory-efficient attention on
  // CUDA, the fused kernel on the CPU. Its mask is the same top-left causal one.
  (void)future;
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/true);
#else
  return causal_attention_math(q, k, v, future);
#endif
}

torch::Tensor future_mask(int64_t block_size) {
  if (SWARMRT_HAS_SDPA) return {};
  return torch::ones({block_size, block_size}, torch::kBool).triu(1);
}

const char* attention_kernel() {
  return SWARMRT_HAS_SDPA ? "scaled_dot_product_attention" : "math";
}

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  // In float32 whatever the compute dtype (a no-op in fp32): log-softmax over a vocabulary
  // loses too much in 8 bits of mantissa, and the loss is what every mode reports.
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}).to(at::kFloat),
                                              targets.reshape({-1}));
}

namespace {
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

void init_parameters(torch::nn::Module& module, int64_t n_layer, uint64_t seed) {
  torch::NoGradGuard no_grad;
  for (auto& item : module.named_parameters()) {
    const std::string& name = item.key();
    auto& p = item.value();
    const bool norm = name.find("ln_") != std::string::npos || ends_with(name, "norm.weight");
    if (norm) {
      ends_with(name, "weight") ? p.fill_(1.0) : p.zero_();
    } else if (ends_with(name, "bias")) {
      p.zero_();
    } else {
      const bool residual = ends_with(name, "c_proj.weight") || ends_with(name, "wo.weight") ||
                            ends_with(name, "w2.weight");
      const double std = residual ? 0.02 / std::sqrt(2.0 * n_layer) : 0.02;
      auto gen = at::detail::createCPUGenerator(seed ^ fnv1a(name));
      auto values = torch::empty(p.sizes(), torch::kFloat32);
      values.normal_(0.0, std, gen);
      p.copy_(values);
    }
  }
}

}  // namespace swarmrt::model
