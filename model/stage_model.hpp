// One pipeline stage of a language model, whatever its architecture: stage 0 takes token ids,
// later stages take hidden states, the last returns logits. Workers, replicas, the trainer
// and the sampler hold a StageModel and never ask which block it is built from; the
// architectures themselves are model/gpt.hpp (GPT-2) and model/llama.hpp (Llama).
//
// Parameter names are global ("h.3.…" or "layers.3.…" belongs to layer 3 in whichever stage
// holds it), so a checkpoint of the whole model maps onto stages and back.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "config/config.hpp"
#include "model/stage_spec.hpp"

namespace swarmrt::model {

class StageModelImpl : public torch::nn::Module {
 public:
  StageModelImpl(const config::ModelConfig& config, StageSpec stage);

  // Stage 0 takes token ids [B, T] (int64); later stages take hidden states [B, T, n_embd].
  // The last stage returns logits [B, T, vocab]; others return hidden states.
  virtual torch::Tensor forward(const torch::Tensor& input) = 0;

  const config::ModelConfig& config() const { return config_; }
  StageSpec stage() const { return stage_; }
  std::pair<int64_t, int64_t> layers() const { return layers_; }
  int64_t num_parameters() const;

 protected:
  // Checks what forward was given against what this stage takes, naming the mismatch.
  void check_input(const torch::Tensor& input) const;

 private:
  config::ModelConfig config_;
  StageSpec stage_;
  std::pair<int64_t, int64_t> layers_;
};
TORCH_MODULE(StageModel);

// Stage `stage` of the model `config.arch` names, initialized from `seed`. Initialization is
// keyed by parameter name, so a stage holds exactly the values the whole model has under the
// same seed.
StageModel make_stage_model(const config::ModelConfig& config, StageSpec stage, uint64_t seed);

// Mean cross-entropy of logits [B, T, V] against targets [B, T].
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets);

// Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V with future positions masked out, the core
// both blocks share. q, k, v: [B, n_head, T, hs]; future: [>= T, >= T] bool, true above the
// diagonal (future_mask). Returns [B, n_head, T, hs]. Where the LibTorch has
// scaled_dot_product_attention (>= 2.0) it computes this, else causal_attention_math.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& future);
// The same as written in the paper: the [T, T] scores, masked, softmax, times V.
torch::Tensor causal_attention_math(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, const torch::Tensor& future);
// The mask causal_attention takes for contexts up to block_size: true above the diagonal, or
// an undefined tensor where its kernel masks by itself.
torch::Tensor future_mask(int64_t block_size);
// Which attention causal_attention runs in this build: "scaled_dot_product_attention" or "math".
const char* attention_kernel();

// nanoGPT's initialization, drawn from a generator seeded by (seed, parameter name): norms'
// gains 1, biases 0, matrices N(0, 0.02), the projections back into the residual stream
// (GPT-2's c_proj, Llama's wo and w2) N(0, 0.02 / sqrt(2 n_layer)).
void init_parameters(torch::nn::Module& module, int64_t n_layer, uint64_t seed);

}  // namespace swarmrt::model
