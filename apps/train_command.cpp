// swarmrt train --config FILE [--set section.key=value ...] [--out DIR] [--resume|--overwrite]
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>

#include "actors/runtime/runtime.hpp"
#include "apps/commands.hpp"
#include "apps/options.hpp"
#include "config/config.hpp"
#include "config/fingerprint.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/precision.hpp"
#include "model/sampling.hpp"
#include "model/trainer.hpp"

namespace swarmrt::apps {
namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string out;
  bool resume = false;
  bool overwrite = false;
  std::string prompt = "The ";
  int64_t sample_tokens = 200;
};

model::TrainResult train_single(const config::RunConfig& config, const model::Corpus& corpus,
                                model::RunDir& run, bool resume) {
  model::TrainOptions options;
  options.run = &run;
  options.resume = resume;
  return model::train_single(config, corpus, options);
}

// Every other mode runs on the actor runtime; the whole model it ends with is written as a
// checkpoint so `swarmrt sample` works the same on every run directory.
model::TrainResult train_swarm(const config::RunConfig& config, const model::Corpus& corpus,
                               model::RunDir& run, bool resume) {
  actors::RuntimeOptions options;
  options.run = &run;
  options.resume = resume;
  auto out = actors::run_in_process(config, corpus, options);
  model::TrainResult result;
  result.losses = out.report.losses;
  result.val_loss = out.report.val_loss;
  result.model = model::make_stage_model(config.model, model::StageSpec{},
                                         static_cast<uint64_t>(config.train.seed));
  model::Checkpoint ckpt;
  ckpt.tensors = out.params;
  ckpt.meta_json = model::checkpoint_meta(config, config.train.steps, {});
  model::load_parameters(*result.model, ckpt, "swarm run");
  // The tracker saved the last step with the swarm's state (and the whole model): kept, so
  // the run can be extended with --resume.
  if (!run.checkpoints().has(config.train.steps))
    run.checkpoints().save(config.train.steps, ckpt, config.checkpoint.keep);
  std::string traffic;
  for (const auto& [kind, bytes] : out.bytes.items())
    traffic +=
        fmt::format("{}{} {:.1f} MB", traffic.empty() ? "" : ", ", kind, bytes.get<double>() / 1e6);
  spdlog::info("bytes sent by all actors: {}", traffic);
  if (out.report.rejected_frames > 0)
    spdlog::warn("{} frames were rejected during the run", out.report.rejected_frames);
  return result;
}

int run_train(const TrainArgs& args) {
  const auto loaded = load_config_or_say(args.config, args.overrides);
  if (!loaded) return 2;
  const config::RunConfig& config = *loaded;
  // `train` computes on this process's CPU: a precision it cannot compute in is a config error.
  if (auto why = model::check_precision(config.train.precision, c10::Device(c10::kCPU));
      !why.empty()) {
    spdlog::error("{}: {}", args.config, why);
    return 2;
  }
  const std::string out =
      args.out.empty() ? "runs/" + std::filesystem::path(args.config).stem().string() : args.out;
  try {
    const auto start = args.resume      ? model::RunStart::resume
                       : args.overwrite ? model::RunStart::overwrite
                                        : model::RunStart::fresh;
    model::RunDir run(out, config, start);
    auto corpus = model::Corpus::load(config.data, config.model.vocab_size);
    run.keep_tokenizer(corpus.tokenizer_file());
    spdlog::info(
        "run {} | mode {} | model {} {}L {}H d{} ctx{} ({:.2f}M parameters) | {} {} train, {} "
        "val | {} tokens/step | fingerprint {}",
        out, config::name_of(config.swarm.mode), config::name_of(config.model.arch),
        config.model.n_layer, config.model.n_head, config.model.n_embd, config.model.block_size,
        double(config.model.parameters()) / 1e6, config::name_of(config.data.format),
        corpus.train_tokens(), corpus.val_tokens(), config.tokens_per_step(),
        config::fingerprint(config));
    auto result = config.swarm.mode == config::Mode::single
                      ? train_single(config, corpus, run, args.resume)
                      : train_swarm(config, corpus, run, args.resume);
    std::printf(
        "\nfinal validation loss %.4f nats/token, %s bits/byte (perplexity %.2f) after "
        "%lld steps\n",
        result.val_loss, model::format_bpb(corpus.bits_per_byte(result.val_loss)).c_str(),
        std::exp(result.val_loss), static_cast<long long>(config.train.steps));
    if (args.sample_tokens > 0) {
      model::SampleOptions so;
      so.tokens = args.sample_tokens;
      so.seed = static_cast<uint64_t>(config.train.seed);
      const auto tokenizer = model::open_tokenizer(corpus.tokenizer_file());
      std::printf("sample> %s%s\n", args.prompt.c_str(),
                  model::generate(result.model, *tokenizer, args.prompt, so).c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand("train", "train a model from a TOML config");
  add_config_options(*cmd, args->config, args->overrides);
  add_run_dir_options(*cmd, args->out, args->resume, args->overwrite);
  cmd->add_option("--prompt", args->prompt, "prompt of the sample printed at the end");
  cmd->add_option("--sample-tokens", args->sample_tokens, "tokens to sample at the end (0: none)");
  cmd->callback([args, &exit_code] { exit_code = run_train(*args); });
}

}  // namespace swarmrt::apps
