#include "actors/runtime/runtime.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>
#include <random>

#include "actors/balancer/balancer.hpp"
#include "actors/common/tensor_list.hpp"
#include "actors/diloco/diloco_group.hpp"
#include "actors/diloco/group_journal.hpp"
#include "actors/loader/data_loader.hpp"
#include "actors/runtime/metrics_sink.hpp"
#include "actors/stage/grad_averager.hpp"
#include "actors/tracker/step_tracker.hpp"
#include "actors/tracker/swarm_checkpoint.hpp"
#include "inspect/probe.hpp"
#include "model/precision.hpp"
#include "model/stage_model.hpp"
#include "model/threads.hpp"
#include "supervisors/chaos_control.hpp"
#include "supervisors/supervisor.hpp"
#include "supervisors/tracker_supervisor.hpp"
#include "transport/relay.hpp"

namespace swarmrt::actors {
using namespace swarmrt::atoms;

void configure_actor_system(caf::actor_system_config& cfg) {
  messages::register_types(cfg);
  // Two scheduler threads serve the light actors (tracker, loaders, averagers, groups). Idle,
  // they wait on a condition variable instead of CAF's default busy polling, which would take
  // CPU from the detached workers on a machine with as many cores as workers.
  cfg.set("scheduler.max-threads", 2);
  cfg.set("work-stealing.aggressive-poll-attempts", 1);
  cfg.set("work-stealing.moderate-poll-attempts", 1);
  cfg.set("logger.verbosity", caf::atom("quiet"));
  // One message per run of an actor, brokers included. CAF's default (no limit) lets the
  // middleman's BASP broker serialize every queued message into its write buffer before the
  // I/O loop writes a byte: a node that queued a 309 MB state in slices wrote nothing for
  // longer than the connection timeout on a VM with slow page faults, and its coordinator
  // dropped it (net.big_state, every run on that VM). With one message per run the loop writes
  // each slice out before it serializes the next.
  cfg.set("scheduler.max-throughput", size_t{1});
}

std::vector<caf::actor> CoreActors::all() const {
  std::vector<caf::actor> out;
  for (const auto& a : {sink, tracker, chaos, balancer})
    if (a) out.push_back(a);
  for (const auto& a : supervisors) out.push_back(a);
  for (const auto& a : loaders)
    if (a) out.push_back(caf::actor_cast<caf::actor>(a));
  for (const auto* list : {&averagers, &groups})
    for (const auto& a : *list)
      if (a) out.push_back(a);
  return out;
}

namespace {

// Core actor `kind`:k (a loader, or a stage's averager or group) as a supervisor's child: each
// restart is announced to the tracker (replaced_atom), which hands the new handle to the
// workers that use it.
supervisors::ChildSpec core_child(const std::string& kind, int64_t k,
                                  std::function<caf::actor()> start,
                                  const std::shared_ptr<caf::actor>& tracker) {
  supervisors::ChildSpec child;
  const auto index = static_cast<uint32_t>(k);
  child.name = kind == "loader"  ? supervisors::loader_name(index)
               : kind == "group" ? supervisors::group_name(index)
                                 : supervisors::averager_name(index);
  child.kind = kind;
  if (kind != "loader") child.stage = k;
  child.start = std::move(start);
  child.on_restart = [tracker, kind, k](const caf::actor& h) {
    caf::anon_send(*tracker, replaced_atom::value, kind, static_cast<uint32_t>(k), h);
  };
  child.current = child.start();
  return child;
}

using Resume = std::optional<std::pair<std::string, model::Checkpoint>>;

// --resume: the run directory's newest valid swarm checkpoint (refused ones are named).
Resume checkpoint_to_resume(const CoreOptions& options) {
  if (!options.resume) return std::nullopt;
  auto* run = options.run;
  if (!run) throw model::CheckpointError("--resume needs a run directory");
  auto resume = run->checkpoints().newest_valid(
      [](const auto& p, const auto& why) { spdlog::error("refusing checkpoint {}: {}", p, why); },
      check_swarm_checkpoint);
  if (!resume) throw model::CheckpointError(run->root() + ": no valid checkpoint to resume from");
  spdlog::info("resuming from {} at step {}", resume->first,
               swarm_checkpoint_step(resume->second, resume->first));
  return resume;
}

// The step tracker behind its supervisor, which is the tracker's address: a restarted tracker
// is reached through the same handle, and continues the run from the store.
caf::actor spawn_tracker(caf::actor_system& sys, CoreActors& core,
                         const std::shared_ptr<SwarmContext>& ctx,
                         const std::shared_ptr<const model::Corpus>& corpus,
                         const CoreOptions& options, Resume resume) {
  TrackerSetup ts;
  ts.ctx = ctx;
  ts.loaders = core.loaders;
  ts.averagers = core.averagers;
  ts.groups = core.groups;
  ts.metrics = core.sink;
  ts.corpus = corpus;
  ts.progress = options.progress;
  ts.run = options.run;
  ts.group_stores = core.group_stores;
  if (resume) {
    ts.resume = std::move(resume->second);
    ts.resume_origin = resume->first;
  }
  ts.chaos = core.chaos;
  ts.roster = core.roster;
  ts.kept_step = options.kept_step;
  ts.kept_evaluated = options.kept_evaluated;
  ts.store = std::make_shared<TrackerStore>();
  // The tracker's supervisor is the tracker's address: a restarted tracker is reached through
  // the same handle, and continues the run from the store.
  supervisors::TrackerSupervisorSetup tss;
  tss.policy = ctx->config.supervision;
  tss.start = [&sys, ts] { return inspect::spawn_probed(sys, step_tracker, ts); };
  tss.metrics = core.sink;
  tss.roster = core.roster;
  auto handle = inspect::spawn_probed(sys, supervisors::tracker_supervisor, tss);
  core.roster->put("supervisor/tracker", "supervisor", handle);
  return handle;
}

}  // namespace

CoreActors spawn_core(caf::actor_system& sys, const std::shared_ptr<SwarmContext>& ctx,
                      const std::shared_ptr<const model::Corpus>& corpus,
                      const CoreOptions& options) {
  const auto& config = ctx->config;
  const auto& sw = config.swarm;
  const bool averaged = ctx->averages_gradients();
  CoreActors core;
  auto* run = options.run;
  auto resume = checkpoint_to_resume(options);
  if (run) {
    core.sink = inspect::spawn_probed(sys, metrics_sink, &run->metrics());
    core.roster->put("metrics", "metrics", core.sink);
  }
  // Supervisors announce restarts to the tracker, which is spawned last.
  auto tracker = std::make_shared<caf::actor>();
  std::vector<supervisors::ChildSpec> loader_children, group_children, averager_children;
  for (int64_t k = 0; k < sw.loaders; ++k) {
    LoaderSetup ls{corpus,
                   k,
                   sw.loaders,
                   config.model.block_size,
                   config.train.micro_batch,
                   static_cast<uint64_t>(config.train.seed),
                   config.train.micro_batches};
    auto child = core_child(
        "loader", k,
        [&sys, ls] {
          return caf::actor_cast<caf::actor>(
              inspect::spawn_probed_typed<loader_actor, loader_state>(sys, data_loader, ls));
        },
        tracker);
    core.loaders.push_back(caf::actor_cast<loader_actor>(child.current));
    loader_children.push_back(std::move(child));
  }
  for (int64_t k = 0; k < sw.stages; ++k) {
    caf::actor averager, group;
    GroupStorePtr store;
    if (averaged) {
      auto child = core_child(
          "averager", k,
          [&sys, ctx, k, sink = core.sink] {
            return inspect::spawn_probed(sys, grad_averager, ContextPtr(ctx),
                                         static_cast<uint32_t>(k), sink);
          },
          tracker);
      averager = child.current;
      averager_children.push_back(std::move(child));
    }
    if (ctx->diloco()) {
      // θ(0) is the stage's initialization, which every worker also starts from.
      auto init = model::make_stage_model(config.model, model::StageSpec{k, sw.stages},
                                          static_cast<uint64_t>(config.train.seed));
      auto theta = model::parameters_of(*init);
      store = std::make_shared<GroupStore>();
      if (resume && !restore_group(resume->second, static_cast<uint32_t>(k), *store))
        throw model::CheckpointError(resume->first + ": no DiLoCo group state for stage " +
                                     std::to_string(k));
      store->journal = options.group_journal;
      auto child = core_child(
          "group", k,
          [&sys, ctx, k, theta, store, sink = core.sink] {
            return inspect::spawn_probed(sys, diloco_group, ContextPtr(ctx),
                                         static_cast<uint32_t>(k), theta, store, sink);
          },
          tracker);
      group = child.current;
      group_children.push_back(std::move(child));
    }
    core.averagers.push_back(averager);
    core.groups.push_back(group);
    core.group_stores.push_back(store);
  }
  // The journal starts with the run (a takeover chooses its own when the swarm is full).
  if (!options.kept_step)
    start_journal(core.group_stores,
                  resume ? swarm_checkpoint_step(resume->second, resume->first) : 0);
  const auto& policy = config.supervision;
  auto supervise = [&](const std::string& name, const std::string& what,
                       std::vector<supervisors::ChildSpec> children) {
    auto sup = inspect::spawn_probed(
        sys, supervisors::supervisor,
        supervisors::SupervisorSetup{what, policy, std::move(children), core.sink, core.roster});
    core.roster->put(name, "supervisor", sup);
    core.supervisors.push_back(sup);
  };
  supervise("supervisor/loaders", "loader supervisor", std::move(loader_children));
  if (!averager_children.empty())
    supervise("supervisor/averagers", "averager supervisor", std::move(averager_children));
  if (!group_children.empty())
    supervise("supervisor/groups", "group supervisor", std::move(group_children));
  supervisors::ChaosSetup cs;
  cs.config = config.chaos;
  cs.roster = core.roster;
  cs.metrics = core.sink;
  if (options.forward_kills) cs.forward = options.forward_kills;
  core.chaos = inspect::spawn_probed(sys, supervisors::chaos_control, cs);
  supervisors::register_chaos(core.chaos);
  core.roster->put("chaos", "chaos", core.chaos);

  core.tracker = spawn_tracker(sys, core, ctx, corpus, options, std::move(resume));
  *tracker = core.tracker;
  for (const auto& sup : core.supervisors) caf::anon_send(core.tracker, watch_atom::value, sup);
  return core;
}

caf::actor spawn_stage_supervisor(caf::actor_system& sys, const StageSupervisorSetup& setup,
                                  std::vector<messages::Member>& members) {
  // Copied into the workers' specs, which outlive the call.
  const caf::actor announce = setup.announce;
  const std::string endpoint = setup.endpoint;
  const std::vector<caf::actor> averagers = setup.averagers, groups = setup.groups;
  // The spec of one worker; a balancer's move asks it for its successor on another stage.
  auto make = std::make_shared<std::function<supervisors::ChildSpec(const WorkerSetup&)>>();
  std::weak_ptr<std::function<supervisors::ChildSpec(const WorkerSetup&)>> weak = make;
  *make = [&sys, announce, endpoint, averagers, groups, weak](const WorkerSetup& ws) {
    supervisors::ChildSpec child;
    child.name = supervisors::worker_name(ws.id);
    child.kind = "worker";
    child.stage = ws.stage;
    child.start = [&sys, ws] { return spawn_worker(sys, ws); };
    // The restarted worker keeps its id; it takes its stage's state before it takes work.
    child.on_restart = [announce, ws, endpoint](const caf::actor& h) {
      caf::anon_send(announce, restarted_atom::value,
                     messages::Member{ws.id, ws.stage, h, endpoint, ws.device});
    };
    // The children hold the factory (it holds none of them: no cycle).
    auto factory = weak.lock();
    child.respec = [ws, averagers, groups, factory](uint32_t id, uint32_t stage, double slow) {
      WorkerSetup next = ws;
      next.id = id;
      next.stage = stage;
      next.averager = stage < averagers.size() ? averagers[stage] : caf::actor{};
      next.group = stage < groups.size() ? groups[stage] : caf::actor{};
      next.slow_factor = slow;  // the same (emulated) hardware
      next.nan_at_step = 0;     // fault injection aimed at the worker it replaces
      return (*factory)(next);
    };
    return child;
  };
  std::vector<supervisors::ChildSpec> children;
  for (const auto& ws : setup.workers) {
    auto child = (*make)(ws);
    child.current = child.start();
    members.push_back({ws.id, ws.stage, child.current, endpoint});
    children.push_back(std::move(child));
  }
  auto sup = inspect::spawn_probed(
      sys, supervisors::supervisor,
      supervisors::SupervisorSetup{setup.name, setup.ctx->config.supervision, std::move(children),
                                   setup.metrics, setup.roster});
  if (setup.roster && !setup.workers.empty())
    setup.roster->put("supervisor/stage" + std::to_string(setup.workers.front().stage),
                      "supervisor", sup);
  return sup;
}

caf::actor supervise_balancer(caf::actor_system& sys, CoreActors& core, const ContextPtr& ctx,
                              std::vector<caf::actor> hosts,
                              std::function<double(uint32_t, double)> speed) {
  const auto& config = ctx->config;
  if (!config.balancer.enabled || config.swarm.stages < 2) return {};
  BalancerSetup bs;
  bs.ctx = ctx;
  bs.tracker = core.tracker;
  bs.hosts = std::move(hosts);
  bs.metrics = core.sink;
  bs.speed = std::move(speed);
  // Supervised like the others: a restarted balancer starts a new period (what it forgets,
  // who moved when, only delays a move back).
  supervisors::ChildSpec child;
  child.name = "balancer";
  child.kind = "balancer";
  child.start = [&sys, bs] { return inspect::spawn_probed(sys, balancer, bs); };
  child.current = child.start();
  core.balancer = child.current;
  auto sup = inspect::spawn_probed(
      sys, supervisors::supervisor,
      supervisors::SupervisorSetup{
          "balancer supervisor", config.supervision, {child}, core.sink, core.roster});
  core.roster->put("supervisor/balancer", "supervisor", sup);
  core.supervisors.push_back(sup);
  return sup;
}

WorkerSetup worker_setup(const ContextPtr& ctx, uint32_t id, uint32_t stage,
                         const caf::actor& tracker, const std::vector<caf::actor>& averagers,
                         const std::vector<caf::actor>& groups) {
  WorkerSetup ws;
  ws.ctx = ctx;
  ws.id = id;
  ws.stage = stage;
  ws.tracker = tracker;
  if (stage < averagers.size()) ws.averager = averagers[stage];
  if (stage < groups.size()) ws.group = groups[stage];
  ws.slow_factor = ctx->config.chaos.slowdown_of(static_cast<int64_t>(id));
  if (ctx->config.chaos.nan_worker == static_cast<int64_t>(id))
    ws.nan_at_step = ctx->config.chaos.nan_at_step;
  return ws;
}

caf::actor spawn_worker(caf::actor_system& sys, const WorkerSetup& setup) {
  return inspect::spawn_probed<caf::detached>(sys, stage_worker, setup);
}

RuntimeResult run_and_collect(caf::actor_system& sys, const CoreActors& core,
                              const messages::Membership& membership, bool keep_grads,
                              const std::shared_ptr<SwarmContext>& ctx) {
  RuntimeResult result;
  caf::scoped_actor self{sys};
  std::string failure;
  // The tracker announces the membership to every worker and stage actor before step 1.
  self->send(core.tracker, members_atom::value, membership);
  self->request(core.tracker, caf::infinite, run_atom::value)
      .receive([&](const messages::RunReport& r) { result.report = r; },
               [&](const caf::error& e) { failure = sys.render(e); });
  if (!failure.empty()) throw std::runtime_error("swarm run failed: " + failure);
  // Restarted workers have new handles: ask the tracker who serves now. Every end-of-run
  // request has a deadline: a frozen node's worker must not hold the end of the run forever
  // (what it does not answer in time is left out of the result).
  const auto small = config::as_duration(ctx->config.supervision.query_timeout_s);
  const auto large = config::as_duration(ctx->config.supervision.state_timeout_s);
  messages::Membership now = membership;
  self->request(core.tracker, small, ask_members_atom::value)
      .receive([&](const messages::Membership& m) { now = m; }, [&](const caf::error&) {});
  for (const auto& sup : core.supervisors)
    self->request(sup, small, faults_atom::value)
        .receive([&](uint64_t n) { result.restarts += n; }, [&](const caf::error&) {});
  self->request(core.tracker, small, faults_atom::value)
      .receive([&](uint64_t n) { result.restarts += n; }, [&](const caf::error&) {});
  if (core.balancer)
    self->request(core.balancer, small, info_atom::value)
        .receive([&](const std::string& info) { result.balancer = nlohmann::json::parse(info); },
                 [&](const caf::error&) {});
  if (core.chaos)
    self->request(core.chaos, small, faults_atom::value)
        .receive([&](uint64_t n) { result.kills = n; }, [&](const caf::error&) {});
  for (const auto& store : core.group_stores) {
    result.applied_rounds.emplace_back();
    result.fragment_rounds.emplace_back();
    if (!store) continue;
    std::lock_guard<std::mutex> lock(store->mu);
    result.applied_rounds.back() = store->applied_rounds;
    result.fragment_rounds.back() = store->fragment_rounds;
    result.group_theta.push_back(store->theta);
  }
  for (const auto& stage : now.stages)
    for (const auto& w : stage) {
      transport::ask<messages::TensorList>(self.ptr(), w.handle, large, params_atom::value)
          .receive(
              [&](const messages::TensorList& p) {
                if (!p.error.empty())
                  throw std::runtime_error("parameters of worker " + std::to_string(w.id) +
                                           " were refused: " + p.error);
                result.worker_params[w.id] = to_named(p);
              },
              [&](const caf::error&) {});
      self->request(w.handle, small, stats_atom::value)
          .receive(
              [&](const messages::WorkerStats& st) {
                result.dropped += st.dropped;
                result.forwards[st.id] = st.forwards;
                result.comm_frames += st.linked_frames;
                result.group_reduces += st.group_reduces;
                result.group_fallbacks += st.group_fallbacks;
                result.group_failures += st.group_failures;
                result.rejected[st.id] = st.rejected;
                result.report.rejected_frames += st.rejected;
              },
              [&](const caf::error&) {});
      if (keep_grads)
        transport::ask<messages::TensorList>(self.ptr(), w.handle, large, last_grads_atom::value)
            .receive([&](const messages::TensorList& g) { result.grads[w.id] = to_named(g); },
                     [&](const caf::error&) {});
    }
  for (const auto& stage : now.stages) {
    if (stage.empty()) continue;
    const auto& first = result.worker_params[stage.at(0).id];
    result.params.insert(result.params.end(), first.begin(), first.end());
  }
  result.bytes = ctx->swarm_bytes();
  return result;
}

RuntimeResult run_in_process(const config::RunConfig& config, const model::Corpus& corpus,
                             const RuntimeOptions& options) {
  // One torch thread per worker: each detached worker computes on its own thread, so the
  // cores are shared out by running workers side by side, not by splitting each op.
  model::set_compute_threads(1);
  // Every worker of this process computes on the CPU.
  if (auto why = model::check_precision(config.train.precision, c10::Device(c10::kCPU));
      !why.empty())
    throw std::invalid_argument(why);
  if (config.train.precision == config::Precision::bf16)
    if (auto slow = model::slow_bf16_reason(); !slow.empty())
      spdlog::warn("train.precision = bf16: {}", slow);
  caf::actor_system_config cfg;
  configure_actor_system(cfg);
  caf::actor_system sys{cfg};

  auto ctx = std::make_shared<SwarmContext>();
  ctx->config = config;
  ctx->run_id = std::random_device{}();
  ctx->wiring_measure = options.wiring_measure;
  const auto& sw = config.swarm;
  auto shared_corpus = std::shared_ptr<const model::Corpus>(&corpus, [](auto*) {});
  CoreOptions co;
  co.run = options.run;
  co.progress = options.progress;
  co.resume = options.resume;
  auto core = spawn_core(sys, ctx, shared_corpus, co);

  // One stage supervisor per stage; restarts go straight to the tracker.
  messages::Membership membership;
  membership.version = 1;
  std::vector<caf::actor> everyone = core.all();
  if (!options.stage_workers.empty() &&
      options.stage_workers.size() != static_cast<size_t>(sw.stages))
    throw std::invalid_argument("stage_workers names " +
                                std::to_string(options.stage_workers.size()) +
                                " stages, the config has " + std::to_string(sw.stages));
  for (int64_t k = 0; k < sw.stages; ++k) {
    std::vector<WorkerSetup> setups;
    const int64_t workers =
        options.stage_workers.empty() ? sw.workers_per_stage : options.stage_workers[k];
    if (workers < 1) throw std::invalid_argument("every stage starts with a worker at least");
    for (int64_t r = 0; r < workers; ++r) {
      auto ws = worker_setup(ctx, worker_id(k, r), static_cast<uint32_t>(k), core.tracker,
                             core.averagers, core.groups);
      ws.keep_grads = options.keep_grads;
      setups.push_back(ws);
    }
    std::vector<messages::Member> stage;
    auto sup =
        spawn_stage_supervisor(sys,
                               {"stage " + std::to_string(k) + " supervisor", ctx, setups, "",
                                core.tracker, core.sink, core.roster, core.averagers, core.groups},
                               stage);
    caf::anon_send(core.tracker, watch_atom::value, sup);
    everyone.push_back(sup);
    core.supervisors.push_back(sup);
    membership.stages.push_back(std::move(stage));
  }
  // The stage supervisor holding a worker answers its move.
  if (auto sup = supervise_balancer(sys, core, ctx, core.supervisors, options.balancer_speed))
    everyone.push_back(sup);
  if (options.on_start) options.on_start(sys, membership);
  if (options.on_core) options.on_core(sys, core);
  auto shutdown = [&] {
    caf::scoped_actor self{sys};
    // Supervisors first (they stop their children), then everything else.
    for (auto& a : everyone) self->send_exit(a, caf::exit_reason::user_shutdown);
  };
  try {
    auto result = run_and_collect(sys, core, membership, options.keep_grads, ctx);
    shutdown();
    return result;
  } catch (...) {
    shutdown();
    throw;
  }
}

}  // namespace swarmrt::actors
