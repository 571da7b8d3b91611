// swarmrt launch's named steps: read what it needs, start the coordinator (and its replicas
// and their etcd), wait for it to listen, start the nodes, echo them until the run ends; or,
// with --from-env, become one rank of a scheduler's job.
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "config/config.hpp"
#include "credential/credential.hpp"
#include "credential/endpoint.hpp"
#include "launch/from_env.hpp"
#include "launch/hostfile.hpp"
#include "launch/launch.hpp"
#include "launch/process.hpp"
#include "launch/replicas.hpp"

namespace swarmrt::launch {
namespace {

// --from-env: this process becomes the coordinator or a node of a scheduler's job.
int run_from_env(const LaunchArgs& args) {
  std::string secret;
  try {
    config::load_config(args.config, args.overrides);  // a bad config fails here, on every rank
    secret = credential::resolve_secret(args.net);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
  FromEnvArgs fe = args.env;
  fe.config = args.config;
  fe.overrides = args.overrides;
  fe.out = args.out;
  fe.resume = args.resume;
  fe.overwrite = args.overwrite;
  fe.http = args.http;
  fe.workers = args.workers;
  fe.net = args.net;
  return launch_from_env(fe, secret);
}

// What a launch reads before it starts anything: the config, the coordinator's address, the
// hosts (--hostfile) and the secret. Exit code 2, the reason logged, when any is wrong.
struct LaunchInputs {
  config::RunConfig config;
  std::vector<HostEntry> hosts;
  credential::HostPort listen;
  std::string secret;  // empty: the coordinator makes one
};
int read_launch(const LaunchArgs& args, LaunchInputs& in) {
  try {
    in.config = config::load_config(args.config, args.overrides);
    in.listen = credential::parse_host_port(args.listen, true);
    if (!args.hostfile.empty()) in.hosts = load_hostfile(args.hostfile);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
  if ((args.local > 0) == !in.hosts.empty()) {
    spdlog::error("launch needs exactly one of --local N, --hostfile FILE and --from-env");
    return 2;
  }
  if (args.coordinators > 1 && args.local == 0) {
    spdlog::error(
        "--coordinators {}: launch starts replicas with --local only; across machines start "
        "each with `swarmrt coordinator --etcd URL --run-id ID` (docs/running.md)",
        args.coordinators);
    return 2;
  }
  if (!in.hosts.empty() && in.listen.host == "0.0.0.0") {
    spdlog::error("--listen must name the address the hosts reach the coordinator on");
    return 2;
  }
  try {
    in.secret = credential::resolve_secret(args.net);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
  return 0;
}

// --coordinators K: K replicas of the coordinator on this machine, each on its own port,
// electing their leader in a private etcd under the run directory.
struct Replicas {
  PrivateEtcd etcd;
  std::string run_id;
  std::vector<std::string> addresses;  // each replica's HOST:PORT
};
Replicas start_replicas(const LaunchArgs& args, const LaunchInputs& in, std::string& secret) {
  Replicas r;
  const std::string out =
      args.out.empty() ? "runs/" + std::filesystem::path(args.config).stem().string() : args.out;
  // The replicas and the etcd they share need the secret before any of them starts: made
  // here when none was given, kept where a lone coordinator would keep it.
  if (secret.empty()) {
    std::filesystem::create_directories(out);
    // An existing run's secret is kept unless the run is started over: a launch refused for
    // lack of --resume or --overwrite must not change it.
    secret = credential::run_dir_secret(out, !args.overwrite);
    setenv("SWARMRT_SECRET", secret.c_str(), 1);
    std::printf("[launch] cluster secret in %s (ctl and nodes: --secret-file)\n",
                std::filesystem::absolute(std::filesystem::path(out) / "secret").c_str());
  }
  r.etcd = start_private_etcd((std::filesystem::path(out) / "etcd").string(), secret);
  std::printf("[launch] etcd for the coordinators' leader election at %s (pid %d)\n",
              r.etcd.url.c_str(), r.etcd.child->pid());
  r.run_id = random_run_id();
  for (size_t k = 0; k < static_cast<size_t>(args.coordinators); ++k)
    r.addresses.push_back(
        in.listen.host + ":" +
        std::to_string(in.listen.port == 0 ? free_port(in.listen.host) : in.listen.port + k));
  return r;
}

// Coordinator replica k (0: the first, the only one without replicas).
std::unique_ptr<Child> start_coordinator(const LaunchArgs& args, const std::string& exe,
                                         const Replicas& r, size_t k) {
  const bool replicated = args.coordinators > 1;
  std::vector<std::string> argv = {exe,        "coordinator",
                                   "--config", args.config,
                                   "--listen", replicated ? r.addresses[k] : args.listen};
  for (const auto& o : args.overrides) argv.insert(argv.end(), {"--set", o});
  if (!args.out.empty()) argv.insert(argv.end(), {"--out", args.out});
  if (args.overwrite) argv.push_back("--overwrite");
  if (args.resume) argv.push_back("--resume");
  // Every replica serves the status page once it leads: it moves with the leader.
  if (!args.http.empty()) argv.insert(argv.end(), {"--http", args.http});
  if (replicated)
    argv.insert(argv.end(), {"--etcd", r.etcd.url, "--run-id", r.run_id, "--lease-ttl-s",
                             std::to_string(args.lease_ttl_s)});
  for (const auto& f : net_flags(args.net)) argv.push_back(f);
  return std::make_unique<Child>(k == 0 ? "coord" : "coord" + std::to_string(k + 1), argv);
}

// The launch's exit code once its children have ended, and its last lines: each node's
// non-zero exit, the coordinators', and whether the run completed.
int report_end(std::vector<std::unique_ptr<Child>>& children, size_t coords, const Replicas& r,
               bool stop_requested) {
  for (size_t i = coords; i < children.size(); ++i)
    if (auto code = children[i]->poll_exit(); code && *code != 0)
      std::printf("[launch] %s exited with %d\n", children[i]->label().c_str(), *code);
  int code = children.front()->poll_exit().value_or(1);
  std::printf("[launch] coordinator exited with %d\n", code);
  if (coords > 1) {
    // Whichever replica led last says how the run ended.
    for (size_t k = 1; k < coords; ++k)
      std::printf("[launch] %s exited with %d\n", children[k]->label().c_str(),
                  children[k]->poll_exit().value_or(1));
    const auto outcome = run_outcome(r.etcd, r.run_id);
    std::printf("[launch] run %s: %s\n", r.run_id.c_str(),
                outcome.empty() ? "no leader recorded its end" : outcome.c_str());
    code = outcome.rfind("completed", 0) == 0 ? 0 : code != 0 ? code : 1;
  }
  // The coordinator exits 0 only when the run completed its steps: say so either way.
  if (stop_requested || code != 0) {
    std::printf("[launch] the run did not complete%s (see the coordinator's last lines)\n",
                stop_requested ? ": stopped by a signal" : "");
    std::fflush(stdout);
    return stop_requested ? 130 : code;
  }
  std::printf("[launch] the run completed\n");
  return 0;
}

}  // namespace

// The named steps of a launch: read what it needs, start the coordinator (and its replicas
// and their etcd), wait for it to listen, start the nodes, echo them until the run ends.
int run(const LaunchArgs& args) {
  if (args.from_env) return run_from_env(args);
  LaunchInputs in;
  if (int code = read_launch(args, in)) return code;
  std::string secret = in.secret;
  // Children inherit the secret through the environment, never on a command line. Without
  // one, the coordinator makes one and names its file; the nodes get it from there.
  if (!secret.empty()) setenv("SWARMRT_SECRET", secret.c_str(), 1);
  const std::string exe = std::filesystem::canonical("/proc/self/exe").string();
  std::atomic<bool> stop_requested{false};
  StopSignals signals([&](int) { stop_requested = true; });
  const size_t coords = static_cast<size_t>(args.coordinators);
  Replicas replicas;
  if (coords > 1) {
    try {
      replicas = start_replicas(args, in, secret);
    } catch (const std::exception& e) {
      spdlog::error("--coordinators {}: {}", coords, e.what());
      return 1;
    }
  }
  AtScopeExit stop_etcd{[&] {
    auto& etcd = replicas.etcd;
    if (!etcd.child) return;
    etcd.child->signal(SIGTERM);
    for (int i = 0; i < 100 && etcd.child->running(); ++i) poll(nullptr, 0, 50);
    if (etcd.child->running()) etcd.child->signal(SIGKILL);
  }};
  std::vector<std::unique_ptr<Child>> children;
  try {
    children.push_back(start_coordinator(args, exe, replicas, 0));
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  Child& coord = *children.front();
  auto ready = wait_for_coordinator(coord, secret, stop_requested);
  if (ready.join.empty()) {
    if (coord.running()) coord.signal(SIGTERM);
    stop_all(children, 5);
    const int code = coord.poll_exit().value_or(1);
    spdlog::error("the coordinator did not start listening (exit {})", code);
    return code == 0 ? 1 : code;
  }
  try {
    // The standbys, once the first leads; the nodes know every replica's address.
    for (size_t k = 1; k < coords; ++k)
      children.push_back(start_coordinator(args, exe, replicas, k));
    if (coords > 1) {
      ready.join.clear();
      for (const auto& a : replicas.addresses) ready.join += (ready.join.empty() ? "" : ",") + a;
    }
    start_nodes(args, in.config, in.hosts, exe, ready, secret, children);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    for (size_t k = 0; k < children.size() && k < coords; ++k) children[k]->signal(SIGTERM);
    stop_all(children, 5);
    return 1;
  }
  for (size_t i = 0; i < children.size(); ++i)
    std::printf("[launch] %s started (pid %d)\n", children[i]->label().c_str(), children[i]->pid());
  watch_children(args, children, coords, stop_requested);
  stop_all(children, args.grace_s);
  return report_end(children, coords, replicas, stop_requested);
}

}  // namespace swarmrt::launch
