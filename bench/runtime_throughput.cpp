// Tokens/s of the actor runtime's modes against the single-process trainer, on one config.
// Usage: bench_runtime_throughput CONFIG.toml STEPS WARMUP MODE[:STAGESxWORKERS] ...
//   e.g. bench_runtime_throughput configs/bench_tiny.toml 20 3 single swarm:1x1 pp:2x1
// Prints one JSON line per mode: median step time after WARMUP steps.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "actors/runtime/runtime.hpp"
#include "model/heap.hpp"
#include "model/threads.hpp"
#include "model/trainer.hpp"

using namespace swarmrt;

namespace {
double median_after(std::vector<double> v, size_t warmup) {
  v.erase(v.begin(), v.begin() + static_cast<long>(std::min(warmup, v.size())));
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s CONFIG.toml STEPS WARMUP MODE[:SxW] ...\n", argv[0]);
    return 2;
  }
  // The heap as every swarmrt process keeps it: this is the one-process side of the
  // multi-process comparison (bench/multiprocess_throughput.sh).
  model::keep_freed_memory();
  const int steps = std::atoi(argv[2]), warmup = std::atoi(argv[3]);
  for (int i = 4; i < argc; ++i) {
    std::string spec = argv[i], mode = spec;
    int64_t stages = 1, workers = 1;
    if (auto colon = spec.find(':'); colon != std::string::npos) {
      mode = spec.substr(0, colon);
      std::sscanf(spec.c_str() + colon + 1, "%ldx%ld", &stages, &workers);
    }
    auto config = config::load_config(
        argv[1], {"swarm.mode=\"" + mode + "\"", "swarm.stages=" + std::to_string(stages),
                  "swarm.workers_per_stage=" + std::to_string(workers),
                  "train.steps=" + std::to_string(steps + warmup), "train.eval_every=0",
                  "train.eval_batches=1", "train.threads=1"});
    auto corpus = model::Corpus::load(config.data, config.model.vocab_size);
    std::vector<double> secs;
    if (mode == "single") {
      model::TrainOptions o;
      o.progress = false;
      secs = model::train_single(config, corpus, o).step_seconds;
    } else {
      actors::RuntimeOptions o;
      o.progress = false;
      secs = actors::run_in_process(config, corpus, o).report.step_seconds;
    }
    const double step_s = median_after(secs, static_cast<size_t>(warmup));
    nlohmann::json j = {{"mode", mode},
                        {"stages", stages},
                        {"workers_per_stage", workers},
                        {"micro_batch", config.train.micro_batch},
                        {"micro_batches", config.train.micro_batches},
                        {"median_step_s", step_s},
                        {"tokens_per_s", static_cast<double>(config.tokens_per_step()) / step_s}};
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}
