// The whole swarm in one process: spawns the loaders, stage workers, gradient averagers,
// DiLoCo groups, metrics sink and step tracker of a config, wires them, runs every step and
// shuts them down. Workers run detached (one thread each, one torch thread each), the other
// actors share CAF's scheduler.
#pragma once

#include <caf/actor_system_config.hpp>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "messages/types.hpp"
#include "model/checkpoint.hpp"
#include "model/config.hpp"
#include "model/data.hpp"
#include "model/run_dir.hpp"

namespace swarmrt::actors {

struct RuntimeOptions {
  model::RunDir* run = nullptr;  // metrics and the final checkpoint go here when set
  bool progress = true;
  std::map<uint32_t, double> slow_factors;  // worker id -> compute slowdown (fault injection)
  bool keep_grads = false;                  // collect each worker's last reduced gradient
  // Called once every actor is spawned and wired, before step 1 (fault injection, inspection).
  std::function<void(caf::actor_system&, const messages::Membership&)> on_start;
};

struct RuntimeResult {
  messages::RunReport report;
  std::map<uint32_t, int64_t> forwards;           // worker id -> micro-batches it forwarded
  std::map<uint32_t, uint64_t> rejected;          // worker id -> frames it refused
  std::map<uint32_t, model::NamedTensors> grads;  // with keep_grads
  model::NamedTensors params;  // whole model, from the first worker of each stage
  std::map<uint32_t, model::NamedTensors> worker_params;  // every worker's parameters
  nlohmann::json bytes;  // bytes sent by all actors over the run, by kind
};

// Worker ids: stage k, replica r -> k * 1000 + r.
inline uint32_t worker_id(int64_t stage, int64_t replica) {
  return static_cast<uint32_t>(stage * 1000 + replica);
}

// The actor-system settings every swarmrt process uses: message types registered, two
// scheduler threads that sleep when idle instead of busy polling.
void configure_actor_system(caf::actor_system_config& cfg);

RuntimeResult run_in_process(const model::RunConfig& config, const model::TextCorpus& corpus,
                             const RuntimeOptions& options);

}  // namespace swarmrt::actors
