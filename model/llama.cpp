#include "model/llama.hpp"

#include <torch/nn/functional/activation.h>
#include <cmath>

#include <limits>
#include "model/precision.hpp"

namespace swarmrt::model {

// ---- RMSNorm ---------------------------------------------------------------------------

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  // Normalized in float32 and returned in x's dtype, as the reference does: a mean of squares
  // in bf16 loses the small components.
  const auto xf = x.to(at::kFloat);
  return (xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps_)).to(x.scalar_type()) *
         weight;
}

// ---- rotary position embedding -----------------------------------------------------------

RotaryEmbedding::RotaryEmbedding(int64_t head_size, int64_t max_positions, double base) {
  // theta_i = base^(-2i / head_size) for i in [0, head_size / 2), in double so that long
  // contexts keep their angles exact before the cast.
  auto i = torch::arange(head_size / 2, torch::kDouble);
  auto theta = torch::pow(base, -2.0 * i / static_cast<double>(head_size));
  auto t = torch::arange(max_positions, torch::kDouble);
  auto angle = torch::outer(t, theta);  // [max_positions, head_size / 2]
  cos_ = angle.cos().to(torch::kFloat32);
  sin_ = angle.sin().to(torch::kFloat32);
}

torch::Tensor RotaryEmbedding::apply(const torch::Tensor& x) {
  if (cos_.device() != x.device()) cos_ = cos_.to(x.device()), sin_ = sin_.to(x.device());
  const int64_t T = x.size(2);
  auto pairs = x.unflatten(-1, {x.size(-1) / 2, 2});  // [B, nh, T, hs/2, 2]
  auto x0 = pairs.select(-1, 0), x1 = pairs.select(-1, 1);
  auto cos = cos_.slice(0, 0, T).to(x.scalar_type()), sin = sin_.slice(0, 0, T).to(x.scalar_type());
  // (x0 + i x1) * e^(i t theta), the rotation of each pair by its angle.
  return torch::stack({x0 * cos - x1 * sin, x0 * sin + x1 * cos}, -1).flatten(-2);
}

// ---- attention ------------------------------------------------------------------------

AttentionImpl::AttentionImpl(const config::ModelConfig& c)
    : n_head_(c.n_head), head_size_(c.n_embd / c.n_head), rope_(c.n_embd / c.n_head, c.block_size) {
  auto linear = [&](const char* name) {
    return register_module(
        name, torch::nn::Linear(torch::nn::LinearOptions(c.n_embd, c.n_embd).bias(false)));
  };
  wq = linear("wq"), wk = linear("wk"), wv = linear("wv"), wo = linear("wo");
  future_ = future_mask(c.block_size);
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  if (future_.defined() && future_.device() != x.device()) future_ = future_.to(x.device());
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  // [B, T, C] -> [B, n_head, T, head_size]
  auto heads = [&](const torch::Tensor& y) {
    return y.view({B, T, n_head_, head_size_}).transpose(1, 2);
  };
  auto q = rope_.apply(heads(wq(x)));  // positions enter through q and k only
  auto k = rope_.apply(heads(wk(x)));
  auto v = heads(wv(x));
  auto y = causal_attention(q, k, v, future_);         // [B, n_head, T, head_size]
  y = y.transpose(1, 2).contiguous().view({B, T, C});  // re-assemble the heads side by side
  return wo(y);
}

// ---- SwiGLU feed-forward and block --------------------------------------------------------

FeedForwardImpl::FeedForwardImpl(const config::ModelConfig& c) {
  const int64_t d = c.n_embd, hidden = c.ffn_hidden();
  auto linear = [&](const char* name, int64_t in, int64_t out) {
    return register_module(name, torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false)));
  };
  w1 = linear("w1", d, hidden);  // gate
  w2 = linear("w2", hidden, d);  // down projection, back into the residual stream
  w3 = linear("w3", d, hidden);  // up projection
}

torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  return w2(torch::silu(w1(x)) * w3(x));
}

TransformerBlockImpl::TransformerBlockImpl(const config::ModelConfig& c) {
  attention_norm = register_module("attention_norm", RMSNorm(c.n_embd));
  attention = register_module("attention", Attention(c));
  ffn_norm = register_module("ffn_norm", RMSNorm(c.n_embd));
  feed_forward = register_module("feed_forward", FeedForward(c));
}

torch::Tensor TransformerBlockImpl::forward(torch::Tensor x) {
  x = x + attention(attention_norm(x));  // h = x + Attention(RMSNorm(x))
  x = x + feed_forward(ffn_norm(x));     // out = h + FFN(RMSNorm(h))
  return x;
}

// ---- Llama (one stage, or all of it) ---------------------------------------------------

LlamaImpl::LlamaImpl(const config::ModelConfig& c, StageSpec stage, uint64_t seed)
    : StageModelImpl(c, stage) {
  if (stage.first())
    tok_embeddings =
        register_module("tok_embeddings", torch::nn::Embedding(c.vocab_size, c.n_embd));
  layers_dict = register_module("layers", torch::nn::ModuleDict());
  for (int64_t l = layers().first; l < layers().second; ++l) {
    blocks_.push_back(TransformerBlock(c));
    layers_dict->update({{std::to_string(l), blocks_.back().ptr()}});
  }
  if (stage.last()) {
    norm = register_module("norm", RMSNorm(c.n_embd));
    if (!c.tie_embeddings)
      output = register_module(
          "output",
          torch::nn::Linear(torch::nn::LinearOptions(c.n_embd, c.vocab_size).bias(false)));
  }
  init_parameters(*this, c.n_layer, seed);
}

torch::Tensor LlamaImpl::forward(const torch::Tensor& input) {
  check_input(input);
  // [B, T, d]; the residual stream in the compute dtype (model/precision.hpp)
  auto x = stage().first() ? to_compute_dtype(tok_embeddings(input)) : input;
  for (auto& block : blocks_) x = block->forward(x);
  if (stage().last()) {
    x = norm(x);
    x = output ? output(x) : torch::linear(x, tok_embeddings->weight);  // [B, T, vocab]
  }
  return x;
}

}  // namespace swarmrt::model
