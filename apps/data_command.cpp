// swarmrt data prepare --input FILE... (--vocab N | --tokenizer FILE.model) --out DIR
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "apps/commands.hpp"
#include "tokens/prepare.hpp"

namespace swarmrt::apps {

void add_data_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<tokens::PrepareOptions>();
  auto* data = app.add_subcommand("data", "prepare training data");
  data->require_subcommand(1);
  auto* prepare = data->add_subcommand(
      "prepare",
      "train a BPE tokenizer on text (or take one) and write token shards a run trains on with "
      "--set data.path=DIR --set data.format=tokens");
  prepare->add_option("--input", options->inputs, "text files or directories")
      ->required()
      ->check(CLI::ExistingPath);
  prepare->add_option("--out", options->out, "directory to create (absent or empty)")->required();
  auto* vocab = prepare
                    ->add_option("--vocab", options->vocab_size,
                                 "pieces of the tokenizer to train (model.vocab_size >= it)")
                    ->check(CLI::Range(int64_t(260), int64_t(1) << 20));
  prepare
      ->add_option("--tokenizer", options->tokenizer,
                   "an existing SentencePiece tokenizer.model instead of training one")
      ->check(CLI::ExistingFile)
      ->excludes(vocab);
  prepare
      ->add_option("--val-fraction", options->val_fraction,
                   "tail of the text held out as the validation shard")
      ->check(CLI::Range(0.0, 1.0));
  prepare->add_option("--shard-tokens", options->shard_tokens, "tokens per training shard")
      ->check(CLI::Range(int64_t(2), int64_t(INT32_MAX)));
  prepare->add_option("--threads", options->threads, "threads of the tokenizer's training")
      ->check(CLI::Range(1, 256));
  prepare->callback([options, &exit_code] {
    try {
      const auto r = tokens::prepare(*options);
      std::printf(
          "prepared %s: tokenizer of %lld pieces; %lld training tokens (%.3f bytes a token) in "
          "%zu shard(s), %lld validation tokens (%.3f bytes a token)\n"
          "train on it with: --set data.path=%s --set data.format=tokens (the model takes its "
          "%lld pieces as model.vocab_size)\n",
          options->out.c_str(), static_cast<long long>(r.vocab_size),
          static_cast<long long>(r.train_tokens),
          double(r.train_bytes) / double(std::max<int64_t>(1, r.train_tokens)), r.shards.size() - 1,
          static_cast<long long>(r.val_tokens),
          double(r.val_bytes) / double(std::max<int64_t>(1, r.val_tokens)), options->out.c_str(),
          static_cast<long long>(r.vocab_size));
      exit_code = 0;
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace swarmrt::apps
