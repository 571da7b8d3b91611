// Tokens/s of single-process training steps (forward, backward, clip, AdamW) of a model
// config on the Brown corpus: the model library alone, no actors. Usage:
//   bench_train_throughput CONFIG.toml [STEPS] [WARMUP] [THREADS] [SECTION.KEY=VALUE ...]
// SWARMRT_BENCH_DEVICE=cuda:K runs it on a GPU, in train.precision (autocast), with the
// batches copied there as a worker copies them; it then also reports how long the host took
// to queue a step (launch_s) beside the step itself (step_s): equal when the host is the limit.
// Prints one line of JSON: {"impl":"swarmrt-cpp","tokens_per_s":...,...}
#include <torch/cuda.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "model/data.hpp"
#include "model/optim.hpp"
#include "model/precision.hpp"
#include "model/stage_model.hpp"
#include "model/threads.hpp"
#include "transport/staging.hpp"

using namespace swarmrt::model;
using namespace swarmrt::config;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s CONFIG.toml [STEPS] [WARMUP] [THREADS] [SECTION.KEY=VALUE ...]\n",
                 argv[0]);
    return 2;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 40;
  const int warmup = argc > 3 ? std::atoi(argv[3]) : 5;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 1;
  RunConfig config;
  try {
    config = load_config(argv[1], std::vector<std::string>(argv + std::min(argc, 5), argv + argc));
  } catch (const std::exception& e) {  // a bad key or file: its message, not an abort
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  set_compute_threads(threads);
  auto corpus = Corpus::load(config.data, config.model.vocab_size);
  Windows windows(corpus.train(), config.model.block_size);
  ShardLoader loader(windows, 0, 1, static_cast<uint64_t>(config.train.seed));
  const char* device_name = std::getenv("SWARMRT_BENCH_DEVICE");
  const at::Device device(device_name ? device_name : "cpu");
  auto model =
      make_stage_model(config.model, StageSpec{}, static_cast<uint64_t>(config.train.seed));
  model->to(device);
  auto opt = make_adamw(*model, config.train);
  const auto params = model->parameters();
  const auto& t = config.train;
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  double launch_s = 0;
  auto run_step = [&] {
    const auto start = Clock::now();
    zero_grads(*opt);
    for (int64_t m = 0; m < t.micro_batches; ++m) {
      auto b = loader.next(t.micro_batch);
      torch::Tensor loss;
      {
        Autocast autocast(t.precision, device);
        loss = lm_loss(model->forward(swarmrt::transport::to_device(b.inputs, device)),
                       swarmrt::transport::to_device(b.targets, device));
      }
      (loss / static_cast<double>(t.micro_batches)).backward();
    }
    clip_grad_norm(params, t.grad_clip);
    adamw_step(*opt);
    launch_s += seconds(start, Clock::now());
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  for (int i = 0; i < warmup; ++i) run_step();
  launch_s = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) run_step();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double tokens = static_cast<double>(steps) * static_cast<double>(config.tokens_per_step());
  nlohmann::json j = {{"impl", "swarmrt-cpp"},
                      {"threads", threads},
                      {"steps", steps},
                      {"tokens_per_step", config.tokens_per_step()},
                      {"seconds", secs},
                      {"tokens_per_s", tokens / secs},
                      {"device", device.str()},
                      {"precision", name_of(t.precision)},
                      {"step_s", secs / steps},
                      {"launch_s", launch_s / steps},
                      {"params", model->num_parameters()}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
