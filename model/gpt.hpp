// GPT-2 style language model (Radford et al. 2019), written to be checked against the paper
// and nanoGPT's model.py line by line: pre-LayerNorm blocks, causal self-attention, GELU MLP
// of width 4*d, learned positional embeddings, final LayerNorm and an untied LM head.
//
// The model is built as stage k of S (SWARM's pipeline stage, model/stage_model.hpp): stage 0
// owns the token and position embeddings, the last stage owns the final LayerNorm and the
// head, and every stage owns a contiguous block of layers. Parameter names are global
// ("h.3.attn.c_attn.weight" belongs to layer 3 in whichever stage holds it).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "config/config.hpp"
#include "model/stage_model.hpp"

namespace swarmrt::model {

// GPT-2's hyperparameters are the run's model.* keys (config::ModelConfig: vocab_size,
// block_size, n_layer, n_head, n_embd, tie_embeddings), nanoGPT's GPTConfig by another name.
using GPTConfig = config::ModelConfig;

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GPTConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t n_head_, n_embd_;
  torch::nn::Linear c_attn{nullptr};  // query, key, value projections for all heads at once
  torch::nn::Linear c_proj{nullptr};  // output projection
  torch::Tensor future_;              // future_mask: position t must not see t' > t
};
TORCH_MODULE(CausalSelfAttention);

class MLPImpl : public torch::nn::Module {
 public:
  explicit MLPImpl(const GPTConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Linear c_fc{nullptr};
  torch::nn::Linear c_proj{nullptr};
};
TORCH_MODULE(MLP);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const GPTConfig& config);
  torch::Tensor forward(torch::Tensor x);

 private:
  torch::nn::LayerNorm ln_1{nullptr};
  CausalSelfAttention attn{nullptr};
  torch::nn::LayerNorm ln_2{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

class GPTImpl : public StageModelImpl {
 public:
  // Builds stage `stage` and initializes it from `seed`. Initialization is keyed by parameter
  // name, so a stage holds exactly the values the whole model has under the same seed.
  GPTImpl(const GPTConfig& config, StageSpec stage = {}, uint64_t seed = 1337);

  torch::Tensor forward(const torch::Tensor& input) override;

 private:
  torch::nn::Embedding wte{nullptr};   // token embeddings (stage 0)
  torch::nn::Embedding wpe{nullptr};   // position embeddings (stage 0)
  torch::nn::ModuleDict h{nullptr};    // blocks, keyed by global layer index
  std::vector<Block> blocks_;          // the same blocks in order, for forward
  torch::nn::LayerNorm ln_f{nullptr};  // final norm (last stage)
  torch::nn::Linear lm_head{nullptr};  // head (last stage), absent when tied to wte
};
TORCH_MODULE(GPT);

}  // namespace swarmrt::model
