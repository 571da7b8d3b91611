// swarmrt coordinator --config FILE --listen HOST:PORT [--secret-file F] [--out DIR]
// Hosts the membership directory, step tracker, data loaders, gradient averagers and DiLoCo
// groups; waits until nodes have brought stages x workers_per_stage workers, runs the training,
// writes the whole model as a checkpoint, then tells every node to stop and exits.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <atomic>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/publish.hpp>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "actors/membership/directory.hpp"
#include "actors/membership/state_keeper.hpp"
#include "actors/runtime/runtime.hpp"
#include "apps/commands.hpp"
#include "apps/coordinator_leader.hpp"
#include "apps/net.hpp"
#include "apps/plot.hpp"
#include "apps/run_options.hpp"
#include "inspect/probe.hpp"
#include "messages/run_id.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/fingerprint.hpp"
#include "model/record_hook.hpp"
#include "model/trainer.hpp"
#include "supervisors/entitled.hpp"
#include "transport/bulk.hpp"
#include "transport/channel.hpp"
#include "transport/cluster_tls.hpp"
#include "transport/credential.hpp"
#include "web/status_server.hpp"

namespace swarmrt::apps {
namespace {
using namespace swarmrt::atoms;

struct CoordinatorArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string listen = "127.0.0.1:0";
  std::string advertise;  // HOST:PORT nodes and consoles reach this coordinator at; empty: --listen
  std::string out;
  bool overwrite = false;
  bool resume = false;
  bool frames_over_caf = false;
  std::string http;                 // HOST:PORT of the status page, empty: none
  std::string run_id;               // hex; empty: a random one
  double signal_checkpoint_s = 60;  // SIGTERM/SIGUSR1: wait this long for a checkpoint
  uint32_t world_nodes = 0;         // node processes the launcher's world brings; 0: unknown
  NetOptions net;
  LeaderOptions leader;  // --etcd: one of several replicas of the run
};

// The address this coordinator is listed under (etcd's replica list, a join's answer, `ctl
// nodes`), for nodes and consoles to find it by.
const std::string& listed_address(const CoordinatorArgs& args) {
  return args.advertise.empty() ? args.listen : args.advertise;
}

// A scheduler's SIGTERM (preemption, scancel) or SIGUSR1 (`--signal=USR1@120`, before the
// time limit) asks for a checkpoint at the end of the step under way, so `--resume` in the
// next allocation loses nothing; the swarm is stopped after it, or after `timeout_s`.
void checkpoint_before_stop(caf::actor_system& sys, const caf::actor& tracker, double timeout_s) {
  {
    caf::scoped_actor self{sys};
    self->request(tracker, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3)),
                  checkpoint_atom::value)
        .receive(
            [&](const std::string& answer) {
              const auto a = nlohmann::json::parse(answer, nullptr, false);
              if (a.is_object() && a.value("ok", false))
                spdlog::warn(
                    "checkpoint of step {} written before stopping ({}): continue the run with "
                    "--resume",
                    a.value("step", 0), a.value("path", ""));
              else
                spdlog::warn("no checkpoint before stopping: {}",
                             a.is_object() ? a.value("error", answer) : answer);
            },
            [&](const caf::error& e) {
              spdlog::warn("no checkpoint before stopping within {} s: {}", timeout_s,
                           sys.render(e));
            });
  }
  caf::logger::set_current_actor_system(nullptr);  // see supervisors::send_from_here
}

// What the signal handler reaches: the actor system and the handles it sends stop to, set
// once they exist and cleared before the system goes.
struct SignalTargets {
  std::mutex mu;
  caf::actor_system* system = nullptr;
  caf::actor directory, tracker;
  bool saved = false;
};

// SIGTERM/SIGUSR1: a checkpoint of the step under way (once), then stop; SIGINT: stop.
std::function<void(int)> on_signal(const CoordinatorArgs& args, SignalTargets& t) {
  return [&args, &t](int sig) {
    const bool save = sig != SIGINT && args.signal_checkpoint_s > 0 && !t.saved;
    spdlog::warn("coordinator: {} received, {}stopping the swarm", strsignal(sig),
                 save ? "saving a checkpoint, then " : "");
    // Held while saving: the actor system outlives the request (the run's end waits for it).
    std::lock_guard<std::mutex> lock(t.mu);
    if (save && t.system && t.tracker) {
      t.saved = true;
      checkpoint_before_stop(*t.system, t.tracker, args.signal_checkpoint_s);
    }
    // From an actor of this process: stop is refused from anyone else (supervisors/entitled).
    if (t.system && t.directory)
      supervisors::send_from_here(*t.system, t.directory, stop_atom::value);
    if (t.system && t.tracker) supervisors::send_from_here(*t.system, t.tracker, stop_atom::value);
  };
}

