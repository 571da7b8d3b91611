// The Llama block against values computed by hand and the properties its papers state.
#include <gtest/gtest.h>

#include "config/config.hpp"
#include "model/llama.hpp"
#include "test_util.hpp"

using namespace swarmrt::model;
using namespace swarmrt::config;

namespace {
ModelConfig micro_llama() {
  ModelConfig m = swarmrt::testing::micro_gpt();  // 4 layers, 2 heads, d = 32, T = 16
  m.arch = Arch::llama;
  return m;
}
}  // namespace
using swarmrt::testing::random_ids;

// head_size 4: theta = (1, 10000^(-1/2) = 0.01). x = (1, 2, 3, 4) at position 2 turns its
// first pair by 2 rad and its second by 0.02 rad:
//   (1 cos 2 - 2 sin 2, 1 sin 2 + 2 cos 2)       = (-2.2347417, 0.0770038)
//   (3 cos .02 - 4 sin .02, 3 sin .02 + 4 cos .02) = ( 2.9194054, 4.0591960)
// and is left alone at position 0.
TEST(Llama, RotaryEmbeddingMatchesHandComputedValues) {
  RotaryEmbedding rope(4, 8);
  auto x = torch::tensor({1.f, 2.f, 3.f, 4.f}).repeat({3, 1}).view({1, 1, 3, 4});  // t = 0, 1, 2
  auto y = rope.apply(x);
  EXPECT_TRUE(torch::allclose(y[0][0][0], torch::tensor({1.f, 2.f, 3.f, 4.f})));
  const auto expected = torch::tensor({-2.2347417f, 0.0770038f, 2.9194054f, 4.0591960f});
  EXPECT_TRUE(torch::allclose(y[0][0][2], expected, 1e-6, 1e-6)) << y[0][0][2];
  // A rotation: every pair keeps its length.
  EXPECT_NEAR(y[0][0][1].norm().item<double>(), std::sqrt(30.0), 1e-5);
}

// RoPE's point: q_m . k_n depends on m and n only through m - n.
TEST(Llama, RotaryScoresDependOnRelativePosition) {
  RotaryEmbedding rope(8, 16);
  torch::manual_seed(3);
  auto q = torch::randn({8}), k = torch::randn({8});
  auto at = [&](const torch::Tensor& v, int64_t t) {
    return rope.apply(v.repeat({16, 1}).view({1, 1, 16, 8}))[0][0][t];
  };
  const double near = torch::dot(at(q, 5), at(k, 3)).item<double>();
  EXPECT_NEAR(torch::dot(at(q, 12), at(k, 10)).item<double>(), near, 1e-5);
  EXPECT_GT(std::abs(torch::dot(at(q, 12), at(k, 3)).item<double>() - near), 1e-3);
}

// x = (3, 4): mean(x^2) = 12.5, so RMSNorm(x) = x / sqrt(12.5) = (0.8485281, 1.1313708).
TEST(Llama, RMSNormMatchesHandComputedValues) {
  RMSNorm norm(2, 0.0);
  auto y = norm(torch::tensor({{3.f, 4.f}}));
  EXPECT_TRUE(torch::allclose(y, torch::tensor({{0.8485281f, 1.1313708f}}), 1e-6, 1e-6)) << y;
}

TEST(Llama, ShapesNamesAndNoBiases) {
  const auto config = micro_llama();
  Llama model(config, StageSpec{}, 7);
  auto logits = model->forward(random_ids(3, 10, 2));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 10, 256}));
  const auto params = model->named_parameters();
  for (const char* name : {"tok_embeddings.weight", "layers.3.attention.wq.weight",
                           "layers.0.attention.wo.weight", "layers.2.feed_forward.w1.weight",
                           "layers.2.feed_forward.w3.weight", "layers.1.attention_norm.weight",
                           "layers.1.ffn_norm.weight", "norm.weight", "output.weight"})
    EXPECT_TRUE(params.contains(name)) << name;
  for (const auto& p : params) {
    EXPECT_EQ(p.key().find("bias"), std::string::npos) << p.key();
    EXPECT_EQ(p.key().find("wpe"), std::string::npos) << "positions are rotary, not learned";
  }
  // SwiGLU width: 2/3 of 4d rounded up to a multiple of 32 (d = 32: 85.3 -> 96).
  EXPECT_EQ(params["layers.0.feed_forward.w1.weight"].size(0), 96);
  EXPECT_EQ(model->num_parameters(), static_cast<int64_t>(config.parameters()));
  // Norm gains start at 1; residual projections are drawn narrower than the others.
  EXPECT_TRUE(torch::equal(params["norm.weight"], torch::ones({32})));
  EXPECT_LT(params["layers.0.attention.wo.weight"].std().item<double>(),
            0.8 * params["layers.0.attention.wq.weight"].std().item<double>());
}

// The presets: llama-tiny is the tiny model's shape, llama-small about 100M parameters.
TEST(Llama, PresetSizes) {
  const auto tiny = model_preset("llama-tiny"), gpt_tiny = model_preset("tiny");
  EXPECT_EQ(tiny.arch, Arch::llama);
  EXPECT_EQ(tiny.n_embd, gpt_tiny.n_embd);
  EXPECT_EQ(tiny.n_layer, gpt_tiny.n_layer);
  EXPECT_EQ(tiny.block_size, gpt_tiny.block_size);
  const auto small = model_preset("llama-small");
  EXPECT_EQ(small.vocab_size, 32768);
  EXPECT_EQ(small.parameters(), 101'432'960u);  // 12 x 4.96M per block + 2 x 32768 x 640
}
