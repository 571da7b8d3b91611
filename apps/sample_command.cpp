// swarmrt sample --checkpoint DIR|FILE --prompt TEXT [--tokens N --temperature T --top-k K]
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "apps/commands.hpp"
#include "model/sampling.hpp"
#include "model/trainer.hpp"

namespace swarmrt::apps {

void add_sample_command(CLI::App& app, int& exit_code) {
  struct Args {
    std::string checkpoint, prompt = "The ";
    model::SampleOptions options;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("sample", "generate text from a checkpoint");
  cmd->add_option("--checkpoint", args->checkpoint, "checkpoint file, or a run directory")
      ->required();
  cmd->add_option("--prompt", args->prompt, "text to continue");
  cmd->add_option("--tokens", args->options.tokens, "bytes to generate")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--temperature", args->options.temperature, "0 = greedy")
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--top-k", args->options.top_k, "keep the k most likely bytes (0 = all)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--seed", args->options.seed, "sampling seed");
  cmd->callback([args, &exit_code] {
    try {
      auto model = model::load_model(args->checkpoint);
      std::printf("%s%s\n", args->prompt.c_str(),
                  model::generate(model, args->prompt, args->options).c_str());
      exit_code = 0;
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
      exit_code = 1;
    }
  });
}

}  // namespace swarmrt::apps