// The command line read and checked: the config, the addresses, the secret and the run id.
struct CoordinatorInputs {
  model::RunConfig config;
  HostPort listen, http;
  std::string secret;   // empty: the coordinator makes one
  uint64_t run_id = 0;  // 0: a random one
  std::string out;      // the run directory
  uint32_t world_nodes = 0;
};

// Exit code 2 and the reason logged when anything is wrong; 0 when `in` is complete.
int read_inputs(const CoordinatorArgs& args, CoordinatorInputs& in) {
  try {
    in.config = model::load_config(args.config, args.overrides);
    in.listen = parse_host_port(args.listen, true);
    if (!args.advertise.empty()) {
      try {
        parse_host_port(args.advertise, false);
      } catch (const std::exception& e) {
        throw std::invalid_argument("--advertise: " + std::string(e.what()));
      }
    }
    if (!args.http.empty()) in.http = parse_host_port(args.http, true);
    in.secret = resolve_secret(args.net);
    in.world_nodes = args.world_nodes;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
  if (in.config.swarm.mode == model::Mode::single) {
    spdlog::error("{}: swarm.mode = \"single\" trains without a swarm; use `swarmrt train`",
                  args.config);
    return 2;
  }
  if (!args.run_id.empty()) {
    const auto id = messages::parse_run_id(args.run_id);
    if (!id) {
      spdlog::error("--run-id '{}': not a run id (16 hex digits, not all zero)", args.run_id);
      return 2;
    }
    in.run_id = *id;
  }
  in.out =
      args.out.empty() ? "runs/" + std::filesystem::path(args.config).stem().string() : args.out;
  return 0;
}

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
void set_up_transport(const model::RunConfig& config) {
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
  ds.config_toml = model::to_toml(config);
  ds.fingerprint_text = model::fingerprint_text(config);
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
  const std::string token = transport::http_token(in.secret);
  transport::write_secret_file(token_path, token);
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
                 model::name_of(config.transport.links));
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

int lead_run(const CoordinatorArgs& args, CoordinatorInputs& in, Leading& leading,
             SignalTargets& targets, const StopSignals& signals);

// A standby's port on --listen, open while it stands by: consoles and nodes given its address
// learn the leader's there. None on port 0 (no one could know the port) or without the
// cluster secret (given, or the run directory's, which the first leader wrote; a standby
// writes nothing there).
DoorOpener standby_door(const CoordinatorArgs& args, const CoordinatorInputs& in) {
  return [&args, &in](StandbyDoor::Lister lister) -> std::unique_ptr<StandbyDoor> {
    std::string secret = in.secret;
    const auto kept = std::filesystem::path(in.out) / "secret";
    try {
      if (secret.empty() && std::filesystem::exists(kept))
        secret = transport::read_secret_file(kept.string());
    } catch (const std::exception& e) {
      spdlog::warn("standby: {}", e.what());
    }
    if (in.listen.port == 0 || secret.empty()) {
      spdlog::info("standby: no port open until this replica leads ({})",
                   in.listen.port == 0 ? "--listen has port 0" : "no cluster secret yet");
      return nullptr;
    }
    return std::make_unique<StandbyDoor>(in.listen, secret, args.net,
                                         messages::run_id_text(in.run_id), std::move(lister));
  };
}

// The named steps of a coordinator's life: read the command line, stand for leader (with
// --etcd), open the run directory, start the core actors, the membership and the status page,
// listen, train, stop.
int run_coordinator(const CoordinatorArgs& args) {
  // Signals are blocked before any thread starts (torch's, CAF's), so only this one sees them.
  SignalTargets targets;
  StopSignals signals(on_signal(args, targets));
  CoordinatorInputs in;
  if (int code = read_inputs(args, in)) return code;
  const auto& config = in.config;
  // With --etcd, nothing of the run is touched before this replica leads it.
  Leading leading = stand_for_leader(
      args.leader, in.run_id, model::fingerprint(config), in.secret, listed_address(args),
      [&] { return signals.fired(); }, standby_door(args, in));
  if (leading.exit_code >= 0) return leading.exit_code;
  fence_and_keep(leading, in.out);
  const int code = lead_run(args, in, leading, targets, signals);
  // However it ended, the run ended under this leader: no standby starts it again.
  finish(leading, code == 0 ? "completed" : "stopped (exit " + std::to_string(code) + ")");
  return code;
}

// The run itself, under this process's leadership when there are replicas.
int lead_run(const CoordinatorArgs& args, CoordinatorInputs& in, Leading& leading,
             SignalTargets& targets, const StopSignals& signals) {
  const auto& config = in.config;
  bool resume = args.resume, overwrite = args.overwrite;
  int64_t resumed_step = 0;
  // Where a takeover may continue: in grad-sync modes and plain DiLoCo the nodes keep their
  // workers' states when they lose the leader, at the step it closed last (its last step
  // record); the tracker continues from them if they cover every stage, with each DiLoCo
  // group's journal entry of that step (actors/tracker/takeover.cpp).
  std::optional<uint64_t> kept_step;
  bool kept_evaluated = false;
  if (leading.took_over) {
    // Else the previous leader's run goes on from its newest checkpoint; without one it
    // starts again.
    resumed_step = newest_checkpoint_step(in.out);
    resume = resumed_step > 0;
    overwrite = !resume;
    actors::SwarmContext modes;  // what the run's mode is, as every actor asks it
    modes.config = config;
    const auto log = (std::filesystem::path(in.out) / "metrics.jsonl").string();
    const int64_t last = model::last_record_step(log, "step");
    if (actors::keeps_states(modes) && last > resumed_step) {
      kept_step = static_cast<uint64_t>(last);
      kept_evaluated = model::last_record_step(log, "eval") == last;
      overwrite = false;
    }
  } else if (resume) {
    resumed_step = newest_checkpoint_step(in.out);
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
  if (kept_step)
    leading.previous_wall = drop_records_after(in.out, static_cast<int64_t>(*kept_step));
  else if (resume && resumed_step > 0)
    leading.previous_wall = drop_records_after(in.out, resumed_step);
  try {
    model::RunDir run(in.out, config,
                      resume || kept_step ? model::RunStart::resume
                      : overwrite         ? model::RunStart::overwrite
                                          : model::RunStart::fresh);
    if (leading.took_over) {
      nlohmann::json fault{{"event", "fault"},
                           {"kind", "coordinator"},
                           {"previous", leading.previous},
                           {"resumed_step", resumed_step}};
      if (kept_step) fault["kept_step"] = *kept_step;
      if (leading.previous_wall > 0)
        fault["seconds_since_last_record"] = model::wall_clock_s() - leading.previous_wall;
      run.metrics().write(fault);
      // Recovered with the first step this leader completes: from the previous leader's
      // last record (its last sign of life in the run) to that step.
      const double since =
          leading.previous_wall > 0 ? leading.previous_wall : model::wall_clock_s();
      model::follow_next_record("step", [since](const nlohmann::json& step) {
        return nlohmann::json{{"event", "recovered"},
                              {"kind", "coordinator"},
                              {"step", step.value("step", int64_t{0})},
                              {"seconds", step.value("wall", model::wall_clock_s()) - since}};
      });
    }
    auto corpus = std::make_shared<const model::Corpus>(
        model::Corpus::load(config.data, config.model.vocab_size));
    run.keep_tokenizer(corpus->tokenizer_file());
    // A takeover keeps the run's secret: the nodes hold it.
    ensure_secret(resume || leading.took_over, in);
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
    co.resume = resume;
    co.kept_step = kept_step;
    co.kept_evaluated = kept_evaluated;
    // With replicas, each DiLoCo round is on disk for a standby before it is answered.
    if (leading.lead) co.group_journal = (std::filesystem::path(in.out) / "diloco").string();
    co.forward_kills = std::make_shared<caf::actor>();
    auto core = actors::spawn_core(sys, ctx, corpus, co);
    set_up_transport(config);
    // Frames to and from the nodes go over a TCP link of their own beside CAF's.
    const std::string endpoint =
        args.frames_over_caf ? std::string() : transport::start_bulk_server(in.listen.host);
    // `ctl nodes` lists the coordinator replicas: as etcd has them, or this one alone.
    std::function<nlohmann::json()> coordinators;
    auto bound = std::make_shared<std::atomic<uint16_t>>(0);  // the port once listening
    // Where nodes look for the next leader: every replica etcd lists (none without --etcd).
    std::function<std::vector<std::string>()> replicas;
    if (leading.replicas) {
      coordinators = [view = leading.replicas] { return view->rows(); };
      replicas = [view = leading.replicas] { return replica_addresses(view->rows()); };
    } else
      // The port bound once listening, unless an advertised address stands for it.
      coordinators = [row = lone_coordinator_row(listed_address(args)), bound,
                      host = in.listen.host, fixed = !args.advertise.empty()] {
        auto r = row;
        if (*bound != 0 && !fixed) r["address"] = host + ":" + std::to_string(bound->load());
        return nlohmann::json::array({r});
      };
    const auto m = spawn_membership(sys, core, ctx, in, endpoint, *co.forward_kills,
                                    std::move(coordinators), std::move(replicas));
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
    const char* host = in.listen.host == "0.0.0.0" ? nullptr : in.listen.host.c_str();
    // Over mutual TLS only: a peer without the cluster's certificate gets no handle.
    auto port = caf::openssl::publish(m.directory, in.listen.port, host, true);
    if (!port) {
      spdlog::error("cannot listen on {}: {}", args.listen, sys.render(port.error()));
      shutdown();
      return 1;
    }
    *bound = *port;
    spdlog::info("run {} | mode {} | {}x{} workers wanted | fingerprint {}", in.out,
                 model::name_of(config.swarm.mode), config.swarm.stages,
                 config.swarm.workers_per_stage, model::fingerprint(config));
    spdlog::info("control plane on {}:{} (mutual TLS, cluster CA {}); frame link {}",
                 in.listen.host, *port, transport::cluster_ca_id(in.secret),
                 endpoint.empty() ? "none" : endpoint);
    // The launcher reads these lines to learn the run (its nodes join no other) and the port.
    std::printf("run id %s\n", messages::run_id_text(ctx->run_id).c_str());
    std::printf("coordinator listening on %s:%u\n", in.listen.host.c_str(), *port);
    std::fflush(stdout);
    return train_swarm(sys, core, ctx, m.directory, run, *corpus, signals, shutdown);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

}  // namespace

void add_coordinator_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CoordinatorArgs>();
  auto* cmd = app.add_subcommand("coordinator", "host a swarm that nodes join, and train");
  add_config_options(*cmd, args->config, args->overrides);
  cmd->add_option("--listen", args->listen, "HOST:PORT to accept nodes on (port 0: any free)")
      ->capture_default_str();
  cmd->add_option("--advertise", args->advertise,
                  "HOST:PORT that nodes and consoles reach this coordinator at, where it differs "
                  "from --listen (a wildcard or private address, a forwarded port): what the "
                  "replicas' list in etcd, a join's answer and `ctl nodes` give (default: "
                  "--listen, a wildcard host replaced by the host name)");
  add_run_dir_options(*cmd, args->out, args->resume, args->overwrite);
  cmd->add_flag("--frames-over-caf", args->frames_over_caf,
                "send tensor frames as chunks inside CAF messages instead of on a TCP link of "
                "their own");
  cmd->add_option("--http", args->http,
                  "HOST:PORT of the status page and /metrics (port 0: any free; the token is "
                  "written to RUN_DIR/http_token)");
  cmd->add_option("--run-id", args->run_id,
                  "this run's id, 16 hex digits (default: random); nodes given another are "
                  "refused");
  cmd->add_option("--signal-checkpoint-s", args->signal_checkpoint_s,
                  "on SIGTERM or SIGUSR1, wait this long for a checkpoint of the step under way "
                  "before stopping the swarm (0: stop at once, as on SIGINT)")
      ->capture_default_str();
  cmd->add_option("--world-nodes", args->world_nodes,
                  "node processes the launcher started with this coordinator (launch --from-env "
                  "sets it): once all have joined short of a full swarm, it says what fills it");
  add_net_options(*cmd, args->net);
  add_leader_options(*cmd, args->leader);
  cmd->callback([args, &exit_code] { exit_code = run_coordinator(*args); });
}

}  // namespace swarmrt::apps
