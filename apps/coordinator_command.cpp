// swarmrt coordinator --config FILE --listen HOST:PORT [--secret-file F] [--out DIR]
// Hosts the membership directory, step tracker, data loaders, gradient averagers and DiLoCo
// groups; waits until nodes have brought stages x workers_per_stage workers, runs the training,
// writes the whole model as a checkpoint, then tells every node to stop and exits. This file
// reads the command line and the signals and stands for leader; the run is coordinator_run.cpp.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "apps/coordinator.hpp"
#include "apps/options.hpp"
#include "apps/standby_door.hpp"
#include "config/fingerprint.hpp"
#include "credential/credential.hpp"
#include "messages/atoms.hpp"
#include "messages/run_id.hpp"
#include "supervisors/entitled.hpp"

namespace swarmrt::apps {
using namespace swarmrt::atoms;

namespace {

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

// Exit code 2 and the reason logged when anything is wrong; 0 when `in` is complete.
int read_inputs(const CoordinatorArgs& args, CoordinatorInputs& in) {
  try {
    in.config = config::load_config(args.config, args.overrides);
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
  if (in.config.swarm.mode == config::Mode::single) {
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

// A standby's port on --listen, open while it stands by: consoles and nodes given its address
// learn the leader's there. None on port 0 (no one could know the port) or without the
// cluster secret (given, or the run directory's, which the first leader wrote; a standby
// writes nothing there).
leader::DoorOpener standby_door(const CoordinatorArgs& args, const CoordinatorInputs& in) {
  return [&args, &in](leader::ReplicaLister lister) -> std::shared_ptr<void> {
    std::string secret = in.secret;
    const auto kept = std::filesystem::path(in.out) / "secret";
    try {
      if (secret.empty() && std::filesystem::exists(kept))
        secret = credential::read_secret_file(kept.string());
    } catch (const std::exception& e) {
      spdlog::warn("standby: {}", e.what());
    }
    if (in.listen.port == 0 || secret.empty()) {
      spdlog::info("standby: no port open until this replica leads ({})",
                   in.listen.port == 0 ? "--listen has port 0" : "no cluster secret yet");
      return nullptr;
    }
    return std::make_shared<StandbyDoor>(in.listen, secret, args.net,
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
  const auto run_id = in.run_id == 0 ? std::string() : messages::run_id_text(in.run_id);
  leader::Leading leading = leader::stand_for_leader(
      args.leader, run_id, config::fingerprint(config), in.secret, listed_address(args),
      [&] { return signals.fired(); }, standby_door(args, in));
  if (leading.exit_code >= 0) return leading.exit_code;
  leader::fence_and_keep(leading, in.out);
  const int code = lead_run(args, in, leading, targets, signals);
  // However it ended, the run ended under this leader: no standby starts it again.
  leader::finish(leading, code == 0 ? "completed" : "stopped (exit " + std::to_string(code) + ")");
  return code;
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
