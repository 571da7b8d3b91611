#include "model/trainer.hpp"

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <torch/utils.h>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "model/optim.hpp"
#include "model/precision.hpp"
#include "model/threads.hpp"

namespace swarmrt::model {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double evaluate(StageModel& model, const std::vector<Batch>& batches, Precision precision) {
  torch::NoGradGuard no_grad;
  Autocast autocast(precision, c10::Device(c10::kCPU));
  const bool was_training = model->is_training();
  model->eval();
  double sum = 0;
  for (const auto& b : batches) sum += lm_loss(model->forward(b.inputs), b.targets).item<double>();
  if (was_training) model->train();
  return sum / static_cast<double>(batches.size());
}

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  else
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  return buf;
}

std::string checkpoint_meta(const RunConfig& config, int64_t step,
                            const std::vector<LoaderPosition>& loaders) {
  nlohmann::json j;
  j["format"] = "swarmrt-checkpoint";
  j["step"] = step;
  j["config"] = to_toml(config);
  j["loaders"] = nlohmann::json::array();
  for (const auto& p : loaders) j["loaders"].push_back({{"epoch", p.epoch}, {"cursor", p.cursor}});
  return j.dump();
}

CheckpointMeta parse_checkpoint_meta(const std::string& meta_json, const std::string& origin) {
  try {
    auto j = nlohmann::json::parse(meta_json);
    CheckpointMeta m;
    m.config = parse_config(j.at("config").get<std::string>(), origin + " (embedded config)");
    m.step = j.at("step").get<int64_t>();
    for (const auto& p : j.at("loaders"))
      m.loaders.push_back({p.at("epoch").get<int64_t>(), p.at("cursor").get<int64_t>()});
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(origin + ": checkpoint metadata is unreadable: " + e.what());
  }
}

StageModel load_model(const std::string& path, RunConfig* config) {
  std::string file = path;
  Checkpoint ckpt;
  if (fs::is_directory(path)) {
    const auto dir = fs::exists(fs::path(path) / "checkpoints") ? fs::path(path) / "checkpoints"
                                                                : fs::path(path);
    auto found = CheckpointDir(dir.string()).newest_valid([](const auto& p, const auto& why) {
      spdlog::warn("skipping checkpoint {}: {}", p, why);
    });
    if (!found) throw CheckpointError(path + ": no valid checkpoint found");
    file = found->first;
    ckpt = std::move(found->second);
  } else {
    ckpt = read_checkpoint(path);
  }
  auto meta = parse_checkpoint_meta(ckpt.meta_json, file);
  auto model = make_stage_model(meta.config.model, StageSpec{}, meta.config.train.seed);
  load_parameters(*model, ckpt, file);
  if (config) *config = meta.config;
  return model;
}

