#include "actors/runtime.hpp"

#include <spdlog/spdlog.h>
#include <caf/all.hpp>
#include <random>

#include "actors/context.hpp"
#include "actors/data_loader.hpp"
#include "actors/diloco_group.hpp"
#include "actors/grad_averager.hpp"
#include "actors/metrics_sink.hpp"
#include "actors/stage_worker.hpp"
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
  const bool averaged = ctx->grad_sync() && sw.workers_per_stage > 1;
  auto shared_corpus = std::shared_ptr<const model::TextCorpus>(&corpus, [](auto*) {});

  std::vector<caf::actor> everyone;
  caf::actor sink;
  if (options.run) {
    sink = sys.spawn(metrics_sink, &options.run->metrics());
    everyone.push_back(sink);
  }
  std::vector<caf::actor> loaders;
  for (int64_t k = 0; k < sw.loaders; ++k) {
    LoaderSetup ls{shared_corpus,
                   k,
                   sw.loaders,
                   config.model.block_size,
                   config.train.micro_batch,
                   static_cast<uint64_t>(config.train.seed)};
    loaders.push_back(sys.spawn(data_loader, ls));
    everyone.push_back(loaders.back());
  }
  TrackerSetup ts{ctx, loaders, sink, shared_corpus, options.progress};
  auto tracker = sys.spawn(step_tracker, ts);
  everyone.push_back(tracker);

  messages::Membership membership;
  membership.version = 1;
  std::vector<caf::actor> groups_and_averagers;
  for (int64_t k = 0; k < sw.stages; ++k) {
    caf::actor averager, group;
    if (averaged) averager = sys.spawn(grad_averager, ctx, static_cast<uint32_t>(k));
    if (ctx->diloco()) {
      // θ(0) is the stage's initialization, which every worker also starts from.
      model::GPT init(model::GPTConfig::from(config.model), model::StageSpec{k, sw.stages},
                      static_cast<uint64_t>(config.train.seed));
      group = sys.spawn(diloco_group, ctx, static_cast<uint32_t>(k), model::parameters_of(*init));
    }
    for (auto& a : {averager, group})
      if (a) groups_and_averagers.push_back(a);
    std::vector<messages::Member> stage;
    for (int64_t r = 0; r < sw.workers_per_stage; ++r) {
      WorkerSetup ws;
      ws.ctx = ctx;
      ws.id = worker_id(k, r);
      ws.stage = static_cast<uint32_t>(k);
      ws.tracker = tracker;
      ws.averager = averager;
      ws.group = group;
      ws.keep_grads = options.keep_grads;
      if (auto it = options.slow_factors.find(ws.id); it != options.slow_factors.end())
        ws.slow_factor = it->second;
      stage.push_back({ws.id, ws.stage, sys.spawn<caf::detached>(stage_worker, ws)});
    }
    membership.stages.push_back(std::move(stage));
  }
  std::vector<caf::actor> workers;
  for (const auto& stage : membership.stages)
    for (const auto& w : stage) workers.push_back(w.handle);
  everyone.insert(everyone.end(), groups_and_averagers.begin(), groups_and_averagers.end());
  everyone.insert(everyone.end(), workers.begin(), workers.end());
  caf::anon_send(tracker, members_atom::value, membership);
  for (auto& a : groups_and_averagers) caf::anon_send(a, members_atom::value, membership);
  for (auto& w : workers) caf::anon_send(w, members_atom::value, membership);

  if (options.on_start) options.on_start(sys, membership);
  RuntimeResult result;
  caf::scoped_actor self{sys};
  std::string failure;
  self->request(tracker, caf::infinite, run_atom::value)
      .receive([&](const messages::RunReport& r) { result.report = r; },
               [&](const caf::error& e) { failure = sys.render(e); });
  if (failure.empty()) {
    for (const auto& stage : membership.stages)
      for (const auto& w : stage) {
        self->request(w.handle, caf::infinite, params_atom::value)
            .receive(
                [&](const messages::TensorList& p) { result.worker_params[w.id] = to_named(p); },
                [&](const caf::error&) {});
        self->request(w.handle, caf::infinite, stats_atom::value)
            .receive(
                [&](uint32_t id, uint64_t rejected, int64_t forwards, uint64_t) {
                  result.forwards[id] = forwards;
                  result.rejected[id] = rejected;
                  result.report.rejected_frames += rejected;
                },
                [&](const caf::error&) {});
        if (options.keep_grads)
          self->request(w.handle, caf::infinite, grads_atom::value)
              .receive([&](const messages::TensorList& g) { result.grads[w.id] = to_named(g); },
                       [&](const caf::error&) {});
      }
    for (const auto& stage : membership.stages) {
      const auto& first = result.worker_params[stage.at(0).id];
      result.params.insert(result.params.end(), first.begin(), first.end());
    }
  }
  result.bytes = ctx->bytes->to_json();
  for (auto& a : everyone) self->send_exit(a, caf::exit_reason::user_shutdown);
  if (!failure.empty()) throw std::runtime_error("swarm run failed: " + failure);
  return result;
}

}  // namespace swarmrt::actors
