#include "model/gpt.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/init.h>
#include <torch/utils.h>
#include <cmath>

namespace swarmrt::model {

std::pair<int64_t, int64_t> stage_layers(int64_t n_layer, StageSpec stage) {
  TORCH_CHECK(stage.count >= 1 && stage.count <= n_layer, "stage count ", stage.count,
              " must be in [1, n_layer=", n_layer, "]");
  TORCH_CHECK(stage.index >= 0 && stage.index < stage.count, "stage index ", stage.index,
              " out of range for ", stage.count, " stages");
  const int64_t base = n_layer / stage.count, extra = n_layer % stage.count;
  const int64_t begin = stage.index * base + std::min(stage.index, extra);
  const int64_t size = base + (stage.index < extra ? 1 : 0);
  return {begin, begin + size};
}

// ---- attention ------------------------------------------------------------------------

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GPTConfig& c)
    : n_head_(c.n_head), n_embd_(c.n_embd) {
  c_attn = register_module("c_attn", torch::nn::Linear(c.n_embd, 3 * c.n_embd));
  c_proj = register_module("c_proj", torch::nn::Linear(c.n_embd, c.n_embd));
  // Not a registered buffer: it is derived, never trained, and stays out of checkpoints.
  future_ = torch::ones({c.block_size, c.block_size}, torch::kBool).triu(1);
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  // The mask follows the activations to their device (a stage worker on a GPU moves the
  // module there after it is built, and an unregistered tensor does not move with it).
  if (future_.device() != x.device()) future_ = future_.to(x.device());
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hs = C / n_head_;
  auto qkv = c_attn(x).split(n_embd_, /*dim=*/2);
  // [B, T, C] -> [B, n_head, T, head_size]
  auto q = qkv[0].view({B, T, n_head_, hs}).transpose(1, 2);
  auto k = qkv[1].view({B, T, n_head_, hs}).transpose(1, 2);
  auto v = qkv[2].view({B, T, n_head_, hs}).transpose(1, 2);
  // Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, with future positions masked out.
  auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hs)));
  att = att.masked_fill(future_.slice(0, 0, T).slice(1, 0, T),
                        -std::numeric_limits<float>::infinity());
  att = torch::softmax(att, -1);
  auto y = torch::matmul(att, v);                      // [B, n_head, T, hs]
  y = y.transpose(1, 2).contiguous().view({B, T, C});  // re-assemble the heads side by side
  return c_proj(y);
}

// ---- MLP and block --------------------------------------------------------------------

MLPImpl::MLPImpl(const GPTConfig& c) {
  c_fc = register_module("c_fc", torch::nn::Linear(c.n_embd, 4 * c.n_embd));
  c_proj = register_module("c_proj", torch::nn::Linear(4 * c.n_embd, c.n_embd));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  return c_proj(torch::gelu(c_fc(x)));
}

BlockImpl::BlockImpl(const GPTConfig& c) {
  ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd})));
  attn = register_module("attn", CausalSelfAttention(c));
  ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd})));
  mlp = register_module("mlp", MLP(c));
}

torch::Tensor BlockImpl::forward(torch::Tensor x) {
  x = x + attn(ln_1(x));  // pre-LN residual: x + Attention(LN(x))
  x = x + mlp(ln_2(x));   //                  x + MLP(LN(x))
  return x;
}

// ---- GPT (one stage, or all of it) -----------------------------------------------------

GPTImpl::GPTImpl(const GPTConfig& c, StageSpec stage, uint64_t seed)
    : config_(c), stage_(stage), layers_(stage_layers(c.n_layer, stage)) {
  if (stage.first()) {
    wte = register_module("wte", torch::nn::Embedding(c.vocab_size, c.n_embd));
    wpe = register_module("wpe", torch::nn::Embedding(c.block_size, c.n_embd));
  }
  h = register_module("h", torch::nn::ModuleDict());
  for (int64_t l = layers_.first; l < layers_.second; ++l) {
    blocks_.push_back(Block(c));
    h->update({{std::to_string(l), blocks_.back().ptr()}});
  }
  if (stage.last()) {
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd})));
    lm_head = register_module(
        "lm_head", torch::nn::Linear(torch::nn::LinearOptions(c.n_embd, c.vocab_size).bias(false)));
  }
  init_parameters(*this, c.n_layer, seed);
}

torch::Tensor GPTImpl::forward(const torch::Tensor& input) {
  torch::Tensor x;
  if (stage_.first()) {
    TORCH_CHECK(input.dim() == 2 && input.scalar_type() == torch::kLong,
                "stage 0 expects int64 token ids [B, T], got ", input.sizes(), " ",
                input.scalar_type());
    const int64_t T = input.size(1);
    TORCH_CHECK(T <= config_.block_size, "sequence length ", T, " exceeds block_size ",
                config_.block_size);
    auto pos = torch::arange(T, torch::TensorOptions().dtype(torch::kLong).device(input.device()));
    x = wte(input) + wpe(pos);  // token + position embeddings
  } else {
    TORCH_CHECK(input.dim() == 3 && input.size(2) == config_.n_embd, "stage ", stage_.index,
                " expects hidden states [B, T, ", config_.n_embd, "], got ", input.sizes());
    x = input;
  }
  for (auto& block : blocks_) x = block->forward(x);
  if (stage_.last()) x = lm_head(ln_f(x));
  return x;
}

int64_t GPTImpl::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
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
    const bool layer_norm = name.find("ln_") != std::string::npos;
    if (layer_norm) {
      ends_with(name, "weight") ? p.fill_(1.0) : p.zero_();
    } else if (ends_with(name, "bias")) {
      p.zero_();
    } else {
      // GPT-2: N(0, 0.02), residual projections scaled by 1/sqrt(2 * n_layer).
      const double std = ends_with(name, "c_proj.weight") ? 0.02 / std::sqrt(2.0 * n_layer) : 0.02;
      auto gen = at::detail::createCPUGenerator(seed ^ fnv1a(name));
      auto values = torch::empty(p.sizes(), torch::kFloat32);
      values.normal_(0.0, std, gen);
      p.copy_(values);
    }
  }
}

}  // namespace swarmrt::model