TrainResult train_single(const RunConfig& config, const Corpus& corpus,
                         const TrainOptions& options) {
  const auto& t = config.train;
  set_compute_threads(static_cast<int>(t.threads));

  if (auto why = check_precision(t.precision, c10::Device(c10::kCPU)); !why.empty())
    throw std::invalid_argument(why);
  if (t.precision == Precision::bf16)
    if (auto slow = slow_bf16_reason(); !slow.empty())
      spdlog::warn("train.precision = bf16: {}", slow);
  auto model = make_stage_model(config.model, StageSpec{}, static_cast<uint64_t>(t.seed));
  model->train();
  auto optimizer = make_adamw(*model, t);
  Windows train_windows(corpus.train(), config.model.block_size);
  Windows val_windows(corpus.val(), config.model.block_size);
  ShardLoader loader(train_windows, 0, 1, static_cast<uint64_t>(t.seed));
  const auto val_batches = validation_batches(val_windows, t.eval_batches, t.micro_batch);
  const auto params = model->parameters();

  TrainResult result;
  int64_t step = 0;
  if (options.resume && options.run) {
    auto found = options.run->checkpoints().newest_valid([](const auto& p, const auto& why) {
      spdlog::error("refusing checkpoint {}: {}", p, why);
    });
    if (!found) throw CheckpointError(options.run->root() + ": no valid checkpoint to resume from");
    const auto& [file, ckpt] = *found;
    auto meta = parse_checkpoint_meta(ckpt.meta_json, file);
    load_parameters(*model, ckpt, file);
    auto blob = ckpt.blobs.find("optimizer");
    if (blob == ckpt.blobs.end()) throw CheckpointError(file + ": no optimizer state");
    load_optimizer_bytes(*optimizer, blob->second);
    if (meta.loaders.size() != 1)
      throw CheckpointError(file + ": checkpoint has " + std::to_string(meta.loaders.size()) +
                            " loader positions, single mode needs 1");
    loader.seek(meta.loaders[0]);
    step = meta.step;
    spdlog::info("resumed from {} at step {}", file, step);
  }
  result.first_step = step + 1;

  auto save = [&](int64_t s) {
    Checkpoint ckpt;
    ckpt.meta_json = checkpoint_meta(config, s, {loader.position()});
    ckpt.tensors = parameters_of(*model);
    ckpt.blobs["optimizer"] = optimizer_bytes(*optimizer);
    return options.run->checkpoints().save(s, ckpt, config.checkpoint.keep);
  };
  auto eval = [&](int64_t s) {
    const double val = evaluate(model, val_batches, t.precision);
    const double bpb = corpus.bits_per_byte(val);
    if (options.run)
      options.run->metrics().write({{"event", "eval"},
                                    {"step", s},
                                    {"val_loss", val},
                                    {"val_bpb", bpb},
                                    {"val_ppl", std::exp(val)}});
    if (options.progress)
      spdlog::info("eval step {} | val_loss {:.4f} | val_bpb {} | val_ppl {:.2f}", s, val,
                   format_bpb(bpb), std::exp(val));
    return val;
  };

  const auto start = Clock::now();
  const int64_t tokens_per_step = config.tokens_per_step();
  const int64_t step_samples = t.micro_batch * t.micro_batches;
  double val = NAN;
  LossScaler scaler(t.scales_loss() ? Precision::fp16 : Precision::fp32);
  for (++step; step <= t.steps; ++step) {
    const auto step_start = Clock::now();
    const double lr = lr_at(step, t);
    set_lr(*optimizer, lr);
    zero_grads(*optimizer);
    double loss_sum = 0;
    for (int64_t m = 0; m < t.micro_batches; ++m) {
      auto batch = loader.next(t.micro_batch);
      torch::Tensor loss;
      {
        Autocast autocast(t.precision, c10::Device(c10::kCPU));
        loss = lm_loss(model->forward(batch.inputs), batch.targets);
      }
      // Each micro-batch carries its share of the step's samples: the step's gradient is the
      // mean over all of its samples. The stage workers seed backward with the same factor,
      // times the loss scale (1 without the scaler).
      auto seed = loss * (static_cast<double>(batch.samples()) / static_cast<double>(step_samples));
      if (scaler.scale() != 1.0) seed = seed * scaler.scale();
      if (m == 0 && step == config.chaos.overflow_at_step) seed = overflowed(seed);
      seed.backward();
      loss_sum += loss.item<double>();
    }
    const double scale = scaler.scale();
    const bool finite = unscale_grads(params, scale);
    // The scaler skips a step whose gradient overflowed: no update, a smaller scale next.
    const bool skipped = t.scales_loss() && !scaler.update(finite);
    double grad_norm = NAN;
    if (skipped) {
      spdlog::warn("step {}: the gradient overflowed at loss scale {}: step skipped, scale now {}",
                   step, scale, scaler.scale());
    } else {
      grad_norm = clip_grad_norm(params, t.grad_clip);
      adamw_step(*optimizer);
    }

    const auto now = Clock::now();
    StepStats s;
    s.step = step;
    s.loss = loss_sum / static_cast<double>(t.micro_batches);
    s.lr = lr;
    s.grad_norm = grad_norm;
    s.tokens = step * tokens_per_step;
    s.tokens_per_s = static_cast<double>(tokens_per_step) /
                     std::chrono::duration<double>(now - step_start).count();
    s.time_s = std::chrono::duration<double>(now - start).count();
    result.losses.push_back(s.loss);
    if (skipped) result.skipped_steps.push_back(step);
    result.step_seconds.push_back(std::chrono::duration<double>(now - step_start).count());
    if (options.run) {
      nlohmann::json record = {
          {"event", "step"},
          {"step", s.step},
          {"loss", s.loss},
          {"bpb", corpus.train_bits_per_byte(s.loss)},
          {"lr", s.lr},
          {"grad_norm", skipped ? nlohmann::json() : nlohmann::json(grad_norm)},
          {"tokens", s.tokens},
          {"tokens_per_s", s.tokens_per_s},
          {"time_s", s.time_s}};
      if (t.scales_loss()) {
        record["loss_scale"] = scale;
        record["skipped"] = skipped;
        record["skipped_steps"] = scaler.skipped();
      }
      options.run->metrics().write(record);
    }
    if (options.progress && (step % t.log_every == 0 || step == t.steps)) {
      const double done = static_cast<double>(step - result.first_step + 1);
      const double eta = s.time_s / done * static_cast<double>(t.steps - step);
      spdlog::info("step {}/{} | loss {:.4f} | bpb {} | lr {:.2e} | {:.0f} tok/s | ETA {}", step,
                   t.steps, s.loss, format_bpb(corpus.train_bits_per_byte(s.loss)), lr,
                   s.tokens_per_s, format_duration(eta));
    }
    if (t.eval_every > 0 && step % t.eval_every == 0 && step != t.steps) eval(step);
    if (options.run && config.checkpoint.every_steps > 0 &&
        step % config.checkpoint.every_steps == 0)
      save(step);
  }
  --step;
  val = eval(step);
  if (options.run &&
      (config.checkpoint.every_steps == 0 || step % config.checkpoint.every_steps != 0))
    save(step);
  result.val_loss = val;
  result.model = model;
  return result;
}

}  // namespace swarmrt::model
