// Tokens/s of a live swarm (one process) with the balancer against without, and against every
// static placement, for 4 workers on 2 stages with one of them 4x slower.
// Usage: bench_balancer CONFIG.toml STEPS WARMUP BASE_SLOW CASE ... [--set section.key=value ...]
//   CASE  balancer:A+B:K   start with A workers in stage 0 and B in stage 1, the balancer on
//         static:A+B:K     the same placement, the balancer off
//   K is the stage whose first worker is the slow one.
// Every worker's compute is stretched BASE_SLOW times (a sleep after it computes: see
// stage/worker_faults), the slow one's 4 x BASE_SLOW, so that on a machine with fewer cores
// than workers each worker runs at its own emulated speed instead of sharing the cores, as
// workers on separate machines would. Prints one JSON line per case: tokens over the steps
// after WARMUP, divided by their seconds.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "actors/runtime/runtime.hpp"
#include "messages/atoms.hpp"
#include "model/data.hpp"
#include "supervisors/entitled.hpp"

using namespace swarmrt;

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s CONFIG.toml STEPS WARMUP BASE_SLOW CASE ...\n", argv[0]);
    return 2;
  }
  const int steps = std::atoi(argv[2]), warmup = std::atoi(argv[3]);
  const double base = std::atof(argv[4]);
  std::vector<std::string> cases, sets;
  for (int i = 5; i < argc; ++i) {
    if (std::string(argv[i]) == "--set" && i + 1 < argc)
      sets.push_back(argv[++i]);
    else
      cases.push_back(argv[i]);
  }
  for (const auto& spec : cases) {
    char kind[16] = {0};
    int a = 0, b = 0, slow_stage = 0;
    if (std::sscanf(spec.c_str(), "%15[a-z]:%d+%d:%d", kind, &a, &b, &slow_stage) != 4 || a < 1 ||
        b < 1 || slow_stage < 0 || slow_stage > 1) {
      std::fprintf(stderr, "bad case '%s' (balancer:A+B:K or static:A+B:K)\n", spec.c_str());
      return 2;
    }
    const bool balance = std::string(kind) == "balancer";
    std::vector<std::string> overrides = {
        "swarm.stages=2",
        "swarm.workers_per_stage=" + std::to_string(std::max(a, b)),
        "train.steps=" + std::to_string(steps + warmup),
        "train.eval_every=0",
        "train.eval_batches=1",
        "train.threads=1",
        std::string("balancer.enabled=") + (balance ? "true" : "false")};
    overrides.insert(overrides.end(), sets.begin(), sets.end());
    auto config = config::load_config(argv[1], overrides);
    auto corpus = model::Corpus::load(config.data, config.model.vocab_size);
    actors::RuntimeOptions o;
    o.progress = false;
    o.stage_workers = {a, b};
    const uint32_t slow_id = actors::worker_id(slow_stage, 0);
    o.on_start = [&](caf::actor_system& sys, const messages::Membership& m) {
      for (const auto& stage : m.stages)
        for (const auto& w : stage)
          supervisors::send_from_here(sys, w.handle, atoms::slow_atom::value, std::string(),
                                      w.id == slow_id ? 4 * base : base);
    };
    const auto r = actors::run_in_process(config, corpus, o);
    const auto& secs = r.report.step_seconds;
    const double timed = std::accumulate(secs.begin() + warmup, secs.end(), 0.0);
    const double tokens = double(config.tokens_per_step()) * double(secs.size() - warmup);
    nlohmann::json j = {{"case", spec},
                        {"balancer", balance},
                        {"stage0", a},
                        {"stage1", b},
                        {"slow_stage", slow_stage},
                        {"base_slow", base},
                        {"steps", secs.size() - warmup},
                        {"tokens_per_s", tokens / timed},
                        {"step_seconds", std::vector<double>(secs.begin() + warmup, secs.end())},
                        {"moves", r.balancer.is_null() ? 0 : r.balancer.value("moves", 0)}};
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}
