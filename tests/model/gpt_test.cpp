#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include "model/gpt.hpp"
#include "test_util.hpp"

using namespace swarmrt::model;
using namespace swarmrt::config;
using swarmrt::testing::micro_gpt;

using swarmrt::testing::random_ids;

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
  // The count the balancer, the simulator and the frame limit use is the module's own.
  EXPECT_EQ(model->num_parameters(), static_cast<int64_t>(micro_gpt().parameters()));
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
  EXPECT_THROW(stage_layers(4, {0, 5}), std::invalid_argument);
}

TEST(GPT, RejectsWrongInputs) {
  GPT first(micro_gpt(), StageSpec{0, 2}, 1), second(micro_gpt(), StageSpec{1, 2}, 1);
  EXPECT_THROW(first->forward(torch::zeros({2, 8, 32})), c10::Error);  // hidden into stage 0
  EXPECT_THROW(second->forward(torch::zeros({2, 8}, torch::kLong)),
               c10::Error);  // ids into stage 1
  EXPECT_THROW(first->forward(torch::zeros({1, 17}, torch::kLong)), c10::Error);  // > block_size
}
