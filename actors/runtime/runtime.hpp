// The whole swarm in one process: spawns the loaders, stage workers, gradient averagers,
// DiLoCo groups, metrics sink and step tracker of a config, wires them, runs every step and
// shuts them down. Workers run detached (one thread each, one torch thread each), the other
// actors share CAF's scheduler.
#pragma once

#include <caf/actor_system_config.hpp>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "actors/common/context.hpp"
#include "actors/common/worker_id.hpp"
#include "actors/diloco/diloco_group.hpp"
#include "actors/loader/data_loader.hpp"
#include "actors/stage/stage_worker.hpp"
#include "config/config.hpp"
#include "messages/types.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/run_dir.hpp"
#include "supervisors/roster.hpp"

namespace swarmrt::actors {

struct CoreActors;

struct RuntimeOptions {
  model::RunDir* run = nullptr;  // metrics and the final checkpoint go here when set
  bool progress = true;
  bool keep_grads = false;  // collect each worker's last reduced gradient
  bool resume = false;      // continue from the run directory's newest valid checkpoint
  // Called once every actor is spawned and wired, before step 1 (fault injection, inspection).
  std::function<void(caf::actor_system&, const messages::Membership&)> on_start;
  std::function<void(caf::actor_system&, const CoreActors&)> on_core;  // same, core actors
  // Tests of the wiring policy: what every wiring takes a completion's duration as.
  policy::Wiring::Measure wiring_measure;
  // Workers each stage starts with; empty: swarm.workers_per_stage everywhere (a skewed start
  // for the balancer's tests and benchmark).
  std::vector<int64_t> stage_workers;
  // Tests of the balancer: the speed it takes worker `id` to have, given the one measured.
  std::function<double(uint32_t id, double measured)> balancer_speed;
};

struct RuntimeResult {
  messages::RunReport report;
  std::map<uint32_t, int64_t> forwards;   // worker id -> micro-batches it forwarded
  std::map<uint32_t, uint64_t> rejected;  // worker id -> frames it refused
  uint64_t comm_frames = 0;               // hops whose tensors came over communicator links
  uint64_t group_reduces = 0;  // DiLoCo: rounds all-reduced over group communicators, per worker
  // DiLoCo: rounds a worker holding a group communicator reported alone (the group said not
  // every worker of it was at the round, or the all-reduce failed), per worker
  uint64_t group_fallbacks = 0;
  // DiLoCo: group all-reduces that failed, and rounds whose answer from the group never came
  uint64_t group_failures = 0;
  std::map<uint32_t, model::NamedTensors> grads;  // with keep_grads
  model::NamedTensors params;  // whole model, from the first worker of each stage
  std::map<uint32_t, model::NamedTensors> worker_params;  // every worker's parameters
  nlohmann::json bytes;   // bytes sent by all actors over the run, by kind
  uint64_t restarts = 0;  // by all supervisors
  uint64_t kills = 0;     // by the chaos control actor
  uint64_t dropped = 0;   // micro-batch hops lost on purpose (chaos.drop_fraction)
  std::vector<std::vector<uint64_t>> applied_rounds;  // DiLoCo: per stage, every round applied
  // DiLoCo: per stage and fragment, every round applied, in order (fragment 0's as above)
  std::vector<std::vector<std::vector<uint64_t>>> fragment_rounds;
  // DiLoCo: per stage, the group's θ after its last round (empty before the first)
  std::vector<model::NamedTensors> group_theta;
  nlohmann::json balancer;  // the balancer's `info` at the end (periods, moves), when it ran
};

// The actor-system settings every swarmrt process uses: message types registered, two
// scheduler threads that sleep when idle instead of busy polling.
void configure_actor_system(caf::actor_system_config& cfg);

// The coordinator's side of a swarm: metrics sink, data loaders, step tracker, and per stage a
// gradient averager (grad-sync modes with several workers) and a DiLoCo group (DiLoCo modes).
// In one process the workers join them directly; across processes they are what nodes join.
// Loaders and groups are supervised (restarted with the state they need: a loader's position
// is a function of the step, a group continues from its store); averagers and the tracker are
// not: their loss ends the run. The roster names every supervised actor of this process for
// the chaos control actor.
struct CoreActors {
  caf::actor sink;
  caf::actor tracker;
  std::vector<loader_actor> loaders;
  std::vector<caf::actor> averagers;  // one per stage, invalid where the mode has none
  std::vector<caf::actor> groups;     // one per stage, invalid where the mode has none
  std::vector<GroupStorePtr> group_stores;
  std::vector<caf::actor> supervisors;
  std::shared_ptr<supervisors::Roster> roster = std::make_shared<supervisors::Roster>();
  caf::actor chaos;
  caf::actor balancer;  // when balancer.enabled and the pipeline has stages to balance
  std::vector<caf::actor> all() const;
};

struct CoreOptions {
  model::RunDir* run = nullptr;
  bool progress = true;
  bool resume = false;  // from run's newest valid checkpoint (throws when there is none)
  // A takeover from a lost leader: the step it closed last (see TrackerSetup::kept_step).
  std::optional<uint64_t> kept_step;
  bool kept_evaluated = false;
  // Where the DiLoCo groups journal their rounds for a standby (actors/diloco/
  // group_journal.hpp); empty: no journal (a coordinator without replicas).
  std::string group_journal;
  std::shared_ptr<caf::actor> forward_kills;  // the chaos actor's forward target, optional
};

CoreActors spawn_core(caf::actor_system& sys, const std::shared_ptr<SwarmContext>& ctx,
                      const std::shared_ptr<const model::Corpus>& corpus,
                      const CoreOptions& options);

// A supervisor for the workers of one stage in this process; `announce` receives
// (restarted_atom, Member) for each restart and each worker started by a balancer's move (the
// tracker in one process, the directory across processes). The workers are spawned here; a
// moved worker serves its new stage with that stage's averager and group.
struct StageSupervisorSetup {
  std::string name;
  ContextPtr ctx;
  std::vector<WorkerSetup> workers;  // the stage's workers in this process
  std::string endpoint;              // this process's bulk endpoint ("" in one process)
  caf::actor announce, metrics;
  std::shared_ptr<supervisors::Roster> roster;
  std::vector<caf::actor> averagers, groups;  // per stage, for a worker moved there
};
// Appends each worker it spawned to `members`.
caf::actor spawn_stage_supervisor(caf::actor_system& sys, const StageSupervisorSetup& setup,
                                  std::vector<messages::Member>& members);

// The balancer and its supervisor, when balancer.enabled and the pipeline has two stages or
// more (else an invalid handle): `hosts` carry its moves out (this process's stage supervisors,
// or the directory). The supervisor joins core.supervisors; core.balancer is set.
caf::actor supervise_balancer(caf::actor_system& sys, CoreActors& core, const ContextPtr& ctx,
                              std::vector<caf::actor> hosts,
                              std::function<double(uint32_t, double)> speed = {});

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

RuntimeResult run_in_process(const config::RunConfig& config, const model::Corpus& corpus,
                             const RuntimeOptions& options);

}  // namespace swarmrt::actors
