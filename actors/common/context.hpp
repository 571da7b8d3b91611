// What every actor of one swarm shares: the run's config and the byte counters.
#pragma once

#include <memory>
#include <string>

#include "actors/common/byte_counters.hpp"
#include "config/config.hpp"
#include "policy/wiring.hpp"

namespace swarmrt::actors {

// The config's swarm.wiring as the wiring policy's own enum (model/ and policy/ know nothing
// of each other).
inline policy::WiringPolicy wiring_policy(config::WiringPolicy w) {
  return w == config::WiringPolicy::uniform ? policy::WiringPolicy::uniform
                                            : policy::WiringPolicy::throughput;
}

struct SwarmContext {
  config::RunConfig config;
  uint64_t run_id = 0;
  std::shared_ptr<ByteCounters> bytes = std::make_shared<ByteCounters>();  // this process's
  // Which process this is: empty for the coordinator's (and a run in one process), "node<K>"
  // for node K's. Workers report their process's bytes under it (ProcessBytes).
  std::string process;
  std::shared_ptr<RemoteBytes> remote_bytes = std::make_shared<RemoteBytes>();
  // Tests: what every wiring takes a completion's duration as (Wiring::set_measure); unset,
  // the measured duration.
  policy::Wiring::Measure wiring_measure;

  config::Mode mode() const { return config.swarm.mode; }
  // pp, dp and swarm average gradients inside each stage and clip by the norm over all
  // stages, so every replica takes the same step as the whole model would.
  bool grad_sync() const {
    return mode() == config::Mode::pp || mode() == config::Mode::dp ||
           mode() == config::Mode::swarm;
  }
  bool diloco() const {
    return mode() == config::Mode::diloco || mode() == config::Mode::diloco_swarm;
  }
  // Whether `step`'s gradients are averaged inside each stage: always in the grad-sync modes,
  // and in DiLoCo's during its synchronous warm-up (diloco.warmup_sync_steps).
  bool syncs_gradients(uint64_t step) const {
    return grad_sync() || (diloco() && config.diloco.warming(step));
  }
  // Whether `step`'s synchronized gradients travel sparse (diloco.warmup_compress;
  // model/sparse_grads.hpp).
  bool sparse_grads(uint64_t step) const {
    return diloco() && config.diloco.warming(step) &&
           config.diloco.warmup_compress != config::Compress::none;
  }
  // Whether stages of several workers have a gradient averager.
  bool averages_gradients() const {
    return (grad_sync() || (diloco() && config.diloco.warmup_sync_steps > 0)) &&
           config.swarm.workers_per_stage > 1;
  }
  int64_t step_samples() const { return config.train.micro_batch * config.train.micro_batches; }
  int64_t stages() const { return config.swarm.stages; }

  // The swarm's bytes by kind: this process's and every other process's last report.
  nlohmann::json swarm_bytes() const { return remote_bytes->total_with(*bytes); }
};

using ContextPtr = std::shared_ptr<const SwarmContext>;

}  // namespace swarmrt::actors
