// swarmrt launch --local N --config FILE         (a coordinator and N nodes on this machine)
// swarmrt launch --hostfile FILE --config FILE --listen HOST:PORT   (nodes over ssh)
// swarmrt launch --from-env --config FILE   (one task of a Slurm, Kubernetes or torchrun job)
// Starts the coordinator, then the nodes once it listens; streams every process's output with
// a prefix; stops them all by pid when the run ends, on Ctrl-C, or when no node is left.
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "apps/commands.hpp"
#include "apps/hostfile.hpp"
#include "apps/launch_from_env.hpp"
#include "apps/launch_replicas.hpp"
#include "apps/net.hpp"
#include "apps/process.hpp"
#include "apps/run_options.hpp"
#include "model/config.hpp"
#include "transport/credential.hpp"

namespace swarmrt::apps {
namespace {

using Clock = std::chrono::steady_clock;

struct LaunchArgs {
  int local = 0;
  std::string hostfile;
  std::string config;
  std::vector<std::string> overrides;
  std::string out;
  bool overwrite = false;
  bool resume = false;
  uint32_t workers = 0;  // per node; 0: the swarm's workers spread evenly (from env: per CPU)
  std::string listen = "127.0.0.1:0";
  std::string http;  // the coordinator's status page, empty: none
  std::vector<std::string> ssh_options;
  double grace_s = 10;
  bool from_env = false;
  FromEnvArgs env;  // --from-env's own settings
  NetOptions net;
  int coordinators = 1;     // replicas of the coordinator (> 1: with a private etcd)
  int64_t lease_ttl_s = 5;  // their leader's lease
};

// --from-env: this process becomes the coordinator or a node of a scheduler's job.
int run_from_env(const LaunchArgs& args) {
  std::string secret;
  try {
    model::load_config(args.config, args.overrides);  // a bad config fails here, on every rank
    secret = resolve_secret(args.net);
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

void print_lines(Child& c) {
  for (const auto& line : c.read_lines()) std::printf("[%s] %s\n", c.label().c_str(), line.c_str());
  std::fflush(stdout);
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> net_flags(const NetOptions& net) {
  return {"--heartbeat-ms", std::to_string(net.heartbeat_ms), "--connection-timeout-ms",
          std::to_string(net.connection_timeout_ms)};
}

// Waits for every child to exit, signalling the stragglers: SIGTERM after `grace`, SIGKILL
// five seconds later.
void stop_all(std::vector<std::unique_ptr<Child>>& children, double grace_s) {
  const auto term_at =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1e3));
  const auto kill_at = term_at + std::chrono::seconds(5);
  bool termed = false, killed = false;
  for (;;) {
    bool any = false;
    for (auto& c : children) {
      print_lines(*c);
      if (c->running()) any = true;
    }
    if (!any) break;
    if (!termed && Clock::now() > term_at) {
      for (auto& c : children)
        if (c->running()) {
          std::printf("[launch] %s (pid %d) still running: SIGTERM\n", c->label().c_str(),
                      c->pid());
          c->signal(SIGTERM);
        }
      termed = true;
    }
    if (!killed && Clock::now() > kill_at) {
      for (auto& c : children)
        if (c->running()) {
          std::printf("[launch] %s (pid %d) still running: SIGKILL\n", c->label().c_str(),
                      c->pid());
          c->signal(SIGKILL);
        }
      killed = true;
    }
    poll(nullptr, 0, 50);
  }
  for (auto& c : children) print_lines(*c);
}

// What the coordinator printed once it listened: the address nodes join and the run's id.
struct CoordinatorReady {
  std::string join, run_id;
};

// Echoes the coordinator's lines until it listens (it may name a secret file it made: the
// nodes get that secret). Empty `join` when it stopped, a signal came or 120 s passed.
CoordinatorReady wait_for_coordinator(Child& coord, std::string& secret,
                                      const std::atomic<bool>& stop_requested) {
  CoordinatorReady ready;
  const std::string marker = "coordinator listening on ";
  const std::string secret_marker = "cluster secret file ";
  const std::string run_marker = "run id ";
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (ready.join.empty()) {
    for (const auto& line : coord.read_lines()) {
      std::printf("[coord] %s\n", line.c_str());
      if (line.rfind(marker, 0) == 0) ready.join = line.substr(marker.size());
      if (line.rfind(run_marker, 0) == 0) ready.run_id = line.substr(run_marker.size());
      if (line.rfind(secret_marker, 0) == 0 && secret.empty()) {
        try {
          secret = transport::read_secret_file(line.substr(secret_marker.size()));
          setenv("SWARMRT_SECRET", secret.c_str(), 1);
        } catch (const std::exception& e) {
          spdlog::error("{}", e.what());
        }
      }
    }
    std::fflush(stdout);
    if (!ready.join.empty()) break;
    if (!coord.running() || stop_requested || Clock::now() > deadline) return ready;
    pollfd p{coord.fd(), POLLIN, 0};
    poll(&p, coord.fd() >= 0 ? 1 : 0, 100);
  }
  return ready;
}

// The nodes: --local N on this machine (the swarm's workers spread over them), or one per
// hostfile line over ssh (the secret on stdin, never on a command line).
void start_nodes(const LaunchArgs& args, const model::RunConfig& config,
                 const std::vector<HostEntry>& hosts, const std::string& exe,
                 const CoordinatorReady& ready, const std::string& secret,
                 std::vector<std::unique_ptr<Child>>& children) {
  const auto& join = ready.join;
  const auto& run_id = ready.run_id;
  const uint32_t total =
      static_cast<uint32_t>(config.swarm.stages * config.swarm.workers_per_stage);
  if (args.local > 0) {
    const uint32_t n = static_cast<uint32_t>(args.local);
    for (uint32_t k = 0; k < n; ++k) {
      // Spread the swarm's workers over the nodes; earlier nodes take the remainder.
      const uint32_t w = args.workers > 0 ? args.workers : total / n + (k < total % n ? 1 : 0);
      if (w == 0) continue;
      const std::string name = "node" + std::to_string(k + 1);
      std::vector<std::string> argv = {
          exe, "node", "--join", join, "--workers", std::to_string(w), "--name", name};
      if (!run_id.empty()) argv.insert(argv.end(), {"--run-id", run_id});
      for (const auto& f : net_flags(args.net)) argv.push_back(f);
      children.push_back(std::make_unique<Child>(name, argv));
    }
    return;
  }
  std::map<std::string, int> seen;
  for (const auto& h : hosts) {
    // A host listed twice runs two nodes; their prefixes tell them apart.
    const int nth = ++seen[h.host];
    const std::string label = nth == 1 ? h.host : h.host + "#" + std::to_string(nth);
    std::vector<std::string> argv = {"ssh", "-o", "BatchMode=yes"};
    for (const auto& o : args.ssh_options) argv.insert(argv.end(), {"-o", o});
    argv.insert(argv.end(), {"-p", std::to_string(h.port)});
    if (!h.identity.empty()) argv.insert(argv.end(), {"-i", h.identity});
    // "--" ends ssh's options: the destination is never read as one.
    argv.push_back("--");
    argv.push_back(h.user.empty() ? h.host : h.user + "@" + h.host);
    // The secret comes on stdin, so it shows in no process list on either machine.
    std::string remote = "read -r SWARMRT_SECRET; export SWARMRT_SECRET; exec " +
                         shell_quote(h.bin.empty() ? exe : h.bin) + " node --join " +
                         shell_quote(join) + " --workers " + std::to_string(h.workers) +
                         " --name " + shell_quote(label) + " --listen " + shell_quote(h.listen);
    if (!run_id.empty()) remote += " --run-id " + shell_quote(run_id);
    for (const auto& f : net_flags(args.net)) remote += " " + f;
    argv.push_back(remote);
    children.push_back(std::make_unique<Child>(label, argv, secret + "\n"));
  }
}

// Echoes every child's lines while a coordinator runs (the first `coords` children; with
// replicas the run goes on while any of them does); a signal, or no node left for --grace-s,
// stops the coordinators with SIGTERM.
void watch_children(const LaunchArgs& args, std::vector<std::unique_ptr<Child>>& children,
                    size_t coords, const std::atomic<bool>& stop_requested) {
  bool signalled = false;
  bool alone = false;
  Clock::time_point alone_since;
  auto any_coordinator = [&] {
    for (size_t i = 0; i < coords; ++i)
      if (children[i]->running()) return true;
    return false;
  };
  auto stop_coordinators = [&] {
    for (size_t i = 0; i < coords; ++i)
      if (children[i]->running()) children[i]->signal(SIGTERM);
    signalled = true;
  };
  while (any_coordinator()) {
    std::vector<pollfd> fds;
    for (auto& c : children)
      if (c->fd() >= 0) fds.push_back({c->fd(), POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    for (auto& c : children) print_lines(*c);
    if (stop_requested && !signalled) {
      std::printf("[launch] stopping: SIGTERM to the coordinator%s\n", coords > 1 ? "s" : "");
      stop_coordinators();
    }
    // Nodes stop when the run ends, just before the coordinator does; a coordinator left
    // without nodes for the grace period is stopped.
    bool node_left = false;
    for (size_t i = coords; i < children.size(); ++i) node_left |= children[i]->running();
    if (node_left) {
      alone = false;
    } else if (!alone) {
      alone = true;
      alone_since = Clock::now();
    } else if (!signalled &&
               Clock::now() - alone_since >
                   std::chrono::milliseconds(static_cast<int64_t>(args.grace_s * 1e3))) {
      std::printf("[launch] no node is left: stopping the coordinator%s\n", coords > 1 ? "s" : "");
      stop_coordinators();
    }
  }
}

int run_launch(const LaunchArgs& args) {
  if (args.from_env) return run_from_env(args);
  model::RunConfig config;
  std::vector<HostEntry> hosts;
  HostPort listen;
  try {
    config = model::load_config(args.config, args.overrides);
    listen = parse_host_port(args.listen, true);
    if (!args.hostfile.empty()) hosts = load_hostfile(args.hostfile);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
  if ((args.local > 0) == !hosts.empty()) {
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
  if (!hosts.empty() && listen.host == "0.0.0.0") {
    spdlog::error("--listen must name the address the hosts reach the coordinator on");
    return 2;
  }
  std::string secret;
  try {
    secret = resolve_secret(args.net);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
  // Children inherit the secret through the environment, never on a command line. Without
  // one, the coordinator makes one and names its file; the nodes get it from there.
  if (!secret.empty()) setenv("SWARMRT_SECRET", secret.c_str(), 1);
  const std::string exe = std::filesystem::canonical("/proc/self/exe").string();

  std::atomic<bool> stop_requested{false};
  StopSignals signals([&](int) { stop_requested = true; });
  // --coordinators K: K replicas of the coordinator on this machine, each on its own port,
  // electing their leader in a private etcd under the run directory.
  const size_t coords = static_cast<size_t>(args.coordinators);
  PrivateEtcd etcd;
  std::string run_id;
  std::vector<std::string> addresses;
  if (coords > 1) {
    const std::string out =
        args.out.empty() ? "runs/" + std::filesystem::path(args.config).stem().string() : args.out;
    try {
      // The replicas and the etcd they share need the secret before any of them starts: made
      // here when none was given, kept where a lone coordinator would keep it.
      if (secret.empty()) {
        std::filesystem::create_directories(out);
        // An existing run's secret is kept unless the run is started over: a launch refused
        // for lack of --resume or --overwrite must not change it.
        secret = run_dir_secret(out, !args.overwrite);
        setenv("SWARMRT_SECRET", secret.c_str(), 1);
        std::printf("[launch] cluster secret in %s (ctl and nodes: --secret-file)\n",
                    std::filesystem::absolute(std::filesystem::path(out) / "secret").c_str());
      }
      etcd = start_private_etcd((std::filesystem::path(out) / "etcd").string(), secret);
    } catch (const std::exception& e) {
      spdlog::error("--coordinators {}: {}", coords, e.what());
      return 1;
    }
    std::printf("[launch] etcd for the coordinators' leader election at %s (pid %d)\n",
                etcd.url.c_str(), etcd.child->pid());
    run_id = random_run_id();
    for (size_t k = 0; k < coords; ++k)
      addresses.push_back(
          listen.host + ":" +
          std::to_string(listen.port == 0 ? free_port(listen.host) : listen.port + k));
  }
  AtScopeExit stop_etcd{[&] {
    if (!etcd.child) return;
    etcd.child->signal(SIGTERM);
    for (int i = 0; i < 100 && etcd.child->running(); ++i) poll(nullptr, 0, 50);
    if (etcd.child->running()) etcd.child->signal(SIGKILL);
  }};
  auto coordinator = [&](size_t k) {
    std::vector<std::string> argv = {exe,        "coordinator",
                                     "--config", args.config,
                                     "--listen", coords > 1 ? addresses[k] : args.listen};
    for (const auto& o : args.overrides) argv.insert(argv.end(), {"--set", o});
    if (!args.out.empty()) argv.insert(argv.end(), {"--out", args.out});
    if (args.overwrite) argv.push_back("--overwrite");
    if (args.resume) argv.push_back("--resume");
    // Every replica serves the status page once it leads: it moves with the leader.
    if (!args.http.empty()) argv.insert(argv.end(), {"--http", args.http});
    if (coords > 1)
      argv.insert(argv.end(), {"--etcd", etcd.url, "--run-id", run_id, "--lease-ttl-s",
                               std::to_string(args.lease_ttl_s)});
    for (const auto& f : net_flags(args.net)) argv.push_back(f);
    return std::make_unique<Child>(k == 0 ? "coord" : "coord" + std::to_string(k + 1), argv);
  };

  std::vector<std::unique_ptr<Child>> children;
  try {
    children.push_back(coordinator(0));
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
    for (size_t k = 1; k < coords; ++k) children.push_back(coordinator(k));
    if (coords > 1) {
      ready.join.clear();
      for (const auto& a : addresses) ready.join += (ready.join.empty() ? "" : ",") + a;
    }
    start_nodes(args, config, hosts, exe, ready, secret, children);
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
  for (size_t i = coords; i < children.size(); ++i)
    if (auto code = children[i]->poll_exit(); code && *code != 0)
      std::printf("[launch] %s exited with %d\n", children[i]->label().c_str(), *code);
  int code = coord.poll_exit().value_or(1);
  std::printf("[launch] coordinator exited with %d\n", code);
  if (coords > 1) {
    // Whichever replica led last says how the run ended.
    for (size_t k = 1; k < coords; ++k)
      std::printf("[launch] %s exited with %d\n", children[k]->label().c_str(),
                  children[k]->poll_exit().value_or(1));
    const auto outcome = run_outcome(etcd, run_id);
    std::printf("[launch] run %s: %s\n", run_id.c_str(),
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

void add_launch_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<LaunchArgs>();
  auto* cmd = app.add_subcommand("launch", "start a coordinator and its nodes, here or over ssh");
  auto* local = cmd->add_option("--local", args->local, "run N nodes on this machine")
                    ->check(CLI::Range(1, 64));
  auto* hostfile =
      cmd->add_option("--hostfile", args->hostfile, "start one node per hostfile line over ssh")
          ->excludes(local);
  cmd->add_flag("--from-env", args->from_env,
                "be the coordinator (rank 0) or a node of a job that Slurm (srun), Kubernetes "
                "(an Indexed Job) or a torchrun-style launcher started, as its variables say")
      ->excludes(local)
      ->excludes(hostfile);
  add_config_options(*cmd, args->config, args->overrides);
  add_run_dir_options(*cmd, args->out, args->resume, args->overwrite);
  cmd->add_option("--workers,-w", args->workers,
                  "workers per node (default: --local spreads the swarm's evenly, --from-env "
                  "runs one per CPU or GPU of the task)");
  cmd->add_option("--port", args->env.port,
                  "--from-env: rank 0's port (default MASTER_PORT, under Slurm 20000 + "
                  "SLURM_JOB_ID % 20000)");
  cmd->add_option("--listen-addr", args->env.listen_addr,
                  "--from-env: the address other hosts reach this node on (default: its host "
                  "name's, SLURMD_NODENAME or POD_IP)");
  cmd->add_option("--stop-grace-s", args->env.stop_grace_s,
                  "--from-env: after SIGTERM or SIGUSR1 a node serves this long more, for the "
                  "coordinator's checkpoint and stop")
      ->capture_default_str();
  cmd->add_option("--signal-checkpoint-s", args->env.signal_checkpoint_s,
                  "--from-env: after SIGTERM or SIGUSR1 the coordinator waits this long for a "
                  "checkpoint before it stops the swarm")
      ->capture_default_str();
  cmd->add_option("--connect-timeout-s", args->env.connect_timeout_s,
                  "--from-env: a node keeps trying to reach rank 0 this long")
      ->capture_default_str();
  cmd->add_flag("--dry-run", args->env.dry_run,
                "--from-env: print this rank's place and the command it would run, and exit");
  cmd->add_option("--listen", args->listen, "the coordinator's HOST:PORT")->capture_default_str();
  cmd->add_option("--http", args->http,
                  "the coordinator's status page and /metrics on HOST:PORT (its token in "
                  "RUN_DIR/http_token)");
  cmd->add_option("--ssh-option", args->ssh_options, "an ssh -o option (repeatable)");
  cmd->add_option("--grace-s", args->grace_s,
                  "after the coordinator exits, wait this long for nodes before SIGTERM")
      ->capture_default_str();
  cmd->add_option("--coordinators", args->coordinators,
                  "--local: coordinator replicas; above 1 they elect a leader in a private etcd "
                  "(under the run directory) and a standby continues the run if the leader dies")
      ->capture_default_str()
      ->check(CLI::Range(1, 9));
  cmd->add_option("--lease-ttl-s", args->lease_ttl_s,
                  "with --coordinators above 1: the leader's lease (a standby takes over this "
                  "long after the leader stops renewing it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{600}));
  add_net_options(*cmd, args->net);
  cmd->callback([args, &exit_code] { exit_code = run_launch(*args); });
}

}  // namespace swarmrt::apps
