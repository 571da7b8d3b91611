// What every architecture's stages must do alike: chained stages compute the whole model.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/version.h>
#include <map>

#include "model/stage_cost.hpp"
#include "model/stage_model.hpp"
#include "test_util.hpp"

using namespace swarmrt::model;
using namespace swarmrt::config;

namespace {
ModelConfig micro(Arch arch) {
  ModelConfig m = swarmrt::testing::micro_gpt();
  m.arch = arch;
  return m;
}
}  // namespace
using swarmrt::testing::random_ids;

// Chained stage forwards equal the whole model's logits, and pipeline-style backward (each
// stage backpropagates the gradient the next one sends it) gives the whole model's gradients.
class StagePartition : public ::testing::TestWithParam<std::tuple<Arch, int64_t>> {};

TEST_P(StagePartition, MatchesWholeModel) {
  const auto [arch, S] = GetParam();
  const uint64_t seed = 42;
  auto ids = random_ids(2, 16, 3);
  auto targets = random_ids(2, 16, 4);

  auto whole = make_stage_model(micro(arch), StageSpec{}, seed);
  auto whole_logits = whole->forward(ids);
  lm_loss(whole_logits, targets).backward();
  std::map<std::string, torch::Tensor> whole_params, whole_grads;
  for (auto& p : whole->named_parameters()) {
    whole_params[p.key()] = p.value().detach();
    whole_grads[p.key()] = p.value().grad();
  }

  std::vector<StageModel> stages;
  for (int64_t k = 0; k < S; ++k) stages.push_back(make_stage_model(micro(arch), {k, S}, seed));
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

INSTANTIATE_TEST_SUITE_P(S1to4, StagePartition,
                         ::testing::Combine(::testing::Values(Arch::gpt2, Arch::llama),
                                            ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           return name_of(std::get<0>(info.param)) + "_" +
                                  std::to_string(std::get<1>(info.param));
                         });

// What both blocks must do: see no future position, and tie the head to the embeddings.
class Blocks : public ::testing::TestWithParam<Arch> {};

TEST_P(Blocks, CausalMaskHidesTheFuture) {
  auto model = make_stage_model(micro(GetParam()), StageSpec{}, 7);
  auto ids = random_ids(2, 16, 1);
  auto changed = ids.clone();
  const int64_t t = 9;
  using torch::indexing::Slice;
  changed.index_put_({Slice(), t}, (ids.index({Slice(), t}) + 1) % 256);
  torch::NoGradGuard no_grad;
  auto a = model->forward(ids), b = model->forward(changed);
  // Positions before t cannot see the change...
  EXPECT_TRUE(torch::equal(a.index({Slice(), Slice(0, t)}), b.index({Slice(), Slice(0, t)})));
  // ...positions from t on do (the model is not ignoring its input).
  EXPECT_FALSE(torch::allclose(a.index({Slice(), Slice(t)}), b.index({Slice(), Slice(t)})));
}

TEST_P(Blocks, TiedHeadIsTheTokenEmbedding) {
  auto config = micro(GetParam());
  config.tie_embeddings = true;
  auto model = make_stage_model(config, StageSpec{}, 7);
  const bool gpt = GetParam() == Arch::gpt2;
  EXPECT_FALSE(model->named_parameters().contains(gpt ? "lm_head.weight" : "output.weight"));
  EXPECT_EQ(model->num_parameters(), static_cast<int64_t>(config.parameters()));
  torch::NoGradGuard no_grad;
  auto ids = random_ids(1, 4, 5);
  // The logits are the last hidden state times the embedding: changing its row v moves logit v.
  auto before = model->forward(ids);
  model->named_parameters()[gpt ? "wte.weight" : "tok_embeddings.weight"][200].add_(1.0);
  EXPECT_FALSE(torch::allclose(before.select(-1, 200), model->forward(ids).select(-1, 200)));
}

INSTANTIATE_TEST_SUITE_P(StageModel, Blocks, ::testing::Values(Arch::gpt2, Arch::llama),
                         [](const auto& info) { return name_of(info.param); });

TEST(StageModel, BuildsTheArchitectureTheConfigNames) {
  auto gpt = make_stage_model(micro(Arch::gpt2), {}, 1);
  auto llama = make_stage_model(micro(Arch::llama), {}, 1);
  EXPECT_TRUE(gpt->named_parameters().contains("wte.weight"));
  EXPECT_TRUE(llama->named_parameters().contains("tok_embeddings.weight"));
  EXPECT_EQ(llama->config().arch, Arch::llama);
}

TEST(StageModel, TiedEmbeddingsNeedOneStage) {
  auto m = micro(Arch::llama);
  m.tie_embeddings = true;
  EXPECT_NO_THROW(make_stage_model(m, {}, 1));
  EXPECT_THROW(make_stage_model(m, {0, 2}, 1), c10::Error);
}

// The balancer's and the simulator's stage sizes (model/stage_cost.hpp) are the modules' own,
// for every stage of every partition of either architecture.
TEST(StageModel, StageCostCountsTheStagesParameters) {
  for (auto arch : {Arch::gpt2, Arch::llama})
    for (int64_t S = 1; S <= 4; ++S) {
      RunConfig c;
      c.model = micro(arch);
      c.swarm.stages = S;
      for (int64_t k = 0; k < S; ++k)
        EXPECT_EQ(stage_parameters(c, k),
                  static_cast<double>(make_stage_model(c.model, {k, S}, 1)->num_parameters()))
            << name_of(arch) << " stage " << k << " of " << S;
      const auto cost = stage_costs(c);
      double sum = 0;
      for (double x : cost) sum += x;
      EXPECT_NEAR(sum, static_cast<double>(S), 1e-9);
      if (S > 1 && c.model.n_layer % S == 0) {  // equal blocks: the head makes the last dearer
        EXPECT_GT(cost.back(), cost.front());
      }
    }
}

// The attention both blocks run: scaled_dot_product_attention where this LibTorch has it (2.0
// on), the paper's math otherwise. Both compute the same values and gradients (float32, within
// 1e-5), at full context and shorter, and the build says which one it runs.
TEST(Attention, TheKernelComputesThePapersMath) {
  EXPECT_STREQ(attention_kernel(),
               TORCH_VERSION_MAJOR >= 2 ? "scaled_dot_product_attention" : "math");
  EXPECT_EQ(future_mask(16).defined(), TORCH_VERSION_MAJOR < 2);
  const auto future = torch::ones({16, 16}, torch::kBool).triu(1);
  for (int64_t T : {16, 5}) {
    torch::manual_seed(T);
    auto q = torch::randn({2, 3, T, 8}, torch::requires_grad());
    auto k = torch::randn({2, 3, T, 8}, torch::requires_grad());
    auto v = torch::randn({2, 3, T, 8}, torch::requires_grad());
    auto y = causal_attention(q, k, v, future_mask(16));
    auto seed = torch::randn_like(y);
    auto grads = torch::autograd::grad({y}, {q, k, v}, {seed});
    auto ref = causal_attention_math(q, k, v, future);
    auto ref_grads = torch::autograd::grad({ref}, {q, k, v}, {seed});
    EXPECT_TRUE(torch::allclose(y, ref, 1e-5, 1e-5)) << "T=" << T;
    for (size_t i = 0; i < 3; ++i)
      EXPECT_TRUE(torch::allclose(grads[i], ref_grads[i], 1e-5, 1e-5))
          << "T=" << T << " grad " << i;
    // Causal: the first position attends to itself only.
    EXPECT_TRUE(torch::allclose(y.select(2, 0), v.select(2, 0), 1e-6, 1e-6)) << "T=" << T;
  }
}
