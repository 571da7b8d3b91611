// swarmrt sample --checkpoint DIR|FILE --prompt TEXT [--tokens N --temperature T --top-k K]
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <filesystem>

#include "apps/commands.hpp"
#include "model/sampling.hpp"
#include "model/trainer.hpp"

namespace swarmrt::apps {
namespace {
namespace fs = std::filesystem;

// The tokenizer a checkpoint's ids are read with: none for bytes; for tokens the run
// directory's copy (train and coordinator keep one), else the data directory's.
std::string tokenizer_for(const std::string& checkpoint, const config::RunConfig& config) {
  if (config.data.format == config::DataFormat::bytes) return "";
  const fs::path p(checkpoint);
  std::vector<fs::path> candidates;
  if (fs::is_directory(p)) {
    candidates = {p / "tokenizer.model", p.parent_path() / "tokenizer.model"};
  } else {
    candidates = {p.parent_path() / "tokenizer.model",
                  p.parent_path().parent_path() / "tokenizer.model"};
  }
  candidates.push_back(fs::path(config.data.path) / "tokenizer.model");
  for (const auto& c : candidates)
    if (fs::exists(c)) return c.string();
  throw std::runtime_error(checkpoint +
                           ": trained on token shards, and no tokenizer.model was found beside "
                           "it or in data.path (" +
                           config.data.path + "); name one with --tokenizer");
}

}  // namespace

void add_sample_command(CLI::App& app, int& exit_code) {
  struct Args {
    std::string checkpoint, tokenizer, prompt = "The ";
    model::SampleOptions options;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("sample", "generate text from a checkpoint");
  cmd->add_option("--checkpoint", args->checkpoint, "checkpoint file, or a run directory")
      ->required();
  cmd->add_option("--prompt", args->prompt, "text to continue");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer.model of a run on token shards (default: the run's own)");
  cmd->add_option("--tokens", args->options.tokens, "tokens to generate (bytes for byte data)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", args->options.temperature, "0 = greedy")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", args->options.top_k, "keep the k most likely tokens (0 = all)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--seed", args->options.seed, "sampling seed");
  cmd->callback([args, &exit_code] {
    try {
      config::RunConfig config;
      auto model = model::load_model(args->checkpoint, &config);
      const auto tokenizer = model::open_tokenizer(
          args->tokenizer.empty() ? tokenizer_for(args->checkpoint, config) : args->tokenizer);
      std::printf("%s%s\n", args->prompt.c_str(),
                  model::generate(model, *tokenizer, args->prompt, args->options).c_str());
      exit_code = 0;
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace swarmrt::apps
