#include "model/gpt.hpp"

#include <torch/nn/functional/activation.h>
#include <cmath>

#include "model/precision.hpp"

namespace swarmrt::model {
namespace {
// LayerNorm in float32 whatever the residual stream's dtype, returned in that dtype: CUDA's
// autocast runs layer_norm in float32, and this LibTorch's CPU kernel takes no bf16 input
// with float32 weights. In fp32 both casts are no-ops.
torch::Tensor norm(torch::nn::LayerNorm& ln, const torch::Tensor& x) {
  return ln(x.to(at::kFloat)).to(x.scalar_type());
}
}  // namespace

// ---- attention ------------------------------------------------------------------------

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GPTConfig& c)
    : n_head_(c.n_head), n_embd_(c.n_embd) {
  c_attn = register_module("c_attn", torch::nn::Linear(c.n_embd, 3 * c.n_embd));
  c_proj = register_module("c_proj", torch::nn::Linear(c.n_embd, c.n_embd));
  // Not a registered buffer: it is derived, never trained, and stays out of checkpoints.
  future_ = future_mask(c.block_size);
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x) {
  // The mask follows the activations to their device (a stage worker on a GPU moves the
  // module there after it is built, and an unregistered tensor does not move with it).
  if (future_.defined() && future_.device() != x.device()) future_ = future_.to(x.device());
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hs = C / n_head_;
  auto qkv = c_attn(x).split(n_embd_, /*dim=*/2);
  // [B, T, C] -> [B, n_head, T, head_size]
  auto q = qkv[0].view({B, T, n_head_, hs}).transpose(1, 2);
  auto k = qkv[1].view({B, T, n_head_, hs}).transpose(1, 2);
  auto v = qkv[2].view({B, T, n_head_, hs}).transpose(1, 2);
  auto y = causal_attention(q, k, v, future_);         // [B, n_head, T, hs]
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
  x = x + attn(norm(ln_1, x));  // pre-LN residual: x + Attention(LN(x))
  x = x + mlp(norm(ln_2, x));   //                  x + MLP(LN(x))
  return x;
}

// ---- GPT (one stage, or all of it) -----------------------------------------------------

GPTImpl::GPTImpl(const GPTConfig& c, StageSpec stage, uint64_t seed) : StageModelImpl(c, stage) {
  if (stage.first()) {
    wte = register_module("wte", torch::nn::Embedding(c.vocab_size, c.n_embd));
    wpe = register_module("wpe", torch::nn::Embedding(c.block_size, c.n_embd));
  }
  h = register_module("h", torch::nn::ModuleDict());
  for (int64_t l = layers().first; l < layers().second; ++l) {
    blocks_.push_back(Block(c));
    h->update({{std::to_string(l), blocks_.back().ptr()}});
  }
  if (stage.last()) {
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd})));
    if (!c.tie_embeddings)
      lm_head = register_module(
          "lm_head",
          torch::nn::Linear(torch::nn::LinearOptions(c.n_embd, c.vocab_size).bias(false)));
  }
  init_parameters(*this, c.n_layer, seed);
}

torch::Tensor GPTImpl::forward(const torch::Tensor& input) {
  check_input(input);
  torch::Tensor x;
  if (stage().first()) {
    auto pos = torch::arange(input.size(1),
                             torch::TensorOptions().dtype(torch::kLong).device(input.device()));
    x = to_compute_dtype(wte(input) + wpe(pos));  // token + position embeddings
  } else {
    x = input;
  }
  for (auto& block : blocks_) x = block->forward(x);
  if (stage().last()) {
    x = norm(ln_f, x);
    x = lm_head ? lm_head(x) : torch::linear(x, wte->weight);
  }
  return x;
}

}  // namespace swarmrt::model
