// Sparse warm-up gradients (model/sparse_grads.hpp): what a worker leaves unsent arrives in
// later steps, every worker sums the same answer to the same gradient, and the averager and
// the workers refuse malformed wires and answers with the reason.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "model/sparse_grads.hpp"

using namespace swarmrt;

namespace {

at::Tensor seeded(at::IntArrayRef shape, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, gen, at::kFloat);
}

const model::TopK kSparse{0.05, 2, 64};

}  // namespace

// Error feedback: after T steps the decoded sum of what was sent plus the residual left is the
// sum of the T gradients (to float rounding), though each step sends 5% of the values.
TEST(SparseGrads, WhatAStepLeavesUnsentArrivesLater) {
  std::vector<at::Tensor> residual;
  at::Tensor sent = at::zeros({300}), total = at::zeros({300});
  for (uint64_t step = 0; step < 40; ++step) {
    const std::vector<at::Tensor> grads{seeded({20, 15}, step)};
    const auto wires = model::encode_sparse_grads(grads, residual, kSparse);
    ASSERT_EQ(wires.size(), 1u);
    EXPECT_EQ(static_cast<uint64_t>(wires[0].numel()), model::topk_bytes(300, kSparse));
    sent += model::decode_topk(wires[0], kSparse, {300});
    total += grads[0].reshape({-1});
    EXPECT_LE(model::decode_topk(wires[0], kSparse, {300}).ne(0).sum().item<int64_t>(),
              5 * 4);  // ⌈0.05·64⌉ = 4 per chunk of 64, 5 chunks
  }
  EXPECT_TRUE(at::allclose(sent + residual[0], total, 1e-4, 1e-4));
  // Without the residual, far from it: much of the mass still waits in it (44% here).
  EXPECT_GT((total - sent).abs().sum().item<double>(), 0.2 * total.abs().sum().item<double>());
}

// The averager's answer holds two workers' wires and the scale 4/3 (a sample lost): every
// worker sums it to scale x (the first's decoded + the second's), in its parameters' shapes.
TEST(SparseGrads, EveryWorkerSumsTheAnswerToTheSameGradient) {
  const std::vector<at::Tensor> like{at::zeros({4, 25}), at::zeros({7})};
  std::vector<at::Tensor> r1, r2;
  const auto w1 = model::encode_sparse_grads({seeded({4, 25}, 1), seeded({7}, 2)}, r1, kSparse);
  const auto w2 = model::encode_sparse_grads({seeded({4, 25}, 3), seeded({7}, 4)}, r2, kSparse);
  const auto answer = model::sparse_answer(4.0 / 3.0, {&w1, &w2});
  ASSERT_EQ(answer.size(), 5u);
  const auto a = model::sum_sparse_answer(answer, kSparse, like);
  const auto b = model::sum_sparse_answer(answer, kSparse, like);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].sizes(), like[0].sizes());
  EXPECT_TRUE(at::equal(a[0], b[0]) && at::equal(a[1], b[1]));
  const auto want =
      (model::decode_topk(w1[0], kSparse, {4, 25}) + model::decode_topk(w2[0], kSparse, {4, 25})) *
      static_cast<float>(4.0 / 3.0);
  EXPECT_TRUE(at::allclose(a[0], want, 1e-6, 1e-6));
}

// The averager checks a worker's wires against the first accepted worker's values: a wire
// count, a wire cut short, one of another tensor's size and a NaN gradient are refused with
// the reason; and a worker refuses an answer that is not a scale and whole sets of wires.
TEST(SparseGrads, MalformedWiresAndAnswersAreRefusedWithTheReason) {
  std::vector<at::Tensor> r;
  const auto good = model::encode_sparse_grads({seeded({100}, 1), seeded({7}, 2)}, r, kSparse);
  std::vector<int64_t> numels;
  EXPECT_EQ(model::check_sparse_grads(good, kSparse, numels), "");
  EXPECT_EQ(numels, (std::vector<int64_t>{100, 7}));
  EXPECT_NE(model::check_sparse_grads({good[0]}, kSparse, numels)
                .find("1 sparse gradients, "
                      "expected 2"),
            std::string::npos);
  auto cut = good;
  cut[1] = good[1].narrow(0, 0, good[1].numel() - 1).clone();
  EXPECT_NE(model::check_sparse_grads(cut, kSparse, numels).find("sparse gradient #1"),
            std::string::npos);
  auto other = good;
  std::vector<at::Tensor> fresh;
  other[0] = model::encode_sparse_grads({seeded({90}, 5)}, fresh, kSparse)[0];
  EXPECT_NE(model::check_sparse_grads(other, kSparse, numels).find("sparse gradient #0"),
            std::string::npos);
  std::vector<at::Tensor> r2;
  auto poisoned = seeded({100}, 6);
  poisoned[3] = std::numeric_limits<float>::quiet_NaN();
  const auto nan = model::encode_sparse_grads({poisoned, seeded({7}, 7)}, r2, kSparse);
  EXPECT_NE(model::check_sparse_grads(nan, kSparse, numels).find("NaN"), std::string::npos);
  EXPECT_FALSE(r2[0].defined()) << "a NaN gradient must not become the residual";
  EXPECT_TRUE(r2[1].defined());
  const std::vector<at::Tensor> like{at::zeros({100}), at::zeros({7})};
  const auto answer = model::sparse_answer(1.0, {&good});
  EXPECT_NO_THROW(model::sum_sparse_answer(answer, kSparse, like));
  const std::vector<at::Tensor> short_answer(answer.begin(), answer.end() - 1);
  EXPECT_THROW(model::sum_sparse_answer(short_answer, kSparse, like), std::invalid_argument);
  auto negative = answer;
  negative[0] = at::full({1}, -1.0f);
  EXPECT_THROW(model::sum_sparse_answer(negative, kSparse, like), std::invalid_argument);
}
