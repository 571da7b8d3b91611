// GPT-2 style language model (Radford et al. 2019), written to be checked against the paper
// and nanoGPT's model.py line by line: pre-LayerNorm blocks, causal self-attention, GELU MLP
// of width 4*d, learned positional embeddings, final LayerNorm and an untied LM head.
//
// The model is built as stage k of S (SWARM's pipeline stage): stage 0 owns the token and
// position embeddings, the last stage owns the final LayerNorm and the head, and every stage
// owns a contiguous block of layers. The whole model is simply stage 0 of 1. Parameter names
// are global ("h.3.attn.c_attn.weight" belongs to layer 3 in whichever stage holds it), so a
// checkpoint of the whole model maps onto stages and back.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "model/config.hpp"

namespace swarmrt::model {

struct GPTConfig {
  int64_t vocab_size = 256;
  int64_t block_size = 128;
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;

  static GPTConfig from(const ModelConfig& m) {
    return {m.vocab_size, m.block_size, m.n_layer, m.n_head, m.n_embd};
  }
};

// Which part of the model a module holds: stage `index` of `count`.
struct StageSpec {
  int64_t index = 0;
  int64_t count = 1;
  bool first() const { return index == 0; }
  bool last() const { return index == count - 1; }
};

// Layers [begin, end) of stage `stage.index`: contiguous, sizes differing by at most one,
// earlier stages take the extra layers (stage 0 also carries the embeddings, the last stage
// the head, so this keeps the ends from being the slowest).
std::pair<int64_t, int64_t> stage_layers(int64_t n_layer, StageSpec stage);

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  explicit CausalSelfAttentionImpl(const GPTConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t n_head_, n_embd_;
  torch::nn::Linear c_attn{nullptr};  // query, key, value projections for all heads at once
  torch::nn::Linear c_proj{nullptr};  // output projection
  torch::Tensor future_;              // true above the diagonal: position t must not see t' > t
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

class GPTImpl : public torch::nn::Module {
 public:
  // Builds stage `stage` and initializes it from `seed`. Initialization is keyed by parameter
  // name, so a stage holds exactly the values the whole model has under the same seed.
  GPTImpl(const GPTConfig& config, StageSpec stage = {}, uint64_t seed = 1337);

  // Stage 0 takes token ids [B, T] (int64); later stages take hidden states [B, T, n_embd].
  // The last stage returns logits [B, T, vocab]; others return hidden states.
  torch::Tensor forward(const torch::Tensor& input);

  const GPTConfig& config() const { return config_; }
  StageSpec stage() const { return stage_; }
  std::pair<int64_t, int64_t> layers() const { return layers_; }
  int64_t num_parameters() const;

 private:
  GPTConfig config_;
  StageSpec stage_;
  std::pair<int64_t, int64_t> layers_;
  torch::nn::Embedding wte{nullptr};   // token embeddings (stage 0)
  torch::nn::Embedding wpe{nullptr};   // position embeddings (stage 0)
  torch::nn::ModuleDict h{nullptr};    // blocks, keyed by global layer index
  std::vector<Block> blocks_;          // the same blocks in order, for forward
  torch::nn::LayerNorm ln_f{nullptr};  // final norm (last stage)
  torch::nn::Linear lm_head{nullptr};  // untied head (last stage)
};
TORCH_MODULE(GPT);

// Mean cross-entropy of logits [B, T, V] against targets [B, T].
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets);

// nanoGPT's initialization, drawn from a generator seeded by (seed, parameter name).
void init_parameters(torch::nn::Module& module, int64_t n_layer, uint64_t seed);

}  // namespace swarmrt::model
