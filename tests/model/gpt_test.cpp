#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <map>

#include "model/gpt.hpp"
#include "test_util.hpp"

using namespace swarmrt::model;
using swarmrt::testing::micro_gpt;

namespace {
torch::Tensor random_ids(int64_t B, int64_t T, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randint(0, 256, {B, T}, torch::kLong);
}
}  // namespace

TEST(GPT, CausalMaskHidesTheFuture) {
  GPT model(micro_gpt(), StageSpec{}, 7);
  auto ids = random_ids(2, 16, 1);
  auto changed = ids.clone();
  const int64_t t = 9;
  changed.index_put_({torch::indexing::Slice(), t},
                     (ids.index({torch::indexing::Slice(), t}) + 1) % 256);
  torch::NoGradGuard no_grad;
  auto a = model->forward(ids), b = model->forward(changed);
  using torch::indexing::Slice;
  // Positions before t cannot see the change...
  EXPECT_TRUE(torch::equal(a.index({Slice(), Slice(0, t)}), b.index({Slice(), Slice(0, t)})));
  // ...positions from t on do (the model is not ignoring its input).
  EXPECT_FALSE(torch::allclose(a.index({Slice(), Slice(t)}), b.index({Slice(), Slice(t)})));
}

TEST(GPT, ShapesAndParameterNames) {
  GPT model(micro_gpt(), StageSpec{}, 7);
  auto logits = model->forward(random_ids(3, 10, 2));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 10, 256}));
  auto names = model->named_parameters().keys();
  EXPECT_NE(std::find(names.begin(), names.end(), "h.3.attn.c_attn.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "lm_head.weight"), names.end());
  // Untied head: no bias, separate from the token embedding.
  EXPECT_EQ(std::find(names.begin(), names.end(), "lm_head.bias"), names.end());
  EXPECT_NE(model->named_parameters()["lm_head.weight"].data_ptr(),
            model->named_parameters()["wte.weight"].data_ptr());
}

TEST(GPT, StageLayersAreContiguousAndCoverTheModel) {
  for (int64_t L : {1, 4, 7, 12})
    for (int64_t S = 1; S <= L; ++S) {
      int64_t next = 0;
      for (int64_t k = 0; k < S; ++k) {
        auto [b, e] = stage_layers(L, {k, S});
        EXPECT_EQ(b, next);
        EXPECT_GE(e - b, L / S);
        EXPECT_LE(e - b, L / S + 1);
        next = e;
      }
      EXPECT_EQ(next, L);
    }
  EXPECT_THROW(stage_layers(4, {0, 5}), c10::Error);
}

// Chained stage forwards equal the whole model's logits, and pipeline-style backward (each
// stage backpropagates the gradient the next one sends it) gives the whole model's gradients.
class StagePartition : public ::testing::TestWithParam<int64_t> {};

TEST_P(StagePartition, MatchesWholeModel) {
  const int64_t S = GetParam();
  const uint64_t seed = 42;
  auto ids = random_ids(2, 16, 3);
  auto targets = random_ids(2, 16, 4);

  GPT whole(micro_gpt(), StageSpec{}, seed);
  auto whole_logits = whole->forward(ids);
  lm_loss(whole_logits, targets).backward();
  std::map<std::string, torch::Tensor> whole_params, whole_grads;
  for (auto& p : whole->named_parameters()) {
    whole_params[p.key()] = p.value().detach();
    whole_grads[p.key()] = p.value().grad();
  }

  std::vector<GPT> stages;
  for (int64_t k = 0; k < S; ++k) stages.emplace_back(micro_gpt(), StageSpec{k, S}, seed);
  // Forward, keeping each stage's input (a leaf that collects the gradient) and output.
  std::vector<torch::Tensor> inputs, outputs;
  torch::Tensor x = ids;
  for (int64_t k = 0; k < S; ++k) {
    auto in = k == 0 ? x : x.detach().requires_grad_(true);
    inputs.push_back(in);
    outputs.push_back(stages[k]->forward(in));
    x = outputs.back();
  }
  EXPECT_TRUE(torch::allclose(x, whole_logits, 1e-5, 1e-5));
  // Backward, last stage first, sending the input gradient upstream.
  lm_loss(outputs.back(), targets).backward();
  for (int64_t k = S - 2; k >= 0; --k) outputs[k].backward(inputs[k + 1].grad());

  size_t seen = 0;
  for (auto& stage : stages)
    for (auto& p : stage->named_parameters()) {
      ++seen;
      ASSERT_TRUE(whole_params.count(p.key())) << p.key();
      EXPECT_TRUE(torch::equal(p.value(), whole_params[p.key()])) << "init differs: " << p.key();
      EXPECT_TRUE(torch::allclose(p.value().grad(), whole_grads[p.key()], 1e-5, 1e-5))
          << "gradient differs: " << p.key();
    }
  EXPECT_EQ(seen, whole_params.size());  // stages own disjoint parameters covering the model
}

INSTANTIATE_TEST_SUITE_P(S1to4, StagePartition, ::testing::Values(1, 2, 3, 4));

TEST(GPT, RejectsWrongInputs) {
  GPT first(micro_gpt(), StageSpec{0, 2}, 1), second(micro_gpt(), StageSpec{1, 2}, 1);
  EXPECT_THROW(first->forward(torch::zeros({2, 8, 32})), c10::Error);  // hidden into stage 0
  EXPECT_THROW(second->forward(torch::zeros({2, 8}, torch::kLong)),
               c10::Error);  // ids into stage 1
  EXPECT_THROW(first->forward(torch::zeros({1, 17}, torch::kLong)), c10::Error);  // > block_size
}
