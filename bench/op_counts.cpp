// ATen operations dispatched per micro-batch (forward, backward, and a step's share of clip and
// AdamW): the model library in a loop of its own, and one stage worker of the actor runtime
// (`swarm` 1x1 in this process) on the same config. On a GPU each operation costs the host a
// launch, and at small micro-batches the host is what limits a step (docs/results.md, "Fast on
// a GPU"), so every operation the runtime adds to the model's own is host time a GPU waits for.
// Usage: bench_op_counts CONFIG.toml [STEPS] [SECTION.KEY=VALUE ...]
// Prints one JSON line: operations per micro-batch of each side, the loop's by name, and the
// names whose counts differ ([loop, runtime]).
#include <ATen/record_function.h>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "actors/runtime/runtime.hpp"
#include "model/data.hpp"
#include "model/optim.hpp"
#include "model/precision.hpp"
#include "model/stage_model.hpp"
#include "model/threads.hpp"

using namespace swarmrt;

namespace {
std::mutex counts_mutex;
std::map<std::string, int64_t> counts;

std::unique_ptr<at::ObserverContext> count_op(const at::RecordFunction& fn) {
  std::lock_guard<std::mutex> lock(counts_mutex);
  ++counts[fn.name()];
  return nullptr;
}

std::map<std::string, int64_t> counted(const std::function<void()>& run) {
  counts.clear();
  auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(&count_op).scopes({at::RecordScope::FUNCTION}));
  run();
  at::removeCallback(handle);
  return counts;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONFIG.toml [STEPS] [SECTION.KEY=VALUE ...]\n", argv[0]);
    return 2;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 4;
  std::vector<std::string> sets(argv + std::min(argc, 3), argv + argc);
  sets.insert(sets.end(), {"swarm.mode=\"swarm\"", "swarm.stages=1", "swarm.workers_per_stage=1",
                           "train.steps=" + std::to_string(steps), "train.eval_every=0",
                           "train.eval_batches=1", "checkpoint.every_steps=0"});
  auto config = config::load_config(argv[1], sets);
  model::set_compute_threads(1);
  auto corpus = model::Corpus::load(config.data, config.model.vocab_size);
  const auto& t = config.train;
  const double micro_batches = static_cast<double>(steps * t.micro_batches);

  auto loop = counted([&] {
    model::Windows windows(corpus.train(), config.model.block_size);
    model::ShardLoader loader(windows, 0, 1, static_cast<uint64_t>(t.seed));
    auto m =
        model::make_stage_model(config.model, model::StageSpec{}, static_cast<uint64_t>(t.seed));
    auto opt = model::make_adamw(*m, t);
    const auto params = m->parameters();
    for (int s = 0; s < steps; ++s) {
      model::zero_grads(*opt);
      for (int64_t k = 0; k < t.micro_batches; ++k) {
        auto b = loader.next(t.micro_batch);
        at::Tensor loss;
        {
          model::Autocast autocast(t.precision, at::kCPU);
          loss = model::lm_loss(m->forward(b.inputs), b.targets);
        }
        (loss / static_cast<double>(t.micro_batches)).backward();
      }
      model::clip_grad_norm(params, t.grad_clip);
      model::adamw_step(*opt);
    }
  });
  auto runtime = counted([&] {
    actors::RuntimeOptions o;
    o.progress = false;
    actors::run_in_process(config, corpus, o);
  });
  auto total = [](const std::map<std::string, int64_t>& c) {
    int64_t n = 0;
    for (const auto& [name, k] : c) n += k;
    return n;
  };
  nlohmann::json diff = nlohmann::json::object();
  for (const auto& [name, k] : runtime) {
    const auto it = loop.find(name);
    const int64_t l = it == loop.end() ? 0 : it->second;
    if (k != l) diff[name] = {l / micro_batches, k / micro_batches};
  }
  for (const auto& [name, l] : loop)
    if (!runtime.count(name)) diff[name] = {l / micro_batches, 0};
  nlohmann::json per = nlohmann::json::object();
  for (const auto& [name, l] : loop) per[name] = l / micro_batches;
  nlohmann::json j = {{"precision", name_of(t.precision)},
                      {"loop", per},
                      {"micro_batches", micro_batches},
                      {"loop_ops_per_micro_batch", total(loop) / micro_batches},
                      {"runtime_ops_per_micro_batch", total(runtime) / micro_batches},
                      {"differ", diff}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
