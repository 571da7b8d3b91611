// Llama-style language model (Touvron et al. 2023), written to be checked against the paper
// and Meta's reference model.py: pre-normalized blocks with RMSNorm (Zhang & Sennrich 2019),
// rotary position embeddings on queries and keys (RoFormer, Su et al. 2021), a SwiGLU MLP
// (Shazeer 2020), no biases anywhere, and a head that is its own matrix or the token
// embeddings' (model.tie_embeddings).
//
// Built as stage k of S exactly like the GPT (model/stage_model.hpp): stage 0 owns
// tok_embeddings, the last stage owns the final norm and the output head, and parameter names
// are global ("layers.3.attention.wq.weight" belongs to layer 3 wherever it lives).
#pragma once

#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include "model/stage_model.hpp"

namespace swarmrt::model {

// RMSNorm(x) = x / sqrt(mean(x^2) + eps) * g: LayerNorm without the centring and the bias.
class RMSNormImpl : public torch::nn::Module {
 public:
  explicit RMSNormImpl(int64_t dim, double eps = 1e-5);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  double eps_;
  torch::Tensor weight;  // g, [dim]
};
TORCH_MODULE(RMSNorm);

// Rotary position embedding: the pair (x_2i, x_2i+1) of a head at position t is rotated by
// the angle t * theta_i, theta_i = base^(-2i / head_size), so q . k depends on positions only
// through their difference. The cosines and sines are derived, never trained, and stay out of
// checkpoints.
class RotaryEmbedding {
 public:
  RotaryEmbedding(int64_t head_size, int64_t max_positions, double base = 10000.0);
  // x: [B, n_head, T, head_size] -> the same shape, position t of x rotated by t * theta.
  torch::Tensor apply(const torch::Tensor& x);

 private:
  torch::Tensor cos_, sin_;  // [max_positions, head_size / 2]
};

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const config::ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t n_head_, head_size_;
  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr};  // d -> d, per head side by side
  torch::nn::Linear wo{nullptr};                            // output projection d -> d
  RotaryEmbedding rope_;
  torch::Tensor future_;  // future_mask: position t must not see t' > t
};
TORCH_MODULE(Attention);

// SwiGLU: w2(SiLU(w1 x) * w3 x), hidden width ModelConfig::ffn_hidden().
class FeedForwardImpl : public torch::nn::Module {
 public:
  explicit FeedForwardImpl(const config::ModelConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Linear w1{nullptr}, w2{nullptr}, w3{nullptr};
};
TORCH_MODULE(FeedForward);

class TransformerBlockImpl : public torch::nn::Module {
 public:
  explicit TransformerBlockImpl(const config::ModelConfig& config);
  torch::Tensor forward(torch::Tensor x);

 private:
  RMSNorm attention_norm{nullptr};
  Attention attention{nullptr};
  RMSNorm ffn_norm{nullptr};
  FeedForward feed_forward{nullptr};
};
TORCH_MODULE(TransformerBlock);

class LlamaImpl : public StageModelImpl {
 public:
  LlamaImpl(const config::ModelConfig& config, StageSpec stage = {}, uint64_t seed = 1337);
  torch::Tensor forward(const torch::Tensor& input) override;

 private:
  torch::nn::Embedding tok_embeddings{nullptr};  // stage 0; no position embeddings (RoPE)
  torch::nn::ModuleDict layers_dict{nullptr};    // "layers": blocks keyed by global index
  std::vector<TransformerBlock> blocks_;         // the same blocks in order, for forward
  RMSNorm norm{nullptr};                         // final norm (last stage)
  torch::nn::Linear output{nullptr};             // head (last stage), absent when tied
};
TORCH_MODULE(Llama);

}  // namespace swarmrt::model
