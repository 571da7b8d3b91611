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

double evaluate(StageModel& model, const std::vector<Batch>& batches, config::Precision precision) {
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

std::string checkpoint_meta(const config::RunConfig& config, int64_t step,
                            const std::vector<LoaderPosition>& loaders) {
  nlohmann::json j;
  j["format"] = "swarmrt-checkpoint";
  j["step"] = step;
  j["config"] = config::to_toml(config);
  j["loaders"] = nlohmann::json::array();
  for (const auto& p : loaders) j["loaders"].push_back({{"epoch", p.epoch}, {"cursor", p.cursor}});
  return j.dump();
}

CheckpointMeta parse_checkpoint_meta(const std::string& meta_json, const std::string& origin) {
  try {
    auto j = nlohmann::json::parse(meta_json);
    CheckpointMeta m;
    m.config =
        config::parse_config(j.at("config").get<std::string>(), origin + " (embedded config)");
    m.step = j.at("step").get<int64_t>();
    for (const auto& p : j.at("loaders"))
      m.loaders.push_back({p.at("epoch").get<int64_t>(), p.at("cursor").get<int64_t>()});
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(origin + ": checkpoint metadata is unreadable: " + e.what());
  }
}

StageModel load_model(const std::string& path, config::RunConfig* config) {
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

namespace {

// What the single-process trainer holds through a run.
struct SingleRun {
  SingleRun(const config::RunConfig& c, const Corpus& corpus_, const TrainOptions& o)
      : config(c),
        corpus(corpus_),
        options(o),
        model(make_stage_model(c.model, StageSpec{}, static_cast<uint64_t>(c.train.seed))),
        optimizer(make_adamw(*model, c.train)),
        train_windows(corpus_.train(), c.model.block_size),
        val_windows(corpus_.val(), c.model.block_size),
        loader(train_windows, 0, 1, static_cast<uint64_t>(c.train.seed)),
        val_batches(validation_batches(val_windows, c.train.eval_batches, c.train.micro_batch)),
        params(model->parameters()),
        scaler(c.train.scales_loss() ? config::Precision::fp16 : config::Precision::fp32) {}

  const config::RunConfig& config;
  const Corpus& corpus;
  const TrainOptions& options;
  StageModel model;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  Windows train_windows, val_windows;
  ShardLoader loader;
  std::vector<Batch> val_batches;
  std::vector<torch::Tensor> params;
  LossScaler scaler;
};

// The run's newest valid checkpoint taken up: parameters, optimizer, data position. Returns
// the step it holds.
int64_t resume(SingleRun& r) {
  auto found = r.options.run->checkpoints().newest_valid(
      [](const auto& p, const auto& why) { spdlog::error("refusing checkpoint {}: {}", p, why); });
  if (!found) throw CheckpointError(r.options.run->root() + ": no valid checkpoint to resume from");
  const auto& [file, ckpt] = *found;
  auto meta = parse_checkpoint_meta(ckpt.meta_json, file);
  load_parameters(*r.model, ckpt, file);
  auto blob = ckpt.blobs.find("optimizer");
  if (blob == ckpt.blobs.end()) throw CheckpointError(file + ": no optimizer state");
  load_optimizer_bytes(*r.optimizer, blob->second);
  if (meta.loaders.size() != 1)
    throw CheckpointError(file + ": checkpoint has " + std::to_string(meta.loaders.size()) +
                          " loader positions, single mode needs 1");
  r.loader.seek(meta.loaders[0]);
  spdlog::info("resumed from {} at step {}", file, meta.step);
  return meta.step;
}

struct StepOutcome {
  double loss = 0;         // mean over the micro-batches
  double grad_norm = NAN;  // before clipping; NaN when skipped
  double scale = 1;        // the loss scale the step ran at
  bool skipped = false;    // the loss scaler found the gradient overflowed
};

// One optimizer step: every micro-batch forward and backward, the loss scaler's check, the
// clip and AdamW.
StepOutcome train_step(SingleRun& r, int64_t step) {
  const auto& t = r.config.train;
  const int64_t step_samples = t.micro_batch * t.micro_batches;
  set_lr(*r.optimizer, lr_at(step, t));
  zero_grads(*r.optimizer);
  StepOutcome o;
  for (int64_t m = 0; m < t.micro_batches; ++m) {
    auto batch = r.loader.next(t.micro_batch);
    torch::Tensor loss;
    {
      Autocast autocast(t.precision, c10::Device(c10::kCPU));
      loss = lm_loss(r.model->forward(batch.inputs), batch.targets);
    }
    // Each micro-batch carries its share of the step's samples: the step's gradient is the
    // mean over all of its samples. The stage workers seed backward with the same factor,
    // times the loss scale (1 without the scaler).
    auto seed = loss * (static_cast<double>(batch.samples()) / static_cast<double>(step_samples));
    if (r.scaler.scale() != 1.0) seed = seed * r.scaler.scale();
    if (m == 0 && step == r.config.chaos.overflow_at_step) seed = overflowed(seed);
    seed.backward();
    o.loss += loss.item<double>();
  }
  o.loss /= static_cast<double>(t.micro_batches);
  o.scale = r.scaler.scale();
  const bool finite = unscale_grads(r.params, o.scale);
  // The scaler skips a step whose gradient overflowed: no update, a smaller scale next.
  o.skipped = t.scales_loss() && !r.scaler.update(finite);
  if (o.skipped) {
    spdlog::warn("step {}: the gradient overflowed at loss scale {}: step skipped, scale now {}",
                 step, o.scale, r.scaler.scale());
  } else {
    o.grad_norm = clip_grad_norm(r.params, t.grad_clip);
    adamw_step(*r.optimizer);
  }
  return o;
}

// The step's record in the run's metrics and, every train.log_every steps, a progress line.
void report_step(SingleRun& r, const StepStats& s, const StepOutcome& o, int64_t first_step) {
  const auto& t = r.config.train;
  if (r.options.run) {
    nlohmann::json record = {
        {"event", "step"},
        {"step", s.step},
        {"loss", s.loss},
        {"bpb", r.corpus.train_bits_per_byte(s.loss)},
        {"lr", s.lr},
        {"grad_norm", o.skipped ? nlohmann::json() : nlohmann::json(o.grad_norm)},
        {"tokens", s.tokens},
        {"tokens_per_s", s.tokens_per_s},
        {"time_s", s.time_s}};
    if (t.scales_loss()) {
      record["loss_scale"] = o.scale;
      record["skipped"] = o.skipped;
      record["skipped_steps"] = r.scaler.skipped();
    }
    r.options.run->metrics().write(record);
  }
  if (r.options.progress && (s.step % t.log_every == 0 || s.step == t.steps)) {
    const double done = static_cast<double>(s.step - first_step + 1);
    const double eta = s.time_s / done * static_cast<double>(t.steps - s.step);
    spdlog::info("step {}/{} | loss {:.4f} | bpb {} | lr {:.2e} | {:.0f} tok/s | ETA {}", s.step,
                 t.steps, s.loss, format_bpb(r.corpus.train_bits_per_byte(s.loss)), s.lr,
                 s.tokens_per_s, format_duration(eta));
  }
}

// The validation loss of the model now, recorded and logged.
double evaluate_at(SingleRun& r, int64_t step) {
  const double val = evaluate(r.model, r.val_batches, r.config.train.precision);
  const double bpb = r.corpus.bits_per_byte(val);
  if (r.options.run)
    r.options.run->metrics().write({{"event", "eval"},
                                    {"step", step},
                                    {"val_loss", val},
                                    {"val_bpb", bpb},
                                    {"val_ppl", std::exp(val)}});
  if (r.options.progress)
    spdlog::info("eval step {} | val_loss {:.4f} | val_bpb {} | val_ppl {:.2f}", step, val,
                 format_bpb(bpb), std::exp(val));
  return val;
}

// A checkpoint of the model, the optimizer and the data position after `step`.
void save(SingleRun& r, int64_t step) {
  Checkpoint ckpt;
  ckpt.meta_json = checkpoint_meta(r.config, step, {r.loader.position()});
  ckpt.tensors = parameters_of(*r.model);
  ckpt.blobs["optimizer"] = optimizer_bytes(*r.optimizer);
  r.options.run->checkpoints().save(step, ckpt, r.config.checkpoint.keep);
}

}  // namespace

// The named steps of a single-process run: build (or resume) it, then train, record, evaluate
// and checkpoint each step, and evaluate and save at the end.
TrainResult train_single(const config::RunConfig& config, const Corpus& corpus,
                         const TrainOptions& options) {
  const auto& t = config.train;
  set_compute_threads(static_cast<int>(t.threads));
  if (auto why = check_precision(t.precision, c10::Device(c10::kCPU)); !why.empty())
    throw std::invalid_argument(why);
  if (t.precision == config::Precision::bf16)
    if (auto slow = slow_bf16_reason(); !slow.empty())
      spdlog::warn("train.precision = bf16: {}", slow);
  SingleRun r(config, corpus, options);
  r.model->train();
  TrainResult result;
  int64_t step = options.resume && options.run ? resume(r) : 0;
  result.first_step = step + 1;
  const auto start = Clock::now();
  const int64_t tokens_per_step = config.tokens_per_step();
  for (++step; step <= t.steps; ++step) {
    const auto step_start = Clock::now();
    const auto o = train_step(r, step);
    const auto now = Clock::now();
    const double secs = std::chrono::duration<double>(now - step_start).count();
    StepStats s;
    s.step = step;
    s.loss = o.loss;
    s.lr = lr_at(step, t);
    s.grad_norm = o.grad_norm;
    s.tokens = step * tokens_per_step;
    s.tokens_per_s = static_cast<double>(tokens_per_step) / secs;
    s.time_s = std::chrono::duration<double>(now - start).count();
    result.losses.push_back(s.loss);
    if (o.skipped) result.skipped_steps.push_back(step);
    result.step_seconds.push_back(secs);
    report_step(r, s, o, result.first_step);
    if (t.eval_every > 0 && step % t.eval_every == 0 && step != t.steps) evaluate_at(r, step);
    if (options.run && config.checkpoint.every_steps > 0 &&
        step % config.checkpoint.every_steps == 0)
      save(r, step);
  }
  --step;
  result.val_loss = evaluate_at(r, step);
  if (options.run &&
      (config.checkpoint.every_steps == 0 || step % config.checkpoint.every_steps != 0))
    save(r, step);
  result.model = r.model;
  return result;
}

}  // namespace swarmrt::model
