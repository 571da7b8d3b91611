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

#include "actors/context.hpp"
#include "actors/stage_worker.hpp"
#include "messages/types.hpp"
#include "model/checkpoint.hpp"
#include "model/config.hpp"
#include "model/data.hpp"
#include "model/run_dir.hpp"

namespace swarmrt::actors {

struct RuntimeOptions {
  model::RunDir* run = nullptr;  // metrics and the final checkpoint go here when set
  bool progress = true;
  bool keep_grads = false;  // collect each worker's last reduced gradient
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

// The coordinator's side of a swarm: metrics sink, data loaders, step tracker, and per stage a
// gradient averager (grad-sync modes with several workers) and a DiLoCo group (DiLoCo modes).
// In one process the workers join them directly; across processes they are what nodes join.
struct CoreActors {
  caf::actor sink;
  caf::actor tracker;
  std::vector<caf::actor> loaders;
  std::vector<caf::actor> averagers;  // one per stage, invalid where the mode has none
  std::vector<caf::actor> groups;     // one per stage, invalid where the mode has none
  std::vector<caf::actor> all() const;
};

CoreActors spawn_core(caf::actor_system& sys, const std::shared_ptr<SwarmContext>& ctx,
                      const std::shared_ptr<const model::TextCorpus>& corpus, model::RunDir* run,
                      bool progress);

// The setup of worker (stage, id) wired to the core actors it reports to.
WorkerSetup worker_setup(const ContextPtr& ctx, uint32_t id, uint32_t stage,
                         const caf::actor& tracker, const std::vector<caf::actor>& averagers,
                         const std::vector<caf::actor>& groups);
caf::actor spawn_worker(caf::actor_system& sys, const WorkerSetup& setup);

// Runs every step (the tracker adopts `membership` first) and gathers what the workers hold.
// Throws with the tracker's reason when the run fails.
RuntimeResult run_and_collect(caf::actor_system& sys, const CoreActors& core,
                              const messages::Membership& membership, bool keep_grads,
                              const std::shared_ptr<SwarmContext>& ctx);

RuntimeResult run_in_process(const model::RunConfig& config, const model::TextCorpus& corpus,
                             const RuntimeOptions& options);

}  // namespace swarmrt::actors
