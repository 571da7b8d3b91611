#include "actors/runtime.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>
#include <random>

#include "actors/data_loader.hpp"
#include "actors/diloco_group.hpp"
#include "actors/grad_averager.hpp"
#include "actors/metrics_sink.hpp"
#include "actors/step_tracker.hpp"
#include "actors/tensor_list.hpp"
#include "model/gpt.hpp"
#include "model/threads.hpp"

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
}

std::vector<caf::actor> CoreActors::all() const {
  std::vector<caf::actor> out;
  for (const auto& a : {sink, tracker})
    if (a) out.push_back(a);
  for (const auto* list : {&loaders, &averagers, &groups})
    for (const auto& a : *list)
      if (a) out.push_back(a);
  return out;
}

CoreActors spawn_core(caf::actor_system& sys, const std::shared_ptr<SwarmContext>& ctx,
                      const std::shared_ptr<const model::TextCorpus>& corpus, model::RunDir* run,
                      bool progress) {
  const auto& config = ctx->config;
  const auto& sw = config.swarm;
  const bool averaged = ctx->grad_sync() && sw.workers_per_stage > 1;
  CoreActors core;
  if (run) core.sink = sys.spawn(metrics_sink, &run->metrics());
  for (int64_t k = 0; k < sw.loaders; ++k) {
    LoaderSetup ls{corpus,
                   k,
                   sw.loaders,
                   config.model.block_size,
                   config.train.micro_batch,
                   static_cast<uint64_t>(config.train.seed)};
    core.loaders.push_back(sys.spawn(data_loader, ls));
  }
  std::vector<caf::actor> stage_actors;
  for (int64_t k = 0; k < sw.stages; ++k) {
    caf::actor averager, group;
    if (averaged) averager = sys.spawn(grad_averager, ctx, static_cast<uint32_t>(k));
    if (ctx->diloco()) {
      // θ(0) is the stage's initialization, which every worker also starts from.
      model::GPT init(model::GPTConfig::from(config.model), model::StageSpec{k, sw.stages},
                      static_cast<uint64_t>(config.train.seed));
      group = sys.spawn(diloco_group, ctx, static_cast<uint32_t>(k), model::parameters_of(*init));
    }
    core.averagers.push_back(averager);
    core.groups.push_back(group);
    for (auto& a : {averager, group})
      if (a) stage_actors.push_back(a);
  }
  TrackerSetup ts{ctx, core.loaders, stage_actors, core.sink, corpus, progress};
  core.tracker = sys.spawn(step_tracker, ts);
  return core;
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
  if (ctx->config.chaos.slow_worker == static_cast<int64_t>(id))
    ws.slow_factor = ctx->config.chaos.slow_factor;
  return ws;
}

caf::actor spawn_worker(caf::actor_system& sys, const WorkerSetup& setup) {
  return sys.spawn<caf::detached>(stage_worker, setup);
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
  for (const auto& stage : membership.stages)
    for (const auto& w : stage) {
      self->request(w.handle, caf::infinite, params_atom::value)
          .receive(
              [&](const messages::TensorList& p) {
                if (!p.error.empty())
                  throw std::runtime_error("parameters of worker " + std::to_string(w.id) +
                                           " were refused: " + p.error);
                result.worker_params[w.id] = to_named(p);
              },
              [&](const caf::error&) {});
      self->request(w.handle, caf::infinite, stats_atom::value)
          .receive(
              [&](uint32_t id, uint64_t rejected, int64_t forwards, uint64_t) {
                result.forwards[id] = forwards;
                result.rejected[id] = rejected;
                result.report.rejected_frames += rejected;
              },
              [&](const caf::error&) {});
      if (keep_grads)
        self->request(w.handle, caf::infinite, grads_atom::value)
            .receive([&](const messages::TensorList& g) { result.grads[w.id] = to_named(g); },
                     [&](const caf::error&) {});
    }
  for (const auto& stage : membership.stages) {
    const auto& first = result.worker_params[stage.at(0).id];
    result.params.insert(result.params.end(), first.begin(), first.end());
  }
  result.bytes = ctx->bytes->to_json();
  return result;
}

RuntimeResult run_in_process(const model::RunConfig& config, const model::TextCorpus& corpus,
                             const RuntimeOptions& options) {
  // One torch thread per worker: each detached worker computes on its own thread, so the
  // cores are shared out by running workers side by side, not by splitting each op.
  model::set_compute_threads(1);
  caf::actor_system_config cfg;
  configure_actor_system(cfg);
  caf::actor_system sys{cfg};

  auto ctx = std::make_shared<SwarmContext>();
  ctx->config = config;
  ctx->run_id = std::random_device{}();
  const auto& sw = config.swarm;
  auto shared_corpus = std::shared_ptr<const model::TextCorpus>(&corpus, [](auto*) {});
  auto core = spawn_core(sys, ctx, shared_corpus, options.run, options.progress);

  messages::Membership membership;
  membership.version = 1;
  std::vector<caf::actor> everyone = core.all();
  for (int64_t k = 0; k < sw.stages; ++k) {
    std::vector<messages::Member> stage;
    for (int64_t r = 0; r < sw.workers_per_stage; ++r) {
      auto ws = worker_setup(ctx, worker_id(k, r), static_cast<uint32_t>(k), core.tracker,
                             core.averagers, core.groups);
      ws.keep_grads = options.keep_grads;
      stage.push_back({ws.id, ws.stage, spawn_worker(sys, ws), {}});
      everyone.push_back(stage.back().handle);
    }
    membership.stages.push_back(std::move(stage));
  }
  if (options.on_start) options.on_start(sys, membership);
  auto shutdown = [&] {
    caf::scoped_actor self{sys};
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
