// swarmrt node --join HOST:PORT[,...] | --etcd URL --run-id ID [--workers N] [--device cpu|cuda:K]
// [--config FILE] Joins a coordinator, is assigned a stage per worker, runs those stage workers,
// and stops when the coordinator says so, when it cannot be reached again within
// --connect-timeout-s after its link was lost, or on SIGINT/SIGTERM.
#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/publish.hpp>
#include <map>
#include <mutex>
#include <thread>

#include "actors/console/inspector.hpp"
#include "actors/membership/node_agent.hpp"
#include "actors/runtime/runtime.hpp"
#include "apps/commands.hpp"
#include "apps/net.hpp"
#include "apps/node_process.hpp"
#include "apps/options.hpp"
#include "config/fingerprint.hpp"
#include "inspect/probe.hpp"
#include "leader/takeover.hpp"
#include "messages/device.hpp"
#include "messages/run_id.hpp"
#include "model/precision.hpp"
#include "model/threads.hpp"
#include "supervisors/chaos_control.hpp"
#include "supervisors/entitled.hpp"
#include "transport/bulk.hpp"
#include "transport/channel.hpp"

namespace swarmrt::apps {
namespace {
using namespace swarmrt::atoms;
using namespace swarmrt::apps::node;

// Why this process cannot put its workers on `device`; empty when it can. "cuda" spreads
// the workers over every visible GPU.
std::string device_problem(const std::string& device) {
  if (device == "cpu") return "";
  if (auto why = messages::device_name_problem(device); !why.empty()) return why;
  if (!torch::cuda::is_available())
    return "this build's LibTorch has no CUDA (or no GPU is visible); build against a CUDA "
           "LibTorch to train on GPUs";
  if (device == "cuda") return "";
  const auto k = std::stol(device.substr(5));
  const auto n = static_cast<long>(torch::cuda::device_count());
  if (k >= n) return "this machine has " + std::to_string(n) + " CUDA device(s)";
  return "";
}

std::function<void(int)> on_signal(const NodeArgs& args, NodeSignalTargets& t) {
  return [&args, &t](int sig) {
    spdlog::warn("node: {} received", strsignal(sig));
    // A scheduler signals every task of a job at once: the node keeps serving while the
    // coordinator saves the step under way, and stops when it says so (or after the grace).
    if (sig != SIGINT && args.stop_grace_s > 0) {
      spdlog::warn("node: serving up to {} s more, for the coordinator's checkpoint and stop",
                   args.stop_grace_s);
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(args.stop_grace_s * 1e3));
      while (std::chrono::steady_clock::now() < until) {
        {
          std::lock_guard<std::mutex> lock(t.mu);
          if (!t.system) return;  // stopped meanwhile
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    std::lock_guard<std::mutex> lock(t.mu);
    // From an actor of this process: the agent refuses stop from anyone but the coordinator.
    if (t.system && t.agent) supervisors::send_from_here(*t.system, t.agent, stop_atom::value);
  };
}

// The command line read and checked into the join request; exit code 2 (the reason logged)
// when anything is wrong.
int read_request(const NodeArgs& args, std::vector<HostPort>& coords, HostPort& console_at,
                 messages::JoinRequest& request) {
  try {
    // Several addresses: the coordinator replicas of one run (coordinator --etcd); the one
    // that leads is the one that listens.
    if (args.join.empty() && args.etcd.empty())
      throw std::invalid_argument("give --join HOST:PORT (the coordinator) or --etcd URL");
    if (!args.etcd.empty() && args.run_id.empty())
      throw std::invalid_argument(
          "--etcd needs --run-id: the run's replicas are listed in etcd under it");
    for (size_t at = 0; !args.join.empty() && at <= args.join.size();) {
      auto comma = args.join.find(',', at);
      if (comma == std::string::npos) comma = args.join.size();
      coords.push_back(parse_host_port(args.join.substr(at, comma - at), false));
      at = comma + 1;
    }
    if (!args.console.empty()) console_at = parse_host_port(args.console, true);
    if (!args.config.empty())
      request.fingerprint =
          config::fingerprint_text(config::load_config(args.config, args.overrides));
    request.secret = resolve_secret(args.net);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
  if (const auto why = device_problem(args.device); !why.empty()) {
    spdlog::error("--device {}: {}", args.device, why);
    return 2;
  }
  if (request.secret.empty()) {
    spdlog::error(
        "no cluster secret: every plane admits only its holders; give --secret-file FILE "
        "(a coordinator started without one wrote it to <run dir>/secret) or SWARMRT_SECRET");
    return 2;
  }
  char hostname[256] = {0};
  gethostname(hostname, sizeof(hostname) - 1);
  request.protocol = config::kProtocolVersion;
  if (!args.run_id.empty()) {
    const auto id = messages::parse_run_id(args.run_id);
    if (!id) {
      spdlog::error("--run-id '{}': not a run id (the 16 hex digits a coordinator prints)",
                    args.run_id);
      return 2;
    }
    request.run_id = *id;
  }
  request.node_name =
      args.name.empty() ? std::string(hostname) + ":" + std::to_string(getpid()) : args.name;
  request.workers = args.workers;
  request.device = args.device;
  return 0;
}

// The named steps of a node's life: read the command line, reach the coordinator, attach
// (join, start the workers, serve until told to stop), attach again while the coordinator's
// link is lost rather than closed, say what was sent.
int run_node(const NodeArgs& args) {
  // Signals are blocked before any thread starts (torch's, CAF's), so only this one sees them.
  NodeSignalTargets targets;
  StopSignals signals(on_signal(args, targets));
  std::vector<HostPort> coords;
  HostPort console_at;
  messages::JoinRequest request;
  if (int code = read_request(args, coords, console_at, request)) return code;

  // Every worker computes with one torch thread on its own (detached) thread.
  model::set_compute_threads(1);
  caf::actor_system_config cfg;
  credential::TlsFiles tls;
  try {
    tls = configure_network(cfg, args.net, request.secret, request.node_name);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  TlsFilesGuard tls_guard{tls};
  caf::actor_system sys{cfg};
  AtScopeExit forget_system{[&] {
    std::lock_guard<std::mutex> lock(targets.mu);
    targets.system = nullptr;
  }};
  NodeProcess p{sys, args, targets, signals};
  p.given = p.coords = coords;
  p.console_at = console_at;
  p.request = request;
  p.name = request.node_name;
  if (!args.etcd.empty()) {
    try {
      p.etcd = std::make_unique<leader::Etcd>(
          args.etcd,
          leader::etcd_tls(args.etcd, args.etcd_tls, request.secret, p.etcd_files.files));
    } catch (const std::exception& e) {
      spdlog::error("--etcd {}: {}", args.etcd, e.what());
      return 2;
    }
  }
  int code = 0;
  const auto connect_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(args.connect_timeout_s * 1e3));
  caf::actor dir;
  if (coords.size() == 1 && !p.etcd) {
    dir = reach_directory(sys, args, coords.front(), signals, code);
    p.attached = coords.front();
    refresh_known(p);
    // The one address given may be a standby's: it names the leader, and the node looks there.
    if (dir && ask_directory(p, dir, args.join) == Answer::standby) {
      refresh_known(p);
      dir = find_coordinator(p, std::chrono::steady_clock::now() + connect_timeout);
    }
  } else {
    refresh_known(p);
    dir = find_coordinator(p, std::chrono::steady_clock::now() + connect_timeout);
  }
  if (!dir) return code != 0 ? code : 1;
  AtScopeExit close_door{[&] {
    if (p.door) caf::anon_send_exit(p.door, caf::exit_reason::user_shutdown);
  }};
  // Since when no coordinator has served this node: joins that go unanswered do not extend
  // --connect-timeout-s.
  auto lost_since = std::chrono::steady_clock::now();
  for (;;) {
    const auto ended = attach(p, dir);
    code = ended.code;
    if (!ended.lost || signals.fired()) break;
    if (ended.joined) lost_since = std::chrono::steady_clock::now();
    refresh_known(p);
    spdlog::warn("node '{}': attaching again to {} (for up to {} s)", p.name, known(p),
                 args.connect_timeout_s);
    dir = find_coordinator(p, lost_since + connect_timeout);
    if (!dir) {
      code = signals.fired() ? 0 : 1;
      break;
    }
  }
  std::string traffic;
  for (const auto& [kind, bytes] : p.sent.items())
    traffic +=
        fmt::format("{}{} {:.1f} MB", traffic.empty() ? "" : ", ", kind, bytes.get<double>() / 1e6);
  spdlog::info("node '{}' stopped; bytes sent by its workers: {}", p.name, traffic);
  // Every worker has stopped and a node writes no files. CAF's teardown can wait forever for
  // a detached worker's thread while a message to a vanished peer still references it, so the
  // process ends here instead of in the actor system's destructor.
  std::fflush(nullptr);
  credential::remove_cluster_tls(tls);
  _exit(code);
}

}  // namespace

void add_node_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<NodeArgs>();
  auto* cmd = app.add_subcommand("node", "join a coordinator and serve stage workers");
  cmd->add_option("--join", args->join,
                  "the coordinator's HOST:PORT, or its replicas' HOST:PORT,HOST:PORT,... "
                  "(coordinator --etcd): the node attaches to the one that leads, and learns "
                  "the run's other replicas from it");
  cmd->add_option("--etcd", args->etcd,
                  "the run's etcd (http[s]://HOST:PORT, comma-separated; with --run-id): the "
                  "node finds the coordinator replicas listed there, at the start and whenever "
                  "it looks for a new leader (with or without --join)");
  add_etcd_tls_options(*cmd, args->etcd_tls);
  cmd->add_option("--workers,-w", args->workers, "stage workers this node serves")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--device", args->device, "cpu, cuda:K, or cuda (one GPU per worker in turn)")
      ->capture_default_str();
  cmd->add_option("--config,-c", args->config,
                  "this node's config; joining checks it against the coordinator's");
  cmd->add_option("--set", args->overrides, "override a key of --config (repeatable)");
  cmd->add_option("--name", args->name, "name in the coordinator's logs (default host:pid)");
  cmd->add_option("--listen", args->listen,
                  "address other processes reach this node's frame link on")
      ->capture_default_str();
  cmd->add_option("--console", args->console,
                  "open a console port on HOST:PORT (port 0: any): `swarmrt ctl` reaches the "
                  "whole swarm through it, with the cluster credential as on every port");
  cmd->add_option("--connect-timeout-s", args->connect_timeout_s,
                  "keep trying to reach the coordinator this long, at the start and again "
                  "after its link is lost (a partition, a coordinator restarted on its address)")
      ->capture_default_str();
  cmd->add_option("--run-id", args->run_id,
                  "join only the run with this id (the coordinator prints it; launch passes it)");
  cmd->add_option("--stop-grace-s", args->stop_grace_s,
                  "after SIGTERM or SIGUSR1, keep serving this long for the coordinator's "
                  "checkpoint and stop (a scheduler signals every task at once; 0: stop at once)")
      ->capture_default_str();
  add_net_options(*cmd, args->net);
  cmd->callback([args, &exit_code] { exit_code = run_node(*args); });
}

}  // namespace swarmrt::apps
