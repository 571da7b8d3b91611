// Real training on the Brown corpus through the reference trainer.
#include <gtest/gtest.h>
#include <array>
#include <cmath>
#include <fstream>
#include <sstream>

#include "model/trainer.hpp"
#include "test_util.hpp"

using namespace swarmrt::model;
using namespace swarmrt::config;
using swarmrt::testing::short_train;
using swarmrt::testing::TempDir;

namespace {
std::string brown_prefix(size_t bytes) {
  std::ifstream in(swarmrt::testing::test_data_path(), std::ios::binary);
  std::string s(bytes, '\0');
  in.read(s.data(), static_cast<std::streamsize>(bytes));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

// Cross-entropy (nats/byte) of the best context-free model: the training text's byte
// frequencies scored on the validation text. A model below it has learned to use context.
double unigram_cross_entropy(const Corpus& c) {
  std::array<double, 256> counts{};
  const std::string train = swarmrt::testing::bytes_of(c.train());
  const std::string val = swarmrt::testing::bytes_of(c.val());
  for (unsigned char ch : train) counts[ch] += 1;
  double h = 0;
  const double n = static_cast<double>(train.size()) + 256;  // add-one smoothing
  for (unsigned char ch : val) h -= std::log((counts[ch] + 1) / n);
  return h / static_cast<double>(val.size());
}

RunConfig small_run(int64_t steps, Arch arch = Arch::gpt2) {
  RunConfig c;
  c.model = {"tiny", 2, 2, 32, 32, 256};
  c.model.arch = arch;
  c.train = short_train(steps, 4, 2, 2, 1e-3);
  c.checkpoint.every_steps = 3;
  return c;
}
}  // namespace

// Both architectures at the tiny size (the presets tiny and llama-tiny).
class Architectures : public ::testing::TestWithParam<Arch> {};

TEST_P(Architectures, TinyModelLearnsBrownBeyondUnigram) {
  auto corpus = Corpus::from_text(brown_prefix(2'000'000), 0.05);
  RunConfig c;
  c.model = model_preset(GetParam() == Arch::gpt2 ? "tiny" : "llama-tiny");
  c.train.steps = 40;
  c.train.micro_batch = 8;
  c.train.lr = 2e-3;
  c.train.warmup_steps = 10;
  c.train.eval_every = 0;
  c.train.eval_batches = 8;
  TrainOptions o;
  o.progress = false;
  const auto result = train_single(c, corpus, o);
  const double bound = unigram_cross_entropy(corpus);
  ASSERT_EQ(result.losses.size(), 40u);
  EXPECT_LT(result.losses.back(), result.losses.front());
  EXPECT_LT(result.val_loss, bound) << "validation loss " << result.val_loss
                                    << " does not beat the unigram cross-entropy " << bound;
  EXPECT_GT(bound, 2.5);  // sanity of the bound itself: English bytes carry > 2.5 nats unigram
}

TEST_P(Architectures, ResumeContinuesTheSameRun) {
  auto corpus = Corpus::from_text(brown_prefix(300'000), 0.05);
  TrainOptions quiet;
  quiet.progress = false;
  const Arch arch = GetParam();
  const auto full = train_single(small_run(6, arch), corpus, quiet);

  TempDir dir;
  {
    RunDir run(dir.str(), small_run(3, arch), RunStart::fresh);
    TrainOptions o = quiet;
    o.run = &run;
    train_single(small_run(3, arch), corpus, o);
  }
  RunDir run(dir.str(), small_run(6, arch), RunStart::resume);
  TrainOptions o = quiet;
  o.run = &run;
  o.resume = true;
  const auto resumed = train_single(small_run(6, arch), corpus, o);
  ASSERT_EQ(resumed.first_step, 4);
  ASSERT_EQ(resumed.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(resumed.losses[i], full.losses[3 + i], 1e-6 * full.losses[3 + i])
        << "step " << 4 + i;

  // The run directory holds the effective config, one metrics line per step and eval, and
  // the checkpoints; the model loaded back scores what the trainer reported.
  std::ifstream metrics(dir / "metrics.jsonl");
  std::string line;
  int steps = 0, evals = 0;
  while (std::getline(metrics, line)) {
    steps += line.find("\"event\":\"step\"") != std::string::npos;
    evals += line.find("\"event\":\"eval\"") != std::string::npos;
  }
  EXPECT_EQ(steps, 6);
  EXPECT_EQ(evals, 2);
  auto model = load_model(dir.str());
  EXPECT_EQ(model->config().arch, arch);
  Windows val(corpus.val(), 32);
  EXPECT_NEAR(evaluate(model, validation_batches(val, 2, 4)), resumed.val_loss, 1e-6);
  EXPECT_EQ(parse_config(
                std::string(
                    std::istreambuf_iterator<char>(std::ifstream(dir / "config.toml").rdbuf()), {}),
                "c")
                .train.steps,
            6);
}

INSTANTIATE_TEST_SUITE_P(Training, Architectures, ::testing::Values(Arch::gpt2, Arch::llama),
                         [](const auto& info) { return name_of(info.param); });

TEST(Training, RunDirRefusesToClobberARun) {
  TempDir dir;
  { RunDir run(dir.str(), small_run(3), RunStart::fresh); }
  EXPECT_THROW(RunDir(dir.str(), small_run(3), RunStart::fresh), std::runtime_error);
  TempDir empty;
  EXPECT_THROW(RunDir(empty.str(), small_run(3), RunStart::resume), std::runtime_error);
}
