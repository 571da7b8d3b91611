// The reference trainer: the whole model in one process, no actors. `swarm.mode = "single"`
// runs it, and the actor runtime's modes are checked against it.
#pragma once

#include <functional>
#include <vector>

#include "config/config.hpp"
#include "model/data.hpp"
#include "model/run_dir.hpp"
#include "model/stage_model.hpp"

namespace swarmrt::model {

struct StepStats {
  int64_t step = 0;
  double loss = 0;  // mean over the step's micro-batches
  double lr = 0;
  double grad_norm = 0;
  int64_t tokens = 0;  // cumulative tokens trained
  double tokens_per_s = 0;
  double time_s = 0;  // since the run (or resume) started
};

struct TrainResult {
  int64_t first_step = 1;      // > 1 when resumed
  std::vector<double> losses;  // one per step run in this call
  std::vector<double> step_seconds;
  std::vector<int64_t> skipped_steps;  // steps the loss scaler skipped (their gradient overflowed)
  double val_loss = 0;
  StageModel model{nullptr};
};

struct TrainOptions {
  RunDir* run = nullptr;  // metrics and checkpoints go here when set
  bool resume = false;
  bool progress = true;  // a progress line per train.log_every steps
};

// Mean loss of `model` over the given batches (no gradient), computed in `precision`.
double evaluate(StageModel& model, const std::vector<Batch>& batches,
                config::Precision precision = config::Precision::fp32);

TrainResult train_single(const config::RunConfig& config, const Corpus& corpus,
                         const TrainOptions& options);

// Checkpoint metadata shared by every mode.
std::string checkpoint_meta(const config::RunConfig& config, int64_t step,
                            const std::vector<LoaderPosition>& loaders);
struct CheckpointMeta {
  config::RunConfig config;
  int64_t step = 0;
  std::vector<LoaderPosition> loaders;
};
CheckpointMeta parse_checkpoint_meta(const std::string& meta_json, const std::string& origin);

// Loads a whole model from a checkpoint file, or from the newest valid checkpoint of a run
// directory; `config`, where given, receives the configuration the checkpoint was trained with.
StageModel load_model(const std::string& checkpoint_or_run_dir,
                      config::RunConfig* config = nullptr);

std::string format_duration(double seconds);

}  // namespace swarmrt::model
