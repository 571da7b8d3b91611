// The coordinator's run under this leader (coordinator.hpp), as named steps: where it starts
// (a fresh run, --resume, a takeover from the nodes' kept states or a checkpoint), the run
// directory and its records, the swarm's actors and the membership nodes join, the status
// page, listening, training until the swarm stops.
#include <spdlog/spdlog.h>
#include <atomic>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/publish.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "actors/membership/directory.hpp"
#include "actors/membership/state_keeper.hpp"
#include "actors/runtime/runtime.hpp"
#include "apps/coordinator.hpp"
#include "apps/options.hpp"
#include "apps/plot.hpp"
#include "config/fingerprint.hpp"
#include "credential/cluster_tls.hpp"
#include "credential/credential.hpp"
#include "inspect/probe.hpp"
#include "messages/run_id.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/record_hook.hpp"
#include "model/trainer.hpp"
#include "transport/bulk.hpp"
#include "transport/channel.hpp"
#include "web/status_server.hpp"

namespace swarmrt::apps {
namespace {
namespace fs = std::filesystem;

// The step of the newest checkpoint file in the run directory; 0 when there is none.
int64_t newest_checkpoint_step(const std::string& run_dir) {
  const auto files = model::CheckpointDir((fs::path(run_dir) / "checkpoints").string()).list();
  if (files.empty()) return 0;
  const auto name = fs::path(files.front()).filename().string();  // step_XXXXXXXX.ckpt
  try {
    return std::stoll(name.substr(5));
  } catch (const std::exception&) {
    return 0;
  }
}

// A takeover re-runs the steps after where it continues (the nodes' kept states or its
// checkpoint): their step and eval records go from metrics.jsonl (written aside and renamed),
// and a torn last line with them. Returns the latest wall time of any record: the previous
// leader's last sign of life.
double drop_records_after(const std::string& run_dir, int64_t step) {
  return model::drop_records_after((fs::path(run_dir) / "metrics.jsonl").string(), step);
}
using namespace swarmrt::atoms;

// Without a given secret the coordinator makes one, like a notebook server's token, and keeps
// it in the run directory (0600, never logged); a resumed run takes it up again.
void ensure_secret(bool resume, CoordinatorInputs& in) {
  if (!in.secret.empty()) return;
  const std::string secret_path = (std::filesystem::path(in.out) / "secret").string();
  in.secret = run_dir_secret(in.out, resume);
  spdlog::info("cluster secret in {} (nodes: --secret-file, or SWARMRT_SECRET)", secret_path);
  // The launcher reads this line to hand the secret to the nodes it starts.
  std::printf("cluster secret file %s\n", std::filesystem::absolute(secret_path).string().c_str());
}

// The transport's settings from the config, and the chaos a user asked for, said once.
void set_up_transport(const config::RunConfig& config) {
  transport::set_max_message(config.max_message_bytes());
  transport::set_encrypt_mode(config.transport.encrypt);
  transport::set_link_delay(config.chaos.link_delay_ms);
  transport::set_link_bandwidth(config.chaos.link_mbit_s);
  if (config.chaos.link_delay_ms > 0)
    spdlog::warn("chaos: every frame sent between processes waits {} ms",
                 config.chaos.link_delay_ms);
  if (config.chaos.link_mbit_s > 0)
    spdlog::warn("chaos: every frame link carries at most {} Mbit/s", config.chaos.link_mbit_s);
  if (config.chaos.drop_fraction > 0)
    spdlog::warn("chaos: {:.1f}% of micro-batch hops are lost on the way",
                 config.chaos.drop_fraction * 100);
}

// The directory nodes join and the inspector consoles reach (the directory hands it out).
struct MembershipActors {
  caf::actor directory, inspector;
};

MembershipActors spawn_membership(caf::actor_system& sys, actors::CoreActors& core,
                                  const std::shared_ptr<actors::SwarmContext>& ctx,
                                  const CoordinatorInputs& in, const std::string& endpoint,
                                  caf::actor& forward_kills,
                                  std::function<nlohmann::json()> coordinators,
                                  std::function<std::vector<std::string>()> replicas) {
  const auto& config = in.config;
  actors::DirectorySetup ds;
  ds.ctx = ctx;
  ds.config_toml = config::to_toml(config);
  ds.fingerprint_text = config::fingerprint_text(config);
  ds.secret = in.secret;
  ds.endpoint = endpoint;
  ds.tracker = core.tracker;
  ds.averagers = core.averagers;
  ds.groups = core.groups;
  ds.sink = core.sink;
  ds.roster = core.roster;
  ds.replicas = std::move(replicas);
  ds.world_nodes = in.world_nodes;
  // The console's entry: a console asks the directory for it, then sends it commands.
  actors::InspectorSetup is;
  is.roster = core.roster;
  is.nodes = ds.nodes;
  is.metrics = core.sink;
  is.config_toml = ds.config_toml;
  is.coordinators = std::move(coordinators);
  is.query_timeout_s = config.supervision.query_timeout_s;
  is.answer_lead_ms = config.supervision.answer_lead_ms;
  MembershipActors m;
  m.inspector = inspect::spawn_probed(sys, actors::inspector, is);
  core.roster->put("inspector", "inspector", m.inspector);
  actors::register_inspector(m.inspector);
  ds.inspector = m.inspector;
  m.directory = inspect::spawn_probed(sys, actors::directory, ds);
  core.roster->put("directory", "directory", m.directory);
  forward_kills = m.directory;  // kills of workers and nodes go to the nodes
  // The directory carries the balancer's moves to the workers' nodes.
  actors::supervise_balancer(sys, core, ctx, {m.directory});
  return m;
}

// The status page and /metrics: the same inspector, behind a token of its own (written 0600
// beside the secret, never logged). Null, with the reason logged, when it cannot listen.
std::unique_ptr<web::StatusServer> start_status_page(caf::actor_system& sys,
                                                     const CoordinatorArgs& args,
                                                     const CoordinatorInputs& in,
                                                     const caf::actor& inspector) {
  const std::string& out = in.out;
  const std::string token_path = (std::filesystem::path(out) / "http_token").string();
  const std::string token = credential::http_token(in.secret);
  credential::write_secret_file(token_path, token);
  web::StatusServerSetup ws;
  ws.system = &sys;
  ws.inspector = inspector;
  ws.token = token;
  ws.token_file = token_path;
  ws.query_timeout_s = in.config.supervision.query_timeout_s;
  const std::string chart_path = (std::filesystem::path(out) / "status_chart.svg").string();
  ws.chart_svg = [out, chart_path](std::string& error) -> std::string {
    try {
      report::ChartOptions o;
      o.format = report::ChartFormat::svg;
      o.title = out;
      o.width = 1000;
      o.height = 900;
      error = render_chart({report::read_run(out, std::filesystem::path(out).filename())}, o,
                           chart_path);
      if (!error.empty()) return "";
      std::ifstream f(chart_path);
      return std::string(std::istreambuf_iterator<char>(f), {});
    } catch (const std::exception& e) {
      error = e.what();
      return "";
    }
  };
  const auto& http = in.http;
  if (http.host.rfind("127.", 0) != 0 && http.host != "localhost" && http.host != "::1")
    spdlog::warn(
        "--http {}: the status page is plain HTTP, so its token crosses the network "
        "in clear beyond this machine; serve it on 127.0.0.1 behind a TLS proxy",
        args.http);
  auto status = std::make_unique<web::StatusServer>(ws);
  try {
    const int port = status->start(http.host, http.port);
    spdlog::info(
        "status page on http://{}:{}/ (token in {}: open /?token=TOKEN once, or "
        "send Authorization: Bearer TOKEN)",
        http.host, port, token_path);
    std::printf("status page on http://%s:%d/\n", http.host.c_str(), port);
  } catch (const std::exception& e) {
    spdlog::error("--http {}: {}", args.http, e.what());
    return nullptr;
  }
  return status;
}

// Waits for a full swarm and trains; the exit code (the reason logged on the last line when
// the run did not complete).
int train_swarm(caf::actor_system& sys, const actors::CoreActors& core,
                const std::shared_ptr<actors::SwarmContext>& ctx, const caf::actor& dir,
                model::RunDir& run, const model::Corpus& corpus, const StopSignals& signals,
                const std::function<void()>& shutdown) {
  const auto& config = ctx->config;
  caf::scoped_actor self{sys};
  bool full = false;
  self->request(dir, caf::infinite, ready_atom::value)
      .receive([&] { full = true; }, [&](const caf::error&) {});
  if (!full) {
    shutdown();
    spdlog::error("the run did not complete: the coordinator stopped before the swarm was full");
    return 1;
  }
  messages::Membership membership;
  self->request(dir, std::chrono::seconds(30), ask_members_atom::value)
      .receive([&](const messages::Membership& m) { membership = m; }, [&](const caf::error&) {});
  spdlog::info("swarm is full: training {} steps", config.train.steps);
  actors::RuntimeResult result;
  try {
    result = actors::run_and_collect(sys, core, membership, false, ctx);
  } catch (const std::exception& e) {
    shutdown();
    // Whatever stopped it, a run that did not reach train.steps exits non-zero and says why
    // on its last line, so a launcher or a script never mistakes it for a finished one.
    spdlog::error("the run did not complete its {} steps: {}{}", config.train.steps,
                  signals.fired() ? "stopped by a signal; " : "", e.what());
    return 1;
  }
  // The tracker saved the last step with the swarm's state (the whole model included), so
  // the run can be extended with --resume; the whole model alone only where it did not.
  if (!run.checkpoints().has(config.train.steps)) {
    model::Checkpoint ckpt;
    ckpt.tensors = result.params;
    ckpt.meta_json = model::checkpoint_meta(config, config.train.steps, {});
    run.checkpoints().save(config.train.steps, ckpt, config.checkpoint.keep);
  }
  if (result.comm_frames > 0)
    spdlog::info("{} hops came over communicator links (transport.links = {})", result.comm_frames,
                 config::name_of(config.transport.links));
  if (result.group_reduces > 0)
    spdlog::info("{} pseudo-gradients were all-reduced over group communicators",
                 result.group_reduces);
  if (result.group_fallbacks > 0)
    spdlog::info(
        "{} pseudo-gradients went to their group alone although it had a "
        "communicator ({} after a failed all-reduce or an unanswered round)",
        result.group_fallbacks, result.group_failures);
  if (result.report.rejected_frames > 0)
    spdlog::warn("{} frames were rejected during the run", result.report.rejected_frames);
  shutdown();
  std::printf(
      "\nfinal validation loss %.4f nats/token, %s bits/byte (perplexity %.2f) after "
      "%lld steps\n",
      result.report.val_loss,
      model::format_bpb(corpus.bits_per_byte(result.report.val_loss)).c_str(),
      std::exp(result.report.val_loss), static_cast<long long>(config.train.steps));
  return 0;
}

}  // namespace

namespace {

// Where the run starts: fresh, from its newest checkpoint (--resume, or a takeover without
// kept states), or where a lost leader left it (the states the nodes kept).
struct StartPoint {
  bool resume = false, overwrite = false;
  int64_t resumed_step = 0;
  // Where a takeover may continue: in grad-sync modes and plain DiLoCo the nodes keep their
  // workers' states when they lose the leader, at the step it closed last (its last step
  // record); the tracker continues from them if they cover every stage, with each DiLoCo
  // group's journal entry of that step (actors/tracker/takeover.cpp).
  std::optional<uint64_t> kept_step;
  bool kept_evaluated = false;
};

StartPoint where_to_start(const CoordinatorArgs& args, CoordinatorInputs& in,
                          leader::Leading& leading) {
  StartPoint at;
  at.resume = args.resume;
  at.overwrite = args.overwrite;
  if (leading.took_over) {
    // Else the previous leader's run goes on from its newest checkpoint; without one it
    // starts again.
    at.resumed_step = newest_checkpoint_step(in.out);
    at.resume = at.resumed_step > 0;
    at.overwrite = !at.resume;
    actors::SwarmContext modes;  // what the run's mode is, as every actor asks it
    modes.config = in.config;
    const auto log = (std::filesystem::path(in.out) / "metrics.jsonl").string();
    const int64_t last = model::last_record_step(log, "step");
    if (actors::keeps_states(modes) && last > at.resumed_step) {
      at.kept_step = static_cast<uint64_t>(last);
      at.kept_evaluated = model::last_record_step(log, "eval") == last;
      at.overwrite = false;
    }
  } else if (at.resume) {
    at.resumed_step = newest_checkpoint_step(in.out);
  }
  // A coordinator kill the config asks for was the first leader's: the one that takes over
  // from it reaches the same step again and must not kill itself in turn.
  if (leading.took_over && in.config.chaos.kill == "coordinator") {
    spdlog::warn("chaos.kill = \"coordinator\" killed the previous leader; not again");
    in.config.chaos.kill.clear();
  }
  // The steps after the checkpoint run again: their records go, so each step has one. (A
  // takeover that may continue from the nodes' kept states keeps those after the checkpoint
  // until the tracker has chosen.)
  if (at.kept_step)
    leading.previous_wall = drop_records_after(in.out, static_cast<int64_t>(*at.kept_step));
  else if (at.resume && at.resumed_step > 0)
    leading.previous_wall = drop_records_after(in.out, at.resumed_step);
  return at;
}

// A takeover's fault record, and its recovery, recorded with the first step this leader
// completes: from the previous leader's last record (its last sign of life) to that step.
void record_takeover(model::RunDir& run, const leader::Leading& leading, const StartPoint& at) {
  nlohmann::json fault{{"event", "fault"},
                       {"kind", "coordinator"},
                       {"previous", leading.previous},
                       {"resumed_step", at.resumed_step}};
  if (at.kept_step) fault["kept_step"] = *at.kept_step;
  if (leading.previous_wall > 0)
    fault["seconds_since_last_record"] = model::wall_clock_s() - leading.previous_wall;
  run.metrics().write(fault);
  const double since = leading.previous_wall > 0 ? leading.previous_wall : model::wall_clock_s();
  model::follow_next_record("step", [since](const nlohmann::json& step) {
    return nlohmann::json{{"event", "recovered"},
                          {"kind", "coordinator"},
                          {"step", step.value("step", int64_t{0})},
                          {"seconds", step.value("wall", model::wall_clock_s()) - since}};
  });
}

// What `ctl nodes` lists as the coordinator replicas, and where nodes look for the next
// leader: as etcd has them, or this one alone (at the port bound once listening, unless an
// advertised address stands for it).
struct ReplicaViews {
  std::function<nlohmann::json()> coordinators;
  std::function<std::vector<std::string>()> replicas;  // none without --etcd
};
ReplicaViews replica_views(const CoordinatorArgs& args, const CoordinatorInputs& in,
                           const leader::Leading& leading,
                           const std::shared_ptr<std::atomic<uint16_t>>& bound) {
  ReplicaViews v;
  if (leading.replicas) {
    v.coordinators = [view = leading.replicas] { return view->rows(); };
    v.replicas = [view = leading.replicas] { return leader::replica_addresses(view->rows()); };
    return v;
  }
  v.coordinators = [row = leader::lone_coordinator_row(listed_address(args)), bound,
                    host = in.listen.host, fixed = !args.advertise.empty()] {
    auto r = row;
    if (*bound != 0 && !fixed) r["address"] = host + ":" + std::to_string(bound->load());
    return nlohmann::json::array({r});
  };
  return v;
}

// Publishes the directory on --listen over mutual TLS (a peer without the cluster's
// certificate gets no handle) and says so, with the lines a launcher reads (the run id, the
// port). The port, or nothing with the reason logged.
std::optional<uint16_t> listen(caf::actor_system& sys, const CoordinatorArgs& args,
                               const CoordinatorInputs& in, const caf::actor& directory,
                               const std::string& endpoint, uint64_t run_id,
                               std::atomic<uint16_t>& bound) {
  const auto& config = in.config;
  const char* host = in.listen.host == "0.0.0.0" ? nullptr : in.listen.host.c_str();
  auto port = caf::openssl::publish(directory, in.listen.port, host, true);
  if (!port) {
    spdlog::error("cannot listen on {}: {}", args.listen, sys.render(port.error()));
    return std::nullopt;
  }
  bound = *port;
  spdlog::info("run {} | mode {} | {}x{} workers wanted | fingerprint {}", in.out,
               config::name_of(config.swarm.mode), config.swarm.stages,
               config.swarm.workers_per_stage, config::fingerprint(config));
  spdlog::info("control plane on {}:{} (mutual TLS, cluster CA {}); frame link {}", in.listen.host,
               *port, credential::cluster_ca_id(in.secret), endpoint.empty() ? "none" : endpoint);
  std::printf("run id %s\n", messages::run_id_text(run_id).c_str());
  std::printf("coordinator listening on %s:%u\n", in.listen.host.c_str(), *port);
  std::fflush(stdout);
  return *port;
}

}  // namespace

// The named steps of the run: where it starts, the run directory, the data, the actor system
// and the swarm's actors, the membership, the status page, listening, training.
int lead_run(const CoordinatorArgs& args, CoordinatorInputs& in, leader::Leading& leading,
             SignalTargets& targets, const StopSignals& signals) {
  const auto& config = in.config;
  const auto at = where_to_start(args, in, leading);
  try {
    model::RunDir run(in.out, config,
                      at.resume || at.kept_step ? model::RunStart::resume
                      : at.overwrite            ? model::RunStart::overwrite
                                                : model::RunStart::fresh);
    if (leading.took_over) record_takeover(run, leading, at);
    auto corpus = std::make_shared<const model::Corpus>(
        model::Corpus::load(config.data, config.model.vocab_size));
    run.keep_tokenizer(corpus->tokenizer_file());
    // A takeover keeps the run's secret: the nodes hold it.
    ensure_secret(at.resume || leading.took_over, in);
    caf::actor_system_config cfg;
    TlsFilesGuard tls{configure_network(cfg, args.net, in.secret, "coordinator")};
    caf::actor_system sys{cfg};
    AtScopeExit forget_system{[&] {
      std::lock_guard<std::mutex> lock(targets.mu);
      targets.system = nullptr;
    }};
    auto ctx = std::make_shared<actors::SwarmContext>();
    ctx->config = config;
    // 64 random bits: two runs never share an id (launch --from-env derives one from the job,
    // so nodes it starts elsewhere join this run and no other).
    ctx->run_id = in.run_id != 0 ? in.run_id
                                 : (static_cast<uint64_t>(std::random_device{}()) << 32) |
                                       std::random_device{}();
    actors::CoreOptions co;
    co.run = &run;
    co.resume = at.resume;
    co.kept_step = at.kept_step;
    co.kept_evaluated = at.kept_evaluated;
    // With replicas, each DiLoCo round is on disk for a standby before it is answered.
    if (leading.lead) co.group_journal = (std::filesystem::path(in.out) / "diloco").string();
    co.forward_kills = std::make_shared<caf::actor>();
    auto core = actors::spawn_core(sys, ctx, corpus, co);
    set_up_transport(config);
    // Frames to and from the nodes go over a TCP link of their own beside CAF's.
    const std::string endpoint =
        args.frames_over_caf ? std::string() : transport::start_bulk_server(in.listen.host);
    auto bound = std::make_shared<std::atomic<uint16_t>>(0);  // the port once listening
    auto views = replica_views(args, in, leading, bound);
    const auto m = spawn_membership(sys, core, ctx, in, endpoint, *co.forward_kills,
                                    std::move(views.coordinators), std::move(views.replicas));
    {
      std::lock_guard<std::mutex> lock(targets.mu);
      targets.directory = m.directory;
      targets.tracker = core.tracker;
      targets.system = &sys;
    }
    auto shutdown = [&] {
      caf::scoped_actor self{sys};
      self->send(m.directory, stop_atom::value);
      // Give the stop messages a moment to leave before the connections close.
      self->request(m.directory, std::chrono::seconds(5), ask_members_atom::value)
          .receive([](const messages::Membership&) {}, [](const caf::error&) {});
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      for (auto& a : core.all()) self->send_exit(a, caf::exit_reason::user_shutdown);
      self->send_exit(m.directory, caf::exit_reason::user_shutdown);
      self->send_exit(m.inspector, caf::exit_reason::user_shutdown);
    };
    std::unique_ptr<web::StatusServer> status;
    if (!args.http.empty() && !(status = start_status_page(sys, args, in, m.inspector))) {
      // A takeover goes on without its page (the frozen old leader may still hold the port):
      // the run matters more than its view.
      if (!leading.took_over) {
        shutdown();
        return 1;
      }
      spdlog::warn("continuing the run without a status page");
    }
    if (!listen(sys, args, in, m.directory, endpoint, ctx->run_id, *bound)) {
      shutdown();
      return 1;
    }
    return train_swarm(sys, core, ctx, m.directory, run, *corpus, signals, shutdown);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

}  // namespace swarmrt::apps
